//! The everything server, driven in-process by a real moat client over a line-framed
//! connection pair, as the conformance suite drives it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use moat::transport::{Connection, Limits};
use moat::types::{
    CompleteArgument, CompleteRequestParams, CompletionReference, ContentBlock,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitValue, LoggingLevel, PromptReference, ResourceContents, Role, Root, SamplingContent,
    SamplingMessageContentBlock, SubscriptionFilter,
};
use moat::{Client, ProtocolVersion, RequestOptions, VersionPreference};
use moat_servers::everything::server;
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::sync::mpsc;

const TOOLS: [&str; 28] = [
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_logging",
    "test_tool_with_progress",
    "test_error_handling",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "json_schema_2020_12_tool",
    "test_reconnection",
    "test_missing_capability",
    "test_streaming_elicitation",
    "test_logging_tool",
    "test_trigger_tool_change",
    "test_trigger_prompt_change",
    "test_custom_header",
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
];

/// The tools of the tasks scenarios (tested in `tasks.rs`).
const TASK_TOOLS: [&str; 7] = [
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
];

const PROMPTS: [&str; 5] = [
    "test_simple_prompt",
    "test_prompt_with_arguments",
    "test_prompt_with_embedded_resource",
    "test_prompt_with_image",
    "test_input_required_result_prompt",
];

/// What the test client answers `sampling/createMessage` with (as the harness does).
const SAMPLED: &str = "This is a test response from the client";

/// What the test client saw of the server's requests to it.
#[derive(Default)]
struct Seen {
    sampling: Mutex<Vec<CreateMessageRequestParams>>,
    elicitation: Mutex<Vec<Value>>,
}

fn conn_pair() -> (Connection, Connection) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    (
        Connection::from_lines(BufReader::new(ar), aw, Limits::default()),
        Connection::from_lines(BufReader::new(br), bw, Limits::default()),
    )
}

