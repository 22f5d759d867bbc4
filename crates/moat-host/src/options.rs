//! [`HostOptions`]: how the host runs, beyond what the configuration says.

use std::path::PathBuf;
use std::time::Duration;

/// How the host runs, beyond what the configuration says.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostOptions {
    /// The binary that confines sandboxed servers (`BIN sandbox --stdio --profile JSON --
    /// CMD…`): the `moat` binary. Without it, a server with a sandbox profile cannot start.
    pub sandbox_helper: Option<PathBuf>,
    /// Keep pins, decisions and the audit trail in memory only (tests, `--ephemeral`).
    pub ephemeral: bool,
    /// How long a server has to start and answer `initialize`; also how long the lists
    /// and calls of a client wait for servers that are starting (unless the configuration's
    /// `[gateway] startup_timeout` says otherwise).
    pub start_timeout: Duration,
    /// Deadline of a call to a server, unless its configuration says otherwise.
    pub call_timeout: Duration,
    /// Health checks: a `ping` to every server this often (unless the configuration's
    /// `[gateway] health_interval` says otherwise).
    pub health_interval: Duration,
    /// How often the pin store is looked at for approvals made by `moat pins approve`.
    pub pins_poll: Duration,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            sandbox_helper: None,
            ephemeral: false,
            start_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(300),
            health_interval: Duration::from_secs(30),
            pins_poll: Duration::from_millis(500),
        }
    }
}

impl HostOptions {
    /// Confine sandboxed servers with `helper` (the `moat` binary).
    pub fn sandbox_helper(mut self, helper: impl Into<PathBuf>) -> Self {
        self.sandbox_helper = Some(helper.into());
        self
    }

    /// Keep all state in memory.
    pub fn ephemeral(mut self, ephemeral: bool) -> Self {
        self.ephemeral = ephemeral;
        self
    }
}
