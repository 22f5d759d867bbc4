//! The `[gateway]` table: how the gateway supervises its servers.

use std::time::Duration;

/// `[gateway]`: how the gateway supervises its servers. `None`: the host's default.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct GatewayConfig {
    /// How long a client's lists and calls wait for servers that are starting
    /// (`startup_timeout`, default 30 s); then they are answered with what is up, and
    /// `list_changed` follows when the rest comes up.
    pub startup_timeout: Option<Duration>,
    /// How often each server is health-checked (`ping`, or `server/discover` in
    /// 2026-07-28); two failures in a row restart it (`health_interval`, default 30 s).
    pub health_interval: Option<Duration>,
}
