//! The handshake era's session (2025-03-26 … 2025-11-25): the standalone GET stream,
//! transparent re-initialisation when the server forgets the session, and its deletion.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, StatusCode};
use moat_protocol::RequestId;
use moat_protocol::jsonrpc::{self, Message};
use serde_json::Value;

use super::body;
use super::errors::{challenge, describe_status, jsonrpc_error};
use super::streamable::{backoff, get, note_initialize_result, post, session_headers};
use super::{Shared, error_chain, is_event_stream};
use crate::http::headers::{LAST_EVENT_ID, SESSION_ID};

/// Open (or reopen) the standalone GET stream.
pub(super) fn start_get_stream(shared: &Arc<Shared>) {
    let task = shared.clone();
    let handle = shared.spawn(async move { standalone_stream(&task).await });
    if let Some(old) = shared.state().get_stream.replace(handle) {
        old.abort();
    }
}

/// The handshake era's GET stream: server requests and notifications outside any request.
/// Reconnects when it drops, honouring `retry` and resuming with `Last-Event-ID`.
async fn standalone_stream(shared: &Arc<Shared>) {
    let mut last_id: Option<String> = None;
    let mut retry: Option<Duration> = None;
    let mut failures = 0u32;
    let limit = shared.options.max_message_bytes;
    loop {
        let (mut headers, generation, with_session) = session_headers(shared);
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(v) = last_id
            .as_deref()
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            headers.insert(HeaderName::from_static(LAST_EVENT_ID), v);
        }
        let mut progressed = false;
        match get(shared, headers).await {
            Ok(resp) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                tracing::debug!("the server offers no standalone SSE stream (405)");
                return;
            }
            Ok(resp) if resp.status() == StatusCode::NOT_FOUND && with_session => {
                drop(resp);
                if let Err(why) = reinit(shared, generation).await {
                    tracing::warn!(%why, "the session is gone and re-initialising failed");
                }
                return; // A successful re-initialisation opened a new stream.
            }
            Ok(resp) if resp.status().is_success() && is_event_stream(&resp) => {
                let mut events = body::events(resp, limit);
                while let Some(item) = events.next().await {
                    match item {
                        Ok(ev) => {
                            progressed = true;
                            if let Some(id) = &ev.id {
                                last_id = Some(id.clone());
                            }
                            if let Some(ms) = ev.retry {
                                retry = Some(Duration::from_millis(ms));
                            }
                            if !ev.is_message() {
                                continue;
                            }
                            if let Some(id) = &ev.id {
                                if !shared.state().seen.insert(id) {
                                    continue;
                                }
                            }
                            shared.deliver(ev.data).await;
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, "the standalone stream failed");
                            break;
                        }
                    }
                }
            }
            Ok(resp) => {
                tracing::debug!(status = %resp.status(), "the standalone stream was refused");
            }
            Err(e) => tracing::debug!(error = %e, "could not open the standalone stream"),
        }
        if progressed {
            failures = 0;
        }
        failures += 1;
        if failures > shared.options.reconnect_attempts {
            tracing::warn!(url = %shared.url, "giving up on the standalone SSE stream");
            return;
        }
        tokio::time::sleep(backoff(shared, retry, failures)).await;
    }
}

