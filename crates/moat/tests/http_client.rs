//! `Client::connect_url` against real HTTP servers: the TypeScript reference server
//! `@modelcontextprotocol/server-everything` in its `streamableHttp` and legacy `sse` modes,
//! and our own `Server::bind_http` (which checks the 2026-07-28 headers against the body).
//!
//! The reference server lives in `interop/` (installed by `.ci/run`; the location can be
//! overridden with `MOAT_INTEROP_DIR`). When it or `node` is missing those tests print a
//! notice and pass, except under CI (`CI` set), where they fail.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use moat::client::{HttpOptions, HttpTransport};
use moat::protocol::types::{
    ContentBlock, CreateMessageRequestParams, CreateMessageResult, Role, SamplingContent,
    SamplingMessageContentBlock, Tool,
};
use moat::{Client, ProtocolVersion, RequestContext, Server, VersionPreference};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const EVERYTHING_JS: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// The reference server's entry point, or `None` (test skipped) when it cannot run here.
fn everything_js() -> Option<PathBuf> {
    moat_test_support::interop_dir(&[EVERYTHING_JS]).map(|dir| dir.join(EVERYTHING_JS))
}

/// A running `server-everything`, killed when dropped.
struct Everything {
    child: Child,
    base: String,
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `server-everything <mode>` on a free port and wait until it says it listens.
///
/// Readiness is taken from the server's own "… on port N" line on stderr, not from a TCP
/// connect: a port picked by binding to port 0 and letting go can be handed out again (to
/// another server started by a parallel test), and then a connect would succeed against
/// the wrong process while ours exits with `EADDRINUSE`. Such a start is retried on
/// another port.
fn everything(mode: &str) -> Option<Everything> {
    let js = everything_js()?;
    for _attempt in 0..5 {
        let port = unused_port();
        let mut child = Command::new("node")
            .arg(&js)
            .arg(mode)
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start node");
        let stderr = child.stderr.take().expect("piped stderr");
        let server = Everything {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        if listening_on(stderr, port) {
            return Some(server);
        }
        // `server` is dropped here: the child is killed and reaped before the next try.
    }
    panic!("server-everything {mode} did not start listening in five tries");
}

/// A port no other server of this test process has been given.
fn unused_port() -> u16 {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Read the server's stderr until it reports listening on `port` (true) or ends or stays
/// silent for 15 s (false). The rest of its stderr is drained so the child never blocks.
fn listening_on(stderr: ChildStderr, port: u16) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let needle = format!("on port {port}");
        let mut told = false;
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if !told && line.trim_end().ends_with(&needle) {
                told = true;
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(15)).is_ok()
}

fn options(mode: HttpTransport) -> HttpOptions {
    HttpOptions::default()
        .mode(mode)
        .request_timeout(Some(Duration::from_secs(20)))
}

fn text(result: &moat::protocol::types::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// List the tools and call `echo`: the basic round trip over whatever transport `client` uses.
async fn list_and_echo(client: &Client) {
    let tools = client.list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "echo"),
        "no echo tool in {:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    let out = client
        .call_tool("echo", json!({"message": "hello over http"}))
        .await
        .unwrap();
    assert!(
        text(&out).contains("hello over http"),
        "unexpected echo: {out:?}"
    );
}

#[tokio::test]
async fn streamable_http_against_the_reference_server() {
    let Some(server) = everything("streamableHttp") else {
        return;
    };
    let url = format!("{}/mcp", server.base);
    // Auto everything: `server/discover` is refused with a JSON-RPC error (no fallback to
    // legacy SSE), then the handshake runs over Streamable HTTP.
    let client = Client::builder()
        .connect_url(&url, options(HttpTransport::Auto))
        .await
        .unwrap();
    assert_eq!(
        client.protocol_version(),
        Some(ProtocolVersion::LATEST_HANDSHAKE)
    );
    list_and_echo(&client).await;
    client.ping().await.unwrap();
    client.close().await;

    // Forced Streamable HTTP, an older revision.
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_03_26))
        .connect_url(&url, options(HttpTransport::StreamableHttp))
        .await
        .unwrap();
    assert_eq!(
        client.protocol_version(),
        Some(ProtocolVersion::V2025_03_26)
    );
    list_and_echo(&client).await;
    client.close().await;
}

#[tokio::test]
async fn progress_of_a_long_running_tool_arrives_over_sse() {
    let Some(server) = everything("streamableHttp") else {
        return;
    };
    let client = Client::builder()
        .connect_url(
            &format!("{}/mcp", server.base),
            options(HttpTransport::StreamableHttp),
        )
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let out = client
        .call_tool_with(
            "trigger-long-running-operation",
            json!({"duration": 0.6, "steps": 3}),
            moat::RequestOptions::default().progress(tx),
        )
        .await
        .unwrap();
    assert!(text(&out).contains("completed"), "{out:?}");
    let mut seen = Vec::new();
    while let Ok(p) = rx.try_recv() {
        seen.push((p.progress, p.total));
    }
    assert_eq!(seen, [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]);
    client.close().await;
}

