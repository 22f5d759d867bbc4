//! Forwarding a request to the replica that owns its session, and its answer back.
//!
//! The request goes on as the client sent it (its `Host`, its token: the owner checks both
//! again), marked [`FORWARDED`] so it is never sent on a second time. An SSE answer streams
//! through as it comes. If the owner dies while answering, the requests it had not
//! answered are answered here with an error, so the client learns they failed instead of
//! waiting for answers that will never come.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use moat_protocol::RequestId;
use moat_protocol::error::{ErrorObject, INTERNAL_ERROR};
use moat_protocol::jsonrpc::{self, Message};

use super::directory::Replica;
use super::{Body, json_response};

/// Marks a request one replica forwarded to another.
pub const FORWARDED: &str = "moat-forwarded";

/// How long reaching another replica may take before it counts as gone.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The client replicas forward with. Each request on a connection of its own: a kept-alive
/// connection that a draining replica closes as the request goes out fails the way a
/// replica dying mid-request does, and the two could not be told apart (the request may
/// or may not have run); a new connection to a replica that drains is refused, so the
/// session is taken over cleanly.
pub(super) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .http1_only()
        .connect_timeout(CONNECT_TIMEOUT)
        .pool_max_idle_per_host(0)
        .build()
        .unwrap_or_default()
}

/// A request to forward.
pub(super) struct Outbound<'a> {
    pub method: Method,
    /// Path and query, as the client sent them.
    pub target: &'a str,
    pub headers: &'a HeaderMap,
    pub body: Bytes,
    /// The requests in the body, answered with an error if the owner dies first.
    pub awaited: Vec<RequestId>,
    /// Turns true when this replica drains: a relayed stream that awaits no answer (a GET)
    /// ends then, as this replica's own such streams do, and its client reconnects
    /// elsewhere.
    pub drain: Option<tokio::sync::watch::Receiver<bool>>,
}

/// What forwarding came to.
pub(super) enum Forwarded {
    Answer(Response<Body>),
    /// The owner could not be reached at all: the request never got there.
    Unreachable,
}

/// Headers that belong to one connection, not to the request.
fn hop_by_hop(name: &header::HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "content-length"
    )
}

