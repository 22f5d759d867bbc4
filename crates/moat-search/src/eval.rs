//! The evaluation: recall@1, recall@5 and MRR of a ranking over a catalog and a set of
//! tasks (a request and the one tool that serves it), search latency, and the context cost
//! of search mode against the full catalog. Used by the `moat-search-eval` binary and the
//! tests; the numbers in docs/benchmarks.md come from here.

use crate::{Index, Options, SearchError, ToolDoc, tokens};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One request and the tool (`server__tool`) that serves it.
#[derive(Debug, Clone, Deserialize)]
pub struct Task {
    pub query: String,
    pub tool: String,
}

/// A catalog: the tool definitions of each server, as `tools/list` gives them.
#[derive(Debug, Clone, Deserialize)]
pub struct Catalog {
    pub servers: Vec<Server>,
}

/// One server's tools.
#[derive(Debug, Clone, Deserialize)]
pub struct Server {
    pub name: String,
    pub tools: Vec<Value>,
}

impl Catalog {
    /// Reads a catalog file (`{"servers": [{"name", "tools": [...]}]}`).
    pub fn load(path: &Path) -> Result<Catalog, SearchError> {
        read_json(path)
    }

    /// Every tool as a search document, named `server__tool`.
    pub fn docs(&self) -> Vec<ToolDoc> {
        self.servers
            .iter()
            .flat_map(|s| {
                s.tools
                    .iter()
                    .filter_map(|t| ToolDoc::from_definition(&s.name, t))
            })
            .collect()
    }

    /// Every tool definition as the gateway lists it (name prefixed with its server).
    pub fn definitions(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for s in &self.servers {
            for t in &s.tools {
                let mut t = t.clone();
                if let Some(name) = t.get("name").and_then(Value::as_str).map(str::to_owned) {
                    t["name"] = Value::String(format!("{}__{name}", s.name));
                }
                out.push(t);
            }
        }
        out
    }

    /// The catalog repeated with renamed servers (`fs`, `fs_2`, `fs_3`, …) until it has at
    /// least `n` tools: a large catalog with realistic text for latency measurements.
    pub fn replicate(&self, n: usize) -> Catalog {
        let per = self
            .servers
            .iter()
            .map(|s| s.tools.len())
            .sum::<usize>()
            .max(1);
        let copies = n.div_ceil(per).max(1);
        let servers = (1..=copies)
            .flat_map(|k| {
                self.servers.iter().map(move |s| Server {
                    name: if k == 1 {
                        s.name.clone()
                    } else {
                        format!("{}_{k}", s.name)
                    },
                    tools: s.tools.clone(),
                })
            })
            .collect();
        Catalog { servers }
    }
}

/// Reads a task file (`[{"query", "tool"}]`).
pub fn load_tasks(path: &Path) -> Result<Vec<Task>, SearchError> {
    read_json(path)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, SearchError> {
    let bytes = std::fs::read(path).map_err(|source| SearchError::Io {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| SearchError::Json {
        path: path.to_owned(),
        source,
    })
}

/// The crate's own evaluation files (`crates/moat-search/eval/`).
pub fn default_catalog() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("eval")
        .join("catalog.json")
}

/// See [`default_catalog`].
pub fn default_tasks() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("eval")
        .join("tasks.json")
}

/// Where `scripts/fetch-model.sh` puts the model by default.
pub fn repo_model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../interop/models")
        .join(crate::embed::MODEL_NAME)
}

/// The model for tests and the evaluation: `$MOAT_MODEL_DIR`, else the repository's
/// `interop/models/all-MiniLM-L6-v2` when complete, else `None`.
pub fn test_model_dir() -> Result<Option<PathBuf>, SearchError> {
    if let Some(dir) = crate::Embedder::find(None)? {
        return Ok(Some(dir));
    }
    let dir = repo_model_dir();
    Ok(crate::embed::MODEL_FILES
        .iter()
        .all(|f| dir.join(f).is_file())
        .then_some(dir))
}

