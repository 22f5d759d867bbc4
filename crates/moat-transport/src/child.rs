//! A server we launch: a child process speaking MCP on its stdin and stdout.
//!
//! The child runs in its own process group, so signals reach everything it started. Its
//! stderr is forwarded line by line to `tracing`, and its last few lines are kept (a small
//! bounded tail), so that when it dies the end of the stream can say how it exited and what
//! it said last: a server that fails to start usually explains why on stderr. Shutdown
//! follows the spec: close its stdin, wait; SIGTERM the group, wait; SIGKILL the group. The
//! child is always reaped: a task owns it from spawn to exit, so no zombie outlives it, and
//! dropping the last handle kills the group if it is still running.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::watch;

use crate::connection::{Closer, Connection, Epilogue, Limits};

/// How to launch a server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ChildConfig {
    /// The program to run (looked up on `PATH` if it has no slash).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Environment variables to set.
    pub env: Vec<(OsString, OsString)>,
    /// Start from an empty environment (then only `env`, plus `PATH` and `HOME`, are passed).
    pub clear_env: bool,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// A short name for logs; defaults to the program's file name.
    pub name: String,
    /// Framing limits.
    pub limits: Limits,
    /// How long to wait for an exit after closing stdin, and again after SIGTERM.
    pub grace: Duration,
}

impl ChildConfig {
    /// Run `program` with `args`.
    pub fn new<I, S>(program: impl Into<OsString>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let program = program.into();
        let name = std::path::Path::new(&program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "server".to_owned());
        ChildConfig {
            program,
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            clear_env: false,
            cwd: None,
            name,
            limits: Limits::default(),
            grace: Duration::from_secs(2),
        }
    }

    /// Set an environment variable.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Set the shutdown grace period.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Set the framing limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

/// Lines of a child's stderr kept for [`ChildProcess::stderr_tail`]: the last ones only.
const TAIL_LINES: usize = 20;
/// Bytes kept of one stderr line; the rest of a longer line is dropped.
const TAIL_LINE_BYTES: usize = 500;
/// Bytes kept of the whole tail. A gateway runs many servers, each with a tail, so the
/// worst case stays at a few KiB per server however much they write.
const TAIL_TOTAL_BYTES: usize = 4 * 1024;
/// Bytes of one stderr line forwarded to `tracing`; a longer line is cut, so a child that
/// writes without newlines cannot make us buffer without end.
const LOG_LINE_BYTES: usize = 16 * 1024;
/// How long the end of the stream waits for the exit status and the rest of stderr: a
/// child that closed stdout is normally exiting, and its last words are in flight.
const EPILOGUE_WAIT: Duration = Duration::from_millis(500);

/// The last lines a child wrote to stderr, bounded by count and by bytes.
#[derive(Debug, Default)]
struct StderrTail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl StderrTail {
    /// Keep `line` (already cut and cleaned), dropping the oldest lines past the bounds.
    fn push(&mut self, line: String) {
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > TAIL_LINES || self.bytes > TAIL_TOTAL_BYTES {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len(),
                None => break,
            }
        }
    }
}

/// `line` as it is kept in the tail: control characters escaped, then cut to at most
/// [`TAIL_LINE_BYTES`] at a character boundary and marked with `…`. The tail ends up in
/// error messages printed on terminals: a server must not be able to send escape sequences
/// there.
fn tail_line(line: &str) -> String {
    let mut kept = String::with_capacity(line.len().min(TAIL_LINE_BYTES) + '…'.len_utf8());
    let mut plain = [0u8; 4];
    let mut escaped = String::new();
    for c in line.chars() {
        let piece: &str = if c.is_control() && c != '\t' {
            escaped.clear();
            escaped.extend(c.escape_default());
            &escaped
        } else {
            c.encode_utf8(&mut plain)
        };
        if kept.len() + piece.len() > TAIL_LINE_BYTES {
            kept.push('…');
            break;
        }
        kept.push_str(piece);
    }
    kept
}

