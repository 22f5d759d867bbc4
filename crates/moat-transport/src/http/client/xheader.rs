//! `x-mcp-header` (2026-07-28): tool arguments a server asks clients to mirror into
//! `Mcp-Param-{Name}` headers.
//!
//! A `tools/list` result is checked tool by tool: a tool whose annotations break the rules
//! (empty or non-token names, case-insensitive duplicates, a non-primitive or `number`
//! parameter, an annotation reached through anything but a chain of `properties`) is removed
//! before the result reaches the peer, with a warning. For the others the transport remembers
//! where each annotated value lives, and mirrors it on `tools/call`.

use http::{HeaderName, HeaderValue};
use serde_json::Value;

use crate::http::headers::{ParamHeader, encode_value, param_headers};

/// Check every tool of a `tools/list` response line. Returns the line to deliver (rewritten
/// only when a tool was removed) and the annotations of the tools kept, by tool name.
pub(super) fn filter_tools_list(line: &str) -> (Option<String>, Vec<(String, Vec<ParamHeader>)>) {
    let Ok(mut msg) = serde_json::from_str::<Value>(line) else {
        return (None, Vec::new());
    };
    let Some(Value::Array(tools)) = msg.get_mut("result").and_then(|r| r.get_mut("tools")) else {
        return (None, Vec::new());
    };
    let mut kept = Vec::new();
    let before = tools.len();
    tools.retain(|tool| {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
        let schema = tool.get("inputSchema").unwrap_or(&Value::Null);
        match param_headers(schema) {
            Ok(found) => {
                kept.push((name.to_owned(), found));
                true
            }
            Err(why) => {
                tracing::warn!(tool = %name, %why, "removing a tool with an invalid x-mcp-header annotation from tools/list");
                false
            }
        }
    });
    if tools.len() == before {
        return (None, kept);
    }
    (serde_json::to_string(&msg).ok(), kept)
}

/// The `Mcp-Param-*` headers for a call with these `arguments`: one per annotated argument
/// present with a string, integer or boolean value.
pub(super) fn mirror(
    annotated: &[ParamHeader],
    arguments: Option<&Value>,
) -> Vec<(HeaderName, HeaderValue)> {
    let Some(arguments) = arguments else {
        return Vec::new();
    };
    annotated
        .iter()
        .filter_map(|h| {
            let value = h.value_in(arguments)?;
            let name = HeaderName::from_bytes(h.header_name().as_bytes()).ok()?;
            let value = HeaderValue::from_str(&encode_value(&value)).ok()?;
            Some((name, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mirrors_present_primitive_values() {
        let m = vec![
            ParamHeader {
                path: vec!["s".into()],
                name: "S".into(),
            },
            ParamHeader {
                path: vec!["i".into()],
                name: "I".into(),
            },
            ParamHeader {
                path: vec!["b".into()],
                name: "B".into(),
            },
            ParamHeader {
                path: vec!["o".into(), "u".into()],
                name: "U".into(),
            },
            ParamHeader {
                path: vec!["n".into()],
                name: "Null".into(),
            },
            ParamHeader {
                path: vec!["missing".into()],
                name: "M".into(),
            },
        ];
        let args = json!({"s": "Hello, 世界", "i": -7, "b": true, "o": {"u": "x"}, "n": null});
        let got: Vec<(String, String)> = mirror(&m, Some(&args))
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "mcp-param-s".into(),
                    "=?base64?SGVsbG8sIOS4lueVjA==?=".into()
                ),
                ("mcp-param-i".into(), "-7".into()),
                ("mcp-param-b".into(), "true".into()),
                ("mcp-param-u".into(), "x".into()),
            ]
        );
    }

    #[test]
    fn filtering_removes_only_the_invalid_tools() {
        let line = json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": [
            {"name": "good", "inputSchema": {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "R"}}}},
            {"name": "bad", "inputSchema": {"type": "object", "properties": {"r": {"type": "number", "x-mcp-header": "R"}}}}
        ]}})
        .to_string();
        let (rewritten, kept) = filter_tools_list(&line);
        let v: Value = serde_json::from_str(&rewritten.unwrap()).unwrap();
        assert_eq!(v["id"], 3);
        assert_eq!(v["result"]["tools"].as_array().unwrap().len(), 1);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].0, "good");
        let fine = json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": []}}).to_string();
        assert!(filter_tools_list(&fine).0.is_none());
    }
}
