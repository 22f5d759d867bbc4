//! A tool definition as the search sees it, its identity hash, and the text built from it
//! for each ranking (weighted fields for BM25, one passage for the embedding model).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::text::split_identifier;

/// One tool of the catalog, named `server__tool` as the gateway exposes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDoc {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Value,
    pub annotations: Option<Value>,
}

/// Bumped whenever the text built from a definition changes, so cached embeddings of the
/// old text are not reused.
pub(crate) const TEXT_VERSION: u32 = 3;

impl ToolDoc {
    /// Builds a document from an MCP tool definition (`name`, `title`, `description`,
    /// `inputSchema`, `annotations`), prefixing the name with its server as the gateway does.
    pub fn from_definition(server: &str, tool: &Value) -> Option<ToolDoc> {
        let name = tool.get("name")?.as_str()?;
        let text = |key: &str| tool.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(ToolDoc {
            name: format!("{server}__{name}"),
            // MCP puts the display title either at the top level or in annotations.title.
            title: text("title").or_else(|| {
                tool.pointer("/annotations/title")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }),
            description: text("description"),
            input_schema: tool.get("inputSchema").cloned().unwrap_or(Value::Null),
            annotations: tool.get("annotations").cloned(),
        })
    }

    /// SHA-256 of the definition, stable across runs: the cache key of its embedding.
    ///
    /// serde_json's maps are ordered by key in this workspace, so the serialisation is
    /// canonical; were that to change, the only effect would be cache misses.
    pub fn definition_hash(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        for part in [
            Value::String(self.name.clone()),
            self.title.clone().map_or(Value::Null, Value::String),
            self.description.clone().map_or(Value::Null, Value::String),
            self.input_schema.clone(),
            self.annotations.clone().unwrap_or(Value::Null),
        ] {
            let bytes = part.to_string();
            // Length-prefixed so that moving text between fields changes the hash.
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes.as_bytes());
        }
        h.finalize().into()
    }

    /// The tool part of `server__tool` (the whole name when there is no server prefix).
    pub fn tool_name(&self) -> &str {
        self.name.split_once("__").map_or(&self.name, |(_, t)| t)
    }

    /// The server part of `server__tool`, if any.
    pub fn server_name(&self) -> Option<&str> {
        self.name.split_once("__").map(|(s, _)| s)
    }

    /// Arguments as (name, description) pairs, nested object properties included with
    /// their parent's name, in schema order.
    pub fn arguments(&self) -> Vec<(String, Option<String>)> {
        let mut out = Vec::new();
        collect_arguments(&self.input_schema, "", 0, &mut out);
        out
    }

    /// The fields BM25 indexes, each with its weight: the tool name counts most, then the
    /// title; argument descriptions least (they often describe formats, not purpose).
    pub(crate) fn fields(&self, rich: bool) -> Vec<(f32, String)> {
        let mut f = vec![
            (3.0, split_identifier(self.tool_name())),
            (
                1.0,
                self.server_name().map(split_identifier).unwrap_or_default(),
            ),
        ];
        if let Some(t) = &self.title {
            f.push((2.0, t.clone()));
        }
        if let Some(d) = &self.description {
            f.push((1.0, d.clone()));
        }
        if rich {
            for (name, desc) in self.arguments() {
                f.push((1.0, split_identifier(&name)));
                if let Some(d) = desc {
                    f.push((0.5, d));
                }
            }
            // Annotation hints stay out: "read only" and "delete remove" on half the
            // catalog made "read" and "delete" common words, worth little where they
            // matter most (in the names of read_file and delete_file).
        }
        f
    }

    /// One passage for the sentence-embedding model: what the tool does, in words.
    pub(crate) fn embedding_text(&self, rich: bool) -> String {
        let mut s = String::new();
        if rich {
            // The server often names the domain ("calendar", "kubernetes") the request is in.
            if self.server_name().is_some() {
                s.push_str(&self.server_words());
                s.push_str(": ");
            }
        }
        s.push_str(&split_identifier(self.tool_name()));
        if let Some(t) = &self.title {
            s.push_str(". ");
            s.push_str(t);
        }
        if let Some(d) = &self.description {
            s.push_str(". ");
            s.push_str(d);
        }
        if rich {
            let args: Vec<String> = self
                .arguments()
                .iter()
                .map(|(n, _)| split_identifier(n))
                .collect();
            if !args.is_empty() {
                s.push_str(". Arguments: ");
                s.push_str(&args.join(", "));
            }
            let ann = self.annotation_words();
            if !ann.is_empty() {
                s.push_str(". ");
                s.push_str(&ann.join(", "));
            }
        }
        s
    }

    /// A short passage: server, name and title (or the description's first sentence).
    pub(crate) fn short_text(&self) -> String {
        let mut s = self.server_words();
        if !s.is_empty() {
            s.push_str(": ");
        }
        s.push_str(&split_identifier(self.tool_name()));
        let gist = self.title.clone().or_else(|| {
            self.description
                .as_deref()
                .map(|d| d.split(". ").next().unwrap_or(d).to_owned())
        });
        if let Some(g) = gist {
            s.push_str(". ");
            s.push_str(&g);
        }
        s
    }

    /// The server's name in words, with what the alias table knows of it ("fs" → "fs file
    /// system", "k8s" → "k8s kubernetes cluster").
    fn server_words(&self) -> String {
        let Some(server) = self.server_name() else {
            return String::new();
        };
        let mut words = crate::text::words(server);
        let extra = crate::alias::expand(&words);
        words.extend(extra);
        words.join(" ")
    }

    /// Behaviour hints put into words a user might say.
    fn annotation_words(&self) -> Vec<&'static str> {
        let Some(a) = &self.annotations else {
            return Vec::new();
        };
        let flag = |k: &str| a.get(k).and_then(Value::as_bool);
        let mut w = Vec::new();
        if flag("readOnlyHint") == Some(true) {
            w.push("read only");
        }
        if flag("destructiveHint") == Some(true) && flag("readOnlyHint") != Some(true) {
            w.push("delete remove destructive");
        }
        if flag("openWorldHint") == Some(true) {
            w.push("external");
        }
        w
    }
}

