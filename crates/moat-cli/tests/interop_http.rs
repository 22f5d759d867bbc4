//! Interoperability over HTTP: `moat serve everything --http 127.0.0.1:0` driven by the
//! official SDK clients, each through its own HTTP transport:
//!
//! * TypeScript SDK 1.x (`@modelcontextprotocol/sdk`, `interop/ts_client.mjs`),
//! * TypeScript SDK 2.x (`@modelcontextprotocol/client`, `ts_client.mjs --sdk v2`),
//! * Python SDK 2.x (`mcp`, `interop/py_client.py`),
//!
//! over Streamable HTTP (handshake era with an `Mcp-Session-Id`, and the stateless
//! 2026-07-28 revision) and over the legacy 2024-11-05 HTTP+SSE transport (`/sse` +
//! `/message`), and against `--stateless`, which must serve 2026-07-28 and refuse the rest.
//!
//! Each test starts its own server (port 0; the port is read from the `moat: serving ...`
//! line on its stderr), runs clients against it (in parallel threads where a test runs
//! several) and kills the server's process group at the end. The peers are found as in
//! `interop.rs` (`$MOAT_INTEROP_DIR`, else `interop/`); when missing the tests print
//! `SKIPPED: ...` and pass, except under CI (`CI` set), where they fail.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod support;
use support::json::{array, assert_contains_all, is_error, strings, text_of};
use support::{Leftovers, Listening, Peers, Run, mcp_authority};

/// Deadline for one SDK client process; the clients get a shorter `--timeout` of their own.
const TIMEOUT: Duration = Duration::from_secs(45);
/// The `--timeout` passed to the SDK clients, in seconds.
const CLIENT_TIMEOUT_SECS: &str = "30";
/// How long the server may take to print its `moat: serving ...` line.
const SERVER_START: Duration = Duration::from_secs(20);
/// How long the output pipes may stay open after a client exited.
const PIPE_GRACE: Duration = Duration::from_secs(10);

const MODERN: &str = "2026-07-28";
const LATEST_HANDSHAKE: &str = "2025-11-25";
const LEGACY_SSE_REVISION: &str = "2024-11-05";

const SERVER_NAME: &str = "moat-everything";
const VENV_PYTHON: &str = ".venv/bin/python";

// ---------------------------------------------------------------------------
// Locating the peers (the client side only)
// ---------------------------------------------------------------------------

/// Finds the installed SDK clients, or returns `None` (test skipped) when they are missing
/// outside CI. Under CI a missing peer is a test failure.
fn peers() -> Option<Peers> {
    support::peers(&[
        "node_modules/@modelcontextprotocol/sdk/package.json",
        "node_modules/@modelcontextprotocol/client/package.json",
        VENV_PYTHON,
        "ts_client.mjs",
        "py_client.py",
    ])
}

// ---------------------------------------------------------------------------
// The server under test
// ---------------------------------------------------------------------------

/// `moat serve everything --http 127.0.0.1:0 [EXTRA...]`, in its own process group, killed
/// (the whole group) when dropped.
struct MoatHttp {
    server: Listening,
    /// `http://127.0.0.1:PORT`
    base: String,
    /// `127.0.0.1:PORT`, for raw requests.
    authority: String,
}

impl MoatHttp {
    fn start(extra: &[&str]) -> MoatHttp {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_moat"));
        cmd.args(["serve", "everything", "--http", "127.0.0.1:0"])
            .args(extra);
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        // `moat: serving moat-everything on http://127.0.0.1:PORT/mcp (...)`
        let (server, authority) = Listening::start(
            cmd,
            |line| {
                line.starts_with("moat: serving ")
                    .then(|| mcp_authority(line))
                    .flatten()
            },
            SERVER_START,
        );
        MoatHttp {
            server,
            base: format!("http://{authority}"),
            authority,
        }
    }

    fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    fn sse_url(&self) -> String {
        format!("{}/sse", self.base)
    }

    fn log(&self) -> String {
        self.server.log()
    }

    /// The server must still be running after serving the clients.
    fn assert_alive(&mut self) {
        self.server.assert_alive();
    }
}

// ---------------------------------------------------------------------------
// Running a client with a deadline
// ---------------------------------------------------------------------------

/// Runs `argv` (see [`support::run`]), failing past [`TIMEOUT`]; a server left holding its
/// pipes is killed.
fn run(argv: &[String]) -> Run {
    support::run(argv, TIMEOUT, PIPE_GRACE, Leftovers::Kill)
}

