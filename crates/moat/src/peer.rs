//! [`Peer`]: one side of a live MCP connection.
//!
//! A peer drives a [`Connection`]: it correlates our requests with their answers, runs the
//! other side's requests concurrently through a [`Handler`], applies cancellation, progress
//! and deadlines, and asks the sans-IO [`Lifecycle`] what is allowed. When the connection ends,
//! for whatever reason, every pending call fails at once with [`Error::Closed`]; nothing hangs.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use moat_protocol::error::{ErrorObject, INVALID_REQUEST, PARSE_ERROR};
use moat_protocol::jsonrpc::{self, Message, decode_params};
use moat_protocol::lifecycle::{Lifecycle, Role, State};
use moat_protocol::pending::PendingTable;
use moat_protocol::types::{
    CancelledNotificationParams, ClientCapabilities, Implementation, LoggingLevel,
    LoggingMessageNotificationParams, ProgressNotificationParams, methods,
};
use moat_protocol::version::{META_PROTOCOL_VERSION, SupportedVersions};
use moat_protocol::{Era, JsonObject, ProgressToken, ProtocolVersion, RequestId};
use moat_transport::{Closer, Connection, Frame, Inbound, Outgoing};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{Error, Result};
use crate::handler::{Capabilities, ClientInfo, Handler, IncomingRequest, RequestContext};

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
    /// requests only; see [`InputAnswerer`]).
    ///
    /// [`Client`]: crate::Client
    pub answerer: Option<crate::client::InputAnswerer>,
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
    pub fn answer_with(mut self, answerer: crate::client::InputAnswerer) -> Self {
        self.answerer = Some(answerer);
        self
    }
}

type Answer = std::result::Result<Box<RawValue>, Error>;

struct Slot {
    answer: oneshot::Sender<Answer>,
    progress: Option<mpsc::UnboundedSender<ProgressNotificationParams>>,
    logs: Option<mpsc::UnboundedSender<LoggingMessageNotificationParams>>,
}

struct State_ {
    lifecycle: Lifecycle,
    pending: PendingTable<Slot>,
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
    closed_tx: watch::Sender<bool>,
    /// Set when nothing more will arrive from the other side (its requests may still be
    /// draining).
    input_ended_tx: watch::Sender<bool>,
    closer: Mutex<Option<Closer>>,
    /// The tasks running the other side's requests (and assembling batch answers).
    tracker: TaskTracker,
}

/// One side of a live MCP connection. Cheap to clone; all clones drive the same connection.
#[derive(Clone)]
pub struct Peer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("Peer")
            .field("state", &state.lifecycle.state())
            .field("version", &state.lifecycle.version())
            .field("pending", &state.pending.len())
            .finish()
    }
}

impl Peer {
    /// Start driving `conn` as `role`, answering the other side through `handler`.
    /// Spawns the reading task on the current tokio runtime.
    pub fn start(
        mut conn: Connection,
        role: Role,
        handler: Arc<dyn Handler>,
        options: PeerOptions,
    ) -> Peer {
        let (closed_tx, _) = watch::channel(false);
        let (input_ended_tx, _) = watch::channel(false);
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let shared = Arc::new(Shared {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            single_request: conn.single_request,
            outbound: conn.outbound.clone(),
            state: Mutex::new(State_ {
                lifecycle: Lifecycle::new(role),
                pending: PendingTable::new(options.max_pending),
                inflight: HashMap::new(),
                closed: None,
                log_level: None,
                client_capabilities: None,
                modern_meta: None,
                peer_info: None,
            }),
            options,
            closed_tx,
            input_ended_tx,
            closer: Mutex::new(conn.closer.take()),
            tracker: TaskTracker::new(),
        });
        let peer = Peer { shared };
        tokio::spawn(read_loop(peer.clone(), conn.inbound, handler));
        peer
    }

