//! Streamable HTTP, both eras: one POST per message, answers as JSON or SSE (a dropped
//! stream resumed with `Last-Event-ID`), the handshake era's session and version headers,
//! the modern era's mirrored headers and cancellation by hang-up, and Auto mode's probe.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use moat_protocol::error::{HEADER_MISMATCH, METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION};
use moat_protocol::jsonrpc::{self, Message};
use moat_protocol::session::{self, Outbound, OutboundNotice, OutboundRequests};
use moat_protocol::{ErrorObject, RequestId};
use serde_json::Value;
use tokio::task::AbortHandle;

use super::body::{self, Events, StreamError};
use super::errors::{challenge, describe_status, fail, http_failure, jsonrpc_error};
use super::session::{reinit, start_get_stream};
use super::wire::{backoff, get, note_initialize_result, post, session_headers};
use super::xheader;
use super::{Route, Shared, content_type, is_event_stream, legacy};
use crate::http::headers::ParamHeader;
use crate::http::headers::{LAST_EVENT_ID, METHOD, NAME, PROTOCOL_VERSION, SESSION_ID};

/// Connection state the tasks share.
#[derive(Default)]
pub(crate) struct State {
    /// The handshake-era session, once the server assigned one.
    pub(super) session: Option<HeaderValue>,
    /// Bumped by every re-initialisation, so concurrent 404s re-initialise once.
    pub(super) generation: u64,
    /// The revision negotiated by `initialize`.
    pub(super) protocol_version: Option<HeaderValue>,
    /// The last `initialize` request and `notifications/initialized`, to replay.
    pub(super) init_request: Option<String>,
    pub(super) initialized_note: Option<String>,
    /// Whether the last request was a modern-era one.
    pub(super) modern: bool,
    /// The revision the last modern-era request named.
    pub(super) modern_version: Option<HeaderValue>,
    /// Our requests whose POST is still running.
    pub(super) inflight: HashMap<RequestId, InFlight>,
    /// Event ids already delivered (for resumption without duplicates).
    pub(super) seen: Seen,
    /// `x-mcp-header` annotations by tool name, from `tools/list` results.
    pub(super) tool_headers: HashMap<String, Vec<ParamHeader>>,
    /// The standalone GET stream's task.
    pub(super) get_stream: Option<AbortHandle>,
    pub(super) reinits: u64,
    pub(super) next_token: u64,
}

pub(super) struct InFlight {
    abort: AbortHandle,
    modern: bool,
    /// The POST carried only this request (aborting it affects no other).
    alone: bool,
    token: u64,
}

#[derive(Default)]
pub(super) struct Seen {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl Seen {
    const MAX: usize = 4096;

    /// Record `id`; false when it was already delivered.
    pub(super) fn insert(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        self.set.insert(id.to_owned());
        self.order.push_back(id.to_owned());
        if self.order.len() > Self::MAX
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        true
    }