// ---------------------------------------------------------------------------
// The clients and the script they run
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sdk {
    /// `@modelcontextprotocol/sdk` 1.x
    Ts1,
    /// `@modelcontextprotocol/client` 2.x
    Ts2,
    /// `mcp` (Python) 2.x
    Py,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Transport {
    Streamable,
    Sse,
}

impl Transport {
    fn as_str(self) -> &'static str {
        match self {
            Transport::Streamable => "streamable",
            Transport::Sse => "sse",
        }
    }
}

/// One client invocation against one server.
struct Case<'a> {
    sdk: Sdk,
    transport: Transport,
    /// `--protocol REV`; `None` is the SDK's own default.
    protocol: Option<&'a str>,
}

const PROMPT_ARG1: &str = "alpha-value-1";
const PROMPT_ARG2: &str = "beta-value-2";
const SIMPLE_TEXT: &str = "This is a simple text response for testing.";
const STATIC_TEXT: &str = "This is the content of the static text resource.";
const SIMPLE_PROMPT: &str = "This is a simple prompt for testing.";
const LOGGING_TEXT: &str = "Tool with logging executed successfully";
const SCHEMA_TOOL_PREFIX: &str = "JSON Schema 2020-12 tool called with: ";

fn schema_tool_args() -> Value {
    json!({ "name": "moat interop", "email": "interop@example.com" })
}

fn client_argv(p: &Peers, server: &MoatHttp, case: &Case<'_>) -> Vec<String> {
    let mut argv: Vec<String> = match case.sdk {
        Sdk::Ts1 => vec!["node".into(), p.path("ts_client.mjs")],
        Sdk::Ts2 => vec![
            "node".into(),
            p.path("ts_client.mjs"),
            "--sdk".into(),
            "v2".into(),
        ],
        Sdk::Py => vec![p.path(VENV_PYTHON), p.path("py_client.py")],
    };
    if let Some(rev) = case.protocol {
        argv.extend(["--protocol".into(), rev.into()]);
    }
    let url = match case.transport {
        Transport::Streamable => server.mcp_url(),
        Transport::Sse => server.sse_url(),
    };
    let prompt_args = json!({ "arg1": PROMPT_ARG1, "arg2": PROMPT_ARG2 }).to_string();
    let schema_args = schema_tool_args().to_string();
    for a in [
        "--call",
        "test_simple_text",
        "{}",
        "--call",
        "json_schema_2020_12_tool",
        &schema_args,
        "--call",
        "test_error_handling",
        "{}",
        "--call",
        "test_tool_with_logging",
        "{}",
        "--read",
        "test://static-text",
        "--read",
        "test://template/42/data",
        "--prompt",
        "test_simple_prompt",
        "{}",
        "--prompt",
        "test_prompt_with_arguments",
        &prompt_args,
        "--timeout",
        CLIENT_TIMEOUT_SECS,
        "--url",
        &url,
        "--transport",
        case.transport.as_str(),
    ] {
        argv.push(a.to_owned());
    }
    argv
}

/// Runs the client script; it must succeed. Returns its JSON summary and the run.
fn run_ok(p: &Peers, server: &MoatHttp, case: &Case<'_>) -> (Value, Run) {
    let run = run(&client_argv(p, server, case));
    let context = || {
        format!(
            "{case:?}\n{}\n--- moat serve stderr ---\n{}",
            run.describe(),
            server.log()
        )
    };
    assert_eq!(run.code, Some(0), "the client failed\n{}", context());
    let out: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e})\n{}", context()));
    (out, run)
}

impl std::fmt::Debug for Case<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "case: {:?} over {} with --protocol {}",
            self.sdk,
            self.transport.as_str(),
            self.protocol.unwrap_or("(default)")
        )
    }
}

// ---------------------------------------------------------------------------
// JSON helpers and checks
// ---------------------------------------------------------------------------

/// Fields 2026-07-28 added to results; a handshake-era answer must not carry them.
const MODERN_ONLY_RESULT_FIELDS: [&str; 3] = ["ttlMs", "cacheScope", "resultType"];

