//! The `[consent]` table: how the host asks the user before a call that policy says to ask
//! about ([`crate::consent`] does the asking).

use std::time::Duration;

use serde::Deserialize;

/// `[consent]`: how the host asks the user before a call that policy says to ask about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsentConfig {
    /// Where to ask.
    pub mode: ConsentMode,
    /// How long to wait for an answer before denying.
    pub timeout: Duration,
}

impl Default for ConsentConfig {
    fn default() -> Self {
        ConsentConfig {
            mode: ConsentMode::Auto,
            timeout: Duration::from_secs(120),
        }
    }
}

/// Where consent is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ConsentMode {
    /// MCP elicitation if the client supports it, else the terminal, else deny.
    #[default]
    Auto,
    /// MCP elicitation only (deny when the client cannot elicit).
    Elicit,
    /// The controlling terminal only (deny when there is none).
    Terminal,
    /// Never ask: whatever policy says to ask about is denied.
    Deny,
}