    fn state(&self) -> MutexGuard<'_, State_> {
        // A panic while holding this lock would be a bug in this module; recover the data
        // rather than cascading the panic into every task.
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The revision in use, once negotiated.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.state().lifecycle.version()
    }

    /// Where the connection is in its lifecycle.
    pub fn lifecycle_state(&self) -> State {
        self.state().lifecycle.state()
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
        self.state().pending.len()
    }

    pub(crate) fn with_lifecycle<T>(&self, f: impl FnOnce(&mut Lifecycle) -> T) -> T {
        f(&mut self.state().lifecycle)
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
        let (id, modern_meta) = {
            let mut state = self.state();
            if let Some(why) = &state.closed {
                return Err(Error::Closed(why.clone()));
            }
            state.lifecycle.check_outgoing_request(method)?;
            let deadline = timeout.map(|t| Instant::now() + t);
            let slot = Slot {
                answer: tx,
                progress: options.progress,
                logs: options.logs,
            };
            let id = state
                .pending
                .insert(method, deadline, with_progress, slot)?;
            (id, state.modern_meta.clone())
        };
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
        let answer = match timeout {
            Some(t) => match tokio::time::timeout(t, rx).await {
                Ok(a) => a,
                Err(_) => {
                    drop(guard); // cancels: removes the entry and tells the peer
                    return Err(Error::Timeout {
                        method: method.to_owned(),
                        after: t,
                    });
                }
            },
            None => rx.await,
        };
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
        if self.state().lifecycle.state() == State::Shutdown {
            return Err(Error::Closed(self.close_reason()));
        }
        let line = jsonrpc::encode_notification(method, Some(params))?;
        self.shared
            .outbound
            .send(Outgoing::new(line, related.cloned()))
            .await
            .map_err(|_| Error::Closed(self.close_reason()))
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
        let cancelled = self.state().pending.cancel(id, Some(reason.to_owned()));
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
        let mut rx = self.shared.input_ended_tx.subscribe();
        let _ = rx.wait_for(|ended| *ended).await;
    }

    /// Wait until the connection has shut down.
    pub async fn closed(&self) {
        let mut rx = self.shared.closed_tx.subscribe();
        let _ = rx.wait_for(|c| *c).await;
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
        self.shared.closed_tx.send_replace(true);
    }

    /// Fail every request of ours still waiting, and refuse new ones: no answer can come.
    fn fail_pending(&self, reason: &str) {
        let drained = {
            let mut state = self.state();
            if state.closed.is_none() {
                state.closed = Some(reason.to_owned());
            }
            state.pending.drain()
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
            if state.lifecycle.state() == State::Shutdown {
                return;
            }
            state.lifecycle.shutdown();
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

/// What the reading task pulls out of a request's `_meta` before dispatching it.
#[derive(serde::Deserialize, Default)]
struct ParamsPeek<'a> {
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<MetaPeek<'a>>,
}

#[derive(serde::Deserialize, Default)]
struct MetaPeek<'a> {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<ProgressToken>,
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
    protocol_version: Option<Cow<'a, str>>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", borrow, default)]
    client_capabilities: Option<&'a RawValue>,
    #[serde(rename = "io.modelcontextprotocol/clientInfo", borrow, default)]
    client_info: Option<&'a RawValue>,
    #[serde(rename = "io.modelcontextprotocol/logLevel", default)]
    log_level: Option<LoggingLevel>,
}

fn peek_meta(params: Option<&RawValue>) -> MetaPeek<'_> {
    // Most requests carry no `_meta`; skip the second look at their params entirely.
    match params {
        Some(p) if p.get().contains("\"_meta\"") => serde_json::from_str::<ParamsPeek>(p.get())
            .ok()
            .and_then(|p| p.meta)
            .unwrap_or_default(),
        _ => MetaPeek::default(),
    }
}

async fn read_loop(peer: Peer, mut inbound: mpsc::Receiver<Inbound>, handler: Arc<dyn Handler>) {
    let reason = loop {
        let Some(item) = inbound.recv().await else {
            break "the peer closed the connection".to_owned();
        };
        match item {
            Inbound::Frame(Frame::Line(line)) => on_line(&peer, &handler, line).await,
            Inbound::Frame(Frame::Oversized(n)) => {
                let err = ErrorObject::new(
                    INVALID_REQUEST,
                    format!(
                        "Invalid request: message of {n} bytes exceeds the limit of {} bytes",
                        peer.shared.options.max_message_bytes
                    ),
                );
                peer.send_line(jsonrpc::encode_error(None, &err), None)
                    .await;
            }
            Inbound::Frame(Frame::InvalidUtf8) => {
                let err = ErrorObject::new(PARSE_ERROR, "Parse error: message is not valid UTF-8");
                peer.send_line(jsonrpc::encode_error(None, &err), None)
                    .await;
            }
            Inbound::Failed(e) => break format!("reading from the peer failed: {e}"),
            Inbound::Ended(why) => break why,
            _ => {}
        }
    };
    tracing::debug!(%reason, "connection ended");
    // Nothing more will arrive: our own requests can never be answered, so they fail now.
    peer.fail_pending(&reason);
    peer.shared.input_ended_tx.send_replace(true);
    // The other side may still be reading: let the requests it already sent finish and be
    // answered (a client that writes a request and closes stdin gets its answer), within
    // the drain deadline.
    peer.shared.tracker.close();
    let drain = peer.shared.options.drain_timeout;
    if tokio::time::timeout(drain, peer.shared.tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            ?drain,
            "requests still running when the connection closed were cancelled"
        );
    }
    peer.shutdown(reason);
    handler.on_close(&peer);
    peer.release_transport().await;
}

