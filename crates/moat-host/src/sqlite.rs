//! What every store does to its SQLite connection (the pins, the consent decisions and the
//! audit trail share the state directory, and often a file).

use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode};

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
