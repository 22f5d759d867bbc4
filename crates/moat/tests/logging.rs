//! `RequestContext::log` sends a message only when the client asked for that level: with
//! `logging/setLevel` in the handshake era, with the request's `_meta` log level in
//! 2026-07-28. Never otherwise.

mod support;
use support::pair;

use std::time::Duration;

use moat::types::LoggingLevel;
use moat::{Client, NoArgs, ProtocolVersion, RequestContext, Server, VersionPreference};
use serde_json::json;

fn server() -> Server {
    Server::new("logs", "1").tool_with_context(
        "chatty",
        "Logs at info and at debug",
        |ctx: RequestContext, _: NoArgs| async move {
            ctx.log(LoggingLevel::Debug, None, json!("debug line"))
                .await;
            ctx.log(LoggingLevel::Info, None, json!("info line")).await;
            Ok::<_, String>("done")
        },
    )
}

async fn client(version: ProtocolVersion) -> Client {
    let (s, c) = pair();
    let _peer = server().start(s);
    Client::builder()
        .protocol(VersionPreference::Exact(version))
        .connect(c)
        .await
        .unwrap()
}

/// The log lines that arrived while `call` ran (and a moment after).
async fn logged<F: std::future::Future<Output = ()>>(client: &Client, call: F) -> Vec<String> {
    let mut rx = client.notifications();
    call.await;
    let mut lines = Vec::new();
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(100), rx.recv()).await {
        if n.method == "notifications/message" {
            lines.push(n.params.unwrap()["data"].as_str().unwrap().to_owned());
        }
    }
    lines
}

#[tokio::test]
async fn modern_requests_log_only_at_the_level_their_meta_asks() {
    let client = client(ProtocolVersion::V2026_07_28).await;
    let call = |meta: serde_json::Value| {
        let peer = client.peer().clone();
        async move {
            let out: serde_json::Value = peer
                .request(
                    "tools/call",
                    &json!({ "name": "chatty", "arguments": {}, "_meta": meta }),
                )
                .await
                .unwrap();
            assert_eq!(out["content"][0]["text"], "done");
        }
    };
    assert!(logged(&client, call(json!({}))).await.is_empty());
    let info = json!({ "io.modelcontextprotocol/logLevel": "info" });
    assert_eq!(logged(&client, call(info)).await, ["info line"]);
    let debug = json!({ "io.modelcontextprotocol/logLevel": "debug" });
    assert_eq!(
        logged(&client, call(debug)).await,
        ["debug line", "info line"]
    );
}

#[tokio::test]
async fn handshake_sessions_log_only_after_set_level() {
    let client = client(ProtocolVersion::V2025_11_25).await;
    let call = || async {
        let out = client.call_tool("chatty", json!({})).await.unwrap();
        assert!(!out.is_error());
    };
    assert!(logged(&client, call()).await.is_empty());
    client.set_log_level(LoggingLevel::Info).await.unwrap();
    assert_eq!(logged(&client, call()).await, ["info line"]);
}
