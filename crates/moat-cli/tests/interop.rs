//! Interoperability tests against real third-party MCP peers.
//!
//! * our client (`moat tools|call|resources|read|prompts|prompt`) against the
//!   reference servers `@modelcontextprotocol/server-everything`,
//!   `@modelcontextprotocol/server-filesystem` (TypeScript SDK 1.x) and
//!   `mcp-server-time` (Python SDK 2.x), on every protocol revision each
//!   of them speaks;
//! * our server (`moat serve everything`) driven by the official TypeScript
//!   SDK clients, 1.x and 2.x (`interop/ts_client.mjs [--sdk v2]`), and the
//!   Python SDK client (`interop/py_client.py`). TS 2.x and Python 2.x also
//!   speak the stateless 2026-07-28 revision.
//!
//! The peers live in `interop/` (see interop/README.md) and are installed by
//! `.ci/run`. Their location defaults to `$CARGO_MANIFEST_DIR/../../interop`
//! and can be overridden with `MOAT_INTEROP_DIR`. When they are missing the
//! tests print a notice and pass, except under CI (`CI` set), where they fail.
//!
//! Every child process runs in its own process group with a deadline; on
//! timeout the whole group is killed, so a hung peer fails the test instead of
//! hanging it.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

mod support;
use support::json::{array, assert_contains_all, is_error, strings, text_of};
use support::{Leftovers, Peers, Run};

/// Deadline for one child process (moat, or an SDK client driving moat).
const TIMEOUT: Duration = Duration::from_secs(60);
/// How long the output pipes may stay open after the child exited (a longer
/// wait means a descendant, e.g. the spawned MCP server, outlived it).
const PIPE_GRACE: Duration = Duration::from_secs(10);

/// Revisions negotiated through the `initialize` handshake.
const HANDSHAKE_REVISIONS: [&str; 3] = ["2024-11-05", "2025-06-18", "2025-11-25"];
/// The stateless revision (`server/discover`, per-request `_meta`).
const MODERN_REVISION: &str = "2026-07-28";

const EVERYTHING_JS: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";
const FILESYSTEM_JS: &str = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js";
const TIME_SERVER: &str = ".venv/bin/mcp-server-time";
const VENV_PYTHON: &str = ".venv/bin/python";

// ---------------------------------------------------------------------------
// Locating the peers
// ---------------------------------------------------------------------------

/// The reference servers among the peers.
trait Servers {
    fn everything(&self) -> Vec<String>;
    fn filesystem(&self, root: &Path) -> Vec<String>;
    fn time(&self) -> Vec<String>;
}

impl Servers for Peers {
    /// `node .../server-everything/dist/index.js stdio`
    fn everything(&self) -> Vec<String> {
        vec!["node".into(), self.path(EVERYTHING_JS), "stdio".into()]
    }

    /// `node .../server-filesystem/dist/index.js DIR`
    fn filesystem(&self, root: &Path) -> Vec<String> {
        vec![
            "node".into(),
            self.path(FILESYSTEM_JS),
            root.to_string_lossy().into_owned(),
        ]
    }

    /// `.venv/bin/mcp-server-time --local-timezone UTC`
    fn time(&self) -> Vec<String> {
        vec![
            self.path(TIME_SERVER),
            "--local-timezone".into(),
            "UTC".into(),
        ]
    }
}

/// Finds the installed peers, or returns `None` (test skipped) when they are
/// missing outside CI. Under CI a missing peer is a test failure.
fn peers() -> Option<Peers> {
    support::peers(&[
        EVERYTHING_JS,
        FILESYSTEM_JS,
        "node_modules/@modelcontextprotocol/sdk/package.json",
        "node_modules/@modelcontextprotocol/client/package.json",
        TIME_SERVER,
        VENV_PYTHON,
        "ts_client.mjs",
        "py_client.py",
    ])
}

// ---------------------------------------------------------------------------
// Running children with a deadline
// ---------------------------------------------------------------------------

/// Runs `argv` (see [`support::run`]), failing past [`TIMEOUT`] or if a server it spawned
/// outlives it.
fn run(argv: &[String]) -> Run {
    support::run(argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail)
}

