//! [`Peer`]: one side of a live MCP connection.
//!
//! A peer drives a [`Connection`]: it correlates our requests with their answers, runs the
//! other side's requests concurrently through a [`Handler`](crate::handler::Handler),
//! applies cancellation, progress and deadlines, and asks the sans-IO [`Lifecycle`] what is
//! allowed. When the connection ends, for whatever reason, every pending call fails at once
//! with [`Error::Closed`]; nothing hangs.
//!
//! This file is the peer's state and its sending half, which a handler's context holds;
//! the reading half, which hands requests to the handler, is `inbound`, above the handler
//! interface.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use moat_protocol::jsonrpc;
use moat_protocol::lifecycle::{Lifecycle, Role, State};
use moat_protocol::session::{Reply, Session};
use moat_protocol::types::{
    ClientCapabilities, Implementation, LoggingLevel, LoggingMessageNotificationParams,
    ProgressNotificationParams, methods,
};
use moat_protocol::version::SupportedVersions;
use moat_protocol::{JsonObject, ProtocolVersion, RequestId};
use moat_transport::{Closer, Connection, Outgoing};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{Error, Result};

mod inbound;
mod stage;

use stage::{Stage, StageCell};

/// Settings for a peer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PeerOptions {
    /// Deadline for our requests when the call does not set one. `None`: wait forever.
    pub request_timeout: Option<Duration>,
    /// Most requests of ours in flight at once.
    pub max_pending: usize,
    /// Most requests of the other side handled at once; more are refused with -32603
    /// until some finish (a flood cannot exhaust memory).
    pub max_inflight: usize,
    /// The revisions this side speaks.
    pub versions: SupportedVersions,
    /// Largest message accepted (mirrors the transport's limit, for error messages).
    pub max_message_bytes: usize,
    /// When the other side stops sending, how long its requests already in flight may run
    /// to be answered before they are cancelled.
    pub drain_timeout: Duration,
    /// Who every message of this connection comes from, unless the transport names a
    /// caller for a message itself (HTTP with OAuth does): over stdio, the local OS user.
    pub identity: Option<moat_transport::SharedIdentity>,
}

impl Default for PeerOptions {
    fn default() -> Self {
        PeerOptions {
            request_timeout: Some(Duration::from_secs(60)),
            max_pending: 10_000,
            max_inflight: 10_000,
            versions: SupportedVersions::default(),
            max_message_bytes: moat_transport::Limits::default().max_message_bytes,
            drain_timeout: Duration::from_secs(10),
            identity: None,
        }
    }
}

/// Per-call settings for [`Peer::request_with`].
#[derive(Default, Clone)]
#[non_exhaustive]
pub struct RequestOptions {
    /// Deadline for this call, overriding the peer's default.
    pub timeout: Option<Duration>,
    /// Receives the progress notifications the other side sends for this call.
    pub progress: Option<mpsc::UnboundedSender<ProgressNotificationParams>>,
    /// The other side's request this one is made on behalf of (e.g. an elicitation while
    /// handling a tool call): Streamable HTTP sends it on that request's stream.
    pub related: Option<RequestId>,
    /// Receives the log messages (`notifications/message`) the other side sends while
    /// handling this request. Over a transport that does not say which request a message
    /// belongs to (stdio), a message goes here when this is the only request in flight
    /// that asked for them; otherwise it is an ordinary notification.
    pub logs: Option<mpsc::UnboundedSender<LoggingMessageNotificationParams>>,
    /// `_meta` entries for this request, over those the connection adds (a gateway
    /// passing on its client's trace context, capabilities and log level).
    pub meta: Option<JsonObject>,
    /// Who answers what the server asks while handling this request (a [`Client`]'s
    /// requests only; see [`InputAnswerer`](crate::InputAnswerer)).
    ///
    /// [`Client`]: crate::Client
    pub answerer: Option<crate::answerer::InputAnswerer>,
}

impl RequestOptions {
    /// Set the deadline.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Ask for progress; notifications arrive on `tx`.
    pub fn progress(mut self, tx: mpsc::UnboundedSender<ProgressNotificationParams>) -> Self {
        self.progress = Some(tx);
        self
    }

    /// Make this request on behalf of the other side's request `id`.
    pub fn related_to(mut self, id: RequestId) -> Self {
        self.related = Some(id);
        self
    }

