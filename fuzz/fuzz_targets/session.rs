//! Fuzz the sans-IO session alone: no runtime, no transport, no handler.
//!
//! Input: the first byte picks the role (even: server, odd: client) and how far the
//! connection is (`byte / 2 % 3`: fresh; past a 2025-11-25 handshake; past a 2025-03-26
//! handshake, where batches are allowed); the rest is split on newlines into messages.
//!
//! Asserted: nothing panics; every reply the session writes is JSON, a JSON-RPC 2.0 answer
//! (a result or an error, never both); a single message is classified as
//! `Message::parse` classifies it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moat_protocol::jsonrpc::{self, Message};
use moat_protocol::lifecycle::Role;
use moat_protocol::session::{Incoming, Reply, Session};
use moat_protocol::version::SupportedVersions;
use moat_protocol::ProtocolVersion;

fn check_reply(reply: &Reply) {
    let v: serde_json::Value = serde_json::from_str(&reply.line).expect("a reply is JSON");
    assert_eq!(v["jsonrpc"], "2.0");
    assert!(v.get("result").is_some() != v.get("error").is_some());
}

fn check(incoming: &Incoming<'_>) {
    match incoming {
        Incoming::Reply(r) => check_reply(r),
        Incoming::Batch { items, .. } => items.iter().for_each(check),
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let role = if first % 2 == 0 { Role::Server } else { Role::Client };
    let mut session: Session = Session::new(role, SupportedVersions::default(), 1 << 20, 64);
    let start = match first / 2 % 3 {
        0 => None,
        1 => Some(ProtocolVersion::V2025_11_25),
        _ => Some(ProtocolVersion::V2025_03_26),
    };
    if let Some(v) = start {
        match role {
            Role::Server => {
                session.initialize_answered(v);
                let _ = session.handle_incoming(
                    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                );
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
        let incoming = session.handle_incoming(line);
        check(&incoming);
        if jsonrpc::is_batch(line) {
            continue;
        }
        match (Message::parse(line), &incoming) {
            (Err(e), Incoming::Reply(_)) => assert!(e.respond),
            (Err(e), Incoming::Ignored) => assert!(!e.respond),
            (Err(e), other) => panic!("{e:?} became {other:?}"),
            (Ok(Message::Response(_)), i) => assert!(matches!(i, Incoming::Response { .. })),
            (Ok(Message::Error(_)), i) => assert!(matches!(i, Incoming::Error(_))),
            (Ok(Message::Notification(_)), i) => assert!(matches!(i, Incoming::Notification(_))),
            (Ok(_), _) => {}
        }
    }
});
