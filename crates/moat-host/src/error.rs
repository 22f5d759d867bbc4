//! The host's error type.

use std::path::PathBuf;

/// What can stop the host from starting, reloading or keeping its state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The configuration could not be read.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The policy could not be compiled.
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    /// The pin store failed.
    #[error(transparent)]
    Pins(#[from] crate::pins::PinError),
    /// The audit store failed.
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    /// The shared store (`[store] url`) failed.
    #[error(transparent)]
    Store(#[from] crate::store::error::StoreError),
    /// Two tools, or two prompts, would be shown to the client under one name.
    #[error("name collision: {0}")]
    Collision(String),
    /// A state file could not be opened or written.
    #[error("{}: {detail}", path.display())]
    State {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// No place to keep state.
    #[error("no state directory: set XDG_STATE_HOME or HOME, or `state_dir` in the configuration")]
    NoStateDir,
    /// A downstream server could not be started or reached.
    #[error("server {server}: {detail}")]
    Server {
        /// Its name in the configuration.
        server: String,
        /// What went wrong.
        detail: String,
    },
    /// The metrics endpoint could not listen.
    #[error("metrics endpoint {addr}: {source}")]
    Metrics {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why it could not be bound.
        source: std::io::Error,
    },
    /// The web console could not listen.
    #[error("console {addr}: {source}")]
    Console {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why it could not be bound.
        source: std::io::Error,
    },
    /// The upstream connection failed.
    #[error(transparent)]
    Moat(#[from] moat::Error),
}
