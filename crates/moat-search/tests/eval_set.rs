//! Checks the rules of the tool-search evaluation set in `eval/`.
//!
//! `eval/catalog.json` must hold at least 150 tools with unique `server__tool`
//! names, each with a description and an object `inputSchema` whose arguments
//! are described. `eval/tasks.json` must hold at least 250 tasks, each labelled
//! with a tool that exists in the catalog, and at least half of them must share
//! no word with the name of their tool (the hard cases, where the user's words
//! are not the tool's). Words are compared after simple stemming: lowercase,
//! split on anything that is not a letter or digit, strip one trailing "ing",
//! "ed", "es" or "s", then a trailing "e", so that "file", "files" and "filed"
//! count as the same word.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde_json::Value;

const MIN_TOOLS: usize = 150;
const MIN_TASKS: usize = 250;
const MIN_NO_SHARED_WORD: f64 = 0.5;

fn load(file: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("eval")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", path.display()))
}

/// Every tool of the catalog, keyed by its gateway name `server__tool`.
fn catalog_tools() -> Vec<(String, Value)> {
    let catalog = load("catalog.json");
    let servers = catalog["servers"]
        .as_array()
        .expect("catalog.json: `servers` is an array");
    let mut tools = Vec::new();
    for server in servers {
        let server_name = server["name"]
            .as_str()
            .expect("every server has a string `name`");
        let list = server["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("server {server_name}: `tools` is an array"));
        for tool in list {
            let tool_name = tool["name"]
                .as_str()
                .unwrap_or_else(|| panic!("server {server_name}: every tool has a string `name`"));
            tools.push((format!("{server_name}__{tool_name}"), tool.clone()));
        }
    }
    tools
}

/// `(query, tool)` pairs of tasks.json.
fn tasks() -> Vec<(String, String)> {
    load("tasks.json")
        .as_array()
        .expect("tasks.json is an array")
        .iter()
        .enumerate()
        .map(|(i, task)| {
            let query = task["query"]
                .as_str()
                .unwrap_or_else(|| panic!("task {i}: `query` is a string"));
            let tool = task["tool"]
                .as_str()
                .unwrap_or_else(|| panic!("task {i}: `tool` is a string"));
            (query.to_owned(), tool.to_owned())
        })
        .collect()
}

fn stem(word: &str) -> String {
    let mut w = word.to_owned();
    for suffix in ["ing", "ed", "es", "s"] {
        if w.len() > suffix.len() + 2 && w.ends_with(suffix) {
            w.truncate(w.len() - suffix.len());
            break;
        }
    }
    if w.len() > 3 && w.ends_with('e') {
        w.pop();
    }
    w
}

fn words(text: &str) -> HashSet<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(stem)
        .collect()
}

fn shares_word(query: &str, tool: &str) -> bool {
    !words(query).is_disjoint(&words(tool))
}

#[test]
fn stemming_treats_inflections_as_one_word() {
    assert!(shares_word("show the files", "fs__read_file"));
    assert!(shares_word("open Issues", "issues__create_issue"));
    assert!(shares_word("what is staged", "git__diff_staged"));
    assert!(shares_word("listing", "db__list_tables"));
    assert!(!shares_word("cat /etc/hosts", "fs__read_file"));
    assert!(!shares_word("DM sam", "chat__send_direct_message"));
}

#[test]
fn catalog_is_large_and_well_formed() {
    let tools = catalog_tools();
    assert!(
        tools.len() >= MIN_TOOLS,
        "catalog has {} tools, want at least {MIN_TOOLS}",
        tools.len()
    );

    let mut seen = HashSet::new();
    let mut per_server: HashMap<&str, usize> = HashMap::new();
    for (name, tool) in &tools {
        assert!(seen.insert(name.as_str()), "duplicate tool name {name}");
        let server = name.split("__").next().expect("split yields a first part");
        *per_server.entry(server).or_default() += 1;

        let description = tool["description"].as_str().unwrap_or_default();
        assert!(
            !description.trim().is_empty(),
            "{name}: missing description"
        );

        let schema = &tool["inputSchema"];
        assert_eq!(
            schema["type"].as_str(),
            Some("object"),
            "{name}: inputSchema must be of type object"
        );
        let properties = schema["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{name}: inputSchema has no `properties` object"));
        for (arg, spec) in properties {
            let text = spec["description"].as_str().unwrap_or_default();
            assert!(
                !text.trim().is_empty(),
                "{name}: argument `{arg}` has no description"
            );
        }
        if let Some(required) = schema.get("required") {
            for arg in required.as_array().expect("`required` is an array") {
                let arg = arg.as_str().expect("`required` holds strings");
                assert!(
                    properties.contains_key(arg),
                    "{name}: required argument `{arg}` is not in properties"
                );
            }
        }
    }

    let mut servers: Vec<_> = per_server.into_iter().collect();
    servers.sort();
    println!(
        "catalog: {} tools on {} servers",
        tools.len(),
        servers.len()
    );
    for (server, count) in servers {
        println!("  {server:<12} {count}");
    }
}

#[test]
fn tasks_are_labelled_with_catalog_tools_and_mostly_hard() {
    let names: HashSet<String> = catalog_tools().into_iter().map(|(name, _)| name).collect();
    let tasks = tasks();
    assert!(
        tasks.len() >= MIN_TASKS,
        "tasks.json has {} tasks, want at least {MIN_TASKS}",
        tasks.len()
    );

    let unknown: Vec<_> = tasks
        .iter()
        .filter(|(_, tool)| !names.contains(tool))
        .map(|(query, tool)| format!("{tool} ({query:?})"))
        .collect();
    assert!(unknown.is_empty(), "tasks name unknown tools: {unknown:#?}");

    let mut queries = HashSet::new();
    for (query, _) in &tasks {
        assert!(!query.trim().is_empty(), "a task has an empty query");
        assert!(queries.insert(query.as_str()), "duplicate query {query:?}");
    }

    let no_shared = tasks
        .iter()
        .filter(|(query, tool)| !shares_word(query, tool))
        .count();
    let share = no_shared as f64 / tasks.len() as f64;
    let covered: HashSet<&str> = tasks.iter().map(|(_, tool)| tool.as_str()).collect();
    println!(
        "tasks: {}; {no_shared} ({:.1}%) share no word with their tool's name; {} of {} tools have a task",
        tasks.len(),
        share * 100.0,
        covered.len(),
        names.len()
    );
    assert!(
        share >= MIN_NO_SHARED_WORD,
        "only {:.1}% of tasks share no word with their tool's name, want at least {:.0}%",
        share * 100.0,
        MIN_NO_SHARED_WORD * 100.0
    );
}
