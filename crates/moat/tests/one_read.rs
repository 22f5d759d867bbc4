//! A `tools/call`'s params are read once — by the session, into the request's head — on
//! the way from the wire to the tool, over a line transport (stdio's framing) and over a
//! Streamable HTTP session and as a 2026-07-28 HTTP request (whose headers the transport
//! checks against the same head): the tool's arguments are then decoded from their slice,
//! never from the params again. Counted by `moat-protocol`'s `parse-count` feature; one test in
//! this file, so nothing else moves the count meanwhile.

mod support;
use support::pair;

use moat::transport::http::server::HttpServerOptions;
use moat::{Client, ProtocolVersion, Server, VersionPreference};
use moat_protocol::count::params_reads;
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Sum {
    a: i64,
    b: i64,
}

fn server() -> Server {
    Server::new("one-read", "1").tool("add", "Adds", |s: Sum| async move {
        Ok::<_, String>((s.a + s.b).to_string())
    })
}

#[tokio::test]
async fn a_tool_call_reads_its_params_once() {
    assert!(
        params_reads() == 0,
        "the parse-count feature counts from the start"
    );
    for version in [ProtocolVersion::V2025_11_25, ProtocolVersion::V2026_07_28] {
        // A line transport.
        let (s, c) = pair();
        let _peer = server().start(s);
        let client = Client::builder()
            .protocol(VersionPreference::Exact(version))
            .connect(c)
            .await
            .unwrap();
        let before = params_reads();
        let out = client
            .call_tool("add", json!({"a": 2, "b": 3}))
            .await
            .unwrap();
        assert_eq!(out.content[0].as_text(), Some("5"));
        assert_eq!(
            params_reads() - before,
            1,
            "{version}: one read of the params over a line transport"
        );
        client.close().await;
    }

    // Over HTTP, from a plain HTTP client (so that only the server's reads count): a
    // Streamable HTTP session, and a 2026-07-28 request checked against its headers.
    let http = server()
        .bind_http("127.0.0.1:0".parse().unwrap(), HttpServerOptions::default())
        .await
        .unwrap();
    let url = format!("http://{}/mcp", http.local_addr().unwrap());
    tokio::spawn(http.run());
    let web = reqwest::Client::new();
    let post = |body: serde_json::Value| {
        web.post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string())
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .send()
    .await
    .unwrap();
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert!(initialized.status().is_success());
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 2, "b": 3}}});
    let before = params_reads();
    let answer = post(call)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(answer.contains("\"5\""), "{answer}");
    assert_eq!(
        params_reads() - before,
        1,
        "one read of the params over a Streamable HTTP session"
    );

    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
        "name": "add", "arguments": {"a": 2, "b": 3}}});
    let before = params_reads();
    let answer = post(call)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "add")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(answer.contains("\"5\""), "{answer}");
    assert_eq!(
        params_reads() - before,
        1,
        "one read of the params for a 2026-07-28 request over HTTP, its headers checked"
    );
}