async fn on_line(peer: &Peer, handler: &Arc<dyn Handler>, line: String) {
    if jsonrpc::is_batch(&line) {
        return on_batch(peer, handler, &line).await;
    }
    match Message::parse(&line) {
        Ok(message) => {
            let related = match &message {
                Message::Request(req) => Some(req.id.clone()),
                _ => None,
            };
            if let Some(reply) = on_message(peer, handler, message, None) {
                peer.send_line(reply, related).await;
            }
        }
        Err(e) => {
            if e.respond {
                peer.send_line(jsonrpc::encode_error(e.id.as_ref(), &e.error), e.id.clone())
                    .await;
            } else {
                tracing::debug!(error = %e, "ignored a malformed message that wants no answer");
            }
        }
    }
}

/// Where the answer to a request goes: straight to the wire, or into a batch's answer.
type BatchSlot = Option<(usize, mpsc::UnboundedSender<(usize, String)>)>;

async fn on_batch(peer: &Peer, handler: &Arc<dyn Handler>, line: &str) {
    let allowed = peer
        .protocol_version()
        .is_some_and(ProtocolVersion::supports_batches);
    if !allowed {
        let err = ErrorObject::invalid_request(format!(
            "Invalid request: JSON-RPC batches are only allowed in protocol revision 2025-03-26 (this connection: {})",
            peer.protocol_version()
                .map_or("not negotiated", ProtocolVersion::as_str)
        ));
        return peer
            .send_line(jsonrpc::encode_error(None, &err), None)
            .await;
    }
    let items = match Message::parse_batch(line) {
        Ok(items) => items,
        Err(e) => {
            return peer
                .send_line(jsonrpc::encode_error(e.id.as_ref(), &e.error), None)
                .await;
        }
    };
    // Streamable HTTP sends a batch's answer on the stream of its first request.
    let related = items.iter().find_map(|item| match item {
        Ok(Message::Request(req)) => Some(req.id.clone()),
        _ => None,
    });
    // Answer a batch with one array holding the responses to its requests, in order.
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, String)>();
    for (index, item) in items.into_iter().enumerate() {
        match item {
            Err(e) if e.respond => {
                let _ = tx.send((index, jsonrpc::encode_error(e.id.as_ref(), &e.error)));
            }
            Err(_) => {}
            Ok(message) => {
                if let Some(reply) = on_message(peer, handler, message, Some((index, tx.clone()))) {
                    let _ = tx.send((index, reply));
                }
            }
        }
    }
    drop(tx);
    let peer = peer.clone();
    peer.shared.tracker.clone().spawn(async move {
        let mut answers = Vec::new();
        while let Some(answer) = rx.recv().await {
            answers.push(answer);
        }
        if answers.is_empty() {
            return; // only notifications and responses: nothing to say
        }
        answers.sort_by_key(|(i, _)| *i);
        let body: Vec<&str> = answers.iter().map(|(_, s)| s.as_str()).collect();
        peer.send_line(format!("[{}]", body.join(",")), related)
            .await;
    });
}

