//! The rules each provider enforces on a request, as far as a tool loop can break them:
//! a request the real service would refuse is refused here too, with the service's words.

use std::collections::{BTreeSet, HashSet};

use moat::schema::Side;
use moat::schema::rules::{self, Api};
use serde_json::Value;

use super::Wire;

/// Every rule `body` (with `headers`) breaks, for `wire`.
pub fn check(wire: Wire, headers: &http::HeaderMap, body: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    match wire {
        Wire::Anthropic => anthropic(headers, body, &mut errors),
        Wire::OpenAiResponses => responses(headers, body, &mut errors),
        Wire::OpenAiChat => chat(body, &mut errors),
    }
    errors
}

fn header<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
}

fn valid_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A function's parameters: a JSON Schema object whose type is `object`, within what the
/// provider's function calling accepts (the SDK's rules, with their sources).
fn object_schema(api: Api, schema: &Value, at: &str, errors: &mut Vec<String>) {
    for v in rules::check(api, Side::Input, schema) {
        errors.push(format!("{at}{}: {} ({})", v.at, v.message, v.rule));
    }
    if !schema.is_object() {
        errors.push(format!("{at}: Input should be a valid dictionary"));
    } else if schema["type"] != "object" {
        errors.push(format!("{at}.type: Input should be 'object'"));
    } else if schema.get("properties").is_some_and(|p| !p.is_object()) {
        errors.push(format!("{at}.properties: must be an object"));
    }
}

fn common(body: &Value, errors: &mut Vec<String>) {
    if body["model"].as_str().is_none_or(|m| m.is_empty()) {
        errors.push("model: Field required".into());
    }
    if body["stream"] != true {
        errors.push("stream: moat always streams; the scripted model only answers streams".into());
    }
}

