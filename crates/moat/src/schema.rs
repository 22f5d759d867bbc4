//! JSON Schemas from Rust types, shaped the way MCP wants them: object schemas for tool
//! inputs and outputs, without the generator's `$schema` and `title` noise, in the
//! [`portable`] form every model provider's function calling accepts (the rules it meets are
//! in [`rules`]).

pub mod portable;
pub mod rules;

pub use portable::Side;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Arguments of a tool or prompt that takes none. Accepts `{}` and absent arguments.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
pub struct NoArgs {}

/// The JSON Schema of `T`, as a plain JSON value with `$schema` and the top-level `title` removed.
pub fn schema_of<T: JsonSchema>() -> Value {
    let schema = schemars::schema_for!(T);
    let mut value = serde_json::to_value(&schema).unwrap_or_else(|_| json!({}));
    if let Some(obj) = value.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
    }
    value
}

/// An input schema for `T`: always an object schema, as MCP requires, in the portable form
/// (optional arguments are not `required` and never `null`; see [`portable`]).
pub fn input_schema<T: JsonSchema>() -> Value {
    portable::portable_input(&raw_input_schema::<T>())
}

/// [`input_schema`] as the generator gives it, before the portable rewrite.
pub fn raw_input_schema<T: JsonSchema>() -> Value {
    let mut value = schema_of::<T>();
    // The type's doc comment describes the Rust type, not the tool: the tool has its own
    // description, and repeating it costs the model tokens.
    if let Some(obj) = value.as_object_mut() {
        obj.remove("description");
    }
    match value.as_object_mut() {
        Some(obj) if obj.get("type").and_then(Value::as_str) == Some("object") => {
            obj.entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            value
        }
        // A union (an enum of struct variants): the portable rewrite flattens it.
        Some(obj) if obj.contains_key("oneOf") || obj.contains_key("anyOf") => value,
        // Not an object (e.g. a bare integer): MCP arguments are always an object.
        _ => json!({ "type": "object", "properties": {} }),
    }
}

/// An output schema for `T`. MCP requires an object; a non-object `T` is wrapped as
/// `{"result": T}` (and [`wraps_output`] says so, for the value side). In the portable
/// form, where a value that may be `null` says so with an `anyOf` branch.
pub fn output_schema<T: JsonSchema>() -> Value {
    portable::portable_output(&raw_output_schema::<T>())
}

/// [`output_schema`] as the generator gives it, before the portable rewrite.
pub fn raw_output_schema<T: JsonSchema>() -> Value {
    let value = schema_of::<T>();
    if is_object_schema(&value) {
        value
    } else {
        let mut inner = value;
        let defs = inner.as_object_mut().and_then(|o| o.remove("$defs"));
        let mut wrapped = json!({
            "type": "object",
            "properties": { "result": inner },
            "required": ["result"],
        });
        if let (Some(defs), Some(obj)) = (defs, wrapped.as_object_mut()) {
            obj.insert("$defs".to_owned(), defs);
        }
        wrapped
    }
}

/// Whether values of `T` are wrapped as `{"result": …}` in structured output.
pub fn wraps_output<T: JsonSchema>() -> bool {
    !is_object_schema(&schema_of::<T>())
}

fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Add {
        /// First.
        a: i64,
        b: i64,
    }

    #[test]
    fn object_schemas_stay_objects() {
        let s = input_schema::<Add>();
        assert_eq!(s["type"], "object");
        assert_eq!(s["properties"]["a"]["description"], "First.");
        assert!(s.get("$schema").is_none());
        let none = input_schema::<NoArgs>();
        assert_eq!(none["type"], "object");
        assert!(none["properties"].is_object());
    }

    #[test]
    fn scalar_outputs_are_wrapped() {
        assert!(wraps_output::<i64>());
        let s = output_schema::<i64>();
        assert_eq!(s["type"], "object");
        assert_eq!(s["required"][0], "result");
        assert!(!wraps_output::<Add>());
    }
}
