//! JSON-RPC and MCP error codes, and the error object carried by error responses.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP: the requested resource does not exist (2024-11-05 … 2025-11-25).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// MCP 2026-07-28: a header (`Mcp-Method`, `Mcp-Name`, …) disagrees with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP 2026-07-28: the request lacks a client capability the server requires.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// MCP 2026-07-28: the requested protocol revision is not supported.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// MCP 2025-11-25: URL-mode elicitation is required before the request can proceed.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;
/// A call refused because the caller's access token lacks a scope it needs (moat's own
/// code, in the implementation-defined range); `data.scope` lists the scopes needed,
/// space-separated. Over HTTP the server answers it with 403 `insufficient_scope`.
pub const INSUFFICIENT_SCOPE: i64 = -32043;
/// moat: the request was cancelled or its connection closed before an answer arrived.
/// (In the implementation-defined server-error range -32000..-32099.)
pub const REQUEST_CANCELLED: i64 = -32800;
/// moat: the request's deadline passed.
pub const REQUEST_TIMEOUT: i64 = -32001;
/// Streamable HTTP and HTTP+SSE: the session a request names is unknown (it ended or
/// expired). The TypeScript and Python SDKs answer so, with the number that is also
/// [`REQUEST_TIMEOUT`]: this one comes with HTTP 404, never as the answer to a request
/// that was served.
pub const SESSION_NOT_FOUND: i64 = -32001;
/// A transport-level refusal over HTTP (a bad header, a missing session id, too many
/// sessions, an unsupported media type), sent with the HTTP status that says which.
pub const TRANSPORT_ERROR: i64 = -32000;

/// The `error` member of a JSON-RPC error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct ErrorObject {
    /// The error code.
    pub code: i64,
    /// A short description of the error.
    pub message: String,
    /// Additional information about the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with a code and message and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attach `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32700.
    pub fn parse_error(message: impl Into<String>) -> Self {
        Self::new(PARSE_ERROR, message)
    }

    /// -32600.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, message)
    }

    /// -32601, naming the method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    /// -32602.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// -32603.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }
}
