//! The `[audit]` table: whether and where calls are recorded, and how ([`crate::audit`]
//! does the recording).

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The file name of the store inside the host's state directory when `[audit] path` is unset.
pub const DEFAULT_FILE_NAME: &str = "audit.db";

/// How many records at most follow a signed head before the next is signed, by default.
pub const DEFAULT_SIGN_EVERY: u64 = 100;

/// The `[audit]` table of the configuration.
///
/// ```toml
/// [audit]
/// enabled = true                 # default
/// path = "/var/lib/moat/audit.db" # default: <state dir>/audit.db
/// full_arguments = false         # default: store only a digest of the arguments
/// redact = ["customer_id", "x-*"]  # extra argument keys (globs) to redact
/// sign = false                   # default: sign the chain's head with <state dir>/audit.key
/// sign_every = 100               # default: sign at least every this many records
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct AuditConfig {
    /// Whether calls are recorded at all.
    pub enabled: bool,
    /// Where the SQLite store lives; the host's state directory when unset.
    pub path: Option<PathBuf>,
    /// Store the (redacted) arguments of each call, not only their digest.
    pub full_arguments: bool,
    /// Extra argument key names or globs to redact, case-insensitive, on top of the built-in list.
    pub redact: Vec<String>,
    /// Sign the chain's head (Ed25519) with the key in the state directory, made on first
    /// start: every [`sign_every`](Self::sign_every) records, a minute after the last
    /// signature when records followed it, and at flush and shutdown.
    pub sign: bool,
    /// With `sign`: sign once this many records follow the last signed head (at least 1).
    pub sign_every: u64,
}

// Written out rather than derived: auditing is on unless the configuration turns it off.
impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            enabled: true,
            path: None,
            full_arguments: false,
            redact: Vec::new(),
            sign: false,
            sign_every: DEFAULT_SIGN_EVERY,
        }
    }
}

impl AuditConfig {
    /// The store's path: the configured one, else [`DEFAULT_FILE_NAME`] in `state_dir`.
    pub fn store_path(&self, state_dir: &Path) -> PathBuf {
        self.path
            .clone()
            .unwrap_or_else(|| state_dir.join(DEFAULT_FILE_NAME))
    }
}
