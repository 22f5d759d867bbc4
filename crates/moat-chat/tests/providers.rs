//! Each provider against the scripted model, which speaks that provider's wire format and
//! refuses what the real service would: answers, tool calls (one, several, and their
//! results sent back), retries, and the errors a user must be told how to fix.

use std::sync::Mutex;
use std::time::Duration;

use moat_chat::ChatError;
use moat_chat::event::Event;
use moat_chat::message::{StopReason, ToolCall, ToolDef, ToolResult, Turn};
use moat_chat::provider::anthropic::Anthropic;
use moat_chat::provider::openai_chat::OpenAiChat;
use moat_chat::provider::openai_responses::OpenAiResponses;
use moat_chat::provider::{Provider, Request, Retry};
use moat_chat::scripted::{ScriptedModel, Step};
use serde_json::json;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Anthropic,
    Responses,
    Chat,
}

const ALL: [Kind; 3] = [Kind::Anthropic, Kind::Responses, Kind::Chat];

fn provider(kind: Kind, model: &ScriptedModel) -> Box<dyn Provider> {
    let retry = Retry {
        attempts: 3,
        backoff: Duration::from_millis(10),
    };
    match kind {
        Kind::Anthropic => Box::new(
            Anthropic::new(
                &model.anthropic_url(),
                "test-key",
                "ANTHROPIC_API_KEY",
                "m",
                retry,
            )
            .expect("provider"),
        ),
        Kind::Responses => Box::new(
            OpenAiResponses::new(
                &model.openai_url(),
                "test-key",
                "OPENAI_API_KEY",
                "m",
                retry,
            )
            .expect("provider"),
        ),
        Kind::Chat => {
            Box::new(OpenAiChat::new(&model.openai_url(), "", "", "m", retry).expect("provider"))
        }
    }
}

fn tools() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "exec__run_command".into(),
            description: "Run a command".into(),
            input_schema: json!({"type": "object", "properties": {"argv": {"type": "array", "items": {"type": "string"}}}, "required": ["argv"]}),
        },
        ToolDef {
            name: "fs__read_file".into(),
            description: "Read a file".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        },
    ]
}

/// Sends `turns` and returns the reply and the events seen.
async fn send(
    p: &dyn Provider,
    turns: &[Turn],
) -> (Result<moat_chat::message::Reply, ChatError>, Vec<Event>) {
    let tools = tools();
    let seen = Mutex::new(Vec::new());
    let on_event = |e: &Event| seen.lock().expect("events").push(e.clone());
    let request = Request {
        model: "m",
        system: Some("be brief"),
        turns,
        tools: &tools,
        max_tokens: None,
    };
    let reply = p.complete(request, &on_event).await;
    (reply, seen.into_inner().expect("events"))
}

fn user(text: &str) -> Vec<Turn> {
    vec![Turn::User { text: text.into() }]
}

#[tokio::test]
async fn a_plain_answer_streams_as_deltas() {
    for kind in ALL {
        let model = ScriptedModel::start(vec![Step::text("Paris is the capital of France.")])
            .await
            .expect("model");
        let (reply, events) = send(&*provider(kind, &model), &user("capital of France?")).await;
        let reply = reply.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(reply.text, "Paris is the capital of France.", "{kind:?}");
        assert_eq!(reply.stop, StopReason::EndTurn, "{kind:?}");
        assert!(reply.usage.input_tokens > 0, "{kind:?}: usage is read");
        let deltas: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::Text { .. }))
            .collect();
        assert!(
            deltas.len() >= 2,
            "{kind:?}: streamed in pieces: {events:?}"
        );
        assert_eq!(model.violations(), Vec::<String>::new(), "{kind:?}");
    }
}