/// Handle one message. Returns an answer that is ready at once (sent in order, before the
/// next message is read); answers computed by handlers are sent by their tasks.
fn on_message(
    peer: &Peer,
    handler: &Arc<dyn Handler>,
    message: Message<'_>,
    batch: BatchSlot,
) -> Option<String> {
    match message {
        Message::Request(req) => dispatch_request(peer, handler, req, batch),
        Message::Notification(n) => {
            on_notification(peer, handler, &n.method, n.params);
            None
        }
        Message::Response(resp) => {
            let entry = peer.state().pending.complete(&resp.id);
            match entry {
                Some(entry) => {
                    let _ = entry.data.answer.send(Ok(resp.result.to_owned()));
                }
                None => {
                    tracing::warn!(id = %resp.id, "ignored a response to an unknown request id")
                }
            }
            None
        }
        Message::Error(resp) => {
            let entry = resp
                .id
                .as_ref()
                .and_then(|id| peer.state().pending.complete(id));
            match entry {
                Some(entry) => {
                    let _ = entry.data.answer.send(Err(Error::Remote {
                        method: entry.method,
                        error: resp.error,
                    }));
                }
                None => tracing::warn!(
                    id = ?resp.id,
                    code = resp.error.code,
                    message = %resp.error.message,
                    "the peer reported an error not tied to a pending request"
                ),
            }
            None
        }
        _ => None,
    }
}

fn on_notification(
    peer: &Peer,
    handler: &Arc<dyn Handler>,
    method: &str,
    params: Option<&RawValue>,
) {
    match method {
        methods::NOTIFICATIONS_INITIALIZED => {
            peer.with_lifecycle(|l| l.initialized_received());
            handler.on_notification(method, params, peer);
        }
        methods::NOTIFICATIONS_CANCELLED => {
            if let Ok(p) = decode_params::<CancelledNotificationParams>(params)
                && let Some(id) = p.request_id
            {
                let token = peer.state().inflight.remove(&id);
                if let Some(token) = token {
                    tracing::debug!(%id, reason = ?p.reason, "request cancelled by the peer");
                    token.cancel();
                }
            }
        }
        methods::NOTIFICATIONS_PROGRESS => {
            if let Ok(p) = decode_params::<ProgressNotificationParams>(params) {
                let mut state = peer.state();
                if let Some((_, entry)) = state.pending.by_progress_token(&p.progress_token)
                    && let Some(tx) = &entry.data.progress
                {
                    let _ = tx.send(p);
                }
            }
        }
        // A log message goes to the one request in flight that asked for them, if only one
        // did (a line transport does not say which request it belongs to).
        methods::NOTIFICATIONS_MESSAGE => {
            let taker = {
                let state = peer.state();
                let mut wanting = state.pending.values().filter_map(|e| e.data.logs.as_ref());
                match (wanting.next(), wanting.next()) {
                    (Some(tx), None) => Some(tx.clone()),
                    _ => None,
                }
            };
            match (
                taker,
                decode_params::<LoggingMessageNotificationParams>(params),
            ) {
                (Some(tx), Ok(p)) => {
                    let _ = tx.send(p);
                }
                _ => handler.on_notification(method, params, peer),
            }
        }
        _ => handler.on_notification(method, params, peer),
    }
}

fn encode_answer(id: &RequestId, outcome: Result<Box<RawValue>, ErrorObject>) -> String {
    match outcome {
        Ok(result) => jsonrpc::encode_result(id, &result).unwrap_or_else(|_| {
            jsonrpc::encode_error(
                Some(id),
                &ErrorObject::internal("could not encode the result"),
            )
        }),
        Err(err) => jsonrpc::encode_error(Some(id), &err),
    }
}

