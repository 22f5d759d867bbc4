//! The session's rules, each tested on the core alone: no runtime, no transport.

use proptest::prelude::*;
use std::time::Instant;

use serde_json::{Value, json};

use super::*;
use crate::error::{INVALID_PARAMS, METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION};

fn server<T>() -> Session<T> {
    Session::new(Role::Server, SupportedVersions::default(), 1 << 20, 16)
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

fn line(message: Value) -> String {
    message.to_string()
}

/// The error code of a reply, or a panic saying what came instead.
fn refused(incoming: Incoming<'_>) -> i64 {
    match incoming {
        Incoming::Reply(r) => {
            let v: Value = serde_json::from_str(&r.line).expect("a JSON reply");
            v["error"]["code"]
                .as_i64()
                .unwrap_or_else(|| panic!("not an error: {v}"))
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A handshake-era server session past `initialize` and `initialized` at `version`.
fn initialized(version: ProtocolVersion) -> Session {
    let mut s: Session = server();
    let init = line(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion": version.as_str(), "capabilities": {},
        "clientInfo": {"name":"t","version":"1"}}}),
    );
    assert!(matches!(
        s.handle_incoming(&init),
        Incoming::Initialize { .. }
    ));
    s.initialize_answered(version);
    let done = line(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    match s.handle_incoming(&done) {
        Incoming::Notification(n) => assert!(matches!(n.kind, NoticeKind::Initialized)),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.lifecycle().state(), State::Active);
    s
}

#[test]
fn requests_wait_for_the_handshake_but_ping_does_not() {
    let mut s: Session = server();
    let list = line(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    assert_eq!(refused(s.handle_incoming(&list)), INVALID_REQUEST);
    let ping = line(json!({"jsonrpc":"2.0","id":2,"method":"ping"}));
    match s.handle_incoming(&ping) {
        Incoming::Reply(r) => {
            assert_eq!(r.to, Some(RequestId::Number(2)));
            let v: Value = serde_json::from_str(&r.line).unwrap();
            assert_eq!(v["result"], json!({}));
        }
        other => panic!("{other:?}"),
    }
    let mut s = initialized(ProtocolVersion::V2025_11_25);
    match s.handle_incoming(&list) {
        Incoming::Request(head) => {
            assert_eq!(head.method, "tools/list");
            assert_eq!(head.version, Some(ProtocolVersion::V2025_11_25));
        }
        other => panic!("{other:?}"),
    }
    // A second `initialize` is refused.
    let again = line(json!({"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}));
    assert_eq!(refused(s.handle_incoming(&again)), INVALID_REQUEST);
}

#[test]
fn a_modern_request_makes_a_fresh_connection_modern() {
    let mut s: Session = server();
    let call = line(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
        "_meta": modern_meta(), "name": "add", "arguments": {"a": 1}}}),
    );
    match s.handle_incoming(&call) {
        Incoming::Request(head) => {
            assert_eq!(head.version, Some(ProtocolVersion::V2026_07_28));
            let fields = head.fields.expect("fields");
            assert_eq!(fields.name.as_deref(), Some("add"));
            assert_eq!(fields.arguments.map(RawValue::get), Some(r#"{"a":1}"#));
            assert!(head.meta.client_capabilities.is_some());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.lifecycle().era(), Some(Era::Modern));
    // From now on every request names its revision.
    let bare = line(json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}));
    assert_eq!(refused(s.handle_incoming(&bare)), INVALID_PARAMS);
}

#[test]
fn a_modern_request_names_a_known_revision_and_its_capabilities() {
    let mut s: Session = server();
    let unknown = line(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01",
                  "io.modelcontextprotocol/clientCapabilities": {}}}}),
    );
    assert_eq!(
        refused(s.handle_incoming(&unknown)),
        UNSUPPORTED_PROTOCOL_VERSION
    );
    let no_caps = line(
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
    );
    assert_eq!(refused(s.handle_incoming(&no_caps)), INVALID_PARAMS);
}