/// Checks everything the script did, for a client that ended up on `revision`.
fn check_script(out: &Value, case: &Case<'_>, revision: &str) {
    let ctx = format!("{case:?}");
    assert_eq!(
        out["protocolVersion"], revision,
        "{ctx}: negotiated revision in {out:#}"
    );
    assert_eq!(
        out["transport"],
        case.transport.as_str(),
        "{ctx}: transport in {out:#}"
    );
    assert_eq!(
        out.pointer("/serverInfo/name").and_then(Value::as_str),
        Some(SERVER_NAME),
        "{ctx}: serverInfo.name in {out:#}"
    );
    let modern = revision == MODERN;
    match case.transport {
        // The handshake era runs in a session; 2026-07-28 has none.
        Transport::Streamable if modern => assert_eq!(
            out["sessionId"],
            Value::Null,
            "{ctx}: 2026-07-28 must not get an Mcp-Session-Id: {out:#}"
        ),
        Transport::Streamable => assert!(
            out["sessionId"]
                .as_str()
                .is_some_and(|s| !s.is_empty() && s.bytes().all(|b| (0x21..=0x7e).contains(&b))),
            "{ctx}: a handshake-era session needs an Mcp-Session-Id of visible ASCII: {out:#}"
        ),
        Transport::Sse => {}
    }

    // tools/list
    assert_contains_all(
        &strings(out, "tools", None),
        &[
            "test_simple_text",
            "test_image_content",
            "test_embedded_resource",
            "test_error_handling",
            "json_schema_2020_12_tool",
        ],
        &format!("{ctx}: tools"),
    );
    let schema_tool = array(out, "toolDetails")
        .iter()
        .find(|t| t["name"] == "json_schema_2020_12_tool")
        .expect("listed above");
    assert_eq!(
        schema_tool.pointer("/inputSchema/$defs/address/$anchor"),
        Some(&json!("addressDef")),
        "{ctx}: the 2020-12 input schema must arrive intact: {schema_tool:#}"
    );

    // tools/call
    let calls = array(out, "calls");
    assert_eq!(calls.len(), 4, "{ctx}: {out:#}");
    let simple = &calls[0]["result"];
    assert!(!is_error(simple), "{ctx}: test_simple_text: {simple:#}");
    assert_eq!(
        text_of(&simple["content"]),
        SIMPLE_TEXT,
        "{ctx}: {simple:#}"
    );
    let echoed = &calls[1]["result"];
    assert!(
        !is_error(echoed),
        "{ctx}: json_schema_2020_12_tool: {echoed:#}"
    );
    let text = text_of(&echoed["content"]);
    let args: Value = text
        .strip_prefix(SCHEMA_TOOL_PREFIX)
        .and_then(|rest| serde_json::from_str(rest).ok())
        .unwrap_or_else(|| {
            panic!("{ctx}: json_schema_2020_12_tool should echo its arguments: {echoed:#}")
        });
    assert_eq!(
        args,
        schema_tool_args(),
        "{ctx}: arguments as the server saw them"
    );
    let failing = &calls[2]["result"];
    assert!(
        is_error(failing),
        "{ctx}: test_error_handling must set isError: {failing:#}"
    );
    assert!(
        text_of(&failing["content"]).contains("intentionally returns an error"),
        "{ctx}: test_error_handling should explain the error: {failing:#}"
    );
    // Its answer follows log notifications sent while it runs (an SSE-streamed answer on
    // Streamable HTTP; interleaved on the legacy stream).
    let logging = &calls[3]["result"];
    assert!(
        !is_error(logging),
        "{ctx}: test_tool_with_logging: {logging:#}"
    );
    assert_eq!(
        text_of(&logging["content"]),
        LOGGING_TEXT,
        "{ctx}: {logging:#}"
    );

    // resources/list, resources/templates/list, resources/read
    assert_contains_all(
        &strings(out, "resources", Some("uri")),
        &["test://static-text", "test://static-binary"],
        &format!("{ctx}: resources"),
    );
    assert_contains_all(
        &strings(out, "resourceTemplates", Some("uriTemplate")),
        &["test://template/{id}/data"],
        &format!("{ctx}: resource templates"),
    );
    let reads = array(out, "reads");
    let static_text = &array(&reads[0]["result"], "contents")[0];
    assert_eq!(static_text["uri"], "test://static-text", "{ctx}: {out:#}");
    assert_eq!(static_text["mimeType"], "text/plain", "{ctx}: {out:#}");
    assert_eq!(static_text["text"], STATIC_TEXT, "{ctx}: {out:#}");
    let templated = &array(&reads[1]["result"], "contents")[0];
    assert_eq!(
        templated["uri"], "test://template/42/data",
        "{ctx}: {out:#}"
    );
    let data: Value = templated["text"]
        .as_str()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_else(|| panic!("{ctx}: template read is not JSON text: {templated:#}"));
    assert_eq!(
        data,
        json!({ "id": "42", "templateTest": true, "data": "Data for ID: 42" }),
        "{ctx}: template substitution"
    );

    // prompts/list, prompts/get
    assert_contains_all(
        &strings(out, "prompts", Some("name")),
        &["test_simple_prompt", "test_prompt_with_arguments"],
        &format!("{ctx}: prompts"),
    );
    let gets = array(out, "gets");
    let simple_prompt = array(&gets[0]["result"], "messages");
    assert_eq!(simple_prompt.len(), 1, "{ctx}: {out:#}");
    assert_eq!(simple_prompt[0]["role"], "user", "{ctx}: {out:#}");
    assert_eq!(
        simple_prompt[0].pointer("/content/text"),
        Some(&json!(SIMPLE_PROMPT)),
        "{ctx}: {out:#}"
    );
    let with_args = array(&gets[1]["result"], "messages");
    assert_eq!(
        with_args[0].pointer("/content/text"),
        Some(&json!(format!(
            "Prompt with arguments: arg1='{PROMPT_ARG1}', arg2='{PROMPT_ARG2}'"
        ))),
        "{ctx}: {out:#}"
    );

    // The TS SDKs pass unknown result fields through (the Python SDK fills in model
    // defaults), so their output shows what was on the wire: nothing from 2026-07-28
    // in a handshake-era answer.
    if !modern && case.sdk != Sdk::Py {
        for entry in calls.iter().chain(reads).chain(gets) {
            for field in MODERN_ONLY_RESULT_FIELDS {
                assert!(
                    entry["result"].get(field).is_none(),
                    "{ctx}: `{field}` (2026-07-28 only) in a {revision} result: {entry:#}"
                );
            }
        }
    }
}

