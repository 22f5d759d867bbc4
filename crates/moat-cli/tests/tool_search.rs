//! `moat gateway` in tool search mode, with two real downstream servers (`moat serve
//! everything` as `a` and `b`): `tools/list` is the three meta-tools plus the always-listed
//! ones; a tool policy hides never appears in search results; `call_tool` meets the same
//! policy, and leaves the same audit record, as a direct call; `describe_tool` shows only
//! what the client may see; `auto` switches on above the configured size only.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use moat::Client;
use serde_json::{Value, json};

mod support;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

fn config(state: &Path, servers: &[&str], search: &str) -> String {
    let mut text = format!("state_dir = {:?}\n", state.display().to_string());
    for name in servers {
        text.push_str(&format!(
            "[servers.{name}]\ncommand = {MOAT:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n\n"
        ));
    }
    text.push_str(
        "[policy]\ndefault = \"allow\"\n\n\
         [[policy.rules]]\nname = \"no-images-from-a\"\ndecision = \"deny\"\nserver = \"a\"\ntool = \"test_image_content\"\n\n",
    );
    text.push_str(search);
    text
}

async fn start(dir: &Path, servers: &[&str], search: &str) -> (Client, std::path::PathBuf) {
    let path = dir.join("moat.toml");
    std::fs::write(&path, config(&dir.join("state"), servers, search)).expect("write config");
    let client = Client::connect_command([
        MOAT,
        "gateway",
        "--config",
        path.to_str().expect("utf-8 path"),
    ])
    .await
    .expect("the gateway starts");
    (client, path)
}

fn names(result: &moat::types::CallToolResult) -> Vec<String> {
    result
        .structured_content
        .as_ref()
        .and_then(|s| s["tools"].as_array())
        .expect("search_tools returns structuredContent.tools")
        .iter()
        .map(|t| t["name"].as_str().expect("a name").to_owned())
        .collect()
}

