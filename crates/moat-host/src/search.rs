//! Tool search mode: instead of every tool, `tools/list` shows three stable meta-tools
//! (`search_tools`, `describe_tool`, `call_tool`) and the few tools the configuration
//! always lists, so a large catalog does not fill the model's context.
//!
//! The list stays the same whatever servers come and go, which matters because popular
//! clients ignore `tools/list_changed`. Search results pass through the same policy filter
//! as the list would (a hidden tool never appears), and `call_tool` goes through exactly the
//! path of a direct call (`call::call`): schema, policy, rate, containment,
//! consent, pins, audit. Direct calls by name keep working too (through the
//! server's unknown-tool hook).
//!
//! Ranking is [`moat_search`]'s: BM25 fused with all-MiniLM-L6-v2 embeddings when a model
//! is found (said once on stderr when not, then lexical only). The index is rebuilt in the
//! background after each catalog change; tool embeddings are cached in the state directory
//! by definition hash, so a rebuild embeds only what changed.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use globset::GlobSet;
use moat::RequestContext;
use moat_protocol::types::{CallToolResult, Tool, ToolAnnotations};
use moat_search::Embedder;
use serde_json::{Value, json};

pub use crate::config::search::{SearchMode, ToolSearchConfig};
use crate::inner::Inner;
use crate::reindex::{catalog_changed, rebuild_now};
use crate::search_state::SearchState;

/// The names of the meta-tools (never `server__tool`, so they cannot collide).
pub const SEARCH_TOOLS: &str = "search_tools";
pub const DESCRIBE_TOOL: &str = "describe_tool";
pub const CALL_TOOL: &str = "call_tool";

/// Most results one search returns.
const MAX_LIMIT: usize = 50;

/// Longest query `search_tools` takes.
const MAX_QUERY_BYTES: usize = 4096;

/// What tool definitions cost in a prompt, counted with a real tokenizer (`o200k_base`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCost {
    /// Tools the client may see (policy applied).
    pub tools: usize,
    /// Tokens of every one of their definitions, as `tools/list` would carry them.
    pub full_tokens: usize,
    /// Tokens of what search mode lists instead: the meta-tools and the always-listed tools.
    pub search_tokens: usize,
    /// Whether search mode is on now.
    pub active: bool,
    /// "hybrid" or "lexical" when active.
    pub ranking: Option<&'static str>,
}

/// Decides search mode from the configuration and the catalog now listed, and switches it
/// on or off (registering or removing the meta-tools, moving tools out of or back into the
/// list). Builds a lexical index before returning, so the first search finds everything;
/// the hybrid one follows in the background (embedding a large catalog the first time
/// takes seconds, and the client should not wait for it to start).
pub(crate) async fn apply(inner: &Arc<Inner>) {
    let settings = inner.settings();
    let config = &settings.config.tool_search;
    let state = &inner.search();
    *state.always.write().unwrap_or_else(|e| e.into_inner()) =
        config.always_set().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "tool_search.always: bad glob; none listed directly");
            GlobSet::empty()
        });
    let want = match config.mode {
        SearchMode::On => true,
        SearchMode::Off => false,
        _ => {
            let listed = inner.searchable_definitions();
            listed.len() > config.max_tools
                || moat_search::tokens::tools_cost(&listed) > config.max_tokens
        }
    };
    let was = state.active.swap(want, Ordering::AcqRel);
    if want && !was {
        load_model(inner, config.model.clone()).await;
        register_meta_tools(inner);
        tracing::info!("tool search on: tools/list shows search_tools, describe_tool, call_tool");
    } else if !want && was {
        for name in [SEARCH_TOOLS, DESCRIBE_TOOL, CALL_TOOL] {
            inner.server().remove_tool(name);
        }
        *state.index.write().unwrap_or_else(|e| e.into_inner()) = None;
    }
    inner.republish_all();
    if want {
        rebuild_now(inner, false, None).await;
        catalog_changed(inner);
    }
}

/// Finds and loads the embedding model once; without one the index is lexical.
async fn load_model(inner: &Arc<Inner>, explicit: Option<PathBuf>) {
    let state = &inner.search();
    if state
        .embedder
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_some()
    {
        return;
    }
    let loaded = tokio::task::spawn_blocking(move || -> Result<Option<Embedder>, String> {
        match Embedder::find(explicit.as_deref()).map_err(|e| e.to_string())? {
            Some(dir) => Embedder::load(&dir).map(Some).map_err(|e| e.to_string()),
            None => Ok(None),
        }
    })
    .await
    .unwrap_or_else(|e| Err(e.to_string()));
    match loaded {
        Ok(Some(embedder)) => {
            *state.embedder.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(embedder));
        }
        Ok(None) => tell_once(
            state,
            "moat gateway: tool search ranks by words only: no sentence-embedding model was found \
             ($MOAT_MODEL_DIR, ~/.cache/moat/models/all-MiniLM-L6-v2, the Hugging Face cache). \
             Run `moat model fetch` for better matches (`moat model status` says what is used).",
        ),
        Err(e) => tell_once(
            state,
            &format!(
                "moat gateway: tool search ranks by words only: the embedding model could not be loaded ({e})"
            ),
        ),
    }
}