    /// Receive the log messages sent while handling this request on `tx` (see
    /// [`RequestOptions::logs`]).
    pub fn logs(mut self, tx: mpsc::UnboundedSender<LoggingMessageNotificationParams>) -> Self {
        self.logs = Some(tx);
        self
    }

    /// Add these `_meta` entries to the request (see [`RequestOptions::meta`]).
    pub fn meta(mut self, meta: JsonObject) -> Self {
        self.meta = Some(meta);
        self
    }

    /// Answer what the server asks while handling this request with `answerer` (a
    /// [`Client`](crate::Client)'s requests only).
    pub fn answer_with(mut self, answerer: crate::answerer::InputAnswerer) -> Self {
        self.answerer = Some(answerer);
        self
    }
}

type Answer = std::result::Result<Box<RawValue>, Error>;

struct Slot {
    answer: oneshot::Sender<Answer>,
    /// The deadline's length, for the error that says it passed.
    timeout: Option<Duration>,
    progress: Option<mpsc::UnboundedSender<ProgressNotificationParams>>,
    logs: Option<mpsc::UnboundedSender<LoggingMessageNotificationParams>>,
}

struct State_ {
    /// The sans-IO session: lifecycle, revisions, what each message means, our requests
    /// awaiting answers and their deadlines.
    session: Session<Slot>,
    /// The deadline the timer task sleeps until (`None`: it sleeps until woken), so that
    /// only a request due earlier wakes it.
    timer_armed: Option<Instant>,
    /// Whether the timer task runs (it starts with the first request that has a deadline).
    timer_started: bool,
    inflight: HashMap<RequestId, CancellationToken>,
    closed: Option<String>,
    log_level: Option<LoggingLevel>,
    client_capabilities: Option<Arc<ClientCapabilities>>,
    /// `_meta` entries a modern-era client puts on every request.
    modern_meta: Option<Arc<ModernMeta>>,
    /// The other side's name and version, from `initialize`.
    peer_info: Option<Arc<Implementation>>,
}

struct Shared {
    /// Unique among the peers of this process (see [`Peer::id`]).
    id: u64,
    /// See [`Peer::is_single_request`].
    single_request: bool,
    outbound: mpsc::Sender<Outgoing>,
    state: Mutex<State_>,
    options: PeerOptions,
    /// How far the connection has come towards its end.
    stage: StageCell,
    closer: Mutex<Option<Closer>>,
    /// Wakes the timer task when a request is due before the deadline it sleeps until.
    timer: tokio::sync::Notify,
    /// The tasks running the other side's requests (and assembling batch answers).
    tracker: TaskTracker,
    /// A single-request connection's request, handed to its reading task to run there
    /// (see `inbound::read_loop`) rather than in a task of its own.
    local: Mutex<Option<LocalRequest>>,
}

/// A request's whole handling, from the handler to the answer on the wire.
pub(crate) type LocalRequest =
    std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>>;

/// One side of a live MCP connection. Cheap to clone; all clones drive the same connection.
#[derive(Clone)]
pub struct Peer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("Peer")
            .field("state", &state.session.lifecycle().state())
            .field("version", &state.session.lifecycle().version())
            .field("pending", &state.session.pending().len())
            .finish()
    }
}

impl Peer {
    /// A peer for `conn` as `role`: its sending half, its state and its timers. Reading is
    /// [`Peer::start`]'s (in `inbound`), which hands each message to the handler.
    fn new(conn: &mut Connection, role: Role, options: PeerOptions) -> Peer {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let shared = Arc::new(Shared {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            single_request: conn.single_request,
            outbound: conn.outbound.clone(),
            state: Mutex::new(State_ {
                session: {
                    let session = Session::new(
                        role,
                        options.versions.clone(),
                        options.max_message_bytes,
                        options.max_pending,
                    );
                    if conn.single_request {
                        session.single_request()
                    } else {
                        session
                    }
                },
                timer_armed: None,
                timer_started: false,
                inflight: HashMap::new(),
                closed: None,
                log_level: None,
                client_capabilities: None,
                modern_meta: None,
                peer_info: None,
            }),
            options,
            stage: StageCell::new(),
            closer: Mutex::new(conn.closer.take()),
            timer: tokio::sync::Notify::new(),
            tracker: TaskTracker::new(),
            local: Mutex::new(None),
        });
        Peer { shared }
    }