fn text(result: &moat::types::CallToolResult) -> String {
    serde_json::to_value(&result.content)
        .ok()
        .and_then(|c| c[0]["text"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The audit records of `exposed`, polled until there are `n`.
fn audit_of(config: &Path, exposed: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = Command::new(MOAT)
            .args(["audit", "--json", "--limit", "500", "--config"])
            .arg(config)
            .output()
            .expect("run moat audit");
        let records: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let of: Vec<Value> = records
            .into_iter()
            .filter(|r| r["exposed_name"] == exposed)
            .collect();
        if of.len() >= n || Instant::now() > deadline {
            assert!(of.len() >= n, "{n} audit record(s) of {exposed}: {of:?}");
            return of;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn search_mode_lists_meta_tools_and_keeps_every_check() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (client, config) = start(
        dir.path(),
        &["a", "b"],
        "[tool_search]\nmode = \"on\"\nalways = [\"b__greet\"]\n",
    )
    .await;

    let tools = support::tool_names(&client).await;
    let want: BTreeSet<String> = ["search_tools", "describe_tool", "call_tool", "b__greet"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(tools, want, "search mode lists the meta-tools and `always`");

    // The denied tool never appears, however plainly the query names it; its twin on b does.
    let found = client
        .call_tool(
            "search_tools",
            json!({"query": "test image content", "limit": 50}),
        )
        .await
        .expect("search_tools");
    assert_ne!(found.is_error, Some(true), "{found:?}");
    let found = names(&found);
    assert!(
        !found.iter().any(|n| n == "a__test_image_content"),
        "a hidden tool in search results: {found:?}"
    );
    assert!(
        found.iter().take(5).any(|n| n == "b__test_image_content"),
        "b__test_image_content in the top 5: {found:?}"
    );
    let scored = client
        .call_tool("search_tools", json!({"query": "say hello to someone"}))
        .await
        .expect("search_tools");
    let first = names(&scored);
    assert!(first.len() <= 8, "the default limit: {first:?}");
    assert!(
        first.iter().take(5).any(|n| n.ends_with("__greet")),
        "greet for a greeting: {first:?}"
    );
    let bad = client
        .call_tool("search_tools", json!({"query": "x", "limit": 0}))
        .await
        .expect("a bad limit is a tool error");
    assert_eq!(bad.is_error, Some(true));
    let long = client
        .call_tool("search_tools", json!({"query": "delete ".repeat(2000)}))
        .await
        .expect("an overlong query is a tool error");
    assert_eq!(long.is_error, Some(true));
    assert!(text(&long).contains("bytes"), "{long:?}");
    let missing = client
        .call_tool("search_tools", json!({"limit": 3}))
        .await
        .expect("a missing query is a tool error");
    assert_eq!(missing.is_error, Some(true));

    // describe_tool: the definition, and nothing for a hidden tool.
    let described = client
        .call_tool("describe_tool", json!({"name": "b__greet"}))
        .await
        .expect("describe_tool");
    let def = described.structured_content.expect("a definition");
    assert_eq!(def["name"], "b__greet");
    assert!(def["inputSchema"]["properties"].is_object(), "{def}");
    let hidden = client
        .call_tool("describe_tool", json!({"name": "a__test_image_content"}))
        .await
        .expect("describe_tool");
    assert_eq!(hidden.is_error, Some(true), "{hidden:?}");

    // call_tool: a denied tool is denied through it as directly, and audited the same way.
    let through = client
        .call_tool(
            "call_tool",
            json!({"name": "a__test_image_content", "arguments": {}}),
        )
        .await
        .expect("call_tool");
    assert_eq!(through.is_error, Some(true), "{through:?}");
    assert!(text(&through).contains("policy denies"), "{through:?}");
    let direct = client
        .call_tool("a__test_image_content", json!({}))
        .await
        .expect("a direct call");
    assert_eq!(direct.is_error, Some(true), "{direct:?}");
    let records = audit_of(&config, "a__test_image_content", 2);
    for r in &records[..2] {
        assert_eq!(
            (r["decision"].as_str(), r["rule"].as_str()),
            (Some("deny"), Some("rule 1 (no-images-from-a)")),
            "{r}"
        );
    }

    // An allowed tool runs through call_tool, schema checks included.
    let greeted = client
        .call_tool(
            "call_tool",
            json!({"name": "b__greet", "arguments": {"name": "search"}}),
        )
        .await
        .expect("call_tool");
    assert_ne!(greeted.is_error, Some(true), "{greeted:?}");
    assert!(text(&greeted).contains("search"), "{greeted:?}");
    let invalid = client
        .call_tool(
            "call_tool",
            json!({"name": "b__greet", "arguments": {"name": 42}}),
        )
        .await
        .expect("call_tool");
    assert_eq!(invalid.is_error, Some(true), "{invalid:?}");
    assert!(text(&invalid).contains("invalid arguments"), "{invalid:?}");
    let records = audit_of(&config, "b__greet", 2);
    assert!(
        records.iter().any(|r| r["outcome"] == "ok"),
        "the allowed call is audited: {records:?}"
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_mode_switches_on_above_the_bound_only() {
    // One server: 35 tools, under the bound of 40 (tokens not counted here).
    let dir = tempfile::tempdir().expect("temp dir");
    let (client, _) = start(
        dir.path(),
        &["a"],
        "[tool_search]\nmode = \"auto\"\nmax_tokens = 1000000\n",
    )
    .await;
    let tools = support::tool_names(&client).await;
    assert!(tools.contains("a__greet"), "{tools:?}");
    assert!(!tools.contains("search_tools"), "{tools:?}");
    client.close().await;

    // Two: 69 listed tools, over it.
    let dir = tempfile::tempdir().expect("temp dir");
    let (client, _) = start(
        dir.path(),
        &["a", "b"],
        "[tool_search]\nmode = \"auto\"\nmax_tokens = 1000000\n",
    )
    .await;
    let tools = support::tool_names(&client).await;
    assert_eq!(tools.len(), 3, "{tools:?}");
    assert!(tools.contains("search_tools"), "{tools:?}");
    client.close().await;
}

#[test]
fn check_reports_the_context_cost_and_searches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("moat.toml");
    std::fs::write(
        &path,
        config(
            &dir.path().join("state"),
            &["a", "b"],
            "[tool_search]\nmode = \"off\"\n",
        ),
    )
    .expect("write config");
    let out = Command::new(MOAT)
        .args(["gateway", "--ephemeral", "--check", "--json", "--config"])
        .arg(&path)
        .args(["--search", "greet someone"])
        .output()
        .expect("run moat gateway --check");
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let search = &report["tool_search"];
    let full = search["full_tokens"].as_u64().expect("full_tokens");
    let small = search["search_tokens"].as_u64().expect("search_tokens");
    assert_eq!(search["tools"], 69, "{report}");
    assert!(
        small * 5 < full,
        "search mode costs under a fifth of even this small catalog's list: {small} vs {full}"
    );
    let hits = report["search"].as_array().expect("search results");
    assert!(
        hits.iter()
            .take(5)
            .any(|h| h["name"].as_str().is_some_and(|n| n.ends_with("__greet"))),
        "{hits:?}"
    );
}

#[test]
fn tools_cost_counts_every_definition_largest_first() {
    let out = Command::new(MOAT)
        .args([
            "tools",
            "--cost",
            "--json",
            "--",
            MOAT,
            "serve",
            "everything",
        ])
        .output()
        .expect("run moat tools --cost");
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let cost = &report["cost"];
    let listed = report["tools"].as_array().expect("tools").len();
    let per_tool = cost["per_tool"].as_array().expect("per_tool");
    assert_eq!(cost["tokenizer"], "o200k_base", "{cost}");
    assert_eq!(cost["tools"], listed as u64, "{cost}");
    assert_eq!(per_tool.len(), listed, "one entry per listed tool");
    let tokens: Vec<u64> = per_tool
        .iter()
        .map(|t| t["tokens"].as_u64().expect("tokens"))
        .collect();
    assert!(tokens.iter().all(|&t| t > 0), "{tokens:?}");
    assert!(
        tokens.windows(2).all(|w| w[0] >= w[1]),
        "largest first: {tokens:?}"
    );
    // The whole list costs more than any one tool and no more than the tools counted one
    // by one (each of which carries its own framing).
    let total = cost["tokens"].as_u64().expect("tokens");
    assert!(
        total > tokens[0] && total <= tokens.iter().sum::<u64>(),
        "{total} vs {tokens:?}"
    );
}

/// `--check` reports the ranking a running gateway settles on: hybrid when the embedding
/// model is there (not the words-only index it answers with while embedding), lexical when
/// it is not.
#[test]
fn check_reports_the_ranking_the_gateway_settles_on() {
    let Some(model) = std::env::var_os("MOAT_MODEL_DIR").filter(|d| !d.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "MOAT_MODEL_DIR is not set: .ci/run fetches the model and sets it"
        );
        eprintln!("SKIPPED: MOAT_MODEL_DIR is not set (scripts/fetch-model.sh)");
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("moat.toml");
    std::fs::write(
        &path,
        config(
            &dir.path().join("state"),
            &["a"],
            "[tool_search]\nmode = \"on\"\n",
        ),
    )
    .expect("write config");
    for (model_dir, want) in [(Some(model.as_os_str()), "hybrid"), (None, "lexical")] {
        let mut cmd = Command::new(MOAT);
        cmd.args(["gateway", "--ephemeral", "--check", "--json", "--config"])
            .arg(&path)
            .env("HOME", dir.path())
            .env_remove("MOAT_MODEL_DIR")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("HF_HOME")
            .env_remove("HF_HUB_CACHE");
        if let Some(model_dir) = model_dir {
            cmd.env("MOAT_MODEL_DIR", model_dir);
        }
        let out = cmd.output().expect("run moat gateway --check");
        assert!(out.status.success(), "{out:?}");
        let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(report["tool_search"]["ranking"], want, "{report}");
    }
}

/// A catalog with no tools is said to be empty, with no percentage of nothing saved.
#[test]
fn check_on_an_empty_catalog_prints_no_percentage() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("moat.toml");
    std::fs::write(&path, "[policy]\ndefault = \"allow\"\n").expect("write config");
    let out = Command::new(MOAT)
        .args(["gateway", "--ephemeral", "--check", "--config"])
        .arg(&path)
        .output()
        .expect("run moat gateway --check");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("no tool definitions in the model's context"),
        "{text}"
    );
    assert!(!text.contains('%'), "{text}");
}