pub(super) async fn forward(
    client: &reqwest::Client,
    me: &Replica,
    owner: &Replica,
    out: Outbound<'_>,
) -> Forwarded {
    let url = format!("{}{}", owner.url, out.target);
    let mut headers = HeaderMap::new();
    for (name, value) in out.headers {
        if !hop_by_hop(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Ok(v) = HeaderValue::from_str(&me.id) {
        headers.insert(FORWARDED, v);
    }
    let sent = client
        .request(out.method, &url)
        .headers(headers)
        .body(out.body)
        .send()
        .await;
    let upstream = match sent {
        Ok(r) => r,
        Err(e) if e.is_connect() || e.is_timeout() => {
            tracing::debug!(owner = %owner.url, error = %e, "the session's replica is unreachable");
            return Forwarded::Unreachable;
        }
        Err(e) => {
            tracing::warn!(owner = %owner.url, error = %e, "the session's replica failed mid-request");
            return Forwarded::Answer(failed(&out.awaited));
        }
    };
    let status = upstream.status();
    let mut response = Response::builder().status(status);
    let sse = upstream
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if let Some(h) = response.headers_mut() {
        for (name, value) in upstream.headers() {
            if !hop_by_hop(name) {
                h.append(name.clone(), value.clone());
            }
        }
    }
    let body: Body = if sse {
        let drain = out.drain.clone().filter(|_| out.awaited.is_empty());
        relay_sse(upstream.bytes_stream(), out.awaited.clone(), drain)
    } else {
        match upstream.bytes().await {
            Ok(bytes) => super::full(bytes),
            Err(e) => {
                tracing::warn!(owner = %owner.url, error = %e, "the session's replica failed mid-answer");
                return Forwarded::Answer(failed(&out.awaited));
            }
        }
    };
    match response.body(body) {
        Ok(r) => Forwarded::Answer(r),
        Err(_) => Forwarded::Answer(failed(&out.awaited)),
    }
}

/// The error a request gets when the replica serving it died before answering.
fn died(id: &RequestId) -> String {
    let err = ErrorObject::new(
        INTERNAL_ERROR,
        "the server replica handling this request stopped before answering; the request may \
         or may not have taken effect",
    );
    jsonrpc::encode_error(Some(id), &err)
}

/// An answer for requests whose replica died before its answer began: each request's own
/// JSON-RPC error, with 200 as for any answer (a client fails that request, not its
/// session); 502 when the body held no request to answer.
fn failed(awaited: &[RequestId]) -> Response<Body> {
    match awaited {
        [] => json_response(
            StatusCode::BAD_GATEWAY,
            jsonrpc::encode_error(
                None,
                &ErrorObject::new(
                    INTERNAL_ERROR,
                    "the server replica handling this session stopped before answering",
                ),
            ),
        ),
        [one] => json_response(StatusCode::OK, died(one)),
        many => json_response(
            StatusCode::OK,
            format!("[{}]", many.iter().map(died).collect::<Vec<_>>().join(",")),
        ),
    }
}

/// Pass an SSE stream through, noting which awaited requests it answers; if it breaks,
/// answer the rest with errors and end.
fn relay_sse(
    upstream: impl futures_util::Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    awaited: Vec<RequestId>,
    drain: Option<tokio::sync::watch::Receiver<bool>>,
) -> Body {
    struct Relay<S> {
        upstream: S,
        awaited: Vec<RequestId>,
        /// Text of the event being received.
        partial: String,
        done: bool,
        drain: Option<tokio::sync::watch::Receiver<bool>>,
    }
    let relay = Relay {
        upstream: Box::pin(upstream),
        awaited,
        partial: String::new(),
        done: false,
        drain,
    };
    let frames = futures_util::stream::unfold(relay, |mut r| async move {
        if r.done {
            return None;
        }
        let next = match r.drain.as_mut() {
            Some(drain) => tokio::select! {
                next = r.upstream.next() => next,
                _ = drain.wait_for(|draining| *draining) => None,
            },
            None => r.upstream.next().await,
        };
        match next {
            Some(Ok(chunk)) => {
                note_answers(&mut r.partial, &chunk, &mut r.awaited);
                Some((Ok::<_, Infallible>(Frame::data(chunk)), r))
            }
            None => None,
            Some(Err(e)) => {
                r.done = true;
                if r.awaited.is_empty() {
                    return None;
                }
                tracing::warn!(error = %e, "the session's replica died mid-stream; failing its calls");
                let events: String = r
                    .awaited
                    .iter()
                    .map(|id| format!("\nevent: message\ndata: {}\n\n", died(id)))
                    .collect();
                Some((Ok(Frame::data(Bytes::from(events))), r))
            }
        }
    });
    StreamBody::new(frames).boxed_unsync()
}

/// Read the complete events in `partial` + `chunk`, striking the requests they answer off
/// `awaited`; keep the incomplete rest.
fn note_answers(partial: &mut String, chunk: &[u8], awaited: &mut Vec<RequestId>) {
    if awaited.is_empty() {
        return;
    }
    partial.push_str(&String::from_utf8_lossy(chunk));
    let normalized = partial.replace("\r\n", "\n");
    let Some(end) = normalized.rfind("\n\n") else {
        *partial = normalized;
        return;
    };
    for event in normalized[..end].split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            continue;
        }
        let text = data.join("\n");
        let answered: Vec<RequestId> = if jsonrpc::is_batch(&text) {
            Message::parse_batch(&text)
                .map(|items| {
                    items
                        .into_iter()
                        .filter_map(|m| answer_id(m.ok()))
                        .collect()
                })
                .unwrap_or_default()
        } else {
            answer_id(Message::parse(&text).ok()).into_iter().collect()
        };
        awaited.retain(|id| !answered.contains(id));
    }
    *partial = normalized[end + 2..].to_owned();
}

fn answer_id(message: Option<Message>) -> Option<RequestId> {
    match message? {
        Message::Response(r) => Some(r.id),
        Message::Error(e) => e.id,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_struck_off_across_chunks() {
        let mut awaited = vec![RequestId::Number(1), RequestId::Number(2)];
        let mut partial = String::new();
        note_answers(
            &mut partial,
            b"id: a_1.0\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\nid: a_1.1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"res",
            &mut awaited,
        );
        assert_eq!(awaited.len(), 2);
        note_answers(&mut partial, b"ult\":{}}\n\n", &mut awaited);
        assert_eq!(awaited, vec![RequestId::Number(2)]);
        note_answers(
            &mut partial,
            b"data: {\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":1,\"message\":\"x\"}}\r\n\r\n",
            &mut awaited,
        );
        assert!(awaited.is_empty());
    }
}
