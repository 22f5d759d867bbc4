//! Tools that ask the client: elicitation (a form the user fills in) and sampling (a
//! completion from the client's model). The same handler works in every revision: in the
//! handshake revisions the question is a request to the client; in 2026-07-28 the call
//! answers with an `InputRequiredResult`, the client retries with the answer, and the
//! handler runs again and this time gets it.
//!
//! ```sh
//! cargo build -p moat --example ask
//! moat tools -- target/debug/examples/ask
//! ```

use moat::types::{
    CreateMessageRequestParams, ElicitAction, ElicitRequestParams, ElicitValue, SamplingMessage,
};
use moat::{NoArgs, RequestContext, Server};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// What to deploy.
#[derive(Deserialize, JsonSchema)]
struct Deploy {
    /// The service to deploy.
    service: String,
}

/// What to summarise.
#[derive(Deserialize, JsonSchema)]
struct Summarise {
    /// The text to summarise.
    text: String,
}

/// A form with one required yes/no field.
fn confirm(message: String) -> Result<ElicitRequestParams, String> {
    serde_json::from_value(json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { "confirm": { "type": "boolean", "title": "Go ahead?" } },
            "required": ["confirm"],
        },
    }))
    .map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> moat::Result<()> {
    Server::new("ask", "1.0")
        .tool_with_context(
            "deploy",
            "Deploy a service after the user confirms",
            |ctx: RequestContext, Deploy { service }| async move {
                let form = confirm(format!("Deploy {service} to production?"))?;
                let answer = ctx.elicit(form).await.map_err(|e| e.to_string())?;
                let confirmed = answer.action == ElicitAction::Accept
                    && answer.content.as_ref().and_then(|c| c.get("confirm"))
                        == Some(&ElicitValue::Boolean(true));
                Ok::<_, String>(if confirmed {
                    format!("{service} deployed")
                } else {
                    format!("{service} not deployed: the user said no")
                })
            },
        )
        .tool_with_context(
            "summarise",
            "Summarise a text with the client's model",
            |ctx: RequestContext, Summarise { text }| async move {
                let params = CreateMessageRequestParams {
                    messages: vec![SamplingMessage::user_text(format!(
                        "Summarise in one sentence:\n\n{text}"
                    ))],
                    max_tokens: 200,
                    ..Default::default()
                };
                let answer = ctx
                    .create_message(params)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>(answer.text().unwrap_or_default().to_owned())
            },
        )
        .tool_with_context(
            "where",
            "Say which folders the client shares with the server (roots)",
            |ctx: RequestContext, _: NoArgs| async move {
                let roots = ctx.list_roots().await.map_err(|e| e.to_string())?;
                let uris: Vec<String> = roots.roots.into_iter().map(|r| r.uri).collect();
                Ok::<_, String>(uris.join("\n"))
            },
        )
        .serve_stdio()
        .await
}