    fn state(&self) -> MutexGuard<'_, State_> {
        // A panic while holding this lock would be a bug in this module; recover the data
        // rather than cascading the panic into every task.
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The revision in use, once negotiated.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.state().session.lifecycle().version()
    }

    /// Where the connection is in its lifecycle.
    pub fn lifecycle_state(&self) -> State {
        self.state().session.lifecycle().state()
    }

    /// The revisions this side speaks.
    pub fn supported_versions(&self) -> &SupportedVersions {
        &self.shared.options.versions
    }

    /// The level set by `logging/setLevel` (server side, handshake era).
    pub fn log_level(&self) -> Option<LoggingLevel> {
        self.state().log_level
    }

    pub(crate) fn set_log_level(&self, level: LoggingLevel) {
        self.state().log_level = Some(level);
    }

    /// The capabilities the client declared in `initialize` (server side).
    pub fn client_capabilities(&self) -> Option<Arc<ClientCapabilities>> {
        self.state().client_capabilities.clone()
    }

    pub(crate) fn set_client_capabilities(&self, caps: ClientCapabilities) {
        self.state().client_capabilities = Some(Arc::new(caps));
    }

    /// A number that identifies this connection among the others of this process (for
    /// logs, audit records and per-connection state kept outside the peer).
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// Whether this connection carries a single request (a 2026-07-28 request over HTTP)
    /// rather than a session: state kept "per connection" would last one request.
    pub fn is_single_request(&self) -> bool {
        self.shared.single_request
    }

    /// On a server, the client's name and version as it gave them in `initialize`
    /// (handshake era; a client finds the server's in [`crate::Client::server_info`]).
    pub fn peer_info(&self) -> Option<Arc<Implementation>> {
        self.state().peer_info.clone()
    }

    pub(crate) fn set_peer_info(&self, info: Implementation) {
        self.state().peer_info = Some(Arc::new(info));
    }

    /// The deadline our requests get when the call sets none.
    pub fn default_timeout(&self) -> Option<Duration> {
        self.shared.options.request_timeout
    }

    /// Number of our requests awaiting answers.
    pub fn pending_requests(&self) -> usize {
        self.state().session.pending().len()
    }

    pub(crate) fn with_lifecycle<T>(&self, f: impl FnOnce(&mut Lifecycle) -> T) -> T {
        f(self.state().session.lifecycle_mut())
    }

    /// The client capabilities a modern-era client puts on every request, if any.
    pub(crate) fn modern_capabilities(&self) -> Option<serde_json::Value> {
        self.state()
            .modern_meta
            .as_ref()
            .and_then(|m| m.map.get(moat_protocol::version::META_CLIENT_CAPABILITIES))
            .cloned()
    }

    pub(crate) fn set_modern_meta(&self, meta: Option<JsonObject>) {
        self.state().modern_meta = meta.map(|map| {
            let text = serde_json::Value::Object(map.clone()).to_string();
            // The members without the braces, ready to splice into each request's `_meta`.
            let members = text[1..text.len() - 1].to_owned();
            Arc::new(ModernMeta { map, members })
        });
    }

    /// Send a request and wait for its answer, decoded as `R`.
    pub async fn request<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R> {
        self.request_with(method, params, RequestOptions::default())
            .await
    }

    /// Send a request with per-call options and wait for its answer, decoded as `R`.
    pub async fn request_with<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
        options: RequestOptions,
    ) -> Result<R> {
        let raw = self.request_raw(method, params, options).await?;
        serde_json::from_str(raw.get()).map_err(|e| Error::Decode {
            method: method.to_owned(),
            detail: e.to_string(),
        })
    }

    /// Send a request and return the raw result (for proxies that need not look inside).
    pub async fn request_raw<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        options: RequestOptions,
    ) -> Result<Box<RawValue>> {
        let timeout = options.timeout.or(self.shared.options.request_timeout);
        let (tx, rx) = oneshot::channel();
        let with_progress = options.progress.is_some();
        let related = options.related;
        let (id, modern_meta, wake_timer) = {
            let mut state = self.state();
            if let Some(why) = &state.closed {
                return Err(Error::Closed(why.clone()));
            }
            state.session.lifecycle().check_outgoing_request(method)?;
            let deadline = timeout.map(|t| now() + t);
            let slot = Slot {
                answer: tx,
                timeout,
                progress: options.progress,
                logs: options.logs,
            };
            let id = state
                .session
                .pending_mut()
                .insert(method, deadline, with_progress, slot)?;
            // The timer sleeps until the earliest deadline it knew of; only an earlier one
            // needs to wake it (one in a minute, with the default deadline, does not).
            let wake_timer = deadline.is_some_and(|d| state.timer_armed.is_none_or(|a| d < a));
            if wake_timer {
                state.timer_armed = deadline;
            }
            if deadline.is_some() && !std::mem::replace(&mut state.timer_started, true) {
                tokio::spawn(timer_loop(self.clone()));
            }
            (id, state.modern_meta.clone(), wake_timer)
        };
        if wake_timer {
            self.shared.timer.notify_one();
        }
        let guard = PendingGuard {
            peer: self,
            id: Some(id.clone()),
            method,
        };
        let params = encode_params(
            params,
            with_progress.then_some(&id),
            modern_meta.as_deref(),
            options.meta.as_ref(),
        )?;
        let line = jsonrpc::encode_request(&id, method, params.as_deref())?;
        if self
            .shared
            .outbound
            .send(Outgoing::new(line, related))
            .await
            .is_err()
        {
            return Err(Error::Closed(self.close_reason()));
        }
        // The deadline is the timer task's: it answers `Error::Timeout` and tells the peer.
        let answer = rx.await;
        guard.settled();
        match answer {
            Ok(a) => a,
            Err(_) => Err(Error::Closed(self.close_reason())),
        }
    }

    /// Send a notification.
    pub async fn notify<P: Serialize>(&self, method: &str, params: &P) -> Result<()> {
        self.notify_related(method, params, None).await
    }

    /// Send a notification that belongs to the other side's request `related` (progress or
    /// a log message while handling it): Streamable HTTP sends it on that request's stream.
    pub async fn notify_related<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        related: Option<&RequestId>,
    ) -> Result<()> {
        // Allowed while the other side's last requests drain, until SHUTDOWN.
        if self.state().session.lifecycle().state() == State::Shutdown {
            return Err(Error::Closed(self.close_reason()));
        }
        let line = jsonrpc::encode_notification(method, Some(params))?;
        self.shared
            .outbound
            .send(Outgoing::new(line, related.cloned()))
            .await
            .map_err(|_| Error::Closed(self.close_reason()))
    }

    /// Send a reply the session decided on.
    async fn send_reply(&self, reply: Reply) {
        let out = match reply.to {
            Some(to) => Outgoing::answer(reply.line, to, reply.error),
            None => Outgoing::new(reply.line, None),
        };
        let _ = self.shared.outbound.send(out).await;
    }

    /// Send the answer to the other side's request `to` (a result, or an error with code
    /// `error`).
    pub(crate) async fn send_answer(&self, line: String, to: RequestId, error: Option<i64>) {
        let _ = self
            .shared
            .outbound
            .send(Outgoing::answer(line, to, error))
            .await;
    }

    /// Send an already-encoded message as is.
    pub(crate) async fn send_line(&self, line: String, related: Option<RequestId>) {
        let _ = self
            .shared
            .outbound
            .send(Outgoing::new(line, related))
            .await;
    }

    /// End the stream that carries the answer to the other side's request `id` for now;
    /// the client resumes it later and misses nothing (2025-11-25 SSE polling over
    /// Streamable HTTP). Other transports ignore it.
    pub async fn hang_up(&self, id: &RequestId) {
        let _ = self
            .shared
            .outbound
            .send(Outgoing::hang_up(id.clone()))
            .await;
    }

    /// Cancel one of our requests: fail it locally and tell the peer (`notifications/cancelled`).
    pub fn cancel(&self, id: &RequestId, reason: &str) {
        let cancelled = self
            .state()
            .session
            .pending_mut()
            .cancel(id, Some(reason.to_owned()));
        if let Some((slot, params)) = cancelled {
            let method = slot.method.clone();
            let _ = slot.data.answer.send(Err(Error::Closed(format!(
                "{method} was cancelled: {reason}"
            ))));
            if method != methods::INITIALIZE {
                self.notify_nowait(methods::NOTIFICATIONS_CANCELLED, &params);
            }
        }
    }

    fn notify_nowait<P: Serialize>(&self, method: &str, params: &P) {
        if let Ok(line) = jsonrpc::encode_notification(method, Some(params)) {
            let _ = self.shared.outbound.try_send(line.into());
        }
    }

    /// Why the connection ended (for a child process: how it exited, and what it said last
    /// on stderr), or "the connection ended" when no reason is known or it has not ended.
    pub fn close_reason(&self) -> String {
        self.state()
            .closed
            .clone()
            .unwrap_or_else(|| "the connection ended".to_owned())
    }

    /// Whether the connection has shut down.
    pub fn is_closed(&self) -> bool {
        self.state().closed.is_some()
    }

    /// Wait until nothing more will arrive from the other side: a stream kept open for it
    /// (a listen stream) has no reader left to serve.
    pub(crate) async fn input_ended(&self) {
        self.shared.stage.reached(Stage::InputEnded).await;
    }

    /// Wait until the connection has shut down.
    pub async fn closed(&self) {
        self.shared.stage.reached(Stage::Closed).await;
    }

    /// Close the connection: fail pending calls, stop handlers, and release the transport
    /// (for a child process: close its stdin, then SIGTERM, then SIGKILL).
    pub async fn close(&self) {
        self.shutdown("closed by this side".to_owned());
        self.release_transport().await;
    }

    /// Close the transport (flushing what is queued) and only then report the connection
    /// closed, so that a process exiting on [`closed`](Self::closed) loses no answer.
    async fn release_transport(&self) {
        let closer = self
            .shared
            .closer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(closer) = closer {
            closer().await;
        }
        self.shared.stage.advance(Stage::Closed);
    }

    /// Fail every request of ours still waiting, and refuse new ones: no answer can come.
    fn fail_pending(&self, reason: &str) {
        let drained = {
            let mut state = self.state();
            if state.closed.is_none() {
                state.closed = Some(reason.to_owned());
            }
            state.session.pending_mut().drain()
        };
        for (_, entry) in drained {
            let _ = entry
                .data
                .answer
                .send(Err(Error::Closed(reason.to_owned())));
        }
    }

    /// Move to SHUTDOWN: fail everything pending and cancel the other side's requests still
    /// running. Idempotent.
    fn shutdown(&self, reason: String) {
        self.fail_pending(&reason);
        let inflight = {
            let mut state = self.state();
            if state.session.lifecycle().state() == State::Shutdown {
                return;
            }
            state.session.lifecycle_mut().shutdown();
            std::mem::take(&mut state.inflight)
        };
        for token in inflight.into_values() {
            token.cancel();
        }
    }
}

