//! The schema rules of the three function-calling APIs MCP tools are most often handed to,
//! as code: [`check`] lists where a tool schema breaks one, so a test (or a host) can tell
//! before a model provider answers with a 400.
//!
//! The rules and where they are written down:
//!
//! - **Gemini** function declarations (`parameters`, `response`): "a select subset of an
//!   OpenAPI 3.0 schema object" — <https://ai.google.dev/api/caching#Schema> and
//!   <https://ai.google.dev/gemini-api/docs/function-calling>. `type` is one value of the
//!   `Type` enum (a JSON array there fails with "Proto field is not repeating, cannot start
//!   list", reported against hosts forwarding MCP schemas: gemini-cli #21094, litellm
//!   #12031); the fields are `type format title description nullable enum maxItems minItems
//!   properties required minProperties maxProperties minLength maxLength pattern example
//!   anyOf propertyOrdering default items minimum maximum` (no `$ref`, `$defs`, `oneOf`,
//!   `allOf`, `const`, `additionalProperties`, `prefixItems`); `format` is `int32`/`int64`
//!   for INTEGER, `float`/`double` for NUMBER, and for STRING the Developer API accepts only
//!   `enum` and `date-time` (<https://firebase.google.com/docs/reference/js/ai.schemashared>);
//!   `enum` is a list of strings; Vertex AI documents parameter names as starting with a
//!   letter or `_`, then letters, digits and `_`, at most 64
//!   (<https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1/FunctionDeclaration>);
//!   `required` names declared properties and an ARRAY has `items` (requests that break
//!   these fail with "property is not defined" and "items: missing field").
//! - **OpenAI** function calling: `parameters` is a JSON Schema object
//!   (<https://platform.openai.com/docs/guides/function-calling>); with `strict` the
//!   Structured Outputs subset applies
//!   (<https://platform.openai.com/docs/guides/structured-outputs#supported-schemas>): the
//!   root is an object and not `anyOf`; `allOf`, `oneOf`, `not`, `if`/`then`/`else`,
//!   `dependentRequired`, `dependentSchemas`, `patternProperties`, `unevaluatedProperties`,
//!   `propertyNames`, `minProperties`, `maxProperties`, `unevaluatedItems`, `contains`,
//!   `minContains`, `maxContains` and `uniqueItems` are not supported; string `format` is one
//!   of `date-time time date duration email hostname ipv4 ipv6 uuid`; at most 5000
//!   properties, 10 levels of nesting and 1000 enum values. Two strict rules are left out on
//!   purpose: every property `required` and `additionalProperties: false` everywhere — the
//!   first contradicts "optional means not required", the second Gemini's keyword set (see
//!   [`super::portable`]).
//! - **Anthropic** tool use: `input_schema` is a JSON Schema object describing the
//!   arguments (<https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use>);
//!   its root is `"type": "object"` and may not have `oneOf`, `allOf` or `anyOf` ("input_schema
//!   does not support oneOf, allOf, or anyOf at the top level", anthropics/claude-code#5319);
//!   every `type` is a JSON Schema type.
//!
//! One more rule is moat's own, for input schemas: no `null` type anywhere (an optional
//! argument is one that is not `required`), since the OpenAPI 3.0 subset Gemini's
//! `parameters` follows has no `null` type.

use std::fmt;

use serde_json::{Map, Value};

use super::portable::Side;

/// A model provider's function-calling API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Api {
    /// Google's Gemini API (function declarations).
    Gemini,
    /// OpenAI's function calling, in the strict-mode subset where it can be met.
    OpenAi,
    /// Anthropic's tool use (`input_schema`).
    Anthropic,
}

impl Api {
    /// All three.
    pub const ALL: [Api; 3] = [Api::Gemini, Api::OpenAi, Api::Anthropic];
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Api::Gemini => "gemini",
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
        })
    }
}

/// One place where a schema breaks one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Whose rule.
    pub api: Api,
    /// The rule's name (`single-type`, `root-object`, …).
    pub rule: &'static str,
    /// Where, as a JSON pointer into the schema.
    pub at: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.at.is_empty() { "/" } else { &self.at };
        write!(f, "{}/{} at {at}: {}", self.api, self.rule, self.message)
    }
}

const GEMINI_FIELDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

const OPENAI_UNSUPPORTED: &[&str] = &[
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
];

const OPENAI_STRING_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

const JSON_TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "array", "object", "null",
];

/// OpenAI's strict-mode bounds.
const OPENAI_MAX_PROPERTIES: usize = 5000;
const OPENAI_MAX_DEPTH: usize = 10;
const OPENAI_MAX_ENUM_VALUES: usize = 1000;

