//! [`StoreError`]: what can go wrong with the store, each naming the store (never its
//! password).

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// `[store]` has no URL.
    #[error("the store has no URL")]
    NoUrl,
    /// The URL does not parse.
    #[error("store {url}: not a PostgreSQL URL: {detail}")]
    Url {
        /// The URL, without its password.
        url: String,
        /// Why.
        detail: String,
    },
    /// The password could not be read.
    #[error("store password: {detail}")]
    Password {
        /// Why.
        detail: String,
    },
    /// TLS could not be set up.
    #[error("store {url}: TLS: {detail}")]
    Tls {
        /// The URL, without its password.
        url: String,
        /// Why.
        detail: String,
    },
    /// The server could not be reached at start.
    #[error("cannot connect to the store {url}: {detail}")]
    Connect {
        /// The URL, without its password.
        url: String,
        /// Why.
        detail: String,
    },
    /// Bringing the schema up to date failed.
    #[error("store {url}: migrating the schema failed: {detail}")]
    Migrate {
        /// The URL, without its password.
        url: String,
        /// Why.
        detail: String,
    },
    /// The database was migrated by a newer moat.
    #[error(
        "store {url}: its schema is at version {found} or later, newer than this moat knows \
         ({known}); upgrade moat, or point it at another database"
    )]
    FutureSchema {
        /// The URL, without its password.
        url: String,
        /// A version applied there that this binary lacks.
        found: i32,
        /// The newest version this binary knows.
        known: i32,
    },
    /// The server was lost (or a statement failed) while running.
    #[error("the store {url} is unavailable: {detail}")]
    Unavailable {
        /// The URL, without its password.
        url: String,
        /// Why.
        detail: String,
    },
    /// The local copy failed.
    #[error("store: local copy: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Another gateway changed a row this one changed too; its write was kept.
    #[error(
        "{0} changes were refused because another process changed the same rows first; look again and retry"
    )]
    Conflict(usize),
}
