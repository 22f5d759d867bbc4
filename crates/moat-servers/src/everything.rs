//! The "everything" server: every tool, resource, template and prompt the official MCP
//! conformance suite exercises, with the names and outputs its scenarios expect.
//!
//! Besides the fixture proper, `test://watched-resource` really is watched: while any
//! connection subscribes to it, a ticker sends `notifications/resources/updated` for it
//! every [`WATCH_INTERVAL`] to the connections watching it. Nothing is spawned by
//! [`server()`] itself.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moat::schemars::{self, JsonSchema};
use moat::types::{
    BlobResourceContents, ContentBlock, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, LoggingLevel, Prompt, PromptMessage, Resource, ResourceTemplate, Role,
    SamplingMessage, TextResourceContents, Tool,
};
use moat::{NoArgs, RequestContext, ResourceRequest, Server, WeakServer};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// A 1×1 PNG, base64.
pub const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A tiny WAV file, base64.
pub const WAV_BASE64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// The resource that sends update notifications to its subscribers.
pub const WATCHED_URI: &str = "test://watched-resource";
/// How often the watched resource "changes".
pub const WATCH_INTERVAL: Duration = Duration::from_secs(3);

const STEP_DELAY: Duration = Duration::from_millis(50);

/// Build the everything server. Cheap, and without side effects: nothing is spawned
/// until a connection subscribes to the watched resource.
pub fn server() -> Server {
    let server = Server::new("moat-everything", env!("CARGO_PKG_VERSION"));
    let server = tools(server);
    let server = resources(server);
    let server = prompts(server);
    let server = server.completion(|_params| async { Ok::<_, String>(Vec::new()) });
    let watcher = Arc::new(Watcher::default());
    let weak = server.downgrade();
    server.on_subscribe(move |uri, watching| {
        if uri == WATCHED_URI {
            watcher.changed(watching, &weak);
        }
    })
}

// ---------------------------------------------------------------------------------------
// Tools

/// A tool without arguments. Its schema is spelled out: the one derived from [`NoArgs`]
/// would carry `NoArgs`'s own doc comment as a `description`.
fn tool(name: &str, description: &str) -> Tool {
    Tool::new(name, json!({ "type": "object", "properties": {} })).with_description(description)
}

/// A tool whose input schema comes from its argument type.
fn typed_tool(name: &str, description: &str) -> Tool {
    Tool::new(name, Value::Null).with_description(description)
}

