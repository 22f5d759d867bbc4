//! What a [`Peer`] calls when the other side asks or tells it something.
//!
//! [`Server`](crate::Server) and [`Client`](crate::Client) implement [`Handler`]; you only
//! implement it yourself to build something other than those two (a proxy, say).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use moat_protocol::types::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, Implementation, InputRequest, ListRootsResult, LoggingLevel,
    LoggingMessageNotificationParams, META_RELATED_TASK, ProgressNotificationParams, RequestParams,
    methods,
};
use moat_protocol::{ErrorObject, ProgressToken, ProtocolVersion, RequestId};
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::mrtr::Round;
use crate::peer::{Peer, RequestOptions};
use crate::task::{TaskEntry, TaskHandle};

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The outcome of handling a request: an encoded result, or an error to send back.
pub type HandlerResult = Result<Box<RawValue>, ErrorObject>;

/// A request from the peer, owned so that it can move into its handler's task.
#[derive(Debug, Clone)]
pub struct IncomingRequest {
    /// The request id.
    pub id: RequestId,
    /// The method.
    pub method: String,
    /// The params, undecoded.
    pub params: Option<Box<RawValue>>,
    /// The params' named fields (`name`, `uri`, `arguments`, …) as the session read them,
    /// or why they could not be read: use them rather than reading the params again.
    pub fields: Result<moat_protocol::session::RequestFields, ErrorObject>,
}

/// Answers requests and takes notifications on behalf of one side of a connection.
pub trait Handler: Send + Sync + 'static {
    /// Server side: answer `initialize`. Returns the encoded result and the revision agreed.
    /// The default refuses (clients do not answer `initialize`).
    fn initialize(
        &self,
        params: Option<&RawValue>,
        peer: &Peer,
    ) -> Result<(Box<RawValue>, ProtocolVersion), ErrorObject> {
        let _ = (params, peer);
        Err(ErrorObject::method_not_found(methods::INITIALIZE))
    }

    /// Answer a request. Runs in its own task; `ctx` carries cancellation and progress.
    fn handle_request(
        &self,
        request: IncomingRequest,
        ctx: RequestContext,
    ) -> BoxFuture<HandlerResult>;

    /// Take a notification (other than the lifecycle, cancellation and progress ones, which
    /// the peer handles itself). Called in order, on the reading task: do not block.
    fn on_notification(&self, method: &str, params: Option<&RawValue>, peer: &Peer) {
        let _ = (method, params, peer);
    }

    /// The connection has closed.
    fn on_close(&self, peer: &Peer) {
        let _ = peer;
    }
}

/// What a request handler knows about the request it is handling, and how it talks back.
#[derive(Clone, Debug)]
pub struct RequestContext {
    pub(crate) peer: Peer,
    pub(crate) id: RequestId,
    pub(crate) progress_token: Option<ProgressToken>,
    pub(crate) cancel: CancellationToken,
    pub(crate) version: Option<ProtocolVersion>,
    pub(crate) client_capabilities: Capabilities,
    pub(crate) client_info: ClientInfo,
    pub(crate) log_level: Option<LoggingLevel>,
    /// Set for modern-era requests that may answer with `InputRequiredResult`.
    pub(crate) round: Option<Arc<Round>>,
    /// The request's `_meta`, as sent (`tools/call` only).
    pub(crate) request_meta: Option<Arc<RawValue>>,
    /// Who made the request, as the transport vouches.
    pub(crate) identity: Option<moat_transport::SharedIdentity>,
    /// Trace context the transport read beside the request (HTTP headers).
    pub(crate) transport_trace: Option<moat_transport::TraceHeaders>,
}

/// W3C trace context from a request's `_meta` ([`RequestContext::trace_context`]), as
/// sent: the strings are not validated here (a tracing library's propagator does that).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TraceContext {
    /// `traceparent`: version, trace id, parent span id, flags.
    pub traceparent: String,
    /// `tracestate`: vendor-specific trace state.
    pub tracestate: Option<String>,
    /// `baggage`: application key-value pairs.
    pub baggage: Option<String>,
}