/// Read `stderr` to its end, one line at a time: each line goes to `tracing` and into `tail`.
/// Never stops early (invalid UTF-8 is replaced, overlong lines are cut), because a child
/// whose stderr is no longer drained blocks once the pipe is full.
async fn drain_stderr<R: AsyncBufRead + Unpin>(
    mut stderr: R,
    name: &str,
    tail: &Mutex<StderrTail>,
) {
    let mut line: Vec<u8> = Vec::new();
    let mut cut = 0usize; // bytes of the current line beyond LOG_LINE_BYTES, dropped
    loop {
        let (used, ended) = match stderr.fill_buf().await {
            Ok([]) => (0, true),
            Ok(buf) => match memchr::memchr(b'\n', buf) {
                Some(i) => {
                    take_bounded(&mut line, &mut cut, &buf[..i]);
                    (i + 1, true)
                }
                None => {
                    take_bounded(&mut line, &mut cut, buf);
                    (buf.len(), false)
                }
            },
            Err(e) => {
                tracing::debug!(server = %name, error = %e, "reading the server's stderr failed");
                (0, true)
            }
        };
        stderr.consume(used);
        if ended && (used > 0 || !line.is_empty() || cut > 0) {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let text = String::from_utf8_lossy(&line);
            if cut > 0 {
                tracing::info!(target: "moat::server_stderr", server = %name, "{text}… ({cut} more bytes)");
            } else {
                tracing::info!(target: "moat::server_stderr", server = %name, "{text}");
            }
            // Blank lines say nothing and would crowd out the ones that do.
            if !text.trim().is_empty() {
                let kept = tail_line(&text);
                tail.lock().unwrap_or_else(|e| e.into_inner()).push(kept);
            }
            line.clear();
            cut = 0;
            // One long line must not pin its buffer for the child's lifetime.
            if line.capacity() > 4 * 1024 {
                line.shrink_to(1024);
            }
        }
        if used == 0 && ended {
            return; // end of stream (or a read error, which ends it too)
        }
    }
}

/// Append `bytes` to `line` up to [`LOG_LINE_BYTES`], counting what does not fit in `cut`.
fn take_bounded(line: &mut Vec<u8>, cut: &mut usize, bytes: &[u8]) {
    let room = LOG_LINE_BYTES.saturating_sub(line.len());
    let take = bytes.len().min(room);
    line.extend_from_slice(&bytes[..take]);
    *cut += bytes.len() - take;
}

/// How a child's stream ended, for [`Inbound::Ended`](crate::Inbound::Ended): its exit
/// status if known, then its last stderr lines, each on a line of its own, indented.
fn ending(name: &str, status: Option<ExitStatus>, tail: &[String]) -> String {
    let mut why = match status {
        Some(s) => format!("server process {name:?} exited ({s})"),
        None => format!("server process {name:?} closed its stdout"),
    };
    if !tail.is_empty() {
        why.push_str("; its last stderr lines:");
        for line in tail {
            why.push_str("\n  ");
            why.push_str(line);
        }
    }
    why
}

struct ChildInner {
    pid: Option<Pid>,
    name: String,
    exit: watch::Receiver<Option<ExitStatus>>,
    stderr_tail: Arc<Mutex<StderrTail>>,
    /// Becomes true when the stderr reader has reached the end of the stream.
    stderr_done: watch::Receiver<bool>,
}

impl ChildInner {
    fn signal_group(&self, signal: Signal) {
        if self.exit.borrow().is_some() {
            return;
        }
        if let Some(pid) = self.pid {
            // The group id is the child's pid: it was made a group leader at spawn.
            let _ = kill_process_group(pid, signal);
        }
    }

    fn stderr_tail(&self) -> Vec<String> {
        let tail = self.stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
        tail.lines.iter().cloned().collect()
    }

    /// Wait up to `limit` for both the exit status and the end of stderr, then say how the
    /// child ended.
    async fn ending(&self, limit: Duration) -> String {
        let mut exit = self.exit.clone();
        let mut stderr_done = self.stderr_done.clone();
        let _ = tokio::time::timeout(limit, async {
            // An error means the sender is gone: nothing more will come, so stop waiting.
            let _ = exit.wait_for(Option::is_some).await;
            let _ = stderr_done.wait_for(|done| *done).await;
        })
        .await;
        let status = *self.exit.borrow();
        ending(&self.name, status, &self.stderr_tail())
    }

    async fn wait_for(&self, limit: Duration) -> Option<ExitStatus> {
        let mut exit = self.exit.clone();
        let waited = tokio::time::timeout(limit, exit.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(status)) => *status,
            _ => *self.exit.borrow(),
        }
    }
}

impl Drop for ChildInner {
    fn drop(&mut self) {
        self.signal_group(Signal::KILL);
    }
}

/// A handle on a launched server process.
#[derive(Clone)]
pub struct ChildProcess {
    inner: Arc<ChildInner>,
    grace: Duration,
}