/// Check a request against the lifecycle and the revision, then run it: `ping`,
/// `initialize` and refusals are answered at once (returned), everything else runs in a
/// task of its own that sends its answer (or puts it in the batch's).
fn dispatch_request(
    peer: &Peer,
    handler: &Arc<dyn Handler>,
    req: jsonrpc::Request<'_>,
    batch: BatchSlot,
) -> Option<String> {
    let refuse = |err: ErrorObject| Some(jsonrpc::encode_error(Some(&req.id), &err));
    let method: &str = &req.method;
    let meta = peek_meta(req.params);
    let (state, era, role) = {
        let st = peer.state();
        (
            st.lifecycle.state(),
            st.lifecycle.era(),
            st.lifecycle.role(),
        )
    };

    // Which revision is this request made in? In the modern era each request says so in
    // `_meta`; a request that does so on a fresh connection makes it a modern one.
    let mut version = peer.protocol_version();
    match meta.protocol_version.as_deref() {
        Some(requested)
            if method != methods::INITIALIZE
                && (state == State::Uninitialized || era == Some(Era::Modern)) =>
        {
            match peer.shared.options.versions.check_modern(requested) {
                // `server/discover` on a fresh connection answers in the modern era but
                // commits the connection to nothing: a client that gives up waiting for
                // the answer may fall back to `initialize` (the revisions' backward
                // compatibility), and that must still work when the answer was only slow.
                Ok(v) if method == methods::SERVER_DISCOVER && state == State::Uninitialized => {
                    version = Some(v);
                }
                Ok(v) => {
                    if let Err(e) = peer.with_lifecycle(|l| l.enter_modern(v)) {
                        return refuse(ErrorObject::invalid_request(e.to_string()));
                    }
                    version = Some(v);
                }
                Err(err) => return refuse(err),
            }
        }
        None if era == Some(Era::Modern) && role == Role::Server => {
            return refuse(ErrorObject::invalid_params(format!(
                "Invalid params: a {} request must carry _meta[\"{META_PROTOCOL_VERSION}\"]",
                version.map_or("2026-07-28", ProtocolVersion::as_str)
            )));
        }
        _ => {}
    }
    let modern = version.map(ProtocolVersion::era) == Some(Era::Modern);
    if modern && role == Role::Server && version.is_some_and(|v| !v.defines_client_request(method))
    {
        return refuse(ErrorObject::method_not_found(method));
    }

    if method == methods::PING {
        return Some(
            match peer.state().lifecycle.check_incoming_request(method) {
                Ok(()) => encode_answer(
                    &req.id,
                    serde_json::value::to_raw_value(&serde_json::json!({}))
                        .map_err(|_| ErrorObject::internal("encode")),
                ),
                Err(err) => jsonrpc::encode_error(Some(&req.id), &err),
            },
        );
    }
    if method != methods::SERVER_DISCOVER
        && !modern
        && let Err(err) = peer.state().lifecycle.check_incoming_request(method)
    {
        return refuse(err);
    }
    if method == methods::INITIALIZE {
        let outcome = handler.initialize(req.params, peer).map(|(result, v)| {
            peer.with_lifecycle(|l| l.initialize_answered(v));
            result
        });
        return Some(encode_answer(&req.id, outcome));
    }

    let token = CancellationToken::new();
    {
        let mut st = peer.state();
        if st.inflight.len() >= peer.shared.options.max_inflight {
            drop(st);
            return refuse(ErrorObject::internal(
                "Server busy: too many requests in flight; retry later",
            ));
        }
        if st.inflight.insert(req.id.clone(), token.clone()).is_some() {
            drop(st);
            tracing::warn!(id = %req.id, "the peer reused the id of a request still in flight");
        }
    }
    let client_capabilities = match meta.client_capabilities {
        Some(raw) => Capabilities::Raw(Arc::from(raw.to_owned()), Default::default()),
        None => Capabilities::Known(peer.client_capabilities()),
    };
    // Only a 2026-07-28 request names its client; before, `initialize` did, once.
    let client_info = match meta.client_info {
        Some(raw) if modern => ClientInfo::Raw(Arc::from(raw.to_owned()), Default::default()),
        _ => ClientInfo::Known,
    };
    let ctx = RequestContext {
        peer: peer.clone(),
        id: req.id.clone(),
        progress_token: meta.progress_token,
        cancel: token.clone(),
        version,
        client_capabilities,
        client_info,
        log_level: meta.log_level,
        round: None,
        request_meta: None,
    };
    let incoming = IncomingRequest {
        id: req.id.clone(),
        method: req.method.into_owned(),
        params: req.params.map(ToOwned::to_owned),
    };
    let fut = handler.handle_request(incoming, ctx);
    let peer = peer.clone();
    let id = req.id;
    peer.shared.tracker.clone().spawn(async move {
        let outcome = tokio::select! {
            biased;
            _ = token.cancelled() => None,
            r = fut => Some(r),
        };
        peer.state().inflight.remove(&id);
        // A cancelled request gets no answer, as the spec asks.
        let Some(outcome) = outcome else { return };
        let line = encode_answer(&id, outcome);
        match batch {
            Some((index, tx)) => {
                let _ = tx.send((index, line));
            }
            None => peer.send_line(line, Some(id)).await,
        }
    });
    None
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