/// Answer elicitations the way the conformance harness does, by the requested schema.
fn elicitation_answer(params: &Value) -> ElicitResult {
    let props = &params["requestedSchema"]["properties"];
    let s = |v: &str| ElicitValue::String(v.to_owned());
    let content: BTreeMap<String, ElicitValue> = if props.get("username").is_some() {
        [
            ("username", s("testuser")),
            ("email", s("test@example.com")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    } else if ["name", "color", "ok", "context", "value"]
        .iter()
        .any(|k| props.get(k).is_some())
        && props.get("verified").is_none()
    {
        // The MRTR tools' one-field forms.
        [
            ("name", s("Alice")),
            ("color", s("blue")),
            ("ok", ElicitValue::Boolean(true)),
            ("context", s("test context")),
            ("value", s("v")),
        ]
        .into_iter()
        .filter(|(k, _)| props.get(k).is_some())
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    } else if props.get("verified").is_some() {
        [
            ("name", s("Jane Smith")),
            ("age", ElicitValue::Integer(25)),
            ("score", ElicitValue::Number(88.5)),
            ("status", s("inactive")),
            ("verified", ElicitValue::Boolean(false)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    } else {
        let multi = |a: &str, b: &str| ElicitValue::StringArray(vec![a.to_owned(), b.to_owned()]);
        [
            ("untitledSingle", s("option1")),
            ("titledSingle", s("value1")),
            ("legacyEnum", s("opt1")),
            ("untitledMulti", multi("option1", "option2")),
            ("titledMulti", multi("value1", "value2")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    };
    ElicitResult::accept(content)
}

async fn connect(version: ProtocolVersion) -> (Client, Arc<Seen>) {
    let (server_side, client_side) = conn_pair();
    server().start(server_side);
    let seen = Arc::new(Seen::default());
    let (s1, s2) = (seen.clone(), seen.clone());
    let client = Client::builder()
        .protocol(VersionPreference::Exact(version))
        .request_timeout(Some(Duration::from_secs(20)))
        .on_sampling(move |params: CreateMessageRequestParams| {
            s1.sampling.lock().unwrap().push(params);
            async {
                Ok(CreateMessageResult {
                    role: Role::Assistant,
                    content: SamplingContent::Single(SamplingMessageContentBlock::text(SAMPLED)),
                    model: "test-model".to_owned(),
                    stop_reason: Some("endTurn".to_owned()),
                    meta: None,
                })
            }
        })
        .on_elicitation(move |params: ElicitRequestParams| {
            let value = serde_json::to_value(&params).unwrap();
            let answer = elicitation_answer(&value);
            s2.elicitation.lock().unwrap().push(value);
            async move { Ok(answer) }
        })
        .roots(vec![Root::new("file:///test/root")])
        .connect(client_side)
        .await
        .expect("connect");
    (client, seen)
}

fn text_of(content: &[ContentBlock]) -> Vec<&str> {
    content.iter().filter_map(ContentBlock::as_text).collect()
}

async fn call_text(client: &Client, name: &str, args: Value) -> String {
    let result = client
        .call_tool(name, args)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(!result.is_error(), "{name} failed: {result:?}");
    let texts = text_of(&result.content);
    assert_eq!(texts.len(), 1, "{name}: {result:?}");
    texts[0].to_owned()
}

fn assert_base64(data: &str) {
    let bytes = STANDARD.decode(data).expect("valid base64");
    assert!(!bytes.is_empty());
}

#[tokio::test]
async fn lists_every_tool_with_description_and_object_schema() {
    let (client, _) = connect(ProtocolVersion::V2025_11_25).await;
    assert_eq!(client.server_info().name, "moat-everything");
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for name in TOOLS {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    for tool in &tools {
        assert!(
            tool.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{}",
            tool.name
        );
        assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
        assert!(
            tool.name.len() <= 64
                && tool
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
        );
    }
    let by_name = |n: &str| tools.iter().find(|t| t.name == n).unwrap();
    assert_eq!(
        names[0], "test_simple_text",
        "the first tool is the simple one"
    );
    for name in TOOLS.iter().filter(|n| {
        ![
            "test_sampling",
            "test_elicitation",
            "json_schema_2020_12_tool",
            "test_custom_header",
        ]
        .contains(n)
    }) {
        assert_eq!(
            by_name(name).input_schema,
            json!({"type": "object", "properties": {}}),
            "{name}"
        );
    }
    let sampling = &by_name("test_sampling").input_schema;
    assert_eq!(
        sampling["properties"]["prompt"]["description"],
        "The prompt to send to the LLM"
    );
    assert_eq!(sampling["required"], json!(["prompt"]));
    assert_eq!(sampling["type"], "object");
    assert!(sampling.get("description").is_none() && sampling.get("$schema").is_none());
    let elicitation = &by_name("test_elicitation").input_schema;
    assert_eq!(
        elicitation["properties"]["message"]["description"],
        "The message to show the user"
    );
    assert_eq!(elicitation["required"], json!(["message"]));

    let schema = &by_name("json_schema_2020_12_tool").input_schema;
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert!(schema["$defs"]["address"].is_object());
    assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
    assert_eq!(schema["additionalProperties"], json!(false));
    assert_eq!(schema["properties"]["address"]["$ref"], "#/$defs/address");
    assert_eq!(schema["then"], json!({"required": ["phone"]}));
    assert_eq!(
        by_name("json_schema_2020_12_tool").description.as_deref(),
        Some("Tool with JSON Schema 2020-12 features")
    );

    let caps = client.server_capabilities();
    assert!(
        caps.tools.is_some()
            && caps.prompts.is_some()
            && caps.logging.is_some()
            && caps.completions.is_some()
    );
    assert_eq!(
        caps.resources.as_ref().and_then(|r| r.subscribe),
        Some(true)
    );
    client.ping().await.unwrap();
}

#[tokio::test]
async fn content_tools() {
    let (client, _) = connect(ProtocolVersion::V2025_11_25).await;

    // No `arguments` key at all.
    assert_eq!(
        call_text(&client, "test_simple_text", Value::Null).await,
        "This is a simple text response for testing."
    );

    let image = client
        .call_tool("test_image_content", json!({}))
        .await
        .unwrap();
    match image.content.as_slice() {
        [ContentBlock::Image(img)] => {
            assert_eq!(img.mime_type, "image/png");
            let png = STANDARD.decode(&img.data).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        }
        other => panic!("{other:?}"),
    }

    let audio = client
        .call_tool("test_audio_content", json!({}))
        .await
        .unwrap();
    match audio.content.as_slice() {
        [ContentBlock::Audio(a)] => {
            assert_eq!(a.mime_type, "audio/wav");
            let wav = STANDARD.decode(&a.data).unwrap();
            assert_eq!(&wav[..4], b"RIFF");
            assert_eq!(&wav[8..12], b"WAVE");
        }
        other => panic!("{other:?}"),
    }

    let embedded = client
        .call_tool("test_embedded_resource", json!({}))
        .await
        .unwrap();
    match embedded.content.as_slice() {
        [ContentBlock::Resource(r)] => match &r.resource {
            ResourceContents::Text(t) => {
                assert_eq!(t.uri, "test://embedded-resource");
                assert_eq!(t.mime_type.as_deref(), Some("text/plain"));
                assert_eq!(t.text, "This is an embedded resource content.");
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }

    let mixed = client
        .call_tool("test_multiple_content_types", json!({}))
        .await
        .unwrap();
    match mixed.content.as_slice() {
        [
            ContentBlock::Text(t),
            ContentBlock::Image(i),
            ContentBlock::Resource(r),
        ] => {
            assert_eq!(t.text, "Multiple content types test:");
            assert_eq!(i.mime_type, "image/png");
            assert_base64(&i.data);
            let ResourceContents::Text(r) = &r.resource else {
                panic!("{r:?}")
            };
            assert_eq!(r.uri, "test://mixed-content-resource");
            assert_eq!(r.mime_type.as_deref(), Some("application/json"));
            assert_eq!(r.text, r#"{"test":"data","value":123}"#);
        }
        other => panic!("{other:?}"),
    }

    // An isError result, not a JSON-RPC error.
    let error = client
        .call_tool("test_error_handling", json!({}))
        .await
        .unwrap();
    assert!(error.is_error());
    assert_eq!(
        text_of(&error.content),
        ["This tool intentionally returns an error for testing"]
    );

    assert_eq!(
        call_text(
            &client,
            "json_schema_2020_12_tool",
            json!({"name": "x", "address": {"street": "s", "city": "c"}})
        )
        .await,
        r#"JSON Schema 2020-12 tool called with: {"address":{"city":"c","street":"s"},"name":"x"}"#
    );
    assert_eq!(
        call_text(&client, "test_reconnection", json!({})).await,
        "Reconnection test completed successfully. If you received this, the client properly reconnected after \
         stream closure."
    );

    // A tool's arguments are checked against its type.
    let bad = client.call_tool("test_sampling", json!({})).await.unwrap();
    assert!(bad.is_error());
}

#[tokio::test]
async fn logging_tool_sends_three_messages() {
    let (client, _) = connect(ProtocolVersion::V2025_11_25).await;
    client.set_log_level(LoggingLevel::Debug).await.unwrap();
    let mut notes = client.notifications();
    assert_eq!(
        call_text(&client, "test_tool_with_logging", json!({})).await,
        "Tool with logging executed successfully"
    );
    let mut messages = Vec::new();
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(200), notes.recv()).await {
        if n.method == "notifications/message" {
            messages.push(n.params.unwrap());
        }
    }
    assert!(messages.len() >= 3, "{messages:?}");
    let data: Vec<&Value> = messages.iter().map(|m| &m["data"]).collect();
    assert_eq!(
        data,
        [
            &json!("Tool execution started"),
            &json!("Tool processing data"),
            &json!("Tool execution completed")
        ]
    );
    assert!(
        messages
            .iter()
            .all(|m| m["level"] == "info" && m.get("logger").is_none())
    );
}

#[tokio::test]
async fn logging_is_silent_without_a_level() {
    let (client, _) = connect(ProtocolVersion::V2025_11_25).await;
    let mut notes = client.notifications();
    call_text(&client, "test_tool_with_logging", json!({})).await;
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(100), notes.recv()).await {
        assert_ne!(n.method, "notifications/message");
    }
}

#[tokio::test]
async fn progress_tool_reports_before_its_result() {
    let (client, _) = connect(ProtocolVersion::V2025_11_25).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let result = client
        .call_tool_with(
            "test_tool_with_progress",
            json!({}),
            RequestOptions::default().progress(tx),
        )
        .await
        .unwrap();
    let mut progress = Vec::new();
    while let Ok(p) = rx.try_recv() {
        progress.push(p);
    }
    assert!(progress.len() >= 3, "{progress:?}");
    let values: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert_eq!(values, [0.0, 50.0, 100.0]);
    assert!(progress.iter().all(|p| p.total == Some(100.0)));
    assert_eq!(
        progress[1].message.as_deref(),
        Some("Completed step 50 of 100")
    );
    // The result echoes the token (here the request id the client chose).
    let token = progress[0].progress_token.to_string();
    assert_eq!(text_of(&result.content), [token.as_str()]);
    assert!(
        progress
            .iter()
            .all(|p| p.progress_token == progress[0].progress_token)
    );

    // Without a token: no progress, and REF's fallback text.
    assert_eq!(
        call_text(&client, "test_tool_with_progress", json!({})).await,
        "0"
    );
}

#[tokio::test]
async fn sampling_round_trip() {
    let (client, seen) = connect(ProtocolVersion::V2025_11_25).await;
    assert_eq!(
        call_text(
            &client,
            "test_sampling",
            json!({"prompt": "Test prompt for sampling"})
        )
        .await,
        "LLM response: This is a test response from the client"
    );
    let requests = seen.sampling.lock().unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].max_tokens, 100);
    assert_eq!(requests[0].messages.len(), 1);
    assert_eq!(requests[0].messages[0].role, Role::User);
    assert_eq!(
        requests[0].messages[0].content.blocks()[0].as_text(),
        Some("Test prompt for sampling")
    );
}

#[tokio::test]
async fn sampling_unsupported_is_reported_as_text() {
    let (server_side, client_side) = conn_pair();
    server().start(server_side);
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .connect(client_side)
        .await
        .unwrap();
    let text = call_text(&client, "test_sampling", json!({"prompt": "hi"})).await;
    assert!(
        text.starts_with("Sampling not supported or error: "),
        "{text}"
    );
    let text = call_text(&client, "test_elicitation", json!({"message": "hi"})).await;
    assert!(
        text.starts_with("Elicitation not supported or error: "),
        "{text}"
    );
}

#[tokio::test]
async fn elicitation_round_trips() {
    let (client, seen) = connect(ProtocolVersion::V2025_11_25).await;
    assert_eq!(
        call_text(
            &client,
            "test_elicitation",
            json!({"message": "Please provide your information"})
        )
        .await,
        r#"User response: action=accept, content={"email":"test@example.com","username":"testuser"}"#
    );
    {
        let requests = seen.elicitation.lock().unwrap();
        let req = &requests[0];
        assert_eq!(req["message"], "Please provide your information");
        assert_eq!(req["requestedSchema"]["type"], "object");
        assert_eq!(
            req["requestedSchema"]["required"],
            json!(["username", "email"])
        );
    }

    assert_eq!(
        call_text(&client, "test_elicitation_sep1034_defaults", json!({})).await,
        r#"Elicitation completed: action=accept, content={"age":25,"name":"Jane Smith","score":88.5,"status":"inactive","verified":false}"#
    );
    {
        let requests = seen.elicitation.lock().unwrap();
        let req = &requests[1];
        assert_eq!(
            req["message"],
            "Please review and update the form fields with defaults"
        );
        let p = &req["requestedSchema"]["properties"];
        assert_eq!(
            p["name"],
            json!({"type": "string", "description": "User name", "default": "John Doe"})
        );
        assert_eq!(p["age"]["type"], "integer");
        assert_eq!(p["age"]["default"], json!(30));
        assert_eq!(p["score"]["type"], "number");
        assert_eq!(p["score"]["default"], json!(95.5));
        assert_eq!(
            p["status"]["enum"],
            json!(["active", "inactive", "pending"])
        );
        assert_eq!(p["status"]["default"], "active");
        assert_eq!(
            p["verified"],
            json!({"type": "boolean", "description": "Verification status", "default": true})
        );
        assert_eq!(req["requestedSchema"]["required"], json!([]));
    }

    assert_eq!(
        call_text(&client, "test_elicitation_sep1330_enums", json!({})).await,
        r#"Elicitation completed: action=accept, content={"legacyEnum":"opt1","titledMulti":["value1","value2"],"titledSingle":"value1","untitledMulti":["option1","option2"],"untitledSingle":"option1"}"#
    );
    let requests = seen.elicitation.lock().unwrap();
    let req = &requests[2];
    assert_eq!(req["message"], "Please select options from the enum fields");
    let p = &req["requestedSchema"]["properties"];
    assert_eq!(
        p["untitledSingle"]["enum"],
        json!(["option1", "option2", "option3"])
    );
    assert!(
        p["untitledSingle"].get("oneOf").is_none()
            && p["untitledSingle"].get("enumNames").is_none()
    );
    assert_eq!(
        p["titledSingle"]["oneOf"][2],
        json!({"const": "value3", "title": "Third Option"})
    );
    assert!(p["titledSingle"].get("enum").is_none());
    assert_eq!(
        p["legacyEnum"]["enumNames"],
        json!(["Option One", "Option Two", "Option Three"])
    );
    assert_eq!(
        p["untitledMulti"]["items"],
        json!({"type": "string", "enum": ["option1", "option2", "option3"]})
    );
    assert_eq!(
        (
            p["untitledMulti"]["minItems"].as_u64(),
            p["untitledMulti"]["maxItems"].as_u64()
        ),
        (Some(1), Some(3))
    );
    assert_eq!(
        p["titledMulti"]["items"]["anyOf"][0],
        json!({"const": "value1", "title": "First Choice"})
    );
    assert!(p["titledMulti"]["items"].get("enum").is_none());
    assert_eq!(
        p["titledMulti"]["description"],
        "Select multiple options with titles"
    );
}

#[tokio::test]
async fn resources_and_template() {
    let (client, _) = connect(ProtocolVersion::V2025_11_25).await;
    let resources = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "test://static-text",
            "test://static-binary",
            "test://watched-resource"
        ]
    );
    let text = &resources[0];
    assert_eq!(text.name, "static-text");
    assert_eq!(text.title.as_deref(), Some("Static Text Resource"));
    assert_eq!(
        text.description.as_deref(),
        Some("A static text resource for testing")
    );
    assert_eq!(text.mime_type.as_deref(), Some("text/plain"));
    assert_eq!(resources[1].mime_type.as_deref(), Some("image/png"));
    assert_eq!(
        resources[2].description.as_deref(),
        Some("A resource that auto-updates every 3 seconds")
    );

    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "test://template/{id}/data");
    assert_eq!(templates[0].name, "template");
    assert_eq!(templates[0].title.as_deref(), Some("Resource Template"));
    assert_eq!(templates[0].mime_type.as_deref(), Some("application/json"));

    let read = client.read_resource("test://static-text").await.unwrap();
    match read.contents.as_slice() {
        [ResourceContents::Text(t)] => {
            assert_eq!(t.uri, "test://static-text");
            assert_eq!(t.mime_type.as_deref(), Some("text/plain"));
            assert_eq!(t.text, "This is the content of the static text resource.");
        }
        other => panic!("{other:?}"),
    }

    let read = client.read_resource("test://static-binary").await.unwrap();
    match read.contents.as_slice() {
        [ResourceContents::Blob(b)] => {
            assert_eq!(b.uri, "test://static-binary");
            assert_eq!(b.mime_type.as_deref(), Some("image/png"));
            assert_eq!(&STANDARD.decode(&b.blob).unwrap()[1..4], b"PNG");
        }
        other => panic!("{other:?}"),
    }

    let read = client
        .read_resource("test://watched-resource")
        .await
        .unwrap();
    match read.contents.as_slice() {
        [ResourceContents::Text(t)] => {
            assert_eq!(t.mime_type.as_deref(), Some("text/plain"));
            assert_eq!(t.text, "Watched resource content");
        }
        other => panic!("{other:?}"),
    }

    let read = client
        .read_resource("test://template/123/data")
        .await
        .unwrap();
    match read.contents.as_slice() {
        [ResourceContents::Text(t)] => {
            assert_eq!(t.uri, "test://template/123/data");
            assert_eq!(t.mime_type.as_deref(), Some("application/json"));
            assert_eq!(
                t.text,
                r#"{"id":"123","templateTest":true,"data":"Data for ID: 123"}"#
            );
        }
        other => panic!("{other:?}"),
    }

    let err = client
        .read_resource("test://nonexistent-resource-for-conformance-testing")
        .await;
    assert!(err.is_err());
}

/// An unknown URI: -32002 until 2025-11-25, -32602 in 2026-07-28 (SEP-2164), with the URI
/// in `data` either way.
#[tokio::test]
async fn unknown_resources_are_errors_naming_the_uri() {
    let uri = "test://nonexistent-resource-for-conformance-testing";
    for (version, code) in [
        (ProtocolVersion::V2025_11_25, -32002),
        (ProtocolVersion::V2026_07_28, -32602),
    ] {
        let (client, _) = connect(version).await;
        let err = client.read_resource(uri).await.unwrap_err();
        let err = err.remote().expect("a JSON-RPC error");
        assert_eq!(err.code, code, "{version}");
        assert_eq!(err.data, Some(json!({ "uri": uri })), "{version}");
    }
}

#[tokio::test]
async fn watched_resource_updates_reach_subscribers_only() {
    let (client, _) = connect(ProtocolVersion::V2025_11_25).await;
    let mut notes = client.notifications();
    client.subscribe("test://watched-resource").await.unwrap();
    // Any use of the server starts the watcher.
    client
        .read_resource("test://watched-resource")
        .await
        .unwrap();
    let update = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let n = notes.recv().await.unwrap();
            if n.method == "notifications/resources/updated" {
                return n;
            }
        }
    })
    .await
    .expect("an update within 5 s");
    assert_eq!(update.params.unwrap()["uri"], "test://watched-resource");

    client.unsubscribe("test://watched-resource").await.unwrap();
    let mut notes = client.notifications();
    let quiet = tokio::time::timeout(Duration::from_millis(3500), async {
        loop {
            let n = notes.recv().await.unwrap();
            if n.method == "notifications/resources/updated" {
                return n;
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "updated after unsubscribing: {quiet:?}");
}

#[tokio::test]
async fn prompts() {
    let (client, _) = connect(ProtocolVersion::V2025_11_25).await;
    let prompts = client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, PROMPTS);
    for p in &prompts {
        assert!(p.description.as_deref().is_some_and(|d| !d.is_empty()));
        assert!(p.title.is_some());
    }
    assert!(prompts[0].arguments.is_none());
    let args = prompts[1].arguments.as_ref().unwrap();
    let described: Vec<(&str, Option<&str>, Option<bool>)> = args
        .iter()
        .map(|a| (a.name.as_str(), a.description.as_deref(), a.required))
        .collect();
    assert_eq!(
        described,
        [
            ("arg1", Some("First test argument"), Some(true)),
            ("arg2", Some("Second test argument"), Some(true))
        ]
    );
    let args = prompts[2].arguments.as_ref().unwrap();
    assert_eq!(args[0].name, "resourceUri");
    assert_eq!(
        args[0].description.as_deref(),
        Some("URI of the resource to embed")
    );
    assert_eq!(args[0].required, Some(true));

    let simple = client
        .get_prompt("test_simple_prompt", BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(simple.messages.len(), 1);
    assert_eq!(simple.messages[0].role, Role::User);
    assert_eq!(
        simple.messages[0].content.as_text(),
        Some("This is a simple prompt for testing.")
    );

    let with_args: BTreeMap<String, String> = [("arg1", "testValue1"), ("arg2", "testValue2")]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let r = client
        .get_prompt("test_prompt_with_arguments", with_args)
        .await
        .unwrap();
    assert_eq!(
        r.messages[0].content.as_text(),
        Some("Prompt with arguments: arg1='testValue1', arg2='testValue2'")
    );
    // A missing required argument is refused.
    assert!(
        client
            .get_prompt("test_prompt_with_arguments", BTreeMap::new())
            .await
            .is_err()
    );

    let embed: BTreeMap<String, String> = [(
        "resourceUri".to_owned(),
        "test://example-resource".to_owned(),
    )]
    .into();
    let r = client
        .get_prompt("test_prompt_with_embedded_resource", embed)
        .await
        .unwrap();
    match &r.messages[..] {
        [first, second] => {
            let ContentBlock::Resource(res) = &first.content else {
                panic!("{first:?}")
            };
            let ResourceContents::Text(t) = &res.resource else {
                panic!("{res:?}")
            };
            assert_eq!(t.uri, "test://example-resource");
            assert_eq!(t.mime_type.as_deref(), Some("text/plain"));
            assert_eq!(t.text, "Embedded resource content for testing.");
            assert_eq!(
                second.content.as_text(),
                Some("Please process the embedded resource above.")
            );
        }
        other => panic!("{other:?}"),
    }

    let r = client
        .get_prompt("test_prompt_with_image", BTreeMap::new())
        .await
        .unwrap();
    match &r.messages[..] {
        [first, second] => {
            let ContentBlock::Image(img) = &first.content else {
                panic!("{first:?}")
            };
            assert_eq!(img.mime_type, "image/png");
            assert_base64(&img.data);
            assert_eq!(
                second.content.as_text(),
                Some("Please analyze the image above.")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn completion_is_empty() {
    let (client, _) = connect(ProtocolVersion::V2025_11_25).await;
    let params = CompleteRequestParams {
        reference: CompletionReference::Prompt(PromptReference {
            name: "test_prompt_with_arguments".to_owned(),
            ..Default::default()
        }),
        argument: CompleteArgument {
            name: "arg1".to_owned(),
            value: "test".to_owned(),
        },
        context: None,
        meta: None,
    };
    let result = client.complete(params).await.unwrap();
    assert!(result.completion.values.is_empty());
    assert_eq!(result.completion.total, Some(0));
    assert_eq!(result.completion.has_more, Some(false));
}

/// Every tool and prompt of the 2026-07-28 scenarios, driven by a client that declares
/// everything: in the handshake era as requests to the client, in 2026-07-28 as
/// multi-round-trip results the client's retry loop answers.
#[tokio::test]
async fn input_required_tools_complete_in_both_eras() {
    let expected = [
        (
            "test_input_required_result_elicitation",
            "Hello, Alice!".to_owned(),
        ),
        (
            "test_input_required_result_sampling",
            format!("Sampling result: {SAMPLED}"),
        ),
        (
            "test_input_required_result_list_roots",
            "Found 1 root(s): file:///test/root".to_owned(),
        ),
        (
            "test_input_required_result_request_state",
            "state-ok: action=accept, ok=true".to_owned(),
        ),
        (
            "test_input_required_result_multiple_inputs",
            format!("Name: Alice; Greeting: {SAMPLED}; Roots: 1"),
        ),
        (
            "test_input_required_result_multi_round",
            "Multi-round complete for Alice who likes blue".to_owned(),
        ),
        (
            "test_input_required_result_tampered_state",
            "integrity-ok: action=accept".to_owned(),
        ),
        (
            "test_input_required_result_capabilities",
            format!(
                "capabilities-ok: received elicitation (accept), sampling ({SAMPLED}), roots (1)"
            ),
        ),
        (
            "test_missing_capability",
            format!("Sampling answered: {SAMPLED}"),
        ),
        (
            "test_streaming_elicitation",
            "Streaming complete: action=accept".to_owned(),
        ),
        ("test_logging_tool", "Logging evaluated".to_owned()),
    ];
    for version in [ProtocolVersion::V2025_11_25, ProtocolVersion::V2026_07_28] {
        let (client, _) = connect(version).await;
        for (tool, text) in &expected {
            assert_eq!(
                &call_text(&client, tool, json!({})).await,
                text,
                "{tool} in {version}"
            );
        }
        assert_eq!(
            call_text(&client, "test_custom_header", json!({"message": "Hello"})).await,
            "Echo: Hello"
        );
        let prompt = client
            .get_prompt("test_input_required_result_prompt", BTreeMap::new())
            .await
            .unwrap();
        assert_eq!(
            prompt.messages[0].content.as_text(),
            Some("Prompt with context: test context"),
            "{version}"
        );
    }
}

/// The first round of each MRTR tool on the wire: the input requests under the keys the
/// scenarios name, and a sealed state.
#[tokio::test]
async fn input_requests_carry_the_scenario_keys() {
    let (client, _) = connect(ProtocolVersion::V2026_07_28).await;
    let first = |method: &'static str, name: &'static str| {
        let peer = client.peer().clone();
        async move {
            let r: Value = peer
                .request(method, &json!({ "name": name, "arguments": {} }))
                .await
                .unwrap();
            assert_eq!(r["resultType"], "input_required", "{name}: {r}");
            assert!(r["requestState"].is_string(), "{name}: {r}");
            let requests = r["inputRequests"].as_object().unwrap().clone();
            requests
                .into_iter()
                .map(|(k, v)| (k, v["method"].as_str().unwrap().to_owned()))
                .collect::<BTreeMap<String, String>>()
        }
    };
    let keys = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, m)| ((*k).to_owned(), (*m).to_owned()))
            .collect()
    };
    let elicit = "elicitation/create";
    let sample = "sampling/createMessage";
    let roots = "roots/list";
    for (method, name, expected) in [
        (
            "tools/call",
            "test_input_required_result_elicitation",
            keys(&[("user_name", elicit)]),
        ),
        (
            "tools/call",
            "test_input_required_result_sampling",
            keys(&[("capital_question", sample)]),
        ),
        (
            "tools/call",
            "test_input_required_result_list_roots",
            keys(&[("client_roots", roots)]),
        ),
        (
            "tools/call",
            "test_input_required_result_request_state",
            keys(&[("confirm", elicit)]),
        ),
        (
            "tools/call",
            "test_input_required_result_multiple_inputs",
            keys(&[
                ("user_name", elicit),
                ("greeting", sample),
                ("client_roots", roots),
            ]),
        ),
        (
            "tools/call",
            "test_input_required_result_multi_round",
            keys(&[("step1", elicit)]),
        ),
        (
            "tools/call",
            "test_input_required_result_tampered_state",
            keys(&[("confirm", elicit)]),
        ),
        (
            "prompts/get",
            "test_input_required_result_prompt",
            keys(&[("user_context", elicit)]),
        ),
    ] {
        assert_eq!(first(method, name).await, expected, "{name}");
    }

    // The elicitation's exact request.
    let r: Value = client
        .peer()
        .request(
            "tools/call",
            &json!({ "name": "test_input_required_result_elicitation", "arguments": {} }),
        )
        .await
        .unwrap();
    assert_eq!(
        r["inputRequests"]["user_name"]["params"],
        json!({
            "message": "What is your name?",
            "requestedSchema": {
                "type": "object",
                "properties": { "name": { "type": "string" } },
                "required": ["name"],
            },
        })
    );

    // A tampered state is refused.
    let state = format!("{}-TAMPERED", r["requestState"].as_str().unwrap());
    let err = client
        .peer()
        .request::<_, Value>(
            "tools/call",
            &json!({
                "name": "test_input_required_result_elicitation",
                "arguments": {},
                "inputResponses": { "user_name": { "action": "accept", "content": { "name": "A" } } },
                "requestState": state,
            }),
        )
        .await
        .unwrap_err();
    assert_eq!(err.remote().unwrap().code, -32602);
}

/// A 2026-07-28 client that declares nothing: the tools that need a capability say which
/// (-32021), and the one that adapts asks for nothing.
#[tokio::test]
async fn undeclared_capabilities_in_2026() {
    let (server_side, client_side) = conn_pair();
    server().start(server_side);
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
        .connect(client_side)
        .await
        .unwrap();
    for (tool, capability) in [
        ("test_missing_capability", "sampling"),
        ("test_streaming_elicitation", "elicitation"),
        ("test_input_required_result_list_roots", "roots"),
    ] {
        let err = client.call_tool(tool, json!({})).await.unwrap_err();
        let err = err.remote().unwrap();
        assert_eq!(err.code, -32021, "{tool}");
        assert_eq!(
            err.data.as_ref().unwrap()["requiredCapabilities"],
            json!({ capability: {} }),
            "{tool}"
        );
    }
    assert_eq!(
        call_text(
            &client,
            "test_input_required_result_capabilities",
            json!({})
        )
        .await,
        "No supported capabilities declared"
    );
}

/// The trigger tools change the lists, and listen streams that asked are told.
#[tokio::test]
async fn triggers_change_the_lists_and_listeners_hear_it() {
    let (client, _) = connect(ProtocolVersion::V2026_07_28).await;
    let _listening = client
        .listen(SubscriptionFilter {
            tools_list_changed: Some(true),
            prompts_list_changed: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut notes = client.notifications();
    let next = |notes: &mut tokio::sync::broadcast::Receiver<moat::ServerNotification>| {
        let mut notes = notes.resubscribe();
        async move {
            loop {
                let n = tokio::time::timeout(Duration::from_secs(2), notes.recv())
                    .await
                    .expect("a notification")
                    .unwrap();
                if n.method.ends_with("list_changed") {
                    return n.method;
                }
            }
        }
    };
    let heard = next(&mut notes);
    call_text(&client, "test_trigger_tool_change", json!({})).await;
    assert_eq!(heard.await, "notifications/tools/list_changed");
    let heard = next(&mut notes);
    call_text(&client, "test_trigger_prompt_change", json!({})).await;
    assert_eq!(heard.await, "notifications/prompts/list_changed");

    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools[0].name, "test_simple_text");
    assert_eq!(tools.last().unwrap().name, "test_dynamic_tool");
    // Changing again updates the tool in place: same list, same order.
    call_text(&client, "test_trigger_tool_change", json!({})).await;
    let again = client.list_all_tools().await.unwrap();
    let names = |t: &[moat::types::Tool]| t.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&tools), names(&again));
    assert_eq!(
        call_text(&client, "test_dynamic_tool", json!({})).await,
        "Dynamic tool, change 2"
    );
    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts.last().unwrap().name, "test_dynamic_prompt");
}

#[tokio::test]
async fn reconnection_tool_answers_on_a_line_transport() {
    let (client, _) = connect(ProtocolVersion::V2025_11_25).await;
    let text = call_text(&client, "test_reconnection", json!({})).await;
    assert!(
        text.starts_with("Reconnection test completed successfully."),
        "{text}"
    );
}

/// Listing and the calls that need nothing from the client, in any revision.
async fn smoke(version: ProtocolVersion) {
    let (client, _) = connect(version).await;
    assert_eq!(client.protocol_version(), Some(version));
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), TOOLS.len() + TASK_TOOLS.len());
    for name in TASK_TOOLS {
        assert!(tools.iter().any(|t| t.name == name), "{name}");
    }
    assert!(tools.iter().all(|t| t.input_schema["type"] == "object"));
    assert_eq!(
        call_text(&client, "test_simple_text", Value::Null).await,
        "This is a simple text response for testing."
    );
    let image = client
        .call_tool("test_image_content", json!({}))
        .await
        .unwrap();
    assert!(matches!(image.content.as_slice(), [ContentBlock::Image(_)]));
    assert!(
        client
            .call_tool("test_error_handling", json!({}))
            .await
            .unwrap()
            .is_error()
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .call_tool_with(
            "test_tool_with_progress",
            json!({}),
            RequestOptions::default().progress(tx),
        )
        .await
        .unwrap();
    let mut n = 0;
    while rx.try_recv().is_ok() {
        n += 1;
    }
    assert!(n >= 3, "{n} progress notifications in {version}");
    assert_eq!(client.list_all_resources().await.unwrap().len(), 3);
    let read = client
        .read_resource("test://template/42/data")
        .await
        .unwrap();
    assert!(matches!(&read.contents[..], [ResourceContents::Text(t)] if t.text.contains("42")));
    assert_eq!(
        client.list_all_prompts().await.unwrap().len(),
        PROMPTS.len()
    );
    let r = client
        .get_prompt("test_simple_prompt", BTreeMap::new())
        .await
        .unwrap();
    assert!(!r.messages.is_empty());
    client.close().await;
}

#[tokio::test]
async fn smoke_2024_11_05() {
    smoke(ProtocolVersion::V2024_11_05).await;
}

#[tokio::test]
async fn smoke_2025_11_25() {
    smoke(ProtocolVersion::V2025_11_25).await;
}

#[tokio::test]
async fn smoke_2026_07_28() {
    smoke(ProtocolVersion::V2026_07_28).await;
}

#[test]
fn server_is_cheap_and_needs_no_runtime() {
    // Building the server outside any runtime must neither panic nor spawn.
    for _ in 0..3 {
        let s = server();
        assert_eq!(s.info().name, "moat-everything");
    }
}
