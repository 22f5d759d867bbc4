//! The HTTP+SSE transport of 2024-11-05: one long GET whose first event, `endpoint`, names
//! where to POST; every `message` event carries one message from the server.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderValue, Method};
use moat_protocol::ErrorObject;
use moat_protocol::session::{self, Outbound};
use url::Url;

use super::auth::{self, SendError};
use super::body::{self, Events, StreamError};
use super::errors::{challenge, describe_status, http_failure};
use super::{ClientError, Shared, content_type, is_event_stream};

/// How long the GET and its `endpoint` event may take when no request timeout is set.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// How long the GET and its `endpoint` event may take: the request timeout, and no more
/// than `cap` when one is given.
pub(super) fn endpoint_wait(shared: &Shared, cap: Option<Duration>) -> Duration {
    let wait = shared.options.request_timeout.unwrap_or(DEFAULT_WAIT);
    cap.map_or(wait, |cap| wait.min(cap))
}

/// Open the event stream, wait (`wait` at most) for the `endpoint` event, and start
/// delivering `message` events. Returns the endpoint to POST to.
pub(super) async fn open(shared: &Arc<Shared>, wait: Duration) -> Result<Url, ClientError> {
    let url = shared.url.to_string();
    let mut headers = shared.headers();
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    let sent = auth::send(shared, Method::GET, &shared.url, headers, None, Some(wait));
    let resp = match sent.await {
        Ok(resp) => resp,
        Err(SendError::Auth(detail)) => return Err(ClientError::Authorization { url, detail }),
        Err(SendError::Http(detail)) => return Err(ClientError::Unreachable { url, detail }),
    };
    let status = resp.status();
    if !status.is_success() {
        let final_url = resp.url().clone();
        let ch = challenge(&resp);
        let text = body::read_error_body(resp).await;
        return Err(ClientError::Status {
            url,
            status: status.as_u16(),
            detail: describe_status(shared, status, &final_url, &text, ch.as_deref()),
        });
    }
    if !is_event_stream(&resp) {
        return Err(ClientError::NotSse {
            url,
            detail: format!(
                "GET answered with Content-Type {}, not text/event-stream",
                content_type(&resp).unwrap_or_else(|| "(none)".to_owned())
            ),
        });
    }
    let base = resp.url().clone();
    let mut events = body::events(resp, shared.options.max_message_bytes);
    let first = tokio::time::timeout(wait, async {
        loop {
            match events.next().await {
                Some(Ok(ev)) if ev.event.as_deref() == Some("endpoint") => return Ok(ev.data),
                // A priming event or keep-alive before it.
                Some(Ok(ev)) if ev.data.trim().is_empty() => {}
                Some(Ok(ev)) => {
                    return Err(format!(
                        "the first event is {:?}, not \"endpoint\"",
                        ev.event.as_deref().unwrap_or("message")
                    ));
                }
                Some(Err(e)) => return Err(e.to_string()),
                None => return Err("the stream ended before the endpoint event".to_owned()),
            }
        }
    })
    .await
    .unwrap_or_else(|_| Err(format!("no endpoint event within {wait:?}")));
    let data = first.map_err(|detail| ClientError::NotSse {
        url: url.clone(),
        detail,
    })?;
    let endpoint = base.join(data.trim()).map_err(|e| ClientError::NotSse {
        url: url.clone(),
        detail: format!(
            "the endpoint event names no usable URL ({:?}: {e})",
            data.trim()
        ),
    })?;
    if endpoint.origin() != shared.url.origin() {
        return Err(ClientError::CrossOrigin {
            url,
            endpoint: endpoint.to_string(),
        });
    }
    tracing::debug!(%endpoint, "legacy HTTP+SSE endpoint");
    let task = shared.clone();
    shared.spawn(async move { read(&task, events).await });
    Ok(endpoint)
}

/// Deliver every `message` event; when the stream ends, so does the connection.
async fn read(shared: &Shared, mut events: Events) {
    let why = loop {
        match events.next().await {
            Some(Ok(ev)) if ev.is_message() => shared.deliver(ev.data).await,
            Some(Ok(ev)) => {
                if ev.event.as_deref() == Some("endpoint") {
                    tracing::debug!("ignoring a second endpoint event");
                }
            }
            Some(Err(e @ StreamError::TooLarge(_))) => {
                break format!("{e}; closing the connection");
            }
            Some(Err(StreamError::Broken(e))) => {
                break format!("the SSE stream from {} failed: {e}", shared.url);
            }
            None => break format!("the server closed the SSE stream ({})", shared.url),
        }
    };
    shared.end(why).await;
}

/// POST one message to the endpoint (in order: the driver waits). A refused request gets
/// an error response.
pub(super) async fn send(shared: &Shared, endpoint: &Url, text: String) {
    let (ids, method) = match session::outbound(&text) {
        Outbound::Requests(r) => (r.ids, r.method),
        Outbound::Notification(n) => (Vec::new(), n.method),
        _ => (Vec::new(), "a response".to_owned()),
    };
    let mut headers = shared.headers();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let wait = shared.options.request_timeout.unwrap_or(DEFAULT_WAIT);
    let sent = auth::send(
        shared,
        Method::POST,
        endpoint,
        headers,
        Some(Bytes::from(text)),
        Some(wait),
    );
    let failed = match sent.await {
        Ok(resp) if resp.status().is_success() => return,
        Ok(resp) => {
            let mut pending = ids;
            return http_failure(shared, &method, resp, &mut pending).await;
        }
        Err(e) => e.to_string(),
    };
    if ids.is_empty() {
        tracing::warn!(%method, error = %failed, "could not send a message");
    }
    let err = ErrorObject::internal(format!("POST {endpoint} for {method} failed: {failed}"));
    for id in &ids {
        shared.deliver_error(id, &err).await;
    }
}
