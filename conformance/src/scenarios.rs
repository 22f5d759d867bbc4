//! What the client does in each scenario. The mock servers grade the requests they receive,
//! so each function performs the steps its scenario watches for and fails only when the SDK
//! reports an error.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use moat::types::{
    CallToolResult, ContentBlock, CreateMessageResult, Role, Root, SamplingContent,
    SamplingMessageContentBlock, Tool,
};
use moat::{Client, ClientBuilder, HttpOptions};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::auth;
use crate::form;
use crate::invocation::Invocation;

/// How the client introduces itself.
const CLIENT_NAME: &str = "moat-conformance-client";

/// Every request's deadline: well inside the suite's 30 s per run, so that a request the
/// server never answers fails with a message instead of the process being killed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// Run the scenario the suite named.
pub async fn run(inv: &Invocation) -> anyhow::Result<()> {
    let options = auth::configure(inv, HttpOptions::default())?;
    let scenario = inv.scenario.as_str();
    match scenario {
        "initialize" => initialize(inv, options).await,
        "tools_call" => tools_call(inv, options).await,
        "elicitation-sep1034-client-defaults" => elicitation_defaults(inv, options).await,
        "sse-retry" => sse_retry(inv, options).await,
        "request-metadata" => request_metadata(inv, options).await,
        "sep-2322-client-request-state" => request_state(inv, options).await,
        "http-standard-headers" => standard_headers(inv, options).await,
        "http-custom-headers" => custom_headers(inv, options).await,
        "http-invalid-tool-headers" => invalid_tool_headers(inv, options).await,
        "json-schema-ref-no-deref" => list_tools_only(inv, options).await,
        "json-schema-2020-12-preservation" => schema_preservation(inv, options).await,
        _ if auth::credentials_for(scenario).is_some() => authorized_call(inv, options).await,
        _ => {
            tracing::warn!(
                scenario,
                "unknown scenario: listing the tools and calling each"
            );
            let client = connect(inv, builder(inv), options).await?;
            call_every_tool(&client).await?;
            client.close().await;
            Ok(())
        }
    }
}

/// The client every scenario starts from: the revision the suite asked for, every client
/// capability (a user who accepts each elicitation with the form's defaults, a "model" that
/// answers sampling with a fixed text, one root), so each is declared and graded.
fn builder(inv: &Invocation) -> ClientBuilder {
    ClientBuilder::new(CLIENT_NAME, env!("CARGO_PKG_VERSION"))
        .protocol(inv.protocol)
        .request_timeout(Some(REQUEST_TIMEOUT))
        .on_elicitation(|params| async move { Ok(form::accept_with_defaults(&params)) })
        .on_sampling(|_params| async move {
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: SamplingContent::Single(SamplingMessageContentBlock::text(
                    "A sampled answer from the conformance client.",
                )),
                model: CLIENT_NAME.to_owned(),
                stop_reason: Some("endTurn".to_owned()),
                meta: None,
            })
        })
        .roots(vec![Root::new("file:///conformance")])
}

async fn connect(
    inv: &Invocation,
    builder: ClientBuilder,
    options: HttpOptions,
) -> anyhow::Result<Client> {
    let client = builder
        .connect_url(&inv.server_url, options)
        .await
        .with_context(|| format!("connecting to {}", inv.server_url))?;
    tracing::info!(
        server = %client.server_info().name,
        version = ?client.protocol_version(),
        "connected"
    );
    Ok(client)
}

async fn list_tools(client: &Client) -> anyhow::Result<Vec<Tool>> {
    let tools = client.list_all_tools().await.context("tools/list")?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    tracing::info!(?names, "tools/list");
    Ok(tools)
}

async fn call(client: &Client, name: &str, arguments: Value) -> anyhow::Result<CallToolResult> {
    let result = client
        .call_tool(name, arguments)
        .await
        .with_context(|| format!("tools/call {name}"))?;
    tracing::info!(
        tool = name,
        is_error = result.is_error.unwrap_or(false),
        text = %text_of(&result),
        "tools/call"
    );
    Ok(result)
}