    pub(super) fn clear(&mut self) {
        self.set.clear();
        self.order.clear();
    }
}

/// One POST of ours that carries requests.
struct Call {
    body: Bytes,
    method: String,
    ids: Vec<RequestId>,
    /// The modern-era revision the request names in `_meta`, if any.
    modern: Option<String>,
    /// `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`.
    extra: Vec<(HeaderName, HeaderValue)>,
    /// The request opens a handshake-era session (its answer carries the session id).
    opens_session: bool,
    /// Its answer lists tools, whose mirrored-header annotations we keep (modern era).
    lists_tools: bool,
}

/// Send one outbound message over Streamable HTTP.
pub(super) async fn send(shared: &Arc<Shared>, text: String) {
    match session::outbound(&text) {
        Outbound::Requests(requests) => {
            let call = prepare(shared, text, requests);
            spawn_call(shared, call, None);
        }
        Outbound::Notification(notice) => {
            notify(shared, text, notice).await;
        }
        _ => {
            // Our answers to the server's requests: accepted with 202, nothing to read.
            let task = shared.clone();
            shared.spawn(async move {
                post_message(&task, text, "a response").await;
            });
        }
    }
}

/// Auto mode: send the first request Streamable-style, and fall back to legacy HTTP+SSE
/// if the server answers as the spec says an old server does. Returns the route decided.
pub(super) async fn probe(shared: &Arc<Shared>, text: String) -> Option<Route> {
    let requests = match session::outbound(&text) {
        Outbound::Requests(requests) => requests,
        _ => {
            send(shared, text).await;
            return Some(Route::Streamable);
        }
    };
    let call = prepare(shared, text.clone(), requests);
    let (headers, _, _) = post_headers(shared, &call);
    let sent = post(shared, call.body.clone(), headers).await;
    let resp = match sent {
        Ok(resp) => resp,
        Err(e) => {
            // Nothing answered: say so, and probe again with the next request.
            let err = ErrorObject::internal(format!(
                "POST {} for {} failed: {e}",
                shared.url, call.method
            ));
            for id in &call.ids {
                shared.deliver_error(id, &err).await;
            }
            return None;
        }
    };
    let status = resp.status();
    if !matches!(status.as_u16(), 400 | 404 | 405) {
        spawn_call(shared, call, Some(resp));
        return Some(Route::Streamable);
    }
    let url = resp.url().clone();
    let challenge = challenge(&resp);
    let text_body = body::read_error_body(resp).await;
    let refusal = jsonrpc_error(&text_body);
    if let Some(err) = refusal.as_ref().filter(|e| is_modern_refusal(e)) {
        // A Streamable HTTP server of 2026-07-28 refusing the request in its own terms:
        // there is no legacy endpoint to look for.
        for id in &call.ids {
            shared.deliver_error(id, err).await;
        }
        return Some(Route::Streamable);
    }
    // Any other JSON-RPC error body proves nothing: a server that serves the legacy pair
    // next to a Streamable endpoint may well answer a POST to its SSE path with one (a 404
    // naming its MCP endpoint, say), and the 2025 revisions fall back whatever the body.
    tracing::debug!(%status, "the first POST was refused; trying legacy HTTP+SSE");
    match legacy::open(
        shared,
        legacy::endpoint_wait(shared, Some(PROBE_ENDPOINT_WAIT)),
    )
    .await
    {
        Ok(endpoint) => {
            tracing::info!(url = %shared.url, %endpoint, "the server speaks the legacy HTTP+SSE transport");
            legacy::send(shared, &endpoint, text).await;
            Some(Route::Legacy(endpoint))
        }
        Err(e) => {
            let err = match refusal {
                // The server's own error stays what the request gets (its code may matter
                // to the caller), with why the fallback did not help.
                Some(mut err) => {
                    err.message = format!(
                        "{}; falling back to the legacy HTTP+SSE transport failed too: {e}",
                        err.message
                    );
                    err
                }
                None => ErrorObject::internal(format!(
                    "{}; falling back to the legacy HTTP+SSE transport failed too: {e}",
                    describe_status(shared, status, &url, &text_body, challenge.as_deref())
                )),
            };
            for id in &call.ids {
                shared.deliver_error(id, &err).await;
            }
            Some(Route::Streamable)
        }
    }
}

/// How long Auto mode's fallback waits for the `endpoint` event. A legacy server sends it
/// as soon as the stream opens; a Streamable HTTP server that opens a stream on a GET
/// without a session sends nothing, and the requests queued behind the probe must not wait
/// a whole request timeout for that.
const PROBE_ENDPOINT_WAIT: Duration = Duration::from_secs(10);

/// Whether a JSON-RPC error refusing the first POST is one the 2026-07-28 transport spec
/// names as proof of a modern Streamable HTTP server: an unsupported revision, an unknown
/// method, or headers that disagree with the body. Only these rule the legacy fallback out.
fn is_modern_refusal(err: &ErrorObject) -> bool {
    matches!(
        err.code,
        UNSUPPORTED_PROTOCOL_VERSION | METHOD_NOT_FOUND | HEADER_MISMATCH
    )
}

/// Work out a request's era and headers, and note what later requests need.
fn prepare(shared: &Shared, text: String, requests: OutboundRequests) -> Call {
    let modern = requests.modern;
    let method = requests.method;
    let mut extra = Vec::new();
    let mut state = shared.state();
    state.modern = modern.is_some();
    if let Some(v) = &modern {
        state.modern_version = HeaderValue::from_str(v).ok();
        if let Ok(v) = HeaderValue::from_str(&method) {
            extra.push((HeaderName::from_static(METHOD), v));
        }
        if let Some(name) = &requests.name
            && let Ok(v) = HeaderValue::from_str(&crate::http::headers::encode_value(name))
        {
            extra.push((HeaderName::from_static(NAME), v));
        }
        if let Some((tool, args)) = &requests.tool
            && let Some(mirrored) = state.tool_headers.get(tool.as_str())
        {
            // Arguments are decoded only for a tool that mirrors some of them.
            let args: Option<Value> = args
                .as_ref()
                .and_then(|a| serde_json::from_str(a.get()).ok());
            extra.extend(xheader::mirror(mirrored, args.as_ref()));
        }
    } else if requests.opens_session {
        // A new handshake: a new session, whatever came before.
        state.init_request = Some(text.clone());
        state.session = None;
        state.protocol_version = None;
    }
    drop(state);
    Call {
        body: Bytes::from(text),
        method,
        ids: requests.ids,
        modern,
        extra,
        opens_session: requests.opens_session,
        lists_tools: requests.lists_tools,
    }
}

/// Run `call` in a task of its own, registered so that a cancellation can abort it.
fn spawn_call(shared: &Arc<Shared>, call: Call, first: Option<reqwest::Response>) {
    // Hold the lock across the spawn: the task unregisters under it, so never too early.
    let mut state = shared.state();
    state.next_token += 1;
    let token = state.next_token;
    let ids = call.ids.clone();
    let modern = call.modern.is_some();
    let task = shared.clone();
    let abort = shared.spawn(async move {
        let ids = call.ids.clone();
        run_call(&task, call, first).await;
        let mut state = task.state();
        for id in &ids {
            if state.inflight.get(id).is_some_and(|f| f.token == token) {
                state.inflight.remove(id);
            }
        }
    });
    let alone = ids.len() == 1;
    for id in ids {
        state.inflight.insert(
            id,
            InFlight {
                abort: abort.clone(),
                modern,
                alone,
                token,
            },
        );
    }
}

/// The headers of a POST: the base set, then the session and negotiated version (handshake
/// era) or the mirrored fields (modern era). Also returns the session generation, and
/// whether a session id went out.
fn post_headers(shared: &Shared, call: &Call) -> (HeaderMap, u64, bool) {
    let mut h = shared.headers();
    h.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let state = shared.state();
    let mut with_session = false;
    match &call.modern {
        Some(v) => {
            if let Ok(v) = HeaderValue::from_str(v) {
                h.insert(HeaderName::from_static(PROTOCOL_VERSION), v);
            }
            for (n, v) in &call.extra {
                h.insert(n.clone(), v.clone());
            }
        }
        None => {
            if let Some(s) = &state.session {
                h.insert(HeaderName::from_static(SESSION_ID), s.clone());
                with_session = true;
            }
            if let Some(v) = &state.protocol_version {
                h.insert(HeaderName::from_static(PROTOCOL_VERSION), v.clone());
            }
        }
    }
    (h, state.generation, with_session)
}

/// The headers of a notification or response POST: the session's (handshake era), or the
/// revision of the last request (modern era, which has no session).
fn message_headers(shared: &Shared) -> (HeaderMap, u64, bool) {
    let modern = {
        let state = shared.state();
        state.modern.then(|| state.modern_version.clone()).flatten()
    };
    let (mut h, generation, with_session) = match modern {
        Some(v) => {
            let mut h = shared.headers();
            h.insert(HeaderName::from_static(PROTOCOL_VERSION), v);
            (h, shared.state().generation, false)
        }
        None => session_headers(shared),
    };
    h.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    (h, generation, with_session)
}

/// Send one request POST to the end: deliver every answer, or an error for each request
/// left unanswered.
async fn run_call(shared: &Arc<Shared>, call: Call, mut first: Option<reqwest::Response>) {
    let mut pending = call.ids.clone();
    let mut retried = false;
    loop {
        let (headers, generation, with_session) = post_headers(shared, &call);
        let resp = match first.take() {
            Some(resp) => resp,
            None => match post(shared, call.body.clone(), headers).await {
                Ok(resp) => resp,
                Err(e) => {
                    let err = ErrorObject::internal(format!(
                        "POST {} for {} failed: {e}",
                        shared.url, call.method
                    ));
                    fail(shared, &mut pending, &err).await;
                    return;
                }
            },
        };
        if resp.status() == StatusCode::NOT_FOUND && with_session && !retried {
            retried = true;
            drop(resp);
            match reinit(shared, generation).await {
                Ok(()) => continue,
                Err(why) => {
                    let err = ErrorObject::internal(format!(
                        "the server at {} no longer knows our session (HTTP 404) and \
                         re-initialising failed: {why}",
                        shared.url
                    ));
                    fail(shared, &mut pending, &err).await;
                    return;
                }
            }
        }
        if call.opens_session && resp.status().is_success() && call.modern.is_none() {
            let session = resp
                .headers()
                .get(SESSION_ID)
                .filter(|v| v.to_str().is_ok_and(|s| !s.is_empty()))
                .cloned();
            shared.state().session = session;
        }
        handle_response(shared, &call, resp, &mut pending).await;
        return;
    }
}

async fn handle_response(
    shared: &Arc<Shared>,
    call: &Call,
    resp: reqwest::Response,
    pending: &mut Vec<RequestId>,
) {
    let status = resp.status();
    if !status.is_success() {
        return http_failure(shared, &call.method, resp, pending).await;
    }
    if status == StatusCode::ACCEPTED {
        tracing::debug!(method = %call.method, "the server accepted a request without answering on its POST");
        return;
    }
    if is_event_stream(&resp) {
        return read_call_stream(shared, call, resp, pending).await;
    }
    let media = content_type(&resp);
    if media.as_deref() != Some("application/json") && media.is_some() {
        let err = ErrorObject::internal(format!(
            "POST {} for {} answered with Content-Type {}, not application/json or \
             text/event-stream",
            shared.url,
            call.method,
            media.unwrap_or_default()
        ));
        return fail(shared, pending, &err).await;
    }
    let limit = shared.options.max_message_bytes;
    match body::read_limited(resp, limit, shared.options.request_timeout).await {
        Ok(text) if text.trim().is_empty() => {}
        Ok(text) => deliver_answer(shared, call, text, pending).await,
        Err(e) => {
            let err = ErrorObject::internal(format!(
                "the answer to {} from {}: {e}",
                call.method, shared.url
            ));
            return fail(shared, pending, &err).await;
        }
    }
    if !pending.is_empty() {
        let err = ErrorObject::internal(format!(
            "the server's answer to {} held no response to it",
            call.method
        ));
        fail(shared, pending, &err).await;
    }
}

/// Read a POST's SSE stream until every request in it is answered, resuming it (handshake
/// era, with an event id to resume from) when it drops early.
async fn read_call_stream(
    shared: &Arc<Shared>,
    call: &Call,
    resp: reqwest::Response,
    pending: &mut Vec<RequestId>,
) {
    let limit = shared.options.max_message_bytes;
    let mut events: Events = body::events(resp, limit);
    let mut last_id: Option<String> = None;
    let mut retry: Option<Duration> = None;
    let mut failures = 0u32;
    loop {
        let why = loop {
            match events.next().await {
                Some(Ok(ev)) => {
                    if let Some(id) = &ev.id {
                        last_id = Some(id.clone());
                    }
                    if let Some(ms) = ev.retry {
                        retry = Some(Duration::from_millis(ms));
                    }
                    if !ev.is_message() {
                        continue;
                    }
                    if let Some(id) = &ev.id
                        && !shared.state().seen.insert(id)
                    {
                        tracing::debug!(%id, "dropping an event already delivered");
                        continue;
                    }
                    failures = 0;
                    deliver_answer(shared, call, ev.data, pending).await;
                    if pending.is_empty() {
                        return;
                    }
                }
                Some(Err(StreamError::TooLarge(limit))) => {
                    let err = ErrorObject::internal(format!(
                        "the server sent a message larger than the limit of {limit} bytes \
                         while answering {}",
                        call.method
                    ));
                    return fail(shared, pending, &err).await;
                }
                Some(Err(StreamError::Broken(e))) => break format!(": {e}"),
                None => break String::new(),
            }
        };
        let resumable = call.modern.is_none() && last_id.is_some();
        if !resumable {
            let err = ErrorObject::internal(format!(
                "the server ended the response stream of {} before answering{why}",
                call.method
            ));
            return fail(shared, pending, &err).await;
        }
        failures += 1;
        if failures > shared.options.reconnect_attempts {
            let err = ErrorObject::internal(format!(
                "the response stream of {} dropped before the answer, and resuming it failed \
                 {} times{why}",
                call.method, shared.options.reconnect_attempts
            ));
            return fail(shared, pending, &err).await;
        }
        tokio::time::sleep(backoff(shared, retry, failures)).await;
        let (mut headers, _, _) = session_headers(shared);
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(v) = last_id
            .as_deref()
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            headers.insert(HeaderName::from_static(LAST_EVENT_ID), v);
        }
        tracing::debug!(method = %call.method, last_event_id = ?last_id, "resuming a response stream");
        match get(shared, headers).await {
            Ok(resp) if resp.status().is_success() && is_event_stream(&resp) => {
                events = body::events(resp, limit);
            }
            Ok(resp) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                let err = ErrorObject::internal(format!(
                    "the response stream of {} dropped before the answer, and the server does \
                     not allow resuming it (GET answered 405){why}",
                    call.method
                ));
                return fail(shared, pending, &err).await;
            }
            Ok(resp) => {
                tracing::debug!(status = %resp.status(), "resuming a stream failed");
                events = Box::pin(futures_util::stream::empty());
            }
            Err(e) if e.is_auth() => {
                let err = ErrorObject::internal(format!(
                    "the response stream of {} dropped before the answer, and resuming it \
                     failed: {e}",
                    call.method
                ));
                return fail(shared, pending, &err).await;
            }
            Err(e) => {
                tracing::debug!(error = %e, "resuming a stream failed");
                events = Box::pin(futures_util::stream::empty());
            }
        }
    }
}