/// Starts a server with `extra` flags, runs every case in parallel, checks each ended up
/// on its revision, and stops the server.
fn run_cases(extra: &[&str], cases: &[(Case<'_>, &str)]) {
    let Some(p) = peers() else { return };
    let mut server = MoatHttp::start(extra);
    thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|(case, revision)| {
                let (p, server) = (&p, &server);
                s.spawn(move || {
                    let (out, _) = run_ok(p, server, case);
                    check_script(&out, case, revision);
                })
            })
            .collect();
        let failures: Vec<String> = handles
            .into_iter()
            .filter_map(|h| h.join().err())
            .map(|e| {
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "(non-string panic)".into())
            })
            .collect();
        assert!(
            failures.is_empty(),
            "{} of {} clients failed:\n\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n\n")
        );
    });
    server.assert_alive();
}

fn streamable(sdk: Sdk, protocol: Option<&str>) -> Case<'_> {
    Case {
        sdk,
        transport: Transport::Streamable,
        protocol,
    }
}

fn sse(sdk: Sdk, protocol: Option<&str>) -> Case<'_> {
    Case {
        sdk,
        transport: Transport::Sse,
        protocol,
    }
}

// ---------------------------------------------------------------------------
// Raw HTTP, for the exact status and body of a refusal
// ---------------------------------------------------------------------------

struct RawResponse {
    status: u16,
    head: String,
    body: String,
}

/// Sends one HTTP/1.1 request and reads the answer: the whole body when it has a
/// `Content-Length`, else whatever arrives within half a second (an SSE stream).
fn raw_http(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &str,
) -> RawResponse {
    let mut tcp = TcpStream::connect(authority).expect("connect to moat serve");
    tcp.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("set_read_timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.push_str(body);
    tcp.write_all(req.as_bytes()).expect("write request");

    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut want_total: Option<usize> = None;
    loop {
        if let Some(total) = want_total
            && buf.len() >= total
        {
            break;
        }
        match tcp.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                // Nothing more for now: done once the head is in and no length is known.
                if want_total.is_none() && find_head_end(&buf).is_some() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "no complete HTTP answer to {method} {path} within 10s: {:?}",
                    String::from_utf8_lossy(&buf)
                );
            }
            Err(e) => panic!("reading the answer to {method} {path}: {e}"),
        }
        if want_total.is_none()
            && let Some(end) = find_head_end(&buf)
        {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            want_total = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .map(|n| end + 4 + n);
        }
    }
    let end = find_head_end(&buf).unwrap_or_else(|| {
        panic!(
            "no HTTP head in the answer to {method} {path}: {:?}",
            String::from_utf8_lossy(&buf)
        )
    });
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head:?}"));
    RawResponse {
        status,
        head,
        body: String::from_utf8_lossy(&buf[end + 4..]).into_owned(),
    }
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

