//! Fuzz the borrowed JSON-RPC envelope decoder and the MCP param/result types.
//!
//! Input: arbitrary bytes; if they are UTF-8 they are one wire line (a message or a batch).
//! Must never panic. Invariants checked:
//!
//! * an `EnvelopeError` carries -32700 or -32600; one with `respond == true` encodes (with
//!   `encode_error`) to JSON that decodes back as a `Message::Error` with the same id, code
//!   and message;
//! * every decoded message re-encodes (`encode_request` / `encode_notification` /
//!   `encode_result` / `encode_error`) to a line that decodes to the same message;
//! * the answer to a request (`encode_result` with its id) decodes as a response to that id;
//! * params (and results) that decode into an MCP type serialize to a value that decodes
//!   into that type again and serializes to the same value (Serialize/Deserialize agree).
#![no_main]

use libfuzzer_sys::fuzz_target;
use moat_protocol::RequestId;
use moat_protocol::error::{INVALID_REQUEST, PARSE_ERROR};
use moat_protocol::jsonrpc::{
    self, EnvelopeError, Message, decode_params, encode_error, encode_notification,
    encode_request, encode_result,
};
use moat_protocol::types::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    // Exactly what the peer's read loop does...
    if jsonrpc::is_batch(line) {
        batch(line);
    } else {
        single(line);
    }
    // ...and both decoders on everything, whatever the first byte.
    match Message::parse(line) {
        Ok(m) => check_message(&m),
        Err(e) => check_envelope_error(&e),
    }
    batch(line);
});

fn single(line: &str) {
    match Message::parse(line) {
        Ok(m) => check_message(&m),
        Err(e) => check_envelope_error(&e),
    }
}

fn batch(line: &str) {
    match Message::parse_batch(line) {
        Ok(items) => {
            assert!(!items.is_empty(), "an empty batch must be refused");
            for item in &items {
                match item {
                    Ok(m) => check_message(m),
                    Err(e) => check_envelope_error(e),
                }
            }
        }
        Err(e) => check_envelope_error(&e),
    }
}

fn check_envelope_error(e: &EnvelopeError) {
    assert!(
        e.error.code == PARSE_ERROR || e.error.code == INVALID_REQUEST,
        "unexpected envelope error code {}",
        e.error.code
    );
    // Display must not panic.
    let _ = e.to_string();
    if !e.respond {
        return;
    }
    let out = encode_error(e.id.as_ref(), &e.error);
    assert_valid_json(&out);
    match Message::parse(&out) {
        Ok(Message::Error(back)) => {
            assert_eq!(back.id, e.id, "error id changed in transit: {out}");
            assert_eq!(back.error, e.error, "error object changed in transit: {out}");
        }
        other => panic!("encoded error {out} decodes as {other:?}"),
    }
}

fn check_message(m: &Message<'_>) {
    match m {
        Message::Request(r) => {
            check_id(&r.id);
            let out = encode_request(&r.id, &r.method, r.params).expect("encode request");
            match Message::parse(&out) {
                Ok(Message::Request(back)) => {
                    assert_eq!(back.id, r.id);
                    assert_eq!(back.method, r.method);
                    assert_eq!(back.params.map(RawValue::get), r.params.map(RawValue::get));
                }
                other => panic!("re-encoded request {out} decodes as {other:?}"),
            }
            // The answer to it must reach the same id.
            let answer = encode_result(&r.id, &serde_json::json!({})).expect("encode result");
            match Message::parse(&answer) {
                Ok(Message::Response(resp)) => assert_eq!(resp.id, r.id),
                other => panic!("answer {answer} decodes as {other:?}"),
            }
            decode_all_params(&r.method, r.params);
        }
        Message::Notification(n) => {
            let out = encode_notification(&n.method, n.params).expect("encode notification");
            match Message::parse(&out) {
                Ok(Message::Notification(back)) => {
                    assert_eq!(back.method, n.method);
                    assert_eq!(back.params.map(RawValue::get), n.params.map(RawValue::get));
                }
                other => panic!("re-encoded notification {out} decodes as {other:?}"),
            }
            decode_all_params(&n.method, n.params);
        }
        Message::Response(r) => {
            check_id(&r.id);
            let out = encode_result(&r.id, r.result).expect("encode result");
            match Message::parse(&out) {
                Ok(Message::Response(back)) => {
                    assert_eq!(back.id, r.id);
                    assert_eq!(back.result.get(), r.result.get());
                }
                other => panic!("re-encoded response {out} decodes as {other:?}"),
            }
            decode_all_results(Some(r.result));
        }
        Message::Error(e) => {
            if let Some(id) = &e.id {
                check_id(id);
            }
            let out = encode_error(e.id.as_ref(), &e.error);
            assert_valid_json(&out);
            match Message::parse(&out) {
                Ok(Message::Error(back)) => {
                    assert_eq!(back.id, e.id);
                    assert_eq!(back.error.code, e.error.code);
                    assert_eq!(back.error.message, e.error.message);
                    assert_eq!(back.error.data.is_some(), e.error.data.is_some());
                }
                other => panic!("re-encoded error {out} decodes as {other:?}"),
            }
        }
        _ => {}
    }
}