/// Quality of one ranking over a task set.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Metrics {
    pub tasks: usize,
    /// Share of tasks whose tool is ranked first.
    pub recall_at_1: f64,
    /// Share of tasks whose tool is among the first five.
    pub recall_at_5: f64,
    /// Mean reciprocal rank of the tool within the first ten (0 when below).
    pub mrr: f64,
}

/// Runs every task through `index` with `opts`.
pub fn evaluate(index: &Index, tasks: &[Task], opts: &Options) -> Metrics {
    let (mut r1, mut r5, mut mrr) = (0usize, 0usize, 0.0f64);
    for t in tasks {
        let hits = index.search_with(&t.query, 10, &|_| true, opts);
        if let Some(pos) = hits.iter().position(|h| h.name == t.tool) {
            r1 += usize::from(pos == 0);
            r5 += usize::from(pos < 5);
            mrr += 1.0 / (pos as f64 + 1.0);
        }
    }
    let n = tasks.len().max(1) as f64;
    Metrics {
        tasks: tasks.len(),
        recall_at_1: r1 as f64 / n,
        recall_at_5: r5 as f64 / n,
        mrr: mrr / n,
    }
}

/// The tasks a ranking misses at rank 5, with what it ranked first.
pub fn misses(index: &Index, tasks: &[Task], opts: &Options) -> Vec<(Task, Vec<String>)> {
    tasks
        .iter()
        .filter_map(|t| {
            let hits: Vec<String> = index
                .search_with(&t.query, 5, &|_| true, opts)
                .into_iter()
                .map(|h| h.name)
                .collect();
            (!hits.contains(&t.tool)).then(|| (t.clone(), hits))
        })
        .collect()
}

/// Search latency in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Latency {
    pub tools: usize,
    pub median_ms: f64,
    pub p99_ms: f64,
}

