//! What can go wrong with the audit store.

use std::path::PathBuf;

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
    /// The shared store (PostgreSQL) failed.
    #[error("audit store {url}: {detail}")]
    Store {
        /// The store's URL, without its password.
        url: String,
        /// Why.
        detail: String,
    },
    /// The shared store is unreachable and records wait to be written (none is lost: they
    /// are written when it is back, while this process runs).
    #[error("audit store {url}: {count} record(s) wait for the store to come back: {reason}")]
    Waiting {
        /// The store's URL, without its password.
        url: String,
        /// How many records wait.
        count: usize,
        /// The last failure.
        reason: String,
    },
    /// The writer thread is gone (it panicked); nothing more can be recorded.
    #[error("the audit writer thread has stopped")]
    WriterGone,
}
