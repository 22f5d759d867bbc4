//! A `tools/call`'s params are read once — by the session, into the request's head — on
//! the way from the wire to the tool, over a line transport (stdio's framing) and over a
//! Streamable HTTP session: the tool's arguments are then decoded from their slice, never
//! from the params again. Counted by `moat-protocol`'s `parse-count` feature; one test in
//! this file, so nothing else moves the count meanwhile.

mod support;
use support::pair;

use moat::transport::http::server::HttpServerOptions;
use moat::{Client, ProtocolVersion, Server, VersionPreference};
use moat_protocol::session::count::params_reads;
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

    // A Streamable HTTP session (handshake era).
    let http = server()
        .bind_http("127.0.0.1:0".parse().unwrap(), HttpServerOptions::default())
        .await
        .unwrap();
    let url = format!("http://{}/mcp", http.local_addr().unwrap());
    tokio::spawn(http.run());
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .connect_url(&url, Default::default())
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
        "one read of the params over a Streamable HTTP session"
    );
}