impl RequestContext {
    /// The connection this request came on; use it to ask the peer things back.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// The request id.
    pub fn request_id(&self) -> &RequestId {
        &self.id
    }

    /// The revision this request is made in.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.version
    }

    /// The client's capabilities: from this request's `_meta` in the modern era, from
    /// `initialize` in the handshake era.
    pub fn client_capabilities(&self) -> Option<&ClientCapabilities> {
        match &self.client_capabilities {
            Capabilities::Known(caps) => caps.as_deref(),
            Capabilities::Raw(raw, decoded) => {
                Some(decoded.get_or_init(|| serde_json::from_str(raw.get()).unwrap_or_default()))
            }
        }
    }

    /// Who the client says it is: from this request's `_meta` in the modern era (each
    /// 2026-07-28 request names its client), from `initialize` in the handshake era.
    /// `None` when it did not say, or said it in a shape that does not decode.
    pub fn client_info(&self) -> Option<Arc<Implementation>> {
        match &self.client_info {
            ClientInfo::Known => self.peer.peer_info(),
            ClientInfo::Raw(raw, decoded) => decoded
                .get_or_init(|| serde_json::from_str(raw.get()).ok().map(Arc::new))
                .clone(),
        }
    }

    /// The `_meta` of the request as the client sent it (for `tools/call`; `None` for other
    /// requests and when it had none): what a gateway passes on untouched, such as W3C
    /// trace context (`traceparent`, `tracestate`).
    pub fn request_meta(&self) -> Option<&RawValue> {
        self.request_meta.as_deref()
    }

    /// Who made this request, as the transport vouches for it: over HTTP with an OAuth
    /// issuer, the subject, client and scopes of the request's access token (each request
    /// may carry another token); over stdio, the local OS user; `None` when nothing
    /// authenticates the caller (HTTP with a static token, or none).
    pub fn identity(&self) -> Option<&moat_transport::Identity> {
        self.identity.as_deref()
    }

    /// The identity, shared (to keep beyond the request, e.g. in a task).
    pub fn shared_identity(&self) -> Option<moat_transport::SharedIdentity> {
        self.identity.clone()
    }

    /// The W3C trace context the request carries in its `_meta` (`traceparent`,
    /// `tracestate`, `baggage`; SEP-414), else in its transport's (over HTTP, the headers
    /// of the same names), for a handler that continues the caller's trace. `None` when
    /// neither carries a `traceparent`.
    pub fn trace_context(&self) -> Option<TraceContext> {
        self.meta_trace_context().or_else(|| {
            let t = self.transport_trace.as_ref()?;
            Some(TraceContext {
                traceparent: t.traceparent.clone(),
                tracestate: t.tracestate.clone(),
                baggage: t.baggage.clone(),
            })
        })
    }

    fn meta_trace_context(&self) -> Option<TraceContext> {
        #[derive(serde::Deserialize)]
        struct Keys {
            traceparent: Option<String>,
            tracestate: Option<String>,
            baggage: Option<String>,
        }
        let raw = self.request_meta()?;
        // Most `_meta` carries no trace context: it is not parsed for nothing.
        if !raw.get().contains("traceparent") {
            return None;
        }
        let keys: Keys = serde_json::from_str(raw.get()).ok()?;
        Some(TraceContext {
            traceparent: keys.traceparent?,
            tracestate: keys.tracestate,
            baggage: keys.baggage,
        })
    }

    /// The log level the client asked for: this request's (2026-07-28) or the
    /// connection's (`logging/setLevel`).
    pub fn log_level(&self) -> Option<LoggingLevel> {
        match self.version {
            Some(v) if v.era() == moat_protocol::Era::Modern => self.log_level,
            _ => self.peer.log_level(),
        }
    }

    /// The progress token the requester asked for progress on, if any.
    pub fn progress_token(&self) -> Option<&ProgressToken> {
        self.progress_token.as_ref()
    }

    /// Resolves when the requester cancels this request (or the connection closes).
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// Whether the request has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Report progress, if the requester asked for it (otherwise this does nothing; nor
    /// does it for a 2026-07-28 task, which reports through its status instead).
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(token) = &self.progress_token else {
            return;
        };
        if self.current_task().is_some_and(|t| !t.is_legacy()) {
            return;
        }
        let params = ProgressNotificationParams {
            progress_token: token.clone(),
            progress,
            total,
            message,
            meta: None,
        };
        let _ = self
            .peer
            .notify_related(methods::NOTIFICATIONS_PROGRESS, &params, Some(&self.id))
            .await;
    }

    /// Send a log message to the client if it asked for messages of this level: in the
    /// modern era through this request's `_meta` log level, otherwise through
    /// `logging/setLevel`. A 2026-07-28 task sends none (the tasks extension has no
    /// messages for tasks).
    pub async fn log(&self, level: LoggingLevel, logger: Option<&str>, data: serde_json::Value) {
        if self.current_task().is_some_and(|t| !t.is_legacy()) {
            return;
        }
        let Some(threshold) = self.log_level() else {
            return;
        };
        if level < threshold {
            return;
        }
        let params = LoggingMessageNotificationParams {
            level,
            logger: logger.map(str::to_owned),
            data,
            meta: None,
        };
        let _ = self
            .peer
            .notify_related(methods::NOTIFICATIONS_MESSAGE, &params, Some(&self.id))
            .await;
    }

    /// End, for now, the stream that carries this request's answer, so that the client
    /// resumes it later (2025-11-25 SSE polling over Streamable HTTP: the client reconnects
    /// with `Last-Event-ID` and receives what was sent meanwhile, the answer included).
    /// Handy before long work that needs no open connection. Transports without resumable
    /// streams ignore it, and so does 2026-07-28, whose streams do not resume.
    pub async fn close_stream(&self) {
        if self.version.map(ProtocolVersion::era) == Some(moat_protocol::Era::Modern) {
            return;
        }
        self.peer.hang_up(&self.id).await;
    }

    /// Ask the client's LLM for a completion (`sampling/createMessage`). In the handshake era
    /// this is a request to the client; in 2026-07-28 it becomes an input request of a
    /// multi-round-trip answer, transparently.
    ///
    /// Fails with [`Error::ClientLacks`] if the client did not declare `sampling`. In
    /// 2026-07-28, a handler that then fails (an error, or an `isError` tool result) is
    /// answered with `MissingRequiredClientCapabilityError` (-32021) naming the capability,
    /// as the revision requires; a handler that falls back to something else succeeds.
    pub async fn create_message(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, Error> {
        self.input(None, InputRequest::CreateMessage(params)).await
    }

    /// Ask the user for input (`elicitation/create`), as [`create_message`](Self::create_message) does.
    pub async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, Error> {
        self.input(None, InputRequest::Elicit(params)).await
    }

    /// Ask the client for its roots (`roots/list`), as [`create_message`](Self::create_message) does.
    pub async fn list_roots(&self) -> Result<ListRootsResult, Error> {
        self.input(None, InputRequest::ListRoots(None)).await
    }

    /// Name the next request to the client: in 2026-07-28, `key` is its key in the
    /// `inputRequests` of the multi-round-trip answer (and in the client's
    /// `inputResponses`); in the handshake era it is not sent anywhere. Without a name, a
    /// request is keyed by kind and call order (`elicitation-0`, `sampling-1`, …). Keys must
    /// be unique within a request.
    ///
    /// ```no_run
    /// # async fn f(ctx: moat::RequestContext, params: moat::types::ElicitRequestParams) -> moat::Result<()> {
    /// let answer = ctx.keyed("user_name").elicit(params).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// Requests made together (with `tokio::join!`) go to the client together, in one
    /// `InputRequiredResult`.
    pub fn keyed(&self, key: impl Into<String>) -> Keyed<'_> {
        Keyed {
            ctx: self,
            key: key.into(),
        }
    }

    /// The task this handler runs as, if it does: a call of a task-capable tool (see
    /// [`Server::task_tool`](crate::Server::task_tool)) that became one.
    pub fn task(&self) -> Option<TaskHandle> {
        self.current_task().map(TaskHandle)
    }

    /// Answer the request now with a task, and go on as that task: from here on the client
    /// polls for the result, and input requests go to the task (`input_required`,
    /// answered with `tasks/update`) rather than to multi-round-trip results. For a
    /// task-capable tool started with [`TaskStart::Manual`](crate::server::TaskStart) (or
    /// before the time of [`TaskStart::After`](crate::server::TaskStart)): gather input
    /// first, then hand the long part off. Returns whether the handler now runs as a task;
    /// `false` when it cannot (the client did not accept tasks, the tool is not
    /// task-capable, the server has no room), in which case it goes on answering
    /// synchronously.
    pub async fn continue_as_task(&self) -> bool {
        match self.round.as_ref().and_then(|r| r.launch()) {
            Some(launch) => launch.request().await,
            None => false,
        }
    }

    pub(crate) fn current_task(&self) -> Option<Arc<TaskEntry>> {
        self.round.as_ref()?.launch()?.task()
    }

    /// Servers must not ask for what the client did not declare: nor an elicitation in a
    /// mode it did not declare (an empty `elicitation` is form mode alone). A missing mode
    /// is named `elicitation.url` / `elicitation.form` (nested in `requiredCapabilities`).
    fn require(&self, request: &InputRequest) -> Result<(), Error> {
        let caps = self.client_capabilities();
        let lacking: Option<&'static str> = match request {
            InputRequest::CreateMessage(_) => caps
                .is_none_or(|c| c.sampling.is_none())
                .then_some("sampling"),
            InputRequest::Elicit(params) => {
                match (caps.and_then(|c| c.elicitation.as_ref()), params) {
                    (None, _) => Some("elicitation"),
                    (Some(e), ElicitRequestParams::Url(_)) => {
                        e.url.is_none().then_some("elicitation.url")
                    }
                    (Some(e), ElicitRequestParams::Form(_)) => {
                        (e.form.is_none() && e.url.is_some()).then_some("elicitation.form")
                    }
                    // A mode of a later revision: the client decides.
                    (Some(_), _) => None,
                }
            }
            InputRequest::ListRoots(_) => caps.is_none_or(|c| c.roots.is_none()).then_some("roots"),
            _ => None,
        };
        let Some(what) = lacking else {
            return Ok(());
        };
        if let Some(task) = self.current_task() {
            task.lacks(what);
        } else if let Some(round) = &self.round {
            round.lacks(what);
        }
        Err(Error::ClientLacks(what))
    }

    async fn input<R: serde::de::DeserializeOwned>(
        &self,
        key: Option<String>,
        request: InputRequest,
    ) -> Result<R, Error> {
        self.require(&request)?;
        let method = request.method().to_owned();
        if let Some(task) = self.current_task() {
            return self.task_input(task, key, request).await;
        }
        let Some(round) = &self.round else {
            let answer = self.send_input(&request, None).await?;
            return serde_json::from_value(answer).map_err(|e| Error::Decode {
                method,
                detail: e.to_string(),
            });
        };
        let key = key.unwrap_or_else(|| round.next_key(&request));
        let answer = match round.answered(&key) {
            Some(answer) => answer,
            None => {
                // Unanswered: to the task, if the request just became one; else to the
                // multi-round-trip result.
                if let Some(task) = round.launch().and_then(|l| l.route_input()) {
                    return self.task_input(task, Some(key), request).await;
                }
                round.ask(key.clone(), request).await
            }
        };
        match serde_json::from_value(answer) {
            Ok(answer) => Ok(answer),
            // The client's answer is input like any other: one of the wrong shape fails
            // the request, rather than reaching the handler as an error it might swallow.
            Err(e) => round
                .fail(ErrorObject::invalid_params(format!(
                    "Invalid params: inputResponses[{key:?}] is not a valid {method} result: {e}"
                )))
                .await,
        }
    }

    /// Send an input request to the client as a request on the connection (the handshake
    /// era), with `_meta` added to its params if given.
    async fn send_input(
        &self,
        request: &InputRequest,
        meta: Option<(&str, serde_json::Value, RequestId)>,
    ) -> Result<serde_json::Value, Error> {
        let method = request.method();
        let related = meta.as_ref().map_or(&self.id, |(_, _, id)| id).clone();
        let options = RequestOptions::default().related_to(related);
        let mut params = match request {
            InputRequest::CreateMessage(p) => serde_json::to_value(p),
            InputRequest::Elicit(p) => serde_json::to_value(p),
            _ => serde_json::to_value(RequestParams::default()),
        }
        .map_err(|e| Error::Decode {
            method: method.to_owned(),
            detail: e.to_string(),
        })?;
        if let (Some((key, value, _)), serde_json::Value::Object(map)) = (meta, &mut params) {
            let m = map
                .entry("_meta")
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if let serde_json::Value::Object(m) = m {
                m.insert(key.to_owned(), value);
            }
        }
        self.peer.request_with(method, &params, options).await
    }

    /// An input request of a task: parked until `tasks/update` answers it (the tasks
    /// extension), or sent to the client marked with the task (2025-11-25); the task is
    /// `input_required` meanwhile.
    async fn task_input<R: serde::de::DeserializeOwned>(
        &self,
        task: Arc<TaskEntry>,
        key: Option<String>,
        request: InputRequest,
    ) -> Result<R, Error> {
        let method = request.method().to_owned();
        if task.is_legacy() {
            let related = task
                .client_request_started()
                .unwrap_or_else(|| self.id.clone());
            let meta = serde_json::json!({ "taskId": task.id });
            let answer = self
                .send_input(&request, Some((META_RELATED_TASK, meta, related)))
                .await;
            task.client_request_ended();
            return serde_json::from_value(answer?).map_err(|e| Error::Decode {
                method,
                detail: e.to_string(),
            });
        }
        let Ok(answer) = task.ask(key, request).await else {
            // The task ended (cancelled): its handler is about to be dropped.
            return std::future::pending().await;
        };
        match serde_json::from_value(answer) {
            Ok(answer) => Ok(answer),
            Err(e) => {
                TaskHandle(task)
                    .fail(ErrorObject::invalid_params(format!(
                        "Invalid params: the answer to {method} is not a valid result: {e}"
                    )))
                    .await
            }
        }
    }
}