fn tools(server: Server) -> Server {
    let server = server.tool_def(
        tool("test_simple_text", "Tests simple text content response"),
        move |_: RequestContext, _: NoArgs| async {
            Ok::<_, String>("This is a simple text response for testing.")
        },
    );
    let server = server.tool_def(
        tool("test_image_content", "Tests image content response"),
        move |_: RequestContext, _: NoArgs| async {
            Ok::<_, String>(ContentBlock::image(PNG_BASE64, "image/png"))
        },
    );
    let server = server.tool_def(
        tool("test_audio_content", "Tests audio content response"),
        move |_: RequestContext, _: NoArgs| async {
            Ok::<_, String>(ContentBlock::audio(WAV_BASE64, "audio/wav"))
        },
    );
    let server = server.tool_def(
        tool(
            "test_embedded_resource",
            "Tests embedded resource content response",
        ),
        move |_: RequestContext, _: NoArgs| async {
            Ok::<_, String>(ContentBlock::resource(text_contents(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            )))
        },
    );
    let server = server.tool_def(
        tool(
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
        ),
        move |_: RequestContext, _: NoArgs| async {
            Ok::<_, String>(vec![
                ContentBlock::text("Multiple content types test:"),
                ContentBlock::image(PNG_BASE64, "image/png"),
                ContentBlock::resource(text_contents(
                    "test://mixed-content-resource",
                    "application/json",
                    r#"{"test":"data","value":123}"#,
                )),
            ])
        },
    );
    let server = server.tool_def(
        tool(
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            ctx.log(LoggingLevel::Info, None, json!("Tool execution started"))
                .await;
            tokio::time::sleep(STEP_DELAY).await;
            ctx.log(LoggingLevel::Info, None, json!("Tool processing data"))
                .await;
            tokio::time::sleep(STEP_DELAY).await;
            ctx.log(LoggingLevel::Info, None, json!("Tool execution completed"))
                .await;
            Ok::<_, String>("Tool with logging executed successfully")
        },
    );
    let server = server.tool_def(
        tool(
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
        ),
        move |ctx: RequestContext, _: NoArgs| {
            async move {
                for (i, step) in [0u32, 50, 100].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(STEP_DELAY).await;
                    }
                    let message = format!("Completed step {step} of 100");
                    ctx.progress(f64::from(step), Some(100.0), Some(message))
                        .await;
                }
                // The token, echoed as text; REF falls back to 0 when there is none.
                let text = match ctx.progress_token() {
                    Some(moat::protocol::RequestId::String(s)) => s.to_string(),
                    Some(token) => token.to_string(),
                    None => "0".to_owned(),
                };
                Ok::<_, String>(text)
            }
        },
    );
    let server = server.tool_def(
        tool("test_error_handling", "Tests error response handling"),
        move |_: RequestContext, _: NoArgs| async {
            Err::<String, _>("This tool intentionally returns an error for testing")
        },
    );
    let server = server.tool_def(
        typed_tool(
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
        ),
        move |ctx: RequestContext, args: SamplingArgs| async move {
            Ok::<_, String>(sample(&ctx, args.prompt).await)
        },
    );
    let server = server.tool_def(
        typed_tool(
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
        ),
        move |ctx: RequestContext, args: ElicitationArgs| async move {
            let params = json!({
                "message": args.message,
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "username": { "type": "string", "description": "User's response" },
                        "email": { "type": "string", "description": "User's email address" },
                    },
                    "required": ["username", "email"],
                },
            });
            Ok::<_, String>(match elicit(&ctx, &params).await {
                Ok((action, content)) => {
                    format!("User response: action={action}, content={content}")
                }
                Err(e) => format!("Elicitation not supported or error: {e}"),
            })
        },
    );
    let server = server.tool_def(
        tool(
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values for every primitive type (SEP-1034)",
        ),
        move |ctx: RequestContext, _: NoArgs| {
            async move {
                let params = json!({
                    "message": "Please review and update the form fields with defaults",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "name": { "type": "string", "description": "User name", "default": "John Doe" },
                            "age": { "type": "integer", "description": "User age", "default": 30 },
                            "score": { "type": "number", "description": "User score", "default": 95.5 },
                            "status": {
                                "type": "string",
                                "description": "User status",
                                "enum": ["active", "inactive", "pending"],
                                "default": "active",
                            },
                            "verified": { "type": "boolean", "description": "Verification status", "default": true },
                        },
                        "required": [],
                    },
                });
                Ok::<_, String>(elicitation_completed(&ctx, &params).await)
            }
        },
    );
    let server = server.tool_def(
        tool(
            "test_elicitation_sep1330_enums",
            "Tests elicitation with every enum schema variant (SEP-1330)",
        ),
        move |ctx: RequestContext, _: NoArgs| {
            async move {
                let params = json!({
                    "message": "Please select options from the enum fields",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "untitledSingle": {
                                "type": "string",
                                "description": "Select one option",
                                "enum": ["option1", "option2", "option3"],
                            },
                            "titledSingle": {
                                "type": "string",
                                "description": "Select one option with titles",
                                "oneOf": [
                                    { "const": "value1", "title": "First Option" },
                                    { "const": "value2", "title": "Second Option" },
                                    { "const": "value3", "title": "Third Option" },
                                ],
                            },
                            "legacyEnum": {
                                "type": "string",
                                "description": "Select one option (legacy)",
                                "enum": ["opt1", "opt2", "opt3"],
                                "enumNames": ["Option One", "Option Two", "Option Three"],
                            },
                            "untitledMulti": {
                                "type": "array",
                                "description": "Select multiple options",
                                "minItems": 1,
                                "maxItems": 3,
                                "items": { "type": "string", "enum": ["option1", "option2", "option3"] },
                            },
                            "titledMulti": {
                                "type": "array",
                                "description": "Select multiple options with titles",
                                "minItems": 1,
                                "maxItems": 3,
                                "items": {
                                    "anyOf": [
                                        { "const": "value1", "title": "First Choice" },
                                        { "const": "value2", "title": "Second Choice" },
                                        { "const": "value3", "title": "Third Choice" },
                                    ],
                                },
                            },
                        },
                        "required": [],
                    },
                });
                let mut params = params;
                // Multi-select (array) fields exist from 2025-11-25; older clients get the
                // single-select variants only.
                if !ctx.protocol_version().is_some_and(|v| v.has_multi_select_elicitation()) {
                    if let Some(props) = params["requestedSchema"]["properties"].as_object_mut() {
                        props.remove("untitledMulti");
                        props.remove("titledMulti");
                    }
                }
                Ok::<_, String>(elicitation_completed(&ctx, &params).await)
            }
        },
    );
    let server = server.tool_def(
        Tool::new("json_schema_2020_12_tool", json_schema_2020_12())
            .with_description("Tool with JSON Schema 2020-12 features"),
        move |_: RequestContext, args: RawArgs| async move {
            Ok::<_, String>(format!(
                "JSON Schema 2020-12 tool called with: {}",
                compact_json(args.0.get())
            ))
        },
    );
    server.tool_def(
        tool(
            "test_reconnection",
            "Tests SSE stream disconnection and client reconnection (SEP-1699)",
        ),
        move |_: RequestContext, _: NoArgs| {
            async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok::<_, String>(
                    "Reconnection test completed successfully. If you received this, the client properly \
                     reconnected after stream closure.",
                )
            }
        },
    )
}

