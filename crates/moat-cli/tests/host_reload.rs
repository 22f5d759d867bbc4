//! `moat gateway` reloads its configuration while a client stays connected: a policy
//! change reaches the tool list at once, a new server starts, an unchanged server keeps
//! running (same process), and a broken edit leaves the running configuration in force.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use moat::Client;
use serde_json::json;

mod support;
use support::children;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

fn config(state: &Path, servers: &[&str], deny: Option<&str>) -> String {
    let mut text = format!("state_dir = {:?}\n", state.display().to_string());
    for name in servers {
        text.push_str(&format!(
            "[servers.{name}]\ncommand = {MOAT:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n\n"
        ));
    }
    // Two everything servers are 70 tools: `auto` would switch tool search on.
    text.push_str("[tool_search]\nmode = \"off\"\n\n[policy]\ndefault = \"allow\"\n");
    if let Some(tool) = deny {
        text.push_str(&format!(
            "[[policy.rules]]\nname = \"no-{tool}\"\ndecision = \"deny\"\ntool = {tool:?}\n"
        ));
    }
    text
}

/// Polls until `check` holds for the tool list, or fails after a deadline.
async fn wait_for(client: &Client, what: &str, check: impl Fn(&BTreeSet<String>) -> bool) {
    support::wait_for_tools(client, what, Duration::from_secs(15), check).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn reload_applies_policy_and_servers_without_dropping_the_session() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("moat.toml");
    let state = dir.path().join("state");
    std::fs::write(&path, config(&state, &["a"], None)).expect("write config");

    let client = Client::connect_command([
        MOAT,
        "gateway",
        "--config",
        path.to_str().expect("utf-8 path"),
    ])
    .await
    .expect("the gateway starts");
    let gateway_pid = client.child().and_then(|c| c.id()).expect("gateway pid");

    let names = support::tool_names(&client).await;
    assert!(names.contains("a__test_simple_text"), "{names:?}");
    let before = children(gateway_pid);
    assert_eq!(before.len(), 1, "one downstream server: {before:?}");

    // A deny rule and a second server.
    std::fs::write(&path, config(&state, &["a", "b"], Some("test_simple_text"))).expect("rewrite");
    wait_for(&client, "the deny rule and server b", |names| {
        !names.contains("a__test_simple_text") && names.contains("b__greet")
    })
    .await;
    let refused = client
        .call_tool("a__test_simple_text", json!({}))
        .await
        .expect("a refusal is a tool result");
    assert_eq!(refused.is_error, Some(true));
    let after = children(gateway_pid);
    assert!(
        before.is_subset(&after) && after.len() == 2,
        "server a kept running, server b started: before {before:?}, after {after:?}"
    );

    // The same session still works.
    let greeting = client
        .call_tool("a__greet", json!({"name": "reload"}))
        .await
        .expect("call after reload");
    assert_ne!(greeting.is_error, Some(true), "{greeting:?}");

    // A broken edit is reported and ignored.
    std::fs::write(&path, "[servers.a\ncommand = ").expect("break the config");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let names = support::tool_names(&client).await;
    assert!(
        names.contains("b__greet") && !names.contains("a__test_simple_text"),
        "{names:?}"
    );

    // Server b removed: its process ends, a's stays.
    std::fs::write(&path, config(&state, &["a"], Some("test_simple_text"))).expect("rewrite");
    wait_for(&client, "server b gone", |names| {
        !names.iter().any(|n| n.starts_with("b__"))
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while children(gateway_pid).len() != 1 {
        assert!(
            Instant::now() < deadline,
            "server b's process did not end: {:?}",
            children(gateway_pid)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(before.is_subset(&children(gateway_pid)));
    client.close().await;
}
