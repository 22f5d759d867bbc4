//! The OpenAI Responses API: `function_call` / `function_call_output` items and its
//! streaming events. Nothing is stored at OpenAI (`store: false`): the whole conversation
//! is sent each turn, as with the other providers.

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::http::{Endpoint, error_parts, is_context_error};
use super::{Provider, Request, Retry, parse_arguments};
use crate::ChatError;
use crate::event::Event;
use crate::message::{Reply, StopReason, ToolCall, Turn, Usage};

/// The OpenAI Responses API.
#[derive(Debug)]
pub struct OpenAiResponses {
    endpoint: Endpoint,
}

impl OpenAiResponses {
    /// `base_url` as the OpenAI SDKs take it (`https://api.openai.com/v1`): requests go to
    /// `{base_url}/responses`.
    pub fn new(
        base_url: &str,
        key: &str,
        key_env: &str,
        model: &str,
        retry: Retry,
    ) -> Result<OpenAiResponses, ChatError> {
        let url = format!("{}/responses", base_url.trim_end_matches('/'));
        let headers = vec![("authorization", format!("Bearer {key}"))];
        Ok(OpenAiResponses {
            endpoint: Endpoint::new(
                "OpenAI",
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
    let mut input = Vec::new();
    for turn in request.turns {
        match turn {
            Turn::User { text } => {
                input.push(json!({"type": "message", "role": "user", "content": text}))
            }
            Turn::Assistant { text, tool_calls } => {
                if !text.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant", "content": text}));
                }
                for call in tool_calls {
                    input.push(json!({
                        "type": "function_call", "call_id": call.id, "name": call.name,
                        "arguments": call.arguments.to_string(),
                    }));
                }
            }
            Turn::Tool { results } => {
                for r in results {
                    input.push(json!({"type": "function_call_output", "call_id": r.id, "output": r.content}));
                }
            }
        }
    }
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| {
            json!({
                "type": "function", "name": t.name, "description": t.description,
                "parameters": t.input_schema, "strict": false,
            })
        })
        .collect();
    let mut body = json!({"model": request.model, "input": input, "stream": true, "store": false});
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if let Some(system) = request.system.filter(|s| !s.is_empty()) {
        body["instructions"] = json!(system);
    }
    if let Some(max) = request.max_tokens {
        body["max_output_tokens"] = json!(max);
    }
    body
}

/// A function call being streamed.
struct Call {
    output_index: u64,
    item_id: String,
    call_id: String,
    name: String,
    arguments: String,
}

impl Provider for OpenAiResponses {
    fn name(&self) -> &'static str {
        "OpenAI"
    }

    fn complete<'a>(
        &'a self,
        request: Request<'a>,
        on_event: &'a (dyn Fn(&Event) + Send + Sync),
    ) -> BoxFuture<'a, Result<Reply, ChatError>> {
        Box::pin(async move {
            let mut events = self.endpoint.stream(&body(&request), on_event).await?;
            let mut text = String::new();
            let mut calls: Vec<Call> = Vec::new();
            // A `refusal` content part: its own deltas, apart from the output text.
            let mut refusal: Option<String> = None;
            let mut usage = Usage::default();
            let mut stop = None;
            while let Some(sse) = events.next().await {
                let sse = sse?;
                let Some(data) = sse.data.as_deref() else {
                    continue;
                };
                let value: Value = serde_json::from_str(data).map_err(|e| {
                    ChatError::BadReply(format!("an event is not JSON ({e}): {data}"))
                })?;
                let output_index = value["output_index"].as_u64().unwrap_or(0);
                let find = |calls: &mut Vec<Call>| -> Option<usize> {
                    let item_id = value["item_id"].as_str();
                    calls.iter().position(|c| {
                        item_id.map_or(c.output_index == output_index, |id| c.item_id == id)
                    })
                };
                match value["type"].as_str().unwrap_or_default() {
                    "response.output_text.delta" => {
                        let piece = value["delta"].as_str().unwrap_or_default();
                        text.push_str(piece);
                        on_event(&Event::Text {
                            delta: piece.to_owned(),
                        });
                    }
                    "response.refusal.delta" => {
                        refusal
                            .get_or_insert_default()
                            .push_str(value["delta"].as_str().unwrap_or_default());
                    }
                    "response.refusal.done" => {
                        if let Some(all) = value["refusal"].as_str() {
                            refusal = Some(all.to_owned());
                        }
                    }
                    "response.output_item.added" if value["item"]["type"] == "function_call" => {
                        let item = &value["item"];
                        calls.push(Call {
                            output_index,
                            item_id: item["id"].as_str().unwrap_or_default().to_owned(),
                            call_id: item["call_id"].as_str().unwrap_or_default().to_owned(),
                            name: item["name"].as_str().unwrap_or_default().to_owned(),
                            arguments: item["arguments"].as_str().unwrap_or_default().to_owned(),
                        });
                    }
                    "response.function_call_arguments.delta" => {
                        if let Some(i) = find(&mut calls) {
                            calls[i]
                                .arguments
                                .push_str(value["delta"].as_str().unwrap_or_default());
                        }
                    }
                    "response.function_call_arguments.done" => {
                        if let (Some(i), Some(all)) =
                            (find(&mut calls), value["arguments"].as_str())
                        {
                            calls[i].arguments = all.to_owned();
                        }
                    }
                    "response.output_item.done" if value["item"]["type"] == "function_call" => {
                        let item = &value["item"];
                        if let Some(call) =
                            calls.iter_mut().find(|c| c.output_index == output_index)
                        {
                            if let Some(all) = item["arguments"].as_str() {
                                call.arguments = all.to_owned();
                            }
                            if let Some(id) = item["call_id"].as_str() {
                                call.call_id = id.to_owned();
                            }
                        }
                    }
                    kind @ ("response.completed" | "response.incomplete") => {
                        let response = &value["response"];
                        usage.input_tokens =
                            response["usage"]["input_tokens"].as_u64().unwrap_or(0);
                        usage.output_tokens =
                            response["usage"]["output_tokens"].as_u64().unwrap_or(0);
                        stop = Some(if kind == "response.incomplete" {
                            match response["incomplete_details"]["reason"].as_str() {
                                Some("max_output_tokens") | None => StopReason::MaxTokens,
                                Some(other) => StopReason::Other(other.to_owned()),
                            }
                        } else if calls.is_empty() {
                            StopReason::EndTurn
                        } else {
                            StopReason::ToolUse
                        });
                        break;
                    }
                    "response.failed" | "error" => {
                        let error = if value["type"] == "error" {
                            &value
                        } else {
                            &value["response"]
                        };
                        let (message, code) = error_parts(error);
                        if is_context_error(&message, code.as_deref()) {
                            return Err(ChatError::ContextTooLong { message });
                        }
                        return Err(ChatError::Rejected {
                            provider: "OpenAI",
                            status: 200,
                            message: format!("{message} (in the stream)"),
                        });
                    }
                    _ => {}
                }
            }
            let Some(stop) = stop else {
                return Err(ChatError::StreamCut("no response.completed event".into()));
            };
            let mut tool_calls = Vec::new();
            for call in calls {
                let arguments = parse_arguments(&call.name, &call.arguments)?;
                tool_calls.push(ToolCall {
                    id: call.call_id,
                    name: call.name,
                    arguments,
                });
            }
            let refusal = refusal.filter(|r| !r.is_empty());
            let stop = if refusal.is_some() {
                StopReason::Refusal
            } else {
                stop
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
