//! Reading the JSON summaries the SDK clients print (`interop/*_client.*`) and tool
//! results, with failures that show the JSON at fault.

use serde_json::Value;

/// `v[key]`, which must be an array.
pub fn array<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v.get(key)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("`{key}` is not an array in {v:#}"))
}

/// The strings of the array `v[key]`: each entry's `field`, or each entry itself (`None`).
pub fn strings(v: &Value, key: &str, field: Option<&str>) -> Vec<String> {
    array(v, key)
        .iter()
        .map(|item| {
            let s = match field {
                Some(f) => item.get(f),
                None => Some(item),
            };
            s.and_then(Value::as_str)
                .unwrap_or_else(|| panic!("`{key}` entry without a string: {item}"))
                .to_owned()
        })
        .collect()
}

/// Fails unless each of `want` is in `have`.
pub fn assert_contains_all(have: &[String], want: &[&str], what: &str) {
    for w in want {
        assert!(
            have.iter().any(|h| h == w),
            "{what}: `{w}` missing from {have:?}"
        );
    }
}

/// The concatenated text of every `{"type":"text"}` block in `content`.
pub fn text_of(content: &Value) -> String {
    content
        .as_array()
        .unwrap_or_else(|| panic!("content is not an array: {content}"))
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a tool result says `isError: true`.
pub fn is_error(result: &Value) -> bool {
    result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}