/// The text blocks of a result, joined.
fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Call every listed tool with arguments made up from its schema.
async fn call_every_tool(client: &Client) -> anyhow::Result<()> {
    for tool in list_tools(client).await? {
        call(
            client,
            &tool.name,
            form::sample_arguments(&tool.input_schema),
        )
        .await?;
    }
    Ok(())
}

/// The handshake, then `tools/list`.
async fn initialize(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    let client = connect(inv, builder(inv), options).await?;
    list_tools(&client).await?;
    client.close().await;
    Ok(())
}

/// Call `add_numbers` with two numbers.
async fn tools_call(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    let client = connect(inv, builder(inv), options).await?;
    let tools = list_tools(&client).await?;
    if !tools.iter().any(|t| t.name == "add_numbers") {
        bail!("the server lists no add_numbers tool");
    }
    call(&client, "add_numbers", json!({ "a": 2, "b": 3 })).await?;
    client.close().await;
    Ok(())
}

/// SEP-1034: the tool elicits a form whose fields all have defaults; the user accepts it as
/// it stands, so the answer holds every default.
async fn elicitation_defaults(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    let client = connect(inv, builder(inv), options).await?;
    list_tools(&client).await?;
    call(&client, "test_client_elicitation_defaults", json!({})).await?;
    client.close().await;
    Ok(())
}

/// SEP-1699: the server ends the tool call's SSE stream before answering; the transport
/// waits the stream's `retry` and resumes it with `Last-Event-ID`, where the answer arrives.
async fn sse_retry(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    let client = connect(inv, builder(inv), options).await?;
    list_tools(&client).await?;
    call(&client, "test_reconnection", json!({})).await?;
    client.close().await;
    Ok(())
}

/// SEP-2575: the server refuses the first request with -32022; the SDK retries it with a
/// revision from the error's `supported` list, then carries `_meta` and the version header on
/// everything.
async fn request_metadata(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    let client = connect(inv, builder(inv), options).await?;
    list_tools(&client).await?;
    client.close().await;
    Ok(())
}

/// SEP-2322, multi-round-trip requests: `requestState` echoed byte for byte under a new
/// request id, an unrelated call in between that carries none of it, no `requestState` when
/// the server sent none, and a result without `resultType` taken as complete.
async fn request_state(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    // The first form the user sees waits until an unrelated call has been made, so that
    // call happens while the echo-state request is between its rounds.
    let (asked_tx, asked_rx) = oneshot::channel::<()>();
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let gate = Arc::new(Mutex::new(Some((asked_tx, go_rx))));
    let builder = builder(inv).on_elicitation(move |params| {
        let first = gate.lock().unwrap_or_else(|e| e.into_inner()).take();
        async move {
            if let Some((asked, go)) = first {
                let _ = asked.send(());
                let _ = go.await;
            }
            Ok(form::accept_with_defaults(&params))
        }
    });
    let client = connect(inv, builder, options).await?;
    list_tools(&client).await?;

    echo_state_around_an_unrelated_call(&client, asked_rx, go_tx).await?;
    call(&client, "test_mrtr_no_state", json!({})).await?;
    call(&client, "test_mrtr_no_result_type", json!({})).await?;
    client.close().await;
    Ok(())
}

/// Call `test_mrtr_echo_state`; once it is between rounds (the user has its form, `asked`),
/// call `test_mrtr_unrelated`, then let the user answer (`go`) and the retry go out.
async fn echo_state_around_an_unrelated_call(
    client: &Client,
    asked: oneshot::Receiver<()>,
    go: oneshot::Sender<()>,
) -> anyhow::Result<()> {
    let echo = call(client, "test_mrtr_echo_state", json!({}));
    tokio::pin!(echo);
    tokio::select! {
        done = &mut echo => {
            done?;
            bail!("test_mrtr_echo_state completed without asking for input");
        }
        asked = asked => asked.context("the elicitation handler went away")?,
    }
    let unrelated = call(client, "test_mrtr_unrelated", json!({})).await;
    let _ = go.send(());
    unrelated?;
    echo.await?;
    Ok(())
}