/// Times `rounds` passes of every task's query through `index` (top 5, all visible).
pub fn latency(index: &Index, tasks: &[Task], opts: &Options, rounds: usize) -> Latency {
    let mut ms = Vec::with_capacity(tasks.len() * rounds);
    for _ in 0..rounds {
        for t in tasks {
            let start = Instant::now();
            std::hint::black_box(index.search_with(&t.query, 5, &|_| true, opts));
            ms.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| {
        ms.get(((ms.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    Latency {
        tools: index.len(),
        median_ms: at(0.5),
        p99_ms: at(0.99),
    }
}

/// The meta-tools a gateway in search mode lists instead of the catalog. The gateway owns
/// the real definitions; these have the same shape and about the same wording, for the
/// token accounting here.
pub fn meta_tools() -> Vec<Value> {
    vec![
        json!({"name": "search_tools", "description": "Search the available tools by what you want to do, in your own words. Returns the best matching tool names with a one-line description; call describe_tool for a tool's input schema and call_tool to run it.",
            "inputSchema": {"type": "object", "properties": {
                "query": {"type": "string", "description": "What you want to do, e.g. 'delete a file' or 'who is free on Thursday'"},
                "limit": {"type": "integer", "description": "Maximum number of results (default 5)", "minimum": 1, "maximum": 20}},
                "required": ["query"]}}),
        json!({"name": "describe_tool", "description": "Get the full definition of a tool found with search_tools: its description and input schema.",
            "inputSchema": {"type": "object", "properties": {"name": {"type": "string", "description": "The tool's name as returned by search_tools"}}, "required": ["name"]}}),
        json!({"name": "call_tool", "description": "Call a tool found with search_tools, with arguments matching its input schema.",
            "inputSchema": {"type": "object", "properties": {
                "name": {"type": "string", "description": "The tool's name as returned by search_tools"},
                "arguments": {"type": "object", "description": "The tool's arguments"}},
                "required": ["name"]}}),
    ]
}

/// Context cost of a catalog in tokens, listed whole against search mode.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TokenCost {
    pub tools: usize,
    /// Every definition, as `tools/list` would put them in the prompt.
    pub full_catalog: usize,
    /// The three meta-tools that replace them.
    pub search_mode: usize,
    /// One `search_tools` answer of five hits (name and description each), averaged over
    /// the tasks.
    pub mean_search_result: usize,
    /// One `describe_tool` answer (a whole definition), averaged over the catalog.
    pub mean_describe_result: usize,
}

/// Token accounting for a catalog, with search answers taken from `index` over `tasks`.
pub fn token_cost(catalog: &Catalog, index: &Index, tasks: &[Task]) -> TokenCost {
    let defs = catalog.definitions();
    let by_name: std::collections::HashMap<&str, &Value> = defs
        .iter()
        .filter_map(|d| Some((d.get("name")?.as_str()?, d)))
        .collect();
    let mut search_total = 0;
    for t in tasks {
        let hits: Vec<Value> = index
            .search(&t.query, 5, &|_| true)
            .into_iter()
            .map(|h| json!({"name": h.name, "description": by_name.get(h.name.as_str()).and_then(|d| d.get("description")).cloned().unwrap_or(Value::Null)}))
            .collect();
        search_total += tokens::count(&Value::Array(hits).to_string());
    }
    let describe_total: usize = defs.iter().map(|d| tokens::count(&d.to_string())).sum();
    TokenCost {
        tools: defs.len(),
        full_catalog: tokens::tools_cost(&defs),
        search_mode: tokens::tools_cost(&meta_tools()),
        mean_search_result: search_total / tasks.len().max(1),
        mean_describe_result: describe_total / defs.len().max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        serde_json::from_value(json!({"servers": [
            {"name": "fs", "tools": [
                {"name": "delete_file", "description": "Delete a file.", "inputSchema": {"type": "object"}},
                {"name": "read_file", "description": "Read a file.", "inputSchema": {"type": "object"}}]},
            {"name": "chat", "tools": [
                {"name": "send_message", "description": "Send a message to a channel.", "inputSchema": {"type": "object"}}]}]}))
        .expect("catalog")
    }

    #[test]
    fn metrics_count_ranks() {
        let c = catalog();
        let idx = Index::build(c.docs(), None, None).expect("build");
        let tasks = vec![
            Task {
                query: "delete a file".into(),
                tool: "fs__delete_file".into(),
            },
            Task {
                query: "read file".into(),
                tool: "fs__read_file".into(),
            },
            Task {
                query: "file".into(),
                tool: "chat__send_message".into(),
            },
        ];
        let m = evaluate(&idx, &tasks, &Options::default());
        assert_eq!(m.tasks, 3);
        assert!((m.recall_at_1 - 2.0 / 3.0).abs() < 1e-9, "{m:?}");
        assert!((m.recall_at_5 - 2.0 / 3.0).abs() < 1e-9);
        assert!((m.mrr - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(misses(&idx, &tasks, &Options::default()).len(), 1);
    }

    #[test]
    fn replicate_and_definitions() {
        let c = catalog();
        let big = c.replicate(7);
        assert_eq!(big.docs().len(), 9);
        let names: std::collections::HashSet<String> =
            big.docs().into_iter().map(|d| d.name).collect();
        assert_eq!(names.len(), 9, "renamed servers keep names unique");
        assert!(names.contains("fs_3__read_file"));
        assert_eq!(c.definitions()[2]["name"], "chat__send_message");
        let idx = Index::build(c.docs(), None, None).expect("build");
        let cost = token_cost(
            &c,
            &idx,
            &[Task {
                query: "delete".into(),
                tool: "fs__delete_file".into(),
            }],
        );
        assert_eq!(cost.tools, 3);
        assert!(cost.full_catalog > 0 && cost.search_mode > 0 && cost.mean_search_result > 0);
    }
}