/// Where `schema` (a tool's input or output schema) breaks `api`'s rules.
pub fn check(api: Api, side: Side, schema: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut v = |rule: &'static str, at: &str, message: String| {
        out.push(Violation {
            api,
            rule,
            at: at.to_owned(),
            message,
        })
    };
    match api {
        Api::Gemini => {}
        Api::OpenAi | Api::Anthropic => root_rules(schema, &mut v),
    }
    let mut stats = Stats::default();
    walk(schema, "", 0, &mut |node, at, depth| {
        node_rules(api, side, node, at, depth, &mut stats, &mut v)
    });
    if api == Api::OpenAi {
        if stats.properties > OPENAI_MAX_PROPERTIES {
            v(
                "limits",
                "",
                format!(
                    "{} properties in all (at most {OPENAI_MAX_PROPERTIES})",
                    stats.properties
                ),
            );
        }
        if stats.enum_values > OPENAI_MAX_ENUM_VALUES {
            v(
                "limits",
                "",
                format!(
                    "{} enum values in all (at most {OPENAI_MAX_ENUM_VALUES})",
                    stats.enum_values
                ),
            );
        }
    }
    out
}

/// Where `schema` breaks any of the three APIs' rules.
pub fn check_all(side: Side, schema: &Value) -> Vec<Violation> {
    Api::ALL
        .iter()
        .flat_map(|api| check(*api, side, schema))
        .collect()
}

#[derive(Default)]
struct Stats {
    properties: usize,
    enum_values: usize,
}

fn root_rules(schema: &Value, v: &mut impl FnMut(&'static str, &str, String)) {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        v(
            "root-object",
            "",
            "the root must be `\"type\": \"object\"`".into(),
        );
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if schema.get(key).is_some() {
            v(
                "root-not-union",
                "",
                format!("`{key}` at the top level is refused"),
            );
        }
    }
}

type Check<'a> = dyn FnMut(&Map<String, Value>, &str, usize) + 'a;

/// Visits every subschema with its JSON pointer and its nesting depth (objects and arrays
/// count as levels).
fn walk(schema: &Value, at: &str, depth: usize, f: &mut Check<'_>) {
    let Some(obj) = schema.as_object() else {
        return;
    };
    f(obj, at, depth);
    let level = match obj.get("type").and_then(Value::as_str) {
        Some("object") | Some("array") => depth + 1,
        _ => depth,
    };
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(map)) = obj.get(key) {
            for (name, sub) in map {
                walk(sub, &format!("{at}/{key}/{}", pointer(name)), level, f);
            }
        }
    }
    for key in [
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
    ] {
        if let Some(sub) = obj.get(key) {
            walk(sub, &format!("{at}/{key}"), level, f);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(items)) = obj.get(key) {
            for (i, sub) in items.iter().enumerate() {
                walk(sub, &format!("{at}/{key}/{i}"), depth, f);
            }
        }
    }
}

fn pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

