//! Connection setup: `initialize` (handshake era, up to 2025-11-25) and `server/discover`
//! (2026-07-28).

use serde::{Deserialize, Serialize};

use super::{CacheScope, ClientCapabilities, Implementation, ServerCapabilities};
use crate::Meta;

/// `_meta` key of a 2026-07-28 result carrying the server's implementation info.
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Params of `initialize`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequestParams {
    /// The latest revision the client supports.
    pub protocol_version: String,
    /// What the client supports.
    pub capabilities: ClientCapabilities,
    /// Who the client is.
    pub client_info: Implementation,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Result of `initialize`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The revision the server chose.
    pub protocol_version: String,
    /// What the server supports.
    pub capabilities: ServerCapabilities,
    /// Who the server is.
    pub server_info: Implementation,
    /// How to use the server, e.g. for a system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Result of `server/discover` (2026-07-28). The server's [`Implementation`] travels in
/// `_meta` under `io.modelcontextprotocol/serverInfo`; see [`DiscoverResult::server_info`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// The revisions the server supports.
    pub supported_versions: Vec<String>,
    /// What the server supports.
    pub capabilities: ServerCapabilities,
    /// How to use the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// `"complete"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<String>,
    /// How long the result may be cached, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Who may cache the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
}

impl DiscoverResult {
    /// The server's implementation info from `_meta`, if present and well formed.
    pub fn server_info(&self) -> Option<Implementation> {
        let value = self.meta.as_ref()?.get(META_SERVER_INFO)?;
        Implementation::deserialize(value).ok()
    }

    /// Put the server's implementation info into `_meta`.
    pub fn set_server_info(&mut self, info: &Implementation) {
        if let Ok(value) = serde_json::to_value(info) {
            self.meta
                .get_or_insert_with(Meta::new)
                .insert(META_SERVER_INFO.to_owned(), value);
        }
    }
}
