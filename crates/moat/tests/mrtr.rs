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

/// A client that declares nothing: no elicitation, no sampling, no roots.
async fn bare_client(conn: Connection, version: ProtocolVersion) -> Client {
    Client::builder()
        .protocol(VersionPreference::Exact(version))
        .connect(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_missing_capability_is_32021_in_2026_and_an_error_result_before() {
    let (s, c) = pair();
    let _peer = server().start(s);
    let client = bare_client(c, ProtocolVersion::V2026_07_28).await;
    let err = client.call_tool("interview", json!({})).await.unwrap_err();
    let err = err.remote().expect("a JSON-RPC error");
    assert_eq!(err.code, -32021, "{err:?}");
    assert_eq!(
        err.data.as_ref().unwrap()["requiredCapabilities"],
        json!({ "elicitation": {} })
    );

    // The handshake era has no such error: the tool's own failure is the answer.
    let (s, c) = pair();
    let _peer = server().start(s);
    let client = bare_client(c, ProtocolVersion::V2025_11_25).await;
    let out = client.call_tool("interview", json!({})).await.unwrap();
    assert!(out.is_error());
    assert!(
        out.content[0]
            .as_text()
            .unwrap()
            .contains("does not support elicitation")
    );
}

#[tokio::test]
async fn a_handler_that_falls_back_succeeds_without_the_capability() {
    let server = Server::new("fallback", "1").tool_with_context(
        "maybe_sample",
        "Samples if it can",
        |ctx: RequestContext, _: NoArgs| async move {
            let params = CreateMessageRequestParams {
                messages: vec![SamplingMessage::user_text("hi")],
                max_tokens: 5,
                ..Default::default()
            };
            Ok::<_, String>(match ctx.create_message(params).await {
                Ok(_) => "sampled",
                Err(moat::Error::ClientLacks(_)) => "fell back",
                Err(e) => return Err(e.to_string()),
            })
        },
    );
    let (s, c) = pair();
    let _peer = server.start(s);
    let client = bare_client(c, ProtocolVersion::V2026_07_28).await;
    let out = client.call_tool("maybe_sample", json!({})).await.unwrap();
    assert!(!out.is_error());
    assert_eq!(out.content[0].as_text(), Some("fell back"));
}

/// A tool that asks three things at once, under keys of its own.
fn together() -> Server {
    Server::new("together", "1").tool_with_context(
        "three",
        "Ask three things at once",
        |ctx: RequestContext, _: NoArgs| async move {
            let sample = CreateMessageRequestParams {
                messages: vec![SamplingMessage::user_text("greet")],
                max_tokens: 10,
                ..Default::default()
            };
            let (name, greeting, roots) = tokio::join!(
                ctx.keyed("user_name").elicit(ask("name?")),
                ctx.keyed("greeting").create_message(sample),
                ctx.keyed("client_roots").list_roots(),
            );
            let (name, greeting, roots) = (name?, greeting?, roots?);
            let name = match name.content.as_ref().and_then(|c| c.get("name")) {
                Some(ElicitValue::String(s)) => s.clone(),
                _ => "?".to_owned(),
            };
            let greeting = match &greeting.content {
                SamplingContent::Single(b) => b.as_text().unwrap_or("").to_owned(),
                _ => String::new(),
            };
            Ok::<_, moat::Error>(format!("{name} {greeting} {}", roots.roots.len()))
        },
    )
}

#[tokio::test]
async fn keyed_requests_made_together_are_asked_together() {
    let (s, c) = pair();
    let _peer = together().start(s);
    let roots = vec![moat::types::Root::new("file:///work")];
    let conn_client = |c| async {
        let answers = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        Client::builder()
            .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
            .roots(roots.clone())
            .on_elicitation(move |_p| {
                answers.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async move {
                    let mut content = BTreeMap::new();
                    content.insert("name".to_owned(), ElicitValue::String("Ada".into()));
                    Ok(ElicitResult::accept(content))
                }
            })
            .on_sampling(|_p| async {
                Ok(CreateMessageResult {
                    role: Role::Assistant,
                    content: SamplingContent::Single(SamplingMessageContentBlock::text("hello")),
                    model: "test".into(),
                    stop_reason: Some("endTurn".into()),
                    meta: None,
                })
            })
            .connect(c)
            .await
            .unwrap()
    };
    let client = conn_client(c).await;

    let first: serde_json::Value = client
        .peer()
        .request("tools/call", &json!({ "name": "three", "arguments": {} }))
        .await
        .unwrap();
    assert_eq!(first["resultType"], "input_required");
    let requests = first["inputRequests"].as_object().unwrap();
    let methods: BTreeMap<&str, &str> = requests
        .iter()
        .map(|(k, v)| (k.as_str(), v["method"].as_str().unwrap()))
        .collect();
    assert_eq!(
        methods,
        BTreeMap::from([
            ("client_roots", "roots/list"),
            ("greeting", "sampling/createMessage"),
            ("user_name", "elicitation/create"),
        ])
    );
    assert!(first["requestState"].is_string());

    // The client's own retry loop answers all three in one round.
    let out = client.call_tool("three", json!({})).await.unwrap();
    assert!(!out.is_error(), "{out:?}");
    assert_eq!(out.content[0].as_text(), Some("Ada hello 1"));
}

#[tokio::test]
async fn malformed_answers_are_invalid_params_and_missing_ones_are_asked_again() {
    let (s, c) = pair();
    let _peer = together().start(s);
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
        .roots(vec![])
        .on_elicitation(|_p| async { Ok(ElicitResult::accept(BTreeMap::new())) })
        .on_sampling(|_p| async { Err(moat::protocol::ErrorObject::internal("unused")) })
        .connect(c)
        .await
        .unwrap();
    let call = |params: serde_json::Value| {
        let peer = client.peer().clone();
        async move {
            peer.request::<_, serde_json::Value>("tools/call", &params)
                .await
        }
    };

    // An answer that is not an ElicitResult, and inputResponses that are not an object.
    for responses in [json!({ "user_name": 12345 }), json!(null), json!([])] {
        let err = call(json!({ "name": "three", "arguments": {}, "inputResponses": responses }))
            .await
            .unwrap_err();
        assert_eq!(err.remote().unwrap().code, -32602, "{responses}: {err}");
    }

    // Answers under keys nobody asked are ignored: the questions come again.
    let again = call(json!({
        "name": "three",
        "arguments": {},
        "inputResponses": { "wrong_key": { "action": "accept", "content": {} } },
    }))
    .await
    .unwrap();
    assert_eq!(again["resultType"], "input_required");
    assert_eq!(again["inputRequests"].as_object().unwrap().len(), 3);
}

#[tokio::test]
async fn answers_sealed_in_the_state_cannot_be_replaced() {
    let (s, c) = pair();
    let _peer = server().start(s);
    let client = client(c, ProtocolVersion::V2026_07_28).await;
    let call = |params: serde_json::Value| {
        let peer = client.peer().clone();
        async move {
            peer.request::<_, serde_json::Value>("tools/call", &params)
                .await
                .unwrap()
        }
    };
    let answer = |name: &str| json!({ "action": "accept", "content": { "name": name } });

    let r1 = call(json!({ "name": "interview", "arguments": {} })).await;
    let r2 = call(json!({
        "name": "interview",
        "arguments": {},
        "inputResponses": { "elicitation-0": answer("Ada") },
        "requestState": r1["requestState"],
    }))
    .await;
    assert!(r2["inputRequests"]["elicitation-1"].is_object(), "{r2}");
    assert_ne!(r1["requestState"], r2["requestState"]);

    // The retry tries to change the first answer: the sealed one stands.
    let r3 = call(json!({
        "name": "interview",
        "arguments": {},
        "inputResponses": { "elicitation-0": answer("Mallory"), "elicitation-1": answer("Bob") },
        "requestState": r2["requestState"],
    }))
    .await;
    assert!(r3["inputRequests"]["sampling-2"].is_object(), "{r3}");
    let done = call(json!({
        "name": "interview",
        "arguments": {},
        "inputResponses": { "sampling-2": {
            "role": "assistant",
            "content": { "type": "text", "text": "ok" },
            "model": "m",
        } },
        "requestState": r3["requestState"],
    }))
    .await;
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(done["content"][0]["text"], "Ada Bob ok");
}

/// A 2026-07-28 server that goes away while the client is still answering its question:
/// the call ends with `Error::Closed` then, not when (if ever) the answer comes.
#[tokio::test]
async fn a_server_gone_while_its_question_is_answered_ends_the_call() {
    let (s, c) = pair();
    let server_peer = server().start(s);
    let asked = std::sync::Arc::new(tokio::sync::Notify::new());
    let told = asked.clone();
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
        .on_elicitation(move |_| {
            told.notify_one();
            // A person who never answers.
            std::future::pending::<Result<ElicitResult, moat::protocol::ErrorObject>>()
        })
        .connect(c)
        .await
        .unwrap();
    let call = tokio::spawn(async move { client.call_tool("interview", json!({})).await });
    asked.notified().await;
    server_peer.close().await;
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(30), call)
        .await
        .expect("the call ends once its server is gone")
        .unwrap();
    assert!(
        matches!(outcome, Err(moat::Error::Closed(_))),
        "{outcome:?}"
    );
}
