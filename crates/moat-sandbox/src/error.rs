//! Errors: what can stop a sandboxed command from being started or supervised.

use std::path::PathBuf;

/// Why a sandboxed command could not be run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The command line is empty.
    #[error("no command to run")]
    EmptyCommand,
    /// A path named in the profile does not exist (or cannot be resolved).
    #[error("path {path} does not exist or cannot be resolved: {error}")]
    Path {
        /// The path as given.
        path: PathBuf,
        /// Why it could not be resolved.
        error: std::io::Error,
    },
    /// A limit in the profile makes no sense (e.g. zero processes).
    #[error("invalid limit: {0}")]
    InvalidLimit(String),
    /// A setting of the profile makes no sense (uid 0 without `run_as_root`, a relative
    /// masked path).
    #[error("invalid profile: {0}")]
    InvalidProfile(String),
    /// The helper binary could not be started.
    #[error("could not start the sandbox helper {helper}: {error}")]
    Helper {
        /// The helper's path.
        helper: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// The helper started but could not confine or run the command.
    #[error("sandbox setup failed: {0}")]
    Setup(String),
    /// Supervising the child failed (waiting, reading its output).
    #[error("supervising the sandboxed command failed: {0}")]
    Io(#[from] std::io::Error),
    /// The profile asks for something this machine cannot enforce (a network allow-list
    /// without the namespaces): refused rather than run weaker than asked.
    #[error("cannot enforce the profile here: {0}")]
    Unsupported(String),
    /// The network proxy (for an allow-list) could not be started.
    #[error("could not start the network proxy: {0}")]
    Proxy(std::io::Error),
    /// The profile could not be encoded for the helper.
    #[error("could not encode the profile: {0}")]
    Encode(#[from] serde_json::Error),
}