fn node_rules(
    api: Api,
    side: Side,
    node: &Map<String, Value>,
    at: &str,
    depth: usize,
    stats: &mut Stats,
    v: &mut impl FnMut(&'static str, &str, String),
) {
    let ty = node.get("type");
    match api {
        Api::Gemini => {
            match ty {
                Some(Value::Array(_)) => v(
                    "single-type",
                    at,
                    "`type` is a list; Gemini takes one type".into(),
                ),
                Some(Value::String(_)) | None => {}
                Some(other) => v("single-type", at, format!("`type` is {other}")),
            }
            for key in node.keys() {
                if !GEMINI_FIELDS.contains(&key.as_str()) {
                    v(
                        "keywords",
                        at,
                        format!("`{key}` is not a field of Gemini's Schema"),
                    );
                }
            }
            if let Some(Value::String(format)) = node.get("format") {
                let ok = match ty.and_then(Value::as_str) {
                    Some("integer") => ["int32", "int64"].contains(&format.as_str()),
                    Some("number") => ["float", "double"].contains(&format.as_str()),
                    Some("string") => ["enum", "date-time"].contains(&format.as_str()),
                    _ => false,
                };
                if !ok {
                    v(
                        "format",
                        at,
                        format!("format {format:?} is not one Gemini documents for this type"),
                    );
                }
            }
            if let Some(Value::Array(values)) = node.get("enum")
                && values.iter().any(|e| !e.is_string())
            {
                v(
                    "enum-strings",
                    at,
                    "`enum` has values that are not strings".into(),
                );
            }
            if let Some(Value::Array(required)) = node.get("required") {
                let props = node.get("properties").and_then(Value::as_object);
                for name in required.iter().filter_map(Value::as_str) {
                    if !props.is_some_and(|p| p.contains_key(name)) {
                        v(
                            "required-defined",
                            at,
                            format!("required {name:?} is not among the properties"),
                        );
                    }
                }
            }
            if ty.and_then(Value::as_str) == Some("array") && !node.contains_key("items") {
                v("array-items", at, "an array without `items`".into());
            }
            if side == Side::Input
                && let Some(Value::Object(props)) = node.get("properties")
            {
                for name in props.keys() {
                    if !gemini_parameter_name(name) {
                        v(
                            "parameter-names",
                            at,
                            format!("property name {name:?} is not a valid parameter name"),
                        );
                    }
                }
            }
            if side == Side::Input && mentions_null(ty) {
                v(
                    "no-null",
                    at,
                    "an argument schema allows `null`; an optional argument is one that is not required"
                        .into(),
                );
            }
        }
        Api::OpenAi => {
            for key in OPENAI_UNSUPPORTED {
                if node.contains_key(*key) {
                    v(
                        "keywords",
                        at,
                        format!("`{key}` is not supported in strict mode"),
                    );
                }
            }
            if ty.and_then(Value::as_str) == Some("string")
                && let Some(Value::String(format)) = node.get("format")
                && !OPENAI_STRING_FORMATS.contains(&format.as_str())
            {
                v(
                    "string-format",
                    at,
                    format!("string format {format:?} is not supported"),
                );
            }
            if depth > OPENAI_MAX_DEPTH {
                v(
                    "limits",
                    at,
                    format!("nested {depth} levels deep (at most {OPENAI_MAX_DEPTH})"),
                );
            }
            if let Some(Value::Object(props)) = node.get("properties") {
                stats.properties += props.len();
            }
            if let Some(Value::Array(values)) = node.get("enum") {
                stats.enum_values += values.len();
            }
        }
        Api::Anthropic => {
            let names: Vec<&Value> = match ty {
                Some(Value::Array(ts)) => ts.iter().collect(),
                Some(t) => vec![t],
                None => Vec::new(),
            };
            for t in names {
                if !t.as_str().is_some_and(|t| JSON_TYPES.contains(&t)) {
                    v("valid-types", at, format!("{t} is not a JSON Schema type"));
                }
            }
            if let Some(required) = node.get("required")
                && !required
                    .as_array()
                    .is_some_and(|r| r.iter().all(Value::is_string))
            {
                v(
                    "valid-types",
                    at,
                    "`required` is not a list of names".into(),
                );
            }
            if let Some(props) = node.get("properties")
                && !props.is_object()
            {
                v("valid-types", at, "`properties` is not an object".into());
            }
        }
    }
}

fn mentions_null(ty: Option<&Value>) -> bool {
    match ty {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => false,
    }
}

fn gemini_parameter_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && name.len() <= 64 && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    //! One test per rule: a schema that breaks it is caught, and its portable form is not.
    use serde_json::json;

    use super::*;
    use crate::schema::portable::{portable_input, portable_output};

    fn rules_hit(api: Api, side: Side, schema: &Value) -> Vec<&'static str> {
        check(api, side, schema)
            .into_iter()
            .map(|v| v.rule)
            .collect()
    }

    /// `schema` breaks `rule` of `api`, and its portable form breaks nothing.
    fn caught_and_fixed(api: Api, rule: &str, schema: Value) {
        let hit = rules_hit(api, Side::Input, &schema);
        assert!(
            hit.contains(&rule),
            "{api}/{rule} not caught in {schema}: {hit:?}"
        );
        let fixed = portable_input(&schema);
        let left = check_all(Side::Input, &fixed);
        assert!(
            left.is_empty(),
            "portable form {fixed} still breaks: {left:?}"
        );
    }

    fn obj(props: Value) -> Value {
        json!({ "type": "object", "properties": props })
    }

    #[test]
    fn gemini_single_type() {
        caught_and_fixed(
            Api::Gemini,
            "single-type",
            obj(json!({ "n": { "type": ["integer", "string"] } })),
        );
    }

    #[test]
    fn gemini_no_null() {
        caught_and_fixed(
            Api::Gemini,
            "no-null",
            obj(json!({ "n": { "anyOf": [{ "type": "integer" }, { "type": "null" }] } })),
        );
    }

    #[test]
    fn gemini_keywords() {
        caught_and_fixed(
            Api::Gemini,
            "keywords",
            json!({
                "type": "object",
                "properties": { "m": { "type": "object", "additionalProperties": { "type": "integer" } },
                                "k": { "const": "x" } },
                "$defs": {},
            }),
        );
    }

    #[test]
    fn gemini_format() {
        caught_and_fixed(
            Api::Gemini,
            "format",
            obj(
                json!({ "n": { "type": "integer", "format": "uint32", "minimum": 0 },
                        "u": { "type": "string", "format": "uri" } }),
            ),
        );
    }

    #[test]
    fn gemini_enum_strings() {
        caught_and_fixed(
            Api::Gemini,
            "enum-strings",
            obj(json!({ "n": { "type": "integer", "enum": [1, 2, 3] } })),
        );
    }

    #[test]
    fn gemini_required_defined() {
        caught_and_fixed(
            Api::Gemini,
            "required-defined",
            json!({ "type": "object", "properties": { "a": { "type": "string" } }, "required": ["a", "b"] }),
        );
    }

    #[test]
    fn gemini_array_items() {
        caught_and_fixed(
            Api::Gemini,
            "array-items",
            obj(json!({ "xs": { "type": "array" } })),
        );
    }

    #[test]
    fn gemini_parameter_names() {
        let schema = obj(json!({ "dry-run": { "type": "boolean" } }));
        assert!(rules_hit(Api::Gemini, Side::Input, &schema).contains(&"parameter-names"));
        assert!(rules_hit(Api::Gemini, Side::Output, &schema).is_empty());
        let fine = obj(json!({ "_dry_run2": { "type": "boolean" } }));
        assert!(rules_hit(Api::Gemini, Side::Input, &fine).is_empty());
    }

    #[test]
    fn openai_root_object() {
        caught_and_fixed(Api::OpenAi, "root-object", json!({ "type": "string" }));
    }

    #[test]
    fn openai_root_not_union() {
        caught_and_fixed(
            Api::OpenAi,
            "root-not-union",
            json!({ "anyOf": [ obj(json!({ "a": { "type": "string" } })),
                               obj(json!({ "b": { "type": "integer" } })) ] }),
        );
    }

    #[test]
    fn openai_keywords() {
        caught_and_fixed(
            Api::OpenAi,
            "keywords",
            obj(
                json!({ "xs": { "type": "array", "items": { "type": "string" }, "uniqueItems": true },
                        "v": { "oneOf": [{ "type": "string" }, { "type": "integer" }] } }),
            ),
        );
    }

    #[test]
    fn openai_string_format() {
        caught_and_fixed(
            Api::OpenAi,
            "string-format",
            obj(json!({ "u": { "type": "string", "format": "uri" } })),
        );
    }

    #[test]
    fn openai_limits() {
        let mut deep = json!({ "type": "string" });
        for _ in 0..12 {
            deep = obj(json!({ "d": deep }));
        }
        assert!(rules_hit(Api::OpenAi, Side::Input, &deep).contains(&"limits"));
        let values: Vec<String> = (0..1001).map(|i| format!("v{i}")).collect();
        let many = obj(json!({ "e": { "type": "string", "enum": values } }));
        assert!(rules_hit(Api::OpenAi, Side::Input, &many).contains(&"limits"));
        let shallow = obj(json!({ "d": obj(json!({ "e": { "type": "string" } })) }));
        assert!(rules_hit(Api::OpenAi, Side::Input, &shallow).is_empty());
    }

    #[test]
    fn anthropic_root_object() {
        caught_and_fixed(
            Api::Anthropic,
            "root-object",
            json!({ "type": "array", "items": { "type": "string" } }),
        );
    }

    #[test]
    fn anthropic_root_not_union() {
        caught_and_fixed(
            Api::Anthropic,
            "root-not-union",
            json!({ "type": "object", "oneOf": [ obj(json!({ "a": { "type": "string" } })),
                                                   obj(json!({ "b": { "type": "string" } })) ] }),
        );
    }

    #[test]
    fn anthropic_valid_types() {
        caught_and_fixed(
            Api::Anthropic,
            "valid-types",
            obj(json!({ "a": { "type": "text" } })),
        );
    }

    #[test]
    fn output_schemas_keep_null_as_a_branch() {
        let schema = obj(json!({ "n": { "type": ["integer", "null"], "format": "uint32" } }));
        let out = portable_output(&schema);
        assert_eq!(
            out["properties"]["n"]["anyOf"],
            json!([{ "type": "integer", "format": "int64" }, { "type": "null" }])
        );
        assert!(check_all(Side::Output, &out).is_empty(), "{out}");
    }
}
