//! OpenAI-compatible Chat Completions: what Ollama, llama.cpp's server, vLLM and LM Studio
//! speak (and OpenAI itself). Tool calls arrive as `tool_calls` deltas keyed by index.

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::http::{Endpoint, error_parts, is_context_error};
use super::{Provider, Request, Retry, parse_arguments};
use crate::ChatError;
use crate::event::Event;
use crate::message::{Reply, StopReason, ToolCall, Turn, Usage};

/// A Chat Completions endpoint.
#[derive(Debug)]
pub struct OpenAiChat {
    endpoint: Endpoint,
}

impl OpenAiChat {
    /// `base_url` ends where the OpenAI SDKs' does (`https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`): requests go to `{base_url}/chat/completions`. Local
    /// servers need no key: `key` may be empty.
    pub fn new(
        base_url: &str,
        key: &str,
        key_env: &str,
        model: &str,
        retry: Retry,
    ) -> Result<OpenAiChat, ChatError> {
        let url = format!("{}/chat/completions", base_url.trim_end_matches('/'));
        let mut headers = Vec::new();
        if !key.is_empty() {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        Ok(OpenAiChat {
            endpoint: Endpoint::new(
                "the Chat Completions server",
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
    let mut messages = Vec::new();
    if let Some(system) = request.system.filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": system}));
    }
    for turn in request.turns {
        match turn {
            Turn::User { text } => messages.push(json!({"role": "user", "content": text})),
            Turn::Assistant { text, tool_calls } => {
                let mut message = json!({"role": "assistant", "content": text});
                if !tool_calls.is_empty() {
                    if text.is_empty() {
                        message["content"] = Value::Null;
                    }
                    message["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments.to_string()},
                            })
                        })
                        .collect();
                }
                messages.push(message);
            }
            Turn::Tool { results } => {
                for r in results {
                    messages
                        .push(json!({"role": "tool", "tool_call_id": r.id, "content": r.content}));
                }
            }
        }
    }
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema,
            }})
        })
        .collect();
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if let Some(max) = request.max_tokens {
        body["max_tokens"] = json!(max);
    }
    body
}

/// A tool call being streamed.
#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

impl Provider for OpenAiChat {
    fn name(&self) -> &'static str {
        "the Chat Completions server"
    }

    fn complete<'a>(
        &'a self,
        request: Request<'a>,
        on_event: &'a (dyn Fn(&Event) + Send + Sync),
    ) -> BoxFuture<'a, Result<Reply, ChatError>> {
        Box::pin(async move {
            let mut events = self.endpoint.stream(&body(&request), on_event).await?;
            let mut text = String::new();
            let mut calls: Vec<(u64, Call)> = Vec::new();
            // OpenAI's refusal message comes in `delta.refusal`, apart from the content.
            let mut refusal: Option<String> = None;
            let mut usage = Usage::default();
            let mut stop = None;
            let mut done = false;
            while let Some(sse) = events.next().await {
                let sse = sse?;
                let Some(data) = sse.data.as_deref() else {
                    continue;
                };
                if data.trim() == "[DONE]" {
                    done = true;
                    break;
                }
                let value: Value = serde_json::from_str(data).map_err(|e| {
                    ChatError::BadReply(format!("a chunk is not JSON ({e}): {data}"))
                })?;
                if value.get("error").is_some() {
                    let (message, code) = error_parts(&value);
                    if is_context_error(&message, code.as_deref()) {
                        return Err(ChatError::ContextTooLong { message });
                    }
                    return Err(ChatError::Rejected {
                        provider: "the Chat Completions server",
                        status: 200,
                        message: format!("{message} (in the stream)"),
                    });
                }
                if let Some(u) = value.get("usage").filter(|u| u.is_object()) {
                    usage.input_tokens = u["prompt_tokens"].as_u64().unwrap_or(0);
                    usage.output_tokens = u["completion_tokens"].as_u64().unwrap_or(0);
                }
                let Some(choice) = value["choices"].get(0) else {
                    continue;
                };
                let delta = &choice["delta"];
                if let Some(piece) = delta["content"].as_str().filter(|p| !p.is_empty()) {
                    text.push_str(piece);
                    on_event(&Event::Text {
                        delta: piece.to_owned(),
                    });
                }
                if let Some(piece) = delta["refusal"].as_str() {
                    refusal.get_or_insert_default().push_str(piece);
                }
                for part in delta["tool_calls"].as_array().into_iter().flatten() {
                    let index = part["index"].as_u64().unwrap_or(calls.len() as u64);
                    let at = match calls.iter().position(|(i, _)| *i == index) {
                        Some(at) => at,
                        None => {
                            calls.push((index, Call::default()));
                            calls.len() - 1
                        }
                    };
                    let call = &mut calls[at].1;
                    if let Some(id) = part["id"].as_str() {
                        call.id = id.to_owned();
                    }
                    if let Some(name) = part["function"]["name"].as_str() {
                        call.name.push_str(name);
                    }
                    if let Some(args) = part["function"]["arguments"].as_str() {
                        call.arguments.push_str(args);
                    }
                }
                if let Some(reason) = choice["finish_reason"].as_str() {
                    stop = Some(match reason {
                        "stop" => StopReason::EndTurn,
                        "tool_calls" | "function_call" => StopReason::ToolUse,
                        "length" => StopReason::MaxTokens,
                        other => StopReason::Other(other.to_owned()),
                    });
                }
            }
            // Some servers end with the finish reason and no `[DONE]`; an answer with
            // neither was cut off.
            let Some(stop) = stop.or(if done {
                Some(StopReason::EndTurn)
            } else {
                None
            }) else {
                return Err(ChatError::StreamCut(
                    "no finish_reason and no [DONE]".into(),
                ));
            };
            let mut tool_calls = Vec::new();
            for (n, (_, call)) in calls.into_iter().enumerate() {
                let arguments = parse_arguments(&call.name, &call.arguments)?;
                // A few local servers leave the id out; the history needs one to pair.
                let id = if call.id.is_empty() {
                    format!("call_{n}")
                } else {
                    call.id
                };
                tool_calls.push(ToolCall {
                    id,
                    name: call.name,
                    arguments,
                });
            }
            let refusal = refusal.filter(|r| !r.is_empty());
            let stop = if refusal.is_some() {
                StopReason::Refusal
            } else if tool_calls.is_empty() || stop != StopReason::EndTurn {
                stop
            } else {
                StopReason::ToolUse
            };
            Ok(Reply {
                text,
                tool_calls,
                stop,
                refusal,
                usage,
            })
        })
    }
}
