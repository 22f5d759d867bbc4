//! The audit trail: every tool call the gateway handles, appended to an embedded SQLite store.
//!
//! The gateway builds an [`AuditRecord`] per call and hands it to [`AuditLog::record`], which only
//! queues it: a dedicated writer thread commits whatever is queued in one small transaction, so
//! the hot path never waits for the disk. [`AuditLog::flush`] waits until everything handed over
//! is committed. The store is a table named `audit` in a SQLite file (WAL, `synchronous=NORMAL`)
//! that other modules may share; `moat audit` reads it back through [`read_only`].
//!
//! The records form a hash chain ([`chain`]: the canonical encoding, hashing and verifying,
//! independent of SQLite), optionally with signed heads ([`key`]); [`AuditReader::verify`]
//! checks it and [`AuditReader::export`] writes it out.
//!
//! ```no_run
//! use moat_host::audit::{AuditLog, AuditQuery, AuditRecord};
//! # fn main() -> Result<(), moat_host::audit::AuditError> {
//! let log = AuditLog::open("/tmp/moat/state.db".as_ref())?;
//! log.record(AuditRecord { tool: "read_file".into(), ..AuditRecord::default() });
//! log.flush()?;
//! let recent = log.query(&AuditQuery { limit: Some(10), ..AuditQuery::default() })?;
//! # Ok(()) }
//! ```

pub mod chain;
mod error;
mod format;
pub mod key;
mod record;
mod redact;
pub mod shared;
mod store;
mod verdict;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::config::duration::{DurationError, parse_duration};
pub use error::AuditError;
pub use format::format_table;
pub use record::{AuditQuery, AuditRecord, ms_ago, now_ms};
pub use redact::{REDACTED, Redactor, args_digest, redact};
pub use store::AuditReader;
pub use verdict::{Decision, Outcome, Refusal};

pub use crate::config::audit::{AuditConfig, DEFAULT_FILE_NAME, DEFAULT_SIGN_EVERY};

/// The audit log of a running host: cheap to clone, `Send + Sync`.
///
/// Dropping the last clone lets the writer commit what is queued and waits for it.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Sink>,
}

/// Where records go: the SQLite file's writer thread, or the shared store's.
enum Sink {
    Sqlite(writer::Writer),
    Shared(shared::SharedWriter),
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("AuditLog");
        match &*self.inner {
            Sink::Sqlite(w) => d.field("path", &w.path()),
            Sink::Shared(w) => d.field("store", &w.url()),
        };
        d.finish_non_exhaustive()
    }
}

impl AuditLog {
    /// Opens (creating it and its parent directories if needed) the store at `path`.
    pub fn open(path: &Path) -> Result<AuditLog, AuditError> {
        let conn = store::open_writable(path)?;
        Ok(AuditLog::start(conn, path.to_path_buf(), None))
    }

    /// Opens the store at `path` like [`open`](Self::open), and signs the chain's head with
    /// `key` once `every` records follow the last signed head, a minute after it when any
    /// do, and at each [`flush`](Self::flush) and when the log is dropped.
    pub fn open_signing(
        path: &Path,
        key: ed25519_dalek::SigningKey,
        every: u64,
    ) -> Result<AuditLog, AuditError> {
        let conn = store::open_writable(path)?;
        let signer = store::Signer {
            key,
            every: i64::try_from(every.max(1)).unwrap_or(i64::MAX),
        };
        Ok(AuditLog::start(conn, path.to_path_buf(), Some(signer)))
    }

    /// A store that lives in memory only, gone when the last clone is dropped (for tests).
    pub fn open_in_memory() -> Result<AuditLog, AuditError> {
        let conn = store::open_in_memory()?;
        Ok(AuditLog::start(conn, PathBuf::from(":memory:"), None))
    }

    /// The log a configuration asks for: `None` when auditing is disabled.
    pub fn from_config(
        config: &AuditConfig,
        state_dir: &Path,
    ) -> Result<Option<AuditLog>, AuditError> {
        if !config.enabled {
            return Ok(None);
        }
        let path = config.store_path(state_dir);
        if config.sign {
            let key = key::load_or_create(&key::key_path(state_dir))?;
            return AuditLog::open_signing(&path, key, config.sign_every).map(Some);
        }
        AuditLog::open(&path).map(Some)
    }

    /// The log of the shared store `pg` (see [`shared`]): every gateway on it writes one
    /// chain.
    pub fn open_shared(pg: crate::store::postgres::Postgres) -> AuditLog {
        AuditLog {
            inner: Arc::new(Sink::Shared(shared::SharedWriter::spawn(pg, None))),
        }
    }

    /// The log of the shared store `pg`, signing the chain's head with `key` as
    /// [`open_signing`](Self::open_signing) does (each gateway with its own key).
    pub fn open_shared_signing(
        pg: crate::store::postgres::Postgres,
        key: ed25519_dalek::SigningKey,
        every: u64,
    ) -> AuditLog {
        let signer = store::Signer {
            key,
            every: i64::try_from(every.max(1)).unwrap_or(i64::MAX),
        };
        AuditLog {
            inner: Arc::new(Sink::Shared(shared::SharedWriter::spawn(pg, Some(signer)))),
        }
    }

    fn start(conn: rusqlite::Connection, path: PathBuf, signer: Option<store::Signer>) -> AuditLog {
        AuditLog {
            inner: Arc::new(Sink::Sqlite(writer::Writer::spawn(conn, path, signer))),
        }
    }

    /// Queues a record for the writer thread; never waits for the disk.
    ///
    /// A record that cannot be written is reported by `tracing::warn!` and by the next [`flush`](Self::flush).
    pub fn record(&self, record: AuditRecord) {
        match &*self.inner {
            Sink::Sqlite(w) => w.record(record),
            Sink::Shared(w) => w.record(record),
        }
    }

    /// Waits until every record handed over so far is committed (and, when signing, the
    /// head signed); reports records lost since the last flush. Blocks the calling thread (from async code: at shutdown, or in `spawn_blocking`).
    pub fn flush(&self) -> Result<(), AuditError> {
        match &*self.inner {
            Sink::Sqlite(w) => w.flush(),
            Sink::Shared(w) => w.flush(),
        }
    }

    /// Reads records back. Sees every record handed over before the call. Blocks like [`flush`](Self::flush).
    pub fn query(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, AuditError> {
        match &*self.inner {
            Sink::Sqlite(w) => w.query(q.clone()),
            Sink::Shared(w) => w.query(q.clone()),
        }
    }
}

/// Opens an existing store to read it, never creating one (for `moat audit`).
///
/// A store that exists but has never held an audit record reads as empty.
pub fn read_only(path: &Path) -> Result<AuditReader, AuditError> {
    AuditReader::open(path)
}
