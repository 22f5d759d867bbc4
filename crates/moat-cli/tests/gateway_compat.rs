//! `[compat] schemas = "portable"` through `moat gateway`, over the TypeScript reference
//! servers (`server-everything`, `server-filesystem`): every tool the gateway lists meets
//! the schema rules of Gemini, OpenAI and Anthropic (which the servers' own schemas do
//! not); calls still work; and pins hash the servers' own definitions, so switching the
//! mode holds nothing back.
//!
//! The servers live in `interop/node_modules` (installed by `.ci/run`); missing peers skip
//! the test, except under CI.

use std::path::{Path, PathBuf};
use std::time::Duration;

use moat::protocol::types::Tool;
use moat::schema::Side;
use moat::schema::rules::{Violation, check_all};
use moat::{Client, ProtocolVersion, VersionPreference};
use serde_json::json;

mod support;
use support::{MOAT, wait_for_tools};

const EVERYTHING_JS: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";
const FILESYSTEM_JS: &str = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js";
const STARTUP: Duration = Duration::from_secs(60);

fn peers() -> Option<PathBuf> {
    support::interop_dir(&[EVERYTHING_JS, FILESYSTEM_JS])
}

/// A moat.toml: both reference servers (unsandboxed: the sandbox is not what this is
/// about), every call allowed, tool search off, and `compat`.
fn write_config(dir: &Path, peers: &Path, files: &Path, compat: &str) -> PathBuf {
    let config = format!(
        "state_dir = {state:?}\n\n\
         [servers.ev]\ncommand = \"node\"\nargs = [{ev:?}, \"stdio\"]\nsandbox = false\n\n\
         [servers.fs]\ncommand = \"node\"\nargs = [{fs:?}, {files:?}]\nsandbox = false\n\n\
         [policy]\ndefault = \"allow\"\n\n\
         [tool_search]\nmode = \"off\"\n\n\
         {compat}\n",
        state = dir.join("state").to_string_lossy(),
        ev = peers.join(EVERYTHING_JS).to_string_lossy(),
        fs = peers.join(FILESYSTEM_JS).to_string_lossy(),
        files = files.to_string_lossy(),
    );
    let file = dir.join("moat.toml");
    std::fs::write(&file, config).expect("write moat.toml");
    file
}

/// A client of `moat gateway --config CONFIG`, once both servers' tools are listed.
async fn gateway(config: &Path) -> Client {
    let config = config.to_string_lossy().into_owned();
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .connect_command([MOAT, "gateway", "--config", config.as_str()])
        .await
        .expect("connect to the gateway");
    wait_for_tools(&client, "both servers' tools", STARTUP, |names| {
        names.iter().any(|n| n.starts_with("ev__")) && names.iter().any(|n| n.starts_with("fs__"))
    })
    .await;
    client
}

fn violations(tools: &[Tool]) -> Vec<(String, Violation)> {
    let mut out = Vec::new();
    for tool in tools {
        for v in check_all(Side::Input, &tool.input_schema) {
            out.push((tool.name.clone(), v));
        }
        if let Some(output) = &tool.output_schema {
            for v in check_all(Side::Output, output) {
                out.push((tool.name.clone(), v));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portable_mode_lists_schemas_every_api_accepts() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let files = dir.path().join("files");
    std::fs::create_dir(&files).expect("files dir");
    std::fs::write(files.join("hello.txt"), "hello\nworld\n").expect("file");

    // As the servers give them: rules are broken (this is what the mode is for), and the
    // tools are pinned on first sight.
    let config = write_config(dir.path(), &peers, &files, "");
    let client = gateway(&config).await;
    let as_is = client.list_all_tools().await.expect("tools/list");
    let broken = violations(&as_is);
    assert!(
        !broken.is_empty(),
        "the reference servers' own schemas were expected to break some rule"
    );
    drop(client);

    // Portable: none is broken, and nothing is held back by its pin (pins hash the
    // servers' definitions, not what the client is shown).
    let config = write_config(
        dir.path(),
        &peers,
        &files,
        "[compat]\nschemas = \"portable\"\n",
    );
    let client = gateway(&config).await;
    let portable = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<&str> = portable.iter().map(|t| t.name.as_str()).collect();
    let mut before: Vec<&str> = as_is.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    before.sort_unstable();
    assert_eq!(names, before, "the same tools, none held back");
    let broken = violations(&portable);
    assert!(
        broken.is_empty(),
        "{}",
        broken
            .iter()
            .map(|(tool, v)| format!("{tool}: {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(portable.len() > 15, "only {} tools", portable.len());

    // Calls are unchanged: arguments are checked against the servers' own schemas.
    let head = client
        .call_tool(
            "fs__read_text_file",
            json!({ "path": files.join("hello.txt"), "head": 1 }),
        )
        .await
        .expect("read_text_file");
    assert_ne!(head.is_error, Some(true), "{head:?}");
    assert_eq!(head.content[0].as_text(), Some("hello"), "{head:?}");
    let echo = client
        .call_tool("ev__echo", json!({ "message": "portable" }))
        .await
        .expect("echo");
    assert_ne!(echo.is_error, Some(true), "{echo:?}");
    let bad = client.call_tool("ev__echo", json!({ "message": 5 })).await;
    let refused = match bad {
        Ok(result) => result.is_error == Some(true),
        Err(_) => true,
    };
    assert!(refused, "a wrong argument type must still be refused");
}
