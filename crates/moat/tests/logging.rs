//! `RequestContext::log` sends a message only when the client asked for that level: with
//! `logging/setLevel` in the handshake era, with the request's `_meta` log level in
//! 2026-07-28. Never otherwise. A server's standing notices reach a handshake-era client
//! after `initialized`, and a 2026-07-28 client with a `tools/list` that asks for their level.

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

/// A server with one standing notice, at warning level.
fn noticing_server() -> Server {
    server().standing_notices(|| {
        vec![moat::types::LoggingMessageNotificationParams {
            level: LoggingLevel::Warning,
            logger: Some("test".into()),
            data: json!("standing notice"),
            meta: None,
        }]
    })
}

#[tokio::test]
async fn standing_notices_reach_a_handshake_client_after_initialized() {
    let (s, c) = pair();
    let _peer = noticing_server().start(s);
    let builder =
        Client::builder().protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25));
    let mut rx = builder.notifications();
    let _client = builder.connect(c).await.unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a notice in time")
        .unwrap();
    assert_eq!(n.method, "notifications/message");
    assert_eq!(n.params.unwrap()["data"], "standing notice");
}

#[tokio::test]
async fn standing_notices_come_with_a_modern_tools_list_that_asks_for_them() {
    let (s, c) = pair();
    let _peer = noticing_server().start(s);
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
        .connect(c)
        .await
        .unwrap();
    let list = |meta: serde_json::Value| {
        let peer = client.peer().clone();
        async move {
            let out: serde_json::Value = peer
                .request("tools/list", &json!({ "_meta": meta }))
                .await
                .unwrap();
            assert!(out["tools"].is_array());
        }
    };
    assert!(logged(&client, list(json!({}))).await.is_empty());
    let error = json!({ "io.modelcontextprotocol/logLevel": "error" });
    assert!(
        logged(&client, list(error)).await.is_empty(),
        "below the level asked"
    );
    let warning = json!({ "io.modelcontextprotocol/logLevel": "warning" });
    assert_eq!(logged(&client, list(warning)).await, ["standing notice"]);
}
