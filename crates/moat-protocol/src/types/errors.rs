//! Typed `data` of the MCP-specific JSON-RPC errors (the error object itself is
//! [`crate::ErrorObject`]).

use serde::{Deserialize, Serialize};

use super::{ClientCapabilities, ElicitRequestURLParams};

/// `data` of the unsupported-protocol-version error (-32022, 2026-07-28).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UnsupportedProtocolVersionErrorData {
    /// The revisions the server supports.
    pub supported: Vec<String>,
    /// The revision the client asked for.
    pub requested: String,
}

/// `data` of the missing-required-client-capability error (-32021, 2026-07-28).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MissingRequiredClientCapabilityErrorData {
    /// The capabilities the request needs.
    pub required_capabilities: ClientCapabilities,
}

/// `data` of the URL-elicitation-required error (-32042, 2025-11-25).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct URLElicitationRequiredErrorData {
    /// The URL elicitations the user must complete first.
    pub elicitations: Vec<ElicitRequestURLParams>,
}
