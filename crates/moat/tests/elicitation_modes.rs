//! A server asks for input only in an elicitation mode the client declared: a client that
//! declared `elicitation: {}` (form mode alone, as before modes existed) is never sent a
//! link, and one that declared only URL mode is never sent a form; the handler learns
//! which mode the client lacks.

mod support;

use std::collections::BTreeMap;

use moat::types::{ClientCapabilities, ElicitRequestParams, ElicitResult, ElicitationCapability};
use moat::{Client, NoArgs, ProtocolVersion, RequestContext, Server, VersionPreference};
use serde_json::json;

fn server() -> Server {
    let ask = |params: serde_json::Value| {
        move |ctx: RequestContext, _: NoArgs| {
            let params = params.clone();
            async move {
                let params: ElicitRequestParams =
                    serde_json::from_value(params).map_err(|e| e.to_string())?;
                Ok::<_, String>(match ctx.elicit(params).await {
                    Ok(answer) => format!("{:?}", answer.action),
                    Err(e) => format!("refused: {e}"),
                })
            }
        }
    };
    Server::new("asker", "1.0")
        .tool_with_context(
            "link",
            "Sends the user to a page",
            ask(
                json!({"mode": "url", "message": "Sign in", "elicitationId": "e-1",
                       "url": "https://example.com/sign-in"}),
            ),
        )
        .tool_with_context(
            "link_or_fail",
            "Sends the user to a page, or fails",
            |ctx: RequestContext, _: NoArgs| async move {
                let params: ElicitRequestParams = serde_json::from_value(json!({
                    "mode": "url", "message": "Sign in", "elicitationId": "e-2",
                    "url": "https://example.com/sign-in"}))
                .map_err(|e| e.to_string())?;
                let answer = ctx.elicit(params).await.map_err(|e| e.to_string())?;
                Ok::<_, String>(format!("{:?}", answer.action))
            },
        )
        .tool_with_context(
            "form",
            "Asks for a name",
            ask(
                json!({"message": "Name?", "requestedSchema": {"type": "object",
                       "properties": {"name": {"type": "string"}}}}),
            ),
        )
}

async fn client_declaring(elicitation: ElicitationCapability) -> Client {
    client_at(elicitation, ProtocolVersion::V2025_11_25).await
}

async fn client_at(elicitation: ElicitationCapability, version: ProtocolVersion) -> Client {
    let (a, b) = support::pair();
    let _served = server().start(a);
    let capabilities = ClientCapabilities {
        elicitation: Some(elicitation),
        ..ClientCapabilities::default()
    };
    Client::builder()
        .protocol(VersionPreference::Exact(version))
        .on_elicitation(|_| async { Ok(ElicitResult::accept(BTreeMap::new())) })
        .capabilities(capabilities)
        .connect(b)
        .await
        .expect("connect")
}

async fn text(client: &Client, tool: &str) -> String {
    let result = client.call_tool(tool, json!({})).await.expect("call");
    let value = serde_json::to_value(&result).expect("encode");
    value["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The `elicitation` capability with these modes (`{}` when neither).
fn mode(form: bool, url: bool) -> ElicitationCapability {
    let mut declared = serde_json::Map::new();
    if form {
        declared.insert("form".into(), json!({}));
    }
    if url {
        declared.insert("url".into(), json!({}));
    }
    serde_json::from_value(declared.into()).expect("a capability")
}

#[tokio::test]
async fn only_a_declared_mode_is_asked_for() {
    // `elicitation: {}`: form mode alone.
    let client = client_declaring(mode(false, false)).await;
    assert_eq!(text(&client, "form").await, "Accept");
    let refused = text(&client, "link").await;
    assert!(
        refused.starts_with("refused") && refused.contains("elicitation.url"),
        "{refused}"
    );
    // URL mode alone.
    let client = client_declaring(mode(false, true)).await;
    assert_eq!(text(&client, "link").await, "Accept");
    let refused = text(&client, "form").await;
    assert!(
        refused.starts_with("refused") && refused.contains("elicitation.form"),
        "{refused}"
    );
    // Both.
    let client = client_declaring(mode(true, true)).await;
    assert_eq!(text(&client, "link").await, "Accept");
    assert_eq!(text(&client, "form").await, "Accept");
}

#[tokio::test]
async fn in_2026_a_missing_mode_is_named_in_required_capabilities() {
    let client = client_at(mode(true, false), ProtocolVersion::V2026_07_28).await;
    let err = client
        .call_tool("link_or_fail", json!({}))
        .await
        .expect_err("the client lacks URL mode");
    let err = err.remote().expect("a JSON-RPC error");
    assert_eq!(err.code, -32021, "{err:?}");
    assert_eq!(
        err.data.as_ref().expect("data")["requiredCapabilities"],
        json!({ "elicitation": { "url": {} } })
    );
}
