//! Tool arguments as a person reads them, for `moat tools`: `path: string, limit?: integer,
//! mode?: "fast" | "full", tags?: array of string, range?: {start: integer, end?: integer}`.
//!
//! It reads any server's schema as the server gives it (`$ref`s, type lists with `null`,
//! `anyOf`), not only the portable form: `?` marks an argument that is not `required`, and a
//! `null` it may also be is left out there, since leaving the argument out says the same.

use serde_json::{Map, Value};

/// Nested objects with more properties than this are summarised by their names.
const SPELLED_OUT: usize = 3;
/// Enums with more values than this show the first ones and a count.
const ENUM_SHOWN: usize = 6;
/// How deep `$ref`s and nesting are followed before a type is just named.
const MAX_DEPTH: usize = 4;

/// The arguments of a tool's `inputSchema`, one `name: type` each, `?` on optional ones.
pub fn arguments(schema: &Value) -> String {
    let cx = Cx { root: schema };
    match schema.as_object() {
        Some(obj) => cx.fields(obj, 0, usize::MAX),
        None => String::new(),
    }
}

struct Cx<'a> {
    root: &'a Value,
}

impl Cx<'_> {
    /// `name: type, other?: type` for an object's properties; past `limit` properties,
    /// only names.
    fn fields(&self, obj: &Map<String, Value>, depth: usize, limit: usize) -> String {
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(props) = obj.get("properties").and_then(Value::as_object) else {
            return String::new();
        };
        if props.len() > limit {
            let names: Vec<&str> = props.keys().take(limit).map(String::as_str).collect();
            return format!("{}, … {} more", names.join(", "), props.len() - names.len());
        }
        props
            .iter()
            .map(|(name, p)| {
                let needed = required.contains(&name.as_str());
                let ty = self.type_of(p, depth + 1, !needed);
                if needed {
                    format!("{name}: {ty}")
                } else {
                    format!("{name}?: {ty}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A schema's type in words. `optional`: a `null` alternative is left unsaid.
    fn type_of(&self, schema: &Value, depth: usize, optional: bool) -> String {
        let Some(obj) = schema.as_object() else {
            return "any".to_owned();
        };
        if let Some(target) = obj.get("$ref").and_then(Value::as_str) {
            let name = target.rsplit('/').next().unwrap_or(target);
            if depth > MAX_DEPTH {
                return name.to_owned();
            }
            return match self.resolve(target) {
                Some(def) => self.type_of(def, depth + 1, optional),
                None => name.to_owned(),
            };
        }
        if let Some(c) = obj.get("const") {
            return literal(c);
        }
        if let Some(Value::Array(values)) = obj.get("enum") {
            let mut shown: Vec<String> = values
                .iter()
                .filter(|v| !(optional && v.is_null()))
                .map(literal)
                .collect();
            if shown.len() > ENUM_SHOWN {
                let more = shown.len() - (ENUM_SHOWN - 1);
                shown.truncate(ENUM_SHOWN - 1);
                shown.push(format!("… {more} more"));
            }
            return shown.join(" | ");
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(alts)) = obj.get(key) {
                let mut seen: Vec<String> = Vec::new();
                for alt in alts {
                    let t = self.type_of(alt, depth, optional);
                    if (optional && t == "null") || seen.contains(&t) {
                        continue;
                    }
                    seen.push(t);
                }
                if !seen.is_empty() {
                    return seen.join(" | ");
                }
            }
        }
        if let Some(Value::Array(parts)) = obj.get("allOf")
            && let [only] = parts.as_slice()
        {
            return self.type_of(only, depth, optional);
        }
        let types: Vec<&str> = match obj.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| !(optional && *t == "null"))
                .collect(),
            _ if obj.contains_key("properties") => vec!["object"],
            _ if obj.contains_key("items") || obj.contains_key("prefixItems") => vec!["array"],
            _ => Vec::new(),
        };
        if types.is_empty() {
            return "any".to_owned();
        }
        types
            .iter()
            .map(|t| match *t {
                "array" => self.array(obj, depth),
                "object" => self.object(obj, depth),
                other => other.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" | ")
    }

    fn array(&self, obj: &Map<String, Value>, depth: usize) -> String {
        if let Some(Value::Array(members)) = obj.get("prefixItems") {
            let members: Vec<String> = members
                .iter()
                .map(|m| self.type_of(m, depth + 1, false))
                .collect();
            return format!("[{}]", members.join(", "));
        }
        match obj.get("items") {
            Some(items) if items.is_object() && depth <= MAX_DEPTH => {
                let inner = self.type_of(items, depth + 1, false);
                if inner.contains(" | ") {
                    format!("array of ({inner})")
                } else {
                    format!("array of {inner}")
                }
            }
            _ => "array".to_owned(),
        }
    }

    fn object(&self, obj: &Map<String, Value>, depth: usize) -> String {
        let has_props = obj
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty());
        if has_props {
            if depth > MAX_DEPTH {
                return "object".to_owned();
            }
            return format!("{{{}}}", self.fields(obj, depth, SPELLED_OUT));
        }
        match obj.get("additionalProperties") {
            Some(values) if values.is_object() && depth <= MAX_DEPTH => {
                format!("map of {}", self.type_of(values, depth + 1, false))
            }
            _ => "object".to_owned(),
        }
    }

    /// A local reference (`#`, `#/$defs/Name`, `#/definitions/Name`).
    fn resolve(&self, target: &str) -> Option<&Value> {
        let pointer = target.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(pointer)
    }
}

fn literal(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::arguments;

    // Properties come in the order serde_json keeps them (sorted by name here).
    #[test]
    fn optional_scalars_read_as_their_type() {
        let s = json!({
            "type": "object",
            "properties": {
                "path": { "type": "string" },
                "limit": { "type": ["integer", "null"], "format": "uint64" },
                "head": { "anyOf": [{ "type": "number" }, { "type": "null" }] },
                "deep": { "type": "boolean", "default": false },
            },
            "required": ["path"],
        });
        assert_eq!(
            arguments(&s),
            "deep?: boolean, head?: number, limit?: integer, path: string"
        );
    }

    #[test]
    fn enums_arrays_maps_and_tuples() {
        let s = json!({
            "type": "object",
            "properties": {
                "mode": { "type": "string", "enum": ["fast", "full"] },
                "tags": { "type": "array", "items": { "type": "string" } },
                "ids": { "type": "array", "items": { "type": ["integer", "string"] } },
                "env": { "type": "object", "additionalProperties": { "type": "string" } },
                "pair": { "type": "array", "prefixItems": [{ "type": "integer" }, { "type": "string" }] },
                "many": { "enum": ["a", "b", "c", "d", "e", "f", "g", "h"] },
                "kind": { "const": "circle" },
            },
            "required": ["mode", "tags", "ids", "env", "pair", "many", "kind"],
        });
        assert_eq!(
            arguments(&s),
            "env: map of string, ids: array of (integer | string), kind: \"circle\", \
             many: \"a\" | \"b\" | \"c\" | \"d\" | \"e\" | … 3 more, mode: \"fast\" | \"full\", \
             pair: [integer, string], tags: array of string"
        );
    }

    #[test]
    fn nested_objects_are_summarised_and_refs_followed() {
        let s = json!({
            "type": "object",
            "$defs": {
                "Range": { "type": "object", "properties": {
                    "start": { "type": "integer" }, "end": { "type": "integer" } },
                    "required": ["start"] },
                "Big": { "type": "object", "properties": {
                    "a": {}, "b": {}, "c": {}, "d": {}, "e": {} } },
                "Tree": { "type": "object", "properties": {
                    "children": { "type": "array", "items": { "$ref": "#/$defs/Tree" } } } },
            },
            "properties": {
                "range": { "$ref": "#/$defs/Range" },
                "big": { "anyOf": [{ "$ref": "#/$defs/Big" }, { "type": "null" }] },
                "edits": { "type": "array", "items": { "$ref": "#/$defs/Range" } },
                "tree": { "$ref": "#/$defs/Tree" },
                "anything": {},
            },
            "required": ["range", "edits", "tree", "anything"],
        });
        assert_eq!(
            arguments(&s),
            "anything: any, big?: {a, b, c, … 2 more}, edits: array of {end?: integer, start: integer}, \
             range: {end?: integer, start: integer}, tree: {children?: array of object}"
        );
    }

    #[test]
    fn a_required_nullable_argument_says_null() {
        let s = json!({
            "type": "object",
            "properties": { "cursor": { "type": ["string", "null"] } },
            "required": ["cursor"],
        });
        assert_eq!(arguments(&s), "cursor: string | null");
    }
}