fn tell_once(state: &SearchState, message: &str) {
    if !state.told.swap(true, Ordering::AcqRel) {
        // Said on stderr itself, not only in the log: it changes what the user gets. Not
        // logged at warn as well: the log goes to the same stderr, and said twice it was.
        eprintln!("{message}");
        tracing::debug!("{message}");
    }
}

/// The three meta-tools' definitions: search, describe, call.
pub fn meta_tools() -> [Tool; 3] {
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        open_world_hint: Some(false),
        ..ToolAnnotations::default()
    };
    let search = Tool::new(
        SEARCH_TOOLS,
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in your own words (e.g. \"delete a file\", \"who is free on thursday\")."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "How many tools to return (default 8)."}
            },
            "required": ["query"]
        }),
    )
    .with_title("Search tools")
    .with_description(
        "Find the tools that can do something. This gateway has many tools and lists only these \
         three: search first, then call the best match with call_tool (describe_tool shows its \
         full definition and arguments). Results are ranked best first.",
    )
    .with_output_schema(json!({
        "type": "object",
        "properties": {
            "tools": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "title": {"type": "string"},
                        "description": {"type": "string"},
                        "score": {"type": "number"}
                    },
                    "required": ["name", "score"]
                }
            }
        },
        "required": ["tools"]
    }));
    let describe = Tool::new(
        DESCRIBE_TOOL,
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's name as search_tools gave it (server__tool)."}
            },
            "required": ["name"]
        }),
    )
    .with_title("Describe a tool")
    .with_description(
        "The full definition of one tool: its description, input schema (the arguments \
         call_tool needs) and annotations.",
    );
    let call = Tool::new(
        CALL_TOOL,
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's name as search_tools gave it (server__tool)."},
                "arguments": {"type": "object", "description": "The tool's arguments, as its input schema describes them."}
            },
            "required": ["name"]
        }),
    )
    .with_title("Call a tool")
    .with_description(
        "Call a tool found with search_tools, with its arguments. The call is checked and \
         recorded exactly as a direct call would be.",
    );
    let mut search = search;
    search.annotations = Some(read_only.clone());
    let mut describe = describe;
    describe.annotations = Some(read_only);
    [search, describe, call]
}

/// Registers the three meta-tools in one change of the registry (one `list_changed`).
fn register_meta_tools(inner: &Arc<Inner>) {
    let [search, describe, call] = meta_tools();
    let (for_search, for_describe, for_call) = (
        Arc::downgrade(inner),
        Arc::downgrade(inner),
        Arc::downgrade(inner),
    );
    inner.server().batch(|b| {
        b.tool_def(search, move |_ctx: RequestContext, args: Value| {
            let weak = for_search.clone();
            async move {
                let inner = weak.upgrade().ok_or("the gateway is shutting down")?;
                Ok::<_, String>(search_tools(&inner, &args))
            }
        })
        .tool_def(describe, move |_ctx: RequestContext, args: Value| {
            let weak = for_describe.clone();
            async move {
                let inner = weak.upgrade().ok_or("the gateway is shutting down")?;
                Ok::<_, String>(describe_tool(&inner, &args))
            }
        })
        .tool_def(call, move |ctx: RequestContext, args: Value| {
            let weak = for_call.clone();
            async move {
                let inner = weak.upgrade().ok_or_else(|| {
                    moat_protocol::ErrorObject::internal("the gateway is shutting down")
                })?;
                call_tool(inner, ctx, args).await
            }
        });
    });
}

