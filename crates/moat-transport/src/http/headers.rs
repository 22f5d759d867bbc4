//! The HTTP header names MCP uses, and the value encoding of `Mcp-Name` / `Mcp-Param-*`
//! (2026-07-28): plain visible ASCII as is, anything else as `=?base64?…?=`.
//!
//! Shared by the server (which validates headers against the body) and the client (which
//! mirrors body fields into headers); and the host name of a `Host` header, for the
//! allow-lists of every HTTP endpoint.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The session a handshake-era server assigned (`Mcp-Session-Id`).
pub const SESSION_ID: &str = "mcp-session-id";
/// The negotiated revision, on every request after `initialize` (`MCP-Protocol-Version`).
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// The JSON-RPC method of a 2026-07-28 request (`Mcp-Method`).
pub const METHOD: &str = "mcp-method";
/// `params.name` or `params.uri` of a 2026-07-28 `tools/call`, `resources/read` or
/// `prompts/get`, and `params.taskId` of the tasks extension's `tasks/get`, `tasks/update`
/// and `tasks/cancel` (`Mcp-Name`).
pub const NAME: &str = "mcp-name";
/// Prefix of the headers that mirror tool arguments marked with `x-mcp-header`.
pub const PARAM_PREFIX: &str = "mcp-param-";
/// Where an SSE client resumes a stream (`Last-Event-ID`).
pub const LAST_EVENT_ID: &str = "last-event-id";
/// The JSON Schema keyword that marks a tool argument to mirror into a header.
pub const X_MCP_HEADER: &str = "x-mcp-header";

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// Encode a value for `Mcp-Name` or `Mcp-Param-*`: as is when it is printable ASCII
/// (spaces inside allowed, not at either end; no tabs or controls) and does not look like
/// the sentinel itself, otherwise base64 of its UTF-8 bytes inside the sentinel.
pub fn encode_value(value: &str) -> String {
    let printable = value.bytes().all(|b| (0x20..=0x7e).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let looks_encoded = value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END);
    let plain = printable && !padded && !looks_encoded;
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

/// A tool argument mirrored into a header (`x-mcp-header` in its `inputSchema`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// The chain of `properties` keys leading to the argument.
    pub path: Vec<String>,
    /// The name after `Mcp-Param-`, as the schema spells it.
    pub name: String,
}

impl ParamHeader {
    /// The full header name, lower-cased (`mcp-param-region`).
    pub fn header_name(&self) -> String {
        format!("{PARAM_PREFIX}{}", self.name.to_ascii_lowercase())
    }

