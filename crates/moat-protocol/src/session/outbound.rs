//! What an outgoing message means to the transport that carries it, read once, here.
//!
//! A transport routes by facts — "this request opens a session", "this notification ends
//! the handshake", "this one cancels request 7", "this request's answer lists tools" — and
//! never by method names: which methods do what is this crate's knowledge. Streamable HTTP
//! uses the facts to pick headers (`Mcp-Method`, `Mcp-Name`, mirrored params), to keep a
//! handshake-era session, and to turn a cancellation into a closed stream.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::id::RequestId;
use crate::jsonrpc::{self, Message};
use crate::session::RequestHead;
use crate::types::methods;

/// What an outgoing message is.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Outbound {
    /// A request, or a batch holding requests.
    Requests(OutboundRequests),
    /// A notification.
    Notification(OutboundNotice),
    /// Answers to the peer's requests, or text that is no message at all.
    Other,
}

/// The routing facts of a request (or of a batch's requests).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct OutboundRequests {
    /// The ids of the requests, in order.
    pub ids: Vec<RequestId>,
    /// The (first) request's method: for messages a person reads, and for the header that
    /// mirrors it.
    pub method: String,
    /// The 2026-07-28 revision the request's `_meta` names (a single request only).
    pub modern: Option<String>,
    /// The target name a 2026-07-28 transport mirrors into a header (`Mcp-Name`).
    pub name: Option<String>,
    /// The tool whose arguments a transport may mirror, with the raw arguments.
    pub tool: Option<(String, Option<Box<RawValue>>)>,
    /// The request opens a session (`initialize`): whatever session came before is over.
    pub opens_session: bool,
    /// The request's result lists tools (whose annotations a transport may act on).
    pub lists_tools: bool,
}

/// The routing facts of a notification.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OutboundNotice {
    /// Its method, for messages a person reads.
    pub method: String,
    /// It completes the handshake (`notifications/initialized`).
    pub ends_handshake: bool,
    /// The request it cancels (`notifications/cancelled`).
    pub cancels: Option<RequestId>,
}

/// Read what an outgoing message means. Unreadable text is [`Outbound::Other`]: the peer
/// on the other side will say what is wrong with it.
pub fn outbound(text: &str) -> Outbound {
    if jsonrpc::is_batch(text) {
        let Ok(items) = Message::parse_batch(text) else {
            return Outbound::Other;
        };
        let mut requests = OutboundRequests::default();
        for item in items.iter().flatten() {
            if let Message::Request(r) = item {
                requests.ids.push(r.id.clone());
                if requests.method.is_empty() {
                    requests.method = r.method.to_string();
                }
            }
        }
        // Headers describe a single request; a batch (2025-03-26 only) gets none.
        return if requests.ids.is_empty() {
            Outbound::Other
        } else {
            Outbound::Requests(requests)
        };
    }
    match Message::parse(text) {
        Ok(Message::Request(r)) => {
            let head = RequestHead::read(r.id, r.method, r.params);
            Outbound::Requests(OutboundRequests {
                ids: vec![head.id.clone()],
                method: head.method.to_string(),
                modern: head.meta.protocol_version.as_deref().map(str::to_owned),
                name: head.mirrored_name().map(str::to_owned),
                tool: head.mirrored_tool().map(|tool| {
                    let args = head.fields.as_ref().ok().and_then(|f| f.arguments);
                    (tool.to_owned(), args.map(ToOwned::to_owned))
                }),
                opens_session: head.is_initialize(),
                lists_tools: head.method == methods::TOOLS_LIST,
            })
        }
        Ok(Message::Notification(n)) => {
            #[derive(Deserialize)]
            struct Cancelled {
                #[serde(default, rename = "requestId")]
                request_id: Option<RequestId>,
            }
            let cancels = if n.method == methods::NOTIFICATIONS_CANCELLED {
                n.params
                    .and_then(|p| serde_json::from_str::<Cancelled>(p.get()).ok())
                    .and_then(|c| c.request_id)
            } else {
                None
            };
            Outbound::Notification(OutboundNotice {
                ends_handshake: n.method == methods::NOTIFICATIONS_INITIALIZED,
                cancels,
                method: n.method.into_owned(),
            })
        }
        _ => Outbound::Other,
    }
}

/// The revision a session-opening request's answer settled on (`result.protocolVersion`
/// of an `initialize` result), if `answer` is such a result.
pub fn negotiated_version(answer: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Answer {
        result: Settled,
    }
    #[derive(Deserialize)]
    struct Settled {
        #[serde(rename = "protocolVersion")]
        protocol_version: String,
    }
    serde_json::from_str::<Answer>(answer)
        .ok()
        .map(|a| a.result.protocol_version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requests(text: &str) -> OutboundRequests {
        match outbound(text) {
            Outbound::Requests(r) => r,
            other => panic!("not requests: {other:?}"),
        }
    }

    fn notice(text: &str) -> OutboundNotice {
        match outbound(text) {
            Outbound::Notification(n) => n,
            other => panic!("not a notification: {other:?}"),
        }
    }

    #[test]
    fn initialize_opens_a_session() {
        let r = requests(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
        );
        assert!(r.opens_session);
        assert!(!r.lists_tools);
        assert_eq!(r.modern, None);
        assert_eq!(r.ids, vec![RequestId::from(1)]);
    }

    #[test]
    fn a_modern_tool_call_names_its_tool_and_revision() {
        let r = requests(
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"add","arguments":{"a":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        );
        assert_eq!(r.modern.as_deref(), Some("2026-07-28"));
        assert_eq!(r.name.as_deref(), Some("add"));
        let (tool, args) = r.tool.expect("tool");
        assert_eq!(tool, "add");
        assert_eq!(args.expect("arguments").get(), r#"{"a":1}"#);
        assert!(!r.opens_session);
    }

    #[test]
    fn tools_list_says_its_answer_lists_tools() {
        assert!(requests(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).lists_tools);
    }

    #[test]
    fn a_batch_has_every_id_and_no_headers() {
        let r = requests(
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress","params":{}},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#,
        );
        assert_eq!(r.ids, vec![RequestId::from(1), RequestId::from(2)]);
        assert_eq!(r.method, "ping");
        assert!(r.name.is_none() && r.tool.is_none() && !r.lists_tools);
    }

    #[test]
    fn notifications_say_what_they_end_or_cancel() {
        let n = notice(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(n.ends_handshake);
        assert_eq!(n.cancels, None);
        let n = notice(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"x"}}"#,
        );
        assert_eq!(n.cancels, Some(RequestId::from(7)));
        assert!(!n.ends_handshake);
        // A cancellation without an id cancels nothing.
        let n = notice(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#);
        assert_eq!(n.cancels, None);
    }

    #[test]
    fn answers_and_garbage_are_other() {
        assert!(matches!(
            outbound(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Outbound::Other
        ));
        assert!(matches!(outbound("not json"), Outbound::Other));
        assert!(matches!(outbound("[]"), Outbound::Other));
        assert!(matches!(
            outbound(r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#),
            Outbound::Other
        ));
    }

    #[test]
    fn the_negotiated_version_comes_from_the_result() {
        assert_eq!(
            negotiated_version(
                r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}"#
            )
            .as_deref(),
            Some("2025-06-18")
        );
        assert_eq!(
            negotiated_version(r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}"#),
            None
        );
    }
}