impl std::fmt::Debug for ChildProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildProcess")
            .field("name", &self.inner.name)
            .field("pid", &self.id())
            .finish()
    }
}

impl ChildProcess {
    /// Launch the server and connect to its stdin/stdout. Must be called inside a tokio runtime.
    pub fn spawn(config: ChildConfig) -> std::io::Result<(Connection, ChildProcess)> {
        let mut cmd = Command::new(&config.program);
        cmd.args(&config.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if config.clear_env {
            cmd.env_clear();
            for key in ["PATH", "HOME"] {
                if let Some(v) = std::env::var_os(key) {
                    cmd.env(key, v);
                }
            }
        }
        cmd.envs(config.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &config.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd.spawn().map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "could not start {:?}: {e}",
                    config.program.to_string_lossy()
                ),
            )
        })?;
        let pid = child.id().and_then(|id| Pid::from_raw(id as i32));
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(std::io::Error::other("child process has no pipes"));
        };

        let (exit_tx, exit_rx) = watch::channel(None);
        let name = config.name.clone();
        tokio::spawn(async move {
            // Owning the child until it exits is what guarantees it is reaped.
            let status = child.wait().await;
            match &status {
                Ok(s) => tracing::debug!(server = %name, status = %s, "server process exited"),
                Err(e) => {
                    tracing::warn!(server = %name, error = %e, "waiting for server process failed")
                }
            }
            let _ = exit_tx.send(status.ok());
        });

        let name = config.name.clone();
        let stderr_tail = Arc::new(Mutex::new(StderrTail::default()));
        let (stderr_done_tx, stderr_done) = watch::channel(false);
        let tail = stderr_tail.clone();
        tokio::spawn(async move {
            // A small buffer: stderr is for the occasional log line, and every server has one.
            drain_stderr(BufReader::with_capacity(1024, stderr), &name, &tail).await;
            let _ = stderr_done_tx.send(true);
        });

        let inner = Arc::new(ChildInner {
            pid,
            name: config.name.clone(),
            exit: exit_rx,
            stderr_tail,
            stderr_done,
        });
        let handle = ChildProcess {
            inner: inner.clone(),
            grace: config.grace,
        };

        let for_epilogue = inner.clone();
        let epilogue: Epilogue = Box::pin(async move {
            // stdout closed: give the exit status and the last of stderr a moment to arrive
            // (one budget for both), then say what happened.
            Some(for_epilogue.ending(EPILOGUE_WAIT).await)
        });
        let mut conn = Connection::from_lines_with_epilogue(
            // One per server a gateway runs: 16 KiB still takes in a burst of a hundred
            // small messages per read, and long lines grow past it anyway.
            BufReader::with_capacity(16 * 1024, stdout),
            stdin,
            config.limits,
            Some(epilogue),
        );
        let close_writer = conn.closer.take();
        let for_close = handle.clone();
        let closer: Closer = Box::new(move || {
            Box::pin(async move {
                if let Some(close_writer) = close_writer {
                    close_writer().await;
                }
                for_close.terminate().await;
            })
        });
        conn.closer = Some(closer);
        Ok((conn, handle))
    }

    /// The child's process id, while it is known.
    pub fn id(&self) -> Option<u32> {
        self.inner.pid.map(|p| p.as_raw_nonzero().get() as u32)
    }

    /// The exit status, if it has exited.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        *self.inner.exit.borrow()
    }

    /// The last lines the child wrote to stderr, oldest first: at most 20 lines, each cut
    /// at 500 bytes (marked with `…`) with control characters escaped, and at most 4 KiB in
    /// all. Every line is also logged to `tracing` (target `moat::server_stderr`) as it
    /// arrives. A server that fails usually says why here; once the child has exited and its
    /// stderr is drained, this is what it said last.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.inner.stderr_tail()
    }

    /// How the child ended, in the words the end of its connection's stream uses (the
    /// reason an SDK reports for the closed connection): `server process "NAME" exited
    /// (STATUS)`, or `... closed its stdout` while it still runs, followed by
    /// `; its last stderr lines:` and each line of [`stderr_tail`](Self::stderr_tail) on a
    /// line of its own, indented by two spaces, when it wrote any. Waits up to `within` for
    /// the exit status and for the end of stderr first.
    pub async fn end_reason(&self, within: Duration) -> String {
        self.inner.ending(within).await
    }

    /// Wait for the child to exit.
    pub async fn wait(&self) -> Option<ExitStatus> {
        let mut exit = self.inner.exit.clone();
        exit.wait_for(Option::is_some).await.ok().and_then(|s| *s)
    }

    /// The escalation after stdin is closed: wait, SIGTERM the group, wait, SIGKILL the group,
    /// then wait for the reaper. Returns the exit status.
    pub async fn terminate(&self) -> Option<ExitStatus> {
        if let Some(s) = self.inner.wait_for(self.grace).await {
            return Some(s);
        }
        tracing::debug!(server = %self.inner.name, "server still running after stdin closed; sending SIGTERM");
        self.inner.signal_group(Signal::TERM);
        if let Some(s) = self.inner.wait_for(self.grace).await {
            return Some(s);
        }
        tracing::warn!(server = %self.inner.name, "server ignored SIGTERM; sending SIGKILL");
        self.inner.signal_group(Signal::KILL);
        self.inner.wait_for(Duration::from_secs(5)).await
    }

    /// Kill the process group now.
    pub fn kill(&self) {
        self.inner.signal_group(Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_within_its_bounds() {
        let mut tail = StderrTail::default();
        for i in 0..100 {
            tail.push(format!("line {i}"));
        }
        assert_eq!(tail.lines.len(), TAIL_LINES);
        assert_eq!(tail.lines.front().map(String::as_str), Some("line 80"));
        assert_eq!(tail.lines.back().map(String::as_str), Some("line 99"));

        // Long lines: the byte bound drops old lines before the count bound does.
        for i in 0..30 {
            tail.push(tail_line(&format!("{i:03}{}", "x".repeat(2000))));
        }
        assert!(tail.bytes <= TAIL_TOTAL_BYTES, "{} bytes kept", tail.bytes);
        assert_eq!(
            tail.bytes,
            tail.lines.iter().map(String::len).sum::<usize>()
        );
        assert!(tail.lines.len() < TAIL_LINES);
        assert!(tail.lines.back().is_some_and(|l| l.starts_with("029")));
    }

    #[test]
    fn a_kept_line_is_cut_and_has_no_control_characters() {
        let long = "é".repeat(400); // 800 bytes, two per character
        let kept = tail_line(&long);
        assert!(
            kept.len() <= TAIL_LINE_BYTES + '…'.len_utf8(),
            "{}",
            kept.len()
        );
        assert!(kept.ends_with('…'));
        assert!(kept.trim_end_matches('…').chars().all(|c| c == 'é'));

        let kept = tail_line("\u{1b}[31mred\u{1b}[0m\tand\rback");
        assert!(
            !kept.chars().any(|c| c.is_control() && c != '\t'),
            "{kept:?}"
        );
        assert_eq!(kept, "\\u{1b}[31mred\\u{1b}[0m\tand\\rback");

        // Escapes count towards the bound too.
        let kept = tail_line(&"\u{7}".repeat(400));
        assert!(
            kept.len() <= TAIL_LINE_BYTES + '…'.len_utf8(),
            "{}",
            kept.len()
        );
        assert_eq!(tail_line("short"), "short");
    }

    #[test]
    fn the_ending_names_the_status_then_the_last_lines() {
        assert_eq!(
            ending("srv", None, &[]),
            "server process \"srv\" closed its stdout"
        );
        assert_eq!(
            ending("srv", None, &["a".into(), "b".into()]),
            "server process \"srv\" closed its stdout; its last stderr lines:\n  a\n  b"
        );
    }

    #[tokio::test]
    async fn stderr_is_drained_to_the_end_whatever_it_holds() {
        // Invalid UTF-8, CRLF, a line far past the log bound, and no final newline.
        let mut input = b"\xff\xfe bad\r\nok\n".to_vec();
        input.extend(std::iter::repeat_n(b'z', LOG_LINE_BYTES * 3));
        input.extend(b"\n\n   \nlast words");
        let tail = Mutex::new(StderrTail::default());
        drain_stderr(&input[..], "test", &tail).await;
        let tail = tail.into_inner().unwrap_or_else(|e| e.into_inner());
        let lines: Vec<&str> = tail.lines.iter().map(String::as_str).collect();
        assert_eq!(lines.len(), 4, "{lines:?}"); // blank lines are not kept
        assert_eq!(lines[0], "\u{fffd}\u{fffd} bad");
        assert_eq!(lines[1], "ok");
        assert!(lines[2].starts_with("zzz") && lines[2].ends_with('…'));
        assert!(lines[2].len() <= TAIL_LINE_BYTES + '…'.len_utf8());
        assert_eq!(lines[3], "last words");
    }
}