fn check_id(id: &RequestId) {
    let text = serde_json::to_string(id).expect("ids serialize");
    let back: RequestId = serde_json::from_str(&text).expect("a serialized id decodes");
    assert_eq!(&back, id);
    let _ = id.to_string();
}

fn assert_valid_json(text: &str) {
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        panic!("not valid JSON ({e}): {text}");
    }
}

/// Decode `params` as `T` the way handlers do; if that works, check that what `T`
/// serializes to decodes as `T` again and serializes the same.
fn try_decode<T: DeserializeOwned + Serialize>(params: Option<&RawValue>) {
    let Ok(v) = decode_params::<T>(params) else {
        return;
    };
    roundtrip(&v);
}

fn roundtrip<T: DeserializeOwned + Serialize>(v: &T) {
    let name = std::any::type_name::<T>();
    let first = match serde_json::to_value(v) {
        Ok(first) => first,
        Err(e) => panic!("{name}: a decoded value does not serialize: {e}"),
    };
    let again: T = match serde_json::from_value(first.clone()) {
        Ok(again) => again,
        Err(e) => panic!("{name}: its own serialization does not decode: {e}\n{first}"),
    };
    let second = serde_json::to_value(&again).expect("serializes");
    assert_eq!(first, second, "{name}: serialization is not stable");
    // And the text form as well (what actually goes on the wire).
    let text = serde_json::to_string(v).expect("serializes");
    if let Err(e) = serde_json::from_str::<T>(&text) {
        panic!("{name}: its own JSON text does not decode: {e}\n{text}");
    }
}

fn decode_all_params(method: &str, params: Option<&RawValue>) {
    // The type a handler would pick for the method first (most meaningful), then every
    // other type too: decoders must not panic on any shape.
    try_decode::<CallToolRequestParams>(params);
    try_decode::<InitializeRequestParams>(params);
    try_decode::<ReadResourceRequestParams>(params);
    try_decode::<ResourceRequestParams>(params);
    try_decode::<GetPromptRequestParams>(params);
    try_decode::<CompleteRequestParams>(params);
    try_decode::<CreateMessageRequestParams>(params);
    try_decode::<ElicitRequestParams>(params);
    try_decode::<PaginatedRequestParams>(params);
    try_decode::<SetLevelRequestParams>(params);
    try_decode::<RequestParams>(params);
    try_decode::<NotificationParams>(params);
    try_decode::<CancelledNotificationParams>(params);
    try_decode::<ProgressNotificationParams>(params);
    try_decode::<LoggingMessageNotificationParams>(params);
    try_decode::<ResourceUpdatedNotificationParams>(params);
    try_decode::<ElicitationCompleteNotificationParams>(params);
    try_decode::<InputResponseRequestParams>(params);
    try_decode::<SubscriptionsListenRequestParams>(params);
    try_decode::<SubscriptionsAcknowledgedNotificationParams>(params);
    try_decode::<GetTaskRequestParams>(params);
    try_decode::<TaskStatusNotificationParams>(params);
    let _ = method;
}

fn decode_all_results(result: Option<&RawValue>) {
    try_decode::<InitializeResult>(result);
    try_decode::<DiscoverResult>(result);
    try_decode::<CallToolResult>(result);
    try_decode::<ListToolsResult>(result);
    try_decode::<ListResourcesResult>(result);
    try_decode::<ListResourceTemplatesResult>(result);
    try_decode::<ReadResourceResult>(result);
    try_decode::<ListPromptsResult>(result);
    try_decode::<GetPromptResult>(result);
    try_decode::<CompleteResult>(result);
    try_decode::<CreateMessageResult>(result);
    try_decode::<ElicitResult>(result);
    try_decode::<ListRootsResult>(result);
    try_decode::<InputRequiredResult>(result);
    try_decode::<EmptyResult>(result);
    try_decode::<CreateTaskResult>(result);
    try_decode::<GetTaskResult>(result);
    try_decode::<ListTasksResult>(result);
    try_decode::<SubscriptionsListenResult>(result);
}
