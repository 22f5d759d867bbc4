//! The Anthropic Messages API: `tool_use` / `tool_result` blocks, parallel tool use,
//! streaming events, and prompt caching of the tool list and the system prompt (a
//! `cache_control` breakpoint on the last tool and on the system block: both are the same
//! on every turn of a conversation).

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::http::{Endpoint, error_parts, is_context_error};
use super::{Provider, Request, Retry, parse_arguments};
use crate::ChatError;
use crate::event::Event;
use crate::message::{Reply, StopReason, ToolCall, Turn, Usage};

/// The API version this module speaks.
const VERSION: &str = "2023-06-01";
/// Messages require `max_tokens`; this is the default when none is configured.
const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The Anthropic Messages API.
#[derive(Debug)]
pub struct Anthropic {
    endpoint: Endpoint,
}

impl Anthropic {
    /// `base_url` as the Anthropic SDKs take it (`https://api.anthropic.com`): requests go
    /// to `{base_url}/v1/messages`.
    pub fn new(
        base_url: &str,
        key: &str,
        key_env: &str,
        model: &str,
        retry: Retry,
    ) -> Result<Anthropic, ChatError> {
        let url = format!("{}/v1/messages", base_url.trim_end_matches('/'));
        let headers = vec![
            ("x-api-key", key.to_owned()),
            ("anthropic-version", VERSION.to_owned()),
        ];
        Ok(Anthropic {
            endpoint: Endpoint::new(
                "Anthropic",
                url,
                headers,
                retry,
                key_env.to_owned(),
                model.to_owned(),
            )?,
        })
    }
}

/// The request body for `request`.
pub fn body(request: &Request<'_>) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for turn in request.turns {
        let (role, blocks) = match turn {
            Turn::User { text } => ("user", vec![json!({"type": "text", "text": text})]),
            Turn::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments,
                    }));
                }
                if blocks.is_empty() {
                    // Text blocks must not be empty; an empty turn still has to alternate.
                    blocks.push(json!({"type": "text", "text": "(no answer)"}));
                }
                ("assistant", blocks)
            }
            Turn::Tool { results } => (
                "user",
                results
                    .iter()
                    .map(|r| {
                        json!({
                            "type": "tool_result", "tool_use_id": r.id,
                            "content": if r.content.is_empty() { "(no output)" } else { r.content.as_str() },
                            "is_error": r.is_error,
                        })
                    })
                    .collect(),
            ),
        };
        // Consecutive turns of one role become one message (tool results first, as the
        // API requires, then what the user typed after them).
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.extend(blocks);
                }
            }
            _ => messages.push(json!({"role": role, "content": blocks})),
        }
    }
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
        .collect();
    if let Some(last) = tools.last_mut() {
        last["cache_control"] = json!({"type": "ephemeral"});
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
        "stream": true,
    });
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if let Some(system) = request.system.filter(|s| !s.is_empty()) {
        body["system"] =
            json!([{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]);
    }
    body
}

/// A content block being streamed.
enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
    },
    Other,
}

impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        "Anthropic"
    }

    fn complete<'a>(
        &'a self,
        request: Request<'a>,
        on_event: &'a (dyn Fn(&Event) + Send + Sync),
    ) -> BoxFuture<'a, Result<Reply, ChatError>> {
        Box::pin(async move {
            let mut events = self.endpoint.stream(&body(&request), on_event).await?;
            let mut text = String::new();
            let mut blocks: Vec<(u64, Block)> = Vec::new();
            let mut stop = None;
            let mut usage = Usage::default();
            let mut done = false;
            while let Some(sse) = events.next().await {
                let sse = sse?;
                let Some(data) = sse.data.as_deref() else {
                    continue;
                };
                let value: Value = serde_json::from_str(data).map_err(|e| {
                    ChatError::BadReply(format!("an event is not JSON ({e}): {data}"))
                })?;
                match value["type"].as_str().unwrap_or_default() {
                    "message_start" => {
                        usage.input_tokens = value["message"]["usage"]["input_tokens"]
                            .as_u64()
                            .unwrap_or(0);
                    }
                    "content_block_start" => {
                        let index = value["index"].as_u64().unwrap_or(0);
                        let block = &value["content_block"];
                        let started = match block["type"].as_str() {
                            Some("text") => {
                                let first = block["text"].as_str().unwrap_or_default();
                                if !first.is_empty() {
                                    text.push_str(first);
                                    on_event(&Event::Text {
                                        delta: first.to_owned(),
                                    });
                                }
                                Block::Text
                            }
                            Some("tool_use") => Block::Tool {
                                id: block["id"].as_str().unwrap_or_default().to_owned(),
                                name: block["name"].as_str().unwrap_or_default().to_owned(),
                                json: String::new(),
                            },
                            _ => Block::Other,
                        };
                        blocks.push((index, started));
                    }
                    "content_block_delta" => {
                        let index = value["index"].as_u64().unwrap_or(0);
                        let delta = &value["delta"];
                        let block = blocks
                            .iter_mut()
                            .rev()
                            .find(|(i, _)| *i == index)
                            .map(|(_, b)| b);
                        match (delta["type"].as_str(), block) {
                            (Some("text_delta"), Some(Block::Text)) => {
                                let piece = delta["text"].as_str().unwrap_or_default();
                                text.push_str(piece);
                                on_event(&Event::Text {
                                    delta: piece.to_owned(),
                                });
                            }
                            (Some("input_json_delta"), Some(Block::Tool { json, .. })) => {
                                json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                            }
                            (_, None) => {
                                return Err(ChatError::BadReply(format!(
                                    "a delta for content block {index}, which was never started"
                                )));
                            }
                            _ => {}
                        }
                    }
                    "message_delta" => {
                        if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                            stop = Some(match reason {
                                "end_turn" | "stop_sequence" => StopReason::EndTurn,
                                "tool_use" => StopReason::ToolUse,
                                "max_tokens" => StopReason::MaxTokens,
                                "refusal" => StopReason::Refusal,
                                other => StopReason::Other(other.to_owned()),
                            });
                        }
                        if let Some(n) = value["usage"]["output_tokens"].as_u64() {
                            usage.output_tokens = n;
                        }
                    }
                    "message_stop" => {
                        done = true;
                        break;
                    }
                    "error" => {
                        let (message, code) = error_parts(&value);
                        if is_context_error(&message, code.as_deref()) {
                            return Err(ChatError::ContextTooLong { message });
                        }
                        return Err(ChatError::Rejected {
                            provider: "Anthropic",
                            status: 200,
                            message: format!("{} (in the stream)", message),
                        });
                    }
                    _ => {}
                }
            }
            if !done {
                return Err(ChatError::StreamCut("no message_stop event".into()));
            }
            let mut tool_calls = Vec::new();
            for (_, block) in blocks {
                if let Block::Tool { id, name, json } = block {
                    let arguments = parse_arguments(&name, &json)?;
                    tool_calls.push(ToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
            }
            Ok(Reply {
                text,
                tool_calls,
                stop: stop.unwrap_or(StopReason::EndTurn),
                refusal: None,
                usage,
            })
        })
    }
}
