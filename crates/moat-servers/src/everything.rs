//! The "everything" server: every tool, resource, template and prompt the official MCP
//! conformance suite exercises, with the names and outputs its scenarios expect, in every
//! revision: the 2025 scenarios, and the 2026-07-28 ones (the `server-stateless`
//! diagnostics, the `input-required-result-*` multi-round-trip tools and prompt, a tool
//! with an `x-mcp-header` argument). The multi-round-trip tools ask through
//! [`RequestContext`] like any other: the SDK turns their questions into requests to the
//! client in the handshake era and into `InputRequiredResult`s in 2026-07-28.
//!
//! Besides the fixture proper, `test://watched-resource` really is watched: while any
//! connection subscribes to it, a ticker sends `notifications/resources/updated` for it
//! every [`WATCH_INTERVAL`] to the connections watching it. Nothing is spawned by
//! [`server()`] itself.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moat::schemars::{self, JsonSchema};
use moat::server::{SkillBundle, TaskStart, TaskTool};
use moat::types::{
    BlobResourceContents, ContentBlock, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitValue, LoggingLevel, Prompt, PromptMessage, Resource,
    ResourceTemplate, Role, SamplingMessage, TextResourceContents, Tool,
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
    let server = skills(server);
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
// Skills (the Skills extension): one skill with a reference file and a template.

/// The fixture's skill: `skill://moat/release-notes/SKILL.md`.
pub const SKILL_URI: &str = "skill://moat/release-notes/SKILL.md";

const SKILL_MD: &str = "---
name: release-notes
description: Write release notes from a list of merged changes, grouped and in plain words
license: Apache-2.0
metadata:
  version: \"1.0\"
---
# Release notes

1. Group the changes as Added, Changed, Fixed (see references/GROUPS.md).
2. One line per change, in the user's words, no ticket numbers.
3. Fill in templates/notes.md.
";

fn skills(server: Server) -> Server {
    let skill = SkillBundle::from_files([
        ("SKILL.md", SKILL_MD),
        (
            "references/GROUPS.md",
            "Added: new things a user can do.\nChanged: what works differently.\nFixed: what was broken.\n",
        ),
        ("templates/notes.md", "## Added\n\n## Changed\n\n## Fixed\n"),
    ]);
    match skill {
        Ok(skill) => server.skill(skill.with_prefix("moat")),
        // The fixture's own text: a failure here is a bug in this file, found by its tests.
        Err(e) => panic!("the everything fixture's skill is malformed: {e}"),
    }
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
                if !ctx.protocol_version().is_some_and(|v| v.has_multi_select_elicitation())
                    && let Some(props) = params["requestedSchema"]["properties"].as_object_mut() {
                        props.remove("untitledMulti");
                        props.remove("titledMulti");
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
    let server = server.tool_def(
        tool(
            "test_reconnection",
            "Tests SSE stream disconnection and client reconnection (SEP-1699). The server \
             closes the stream mid-call and the client gets the result when it resumes",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            ctx.progress(0.0, Some(100.0), Some("Closing the stream".to_owned()))
                .await;
            ctx.log(
                LoggingLevel::Info,
                None,
                json!("Closing the stream; resume it to get the result"),
            )
            .await;
            // The client resumes with `Last-Event-ID` after the `retry` delay and receives
            // the result, sent meanwhile.
            ctx.close_stream().await;
            tokio::time::sleep(RECONNECTION_DELAY).await;
            ctx.progress(100.0, Some(100.0), None).await;
            Ok::<_, String>(
                "Reconnection test completed successfully. If you received this, the client \
                 properly reconnected after stream closure.",
            )
        },
    );
    let server = diagnostic_tools(server);
    let server = input_required_tools(server);
    task_tools(server)
}

/// How long `test_reconnection` works after closing its stream.
const RECONNECTION_DELAY: Duration = Duration::from_millis(300);

/// The 2026-07-28 diagnostic tools of the `server-stateless` scenario, and a tool with an
/// `x-mcp-header` argument. They work in every revision.
fn diagnostic_tools(server: Server) -> Server {
    let server = server.tool_def(
        tool(
            "test_missing_capability",
            "Tests a tool that needs sampling: a client that did not declare it gets \
             MissingRequiredClientCapabilityError (-32021) in 2026-07-28",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            let params = CreateMessageRequestParams {
                messages: vec![SamplingMessage::user_text("Say hello")],
                max_tokens: 20,
                ..Default::default()
            };
            let result = ctx.create_message(params).await?;
            Ok::<_, moat::Error>(format!("Sampling answered: {}", sampled_text(&result)))
        },
    );
    let server = server.tool_def(
        tool(
            "test_streaming_elicitation",
            "Tests elicitation during a call: a request on the response stream in the \
             handshake era, an input request of an InputRequiredResult in 2026-07-28",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            ctx.progress(50.0, Some(100.0), None).await;
            let answer = ctx
                .elicit(form(
                    "Continue?",
                    json!({ "ok": { "type": "boolean" } }),
                    &["ok"],
                ))
                .await?;
            Ok::<_, moat::Error>(format!("Streaming complete: action={}", action(&answer)))
        },
    );
    let server = server.tool_def(
        tool(
            "test_logging_tool",
            "Tests logging: logs at info only if the request asked for log messages",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            ctx.log(
                LoggingLevel::Info,
                None,
                json!("Diagnostic trace logging activated"),
            )
            .await;
            Ok::<_, String>("Logging evaluated")
        },
    );
    let weak = server.downgrade();
    let changes = Arc::new(AtomicUsize::new(0));
    let server = server.tool_def(
        tool(
            "test_trigger_tool_change",
            "Changes the tool list (registers or updates test_dynamic_tool), so that \
             clients are told it changed",
        ),
        move |_: RequestContext, _: NoArgs| {
            let (weak, changes) = (weak.clone(), changes.clone());
            async move {
                let server = weak.upgrade().ok_or("the server is gone")?;
                let n = changes.fetch_add(1, Ordering::Relaxed) + 1;
                server.tool_def(
                    tool(
                        "test_dynamic_tool",
                        &format!("A tool registered by test_trigger_tool_change (change {n})"),
                    ),
                    move |_: RequestContext, _: NoArgs| async move {
                        Ok::<_, String>(format!("Dynamic tool, change {n}"))
                    },
                );
                Ok::<_, &str>("Tool list changed")
            }
        },
    );
    let weak = server.downgrade();
    let changes = Arc::new(AtomicUsize::new(0));
    let server = server.tool_def(
        tool(
            "test_trigger_prompt_change",
            "Changes the prompt list (registers or updates test_dynamic_prompt), so that \
             clients are told it changed",
        ),
        move |_: RequestContext, _: NoArgs| {
            let (weak, changes) = (weak.clone(), changes.clone());
            async move {
                let server = weak.upgrade().ok_or("the server is gone")?;
                let n = changes.fetch_add(1, Ordering::Relaxed) + 1;
                server.prompt_def(
                    prompt(
                        "test_dynamic_prompt",
                        "Dynamic Prompt",
                        &format!("A prompt registered by test_trigger_prompt_change (change {n})"),
                    ),
                    move |_: RequestContext, _: NoArgs| async move {
                        Ok::<_, String>(PromptMessage::user_text(format!(
                            "Dynamic prompt, change {n}"
                        )))
                    },
                );
                Ok::<_, &str>("Prompt list changed")
            }
        },
    );
    server.tool_def(
        Tool::new(
            "test_custom_header",
            json!({
                "type": "object",
                "properties": {
                    "message": {
                        "type": "string",
                        "description": "The message to echo; mirrored in the Mcp-Param-Message header",
                        "x-mcp-header": "Message",
                    },
                },
                "required": ["message"],
            }),
        )
        .with_description(
            "Echoes its message, which 2026-07-28 clients also send as the Mcp-Param-Message \
             header (SEP-2243)",
        ),
        move |_: RequestContext, args: EchoArgs| async move {
            Ok::<_, String>(format!("Echo: {}", args.message))
        },
    )
}

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    message: String,
}

/// The tools of the 2026-07-28 `input-required-result-*` scenarios (SEP-2322). They ask
/// through [`RequestContext`] like any tool, so they work in the handshake era too (as
/// requests to the client); the keys name the input requests of 2026-07-28.
fn input_required_tools(server: Server) -> Server {
    let server = server.tool_def(
        tool(
            "test_input_required_result_elicitation",
            "MRTR: asks the user's name (input request user_name), then greets them",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            let answer = ctx
                .keyed("user_name")
                .elicit(ask_name("What is your name?"))
                .await?;
            Ok::<_, moat::Error>(format!("Hello, {}!", field(&answer, "name")))
        },
    );
    let server = server.tool_def(
        tool(
            "test_input_required_result_sampling",
            "MRTR: asks the client's LLM a question (input request capital_question)",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            let params = CreateMessageRequestParams {
                messages: vec![SamplingMessage::user_text("What is the capital of France?")],
                max_tokens: 100,
                ..Default::default()
            };
            let result = ctx.keyed("capital_question").create_message(params).await?;
            Ok::<_, moat::Error>(format!("Sampling result: {}", sampled_text(&result)))
        },
    );
    let server = server.tool_def(
        tool(
            "test_input_required_result_list_roots",
            "MRTR: asks the client for its roots (input request client_roots)",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            let roots = ctx.keyed("client_roots").list_roots().await?;
            let uris: Vec<&str> = roots.roots.iter().map(|r| r.uri.as_str()).collect();
            Ok::<_, moat::Error>(format!("Found {} root(s): {}", uris.len(), uris.join(", ")))
        },
    );
    let server = server.tool_def(
        tool(
            "test_input_required_result_request_state",
            "MRTR: asks for a confirmation (input request confirm); earlier answers travel in \
             the sealed requestState",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            let answer = ctx.keyed("confirm").elicit(confirm()).await?;
            Ok::<_, moat::Error>(format!(
                "state-ok: action={}, ok={}",
                action(&answer),
                field(&answer, "ok")
            ))
        },
    );
    let server = server.tool_def(
        tool(
            "test_input_required_result_multiple_inputs",
            "MRTR: asks for a name, an LLM greeting and the roots at once (user_name, \
             greeting, client_roots)",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            let greeting = CreateMessageRequestParams {
                messages: vec![SamplingMessage::user_text("Generate a greeting")],
                max_tokens: 50,
                ..Default::default()
            };
            // Asked together, so the client gets all three in one InputRequiredResult.
            let (name, greeting, roots) = tokio::join!(
                ctx.keyed("user_name")
                    .elicit(ask_name("What is your name?")),
                ctx.keyed("greeting").create_message(greeting),
                ctx.keyed("client_roots").list_roots(),
            );
            let (name, greeting, roots) = (name?, greeting?, roots?);
            Ok::<_, moat::Error>(format!(
                "Name: {}; Greeting: {}; Roots: {}",
                field(&name, "name"),
                sampled_text(&greeting),
                roots.roots.len()
            ))
        },
    );
    let server = server.tool_def(
        tool(
            "test_input_required_result_multi_round",
            "MRTR: asks for a name (step1), then a favourite colour (step2), in two rounds",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            let name = ctx
                .keyed("step1")
                .elicit(ask_name("Step 1: What is your name?"))
                .await?;
            let color = ctx
                .keyed("step2")
                .elicit(form(
                    "Step 2: What is your favorite color?",
                    json!({ "color": { "type": "string" } }),
                    &["color"],
                ))
                .await?;
            Ok::<_, moat::Error>(format!(
                "Multi-round complete for {} who likes {}",
                field(&name, "name"),
                field(&color, "color")
            ))
        },
    );
    let server = server.tool_def(
        tool(
            "test_input_required_result_tampered_state",
            "MRTR: asks for a confirmation with an HMAC-sealed requestState; a tampered state \
             is refused with -32602",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            let answer = ctx.keyed("confirm").elicit(confirm()).await?;
            Ok::<_, moat::Error>(format!("integrity-ok: action={}", action(&answer)))
        },
    );
    server.tool_def(
        tool(
            "test_input_required_result_capabilities",
            "MRTR: asks only for what the client declared (elicitation, sampling, roots)",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            let caps = ctx.client_capabilities().cloned().unwrap_or_default();
            let sample = CreateMessageRequestParams {
                messages: vec![SamplingMessage::user_text("Sample request")],
                max_tokens: 50,
                ..Default::default()
            };
            let elicitation = form(
                "Elicitation input",
                json!({ "value": { "type": "string" } }),
                &["value"],
            );
            let (elicited, sampled, roots) = tokio::join!(
                async {
                    match caps.elicitation {
                        Some(_) => Some(ctx.keyed("elicit_input").elicit(elicitation).await),
                        None => None,
                    }
                },
                async {
                    match caps.sampling {
                        Some(_) => Some(ctx.keyed("sample_input").create_message(sample).await),
                        None => None,
                    }
                },
                async {
                    match caps.roots {
                        Some(_) => Some(ctx.keyed("roots_input").list_roots().await),
                        None => None,
                    }
                },
            );
            let mut received = Vec::new();
            if let Some(answer) = elicited {
                received.push(format!("elicitation ({})", action(&answer?)));
            }
            if let Some(answer) = sampled {
                received.push(format!("sampling ({})", sampled_text(&answer?)));
            }
            if let Some(answer) = roots {
                received.push(format!("roots ({})", answer?.roots.len()));
            }
            Ok::<_, moat::Error>(if received.is_empty() {
                "No supported capabilities declared".to_owned()
            } else {
                format!("capabilities-ok: received {}", received.join(", "))
            })
        },
    )
}

#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct SlowComputeArgs {
    /// How many seconds to compute (sleep)
    #[serde(default)]
    seconds: u64,
    /// A label for the computation
    #[serde(default)]
    label: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct ConfirmDeleteArgs {
    /// The file the user is asked to confirm the deletion of
    #[serde(default)]
    filename: Option<String>,
}

/// How long `slow_compute` may run synchronously before it becomes a task.
const SLOW_COMPUTE_SYNC: Duration = Duration::from_millis(100);

/// The tools of the tasks scenarios (the tasks extension of 2026-07-28, SEP-2663; they are
/// 2025-11-25 tasks too): `greet` runs synchronously; `slow_compute` becomes a task unless
/// it finishes at once; `failing_job`, `protocol_error_job`, `confirm_delete` and
/// `multi_input` run only as tasks; `test_tool_with_task` asks for a name over
/// multi-round-trip results, then becomes a task. In revisions without tasks they all run
/// synchronously.
fn task_tools(server: Server) -> Server {
    let server = server.tool_def(
        typed_tool("greet", "Greets someone (synchronous, never a task)"),
        |_ctx: RequestContext, GreetArgs { name }| async move {
            Ok::<_, String>(format!("Hello, {name}!"))
        },
    );
    let server = server.task_tool(
        typed_tool(
            "slow_compute",
            "Computes for `seconds` seconds; a task unless it is done within 100 ms",
        ),
        TaskTool::optional().start(TaskStart::After(SLOW_COMPUTE_SYNC)),
        |_ctx: RequestContext, SlowComputeArgs { seconds, label }| async move {
            let label = label.unwrap_or_else(|| "default".to_owned());
            let seconds = seconds.min(3600);
            if seconds == 0 {
                return Ok::<_, String>(format!(
                    "Computation {label:?} completed instantly. Result: 42."
                ));
            }
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            Ok(format!(
                "Computation {label:?} completed after {seconds} seconds. Result: 42."
            ))
        },
    );
    let server = server.task_tool(
        tool(
            "failing_job",
            "A job that fails after a second: as a task, completed with an isError result",
        ),
        TaskTool::required(),
        |_ctx: RequestContext, _: NoArgs| async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Err::<String, _>("simulated failure: job crashed")
        },
    );
    let server = server.task_tool(
        tool(
            "protocol_error_job",
            "A job that hits a protocol-level error after half a second: as a task, failed \
             with a JSON-RPC error",
        ),
        TaskTool::required(),
        |ctx: RequestContext, _: NoArgs| async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if let Some(task) = ctx.task() {
                task.fail(moat::protocol::ErrorObject::internal(
                    "simulated protocol error: server internal failure",
                ))
                .await;
            }
            Err::<String, _>("simulated protocol error: server internal failure")
        },
    );
    let server = server.task_tool(
        typed_tool(
            "confirm_delete",
            "Asks the user to confirm a deletion (input request confirm), then reports it",
        ),
        TaskTool::required(),
        |ctx: RequestContext, ConfirmDeleteArgs { filename }| async move {
            let filename = filename.unwrap_or_else(|| "important.txt".to_owned());
            let answer = ctx
                .keyed("confirm")
                .elicit(form(
                    &format!("Delete '{filename}'?"),
                    json!({ "confirm": { "type": "boolean" } }),
                    &["confirm"],
                ))
                .await?;
            let confirmed = action(&answer) == "accept" && field(&answer, "confirm") == "true";
            Ok::<_, moat::Error>(if confirmed {
                format!("deleted '{filename}'")
            } else {
                format!("kept '{filename}'")
            })
        },
    );
    let server = server.task_tool(
        tool(
            "multi_input",
            "Asks for a name and a confirmation at once (input requests name and confirm)",
        ),
        TaskTool::required(),
        |ctx: RequestContext, _: NoArgs| async move {
            let (name, confirmed) = tokio::join!(
                ctx.keyed("name").elicit(ask_name("Enter your name:")),
                ctx.keyed("confirm").elicit(form(
                    "Confirm action?",
                    json!({ "confirm": { "type": "boolean" } }),
                    &["confirm"],
                )),
            );
            let (name, confirmed) = (name?, confirmed?);
            Ok::<_, moat::Error>(format!(
                "name={} confirmed={}",
                field(&name, "name"),
                field(&confirmed, "confirm")
            ))
        },
    );
    server.task_tool(
        tool(
            "test_tool_with_task",
            "Asks the user's name over a multi-round-trip result (user_name), then finishes \
             as a task",
        ),
        TaskTool::required().start(TaskStart::Manual),
        |ctx: RequestContext, _: NoArgs| async move {
            let answer = ctx
                .keyed("user_name")
                .elicit(ask_name("What is your name?"))
                .await?;
            let name = field(&answer, "name");
            if ctx.continue_as_task().await {
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Ok::<_, moat::Error>(format!("Hello, {name}! (computed in task)"));
            }
            Ok(format!("Hello, {name}!"))
        },
    )
}