/// SEP-2243: `Mcp-Method` on every request and `Mcp-Name` on `tools/call`, `resources/read`
/// and `prompts/get`, so every one of those methods is used.
async fn standard_headers(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    let client = connect(inv, builder(inv), options).await?;
    call_every_tool(&client).await?;
    let resources = client
        .list_all_resources()
        .await
        .context("resources/list")?;
    for resource in resources {
        client
            .read_resource(&resource.uri)
            .await
            .with_context(|| format!("resources/read {}", resource.uri))?;
        tracing::info!(uri = %resource.uri, "resources/read");
    }
    let prompts = client.list_all_prompts().await.context("prompts/list")?;
    for prompt in prompts {
        let arguments: BTreeMap<String, String> = prompt
            .arguments
            .iter()
            .flatten()
            .filter(|a| a.required == Some(true))
            .map(|a| (a.name.clone(), "conformance".to_owned()))
            .collect();
        client
            .get_prompt(&prompt.name, arguments)
            .await
            .with_context(|| format!("prompts/get {}", prompt.name))?;
        tracing::info!(prompt = %prompt.name, "prompts/get");
    }
    client.close().await;
    Ok(())
}

/// SEP-2243 `x-mcp-header`: the calls the context names, made after `tools/list` told the
/// transport which arguments to mirror into `Mcp-Param-*` headers.
async fn custom_headers(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    let calls = inv
        .context
        .get("toolCalls")
        .and_then(Value::as_array)
        .context("MCP_CONFORMANCE_CONTEXT has no toolCalls")?;
    let client = connect(inv, builder(inv), options).await?;
    list_tools(&client).await?;
    for entry in calls {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .context("a toolCalls entry has no name")?;
        let arguments = entry.get("arguments").cloned().unwrap_or(Value::Null);
        call(&client, name, arguments).await?;
    }
    client.close().await;
    Ok(())
}

/// SEP-2243: tools whose `x-mcp-header` annotations are invalid never reach the application
/// (the transport drops them from `tools/list`), so calling every listed tool calls only the
/// valid one.
async fn invalid_tool_headers(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    let client = connect(inv, builder(inv), options).await?;
    call_every_tool(&client).await?;
    client.close().await;
    Ok(())
}

/// SEP-2106: list tools whose schemas hold a network `$ref`, and fetch nothing.
async fn list_tools_only(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    let client = connect(inv, builder(inv), options).await?;
    list_tools(&client).await?;
    client.close().await;
    Ok(())
}

/// SEP-1613/SEP-2106: hand the focal tool's `inputSchema` back, as received, to the echo tool.
async fn schema_preservation(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    const ECHO: &str = "json_schema_echo";
    let client = connect(inv, builder(inv), options).await?;
    let tools = list_tools(&client).await?;
    let focal = tools
        .iter()
        .find(|t| t.name != ECHO)
        .context("the server lists no tool besides the echo tool")?;
    call(
        &client,
        ECHO,
        json!({ "schema": focal.input_schema.clone() }),
    )
    .await?;
    client.close().await;
    Ok(())
}

/// The `auth/*` scenarios: an authorized `tools/list`, then `test-tool` (or, on a server
/// without it, every tool).
async fn authorized_call(inv: &Invocation, options: HttpOptions) -> anyhow::Result<()> {
    let client = connect(inv, builder(inv), options).await?;
    let tools = list_tools(&client).await?;
    match tools.iter().find(|t| t.name == "test-tool") {
        Some(tool) => {
            call(
                &client,
                &tool.name,
                form::sample_arguments(&tool.input_schema),
            )
            .await?;
        }
        None => {
            for tool in &tools {
                call(
                    &client,
                    &tool.name,
                    form::sample_arguments(&tool.input_schema),
                )
                .await?;
            }
        }
    }
    client.close().await;
    Ok(())
}