#[derive(Deserialize, JsonSchema)]
struct SamplingArgs {
    /// The prompt to send to the LLM
    prompt: String,
}

#[derive(Deserialize, JsonSchema)]
struct ElicitationArgs {
    /// The message to show the user
    message: String,
}

/// Tool arguments kept as the client wrote them (the tool's schema is given verbatim).
#[derive(Deserialize)]
#[serde(transparent)]
struct RawArgs(Box<RawValue>);

impl JsonSchema for RawArgs {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("RawArgs")
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "object" })
    }
}

/// The input schema of `json_schema_2020_12_tool`: the 0.1.16 fixture plus the SEP-2106
/// keywords the suite's HEAD also checks.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {
                    "street": { "type": "string" },
                    "city": { "type": "string" },
                },
            },
        },
        "properties": {
            "name": { "type": "string" },
            "address": { "$ref": "#/$defs/address" },
            "contactMethod": { "type": "string", "enum": ["phone", "email"] },
            "phone": { "type": "string" },
            "email": { "type": "string" },
        },
        "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
        "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false,
    })
}

/// Ask the client's LLM to answer `prompt`.
async fn sample(ctx: &RequestContext, prompt: String) -> String {
    let params = CreateMessageRequestParams {
        messages: vec![SamplingMessage::user_text(prompt)],
        max_tokens: 100,
        ..Default::default()
    };
    let result: moat::Result<CreateMessageResult> = ctx.create_message(params).await;
    match result {
        Ok(result) => {
            let text = result.content.blocks().iter().find_map(|b| b.as_text());
            format!("LLM response: {}", text.unwrap_or("[non-text content]"))
        }
        Err(e) => format!("Sampling not supported or error: {e}"),
    }
}

/// What `test_elicitation_sep1034_defaults` and `test_elicitation_sep1330_enums` answer.
async fn elicitation_completed(ctx: &RequestContext, params: &Value) -> String {
    match elicit(ctx, params).await {
        Ok((action, content)) => {
            format!("Elicitation completed: action={action}, content={content}")
        }
        Err(e) => format!("Elicitation not supported or error: {e}"),
    }
}

/// Ask the client for input (a request in the handshake era, an input request of a
/// multi-round-trip answer in 2026-07-28); returns the action and the content as JSON, or
/// `undefined` when there is none.
async fn elicit(ctx: &RequestContext, params: &Value) -> Result<(String, String), String> {
    let params: ElicitRequestParams = serde_json::from_value(params.clone())
        .map_err(|e| format!("bad elicitation request: {e}"))?;
    let result = ctx.elicit(params).await.map_err(|e| e.to_string())?;
    let action = serde_json::to_value(result.action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let content = match &result.content {
        Some(c) => serde_json::to_string(c).unwrap_or_default(),
        None => "undefined".to_owned(),
    };
    Ok((action, content))
}

/// `text` without the whitespace between JSON tokens (strings untouched).
fn compact_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
    out
}

fn text_contents(uri: &str, mime_type: &str, text: &str) -> TextResourceContents {
    TextResourceContents {
        mime_type: Some(mime_type.to_owned()),
        ..TextResourceContents::new(uri, text)
    }
}

// ---------------------------------------------------------------------------------------
// Resources

fn resource(uri: &str, name: &str, title: &str, description: &str, mime_type: &str) -> Resource {
    Resource {
        uri: uri.to_owned(),
        name: name.to_owned(),
        title: Some(title.to_owned()),
        description: Some(description.to_owned()),
        mime_type: Some(mime_type.to_owned()),
        ..Default::default()
    }
}

fn resources(server: Server) -> Server {
    let server = server.resource_def(
        resource(
            "test://static-text",
            "static-text",
            "Static Text Resource",
            "A static text resource for testing",
            "text/plain",
        ),
        move |_: ResourceRequest| async {
            Ok::<_, String>("This is the content of the static text resource.")
        },
    );
    let server = server.resource_def(
        resource(
            "test://static-binary",
            "static-binary",
            "Static Binary Resource",
            "A static binary resource (image) for testing",
            "image/png",
        ),
        move |req: ResourceRequest| async move {
            Ok::<_, String>(moat::types::ResourceContents::Blob(BlobResourceContents {
                mime_type: Some("image/png".to_owned()),
                ..BlobResourceContents::new(req.uri, PNG_BASE64)
            }))
        },
    );
    let server = server.resource_def(
        resource(
            WATCHED_URI,
            "watched-resource",
            "Watched Resource",
            "A resource that auto-updates every 3 seconds",
            "text/plain",
        ),
        move |_: ResourceRequest| async { Ok::<_, String>("Watched resource content") },
    );
    let template = ResourceTemplate {
        uri_template: "test://template/{id}/data".to_owned(),
        name: "template".to_owned(),
        title: Some("Resource Template".to_owned()),
        description: Some("A resource template with parameter substitution".to_owned()),
        mime_type: Some("application/json".to_owned()),
        ..Default::default()
    };
    server
        .try_resource_template(template, move |req: ResourceRequest| {
            let id = req.var("id").unwrap_or_default().to_owned();
            async move { Ok::<_, String>(template_data(&id)) }
        })
        .expect("the template is well formed")
}

