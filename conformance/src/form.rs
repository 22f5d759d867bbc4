//! The conformance client's "user": it accepts every elicitation form, taking each field's
//! schema default (SEP-1034) and making up a valid value for fields without one, and it
//! makes up tool and prompt arguments from their schemas when a scenario does not name them.

use std::collections::BTreeMap;

use moat::types::{
    ElicitRequestParams, ElicitResult, ElicitValue, NumberType, PrimitiveSchemaDefinition,
    StringFormat,
};
use serde_json::{Map, Value, json};

/// Accept a form, filled with the defaults its schema gives; URL-mode requests are declined
/// (there is no browser to send anyone to).
pub fn accept_with_defaults(params: &ElicitRequestParams) -> ElicitResult {
    let ElicitRequestParams::Form(form) = params else {
        return ElicitResult::decline();
    };
    let content = form
        .requested_schema
        .properties
        .iter()
        .filter_map(|(name, field)| Some((name.clone(), field_value(field)?)))
        .collect::<BTreeMap<_, _>>();
    ElicitResult::accept(content)
}

/// The value for one field: its default, else something the schema allows.
fn field_value(field: &PrimitiveSchemaDefinition) -> Option<ElicitValue> {
    use PrimitiveSchemaDefinition as P;
    Some(match field {
        P::String(s) => ElicitValue::String(s.default.clone().unwrap_or_else(|| {
            let sample = match s.format {
                Some(StringFormat::Email) => "conformance@example.com",
                Some(StringFormat::Uri) => "https://example.com/",
                Some(StringFormat::Date) => "2025-11-25",
                Some(StringFormat::DateTime) => "2025-11-25T00:00:00Z",
                _ => "conformance",
            };
            let min = usize::try_from(s.min_length.unwrap_or(0)).unwrap_or(usize::MAX);
            let mut text = sample.to_owned();
            while text.len() < min {
                text.push('x');
            }
            text
        })),
        P::Number(n) => {
            let v = n.default.or(n.minimum).unwrap_or(0.0);
            // An integer field holds an integer, whatever JSON spelling the default had.
            if n.r#type == NumberType::Integer || (v.fract() == 0.0 && v.abs() < 9.0e15) {
                #[allow(clippy::cast_possible_truncation)]
                ElicitValue::Integer(v.round() as i64)
            } else {
                ElicitValue::Number(v)
            }
        }
        P::Boolean(b) => ElicitValue::Boolean(b.default.unwrap_or(true)),
        P::UntitledSingleSelect(e) => {
            ElicitValue::String(e.default.clone().or_else(|| e.values.first().cloned())?)
        }
        P::TitledSingleSelect(e) => ElicitValue::String(
            e.default
                .clone()
                .or_else(|| e.one_of.first().map(|o| o.value.clone()))?,
        ),
        P::LegacyTitled(e) => {
            ElicitValue::String(e.default.clone().or_else(|| e.values.first().cloned())?)
        }
        P::UntitledMultiSelect(e) => ElicitValue::StringArray(
            e.default
                .clone()
                .unwrap_or_else(|| e.items.values.iter().take(1).cloned().collect()),
        ),
        P::TitledMultiSelect(e) => {
            ElicitValue::StringArray(e.default.clone().unwrap_or_else(|| {
                e.items
                    .any_of
                    .iter()
                    .take(1)
                    .map(|o| o.value.clone())
                    .collect()
            }))
        }
        _ => return None,
    })
}

/// Arguments for a tool with this `inputSchema`: every required property, with its default or
/// a value of its type. Network `$ref`s are never followed (SEP-2106), nor any other.
pub fn sample_arguments(schema: &Value) -> Value {
    match sample(schema, 0) {
        v @ Value::Object(_) => v,
        _ => Value::Object(Map::new()),
    }
}

fn sample(schema: &Value, depth: usize) -> Value {
    let Some(obj) = schema.as_object() else {
        return Value::Null;
    };
    if let Some(v) = obj.get("default").or_else(|| obj.get("const")) {
        return v.clone();
    }
    if let Some(first) = obj
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let kind = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        // `["string", "null"]` and the like: the first non-null type.
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if obj.contains_key("properties") => "object",
        _ => "string",
    };
    match kind {
        "object" if depth < 8 => {
            let properties = obj.get("properties").and_then(Value::as_object);
            let required = obj
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect::<Vec<_>>())
                .unwrap_or_default();
            let mut out = Map::new();
            for name in required {
                let property = properties.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                out.insert(name.to_owned(), sample(property, depth + 1));
            }
            Value::Object(out)
        }
        "object" => json!({}),
        "array" => json!([]),
        "integer" => json!(obj.get("minimum").and_then(Value::as_i64).unwrap_or(1)),
        "number" => obj.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(true),
        "null" => Value::Null,
        _ => {
            let min = obj.get("minLength").and_then(Value::as_u64).unwrap_or(0);
            let mut text = "conformance".to_owned();
            while (text.len() as u64) < min {
                text.push('x');
            }
            Value::String(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_the_form() {
        let params: ElicitRequestParams = serde_json::from_value(json!({
            "message": "m",
            "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
                "verified": {"type": "boolean", "default": true},
                "confirmed": {"type": "boolean"}
            }, "required": []}
        }))
        .unwrap();
        let result = serde_json::to_value(accept_with_defaults(&params)).unwrap();
        assert_eq!(
            result,
            json!({"action": "accept", "content": {
                "name": "John Doe", "age": 30, "score": 95.5, "status": "active",
                "verified": true, "confirmed": true
            }})
        );
    }

    #[test]
    fn arguments_cover_required_properties() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "minimum": 3},
            "opt": {"type": "string"},
            "profile": {"$ref": "http://example.com/schema.json"}
        }, "required": ["region", "n"]});
        assert_eq!(
            sample_arguments(&schema),
            json!({"region": "conformance", "n": 3})
        );
        assert_eq!(sample_arguments(&json!({"type": "object"})), json!({}));
    }
}