/// Deliver one message from a POST's answer, ticking off the request it answers, and
/// looking into the results the transport needs (`initialize`, modern `tools/list`).
async fn deliver_answer(
    shared: &Arc<Shared>,
    call: &Call,
    mut line: String,
    pending: &mut Vec<RequestId>,
) {
    if jsonrpc::is_batch(&line) {
        if let Ok(items) = Message::parse_batch(&line) {
            for item in items.iter().flatten() {
                if let Message::Response(jsonrpc::Response { id, .. })
                | Message::Error(jsonrpc::ErrorResponse { id: Some(id), .. }) = item
                {
                    pending.retain(|p| p != id);
                }
            }
        }
        return shared.deliver(line).await;
    }
    enum Answer {
        Result,
        Error,
        Orphan(ErrorObject),
        None,
    }
    let answer = match Message::parse(&line) {
        Ok(Message::Response(r)) if pending.contains(&r.id) => {
            pending.retain(|p| *p != r.id);
            Answer::Result
        }
        Ok(Message::Error(e)) => match &e.id {
            Some(id) if pending.contains(id) => {
                pending.retain(|p| p != id);
                Answer::Error
            }
            // An error without an id in the answer to our POST: it is about our request.
            None => Answer::Orphan(e.error),
            Some(_) => Answer::None,
        },
        _ => Answer::None,
    };
    match answer {
        Answer::Result if call.opens_session => {
            note_initialize_result(shared, &line);
        }
        Answer::Result if call.lists_tools && call.modern.is_some() => {
            let (rewritten, kept) = xheader::filter_tools_list(&line);
            {
                let mut state = shared.state();
                for (name, mirrored) in kept {
                    if mirrored.is_empty() {
                        state.tool_headers.remove(&name);
                    } else {
                        state.tool_headers.insert(name, mirrored);
                    }
                }
            }
            if let Some(r) = rewritten {
                line = r;
            }
        }
        Answer::Orphan(err) if !pending.is_empty() => {
            return fail(shared, pending, &err).await;
        }
        _ => {}
    }
    shared.deliver(line).await;
}

