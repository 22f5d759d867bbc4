// The checks of the `session` fuzz target, kept in one place: the fuzz target runs them on
// what libFuzzer makes, and `crates/moat-protocol/tests/fuzz_seeds.rs` runs them on every
// committed seed under `fuzz/seeds/session/` as a plain `cargo test`. Both `include!` this
// file, so it holds items only (no inner attributes or `//!` docs).
//
// Input: the first byte sets up the session, the rest is split on `\n` into messages.
// - `byte % 2`: the role (0: server, 1: client);
// - `byte / 2 % 3`: how far the connection is (0: fresh; 1: past a 2025-11-25 handshake;
//   2: past a 2025-03-26 handshake, where batches are allowed);
// - `byte / 6 % 2`: 1 makes it a single-request connection (a 2026-07-28 HTTP POST, where
//   `initialize` is refused).
// The ASCII digits `0`..`5` are the six role/stage pairs on a long-lived connection
// (`0` fresh server, `1` fresh client, `2`/`3` past 2025-11-25, `4`/`5` past 2025-03-26);
// `6`..`9` are single-request ones. Like the shell, the server answers an `initialize` it
// is handed in the revision the supported set negotiates, so a handshake inside the input
// moves the lifecycle on.
//
// Asserted (a panic is a finding):
// - every reply is JSON, JSON-RPC 2.0, a result or an error (never both), with an integer
//   error code, and carries the id it is routed to (`null` when it answers no readable id);
// - a single message is classified as `Message::parse` classifies it: an envelope error is
//   answered (with exactly `encode_error` of it) when it asks for an answer and ignored
//   otherwise; a request is run, answered at once or is `initialize`; a notification is
//   acted on; a response or error answer is delivered, under the id it carries;
// - a batch is refused as a whole (one reply, `id: null`) where the revision has no
//   batches or `Message::parse_batch` refuses it, and otherwise has one item per element,
//   each classified as that element alone would be.

use moat_protocol::ProtocolVersion;
use moat_protocol::jsonrpc::{self, EnvelopeError, Message};
use moat_protocol::lifecycle::Role;
use moat_protocol::session::{Incoming, Reply, Session};
use moat_protocol::types::InitializeRequestParams;
use moat_protocol::version::SupportedVersions;

/// Drives a fresh session with one fuzz input; panics where the session breaks a rule.
pub fn check_session_input(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let role = if first % 2 == 0 {
        Role::Server
    } else {
        Role::Client
    };
    let mut session: Session = Session::new(role, SupportedVersions::default(), 1 << 20, 64);
    if first / 6 % 2 == 1 {
        session = session.single_request();
    }
    let start = match first / 2 % 3 {
        0 => None,
        1 => Some(ProtocolVersion::V2025_11_25),
        _ => Some(ProtocolVersion::V2025_03_26),
    };
    if let Some(v) = start {
        match role {
            Role::Server => {
                session.initialize_answered(v);
                let _ = session
                    .handle_incoming(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
            }
            _ => {
                let _ = session.lifecycle_mut().initialize_sent();
                let _ = session.lifecycle_mut().handshake_done(v);
            }
        }
    }
    let Ok(text) = std::str::from_utf8(rest) else {
        check_reply(&session.invalid_utf8());
        return;
    };
    for line in text.split('\n') {
        let batches = session
            .version()
            .is_some_and(ProtocolVersion::supports_batches);
        let incoming = session.handle_incoming(line);
        if jsonrpc::is_batch(line) {
            check_batch(line, batches, &incoming);
        } else {
            check_classified(Message::parse(line), &incoming);
        }
        answer_initialize(&mut session, &incoming);
    }
}

/// What the shell does when a server is handed `initialize`: the handler answers in the
/// negotiated revision and the session records it.
fn answer_initialize(session: &mut Session, incoming: &Incoming<'_>) {
    match incoming {
        Incoming::Initialize {
            params: Some(params),
            ..
        } => {
            let Ok(p) = serde_json::from_str::<InitializeRequestParams>(params.get()) else {
                return;
            };
            if let Some(v) = session.versions().negotiate_handshake(&p.protocol_version) {
                session.initialize_answered(v);
            }
        }
        Incoming::Batch { items, .. } => {
            for item in items {
                answer_initialize(session, item);
            }
        }
        _ => {}
    }
}

fn check_reply(reply: &Reply) {
    let v: serde_json::Value = serde_json::from_str(&reply.line).expect("a reply is JSON");
    assert_eq!(v["jsonrpc"], "2.0", "{}", reply.line);
    assert!(
        v.get("result").is_some() != v.get("error").is_some(),
        "a result or an error: {}",
        reply.line
    );
    if let Some(error) = v.get("error") {
        assert!(error["code"].is_i64(), "an integer code: {}", reply.line);
        assert!(error["message"].is_string(), "a message: {}", reply.line);
    }
    let routed = match &reply.to {
        Some(id) => serde_json::to_value(id).expect("an id serializes"),
        None => serde_json::Value::Null,
    };
    assert_eq!(
        v.get("id"),
        Some(&routed),
        "routed to its id: {}",
        reply.line
    );
}

fn check_refusal(e: &EnvelopeError, incoming: &Incoming<'_>) {
    match incoming {
        Incoming::Reply(r) => {
            assert!(e.respond, "answered, though it wants no answer: {e:?}");
            assert_eq!(r.line, jsonrpc::encode_error(e.id.as_ref(), &e.error));
            check_reply(r);
        }
        Incoming::Ignored => assert!(!e.respond, "not answered, though it wants one: {e:?}"),
        other => panic!("{e:?} became {other:?}"),
    }
}

fn check_classified(expected: Result<Message<'_>, EnvelopeError>, incoming: &Incoming<'_>) {
    match (expected, incoming) {
        (Err(e), i) => check_refusal(&e, i),
        (Ok(Message::Request(_)), Incoming::Reply(r)) => check_reply(r),
        (Ok(Message::Request(q)), Incoming::Request(head)) => assert_eq!(head.id, q.id),
        (Ok(Message::Request(q)), Incoming::Initialize { id, .. }) => {
            assert_eq!(q.method, "initialize");
            assert_eq!(*id, q.id);
        }
        (Ok(Message::Notification(n)), Incoming::Notification(notice)) => {
            assert_eq!(notice.method, n.method);
        }
        (Ok(Message::Response(r)), Incoming::Response { id, .. }) => assert_eq!(*id, r.id),
        (Ok(Message::Error(e)), Incoming::Error(got)) => assert_eq!(got.id, e.id),
        (expected, got) => panic!("{expected:?} became {got:?}"),
    }
}

fn check_batch(line: &str, batches: bool, incoming: &Incoming<'_>) {
    let elements = Message::parse_batch(line);
    match (elements, incoming) {
        (_, Incoming::Reply(r)) if !batches => {
            check_reply(r);
            assert!(r.to.is_none(), "a refused batch answers no id: {}", r.line);
        }
        (Err(e), i) => check_refusal(&e, i),
        (Ok(elements), Incoming::Batch { items, .. }) => {
            assert!(batches, "a batch in a revision without batches: {line}");
            assert_eq!(items.len(), elements.len(), "one item per element: {line}");
            for (element, item) in elements.into_iter().zip(items) {
                check_classified(element, item);
            }
        }
        (expected, got) => panic!("{expected:?} became {got:?}"),
    }
}