#[tokio::test]
async fn a_server_request_during_a_tool_call_is_answered_over_http() {
    let Some(server) = everything("streamableHttp") else {
        return;
    };
    // The server asks us for a completion on the tool call's SSE stream; our answer is a
    // POST of its own.
    let client = Client::builder()
        .on_sampling(|_params: CreateMessageRequestParams| async move {
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: SamplingContent::Single(SamplingMessageContentBlock::text(
                    "sampled over http",
                )),
                model: "test".into(),
                stop_reason: Some("endTurn".into()),
                meta: None,
            })
        })
        .connect_url(
            &format!("{}/mcp", server.base),
            options(HttpTransport::StreamableHttp),
        )
        .await
        .unwrap();
    let out = client
        .call_tool(
            "trigger-sampling-request",
            json!({"prompt": "hi", "maxTokens": 5}),
        )
        .await
        .unwrap();
    assert!(text(&out).contains("sampled over http"), "{out:?}");
    client.close().await;
}

#[tokio::test]
async fn legacy_sse_against_the_reference_server() {
    let Some(server) = everything("sse") else {
        return;
    };
    let client = Client::builder()
        .connect_url(
            &format!("{}/sse", server.base),
            options(HttpTransport::LegacySse),
        )
        .await
        .unwrap();
    assert_eq!(
        client.protocol_version().map(ProtocolVersion::era),
        Some(moat::protocol::Era::Handshake)
    );
    list_and_echo(&client).await;
    client.close().await;
}

#[tokio::test]
async fn auto_falls_back_to_legacy_sse_for_an_old_server() {
    let Some(server) = everything("sse") else {
        return;
    };
    let started = Instant::now();
    let client = Client::builder()
        .connect_url(
            &format!("{}/sse", server.base),
            options(HttpTransport::Auto),
        )
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "negotiation took {:?}",
        started.elapsed()
    );
    list_and_echo(&client).await;
    client.close().await;
}

#[tokio::test]
async fn a_missing_legacy_endpoint_fails_to_connect() {
    let Some(server) = everything("streamableHttp") else {
        return;
    };
    // `/mcp` of a Streamable HTTP server is no SSE endpoint (GET without a session: 400).
    let err = Client::builder()
        .connect_url(
            &format!("{}/mcp", server.base),
            options(HttpTransport::LegacySse),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("400"), "{err}");
}

// ---------------------------------------------------------------------------
// Our own server
// ---------------------------------------------------------------------------

/// A server with a tool whose `region` argument is mirrored into `Mcp-Param-Region`.
fn moat_server() -> Server {
    let schema = json!({
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"}
        },
        "required": ["region", "query"]
    });
    Server::new("moat-http", "1.0").tool_def(
        Tool::new("run_query", schema).with_description("Run a query in a region"),
        |_ctx: RequestContext, args: Value| async move {
            Ok::<_, String>(format!("ran {} in {}", args["query"], args["region"]))
        },
    )
}

async fn moat_url() -> String {
    let http = moat_server()
        .bind_http(
            "127.0.0.1:0".parse().unwrap(),
            moat::transport::http::server::HttpServerOptions::default(),
        )
        .await
        .unwrap();
    let addr = http.local_addr().unwrap();
    tokio::spawn(http.run());
    format!("http://{addr}")
}

async fn call_in_region(client: &Client) {
    let out = client
        .call_tool(
            "run_query",
            json!({"region": "Zürich", "query": "SELECT 1"}),
        )
        .await
        .unwrap();
    assert_eq!(out.is_error, None, "{out:?}");
    assert!(text(&out).contains("Zürich"), "{out:?}");
}

#[tokio::test]
async fn every_era_and_transport_against_our_own_http_server() {
    let base = moat_url().await;
    let mcp = format!("{base}/mcp");

    // Auto: the modern revision, with every header the server checks against the body
    // (a missing or wrong `Mcp-Param-Region` would be refused with HeaderMismatch).
    let client = Client::builder()
        .connect_url(&mcp, options(HttpTransport::Auto))
        .await
        .unwrap();
    assert_eq!(client.protocol_version(), Some(ProtocolVersion::LATEST));
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    call_in_region(&client).await;
    client.close().await;

    // The handshake era over Streamable HTTP: a session, and the version header.
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::LATEST_HANDSHAKE))
        .connect_url(&mcp, options(HttpTransport::StreamableHttp))
        .await
        .unwrap();
    call_in_region(&client).await;
    client.close().await;

    // Legacy HTTP+SSE.
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2024_11_05))
        .connect_url(&format!("{base}/sse"), options(HttpTransport::LegacySse))
        .await
        .unwrap();
    call_in_region(&client).await;
    client.close().await;
}
