//! Streamed answers and error bodies in each provider's wire format, as the real services
//! send them.

use serde_json::{Value, json};

use super::Wire;

/// A tool call to stream, with its id already chosen.
pub struct Call<'a> {
    pub id: String,
    pub name: &'a str,
    pub arguments: &'a Value,
}

/// Splits `s` in two at a character boundary (so deltas are really deltas).
fn halves(s: &str) -> (&str, &str) {
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid += 1;
    }
    s.split_at(mid)
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The whole event stream for an answer of `text` and `calls`; without `usage`, the token
/// counts are left out, as some OpenAI-compatible servers do (Anthropic always sends them).
pub fn stream(wire: Wire, text: &str, calls: &[Call<'_>], n: u64, usage: bool) -> String {
    match wire {
        Wire::Anthropic => anthropic(text, calls, n),
        Wire::OpenAiResponses => responses(text, calls, n, usage),
        Wire::OpenAiChat => chat(text, calls, n, usage),
    }
}

fn anthropic(text: &str, calls: &[Call<'_>], n: u64) -> String {
    let mut out = event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": format!("msg_{n:04}"), "type": "message", "role": "assistant", "content": [],
            "model": "scripted", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100 + n, "output_tokens": 1}}}),
    );
    out.push_str(&event("ping", &json!({"type": "ping"})));
    let mut index = 0;
    if !text.is_empty() {
        out.push_str(&event("content_block_start", &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
        let (a, b) = halves(text);
        for piece in [a, b] {
            out.push_str(&event("content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}})));
        }
        out.push_str(&event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for call in calls {
        out.push_str(&event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
        ));
        let args = call.arguments.to_string();
        let (a, b) = halves(&args);
        for piece in [a, b] {
            out.push_str(&event("content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}})));
        }
        out.push_str(&event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    out.push_str(&event("message_delta", &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 20}})));
    out.push_str(&event("message_stop", &json!({"type": "message_stop"})));
    out
}

fn responses(text: &str, calls: &[Call<'_>], n: u64, usage: bool) -> String {
    let id = format!("resp_{n:04}");
    let mut seq = 0;
    let mut next = |mut v: Value| {
        v["sequence_number"] = json!(seq);
        seq += 1;
        event(v["type"].as_str().unwrap_or_default(), &v)
    };
    let mut out = next(
        json!({"type": "response.created", "response": {"id": id, "object": "response", "status": "in_progress", "output": []}}),
    );
    let mut output = Vec::new();
    let mut index = 0;
    if !text.is_empty() {
        let item_id = format!("msg_{n:04}");
        out.push_str(&next(json!({"type": "response.output_item.added", "output_index": index,
            "item": {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}})));
        out.push_str(&next(json!({"type": "response.content_part.added", "item_id": item_id, "output_index": index, "content_index": 0, "part": {"type": "output_text", "text": ""}})));
        let (a, b) = halves(text);
        for piece in [a, b] {
            out.push_str(&next(json!({"type": "response.output_text.delta", "item_id": item_id, "output_index": index, "content_index": 0, "delta": piece})));
        }
        out.push_str(&next(json!({"type": "response.output_text.done", "item_id": item_id, "output_index": index, "content_index": 0, "text": text})));
        let item = json!({"id": item_id, "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]});
        out.push_str(&next(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        ));
        output.push(item);
        index += 1;
    }
    for (k, call) in calls.iter().enumerate() {
        let item_id = format!("fc_{n:04}_{k}");
        let args = call.arguments.to_string();
        out.push_str(&next(json!({"type": "response.output_item.added", "output_index": index,
            "item": {"id": item_id, "type": "function_call", "status": "in_progress", "call_id": call.id, "name": call.name, "arguments": ""}})));
        let (a, b) = halves(&args);
        for piece in [a, b] {
            out.push_str(&next(json!({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": index, "delta": piece})));
        }
        out.push_str(&next(json!({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index, "arguments": args})));
        let item = json!({"id": item_id, "type": "function_call", "status": "completed", "call_id": call.id, "name": call.name, "arguments": args});
        out.push_str(&next(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        ));
        output.push(item);
        index += 1;
    }
    let mut response =
        json!({"id": id, "object": "response", "status": "completed", "output": output});
    if usage {
        response["usage"] =
            json!({"input_tokens": 100 + n, "output_tokens": 20, "total_tokens": 120 + n});
    }
    out.push_str(&next(
        json!({"type": "response.completed", "response": response}),
    ));
    out
}

fn chat(text: &str, calls: &[Call<'_>], n: u64, usage: bool) -> String {
    let id = format!("chatcmpl-{n:04}");
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut out = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    if !text.is_empty() {
        let (a, b) = halves(text);
        for piece in [a, b] {
            out.push_str(&chunk(json!({"content": piece}), Value::Null));
        }
    }
    for (k, call) in calls.iter().enumerate() {
        out.push_str(&chunk(json!({"tool_calls": [{"index": k, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}]}), Value::Null));
        let args = call.arguments.to_string();
        let (a, b) = halves(&args);
        for piece in [a, b] {
            out.push_str(&chunk(
                json!({"tool_calls": [{"index": k, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    out.push_str(&chunk(json!({}), json!(finish)));
    if usage {
        let usage = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": "scripted", "choices": [],
            "usage": {"prompt_tokens": 100 + n, "completion_tokens": 20, "total_tokens": 120 + n}});
        out.push_str(&format!("data: {usage}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

/// The whole event stream of a refusal of `text`.
pub fn refusal(wire: Wire, text: &str, n: u64) -> String {
    let (a, b) = halves(text);
    match wire {
        Wire::Anthropic => {
            // Streamed as text; only the stop reason says it was a refusal.
            let whole = anthropic(text, &[], n);
            whole.replace(r#""stop_reason":"end_turn""#, r#""stop_reason":"refusal""#)
        }
        Wire::OpenAiResponses => {
            let id = format!("resp_{n:04}");
            let item_id = format!("msg_{n:04}");
            let mut seq = 0;
            let mut next = |mut v: Value| {
                v["sequence_number"] = json!(seq);
                seq += 1;
                event(v["type"].as_str().unwrap_or_default(), &v)
            };
            let part = json!({"type": "refusal", "refusal": text});
            let item = json!({"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]});
            let mut out = next(
                json!({"type": "response.created", "response": {"id": id, "object": "response", "status": "in_progress", "output": []}}),
            );
            out.push_str(&next(json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}})));
            out.push_str(&next(json!({"type": "response.content_part.added", "item_id": item_id, "output_index": 0, "content_index": 0, "part": {"type": "refusal", "refusal": ""}})));
            for piece in [a, b] {
                out.push_str(&next(json!({"type": "response.refusal.delta", "item_id": item_id, "output_index": 0, "content_index": 0, "delta": piece})));
            }
            out.push_str(&next(json!({"type": "response.refusal.done", "item_id": item_id, "output_index": 0, "content_index": 0, "refusal": text})));
            out.push_str(&next(json!({"type": "response.content_part.done", "item_id": item_id, "output_index": 0, "content_index": 0, "part": part})));
            out.push_str(&next(
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            ));
            out.push_str(&next(json!({"type": "response.completed", "response": {"id": id, "object": "response", "status": "completed",
                "output": [item], "usage": {"input_tokens": 100 + n, "output_tokens": 20, "total_tokens": 120 + n}}})));
            out
        }
        Wire::OpenAiChat => {
            let id = format!("chatcmpl-{n:04}");
            let chunk = |delta: Value, finish: Value| {
                let c = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": "scripted",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
                format!("data: {c}\n\n")
            };
            let mut out = chunk(
                json!({"role": "assistant", "content": null, "refusal": ""}),
                Value::Null,
            );
            for piece in [a, b] {
                out.push_str(&chunk(json!({"refusal": piece}), Value::Null));
            }
            out.push_str(&chunk(json!({}), json!("stop")));
            out.push_str("data: [DONE]\n\n");
            out
        }
    }
}

/// An error body as the provider writes it.
pub fn error(wire: Wire, status: u16, message: &str, code: Option<&str>) -> String {
    match wire {
        Wire::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
        }
        _ => {
            let kind = match status {
                400 | 404 => "invalid_request_error",
                401 => "invalid_api_key",
                429 => "rate_limit_exceeded",
                _ => "server_error",
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
                .to_string()
        }
    }
}
