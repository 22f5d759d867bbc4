//! Reloading the configuration while the host runs.
//!
//! [`watch`] yields a freshly loaded [`Config`] when the process gets `SIGHUP`, or when the
//! content of the configuration file (or of a file it imports) changes. Files are polled
//! (size, modification time, inode) rather than watched with inotify: that works the same
//! for editors that rewrite a file in place and for those that write a new file and rename
//! it over the old one, and for files on network mounts. A change is acted on once the file
//! has held still for one poll, so a half-written file is not loaded; a file that is missing
//! (mid-rename, or deleted) is waited for, the running configuration staying in force. A
//! change of timestamps alone (`touch`) is recognised by the content hash and yields nothing.
//!
//! [`diff_servers`] says which servers a reload added, removed or changed, so the host
//! restarts only those.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use crate::config::{Config, ConfigError, ServerConfig, process_env};

/// How often [`watch`] polls the files.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Watches `path` (see the module docs); the stream ends when the receiver is dropped.
/// Must be called inside a tokio runtime.
pub fn watch(path: PathBuf) -> mpsc::Receiver<Result<Config, ConfigError>> {
    watch_every(path, POLL_INTERVAL)
}

/// [`watch`], polling every `interval`.
pub fn watch_every(
    path: PathBuf,
    interval: Duration,
) -> mpsc::Receiver<Result<Config, ConfigError>> {
    let (tx, rx) = mpsc::channel(4);
    // Registered before returning, so a SIGHUP sent right after cannot hit the default
    // action (which would end the process).
    let hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP; reloading on file changes only");
            None
        }
    };
    let imports = Config::load(&path).map(|c| c.imports).unwrap_or_default();
    let files = Files::new(&path, imports);
    tokio::spawn(run(path, interval, files, hangup, tx));
    rx
}

async fn run(
    path: PathBuf,
    interval: Duration,
    mut files: Files,
    mut hangup: Option<tokio::signal::unix::Signal>,
    tx: mpsc::Sender<Result<Config, ConfigError>>,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let forced = tokio::select! {
            _ = tick.tick() => false,
            Some(()) = recv(&mut hangup) => true,
            () = tx.closed() => return,
        };
        if forced {
            tracing::info!(path = %path.display(), "SIGHUP: reloading the configuration");
            files.settle();
        } else if !files.poll() {
            continue;
        }
        let result = load(&path);
        if let Ok(config) = &result {
            files = Files::new(&path, config.imports.clone());
        }
        if tx.send(result).await.is_err() {
            return;
        }
    }
}

async fn recv(hangup: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match hangup {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

fn load(path: &Path) -> Result<Config, ConfigError> {
    Config::load_with(path, &process_env)
}

/// What the watched files looked like at the last poll.
type Stat = Option<(SystemTime, u64, u64)>;

struct Files {
    paths: Vec<PathBuf>,
    /// At the last poll.
    stats: Vec<Stat>,
    /// Of the content last loaded (or present at the start).
    hash: [u8; 32],
    /// The stats moved since the content was last hashed.
    pending: bool,
}

impl Files {
    fn new(main: &Path, imports: Vec<PathBuf>) -> Files {
        let mut paths = vec![main.to_path_buf()];
        paths.extend(imports);
        let mut files = Files {
            stats: Vec::new(),
            hash: [0; 32],
            paths,
            pending: false,
        };
        files.settle();
        files
    }

    /// Takes the files as they are now as the baseline.
    fn settle(&mut self) {
        self.stats = self.stat();
        self.hash = self.content_hash();
        self.pending = false;
    }

    fn stat(&self) -> Vec<Stat> {
        self.paths.iter().map(|p| stat(p)).collect()
    }

    /// Whether the content changed and has held still since the last poll.
    fn poll(&mut self) -> bool {
        let now = self.stat();
        if now != self.stats {
            self.stats = now;
            self.pending = true;
            return false;
        }
        if !self.pending || now.iter().any(Option::is_none) {
            return false;
        }
        self.pending = false;
        let hash = self.content_hash();
        if hash == self.hash {
            return false;
        }
        self.hash = hash;
        true
    }

    fn content_hash(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        for p in &self.paths {
            match std::fs::read(p) {
                Ok(bytes) => {
                    h.update((bytes.len() as u64).to_le_bytes());
                    h.update(&bytes);
                }
                Err(_) => h.update(u64::MAX.to_le_bytes()),
            }
        }
        h.finalize().into()
    }
}

fn stat(path: &Path) -> Stat {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len(), m.ino()))
}

/// Which servers a reload added, removed or changed (by name; `changed` means any setting
/// differs, sandbox and labels included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServersDiff {
    /// In the new configuration only, in its order.
    pub added: Vec<String>,
    /// In the old configuration only, in its order.
    pub removed: Vec<String>,
    /// In both, with different settings, in the new order.
    pub changed: Vec<String>,
}

impl ServersDiff {
    /// Nothing to restart.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Compares two server lists by name.
pub fn diff_servers(old: &[ServerConfig], new: &[ServerConfig]) -> ServersDiff {
    let find = |list: &[ServerConfig], name: &str| list.iter().position(|s| s.name == name);
    let mut diff = ServersDiff::default();
    for server in new {
        match find(old, &server.name) {
            None => diff.added.push(server.name.clone()),
            Some(i) if old[i] != *server => diff.changed.push(server.name.clone()),
            Some(_) => {}
        }
    }
    for server in old {
        if find(new, &server.name).is_none() {
            diff.removed.push(server.name.clone());
        }
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_touch_is_not_a_change_and_a_rewrite_is_seen_once_still() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("moat.toml");
        std::fs::write(&path, "[servers.a]\ncommand = \"a\"\n").unwrap();
        let mut files = Files::new(&path, Vec::new());
        assert!(!files.poll());

        // Same content, new timestamps: noticed, hashed, ignored.
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(SystemTime::now() + Duration::from_secs(5))
            .unwrap();
        assert!(!files.poll(), "the stat moved: wait one poll");
        assert!(!files.poll(), "same content");

        // New content by rename: acted on once it holds still.
        let tmp = dir.path().join("moat.toml.tmp");
        std::fs::write(&tmp, "[servers.b]\ncommand = \"b\"\n").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(!files.poll());
        assert!(files.poll());
        assert!(!files.poll());

        // Missing: waited for.
        std::fs::remove_file(&path).unwrap();
        assert!(!files.poll());
        assert!(!files.poll());
        std::fs::write(&path, "[servers.c]\ncommand = \"c\"\n").unwrap();
        assert!(!files.poll());
        assert!(files.poll());
    }
}