fn anthropic(headers: &http::HeaderMap, body: &Value, errors: &mut Vec<String>) {
    if header(headers, "x-api-key").is_none() {
        errors.push("x-api-key header is required".into());
    }
    if header(headers, "anthropic-version").is_none() {
        errors.push("anthropic-version: header is required".into());
    }
    common(body, errors);
    if body["max_tokens"].as_u64().is_none_or(|n| n < 1) {
        errors.push("max_tokens: Field required".into());
    }
    let mut cache_points = 0;
    match &body["system"] {
        Value::Null | Value::String(_) => {}
        Value::Array(blocks) => {
            for (i, b) in blocks.iter().enumerate() {
                if b["type"] != "text" || b["text"].as_str().is_none_or(|t| t.is_empty()) {
                    errors.push(format!("system.{i}: must be a non-empty text block"));
                }
                cache_points += cache_control(b, &format!("system.{i}"), errors);
            }
        }
        _ => errors.push("system: Input should be a valid string or list".into()),
    }
    let mut tool_names = HashSet::new();
    if let Some(tools) = body.get("tools") {
        let Some(tools) = tools.as_array() else {
            errors.push("tools: Input should be a valid list".into());
            return;
        };
        for (i, t) in tools.iter().enumerate() {
            let name = t["name"].as_str().unwrap_or_default();
            if !valid_name(name, 128) {
                errors.push(format!(
                    "tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
                ));
            }
            if !tool_names.insert(name.to_owned()) {
                errors.push(format!("tools: Tool names must be unique ({name})"));
            }
            if t.get("description").is_some_and(|d| !d.is_string()) {
                errors.push(format!(
                    "tools.{i}.custom.description: Input should be a valid string"
                ));
            }
            object_schema(
                Api::Anthropic,
                &t["input_schema"],
                &format!("tools.{i}.custom.input_schema"),
                errors,
            );
            for key in t.as_object().into_iter().flatten().map(|(k, _)| k) {
                if ![
                    "name",
                    "description",
                    "input_schema",
                    "cache_control",
                    "type",
                ]
                .contains(&key.as_str())
                {
                    errors.push(format!(
                        "tools.{i}.custom.{key}: Extra inputs are not permitted"
                    ));
                }
            }
            cache_points += cache_control(t, &format!("tools.{i}"), errors);
        }
    }
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        errors.push("messages: at least one message is required".into());
        return;
    };
    if messages[0]["role"] != "user" {
        errors.push("messages.0.role: the first message must use the \"user\" role".into());
    }
    let mut seen_ids = HashSet::new();
    let mut uses_tools = false;
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        if role != "user" && role != "assistant" {
            errors.push(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            ));
        }
        let blocks: Vec<Value> = match &m["content"] {
            Value::String(s) if !s.is_empty() => {
                vec![serde_json::json!({"type": "text", "text": s})]
            }
            Value::Array(a) if !a.is_empty() => a.clone(),
            _ => {
                errors.push(format!(
                    "messages.{i}: all messages must have non-empty content"
                ));
                continue;
            }
        };
        let mut other_seen = false;
        for (j, b) in blocks.iter().enumerate() {
            let at = format!("messages.{i}.content.{j}");
            cache_points += cache_control(b, &at, errors);
            match b["type"].as_str().unwrap_or_default() {
                "text" => {
                    other_seen = true;
                    if b["text"].as_str().is_none_or(|t| t.is_empty()) {
                        errors.push(format!("{at}: text content blocks must be non-empty"));
                    }
                }
                "tool_use" => {
                    uses_tools = true;
                    other_seen = true;
                    if role != "assistant" {
                        errors.push(format!(
                            "{at}: tool_use blocks are only allowed in assistant messages"
                        ));
                    }
                    let id = b["id"].as_str().unwrap_or_default();
                    if id.is_empty() || !seen_ids.insert(id.to_owned()) {
                        errors.push(format!(
                            "{at}.id: `tool_use` ids must be unique and non-empty ({id:?})"
                        ));
                    }
                    if !b["input"].is_object() {
                        errors.push(format!("{at}.input: Input should be a valid dictionary"));
                    }
                    if !b["name"].as_str().is_some_and(|n| valid_name(n, 128)) {
                        errors.push(format!("{at}.name: invalid tool name"));
                    }
                }
                "tool_result" => {
                    uses_tools = true;
                    if role != "user" {
                        errors.push(format!(
                            "{at}: tool_result blocks are only allowed in user messages"
                        ));
                    }
                    if other_seen {
                        errors.push(format!(
                            "messages.{i}: tool_result blocks must come first in the message content"
                        ));
                    }
                    let id = b["tool_use_id"].as_str().unwrap_or_default();
                    let previous = i
                        .checked_sub(1)
                        .map(|p| tool_use_ids(&messages[p]))
                        .unwrap_or_default();
                    if !previous.contains(id) {
                        errors.push(format!(
                            "{at}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each \
                             `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                    if !matches!(
                        b["content"],
                        Value::String(_) | Value::Array(_) | Value::Null
                    ) {
                        errors.push(format!(
                            "{at}.content: Input should be a valid string or list"
                        ));
                    }
                    if b.get("is_error").is_some_and(|e| !e.is_boolean()) {
                        errors.push(format!("{at}.is_error: Input should be a valid boolean"));
                    }
                }
                "image" | "document" | "thinking" | "redacted_thinking" => other_seen = true,
                other => errors.push(format!("{at}.type: unknown content block type {other:?}")),
            }
        }
        if role == "assistant" {
            let ids = tool_use_ids(m);
            if !ids.is_empty() {
                let answered = messages.get(i + 1).map(tool_result_ids).unwrap_or_default();
                let missing: Vec<&String> =
                    ids.iter().filter(|id| !answered.contains(*id)).collect();
                if !missing.is_empty() {
                    errors.push(format!(
                        "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. \
                         Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                        missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
    }
    if uses_tools && tool_names.is_empty() {
        errors.push(
            "Requests which include `tool_use` or `tool_result` blocks must define tools.".into(),
        );
    }
    if cache_points > 4 {
        errors.push(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {cache_points}."
        ));
    }
}

fn cache_control(block: &Value, at: &str, errors: &mut Vec<String>) -> usize {
    match block.get("cache_control") {
        None => 0,
        Some(c) if c["type"] == "ephemeral" => 1,
        Some(_) => {
            errors.push(format!(
                "{at}.cache_control.type: Input should be 'ephemeral'"
            ));
            1
        }
    }
}

fn tool_use_ids(message: &Value) -> BTreeSet<String> {
    ids_of(message, "tool_use", "id")
}

fn tool_result_ids(message: &Value) -> BTreeSet<String> {
    ids_of(message, "tool_result", "tool_use_id")
}

fn ids_of(message: &Value, kind: &str, key: &str) -> BTreeSet<String> {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == kind)
        .filter_map(|b| b[key].as_str().map(str::to_owned))
        .collect()
}

fn bearer(headers: &http::HeaderMap, errors: &mut Vec<String>) {
    if !header(headers, "authorization").is_some_and(|v| v.starts_with("Bearer ") && v.len() > 7) {
        errors.push("You didn't provide an API key (Authorization: Bearer …)".into());
    }
}

fn function_tool(
    name: &str,
    parameters: &Value,
    at: &str,
    names: &mut HashSet<String>,
    errors: &mut Vec<String>,
) {
    if !valid_name(name, 64) {
        errors.push(format!(
            "Invalid '{at}.name': string does not match pattern '^[a-zA-Z0-9_-]+$' (max 64)"
        ));
    }
    if !names.insert(name.to_owned()) {
        errors.push(format!("Duplicate tool name {name:?}"));
    }
    object_schema(Api::OpenAi, parameters, &format!("{at}.parameters"), errors);
}

fn json_arguments(arguments: &Value, at: &str, errors: &mut Vec<String>) {
    match arguments.as_str().map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(_))) => {}
        Some(_) => errors.push(format!(
            "{at}.arguments: must be a JSON object encoded as a string"
        )),
        None => errors.push(format!("{at}.arguments: Input should be a valid string")),
    }
}

