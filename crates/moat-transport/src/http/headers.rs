//! The HTTP header names MCP uses, and the value encoding of `Mcp-Name` / `Mcp-Param-*`
//! (2026-07-28): plain visible ASCII as is, anything else as `=?base64?…?=`.
//!
//! Shared by the server (which validates headers against the body) and the client (which
//! mirrors body fields into headers).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The session a handshake-era server assigned (`Mcp-Session-Id`).
pub const SESSION_ID: &str = "mcp-session-id";
/// The negotiated revision, on every request after `initialize` (`MCP-Protocol-Version`).
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// The JSON-RPC method of a 2026-07-28 request (`Mcp-Method`).
pub const METHOD: &str = "mcp-method";
/// `params.name` or `params.uri` of a 2026-07-28 `tools/call`, `resources/read` or
/// `prompts/get` (`Mcp-Name`).
pub const NAME: &str = "mcp-name";
/// Prefix of the headers that mirror tool arguments marked with `x-mcp-header`.
pub const PARAM_PREFIX: &str = "mcp-param-";
/// Where an SSE client resumes a stream (`Last-Event-ID`).
pub const LAST_EVENT_ID: &str = "last-event-id";
/// The JSON Schema keyword that marks a tool argument to mirror into a header.
pub const X_MCP_HEADER: &str = "x-mcp-header";

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// Encode a value for `Mcp-Name` or `Mcp-Param-*`: as is when it is plain visible ASCII
/// (spaces inside allowed, not at either end) and does not look like the sentinel itself,
/// otherwise base64 of its UTF-8 bytes inside the sentinel.
pub fn encode_value(value: &str) -> String {
    let plain = value
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || (0x21..=0x7e).contains(&b))
        && !value.starts_with([' ', '\t'])
        && !value.ends_with([' ', '\t'])
        && !(value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END));
    if plain {
        value.to_owned()
    } else {
        format!("{SENTINEL_START}{}{SENTINEL_END}", STANDARD.encode(value))
    }
}

/// Why a header value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// The value holds bytes a header may not carry.
    #[error("contains characters a header value may not carry")]
    InvalidCharacters,
    /// The sentinel wraps something that is not base64 of UTF-8 text.
    #[error("is not valid base64 of UTF-8 text inside =?base64?…?=")]
    BadBase64,
}

/// Decode a `Mcp-Name` / `Mcp-Param-*` value as the client encoded it.
pub fn decode_value(raw: &[u8]) -> Result<String, ValueError> {
    if !raw
        .iter()
        .all(|&b| b == b' ' || b == b'\t' || (0x21..=0x7e).contains(&b))
    {
        return Err(ValueError::InvalidCharacters);
    }
    // Checked above: visible ASCII is UTF-8.
    let text = std::str::from_utf8(raw).map_err(|_| ValueError::InvalidCharacters)?;
    match text
        .strip_prefix(SENTINEL_START)
        .and_then(|t| t.strip_suffix(SENTINEL_END))
    {
        Some(encoded) => {
            let bytes = STANDARD
                .decode(encoded)
                .map_err(|_| ValueError::BadBase64)?;
            String::from_utf8(bytes).map_err(|_| ValueError::BadBase64)
        }
        None => Ok(text.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_pass_unchanged() {
        assert_eq!(encode_value("us-west1"), "us-west1");
        assert_eq!(encode_value("a b"), "a b");
        assert_eq!(decode_value(b"us-west1").unwrap(), "us-west1");
    }

    #[test]
    fn the_spec_examples_encode_as_given() {
        assert_eq!(encode_value("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(encode_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(encode_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            encode_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
    }

    #[test]
    fn encoding_round_trips() {
        for v in ["Hello, 世界", " padded ", "line1\nline2", "=?base64?literal?=", "x"] {
            assert_eq!(decode_value(encode_value(v).as_bytes()).unwrap(), v);
        }
    }

    #[test]
    fn bad_values_are_refused() {
        assert_eq!(decode_value(b"a\nb"), Err(ValueError::InvalidCharacters));
        assert_eq!(decode_value("é".as_bytes()), Err(ValueError::InvalidCharacters));
        assert_eq!(decode_value(b"=?base64?***?="), Err(ValueError::BadBase64));
    }
}