/// Removes a pending entry if its call is abandoned (timed out or the future dropped).
struct PendingGuard<'a> {
    peer: &'a Peer,
    id: Option<RequestId>,
    method: &'a str,
}

impl PendingGuard<'_> {
    fn settled(mut self) {
        self.id = None;
    }
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let reason = if self.method == methods::INITIALIZE {
                "abandoned"
            } else {
                "the caller stopped waiting"
            };
            self.peer.cancel(&id, reason);
        }
    }
}

/// Encode params, adding `_meta.progressToken`, the request's own `_meta` entries
/// (`extra`, over the params' own) and the modern-era `_meta` entries if needed.
fn encode_params<P: Serialize>(
    params: &P,
    progress: Option<&RequestId>,
    modern_meta: Option<&ModernMeta>,
    extra: Option<&JsonObject>,
) -> Result<Option<Box<RawValue>>> {
    let encode_err = |e: serde_json::Error| Error::Encode(jsonrpc::EncodeError::from(e));
    if progress.is_none() && modern_meta.is_none() && extra.is_none() {
        let raw = serde_json::value::to_raw_value(params).map_err(encode_err)?;
        return Ok((raw.get() != "null").then_some(raw));
    }
    // Fast path: params that carry no `_meta` of their own get ours spliced in as text,
    // without building a `Value` tree on every request.
    let text = serde_json::to_string(params).map_err(encode_err)?;
    let text = if text == "null" {
        "{}".to_owned()
    } else {
        text
    };
    if extra.is_none() && text.starts_with('{') && !text.contains("\"_meta\"") {
        let mut members = String::new();
        if let Some(id) = progress {
            members.push_str("\"progressToken\":");
            members.push_str(&serde_json::to_string(id).map_err(encode_err)?);
        }
        if let Some(m) = modern_meta.filter(|m| !m.members.is_empty()) {
            if !members.is_empty() {
                members.push(',');
            }
            members.push_str(&m.members);
        }
        let rest = &text[1..];
        let sep = if rest.trim_start().starts_with('}') {
            ""
        } else {
            ","
        };
        let spliced = format!("{{\"_meta\":{{{members}}}{sep}{rest}");
        return Ok(Some(RawValue::from_string(spliced).map_err(encode_err)?));
    }
    let mut value = serde_json::to_value(params).map_err(encode_err)?;
    if value.is_null() {
        value = serde_json::Value::Object(JsonObject::new());
    }
    if let Some(obj) = value.as_object_mut() {
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| serde_json::Value::Object(JsonObject::new()));
        if let Some(meta) = meta.as_object_mut() {
            for (k, v) in extra.into_iter().flatten() {
                meta.insert(k.clone(), v.clone());
            }
            if let Some(id) = progress {
                meta.insert(
                    "progressToken".to_owned(),
                    serde_json::to_value(id).map_err(encode_err)?,
                );
            }
            if let Some(extra) = modern_meta {
                for (k, v) in &extra.map {
                    meta.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
    }
    Ok(Some(
        serde_json::value::to_raw_value(&value).map_err(encode_err)?,
    ))
}

/// The `_meta` entries a modern-era client puts on every request, as a map and as
/// pre-serialized members.
#[derive(Debug)]
struct ModernMeta {
    map: JsonObject,
    members: String,
}

/// The clock our deadlines are on (tokio's, so that a paused test runtime pauses them).
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Sleeps until the session's next deadline and hands it the time then (quinn's shape: the
/// session keeps the deadlines, this task only sleeps on them): a request whose deadline
/// passed gets `Error::Timeout`, and the other side a `notifications/cancelled`.
async fn timer_loop(peer: Peer) {
    loop {
        let next = {
            let mut state = peer.state();
            let next = state.session.poll_timeout();
            state.timer_armed = next;
            next
        };
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = peer.shared.stage.reached(Stage::Closed) => return,
            _ = peer.shared.timer.notified() => continue,
            _ = sleep => {}
        }
        let expired = peer.state().session.handle_timeout(now());
        for e in expired {
            let _ = e.entry.data.answer.send(Err(Error::Timeout {
                method: e.entry.method,
                after: e.entry.data.timeout.unwrap_or_default(),
            }));
            if let Some(params) = e.cancel {
                peer.notify_nowait(methods::NOTIFICATIONS_CANCELLED, &params);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta() -> ModernMeta {
        let mut map = JsonObject::new();
        map.insert("v".into(), json!("2026-07-28"));
        ModernMeta {
            map,
            members: r#""v":"2026-07-28""#.into(),
        }
    }

    fn enc(params: serde_json::Value, progress: Option<i64>, modern: bool) -> serde_json::Value {
        let id = progress.map(RequestId::Number);
        let m = meta();
        let raw = encode_params(&params, id.as_ref(), modern.then_some(&m), None)
            .unwrap()
            .unwrap();
        serde_json::from_str(raw.get()).unwrap()
    }

    #[test]
    fn meta_is_spliced_into_params() {
        assert_eq!(
            enc(json!({}), None, true),
            json!({"_meta": {"v": "2026-07-28"}})
        );
        assert_eq!(
            enc(json!({"a": 1}), Some(7), true),
            json!({"_meta": {"progressToken": 7, "v": "2026-07-28"}, "a": 1})
        );
        assert_eq!(
            enc(json!({"a": 1}), Some(7), false),
            json!({"_meta": {"progressToken": 7}, "a": 1})
        );
        assert_eq!(
            enc(serde_json::Value::Null, None, true),
            json!({"_meta": {"v": "2026-07-28"}})
        );
        // Params with a `_meta` of their own are merged, theirs winning.
        assert_eq!(
            enc(json!({"_meta": {"v": "mine", "x": 1}}), Some(3), true),
            json!({"_meta": {"v": "mine", "x": 1, "progressToken": 3}})
        );
    }
}