/// A request to the client under a key of the handler's choosing; see
/// [`RequestContext::keyed`].
#[derive(Debug)]
pub struct Keyed<'a> {
    ctx: &'a RequestContext,
    key: String,
}

impl Keyed<'_> {
    /// [`RequestContext::create_message`], under this key.
    pub async fn create_message(
        self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, Error> {
        self.ctx
            .input(Some(self.key), InputRequest::CreateMessage(params))
            .await
    }

    /// [`RequestContext::elicit`], under this key.
    pub async fn elicit(self, params: ElicitRequestParams) -> Result<ElicitResult, Error> {
        self.ctx
            .input(Some(self.key), InputRequest::Elicit(params))
            .await
    }

    /// [`RequestContext::list_roots`], under this key.
    pub async fn list_roots(self) -> Result<ListRootsResult, Error> {
        self.ctx
            .input(Some(self.key), InputRequest::ListRoots(None))
            .await
    }
}

/// The client's name and version as a request knows them: the peer's, from `initialize`,
/// or this request's `_meta` (decoded the first time a handler asks).
#[derive(Clone, Debug)]
pub(crate) enum ClientInfo {
    Known,
    Raw(
        Arc<RawValue>,
        Arc<std::sync::OnceLock<Option<Arc<Implementation>>>>,
    ),
}

/// The client's capabilities as a request knows them: from `initialize` (already decoded),
/// or from this request's `_meta` (decoded the first time a handler asks: most never do).
#[derive(Clone, Debug)]
pub(crate) enum Capabilities {
    Known(Option<Arc<ClientCapabilities>>),
    Raw(Arc<RawValue>, Arc<std::sync::OnceLock<ClientCapabilities>>),
}