/// `search_tools(query, limit)`: ranked names, titles and one-line descriptions.
pub(crate) fn search_tools(inner: &Arc<Inner>, args: &Value) -> CallToolResult {
    let Some(query) = args.get("query").and_then(Value::as_str) else {
        return CallToolResult::error("search_tools needs a `query` string: what you want to do");
    };
    // A request, not a document: bounded so that one call cannot hold a core for long.
    if query.len() > MAX_QUERY_BYTES {
        return CallToolResult::error(format!(
            "search_tools: the query is {} bytes; say what you want to do in under {MAX_QUERY_BYTES}",
            query.len()
        ));
    }
    let settings = inner.settings();
    let limit = match args.get("limit") {
        None | Some(Value::Null) => settings.config.tool_search.limit,
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => (n as usize).min(MAX_LIMIT),
            _ => {
                return CallToolResult::error(format!(
                    "search_tools: `limit` must be a whole number from 1 to {MAX_LIMIT}"
                ));
            }
        },
    };
    let hits = match ranked(inner, query, limit) {
        Ok(hits) => hits,
        Err(message) => return CallToolResult::error(message),
    };
    let mut lines = Vec::new();
    let mut tools = Vec::new();
    for (rank, (hit, def)) in hits.iter().enumerate() {
        let title = def.title.as_deref().unwrap_or("");
        let line = first_line(def.description.as_deref().unwrap_or(""));
        lines.push(if title.is_empty() {
            format!("{}. {} — {line}", rank + 1, hit.name)
        } else {
            format!("{}. {} ({title}) — {line}", rank + 1, hit.name)
        });
        let mut entry = json!({"name": hit.name, "score": hit.score});
        if !title.is_empty() {
            entry["title"] = json!(title);
        }
        entry["description"] = json!(line);
        tools.push(entry);
    }
    let text = if lines.is_empty() {
        format!("No tool matches {query:?}. Try other words, or a shorter request.")
    } else {
        format!(
            "{}\n\nCall one with call_tool {{\"name\": …, \"arguments\": {{…}}}}; describe_tool shows its arguments.",
            lines.join("\n")
        )
    };
    let mut result = CallToolResult::text(text);
    result.structured_content = Some(json!({ "tools": tools }));
    result
}

/// The best `limit` tools for `query` among those the client may see, with their
/// definitions.
pub(crate) fn ranked(
    inner: &Arc<Inner>,
    query: &str,
    limit: usize,
) -> Result<Vec<(moat_search::Hit, Arc<Tool>)>, &'static str> {
    let index = inner
        .search()
        .index()
        .ok_or("tool search is still indexing the catalog; try again in a moment")?;
    let listed = inner.searchable_map();
    let hits = index.search(query, limit, &|name| listed.contains_key(name));
    Ok(hits
        .into_iter()
        .filter_map(|hit| {
            let def = listed.get(&hit.name)?.clone();
            Some((hit, def))
        })
        .collect())
}

/// `describe_tool(name)`: the definition as `tools/list` would have shown it.
pub(crate) fn describe_tool(inner: &Arc<Inner>, args: &Value) -> CallToolResult {
    let Some(name) = args.get("name").and_then(Value::as_str) else {
        return CallToolResult::error("describe_tool needs a `name`: a tool's server__tool name");
    };
    match inner.searchable_map().remove(name) {
        Some(def) => match serde_json::to_value(&*def) {
            Ok(value) => CallToolResult::structured(value),
            Err(e) => {
                CallToolResult::error(format!("{name}: its definition cannot be shown ({e})"))
            }
        },
        None => CallToolResult::error(format!(
            "no tool named {name} is available; search_tools lists what there is"
        )),
    }
}

/// `call_tool(name, arguments)`: the direct call's path, unchanged.
async fn call_tool(
    inner: Arc<Inner>,
    ctx: RequestContext,
    args: Value,
) -> Result<CallToolResult, moat_protocol::ErrorObject> {
    let Some(name) = args.get("name").and_then(Value::as_str).map(str::to_owned) else {
        return Ok(CallToolResult::error(
            "call_tool needs a `name`: a tool's server__tool name",
        ));
    };
    let arguments = args.get("arguments").cloned().unwrap_or(Value::Null);
    crate::call::call(inner, ctx, &name, arguments).await
}

/// The first sentence or line of a description, at most ~160 characters.
fn first_line(description: &str) -> String {
    let line = description
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let end = line.find(". ").map(|i| i + 1).unwrap_or(line.len());
    let mut out: String = line[..end].chars().take(160).collect();
    if out.len() < line[..end].len() {
        out.push('…');
    }
    out
}

/// The context cost of the catalog in full and in search mode.
pub(crate) fn cost(inner: &Arc<Inner>) -> ToolCost {
    let listed = inner.searchable_definitions();
    let full_tokens = moat_search::tokens::tools_cost(&listed);
    let mut shown: Vec<Value> = meta_tools()
        .iter()
        .filter_map(|t| serde_json::to_value(t).ok())
        .collect();
    shown.extend(
        listed
            .iter()
            .filter(|d| {
                d.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| inner.search().always_listed(n))
            })
            .cloned(),
    );
    let active = inner.search().is_active();
    ToolCost {
        tools: listed.len(),
        full_tokens,
        search_tokens: moat_search::tokens::tools_cost(&shown),
        active,
        ranking: active.then(|| match inner.search().index().map(|i| i.mode()) {
            Some(moat_search::Mode::Hybrid) => "hybrid",
            _ => "lexical",
        }),
    }
}