/// A form elicitation with string-keyed `properties` and the `required` ones.
fn form(message: &str, properties: Value, required: &[&str]) -> ElicitRequestParams {
    let params = json!({
        "message": message,
        "requestedSchema": { "type": "object", "properties": properties, "required": required },
    });
    serde_json::from_value(params).expect("a well-formed elicitation request")
}

fn ask_name(message: &str) -> ElicitRequestParams {
    form(message, json!({ "name": { "type": "string" } }), &["name"])
}

fn confirm() -> ElicitRequestParams {
    form(
        "Please confirm",
        json!({ "ok": { "type": "boolean" } }),
        &["ok"],
    )
}

/// `accept`, `decline` or `cancel`.
fn action(result: &ElicitResult) -> String {
    serde_json::to_value(result.action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A submitted field as text (`?` when absent).
fn field(result: &ElicitResult, name: &str) -> String {
    match result.content.as_ref().and_then(|c| c.get(name)) {
        Some(ElicitValue::String(s)) => s.clone(),
        Some(other) => serde_json::to_value(other)
            .map(|v| v.to_string())
            .unwrap_or_default(),
        None => "?".to_owned(),
    }
}

/// The text an LLM answered.
fn sampled_text(result: &CreateMessageResult) -> String {
    result
        .content
        .blocks()
        .iter()
        .find_map(|b| b.as_text())
        .unwrap_or("[non-text content]")
        .to_owned()
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
    let server = server.prompt_def(
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
    );
    server.prompt_def(
        prompt(
            "test_input_required_result_prompt",
            "Prompt Needing Input",
            "MRTR: asks the user for context (input request user_context) before answering",
        ),
        move |ctx: RequestContext, _: NoArgs| async move {
            let answer = ctx
                .keyed("user_context")
                .elicit(form(
                    "What context should the prompt use?",
                    json!({ "context": { "type": "string" } }),
                    &["context"],
                ))
                .await?;
            Ok::<_, moat::Error>(PromptMessage::user_text(format!(
                "Prompt with context: {}",
                field(&answer, "context")
            )))
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
            if *count == 0
                && let Some(task) = task.take()
            {
                task.abort();
            }
        }
    }
}
