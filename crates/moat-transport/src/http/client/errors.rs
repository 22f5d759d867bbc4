//! Turning HTTP failures into JSON-RPC errors for the requests they hit: the server's own
//! JSON-RPC error when it sent one, otherwise a precise description.

use http::StatusCode;
use http::header::WWW_AUTHENTICATE;
use moat_protocol::jsonrpc::Message;
use moat_protocol::{ErrorObject, RequestId};

use super::Shared;
use super::body;

/// Answer every request in `pending` with `err`.
pub(super) async fn fail(shared: &Shared, pending: &mut Vec<RequestId>, err: &ErrorObject) {
    for id in pending.drain(..) {
        shared.deliver_error(&id, err).await;
    }
}

/// A JSON-RPC error response, if that is what `body` is.
pub(super) fn jsonrpc_error(body: &str) -> Option<ErrorObject> {
    match Message::parse(body.trim()) {
        Ok(Message::Error(e)) => Some(e.error),
        _ => None,
    }
}

pub(super) fn challenge(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get(WWW_AUTHENTICATE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// A precise message for an HTTP error without a JSON-RPC error body.
pub(super) fn describe_status(
    shared: &Shared,
    status: StatusCode,
    url: &url::Url,
    body: &str,
    challenge: Option<&str>,
) -> String {
    let mut text = format!("HTTP {status} from {url}");
    if status == StatusCode::UNAUTHORIZED {
        if shared.authorizer.is_some() {
            text.push_str(": the server does not accept the credentials authorization provided");
        } else if shared.options.bearer_token.is_some() {
            text.push_str(": the server refused the bearer token");
        } else {
            text.push_str(": the server requires authorization: configure a bearer token or OAuth");
        }
        if let Some(c) = challenge {
            text.push_str(&format!(
                "; it asks for: WWW-Authenticate: {}",
                body::snippet(c)
            ));
        }
    }
    let excerpt = body::snippet(body);
    if excerpt.is_empty() {
        text.push_str(" (empty body)");
    } else {
        text.push_str(&format!(": {excerpt}"));
    }
    text
}

/// An HTTP error answering requests: pass on the server's JSON-RPC error, or describe it.
pub(super) async fn http_failure(
    shared: &Shared,
    method: &str,
    resp: reqwest::Response,
    pending: &mut Vec<RequestId>,
) {
    let status = resp.status();
    let url = resp.url().clone();
    let challenge = challenge(&resp);
    let text = body::read_error_body(resp).await;
    if pending.is_empty() {
        tracing::warn!(%method, %status, body = %body::snippet(&text), "the server refused a message");
        return;
    }
    let err = match jsonrpc_error(&text) {
        Some(err) => err,
        None => ErrorObject::internal(describe_status(
            shared,
            status,
            &url,
            &text,
            challenge.as_deref(),
        )),
    };
    fail(shared, pending, &err).await;
}
