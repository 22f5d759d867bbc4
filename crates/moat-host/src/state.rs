//! Where the host keeps what outlives it: the audit trail, pins and lasting consent
//! decisions. The configuration's `state_dir`, else `$XDG_STATE_HOME/moat`, else
//! `~/.local/state/moat`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode};

use crate::HostError;

/// The state directory for a configuration's `state_dir` setting.
pub fn state_dir(configured: Option<&Path>) -> Result<PathBuf, HostError> {
    if let Some(dir) = configured {
        return Ok(dir.to_path_buf());
    }
    let from_env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(state) = from_env("XDG_STATE_HOME") {
        return Ok(state.join("moat"));
    }
    if let Some(home) = from_env("HOME") {
        return Ok(home.join(".local/state/moat"));
    }
    Err(HostError::NoStateDir)
}

/// The audit store in `dir`.
pub fn audit_path(dir: &Path) -> PathBuf {
    dir.join("audit.db")
}

/// The pins and lasting consent decisions in `dir`.
pub fn pins_path(dir: &Path) -> PathBuf {
    dir.join("pins.db")
}

/// Put a store's connection in WAL mode; the journal mode SQLite ended up in.
///
/// Hosts that open one new store at the same moment (two clients each starting a gateway
/// on one configuration) race to switch it, and the loser's switch fails with
/// `SQLITE_BUSY` at once: SQLite does not call the busy handler for that lock. So the
/// switch is tried again for a while, as the busy timeout would have.
pub(crate) fn use_wal(conn: &Connection) -> rusqlite::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}