// ---------------------------------------------------------------------------
// Streamable HTTP, stateful server
// ---------------------------------------------------------------------------

/// TS SDK 1.x offers its latest handshake revision and gets a session.
#[test]
fn streamable_ts1_default_is_handshake_2025_11_25_with_session() {
    run_cases(&[], &[(streamable(Sdk::Ts1, None), LATEST_HANDSHAKE)]);
}

/// TS SDK 1.x pinned to older handshake revisions, over the newer transport.
#[test]
fn streamable_ts1_pinned_2024_11_05_and_2025_03_26() {
    run_cases(
        &[],
        &[
            (streamable(Sdk::Ts1, Some("2024-11-05")), "2024-11-05"),
            (streamable(Sdk::Ts1, Some("2025-03-26")), "2025-03-26"),
        ],
    );
}

/// TS SDK 2.x in `auto` probes `server/discover` and must land on 2026-07-28 (no session).
#[test]
fn streamable_ts2_auto_lands_on_2026_07_28() {
    run_cases(&[], &[(streamable(Sdk::Ts2, None), MODERN)]);
}

/// TS SDK 2.x pinned to a handshake revision: `initialize`, then the session path.
#[test]
fn streamable_ts2_pinned_2025_11_25_uses_session() {
    run_cases(
        &[],
        &[(
            streamable(Sdk::Ts2, Some(LATEST_HANDSHAKE)),
            LATEST_HANDSHAKE,
        )],
    );
}

/// The Python SDK's default (`auto`) probes `server/discover` and must land on 2026-07-28.
#[test]
fn streamable_py_auto_lands_on_2026_07_28() {
    run_cases(&[], &[(streamable(Sdk::Py, None), MODERN)]);
}

/// The Python SDK pinned to handshake revisions: `initialize`, then the session path.
#[test]
fn streamable_py_pinned_2025_11_25_and_2025_06_18_use_session() {
    run_cases(
        &[],
        &[
            (
                streamable(Sdk::Py, Some(LATEST_HANDSHAKE)),
                LATEST_HANDSHAKE,
            ),
            (streamable(Sdk::Py, Some("2025-06-18")), "2025-06-18"),
        ],
    );
}

// ---------------------------------------------------------------------------
// Legacy HTTP+SSE (2024-11-05): GET /sse, POST /message?sessionId=...
// ---------------------------------------------------------------------------

#[test]
fn sse_ts1_2024_11_05() {
    run_cases(
        &[],
        &[(
            sse(Sdk::Ts1, Some(LEGACY_SSE_REVISION)),
            LEGACY_SSE_REVISION,
        )],
    );
}

#[test]
fn sse_ts2_2024_11_05() {
    run_cases(
        &[],
        &[(
            sse(Sdk::Ts2, Some(LEGACY_SSE_REVISION)),
            LEGACY_SSE_REVISION,
        )],
    );
}

#[test]
fn sse_py_2024_11_05() {
    run_cases(
        &[],
        &[(sse(Sdk::Py, Some(LEGACY_SSE_REVISION)), LEGACY_SSE_REVISION)],
    );
}

// ---------------------------------------------------------------------------
// --stateless: 2026-07-28 only
// ---------------------------------------------------------------------------

/// TS 2.x and Python, pinned to 2026-07-28 and in `auto`, against the stateless server.
#[test]
fn stateless_serves_2026_07_28_pinned_and_auto() {
    run_cases(
        &["--stateless"],
        &[
            (streamable(Sdk::Ts2, Some(MODERN)), MODERN),
            (streamable(Sdk::Py, Some(MODERN)), MODERN),
            (streamable(Sdk::Ts2, None), MODERN),
            (streamable(Sdk::Py, None), MODERN),
        ],
    );
}