/// The server forgot our session: replay `initialize` (under an id of our own, its answer
/// swallowed) and `notifications/initialized`, and take the new session. Concurrent callers
/// that saw the same generation fail re-initialise once.
pub(super) async fn reinit(shared: &Arc<Shared>, failed_generation: u64) -> Result<(), String> {
    let _one = shared.reinit.lock().await;
    let (init, note, n) = {
        let mut state = shared.state();
        if state.generation != failed_generation {
            return Ok(()); // Someone else already did it.
        }
        state.reinits += 1;
        (
            state.init_request.clone(),
            state.initialized_note.clone(),
            state.reinits,
        )
    };
    let init = init.ok_or("there is no initialize request to replay")?;
    let private = RequestId::from(format!("moat-transport-reinit-{n}"));
    let mut request: Value =
        serde_json::from_str(&init).map_err(|e| format!("cannot replay initialize: {e}"))?;
    request["id"] = serde_json::to_value(&private).map_err(|e| e.to_string())?;
    let body = Bytes::from(request.to_string());
    tracing::info!(url = %shared.url, "the server forgot our session; re-initialising");
    let mut headers = shared.headers();
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let resp = post(shared, body, headers).await?;
    let status = resp.status();
    if !status.is_success() {
        let url = resp.url().clone();
        let ch = challenge(&resp);
        let text = body::read_error_body(resp).await;
        return Err(match jsonrpc_error(&text) {
            Some(e) => format!("initialize was refused: {} (code {})", e.message, e.code),
            None => describe_status(shared, status, &url, &text, ch.as_deref()),
        });
    }
    let session = resp
        .headers()
        .get(SESSION_ID)
        .filter(|v| v.to_str().is_ok_and(|s| !s.is_empty()))
        .cloned();
    let answer = read_private_answer(shared, resp, &private).await?;
    match Message::parse(&answer) {
        Ok(Message::Response(_)) => {}
        Ok(Message::Error(e)) => {
            return Err(format!(
                "initialize was refused: {} (code {})",
                e.error.message, e.error.code
            ));
        }
        _ => return Err("initialize got no readable answer".to_owned()),
    }
    {
        let mut state = shared.state();
        state.session = session;
        state.generation += 1;
        state.seen.clear();
    }
    note_initialize_result(shared, &answer);
    if let Some(note) = note {
        let (mut headers, _, _) = session_headers(shared);
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let resp = post(shared, Bytes::from(note), headers).await?;
        if !resp.status().is_success() {
            return Err(format!(
                "notifications/initialized was refused with HTTP {}",
                resp.status()
            ));
        }
        start_get_stream(shared);
    }
    Ok(())
}

/// Read the answer to the replayed `initialize` (JSON or SSE), ignoring anything else.
async fn read_private_answer(
    shared: &Shared,
    resp: reqwest::Response,
    private: &RequestId,
) -> Result<String, String> {
    let limit = shared.options.max_message_bytes;
    let answers = |line: &str| {
        matches!(Message::parse(line),
            Ok(Message::Response(jsonrpc::Response { id, .. }))
            | Ok(Message::Error(jsonrpc::ErrorResponse { id: Some(id), .. })) if id == *private)
    };
    if !is_event_stream(&resp) {
        let text = body::read_limited(resp, limit, shared.options.request_timeout)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(text);
    }
    let mut events = body::events(resp, limit);
    let wait = shared
        .options
        .request_timeout
        .unwrap_or(Duration::from_secs(300));
    let read = async {
        while let Some(item) = events.next().await {
            let ev = item.map_err(|e| e.to_string())?;
            if ev.is_message() && answers(&ev.data) {
                return Ok(ev.data);
            }
        }
        Err("the stream ended before the answer to initialize".to_owned())
    };
    tokio::time::timeout(wait, read)
        .await
        .unwrap_or_else(|_| Err(format!("no answer to initialize within {wait:?}")))
}

/// On close: end the handshake-era session (a 405 means the server does not allow it).
pub(super) async fn delete_session(shared: &Shared) {
    let (mut headers, _, had) = session_headers(shared);
    if !had {
        return;
    }
    headers.remove(LAST_EVENT_ID);
    let wait = shared
        .options
        .request_timeout
        .unwrap_or(Duration::from_secs(5))
        .min(Duration::from_secs(5));
    let fut = shared
        .post
        .delete(shared.url.clone())
        .headers(headers)
        .send();
    match tokio::time::timeout(wait, fut).await {
        Ok(Ok(resp)) => {
            tracing::debug!(status = %resp.status(), "deleted the session");
        }
        Ok(Err(e)) => tracing::debug!(error = %error_chain(&e), "could not delete the session"),
        Err(_) => tracing::debug!("deleting the session timed out"),
    }
}
