//! What the suite asks for: the server URL (the last argument) and the `MCP_CONFORMANCE_*`
//! environment.

use anyhow::{Context, bail};
use moat::{ProtocolVersion, VersionPreference};
use serde_json::Value;

pub const USAGE: &str = "usage: MCP_CONFORMANCE_SCENARIO=<name> [MCP_CONFORMANCE_CONTEXT=<json>] \
[MCP_CONFORMANCE_PROTOCOL_VERSION=<revision>] moat-conformance-client <serverUrl>";

/// One run of the client.
#[derive(Debug)]
pub struct Invocation {
    /// The mock server's URL, used exactly as given (it may have no `/mcp` path).
    pub server_url: String,
    /// `MCP_CONFORMANCE_SCENARIO`.
    pub scenario: String,
    /// `MCP_CONFORMANCE_CONTEXT`, parsed; `Null` when the scenario has none.
    pub context: Value,
    /// The revision to speak.
    pub protocol: VersionPreference,
}

impl Invocation {
    pub fn from_env() -> anyhow::Result<Invocation> {
        // The suite appends the URL to the command line it was given: take the last argument.
        let Some(server_url) = std::env::args().skip(1).last() else {
            bail!("no server URL given");
        };
        if server_url == "--help" || server_url == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO")
            .context("MCP_CONFORMANCE_SCENARIO is not set")?;
        let context = match std::env::var("MCP_CONFORMANCE_CONTEXT") {
            Ok(text) if !text.trim().is_empty() => {
                serde_json::from_str(&text).context("MCP_CONFORMANCE_CONTEXT is not valid JSON")?
            }
            _ => Value::Null,
        };
        let version = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").ok();
        Ok(Invocation {
            server_url,
            scenario,
            context,
            protocol: protocol_for(version.as_deref()),
        })
    }
}

/// The revision named by `MCP_CONFORMANCE_PROTOCOL_VERSION`. Suites before 0.2.0 do not set
/// it and only have handshake-era mock servers, so then the newest handshake revision; a
/// revision we do not know lets the SDK negotiate (`Auto`).
fn protocol_for(version: Option<&str>) -> VersionPreference {
    match version.map(str::trim).filter(|v| !v.is_empty()) {
        None => VersionPreference::Exact(ProtocolVersion::LATEST_HANDSHAKE),
        Some(v) => match v.parse::<ProtocolVersion>() {
            Ok(v) => VersionPreference::Exact(v),
            Err(_) => {
                tracing::warn!(
                    version = v,
                    "MCP_CONFORMANCE_PROTOCOL_VERSION names a revision moat does not know; \
                     negotiating instead"
                );
                VersionPreference::Auto
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_picks_the_revision() {
        assert_eq!(
            protocol_for(None),
            VersionPreference::Exact(ProtocolVersion::LATEST_HANDSHAKE)
        );
        assert_eq!(
            protocol_for(Some("2026-07-28")),
            VersionPreference::Exact(ProtocolVersion::V2026_07_28)
        );
        assert_eq!(
            protocol_for(Some("2025-11-25")),
            VersionPreference::Exact(ProtocolVersion::V2025_11_25)
        );
        assert_eq!(protocol_for(Some("2099-01-01")), VersionPreference::Auto);
    }
}