/// `moat ARGS... -- SERVER...`
fn moat(args: &[&str], server: &[String]) -> Run {
    let mut argv = vec![env!("CARGO_BIN_EXE_moat").to_owned()];
    argv.extend(args.iter().map(|s| (*s).to_owned()));
    argv.push("--".into());
    argv.extend(server.iter().cloned());
    run(&argv)
}

/// `--protocol REV` (omitted for `None`, i.e. the default `auto`).
fn with_protocol<'a>(mut args: Vec<&'a str>, rev: Option<&'a str>) -> Vec<&'a str> {
    if let Some(rev) = rev {
        args.push("--protocol");
        args.push(rev);
    }
    args
}

// ---------------------------------------------------------------------------
// JSON helpers
// ---------------------------------------------------------------------------

fn assert_protocol(out: &Value, rev: Option<&str>, default: &str) {
    let want = rev.unwrap_or(default);
    assert_eq!(
        out.get("protocolVersion").and_then(Value::as_str),
        Some(want),
        "negotiated protocolVersion in {out:#}"
    );
}

fn assert_server_name(out: &Value, name: &str) {
    assert_eq!(
        out.pointer("/serverInfo/name").and_then(Value::as_str),
        Some(name),
        "serverInfo.name in {out:#}"
    );
}

// ---------------------------------------------------------------------------
// Our client against @modelcontextprotocol/server-everything
// ---------------------------------------------------------------------------

const EVERYTHING_NAME: &str = "mcp-servers/everything";
/// server-everything runs on TypeScript SDK 1.x, whose newest revision is this.
const EVERYTHING_LATEST: &str = "2025-11-25";

