//! The portable form of a JSON Schema: what the function-calling APIs of Gemini, OpenAI and
//! Anthropic all accept, so an MCP client can hand a tool's schema to any of them as it is.
//!
//! MCP schemas are JSON Schema 2020-12; the APIs accept subsets of it (their rules are
//! written down as code, with the documents they come from, in [`super::rules`]). The
//! rewrite keeps what a value may be wherever the subsets can say it, and says the rest in
//! `description`:
//!
//! - `$ref`/`$defs` are inlined. A recursive type is expanded once; the inner occurrence
//!   becomes a schema of the same `type` whose description says it has the shape of the
//!   enclosing one (no API accepts a reference, and an infinite schema cannot be written).
//! - An optional value is simply not `required`: `null` leaves `type` arrays and `anyOf`
//!   branches (Gemini rejects type arrays), `default: null` goes. In an output schema a
//!   value that may be `null` keeps that as an `anyOf` branch `{"type": "null"}` (Gemini's
//!   `NULL` type), so a client validating structured content against it still accepts the
//!   `null` the server sends. A client that sends `null` for an optional argument anyway is
//!   still answered: serde reads it as `None`, and a gateway validates against the original.
//! - A type array of several non-null types becomes `anyOf` of single types; `oneOf`
//!   becomes `anyOf` (serde's variants are told apart by their tags, so nothing matches two);
//!   `allOf` is merged into the schema; `const` becomes a one-value `enum`.
//! - `enum` keeps string values only (Gemini's enums are strings); an enum of other values
//!   is listed in the description.
//! - `format`: `int32`/`int64` on integers and `float`/`double` on numbers stay (Gemini
//!   documents them; the others ignore them as annotations); an integer's other formats
//!   (`uint8`, `uint64`, …) become the nearest of these two, their range already in
//!   `minimum`/`maximum`; a string's `date-time` stays and other string formats move into
//!   the description.
//! - A map (`additionalProperties` with a schema) becomes an object whose description says
//!   what its values are; a tuple (`prefixItems`) becomes an array whose `items` is the
//!   `anyOf` of its members, with its length kept and its order in the description.
//! - Keywords outside the common subset (`additionalProperties`, `patternProperties`,
//!   `not`, `if`, `uniqueItems`, `examples`, `$schema`, `$id`, `$comment`, `readOnly`,
//!   `deprecated`, vendor `x-` keys, …) are dropped — MCP's `x-mcp-header` too (Gemini
//!   refuses unknown fields), so clients of a portable schema do not mirror that argument
//!   into a header, and a server serving the portable definition does not ask them to.
//! - At the root, an input schema is always an object (OpenAI and Anthropic reject
//!   `anyOf`/`oneOf`/`allOf` there): a union of objects (a Rust enum of struct variants)
//!   is flattened into one object with every variant's properties, those of all variants
//!   required, the tag's values merged into one `enum`.
//!
//! What portable schemas do not meet is OpenAI's strict mode: it wants every property
//! `required` (optional ones nullable) and `additionalProperties: false` on every object,
//! which contradicts "optional means not required" and Gemini's keyword set. See
//! [`super::rules`] for how each rule is checked.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// Which side of a tool a schema describes: arguments (`inputSchema`) drop `null`
/// entirely; results (`outputSchema`) keep it as an `anyOf` branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Side {
    /// A tool's `inputSchema` (function parameters).
    Input,
    /// A tool's `outputSchema` (structured results).
    Output,
}

const JSON_TYPES: &[&str] = &["string", "number", "integer", "boolean", "array", "object"];

/// The portable form of a tool's `inputSchema`: an object schema at the root.
pub fn portable_input(schema: &Value) -> Value {
    root_object(rewrite(schema, Side::Input))
}

/// The portable form of a tool's `outputSchema` (MCP requires an object there too).
pub fn portable_output(schema: &Value) -> Value {
    root_object(rewrite(schema, Side::Output))
}

/// The portable form of any schema (not forced to be an object).
pub fn rewrite(schema: &Value, side: Side) -> Value {
    let defs = collect_defs(schema);
    let mut cx = Cx {
        defs,
        root: schema.clone(),
        stack: Vec::new(),
        side,
    };
    cx.node(schema)
}