/// Send a notification, in order (the driver waits for it), then act on what it means.
async fn notify(shared: &Arc<Shared>, text: String, notice: OutboundNotice) {
    let method = notice.method.as_str();
    if let Some(id) = notice.cancels {
        let (entry, modern) = {
            let mut state = shared.state();
            (state.inflight.remove(&id), state.modern)
        };
        match entry {
            // Modern era: hanging up is the cancellation; the notification is not sent.
            Some(f) if f.modern => {
                tracing::debug!(%id, "cancelling a request by closing its stream");
                f.abort.abort();
                return;
            }
            Some(f) => {
                post_message(shared, text, method).await;
                if f.alone {
                    f.abort.abort();
                }
                return;
            }
            None if modern => return,
            None => {}
        }
    }
    let accepted = post_message(shared, text.clone(), method).await;
    if notice.ends_handshake && accepted {
        shared.state().initialized_note = Some(text);
        // Servers send what belongs to no request of ours (a request made outside any
        // handler, a list change) on this stream, and may drop it while the stream is not
        // open: have it open before the next message goes out. The driver waits for us.
        let answered = start_get_stream(shared);
        if tokio::time::timeout(GET_STREAM_WAIT, answered)
            .await
            .is_err()
        {
            tracing::debug!(
                "the server has not answered the standalone GET yet; going on without it"
            );
        }
    }
}

/// How long the message after `notifications/initialized` waits for the server to answer
/// the standalone GET stream it opens.
const GET_STREAM_WAIT: Duration = Duration::from_secs(2);

/// POST a message that expects no answer (a notification, or our response). Returns whether
/// the server accepted it.
async fn post_message(shared: &Arc<Shared>, text: String, what: &str) -> bool {
    let body = Bytes::from(text);
    let mut retried = false;
    loop {
        let (headers, generation, with_session) = message_headers(shared);
        let resp = match post(shared, body.clone(), headers).await {
            Ok(resp) => resp,
            Err(e) => {
                tracing::warn!(%what, error = %e, url = %shared.url, "could not send a message");
                return false;
            }
        };
        let status = resp.status();
        if status == StatusCode::NOT_FOUND && with_session && !retried {
            retried = true;
            drop(resp);
            match reinit(shared, generation).await {
                Ok(()) => continue,
                Err(why) => {
                    tracing::warn!(%what, %why, "the session is gone and re-initialising failed");
                    return false;
                }
            }
        }
        if status.is_success() {
            return true;
        }
        http_failure(shared, what, resp, &mut Vec::new()).await;
        return false;
    }
}
