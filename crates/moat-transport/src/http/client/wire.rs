//! The HTTP plumbing every part of the client shares: authorized POSTs and GETs with
//! their waits, the handshake-era session headers, reconnection backoff, and the revision
//! a session settled on. Below the Streamable, session and legacy rooms, which all use it.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use moat_protocol::session;

use super::Shared;
use super::auth::{self, SendError};
use crate::http::headers::{PROTOCOL_VERSION, SESSION_ID};

/// Handshake-era headers for a GET or DELETE.
pub(super) fn session_headers(shared: &Shared) -> (HeaderMap, u64, bool) {
    let mut h = shared.headers();
    let state = shared.state();
    let had = state.session.is_some();
    if let Some(s) = &state.session {
        h.insert(HeaderName::from_static(SESSION_ID), s.clone());
    }
    if let Some(v) = &state.protocol_version {
        h.insert(HeaderName::from_static(PROTOCOL_VERSION), v.clone());
    }
    (h, state.generation, had)
}

/// POST `body` (authorized), waiting at most the request timeout for the response headers.
pub(super) async fn post(
    shared: &Shared,
    body: Bytes,
    headers: HeaderMap,
) -> Result<reqwest::Response, SendError> {
    let wait = shared.options.request_timeout;
    auth::send(shared, Method::POST, &shared.url, headers, Some(body), wait).await
}

/// GET (authorized) a stream, waiting at most the request timeout (else five minutes) for
/// the response headers.
pub(super) async fn get(
    shared: &Shared,
    headers: HeaderMap,
) -> Result<reqwest::Response, SendError> {
    let wait = shared
        .options
        .request_timeout
        .unwrap_or(Duration::from_secs(300));
    auth::send(shared, Method::GET, &shared.url, headers, None, Some(wait)).await
}

/// The wait before reconnection attempt `n` (from 1): the server's `retry`, else the
/// configured delay, doubled per failure up to the cap.
pub(super) fn backoff(shared: &Shared, retry: Option<Duration>, n: u32) -> Duration {
    let base = retry.unwrap_or(shared.options.reconnect_delay);
    let factor = 1u32 << (n.saturating_sub(1)).min(16);
    let cap = shared.options.max_backoff.max(base);
    base.saturating_mul(factor).min(cap)
}

/// Remember the revision a session-opening request's answer settled on: later requests
/// name it in their `MCP-Protocol-Version` header.
pub(super) fn note_initialize_result(shared: &Shared, line: &str) {
    if let Some(v) = session::negotiated_version(line).and_then(|v| HeaderValue::from_str(&v).ok())
    {
        shared.state().protocol_version = Some(v);
    }
}
