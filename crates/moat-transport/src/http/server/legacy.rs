//! The HTTP+SSE transport of 2024-11-05: a GET opens the session's one SSE stream, whose
//! first event names the URL to POST messages to; every answer comes back on that stream.
//! The session ends when the stream does.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};

use moat_protocol::error::{INTERNAL_ERROR, SESSION_NOT_FOUND, TRANSPORT_ERROR};

use super::directory::{SessionRecord, SharedDirectory};
use super::session::Sessions;
use super::stream::{Opening, SseBody};
use super::{Body, Shared, accepts, empty, error, parse, read_body, sse_response};

/// GET on the SSE path: open a session and its stream.
pub(super) async fn open(
    shared: &Shared,
    req: &Request<Incoming>,
    message_path: &str,
) -> Response<Body> {
    if !accepts(req).sse {
        return error(
            StatusCode::NOT_ACCEPTABLE,
            TRANSPORT_ERROR,
            "Not acceptable: this endpoint opens an SSE stream; accept text/event-stream",
            None,
        );
    }
    if shared.sessions.len() >= shared.options.max_sessions {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            TRANSPORT_ERROR,
            "Service unavailable: too many sessions; retry later",
            None,
        );
    }
    let caller = super::caller_of(req.extensions());
    let (session, conn) =
        shared
            .sessions
            .open(shared.bounds, shared.options.queue, caller.as_deref(), true);
    let Some(stream) = session.standalone(false) else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            INTERNAL_ERROR,
            "could not open the stream",
            None,
        );
    };
    (shared.on_connection)(conn);
    // Other replicas forward this session's POSTs here.
    if let Some(replication) = &shared.replication {
        let mut record = SessionRecord::new(&session.id, replication.replica.clone());
        record.legacy = true;
        record.user = super::session::user_of(caller.as_deref());
        super::remote::register(shared, record).await;
    }
    let opening = Opening {
        keepalive: Some(shared.options.keepalive),
        endpoint: Some(format!("{message_path}?sessionId={}", session.id)),
        ..Opening::default()
    };
    let body = EndsSession {
        body: stream.body(0, opening),
        sessions: Arc::downgrade(&shared.sessions),
        id: session.id.clone(),
        directory: shared.replication.as_ref().map(|r| r.directory.clone()),
    };
    sse_response(body)
}

/// Any other method on a legacy path: 405 with the methods it takes. A client in the
/// spec's auto-detection POSTs its first request to the URL it was given; for the SSE path
/// this is the answer that sends it on to the GET. The body is plain text, not a JSON-RPC
/// error, so that no client mistakes it for a Streamable HTTP server refusing the request.
pub(super) fn not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
    *r.body_mut() = super::full(format!(
        "Method not allowed: this legacy HTTP+SSE endpoint takes {allow}"
    ));
    let h = r.headers_mut();
    h.insert(header::ALLOW, HeaderValue::from_static(allow));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// POST on the message path: hand the message to the session named in the query.
pub(super) async fn post(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let id = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("sessionId="))
        .map(str::to_owned);
    let Some(id) = id else {
        return error(
            StatusCode::BAD_REQUEST,
            TRANSPORT_ERROR,
            "Bad request: the sessionId query parameter is required",
            None,
        );
    };
    let (head, body) = req.into_parts();
    let caller = super::caller_of(&head.extensions);
    let text = match read_body(shared, &head.headers, body).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    if let Err(r) = parse(&text) {
        return r;
    }
    let session = match shared.sessions.get(&id, caller.as_deref()) {
        Some(s) => s,
        None => {
            // Held by another replica: forwarded there (its answers go out on the SSE
            // stream that replica serves).
            let target = head.uri.path_and_query().map_or("", |p| p.as_str());
            let away = super::Away {
                method: http::Method::POST,
                target,
                headers: &head.headers,
                body: &text,
                awaited: &[],
            };
            match super::elsewhere(shared, &id, caller.as_ref(), away).await {
                super::Elsewhere::Here(s) => s,
                super::Elsewhere::Answered(r) => return r,
            }
        }
    };
    let origin = super::session::Origin::of(caller, &head.headers);
    match session.deliver(text, origin).await {
        Ok(()) => {
            let mut r = empty(StatusCode::ACCEPTED);
            *r.body_mut() = super::full(Bytes::from_static(b"Accepted"));
            r
        }
        Err(_) => error(
            StatusCode::NOT_FOUND,
            SESSION_NOT_FOUND,
            "Session not found",
            None,
        ),
    }
}

/// The stream's body; when the client goes away, so does the session.
struct EndsSession {
    body: SseBody,
    sessions: Weak<Sessions>,
    id: String,
    /// Where the session is recorded, for the other replicas.
    directory: Option<SharedDirectory>,
}

impl HttpBody for EndsSession {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for EndsSession {
    fn drop(&mut self) {
        if let Some(sessions) = self.sessions.upgrade() {
            sessions.close(&self.id);
        }
        if let (Some(directory), Ok(runtime)) =
            (self.directory.take(), tokio::runtime::Handle::try_current())
        {
            let id = std::mem::take(&mut self.id);
            runtime.spawn(async move {
                if let Err(e) = directory.remove(&id, None).await {
                    tracing::debug!(session = %id, "removing a legacy session's record failed: {e}");
                }
            });
        }
    }
}