fn collect_arguments(
    schema: &Value,
    prefix: &str,
    depth: usize,
    out: &mut Vec<(String, Option<String>)>,
) {
    // Deeply nested schemas add little meaning and cost index size; two levels suffice.
    if depth > 1 {
        return;
    }
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, prop) in props {
        let full = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix} {name}")
        };
        let desc = prop
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        out.push((full.clone(), desc));
        collect_arguments(prop, &full, depth + 1, out);
        if let Some(items) = prop.get("items") {
            collect_arguments(items, &full, depth + 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> ToolDoc {
        ToolDoc::from_definition(
            "cal",
            &json!({"name": "getFreeBusy", "title": "Free/busy", "description": "Busy times.",
                    "inputSchema": {"type": "object", "properties": {
                        "time_min": {"type": "string", "description": "Start of the window"},
                        "who": {"type": "object", "properties": {"email": {"type": "string"}}}}},
                    "annotations": {"readOnlyHint": true}}),
        )
        .expect("valid definition")
    }

    #[test]
    fn definition_parts() {
        let d = doc();
        assert_eq!(d.name, "cal__getFreeBusy");
        assert_eq!(d.tool_name(), "getFreeBusy");
        assert_eq!(d.server_name(), Some("cal"));
        let args: Vec<String> = d.arguments().into_iter().map(|a| a.0).collect();
        assert_eq!(args, ["time_min", "who", "who email"]);
        let text = d.embedding_text(true);
        assert!(
            text.starts_with("cal calendar: get free busy. Free/busy. Busy times."),
            "{text}"
        );
        assert!(
            text.contains("time min") && text.contains("read only"),
            "{text}"
        );
        assert!(!d.embedding_text(false).contains("time min"));
    }

    #[test]
    fn hash_changes_with_any_field() {
        let a = doc();
        let mut b = a.clone();
        assert_eq!(a.definition_hash(), b.definition_hash());
        b.description = Some("Busy times!".into());
        assert_ne!(a.definition_hash(), b.definition_hash());
        let mut c = a.clone();
        c.input_schema["properties"]["extra"] = json!({"type": "string"});
        assert_ne!(a.definition_hash(), c.definition_hash());
    }
}