/// Clients that insist on the handshake era are refused with -32022, naming the revision
/// the server does speak, and fail promptly (no hang, no half-open session).
#[test]
fn stateless_refuses_handshake_clients_clearly() {
    let Some(p) = peers() else { return };
    let mut server = MoatHttp::start(&["--stateless"]);

    // The wire: an `initialize` at 2025-11-25 gets 400 and a JSON-RPC error for its id.
    let init = json!({
        "jsonrpc": "2.0",
        "id": 7,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_HANDSHAKE,
            "capabilities": {},
            "clientInfo": { "name": "moat-interop-http", "version": "0" },
        },
    })
    .to_string();
    let raw = raw_http(
        &server.authority,
        "POST",
        "/mcp",
        &[
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
        ],
        &init,
    );
    let body: Value = serde_json::from_str(&raw.body)
        .unwrap_or_else(|e| panic!("refusal body is not JSON ({e}):\n{}{}", raw.head, raw.body));
    assert_eq!(raw.status, 400, "{}\n\n{}", raw.head, raw.body);
    assert!(
        !raw.head.to_ascii_lowercase().contains("mcp-session-id"),
        "a refused initialize must not open a session:\n{}",
        raw.head
    );
    assert_eq!(body["id"], 7, "{body:#}");
    assert_eq!(
        body.pointer("/error/code"),
        Some(&json!(-32022)),
        "{body:#}"
    );
    assert_eq!(
        body.pointer("/error/data/supported"),
        Some(&json!([MODERN])),
        "{body:#}"
    );
    assert_eq!(
        body.pointer("/error/data/requested"),
        Some(&json!(LATEST_HANDSHAKE)),
        "{body:#}"
    );

    // The SDK clients: each must fail to connect, quickly, saying why.
    let cases = [
        streamable(Sdk::Ts1, None),
        streamable(Sdk::Ts2, Some(LATEST_HANDSHAKE)),
        streamable(Sdk::Py, Some(LATEST_HANDSHAKE)),
    ];
    thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|case| {
                let (p, server) = (&p, &server);
                s.spawn(move || {
                    let started = Instant::now();
                    let r = run(&client_argv(p, server, case));
                    (case, r, started.elapsed())
                })
            })
            .collect();
        for h in handles {
            let (case, r, took) = h.join().expect("client thread");
            let ctx = format!("{case:?}\n{}", r.describe());
            assert_eq!(r.code, Some(1), "the client must fail to connect\n{ctx}");
            assert!(r.stdout.trim().is_empty(), "no summary expected\n{ctx}");
            for needle in [
                "connect",
                "-32022",
                "Unsupported protocol version",
                LATEST_HANDSHAKE,
                MODERN,
            ] {
                assert!(
                    r.stderr.contains(needle),
                    "the error should mention {needle:?}\n{ctx}"
                );
            }
            assert!(
                took < Duration::from_secs(15),
                "refusal took {took:?}; expected a prompt answer\n{ctx}"
            );
        }
    });
    server.assert_alive();
}

/// `--stateless` means 2026-07-28 only, no sessions: the legacy HTTP+SSE endpoints (which
/// open sessions) are off, so every legacy client fails to connect.
#[test]
fn stateless_refuses_legacy_sse() {
    let Some(p) = peers() else { return };
    let mut server = MoatHttp::start(&["--stateless"]);
    let mut problems = Vec::new();

    let case = sse(Sdk::Ts1, Some(LEGACY_SSE_REVISION));
    let r = run(&client_argv(&p, &server, &case));
    if r.code == Some(0) {
        let negotiated = serde_json::from_str::<Value>(r.stdout.trim())
            .map(|v| v["protocolVersion"].clone())
            .unwrap_or(Value::Null);
        problems.push(format!(
            "{case:?} connected to the stateless server and negotiated {negotiated} \
             (expected: refused)"
        ));
    } else {
        assert_eq!(
            r.code,
            Some(1),
            "{case:?}: expected a clean failure\n{}",
            r.describe()
        );
    }

    let raw = raw_http(
        &server.authority,
        "GET",
        "/sse",
        &["Accept: text/event-stream"],
        "",
    );
    if !(400..500).contains(&raw.status) {
        problems.push(format!(
            "GET /sse (Accept: text/event-stream) answered {} instead of 404/405:\n{}\n\n{}",
            raw.status,
            raw.head,
            raw.body.trim()
        ));
    }
    server.assert_alive();
    assert!(
        problems.is_empty(),
        "the stateless server serves the legacy HTTP+SSE transport:\n- {}",
        problems.join("\n- ")
    );
}