#[tokio::test]
async fn anthropic_caches_the_tool_list_and_the_system_prompt() {
    let model = ScriptedModel::start(vec![Step::text("ok")])
        .await
        .expect("model");
    send(&*provider(Kind::Anthropic, &model), &user("hi"))
        .await
        .0
        .expect("reply");
    let body = &model.requests()[0];
    assert_eq!(
        body["tools"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(body["tools"][0].get("cache_control").is_none());
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[tokio::test]
async fn tool_calls_and_their_results_round_trip() {
    for kind in ALL {
        let model = ScriptedModel::start(vec![
            Step::Tools {
                text: "Let me look.".into(),
                calls: vec![
                    (
                        "exec__run_command".into(),
                        json!({"argv": ["ls", "-la", "/etc"]}),
                    ),
                    ("fs__read_file".into(), json!({"path": "notes/todo.md"})),
                ],
            },
            Step::text("done"),
        ])
        .await
        .expect("model");
        let p = provider(kind, &model);
        let mut turns = user("list /etc and read my todo");
        let reply = send(&*p, &turns)
            .await
            .0
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(reply.stop, StopReason::ToolUse, "{kind:?}");
        assert_eq!(reply.text, "Let me look.", "{kind:?}");
        let names: Vec<&str> = reply.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["exec__run_command", "fs__read_file"], "{kind:?}");
        assert_eq!(
            reply.tool_calls[0].arguments,
            json!({"argv": ["ls", "-la", "/etc"]}),
            "{kind:?}"
        );
        assert_ne!(reply.tool_calls[0].id, reply.tool_calls[1].id, "{kind:?}");
        let results = reply
            .tool_calls
            .iter()
            .map(|c| ToolResult {
                id: c.id.clone(),
                name: c.name.clone(),
                content: format!("output of {}", c.name),
                is_error: false,
            })
            .collect();
        turns.push(Turn::Assistant {
            text: reply.text,
            tool_calls: reply.tool_calls,
        });
        turns.push(Turn::Tool { results });
        let answer = send(&*p, &turns)
            .await
            .0
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(answer.text, "done");
        assert_eq!(model.violations(), Vec::<String>::new(), "{kind:?}");
        let sent = model.requests()[1].to_string();
        assert!(sent.contains("output of fs__read_file"), "{kind:?}: {sent}");
    }
}

/// The scripted model refuses what the real services refuse: a result for a call that was
/// never made, and a call left without its result.
#[tokio::test]
async fn malformed_histories_are_refused() {
    for kind in ALL {
        let model = ScriptedModel::start(vec![Step::text("never")])
            .await
            .expect("model");
        let p = provider(kind, &model);
        let orphan = vec![
            Turn::User { text: "hi".into() },
            Turn::Assistant {
                text: "hm".into(),
                tool_calls: vec![],
            },
            Turn::Tool {
                results: vec![ToolResult {
                    id: "nope".into(),
                    name: "x".into(),
                    content: "y".into(),
                    is_error: false,
                }],
            },
        ];
        let (reply, _) = send(&*p, &orphan).await;
        assert!(
            matches!(reply, Err(ChatError::Rejected { status: 400, .. })),
            "{kind:?}: {reply:?}"
        );
        assert!(!model.violations().is_empty(), "{kind:?}");
        let model = ScriptedModel::start(vec![Step::text("never")])
            .await
            .expect("model");
        let p = provider(kind, &model);
        let unanswered = vec![
            Turn::User { text: "hi".into() },
            Turn::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "fs__read_file".into(),
                    arguments: json!({}),
                }],
            },
            Turn::User {
                text: "well?".into(),
            },
        ];
        let (reply, _) = send(&*p, &unanswered).await;
        assert!(reply.is_err(), "{kind:?}: {reply:?}");
        assert!(!model.violations().is_empty(), "{kind:?}");
    }
}

#[tokio::test]
async fn a_stream_cut_mid_event_is_an_error_not_an_answer() {
    for kind in ALL {
        let model = ScriptedModel::start(vec![Step::Cut("This answer will never finish.".into())])
            .await
            .expect("model");
        let (reply, events) = send(&*provider(kind, &model), &user("hi")).await;
        assert!(
            matches!(reply, Err(ChatError::StreamCut(_))),
            "{kind:?}: {reply:?}"
        );
        assert!(
            events.iter().any(|e| matches!(e, Event::Text { .. })),
            "{kind:?}: the first half was streamed"
        );
    }
}

#[tokio::test]
async fn a_429_is_retried_after_the_time_it_names() {
    for kind in ALL {
        let model = ScriptedModel::start(vec![Step::status(429, Some(1)), Step::text("ok")])
            .await
            .expect("model");
        let (reply, events) = send(&*provider(kind, &model), &user("hi")).await;
        assert_eq!(reply.unwrap_or_else(|e| panic!("{kind:?}: {e}")).text, "ok");
        let retries: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::Retry { .. }))
            .collect();
        assert_eq!(
            retries,
            [&Event::Retry {
                attempt: 1,
                status: 429,
                wait_ms: 1000
            }],
            "{kind:?}"
        );
        assert_eq!(model.requests().len(), 2);
    }
}

