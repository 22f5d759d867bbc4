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
mod format;
pub mod key;
mod redact;
mod store;
mod verdict;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use crate::config::duration::{DurationError, parse_duration};
pub use format::format_table;
pub use redact::{REDACTED, Redactor, args_digest, redact};
pub use store::AuditReader;
pub use verdict::{Decision, Outcome, Refusal};

pub use crate::config::audit::{AuditConfig, DEFAULT_FILE_NAME, DEFAULT_SIGN_EVERY};

/// One tool call, as stored. JSON output of `moat audit --json` is this type serialized.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Unix time in milliseconds when the call arrived.
    pub time_ms: i64,
    /// What is recorded: `call` (a `tools/call`; also when empty), or a request a server
    /// made of the client — `sampling`, `elicitation`, `roots` — whose `tool` is its
    /// method.
    #[serde(default)]
    pub kind: String,
    /// Who: the upstream session or connection id.
    pub session: String,
    /// The client's name/version from `initialize`, when known.
    pub client: Option<String>,
    /// The downstream server's configured name.
    pub server: String,
    /// The tool's name on its server.
    pub tool: String,
    /// The name the client saw (`server__tool`).
    pub exposed_name: String,
    /// SHA-256 hex of the canonical arguments (object keys sorted); see [`args_digest`].
    pub args_digest: String,
    /// The arguments themselves, redacted; only with `full_arguments`.
    pub arguments: Option<serde_json::Value>,
    /// `allow`, `ask`, `deny` or `error` ([`Decision`]).
    pub decision: String,
    /// Which rule decided, e.g. `rule 2 (no-writes)`, `default`, `pin changed`, `schema`
    /// (the gateway's own: [`Refusal`]).
    pub rule: String,
    /// How consent went, e.g. `approved once via elicitation`; `None` when none was asked.
    pub consent: Option<String>,
    /// `ok`, `tool_error`, `refused`, `failed` or `cancelled` ([`Outcome`]).
    pub outcome: String,
    /// Time from arrival to answer, in microseconds.
    pub duration_us: u64,
    /// Size of the result sent back, in bytes.
    pub result_bytes: u64,
    /// What went wrong, when something did.
    pub error: Option<String>,
}

impl AuditRecord {
    /// Fills `args_digest`, and `arguments` when `config.full_arguments`, from a call's arguments.
    ///
    /// The digest is taken over the *redacted* arguments: a digest of a short password could be
    /// brute-forced offline by anyone who can read the store.
    pub fn set_arguments(
        &mut self,
        args: &serde_json::Value,
        config: &AuditConfig,
        redactor: &Redactor,
    ) {
        let redacted = redactor.redact(args);
        self.args_digest = args_digest(&redacted);
        self.arguments = config.full_arguments.then_some(redacted);
    }
}

/// Unix time now, in milliseconds (for [`AuditRecord::time_ms`]).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The unix time in milliseconds `ago` before now (for `--since`: `since_ms: Some(ms_ago(d))`).
pub fn ms_ago(ago: std::time::Duration) -> i64 {
    now_ms().saturating_sub(i64::try_from(ago.as_millis()).unwrap_or(i64::MAX))
}

/// What to read back. Every filter is optional; results come oldest first, newest last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only calls that arrived at or after this unix time in milliseconds.
    pub since_ms: Option<i64>,
    /// A glob matched against the exposed name (`fs__read_*`) or against `server/tool` (`fs/*`).
    pub tool: Option<String>,
    /// Only calls to this server.
    pub server: Option<String>,
    /// At most this many records: the newest ones.
    pub limit: Option<usize>,
}

/// What can go wrong opening, writing or reading the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The signing key could not be read or made.
    #[error("audit signing key {path}: {reason}")]
    Key {
        /// The key file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Writing exported records failed.
    #[error("cannot write the export: {source}")]
    Write {
        /// Why.
        source: std::io::Error,
    },
    /// The directory for the store could not be created.
    #[error("cannot create the audit store's directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// There is no store at this path (reading never creates one).
    #[error(
        "no audit store at {0} (nothing has been recorded yet, or [audit] path points elsewhere)"
    )]
    Missing(PathBuf),
    /// SQLite refused an operation.
    #[error("audit store {path}: {source}")]
    Sqlite {
        /// The store (`:memory:` for an in-memory one).
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The `tool` filter is not a valid glob.
    #[error("invalid tool pattern {pattern:?}: {reason}")]
    BadPattern {
        /// The pattern.
        pattern: String,
        /// Why it is invalid.
        reason: String,
    },
    /// Records handed over earlier could not be committed (they are lost; the log says more).
    #[error("audit store {path}: {count} record(s) could not be written: {reason}")]
    WriteFailed {
        /// The store.
        path: PathBuf,
        /// How many records were lost since the last flush.
        count: u64,
        /// The first failure's message.
        reason: String,
    },
    /// The writer thread is gone (it panicked); nothing more can be recorded.
    #[error("the audit writer thread has stopped")]
    WriterGone,
}

/// The audit log of a running host: cheap to clone, `Send + Sync`.
///
/// Dropping the last clone lets the writer commit what is queued and waits for it.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<writer::Writer>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.inner.path())
            .finish_non_exhaustive()
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

    fn start(conn: rusqlite::Connection, path: PathBuf, signer: Option<store::Signer>) -> AuditLog {
        AuditLog {
            inner: Arc::new(writer::Writer::spawn(conn, path, signer)),
        }
    }

    /// Queues a record for the writer thread; never waits for the disk.
    ///
    /// A record that cannot be written is reported by `tracing::warn!` and by the next [`flush`](Self::flush).
    pub fn record(&self, record: AuditRecord) {
        self.inner.record(record);
    }

    /// Waits until every record handed over so far is committed (and, when signing, the
    /// head signed); reports records lost since the last flush. Blocks the calling thread (from async code: at shutdown, or in `spawn_blocking`).
    pub fn flush(&self) -> Result<(), AuditError> {
        self.inner.flush()
    }

    /// Reads records back. Sees every record handed over before the call. Blocks like [`flush`](Self::flush).
    pub fn query(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, AuditError> {
        self.inner.query(q.clone())
    }
}

/// Opens an existing store to read it, never creating one (for `moat audit`).
///
/// A store that exists but has never held an audit record reads as empty.
pub fn read_only(path: &Path) -> Result<AuditReader, AuditError> {
    AuditReader::open(path)
}
