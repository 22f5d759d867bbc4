//! One HTTP download into a `.part` file, resumed with a Range request from where an
//! earlier attempt stopped, with a progress line on a terminal.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, anyhow};
use reqwest::StatusCode;
use reqwest::header::RANGE;

/// Attempts at one file when the connection drops mid-way (each resumes the last).
const ATTEMPTS: usize = 3;

/// The base URL in `var` (a test or mirror sets it), else `default`; no trailing `/`.
pub(crate) fn base_url(var: &str, default: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| default.to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// The HTTP client: redirects followed (the hub sends large files to its CDN), no limit
/// on the whole download, only on silence.
pub(crate) fn client() -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .read_timeout(Duration::from_secs(60))
        .user_agent(concat!("moat/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("could not set up an HTTP client")
}

/// A request that never reached the server, with what to do about it.
pub(crate) fn unreachable(url: &str, e: &reqwest::Error, next: &str) -> anyhow::Error {
    // reqwest's own message repeats the URL; the innermost cause says what happened.
    let mut cause: &dyn std::error::Error = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    anyhow!("could not reach {url} ({cause}).\n{next}")
}

/// Downloads `url` into `part`, continuing the bytes already there. `size`, when known,
/// is the whole file's: a part already that long is not requested again.
pub(crate) async fn to_part(
    client: &reqwest::Client,
    url: &str,
    part: &Path,
    size: Option<u64>,
    label: &str,
    progress: bool,
    next: &str,
) -> anyhow::Result<()> {
    let mut last_err = None;
    for _ in 0..ATTEMPTS {
        match attempt(client, url, part, size, label, progress, next).await {
            Ok(()) => return Ok(()),
            Err(Attempt::Fatal(e)) => return Err(e),
            Err(Attempt::Interrupted(e)) => last_err = Some(e),
        }
    }
    Err(last_err
        .unwrap_or_else(|| anyhow!("download failed"))
        .context(format!(
            "downloading {url} was interrupted {ATTEMPTS} times; run the command again to \
             resume from {}",
            part.display()
        )))
}

enum Attempt {
    /// The connection dropped after some bytes: worth resuming.
    Interrupted(anyhow::Error),
    Fatal(anyhow::Error),
}

async fn attempt(
    client: &reqwest::Client,
    url: &str,
    part: &Path,
    size: Option<u64>,
    label: &str,
    progress: bool,
    next: &str,
) -> Result<(), Attempt> {
    let fatal = |e: anyhow::Error| Attempt::Fatal(e);
    let mut have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
    if let Some(size) = size {
        if have == size {
            return Ok(());
        }
        if have > size {
            have = 0;
        }
    }
    let mut request = client.get(url);
    if have > 0 {
        request = request.header(RANGE, format!("bytes={have}-"));
    }
    let mut response = request
        .send()
        .await
        .map_err(|e| fatal(unreachable(url, &e, next)))?;
    let status = response.status();
    let append = match status {
        StatusCode::PARTIAL_CONTENT => true,
        // A server that ignores Range sends the whole file again.
        StatusCode::OK => false,
        // The part is already whole (or longer): the hash check decides.
        StatusCode::RANGE_NOT_SATISFIABLE if have > 0 => return Ok(()),
        _ => {
            return Err(fatal(anyhow!("{url} answered {status}.\n{next}")));
        }
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(part)
        .with_context(|| format!("writing {}", part.display()))
        .map_err(fatal)?;
    let start = if append { have } else { 0 };
    let total = response.content_length().map(|n| n + start).or(size);
    let mut bar = Progress::new(label, total, start, progress);
    loop {
        match response.chunk().await {
            Ok(Some(bytes)) => {
                file.write_all(&bytes)
                    .with_context(|| format!("writing {}", part.display()))
                    .map_err(fatal)?;
                bar.advance(bytes.len() as u64);
            }
            Ok(None) => break,
            Err(e) => {
                bar.finish();
                return Err(Attempt::Interrupted(anyhow!("{url}: {e}")));
            }
        }
    }
    bar.finish();
    file.flush()
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", part.display()))
        .map_err(fatal)
}

/// A one-line progress display on stderr, drawn only on a terminal.
struct Progress {
    label: String,
    total: Option<u64>,
    done: u64,
    on: bool,
    shown: Option<u64>,
}

impl Progress {
    fn new(label: &str, total: Option<u64>, done: u64, on: bool) -> Progress {
        let on = on && std::io::stderr().is_terminal();
        Progress {
            label: label.to_owned(),
            total,
            done,
            on,
            shown: None,
        }
    }

    fn advance(&mut self, n: u64) {
        self.done += n;
        if !self.on {
            return;
        }
        // Redrawn per percent (or per MiB when the size is unknown), not per chunk.
        let step = match self.total {
            Some(t) if t > 0 => self.done * 100 / t,
            _ => self.done >> 20,
        };
        if self.shown == Some(step) {
            return;
        }
        self.shown = Some(step);
        let mib = |n: u64| n as f64 / f64::from(1u32 << 20);
        let line = match self.total {
            Some(t) if t > 0 => {
                let width = 30u64;
                let filled = (self.done.min(t) * width / t) as usize;
                format!(
                    "  {:<18} [{}{}] {:>6.1}/{:.1} MiB {:>3}%",
                    self.label,
                    "#".repeat(filled),
                    " ".repeat(width as usize - filled),
                    mib(self.done),
                    mib(t),
                    step
                )
            }
            _ => format!("  {:<18} {:.1} MiB", self.label, mib(self.done)),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}");
        let _ = err.flush();
    }

    fn finish(&mut self) {
        if self.on && self.shown.is_some() {
            eprintln!();
        }
        self.shown = None;
    }
}