/// The error object of a reply.
fn refusal_of(incoming: Incoming<'_>) -> Value {
    match incoming {
        Incoming::Reply(r) => {
            let v: Value = serde_json::from_str(&r.line).expect("a JSON reply");
            v["error"].clone()
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_modern_request_without_meta_says_what_is_missing() {
    // Once modern, every request must carry `_meta`: each missing piece is named.
    let mut s: Session = server();
    let first = line(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta": modern_meta()}}),
    );
    assert!(matches!(s.handle_incoming(&first), Incoming::Request(_)));
    let bare = line(json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}));
    let e = refusal_of(s.handle_incoming(&bare));
    assert_eq!(e["code"], INVALID_PARAMS, "{e}");
    assert!(
        e["message"].as_str().unwrap_or("").contains("params._meta"),
        "{e}"
    );
    let no_version = line(
        json!({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}}),
    );
    let e = refusal_of(s.handle_incoming(&no_version));
    assert!(
        e["message"]
            .as_str()
            .unwrap_or("")
            .contains("protocolVersion"),
        "{e}"
    );
}

#[test]
fn initialize_is_refused_where_no_handshake_can_follow() {
    let init = line(
        json!({"jsonrpc":"2.0","id":7,"method":"initialize","params":{
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name":"t","version":"1"}}}),
    );
    // A connection that carries one request (a 2026-07-28 HTTP POST).
    let mut one: Session = server::<()>().single_request();
    let e = refusal_of(one.handle_incoming(&init));
    assert_eq!(e["code"], UNSUPPORTED_PROTOCOL_VERSION, "{e}");
    assert_eq!(e["data"]["requested"], "2025-11-25", "{e}");
    assert_eq!(e["data"]["supported"], json!(["2026-07-28"]), "{e}");
    // A side that speaks only 2026-07-28, over any transport.
    let mut modern_only: Session = Session::new(
        Role::Server,
        SupportedVersions::new(vec![ProtocolVersion::V2026_07_28]),
        1 << 20,
        16,
    );
    let e = refusal_of(modern_only.handle_incoming(&init));
    assert_eq!(e["code"], UNSUPPORTED_PROTOCOL_VERSION, "{e}");
    assert_eq!(e["data"]["supported"], json!(["2026-07-28"]), "{e}");
    // A side that also speaks the handshake era answers it.
    let mut both: Session = server();
    assert!(matches!(
        both.handle_incoming(&init),
        Incoming::Initialize { .. }
    ));
    // Made as a 2026-07-28 request, it is a method that revision removed, anywhere.
    let modern_init = line(
        json!({"jsonrpc":"2.0","id":8,"method":"initialize","params":{
        "_meta": modern_meta()}}),
    );
    for mut s in [server::<()>(), server::<()>().single_request()] {
        assert_eq!(refused(s.handle_incoming(&modern_init)), METHOD_NOT_FOUND);
    }
}

#[test]
fn a_modern_connection_refuses_what_its_revision_does_not_define() {
    let mut s: Session = server();
    let set_level = line(
        json!({"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{
        "_meta": modern_meta(), "level": "info"}}),
    );
    assert_eq!(refused(s.handle_incoming(&set_level)), METHOD_NOT_FOUND);
}

#[test]
fn discover_on_a_fresh_connection_commits_to_nothing() {
    let mut s: Session = server();
    let discover = line(
        json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{
        "_meta": modern_meta()}}),
    );
    match s.handle_incoming(&discover) {
        Incoming::Request(head) => assert_eq!(head.version, Some(ProtocolVersion::V2026_07_28)),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.lifecycle().state(), State::Uninitialized);
    let init = line(json!({"jsonrpc":"2.0","id":2,"method":"initialize","params":{}}));
    assert!(matches!(
        s.handle_incoming(&init),
        Incoming::Initialize { .. }
    ));
}