struct Cx {
    defs: Map<String, Value>,
    root: Value,
    /// References being expanded, to stop at recursion.
    stack: Vec<String>,
    side: Side,
}

fn collect_defs(schema: &Value) -> Map<String, Value> {
    let mut defs = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(found)) = schema.get(key) {
            for (name, def) in found {
                defs.insert(format!("#/{key}/{}", escape_pointer(name)), def.clone());
            }
        }
    }
    defs
}

fn escape_pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

impl Cx {
    fn node(&mut self, schema: &Value) -> Value {
        let obj = match schema {
            Value::Object(obj) => obj,
            // `true` or `{}`: anything. `false`: nothing, which no API can say.
            Value::Bool(_) => return json!({}),
            _ => return json!({}),
        };
        if let Some(Value::String(target)) = obj.get("$ref") {
            return self.reference(target, obj);
        }
        let mut out = Map::new();
        let mut notes: Vec<String> = Vec::new();

        // Union keywords first: the result may replace the whole node.
        let mut branches: Vec<Value> = Vec::new();
        let mut had_union = false;
        let mut nullable_branch = false;
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(items)) = obj.get(key) {
                had_union = true;
                for b in items {
                    if only_null(b) {
                        nullable_branch = true;
                    } else {
                        branches.push(self.node(b));
                    }
                }
            }
        }

        for (key, value) in obj {
            match key.as_str() {
                "type" => {}
                "format" | "enum" | "const" | "default" | "anyOf" | "oneOf" | "allOf" => {}
                "properties" => {
                    if let Value::Object(props) = value {
                        let mut mapped = Map::new();
                        for (name, prop) in props {
                            mapped.insert(name.clone(), self.node(prop));
                        }
                        out.insert("properties".into(), Value::Object(mapped));
                    }
                }
                // `items: false` after `prefixItems` is handled with the tuple.
                "items" if value.is_object() => {
                    out.insert("items".into(), self.node(value));
                }
                "prefixItems" => {
                    if let Value::Array(members) = value {
                        let members: Vec<Value> = members.iter().map(|m| self.node(m)).collect();
                        let names: Vec<String> = members.iter().map(short_type).collect();
                        notes.push(format!("A tuple: [{}].", names.join(", ")));
                        let items = union_of(dedup(members), self.side);
                        out.insert("items".into(), items);
                    }
                }
                "additionalProperties" if value.is_object() => {
                    let inner = self.node(value);
                    notes.push(format!(
                        "An object with any keys; each value: {}.",
                        short_type(&inner)
                    ));
                }
                "required" => {
                    if let Value::Array(names) = value {
                        out.insert("required".into(), Value::Array(names.clone()));
                    }
                }
                "exclusiveMinimum" => {
                    if let Some(n) = value.as_i64()
                        && is_integer(obj)
                    {
                        out.insert("minimum".into(), json!(n.saturating_add(1)));
                        continue;
                    }
                    notes.push(format!("Greater than {value}."));
                }
                "exclusiveMaximum" => {
                    if let Some(n) = value.as_i64()
                        && is_integer(obj)
                    {
                        out.insert("maximum".into(), json!(n.saturating_sub(1)));
                        continue;
                    }
                    notes.push(format!("Less than {value}."));
                }
                "description" | "title" | "minimum" | "maximum" | "minItems" | "maxItems"
                | "minLength" | "maxLength" | "pattern"
                    if !out.contains_key(key) =>
                {
                    out.insert(key.clone(), value.clone());
                }
                // Everything else is outside the common subset.
                _ => {}
            }
        }

        // allOf: merged in (serde's flatten and schemars' extensions use it for objects).
        if let Some(Value::Array(parts)) = obj.get("allOf") {
            for part in parts {
                let part = self.node(part);
                merge_into(&mut out, &part);
            }
        }

        // type: one type, never null in inputs.
        let mut types: Vec<String> = match obj.get("type") {
            Some(Value::String(t)) => vec![t.clone()],
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        let nullable_type = types.iter().any(|t| t == "null");
        // Not a JSON type at all (a typo, an OpenAPI-ism): no API can read it.
        types.retain(|t| t != "null" && JSON_TYPES.contains(&t.as_str()));

        // const / enum.
        let mut values: Option<Vec<Value>> = None;
        if let Some(c) = obj.get("const") {
            values = Some(vec![c.clone()]);
        }
        if let Some(Value::Array(e)) = obj.get("enum") {
            values = Some(e.clone());
        }
        let mut nullable_enum = false;
        if let Some(vals) = values {
            nullable_enum = vals.iter().any(Value::is_null);
            let vals: Vec<Value> = vals.into_iter().filter(|v| !v.is_null()).collect();
            if !vals.is_empty() && vals.iter().all(Value::is_string) {
                out.insert("enum".into(), Value::Array(vals));
                if types.is_empty() {
                    types.push("string".into());
                }
            } else if !vals.is_empty() {
                let listed: Vec<String> = vals.iter().map(Value::to_string).collect();
                notes.push(format!("One of: {}.", listed.join(", ")));
            }
        }

        if let Some(Value::String(format)) = obj.get("format") {
            let ty = types.first().map(String::as_str).unwrap_or("");
            match portable_format(ty, format) {
                Format::Keep(f) => {
                    out.insert("format".into(), Value::String(f.to_owned()));
                }
                Format::Describe => notes.push(format!("Format: {format}.")),
                Format::Drop => {}
            }
        }

        if let Some(default) = obj.get("default")
            && !default.is_null()
        {
            out.insert("default".into(), default.clone());
        }

        // Union branches: null ones leave (inputs) or stay as `{"type":"null"}` (outputs).
        if had_union {
            let kept = dedup(branches);
            match kept.len() {
                0 => {}
                1 => {
                    let only = kept.into_iter().next().unwrap_or_default();
                    // The node's own words win over the branch's.
                    let mut merged = match only {
                        Value::Object(m) => m,
                        _ => Map::new(),
                    };
                    for (k, v) in out {
                        merged.insert(k, v);
                    }
                    out = merged;
                }
                _ => {
                    out.insert("anyOf".into(), Value::Array(kept));
                }
            }
        }

        match types.len() {
            0 => {}
            1 => {
                if !out.contains_key("anyOf") {
                    out.insert("type".into(), Value::String(types.remove(0)));
                }
            }
            _ => {
                let alts: Vec<Value> = types.iter().map(|t| json!({ "type": t })).collect();
                out.insert("anyOf".into(), Value::Array(alts));
            }
        }
        if out.get("type").and_then(Value::as_str) == Some("array") && !out.contains_key("items") {
            out.insert("items".into(), json!({}));
        }
        if let Some(Value::Array(required)) = out.get("required") {
            let props: BTreeSet<String> = out
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            let required: Vec<Value> = required
                .iter()
                .filter(|r| r.as_str().is_some_and(|r| props.contains(r)))
                .cloned()
                .collect();
            if required.is_empty() {
                out.remove("required");
            } else {
                out.insert("required".into(), Value::Array(required));
            }
        }
        if out.get("type").and_then(Value::as_str) == Some("object")
            && !out.contains_key("properties")
        {
            out.insert("properties".into(), json!({}));
        }
        add_notes(&mut out, &notes);

        let nullable = nullable_type || nullable_enum || nullable_branch;
        if nullable && self.side == Side::Output && !is_null_schema(&Value::Object(out.clone())) {
            let desc = out.remove("description");
            let mut wrapped = Map::new();
            if let Some(d) = desc {
                wrapped.insert("description".into(), d);
            }
            let branches = match out.remove("anyOf") {
                Some(Value::Array(alts)) if out.is_empty() => alts,
                Some(alts) => {
                    out.insert("anyOf".into(), alts);
                    vec![Value::Object(out)]
                }
                None => vec![Value::Object(out)],
            };
            let mut branches = branches;
            branches.push(json!({ "type": "null" }));
            wrapped.insert("anyOf".into(), Value::Array(branches));
            return Value::Object(wrapped);
        }
        if nullable && out.is_empty() {
            // Only ever null (a unit type): say so rather than allow anything silently.
            return json!({ "description": "Always null." });
        }
        Value::Object(out)
    }

    fn reference(&mut self, target: &str, site: &Map<String, Value>) -> Value {
        let resolved = if target == "#" {
            Some(self.root.clone())
        } else {
            self.defs.get(target).cloned()
        };
        let Some(def) = resolved else {
            // Not something this schema defines (a remote document): nothing to inline.
            return describe_only(site, &format!("See {target}."));
        };
        let name = target.rsplit('/').next().unwrap_or(target).to_owned();
        let mut expanded = if self.stack.iter().any(|s| s == target) {
            // Recursion: the inner occurrence keeps the type, and says whose shape it has.
            let mut cut = Map::new();
            if let Some(t) = def.get("type").and_then(Value::as_str) {
                cut.insert("type".into(), Value::String(t.to_owned()));
                if t == "object" {
                    cut.insert("properties".into(), json!({}));
                }
                if t == "array" {
                    cut.insert("items".into(), json!({}));
                }
            }
            let shape = if target == "#" {
                "the whole argument"
            } else {
                &name
            };
            add_notes(
                &mut cut,
                &[format!("Recursive: the same shape as {shape}.")],
            );
            cut
        } else {
            self.stack.push(target.to_owned());
            let node = self.node(&def);
            self.stack.pop();
            match node {
                Value::Object(m) => m,
                _ => Map::new(),
            }
        };
        // Words at the reference site (a field's doc comment) win over the type's.
        let mut siblings = site.clone();
        siblings.remove("$ref");
        if !siblings.is_empty() {
            let site_node = self.node(&Value::Object(siblings));
            if let Value::Object(site_node) = site_node {
                for (k, v) in site_node {
                    if k == "properties" && v.as_object().is_some_and(Map::is_empty) {
                        continue;
                    }
                    expanded.insert(k, v);
                }
            }
        }
        Value::Object(expanded)
    }
}