fn responses(headers: &http::HeaderMap, body: &Value, errors: &mut Vec<String>) {
    bearer(headers, errors);
    common(body, errors);
    let mut names = HashSet::new();
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if t["type"] != "function" {
            errors.push(format!("tools[{i}].type: only function tools are expected"));
        }
        function_tool(
            t["name"].as_str().unwrap_or_default(),
            &t["parameters"],
            &format!("tools[{i}]"),
            &mut names,
            errors,
        );
    }
    if body.get("instructions").is_some_and(|s| !s.is_string()) {
        errors.push("instructions: Input should be a valid string".into());
    }
    let Some(input) = body["input"].as_array() else {
        if !body["input"].is_string() {
            errors.push("input: Field required".into());
        }
        return;
    };
    let mut calls: Vec<String> = Vec::new();
    let mut answered = HashSet::new();
    for (i, item) in input.iter().enumerate() {
        let at = format!("input[{i}]");
        let kind = item["type"]
            .as_str()
            .unwrap_or(if item.get("role").is_some() {
                "message"
            } else {
                ""
            });
        match kind {
            "message" => {
                let role = item["role"].as_str().unwrap_or_default();
                if !["user", "assistant", "system", "developer"].contains(&role) {
                    errors.push(format!("{at}.role: Invalid value {role:?}"));
                }
                if !matches!(&item["content"], Value::String(_) | Value::Array(_)) {
                    errors.push(format!("{at}.content: Field required"));
                }
            }
            "function_call" => {
                let id = item["call_id"].as_str().unwrap_or_default();
                if id.is_empty() {
                    errors.push(format!("{at}.call_id: Field required"));
                }
                if calls.iter().any(|c| c == id) {
                    errors.push(format!("{at}: Duplicate item found with call_id {id}"));
                }
                calls.push(id.to_owned());
                if !item["name"].as_str().is_some_and(|n| valid_name(n, 64)) {
                    errors.push(format!("{at}.name: invalid function name"));
                }
                json_arguments(&item["arguments"], &at, errors);
            }
            "function_call_output" => {
                let id = item["call_id"].as_str().unwrap_or_default();
                if !calls.iter().any(|c| c == id) {
                    errors.push(format!(
                        "No tool call found for function call output with call_id {id}."
                    ));
                }
                answered.insert(id.to_owned());
                if !item["output"].is_string() {
                    errors.push(format!("{at}.output: Input should be a valid string"));
                }
            }
            other => errors.push(format!("{at}.type: Invalid value {other:?}")),
        }
    }
    for id in calls.iter().filter(|c| !answered.contains(*c)) {
        errors.push(format!("No tool output found for function call {id}."));
    }
}

fn chat(body: &Value, errors: &mut Vec<String>) {
    common(body, errors);
    let mut names = HashSet::new();
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if t["type"] != "function" {
            errors.push(format!(
                "tools[{i}].type: Invalid value, expected 'function'"
            ));
        }
        let f = &t["function"];
        function_tool(
            f["name"].as_str().unwrap_or_default(),
            &f["parameters"],
            &format!("tools[{i}].function"),
            &mut names,
            errors,
        );
    }
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        errors.push("messages: must be a non-empty array".into());
        return;
    };
    // The calls of the latest assistant message still waiting for their tool messages.
    let mut pending: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let role = m["role"].as_str().unwrap_or_default();
        if role != "tool" && !pending.is_empty() {
            errors.push(format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each \
                 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                pending.join(", ")
            ));
            pending.clear();
        }
        match role {
            "system" | "developer" | "user" => {
                if !matches!(&m["content"], Value::String(_) | Value::Array(_)) {
                    errors.push(format!("{at}.content: Field required"));
                }
            }
            "assistant" => {
                let calls = m["tool_calls"].as_array();
                if calls.is_none() && !m["content"].is_string() {
                    errors.push(format!(
                        "{at}: an assistant message needs content or tool_calls"
                    ));
                }
                for (j, c) in calls.into_iter().flatten().enumerate() {
                    let cat = format!("{at}.tool_calls[{j}]");
                    let id = c["id"].as_str().unwrap_or_default();
                    if id.is_empty() {
                        errors.push(format!("{cat}.id: Field required"));
                    }
                    if c["type"] != "function" {
                        errors.push(format!("{cat}.type: Field required"));
                    }
                    if c["function"]["name"].as_str().is_none_or(|n| n.is_empty()) {
                        errors.push(format!("{cat}.function.name: Field required"));
                    }
                    json_arguments(
                        &c["function"]["arguments"],
                        &format!("{cat}.function"),
                        errors,
                    );
                    pending.push(id.to_owned());
                }
            }
            "tool" => {
                let Some(id) = m["tool_call_id"].as_str().filter(|s| !s.is_empty()) else {
                    errors.push(format!("{at}.tool_call_id: Field required"));
                    continue;
                };
                match pending.iter().position(|p| p == id) {
                    Some(p) => {
                        pending.remove(p);
                    }
                    None => errors.push(format!(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' ({id})."
                    )),
                }
                if !m["content"].is_string() && !m["content"].is_array() {
                    errors.push(format!("{at}.content: Field required"));
                }
            }
            other => errors.push(format!("{at}.role: Invalid value {other:?}")),
        }
    }
    if !pending.is_empty() {
        errors.push(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each \
             'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            pending.join(", ")
        ));
    }
}
