//! Requests to the client from inside a tool: server→client requests in the handshake era,
//! multi-round-trip `InputRequiredResult`s in 2026-07-28 — the same handler code for both.

mod support;
use support::pair;

use std::collections::BTreeMap;

use moat::transport::Connection;
use moat::types::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestFormParams, ElicitRequestParams,
    ElicitResult, ElicitValue, RequestedSchema, Role, SamplingContent, SamplingMessage,
    SamplingMessageContentBlock,
};
use moat::{Client, NoArgs, ProtocolVersion, RequestContext, Server, VersionPreference};
use serde_json::json;

fn ask(message: &str) -> ElicitRequestParams {
    let schema: RequestedSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": { "name": { "type": "string" } },
        "required": ["name"]
    }))
    .unwrap();
    ElicitRequestParams::Form(ElicitRequestFormParams::new(message, schema))
}

/// A tool that asks the user twice and the LLM once, in sequence.
fn server() -> Server {
    Server::new("mrtr", "1").tool_with_context(
        "interview",
        "Ask twice, then sample",
        |ctx: RequestContext, _: NoArgs| async move {
            let first = ctx.elicit(ask("first?")).await.map_err(|e| e.to_string())?;
            let second = ctx
                .elicit(ask("second?"))
                .await
                .map_err(|e| e.to_string())?;
            let params = CreateMessageRequestParams {
                messages: vec![SamplingMessage::user_text("summarise")],
                max_tokens: 10,
                ..Default::default()
            };
            let sampled = ctx
                .create_message(params)
                .await
                .map_err(|e| e.to_string())?;
            let name = |r: &ElicitResult| match r.content.as_ref().and_then(|c| c.get("name")) {
                Some(ElicitValue::String(s)) => s.clone(),
                _ => "?".to_owned(),
            };
            let text = match &sampled.content {
                SamplingContent::Single(b) => b.as_text().unwrap_or("").to_owned(),
                _ => String::new(),
            };
            Ok::<_, String>(format!("{} {} {}", name(&first), name(&second), text))
        },
    )
}

async fn client(conn: Connection, version: ProtocolVersion) -> Client {
    let answers = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    Client::builder()
        .protocol(VersionPreference::Exact(version))
        .on_elicitation(move |p| {
            let n = answers.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                let ElicitRequestParams::Form(form) = p else {
                    panic!("form expected")
                };
                let name = format!("{}#{n}", form.message.trim_end_matches('?'));
                let mut content = BTreeMap::new();
                content.insert("name".to_owned(), ElicitValue::String(name));
                Ok(ElicitResult::accept(content))
            }
        })
        .on_sampling(|_p| async {
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: SamplingContent::Single(SamplingMessageContentBlock::text("done")),
                model: "test".into(),
                stop_reason: Some("endTurn".into()),
                meta: None,
            })
        })
        .connect(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_same_handler_works_in_both_eras() {
    for version in [ProtocolVersion::V2025_11_25, ProtocolVersion::V2026_07_28] {
        let (s, c) = pair();
        let _peer = server().start(s);
        let client = client(c, version).await;
        let out = client.call_tool("interview", json!({})).await.unwrap();
        assert!(!out.is_error(), "{version}: {out:?}");
        let text = out.content[0].as_text().unwrap();
        // In the modern era the handler reruns each round, but each answer is asked once:
        // the earlier answers come back from the sealed requestState.
        assert_eq!(text, "first#0 second#1 done", "{version}");
    }
}

#[tokio::test]
async fn tampered_request_state_is_refused() {
    let (s, c) = pair();
    let _peer = server().start(s);
    let client = client(c, ProtocolVersion::V2026_07_28).await;
    let first: serde_json::Value = client
        .peer()
        .request(
            "tools/call",
            &json!({ "name": "interview", "arguments": {} }),
        )
        .await
        .unwrap();
    assert_eq!(first["resultType"], "input_required");
    assert!(first["inputRequests"]["elicitation-0"].is_object());
    let state = first["requestState"].as_str().unwrap().to_owned();

    // A flipped character in the state fails verification.
    let mut bad = state.clone().into_bytes();
    bad[5] = if bad[5] == b'a' { b'b' } else { b'a' };
    let err = client
        .peer()
        .request::<_, serde_json::Value>(
            "tools/call",
            &json!({ "name": "interview", "arguments": {}, "requestState": String::from_utf8(bad).unwrap() }),
        )
        .await
        .unwrap_err();
    assert_eq!(err.remote().unwrap().code, -32602);

    // A genuine state replayed on another request (other arguments) is refused too.
    let err = client
        .peer()
        .request::<_, serde_json::Value>(
            "tools/call",
            &json!({ "name": "interview", "arguments": {"x": 1}, "requestState": state }),
        )
        .await
        .unwrap_err();
    assert!(
        err.remote().unwrap().message.contains("different request"),
        "{err}"
    );
}

#[tokio::test]
async fn no_capability_no_request() {
    let (s, c) = pair();
    let _peer = server().start(s);
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
        .connect(c)
        .await
        .unwrap();
    let out = client.call_tool("interview", json!({})).await.unwrap();
    assert!(out.is_error());
    assert!(
        out.content[0]
            .as_text()
            .unwrap()
            .contains("does not support elicitation")
    );
}