/// `{"id":…,"templateTest":true,"data":"Data for ID: …"}`, in that key order.
fn template_data(id: &str) -> String {
    let quoted = |s: &str| Value::String(s.to_owned()).to_string();
    format!(
        r#"{{"id":{},"templateTest":true,"data":{}}}"#,
        quoted(id),
        quoted(&format!("Data for ID: {id}"))
    )
}

// ---------------------------------------------------------------------------------------
// Prompts

fn prompt(name: &str, title: &str, description: &str) -> Prompt {
    Prompt {
        name: name.to_owned(),
        title: Some(title.to_owned()),
        description: Some(description.to_owned()),
        ..Default::default()
    }
}

#[derive(Deserialize, JsonSchema)]
struct PromptArgs {
    /// First test argument
    arg1: String,
    /// Second test argument
    arg2: String,
}

#[derive(Deserialize, JsonSchema)]
struct EmbeddedResourceArgs {
    /// URI of the resource to embed
    #[serde(rename = "resourceUri")]
    resource_uri: String,
}

fn prompts(server: Server) -> Server {
    let server = server.prompt_def(
        prompt(
            "test_simple_prompt",
            "Simple Test Prompt",
            "A simple prompt without arguments",
        ),
        move |_: RequestContext, _: NoArgs| async {
            Ok::<_, String>(PromptMessage::user_text(
                "This is a simple prompt for testing.",
            ))
        },
    );
    let server = server.prompt_def(
        prompt(
            "test_prompt_with_arguments",
            "Prompt With Arguments",
            "A prompt with required arguments",
        ),
        move |_: RequestContext, PromptArgs { arg1, arg2 }| async move {
            Ok::<_, String>(PromptMessage::user_text(format!(
                "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
            )))
        },
    );
    let server = server.prompt_def(
        prompt(
            "test_prompt_with_embedded_resource",
            "Prompt With Embedded Resource",
            "A prompt that includes an embedded resource",
        ),
        move |_: RequestContext, args: EmbeddedResourceArgs| async move {
            Ok::<_, String>(vec![
                PromptMessage::new(
                    Role::User,
                    ContentBlock::resource(text_contents(
                        &args.resource_uri,
                        "text/plain",
                        "Embedded resource content for testing.",
                    )),
                ),
                PromptMessage::user_text("Please process the embedded resource above."),
            ])
        },
    );
    server.prompt_def(
        prompt(
            "test_prompt_with_image",
            "Prompt With Image",
            "A prompt that includes image content",
        ),
        move |_: RequestContext, _: NoArgs| async {
            Ok::<_, String>(vec![
                PromptMessage::new(Role::User, ContentBlock::image(PNG_BASE64, "image/png")),
                PromptMessage::user_text("Please analyze the image above."),
            ])
        },
    )
}

// ---------------------------------------------------------------------------------------
// The watched resource

/// The ticker behind `test://watched-resource`: while at least one connection watches the
/// resource (`resources/subscribe`, or a listen stream naming it), it sends
/// `notifications/resources/updated` every [`WATCH_INTERVAL`]; it stops with the last
/// watcher, or when the server is gone.
#[derive(Default)]
struct Watcher {
    state: Mutex<(usize, Option<tokio::task::JoinHandle<()>>)>,
}

impl Watcher {
    fn changed(&self, watching: bool, server: &WeakServer) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (count, task) = &mut *state;
        if watching {
            *count += 1;
            if *count == 1 {
                let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                    return;
                };
                let server = server.clone();
                *task = Some(runtime.spawn(async move {
                    let start = tokio::time::Instant::now() + WATCH_INTERVAL;
                    let mut ticks = tokio::time::interval_at(start, WATCH_INTERVAL);
                    loop {
                        ticks.tick().await;
                        let Some(server) = server.upgrade() else {
                            return;
                        };
                        server.notify_resource_updated(WATCHED_URI).await;
                    }
                }));
            }
        } else {
            *count = count.saturating_sub(1);
            if *count == 0 {
                if let Some(task) = task.take() {
                    task.abort();
                }
            }
        }
    }
}