#[test]
fn batches_only_in_2025_03_26() {
    let batch = line(json!([
        {"jsonrpc":"2.0","id":1,"method":"ping"},
        {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}},
        {"jsonrpc":"2.0","id":2,"method":"tools/list"},
        7
    ]));
    let mut s = initialized(ProtocolVersion::V2025_11_25);
    assert_eq!(refused(s.handle_incoming(&batch)), INVALID_REQUEST);
    let mut s = initialized(ProtocolVersion::V2025_03_26);
    match s.handle_incoming(&batch) {
        Incoming::Batch { items, related } => {
            assert_eq!(related, Some(RequestId::Number(1)));
            assert_eq!(items.len(), 4);
            assert!(matches!(items[0], Incoming::Reply(_)));
            assert!(matches!(
                &items[1],
                Incoming::Notification(Notice {
                    kind: NoticeKind::Progress(_),
                    ..
                })
            ));
            assert!(matches!(items[2], Incoming::Request(_)));
            assert!(
                matches!(items[3], Incoming::Reply(_)),
                "a non-object element is answered"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn malformed_messages_are_answered_or_ignored_as_json_rpc_says() {
    let mut s: Session = server();
    match s.handle_incoming("{not json") {
        Incoming::Reply(r) => {
            assert_eq!(r.to, None);
            assert!(r.line.contains("-32700"), "{}", r.line);
        }
        other => panic!("{other:?}"),
    }
    // A malformed notification wants no answer.
    let bad = r#"{"jsonrpc":"1.0","method":"notifications/x"}"#;
    assert!(matches!(s.handle_incoming(bad), Incoming::Ignored));
    assert!(s.oversized(10).line.contains("-32600"));
    assert!(s.invalid_utf8().line.contains("-32700"));
}

#[test]
fn notifications_are_classified_and_bad_params_go_to_the_handler() {
    let mut s = initialized(ProtocolVersion::V2025_11_25);
    let cancel = line(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId": 5, "reason": "no"}}));
    match s.handle_incoming(&cancel) {
        Incoming::Notification(Notice {
            kind: NoticeKind::Cancelled { id, reason },
            ..
        }) => {
            assert_eq!(id, RequestId::Number(5));
            assert_eq!(reason.as_deref(), Some("no"));
        }
        other => panic!("{other:?}"),
    }
    let bad = line(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"x":1}}));
    assert!(matches!(
        s.handle_incoming(&bad),
        Incoming::Notification(Notice {
            kind: NoticeKind::Other,
            ..
        })
    ));
}

#[test]
fn fields_of_another_shape_keep_the_meta() {
    let mut s: Session = server();
    let odd = line(json!({"jsonrpc":"2.0","id":1,"method":"x/custom","params":{
        "_meta": modern_meta(), "name": 5}}));
    match s.handle_incoming(&odd) {
        Incoming::Request(head) => {
            assert!(head.fields.is_err());
            assert_eq!(head.version, Some(ProtocolVersion::V2026_07_28));
        }
        // 2026-07-28 defines no `x/custom`: refused, but for the method, not the meta.
        Incoming::Reply(r) => assert!(r.line.contains("-32601"), "{}", r.line),
        other => panic!("{other:?}"),
    }
    let mut s = initialized(ProtocolVersion::V2025_11_25);
    let array = line(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":[1, 2]}));
    match s.handle_incoming(&array) {
        Incoming::Request(head) => assert!(head.fields.is_err()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn input_responses_present_as_null_are_refused() {
    let mut s = initialized(ProtocolVersion::V2025_11_25);
    let call = line(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
        "name": "t", "inputResponses": null}}),
    );
    let Incoming::Request(head) = s.handle_incoming(&call) else {
        panic!("a request")
    };
    let fields = head.fields.expect("fields").to_owned_fields();
    assert!(fields.input_responses.is_some());
    assert!(fields.check_input_responses().is_err());
}

/// Messages with the shapes that matter, and arbitrary text.
fn message_text() -> impl Strategy<Value = String> {
    let method = prop_oneof![
        Just("initialize"),
        Just("ping"),
        Just("tools/call"),
        Just("tools/list"),
        Just("server/discover"),
        Just("notifications/initialized"),
        Just("notifications/cancelled"),
        Just("x/y"),
    ];
    let id = prop_oneof![
        Just(json!(1)),
        Just(json!("a")),
        Just(Value::Null),
        Just(json!({})),
        Just(json!(1.5))
    ];
    let meta = prop_oneof![
        Just(Value::Null),
        Just(modern_meta()),
        Just(json!({"io.modelcontextprotocol/protocolVersion": 7})),
        Just(json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"})),
        Just(json!({"progressToken": [1]})),
    ];
    let structured = (method, id, meta, any::<bool>(), any::<u8>()).prop_map(
        |(method, id, meta, with_id, shape)| {
            let mut m = json!({"jsonrpc": "2.0", "method": method});
            if with_id {
                m["id"] = id;
            }
            m["params"] = match shape % 4 {
                0 => json!({"_meta": meta, "name": "t", "arguments": {}}),
                1 => json!([meta]),
                2 => json!({"name": meta, "inputResponses": null}),
                _ => json!({"_meta": meta}),
            };
            if shape % 7 == 0 {
                m["result"] = json!({});
            }
            m.to_string()
        },
    );
    prop_oneof![structured, any::<String>(), "[\\[\\]{}\",:0-9a-z ]{0,40}"]
}

proptest! {
    /// Whatever arrives, the session answers the way the envelope decoder classifies it,
    /// and never panics; every reply it writes is a JSON-RPC error or result.
    #[test]
    fn incoming_is_classified_as_the_envelope_says(texts in prop::collection::vec(message_text(), 1..6)) {
        let mut s: Session = server();
        for text in &texts {
            let expected = if jsonrpc::is_batch(text) { None } else { Some(Message::parse(text)) };
            let incoming = s.handle_incoming(text);
            if let Incoming::Reply(r) = &incoming {
                let v: Value = serde_json::from_str(&r.line).expect("a reply is JSON");
                prop_assert_eq!(&v["jsonrpc"], "2.0");
                prop_assert!(v.get("result").is_some() != v.get("error").is_some());
            }
            match (expected, &incoming) {
                (None, _) => {}
                (Some(Err(e)), Incoming::Reply(r)) => {
                    prop_assert!(e.respond);
                    prop_assert_eq!(&r.line, &jsonrpc::encode_error(e.id.as_ref(), &e.error));
                }
                (Some(Err(e)), Incoming::Ignored) => prop_assert!(!e.respond),
                (Some(Ok(Message::Request(_))), Incoming::Request(_) | Incoming::Reply(_) | Incoming::Initialize { .. }) => {}
                (Some(Ok(Message::Notification(_))), Incoming::Notification(_)) => {}
                (Some(Ok(Message::Response(_))), Incoming::Response { .. }) => {}
                (Some(Ok(Message::Error(_))), Incoming::Error(_)) => {}
                (expected, got) => prop_assert!(false, "{:?} became {:?}", expected, got),
            }
        }
    }
}

#[test]
fn deadlines_are_the_sessions_to_keep_and_the_shells_to_sleep_on() {
    let now = Instant::now();
    let mut s: Session<&str> = server();
    assert_eq!(s.poll_timeout(), None);
    let ms = std::time::Duration::from_millis;
    let call = s
        .pending_mut()
        .insert("tools/call", Some(now + ms(50)), false, "call")
        .unwrap();
    let init = s
        .pending_mut()
        .insert("initialize", Some(now + ms(10)), false, "init")
        .unwrap();
    let _ = s
        .pending_mut()
        .insert("tools/list", None, false, "list")
        .unwrap();
    assert_eq!(s.poll_timeout(), Some(now + ms(10)));
    assert!(
        s.handle_timeout(now + ms(5)).is_empty(),
        "nothing is due yet"
    );
    let due = s.handle_timeout(now + ms(10));
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].id, init);
    assert!(due[0].cancel.is_none(), "initialize is never cancelled");
    assert_eq!(s.poll_timeout(), Some(now + ms(50)));
    let due = s.handle_timeout(now + ms(60));
    assert_eq!(due[0].entry.data, "call");
    assert_eq!(
        due[0].cancel.as_ref().and_then(|c| c.request_id.clone()),
        Some(call)
    );
    assert_eq!(
        s.poll_timeout(),
        None,
        "a request without a deadline never expires"
    );
    assert_eq!(s.pending().len(), 1);
}