    /// The argument's value as a header carries it, before encoding: strings as they are,
    /// integers in decimal, booleans as `true`/`false`. `None` when absent or null.
    pub fn value_in(&self, arguments: &serde_json::Value) -> Option<String> {
        let mut at = arguments;
        for key in &self.path {
            at = at.get(key)?;
        }
        match at {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Bool(b) => Some(b.to_string()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

/// The arguments of a tool that its `inputSchema` marks with `x-mcp-header`, or why the
/// annotations make the tool definition invalid (the spec's constraints: a non-empty
/// RFC 9110 token, unique case-insensitively, on an integer, string or boolean property
/// reached only through `properties`).
pub fn param_headers(input_schema: &serde_json::Value) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    collect(input_schema, &mut Vec::new(), true, &mut found)?;
    let mut seen = std::collections::HashSet::new();
    for h in &found {
        if !seen.insert(h.name.to_ascii_lowercase()) {
            return Err(format!("x-mcp-header {:?} is used twice", h.name));
        }
    }
    Ok(found)
}

fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn collect(
    schema: &serde_json::Value,
    path: &mut Vec<String>,
    reachable: bool,
    found: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    let Some(obj) = schema.as_object() else {
        return Ok(());
    };
    if let Some(name) = obj.get(X_MCP_HEADER) {
        let where_ = if path.is_empty() {
            "the schema root".to_owned()
        } else {
            format!("argument {:?}", path.join("."))
        };
        let name = name
            .as_str()
            .ok_or_else(|| format!("x-mcp-header on {where_} is not a string"))?;
        if !reachable || path.is_empty() {
            return Err(format!(
                "x-mcp-header {name:?} on {where_} is not reached through `properties` alone"
            ));
        }
        if !is_token(name) {
            return Err(format!("x-mcp-header {name:?} is not a valid header name"));
        }
        let primitive = match obj.get("type") {
            Some(serde_json::Value::String(t)) => {
                matches!(t.as_str(), "string" | "integer" | "boolean")
            }
            _ => false,
        };
        if !primitive {
            return Err(format!(
                "x-mcp-header {name:?} is on {where_}, which is not of type string, integer or boolean"
            ));
        }
        found.push(ParamHeader {
            path: path.clone(),
            name: name.to_owned(),
        });
    }
    for (key, sub) in obj {
        match key.as_str() {
            "properties" => {
                if let Some(props) = sub.as_object() {
                    for (prop, sub) in props {
                        path.push(prop.clone());
                        let r = collect(sub, path, reachable, found);
                        path.pop();
                        r?;
                    }
                }
            }
            X_MCP_HEADER => {}
            // Anything below another keyword is not statically reachable.
            _ => match sub {
                serde_json::Value::Object(_) => collect(sub, path, false, found)?,
                serde_json::Value::Array(items) => {
                    for item in items {
                        collect(item, path, false, found)?;
                    }
                }
                _ => {}
            },
        }
    }
    Ok(())
}

/// The host name of a `Host` header or an origin's authority, without its port:
/// `example.com:8080` → `example.com`; `[::1]:80` → `[::1]`. For allow-list checks.
pub fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn annotations_are_found_on_reachable_primitives() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
            "query": {"type": "string"}
        }});
        let found = param_headers(&schema).unwrap();
        assert_eq!(found.len(), 2);
        let n = found.iter().find(|h| h.name == "N").unwrap();
        assert_eq!(n.path, ["opts", "n"]);
        assert_eq!(n.header_name(), "mcp-param-n");
        assert_eq!(
            n.value_in(&json!({"opts": {"n": 42}})).as_deref(),
            Some("42")
        );
        assert_eq!(n.value_in(&json!({"opts": {"n": null}})), None);
        assert_eq!(n.value_in(&json!({})), None);
    }

    #[test]
    fn invalid_annotations_are_refused() {
        let bad = [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "a b"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "X"},
                                  "b": {"type": "string", "x-mcp-header": "x"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"properties": {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}}),
        ];
        for schema in bad {
            assert!(param_headers(&schema).is_err(), "{schema}");
        }
    }

    #[test]
    fn plain_values_pass_unchanged() {
        assert_eq!(encode_value("us-west1"), "us-west1");
        assert_eq!(encode_value("a b"), "a b");
        assert_eq!(encode_value("a\tb"), "=?base64?YQli?=");
        assert_eq!(decode_value(b"us-west1").unwrap(), "us-west1");
    }

    #[test]
    fn the_spec_examples_encode_as_given() {
        assert_eq!(
            encode_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(encode_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(encode_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            encode_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
    }

    #[test]
    fn encoding_round_trips() {
        for v in [
            "Hello, 世界",
            " padded ",
            "line1\nline2",
            "=?base64?literal?=",
            "x",
        ] {
            assert_eq!(decode_value(encode_value(v).as_bytes()).unwrap(), v);
        }
    }

    #[test]
    fn bad_values_are_refused() {
        assert_eq!(decode_value(b"a\nb"), Err(ValueError::InvalidCharacters));
        assert_eq!(
            decode_value("é".as_bytes()),
            Err(ValueError::InvalidCharacters)
        );
        assert_eq!(decode_value(b"=?base64?***?="), Err(ValueError::BadBase64));
    }
}