fn describe_only(site: &Map<String, Value>, note: &str) -> Value {
    let mut out = Map::new();
    if let Some(d) = site.get("description") {
        out.insert("description".into(), d.clone());
    }
    add_notes(&mut out, &[note.to_owned()]);
    Value::Object(out)
}

fn add_notes(out: &mut Map<String, Value>, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    let extra = notes.join(" ");
    let text = match out.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => format!("{d} {extra}"),
        _ => extra,
    };
    out.insert("description".into(), Value::String(text));
}

fn is_integer(obj: &Map<String, Value>) -> bool {
    match obj.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    }
}

/// A schema only `null` matches (`{"type": "null"}`, `{"const": null}`, …).
fn only_null(schema: &Value) -> bool {
    let ty_null = match schema.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => !ts.is_empty() && ts.iter().all(|t| t == "null"),
        _ => false,
    };
    ty_null
        || schema.get("const").is_some_and(Value::is_null)
        || schema
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty() && e.iter().all(Value::is_null))
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

enum Format {
    Keep(&'static str),
    Describe,
    Drop,
}

/// Gemini documents `int32`/`int64`, `float`/`double`, and (for strings) `enum` and
/// `date-time`; the Developer API rejects other string formats.
fn portable_format(ty: &str, format: &str) -> Format {
    match ty {
        "integer" => match format {
            "int8" | "int16" | "int32" | "uint8" | "uint16" => Format::Keep("int32"),
            "int64" | "uint32" | "uint64" | "int" | "uint" | "int128" | "uint128" => {
                Format::Keep("int64")
            }
            _ => Format::Drop,
        },
        "number" => match format {
            "float" => Format::Keep("float"),
            "double" => Format::Keep("double"),
            _ => Format::Drop,
        },
        "string" => match format {
            "date-time" => Format::Keep("date-time"),
            _ => Format::Describe,
        },
        _ => Format::Drop,
    }
}

/// A type as a person reads it, for descriptions: `integer`, `array of string`, ….
fn short_type(schema: &Value) -> String {
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        if t == "array"
            && let Some(items) = schema.get("items")
        {
            return format!("array of {}", short_type(items));
        }
        return t.to_owned();
    }
    if let Some(Value::Array(alts)) = schema.get("anyOf") {
        let names: Vec<String> = alts.iter().map(short_type).collect();
        return names.join(" or ");
    }
    "any value".to_owned()
}