#[tokio::test]
async fn three_500s_end_in_a_clear_error() {
    for kind in ALL {
        let model = ScriptedModel::start(vec![
            Step::status(500, None),
            Step::status(500, None),
            Step::status(500, None),
            Step::text("too late"),
        ])
        .await
        .expect("model");
        let (reply, _) = send(&*provider(kind, &model), &user("hi")).await;
        let err = reply.expect_err("three failures");
        assert!(
            matches!(
                err,
                ChatError::Unavailable {
                    status: 500,
                    attempts: 3,
                    ..
                }
            ),
            "{kind:?}: {err:?}"
        );
        assert!(err.to_string().contains("unavailable"), "{err}");
        assert_eq!(model.remaining(), 1, "{kind:?}: no fourth request");
    }
}

#[tokio::test]
async fn provider_errors_say_what_to_fix() {
    for kind in ALL {
        let model = ScriptedModel::start(vec![
            Step::ContextTooLong,
            Step::Status {
                status: 401,
                retry_after: None,
                message: "invalid x-api-key".into(),
            },
            Step::Status {
                status: 404,
                retry_after: None,
                message: "model: m".into(),
            },
        ])
        .await
        .expect("model");
        let p = provider(kind, &model);
        let err = send(&*p, &user("hi")).await.0.expect_err("context");
        assert!(
            matches!(err, ChatError::ContextTooLong { .. }),
            "{kind:?}: {err:?}"
        );
        let err = send(&*p, &user("hi")).await.0.expect_err("401");
        assert!(
            matches!(err, ChatError::Auth { status: 401, .. }),
            "{kind:?}: {err:?}"
        );
        assert!(err.to_string().contains("check "), "{err}");
        let err = send(&*p, &user("hi")).await.0.expect_err("404");
        assert!(
            matches!(err, ChatError::UnknownModel { .. }),
            "{kind:?}: {err:?}"
        );
        assert!(err.to_string().contains("--model"), "{err}");
        assert_eq!(
            model.requests().len(),
            3,
            "{kind:?}: none of these is retried"
        );
    }
}

/// A tool schema the provider would refuse is refused here too (moat's session rewrites
/// schemas into the portable form before they get this far).
#[tokio::test]
async fn a_schema_the_provider_rejects_fails_the_request() {
    for kind in ALL {
        let model = ScriptedModel::start(vec![Step::text("never")])
            .await
            .expect("model");
        let p = provider(kind, &model);
        let tools = vec![ToolDef {
            name: "bad".into(),
            description: "A tool whose schema is a union at the root".into(),
            input_schema: json!({"anyOf": [{"type": "object"}, {"type": "string"}]}),
        }];
        let turns = user("hi");
        let request = Request {
            model: "m",
            system: None,
            turns: &turns,
            tools: &tools,
            max_tokens: None,
        };
        let reply = p.complete(request, &|_| {}).await;
        assert!(
            matches!(reply, Err(ChatError::Rejected { status: 400, .. })),
            "{kind:?}: {reply:?}"
        );
        assert!(
            model
                .violations()
                .iter()
                .any(|v| v.contains("parameters") || v.contains("input_schema")),
            "{kind:?}: {:?}",
            model.violations()
        );
    }
}

/// Each service's refusal is read as one: Anthropic's `refusal` stop reason (its text
/// streamed as text), the Responses API's `refusal` content part and Chat Completions'
/// `delta.refusal` (neither streamed as the answer's text).
#[tokio::test]
async fn a_refusal_is_read_as_a_refusal() {
    for kind in ALL {
        let model = ScriptedModel::start(vec![Step::refusal("I can't help with that.")])
            .await
            .expect("model");
        let (reply, events) = send(&*provider(kind, &model), &user("something bad")).await;
        let reply = reply.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(reply.stop, StopReason::Refusal, "{kind:?}");
        assert!(reply.tool_calls.is_empty(), "{kind:?}");
        let streamed: String = events
            .iter()
            .filter_map(|e| match e {
                Event::Text { delta } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        match kind {
            Kind::Anthropic => {
                assert_eq!(reply.refusal, None);
                assert_eq!(reply.text, "I can't help with that.");
                assert_eq!(streamed, reply.text);
            }
            Kind::Responses | Kind::Chat => {
                assert_eq!(
                    reply.refusal.as_deref(),
                    Some("I can't help with that."),
                    "{kind:?}"
                );
                assert_eq!(reply.text, "", "{kind:?}");
                assert_eq!(streamed, "", "{kind:?}: a refusal is not streamed as text");
            }
        }
        assert_eq!(model.violations(), Vec::<String>::new(), "{kind:?}");
    }
}