fn client_vs_everything(rev: Option<&str>) {
    let Some(p) = peers() else { return };
    let srv = p.everything();

    // tools
    let out = moat(&with_protocol(vec!["tools", "--json"], rev), &srv).json(0);
    assert_protocol(&out, rev, EVERYTHING_LATEST);
    assert_server_name(&out, EVERYTHING_NAME);
    assert_contains_all(
        &strings(&out, "tools", Some("name")),
        &[
            "echo",
            "get-sum",
            "get-tiny-image",
            "get-structured-content",
        ],
        "everything tools",
    );
    for tool in array(&out, "tools") {
        assert_eq!(
            tool.pointer("/inputSchema/type").and_then(Value::as_str),
            Some("object"),
            "tool without object inputSchema: {tool}"
        );
    }

    // call: echo echoes
    let result = moat(
        &with_protocol(
            vec![
                "call",
                "echo",
                "--args",
                r#"{"message":"hello from moat"}"#,
                "--json",
            ],
            rev,
        ),
        &srv,
    )
    .json(0);
    assert!(!is_error(&result), "echo isError: {result:#}");
    assert_eq!(
        text_of(&result["content"]),
        "Echo: hello from moat",
        "{result:#}"
    );

    // call: get-sum adds
    let result = moat(
        &with_protocol(
            vec!["call", "get-sum", "--args", r#"{"a":20,"b":22}"#, "--json"],
            rev,
        ),
        &srv,
    )
    .json(0);
    assert!(
        text_of(&result["content"]).contains("42"),
        "get-sum: {result:#}"
    );

    // call: get-tiny-image returns an image block
    let result = moat(
        &with_protocol(
            vec!["call", "get-tiny-image", "--args", "{}", "--json"],
            rev,
        ),
        &srv,
    )
    .json(0);
    let image = array(&result, "content")
        .iter()
        .find(|b| b["type"] == "image")
        .unwrap_or_else(|| panic!("no image block: {result:#}"));
    assert_eq!(image["mimeType"], "image/png", "{image}");
    assert!(
        image["data"].as_str().is_some_and(|d| d.len() > 20),
        "image without base64 data: {image}"
    );

    // call: invalid arguments are a tool error -> exit code 3, result still printed
    let result = moat(
        &with_protocol(vec!["call", "echo", "--args", "{}", "--json"], rev),
        &srv,
    )
    .json(3);
    assert!(is_error(&result), "expected isError: {result:#}");

    // resources
    let out = moat(&with_protocol(vec!["resources", "--json"], rev), &srv).json(0);
    assert_protocol(&out, rev, EVERYTHING_LATEST);
    assert_server_name(&out, EVERYTHING_NAME);
    assert_contains_all(
        &strings(&out, "resources", Some("uri")),
        &["demo://resource/static/document/architecture.md"],
        "everything resources",
    );
    assert_contains_all(
        &strings(&out, "resourceTemplates", Some("uriTemplate")),
        &[
            "demo://resource/dynamic/text/{resourceId}",
            "demo://resource/dynamic/blob/{resourceId}",
        ],
        "everything resource templates",
    );

    // read: static text
    let uri = "demo://resource/static/document/architecture.md";
    let result = moat(&with_protocol(vec!["read", uri, "--json"], rev), &srv).json(0);
    let contents = array(&result, "contents");
    assert_eq!(contents[0]["uri"], uri, "{result:#}");
    assert!(
        contents[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Everything Server")),
        "read {uri}: {result:#}"
    );

    // read: templated text resource
    let uri = "demo://resource/dynamic/text/7";
    let result = moat(&with_protocol(vec!["read", uri, "--json"], rev), &srv).json(0);
    let contents = array(&result, "contents");
    assert!(
        contents[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Resource 7")),
        "read {uri}: {result:#}"
    );

    // read: templated blob resource
    let uri = "demo://resource/dynamic/blob/3";
    let result = moat(&with_protocol(vec!["read", uri, "--json"], rev), &srv).json(0);
    let contents = array(&result, "contents");
    assert!(
        contents[0]["blob"].as_str().is_some_and(|b| !b.is_empty()),
        "read {uri}: {result:#}"
    );

    // prompts
    let out = moat(&with_protocol(vec!["prompts", "--json"], rev), &srv).json(0);
    assert_protocol(&out, rev, EVERYTHING_LATEST);
    assert_server_name(&out, EVERYTHING_NAME);
    assert_contains_all(
        &strings(&out, "prompts", Some("name")),
        &["simple-prompt", "args-prompt", "resource-prompt"],
        "everything prompts",
    );
    let args_prompt = array(&out, "prompts")
        .iter()
        .find(|p| p["name"] == "args-prompt")
        .expect("args-prompt listed");
    let city = array(args_prompt, "arguments")
        .iter()
        .find(|a| a["name"] == "city")
        .unwrap_or_else(|| panic!("args-prompt has no `city` argument: {args_prompt}"));
    assert_eq!(city["required"], true, "{args_prompt}");

    // prompt get: no arguments
    let result = moat(
        &with_protocol(
            vec!["prompt", "simple-prompt", "--args", "{}", "--json"],
            rev,
        ),
        &srv,
    )
    .json(0);
    let messages = array(&result, "messages");
    assert_eq!(messages[0]["role"], "user", "{result:#}");
    assert!(
        messages[0]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("simple prompt")),
        "{result:#}"
    );

    // prompt get: with arguments
    let result = moat(
        &with_protocol(
            vec![
                "prompt",
                "args-prompt",
                "--args",
                r#"{"city":"Reykjavik"}"#,
                "--json",
            ],
            rev,
        ),
        &srv,
    )
    .json(0);
    assert!(
        array(&result, "messages")[0]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Reykjavik")),
        "{result:#}"
    );
}

#[test]
fn client_vs_everything_2024_11_05() {
    client_vs_everything(Some(HANDSHAKE_REVISIONS[0]));
}

#[test]
fn client_vs_everything_2025_06_18() {
    client_vs_everything(Some(HANDSHAKE_REVISIONS[1]));
}

#[test]
fn client_vs_everything_2025_11_25() {
    client_vs_everything(Some(HANDSHAKE_REVISIONS[2]));
}

/// Without `--protocol` (auto) we must end up on the server's newest revision.
#[test]
fn client_vs_everything_auto() {
    client_vs_everything(None);
}

#[test]
fn client_vs_everything_explicit_auto() {
    let Some(p) = peers() else { return };
    let out = moat(&["tools", "--json", "--protocol", "auto"], &p.everything()).json(0);
    assert_protocol(&out, None, EVERYTHING_LATEST);
}

// ---------------------------------------------------------------------------
// Our client against @modelcontextprotocol/server-filesystem
// ---------------------------------------------------------------------------

/// A fresh directory with `hello.txt`, removed on drop.
struct TempTree {
    root: PathBuf,
}

impl TempTree {
    fn new(tag: &str) -> TempTree {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let root =
            std::env::temp_dir().join(format!("moat-interop-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(root.join("sub")).expect("create temp dir");
        // server-filesystem resolves symlinks; give it the canonical path.
        let root = root.canonicalize().expect("canonicalize temp dir");
        std::fs::write(root.join("hello.txt"), FS_FILE_TEXT).expect("write hello.txt");
        std::fs::write(root.join("sub/nested.txt"), "nested\n").expect("write nested.txt");
        TempTree { root }
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

const FS_FILE_TEXT: &str = "hello from moat interop\nsecond line\n";
const FILESYSTEM_NAME: &str = "secure-filesystem-server";

fn client_vs_filesystem(rev: Option<&str>) {
    let Some(p) = peers() else { return };
    let tree = TempTree::new("fs");
    let srv = p.filesystem(&tree.root);
    let root = tree.root.to_string_lossy().into_owned();
    let hello = tree.root.join("hello.txt").to_string_lossy().into_owned();

    let out = moat(&with_protocol(vec!["tools", "--json"], rev), &srv).json(0);
    assert_protocol(&out, rev, EVERYTHING_LATEST);
    assert_server_name(&out, FILESYSTEM_NAME);
    assert_contains_all(
        &strings(&out, "tools", Some("name")),
        &[
            "read_text_file",
            "list_directory",
            "write_file",
            "list_allowed_directories",
        ],
        "filesystem tools",
    );

    // read_text_file returns the file text
    let args = json!({ "path": hello }).to_string();
    let result = moat(
        &with_protocol(
            vec!["call", "read_text_file", "--args", &args, "--json"],
            rev,
        ),
        &srv,
    )
    .json(0);
    assert!(!is_error(&result), "{result:#}");
    assert_eq!(text_of(&result["content"]), FS_FILE_TEXT, "{result:#}");

    // list_directory sees the file and the subdirectory
    let args = json!({ "path": root }).to_string();
    let result = moat(
        &with_protocol(
            vec!["call", "list_directory", "--args", &args, "--json"],
            rev,
        ),
        &srv,
    )
    .json(0);
    let listing = text_of(&result["content"]);
    assert!(
        listing.contains("[FILE] hello.txt") && listing.contains("[DIR] sub"),
        "list_directory: {result:#}"
    );

    // write_file really writes
    let written = tree.root.join("written.txt");
    let args =
        json!({ "path": written.to_string_lossy(), "content": "written by moat\n" }).to_string();
    let result = moat(
        &with_protocol(vec!["call", "write_file", "--args", &args, "--json"], rev),
        &srv,
    )
    .json(0);
    assert!(!is_error(&result), "{result:#}");
    assert_eq!(
        std::fs::read_to_string(&written).ok().as_deref(),
        Some("written by moat\n"),
        "write_file result: {result:#}"
    );

    // outside the allowed directory: a tool error, exit code 3
    let args = json!({ "path": "/etc/passwd" }).to_string();
    let result = moat(
        &with_protocol(
            vec!["call", "read_text_file", "--args", &args, "--json"],
            rev,
        ),
        &srv,
    )
    .json(3);
    assert!(is_error(&result), "{result:#}");
    assert!(
        text_of(&result["content"]).contains("Access denied"),
        "{result:#}"
    );
}

#[test]
fn client_vs_filesystem_2024_11_05() {
    client_vs_filesystem(Some(HANDSHAKE_REVISIONS[0]));
}

#[test]
fn client_vs_filesystem_2025_06_18() {
    client_vs_filesystem(Some(HANDSHAKE_REVISIONS[1]));
}

#[test]
fn client_vs_filesystem_2025_11_25() {
    client_vs_filesystem(Some(HANDSHAKE_REVISIONS[2]));
}

// ---------------------------------------------------------------------------
// Our client against mcp-server-time (Python SDK 2.x, speaks 2026-07-28 too)
// ---------------------------------------------------------------------------

const TIME_NAME: &str = "mcp-time";
/// The Python SDK 2.x server answers `server/discover`, so auto lands here.
const TIME_LATEST: &str = MODERN_REVISION;

fn client_vs_time(rev: Option<&str>) {
    let Some(p) = peers() else { return };
    let srv = p.time();

    let out = moat(&with_protocol(vec!["tools", "--json"], rev), &srv).json(0);
    assert_protocol(&out, rev, TIME_LATEST);
    assert_server_name(&out, TIME_NAME);
    assert_contains_all(
        &strings(&out, "tools", Some("name")),
        &["get_current_time", "convert_time"],
        "time tools",
    );

    // get_current_time reports the requested timezone
    let result = moat(
        &with_protocol(
            vec![
                "call",
                "get_current_time",
                "--args",
                r#"{"timezone":"Europe/Paris"}"#,
                "--json",
            ],
            rev,
        ),
        &srv,
    )
    .json(0);
    assert!(!is_error(&result), "{result:#}");
    let text = text_of(&result["content"]);
    let parsed: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("get_current_time text is not JSON ({e}): {result:#}"));
    assert_eq!(parsed["timezone"], "Europe/Paris", "{result:#}");
    assert!(
        parsed["datetime"].as_str().is_some_and(|d| d.len() >= 19),
        "{result:#}"
    );
    assert_eq!(
        result
            .pointer("/structuredContent/timezone")
            .and_then(Value::as_str),
        Some("Europe/Paris"),
        "structuredContent: {result:#}"
    );

    // convert_time does the arithmetic
    let result = moat(
        &with_protocol(
            vec![
                "call",
                "convert_time",
                "--args",
                r#"{"source_timezone":"UTC","time":"12:00","target_timezone":"Asia/Tokyo"}"#,
                "--json",
            ],
            rev,
        ),
        &srv,
    )
    .json(0);
    let converted: Value = serde_json::from_str(&text_of(&result["content"]))
        .unwrap_or_else(|e| panic!("convert_time text is not JSON ({e}): {result:#}"));
    assert!(
        converted
            .pointer("/target/datetime")
            .and_then(Value::as_str)
            .is_some_and(|d| d.contains("T21:00:00+09:00")),
        "convert_time: {result:#}"
    );
    assert_eq!(converted["time_difference"], "+9.0h", "{result:#}");

    // unknown timezone: tool error, exit code 3
    let result = moat(
        &with_protocol(
            vec![
                "call",
                "get_current_time",
                "--args",
                r#"{"timezone":"Mars/Olympus_Mons"}"#,
                "--json",
            ],
            rev,
        ),
        &srv,
    )
    .json(3);
    assert!(is_error(&result), "{result:#}");

    // resources / prompts: capability advertised, lists empty
    let out = moat(&with_protocol(vec!["resources", "--json"], rev), &srv).json(0);
    assert_protocol(&out, rev, TIME_LATEST);
    assert_eq!(array(&out, "resources").len(), 0, "{out:#}");
    let out = moat(&with_protocol(vec!["prompts", "--json"], rev), &srv).json(0);
    assert_protocol(&out, rev, TIME_LATEST);
    assert_eq!(array(&out, "prompts").len(), 0, "{out:#}");
}

#[test]
fn client_vs_time_2024_11_05() {
    client_vs_time(Some(HANDSHAKE_REVISIONS[0]));
}

#[test]
fn client_vs_time_2025_06_18() {
    client_vs_time(Some(HANDSHAKE_REVISIONS[1]));
}

#[test]
fn client_vs_time_2025_11_25() {
    client_vs_time(Some(HANDSHAKE_REVISIONS[2]));
}

#[test]
fn client_vs_time_2026_07_28() {
    client_vs_time(Some(MODERN_REVISION));
}

/// Without `--protocol` (auto) we must reach the stateless revision.
#[test]
fn client_vs_time_auto() {
    client_vs_time(None);
}

// ---------------------------------------------------------------------------
// Official SDK clients against `moat serve everything`
// ---------------------------------------------------------------------------

const PROMPT_ARG1: &str = "alpha-value-1";
const PROMPT_ARG2: &str = "beta-value-2";

/// Runs an SDK client script (`ts_client.mjs` / `py_client.py`) against our
/// server and returns its JSON summary.
fn sdk_client_vs_moat(client: Vec<String>, rev: Option<&str>) -> Value {
    let prompt_args = json!({ "arg1": PROMPT_ARG1, "arg2": PROMPT_ARG2 }).to_string();
    let mut argv = client;
    if let Some(rev) = rev {
        argv.extend(["--protocol".into(), rev.into()]);
    }
    for a in [
        "--call",
        "test_simple_text",
        "{}",
        "--call",
        "test_error_handling",
        "{}",
        "--read",
        "test://static-text",
        "--prompt",
        "test_simple_prompt",
        "{}",
        "--prompt",
        "test_prompt_with_arguments",
        &prompt_args,
        "--timeout",
        "50",
        "--",
        env!("CARGO_BIN_EXE_moat"),
        "serve",
        "everything",
    ] {
        argv.push(a.to_owned());
    }
    let out = run(&argv).json(0);

    if let Some(rev) = rev {
        assert_eq!(out["protocolVersion"], rev, "negotiated revision: {out:#}");
    }
    assert!(
        out.pointer("/serverInfo/name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty()),
        "serverInfo.name: {out:#}"
    );

    assert_contains_all(
        &out["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools capability/list: {out:#}"))
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect::<Vec<_>>(),
        &[
            "test_simple_text",
            "test_image_content",
            "test_audio_content",
            "test_embedded_resource",
            "test_multiple_content_types",
            "test_tool_with_logging",
            "test_error_handling",
        ],
        "moat everything tools",
    );

    let calls = array(&out, "calls");
    let simple = &calls[0]["result"];
    assert!(!is_error(simple), "test_simple_text isError: {simple:#}");
    assert!(
        !text_of(&simple["content"]).trim().is_empty(),
        "test_simple_text returned no text: {simple:#}"
    );
    let failing = &calls[1]["result"];
    assert!(
        is_error(failing),
        "test_error_handling must set isError: {failing:#}"
    );
    assert!(
        !text_of(&failing["content"]).trim().is_empty(),
        "test_error_handling should explain the error: {failing:#}"
    );

    assert_contains_all(
        &strings(&out, "resources", Some("uri")),
        &["test://static-text"],
        "moat everything resources",
    );
    assert_contains_all(
        &strings(&out, "resourceTemplates", Some("uriTemplate")),
        &["test://template/{id}/data"],
        "moat everything resource templates",
    );
    let read = &array(&out, "reads")[0]["result"];
    let contents = array(read, "contents");
    assert_eq!(contents[0]["uri"], "test://static-text", "{read:#}");
    assert!(
        contents[0]["text"].as_str().is_some_and(|t| !t.is_empty()),
        "test://static-text has no text: {read:#}"
    );

    assert_contains_all(
        &strings(&out, "prompts", Some("name")),
        &["test_simple_prompt", "test_prompt_with_arguments"],
        "moat everything prompts",
    );
    let with_args = array(&out, "prompts")
        .iter()
        .find(|p| p["name"] == "test_prompt_with_arguments")
        .expect("listed above");
    assert_contains_all(
        &strings(with_args, "arguments", Some("name")),
        &["arg1", "arg2"],
        "test_prompt_with_arguments arguments",
    );
    let gets = array(&out, "gets");
    let simple_prompt = &gets[0]["result"];
    assert!(
        !array(simple_prompt, "messages").is_empty(),
        "test_simple_prompt has no messages: {simple_prompt:#}"
    );
    let rendered = serde_json::to_string(&gets[1]["result"]["messages"]).unwrap_or_default();
    assert!(
        rendered.contains(PROMPT_ARG1) && rendered.contains(PROMPT_ARG2),
        "test_prompt_with_arguments should use both arguments: {:#}",
        gets[1]["result"]
    );
    out
}

#[test]
fn ts_sdk_client_vs_moat_serve_2024_11_05() {
    let Some(p) = peers() else { return };
    sdk_client_vs_moat(p.ts_client(), Some(HANDSHAKE_REVISIONS[0]));
}

#[test]
fn ts_sdk_client_vs_moat_serve_2025_06_18() {
    let Some(p) = peers() else { return };
    sdk_client_vs_moat(p.ts_client(), Some(HANDSHAKE_REVISIONS[1]));
}

#[test]
fn ts_sdk_client_vs_moat_serve_2025_11_25() {
    let Some(p) = peers() else { return };
    sdk_client_vs_moat(p.ts_client(), Some(HANDSHAKE_REVISIONS[2]));
}

/// The TS SDK's default handshake offers its latest revision (2025-11-25).
#[test]
fn ts_sdk_client_vs_moat_serve_default() {
    let Some(p) = peers() else { return };
    let out = sdk_client_vs_moat(p.ts_client(), None);
    assert_eq!(out["protocolVersion"], "2025-11-25", "{out:#}");
}

#[test]
fn ts2_sdk_client_vs_moat_serve_2024_11_05() {
    let Some(p) = peers() else { return };
    sdk_client_vs_moat(p.ts2_client(), Some(HANDSHAKE_REVISIONS[0]));
}

#[test]
fn ts2_sdk_client_vs_moat_serve_2025_11_25() {
    let Some(p) = peers() else { return };
    sdk_client_vs_moat(p.ts2_client(), Some(HANDSHAKE_REVISIONS[2]));
}

/// TS SDK 2.x pinned to the stateless revision (`versionNegotiation.pin`).
#[test]
fn ts2_sdk_client_vs_moat_serve_2026_07_28() {
    let Some(p) = peers() else { return };
    sdk_client_vs_moat(p.ts2_client(), Some(MODERN_REVISION));
}

/// TS SDK 2.x in `auto` mode probes `server/discover` first.
#[test]
fn ts2_sdk_client_vs_moat_serve_auto() {
    let Some(p) = peers() else { return };
    let out = sdk_client_vs_moat(p.ts2_client(), None);
    assert_eq!(out["protocolVersion"], MODERN_REVISION, "{out:#}");
}

#[test]
fn py_sdk_client_vs_moat_serve_2024_11_05() {
    let Some(p) = peers() else { return };
    sdk_client_vs_moat(p.py_client(), Some(HANDSHAKE_REVISIONS[0]));
}

#[test]
fn py_sdk_client_vs_moat_serve_2025_06_18() {
    let Some(p) = peers() else { return };
    sdk_client_vs_moat(p.py_client(), Some(HANDSHAKE_REVISIONS[1]));
}

#[test]
fn py_sdk_client_vs_moat_serve_2025_11_25() {
    let Some(p) = peers() else { return };
    sdk_client_vs_moat(p.py_client(), Some(HANDSHAKE_REVISIONS[2]));
}

/// Python SDK 2.x speaks the stateless revision: `server/discover` + `_meta`.
#[test]
fn py_sdk_client_vs_moat_serve_2026_07_28() {
    let Some(p) = peers() else { return };
    sdk_client_vs_moat(p.py_client(), Some(MODERN_REVISION));
}

/// The Python SDK's default (`auto`) probes `server/discover` first, so a
/// server that speaks 2026-07-28 must end up there.
#[test]
fn py_sdk_client_vs_moat_serve_auto() {
    let Some(p) = peers() else { return };
    let out = sdk_client_vs_moat(p.py_client(), None);
    assert_eq!(out["protocolVersion"], MODERN_REVISION, "{out:#}");
}