fn dedup(values: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

fn union_of(mut members: Vec<Value>, _side: Side) -> Value {
    match members.len() {
        0 => json!({}),
        1 => members.remove(0),
        _ => json!({ "anyOf": members }),
    }
}

/// Merges `part` (a portable schema) into `out`: properties and required are unioned, the
/// rest is taken where `out` has none.
fn merge_into(out: &mut Map<String, Value>, part: &Value) {
    let Some(part) = part.as_object() else {
        return;
    };
    for (k, v) in part {
        match (k.as_str(), out.get_mut(k)) {
            ("properties", Some(Value::Object(have))) => {
                if let Value::Object(more) = v {
                    for (name, prop) in more {
                        have.entry(name.clone()).or_insert_with(|| prop.clone());
                    }
                }
            }
            ("required", Some(Value::Array(have))) => {
                if let Value::Array(more) = v {
                    for r in more {
                        if !have.contains(r) {
                            have.push(r.clone());
                        }
                    }
                }
            }
            (_, Some(_)) => {}
            (_, None) => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The root of a tool schema: an object. A union of objects is flattened (see the module
/// documentation); anything else that is not an object becomes an object without
/// properties.
fn root_object(schema: Value) -> Value {
    let Value::Object(mut obj) = schema else {
        return json!({ "type": "object", "properties": {} });
    };
    if let Some(Value::Array(alts)) = obj.remove("anyOf") {
        let objects: Vec<&Map<String, Value>> = alts
            .iter()
            .filter_map(Value::as_object)
            .filter(|a| a.get("type").and_then(Value::as_str) == Some("object"))
            .collect();
        if objects.len() == alts.len() && !objects.is_empty() {
            let flat = flatten(&objects);
            for (k, v) in flat {
                obj.entry(k).or_insert(v);
            }
            add_notes(
                &mut obj,
                &[format!(
                    "One of {} shapes; properties that only some shapes have are optional.",
                    objects.len()
                )],
            );
        } else {
            // Not objects: nothing an object schema can say about them.
            obj.insert("type".into(), json!("object"));
            obj.insert("properties".into(), json!({}));
        }
    }
    if obj.get("type").and_then(Value::as_str) != Some("object") {
        let description = obj.remove("description");
        obj = Map::new();
        obj.insert("type".into(), json!("object"));
        obj.insert("properties".into(), json!({}));
        if let Some(d) = description {
            obj.insert("description".into(), d);
        }
    }
    obj.entry("properties").or_insert_with(|| json!({}));
    Value::Object(obj)
}

/// One object with every variant's properties; required only what all variants require.
fn flatten(variants: &[&Map<String, Value>]) -> Map<String, Value> {
    let mut props: Map<String, Value> = Map::new();
    let mut required: Option<BTreeSet<String>> = None;
    for v in variants {
        if let Some(Value::Object(p)) = v.get("properties") {
            for (name, schema) in p {
                match props.get_mut(name) {
                    None => {
                        props.insert(name.clone(), schema.clone());
                    }
                    Some(have) if have == schema => {}
                    Some(have) => merge_alternative(have, schema),
                }
            }
        }
        let mine: BTreeSet<String> = v
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        required = Some(match required {
            None => mine,
            Some(have) => have.intersection(&mine).cloned().collect(),
        });
    }
    let mut out = Map::new();
    out.insert("type".into(), json!("object"));
    out.insert("properties".into(), Value::Object(props));
    let required: Vec<Value> = required
        .unwrap_or_default()
        .into_iter()
        .map(Value::String)
        .collect();
    if !required.is_empty() {
        out.insert("required".into(), Value::Array(required));
    }
    out
}

/// A property two variants give different schemas: string enums (a tag) are merged,
/// anything else becomes `anyOf` of both.
fn merge_alternative(have: &mut Value, other: &Value) {
    let both_enums = have.get("enum").is_some() && other.get("enum").is_some();
    if both_enums
        && let (Some(Value::Array(a)), Some(Value::Array(b))) =
            (have.get_mut("enum"), other.get("enum"))
    {
        for v in b {
            if !a.contains(v) {
                a.push(v.clone());
            }
        }
        return;
    }
    let mut alts = match have.get("anyOf") {
        Some(Value::Array(a)) if have.as_object().is_some_and(|o| o.len() == 1) => a.clone(),
        _ => vec![have.clone()],
    };
    if !alts.contains(other) {
        alts.push(other.clone());
    }
    *have = json!({ "anyOf": alts });
}
