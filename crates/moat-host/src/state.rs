//! Where the host keeps what outlives it: the audit trail, pins and lasting consent
//! decisions. The configuration's `state_dir`, else `$XDG_STATE_HOME/moat`, else
//! `~/.local/state/moat`.

use std::path::{Path, PathBuf};

use crate::error::HostError;

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
