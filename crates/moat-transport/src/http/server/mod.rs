//! The MCP HTTP server: one endpoint for Streamable HTTP in every revision, and the legacy
//! HTTP+SSE endpoints of 2024-11-05, on hyper.
//!
//! Each handshake-era session, each legacy session and each 2026-07-28 request becomes a
//! [`Connection`] handed to [`OnConnection`] (the SDK serves MCP on it); this module only
//! moves messages, checks headers and enforces limits.
//!
//! Safe by default: it binds to loopback, checks `Host` and `Origin` against an allow-list
//! (DNS rebinding), refuses to listen off loopback without a bearer token, bounds bodies,
//! headers, connections, streams and the time a client may take to send its headers, and
//! expires idle sessions.
//!
//! For load balancers and orchestrators: `GET /healthz` answers 200 while the server is ready
//! for requests and 503 while it starts or drains ([`Readiness`]), `GET /livez` 200 while the
//! process serves; neither needs a token or an allowed `Host` (they say nothing else). On
//! shutdown the server drains: it stops accepting, answers 503 on `/healthz`, ends the streams
//! that carry no answer (a client resumes or reconnects elsewhere), lets the requests in
//! flight finish within [`HttpServerOptions::drain_timeout`], then closes every session.

pub mod directory;
mod forward;
mod guard;
mod journal;
mod legacy;
mod modern;
mod remote;
mod resource;
mod session;
mod stream;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use moat_protocol::error::{
    ErrorObject, INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, SESSION_NOT_FOUND, TRANSPORT_ERROR,
};
use moat_protocol::jsonrpc::{self, Message};
use moat_protocol::session::{OwnedRequestHead, RequestHead};
use moat_protocol::version::SupportedVersions;
use moat_protocol::{Era, ProtocolVersion, RequestId};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub use directory::{
    DirectoryError, MemoryDirectory, Replica, Replication, SessionDirectory, SessionRecord,
    StoredEvent,
};
pub use forward::FORWARDED;
pub use modern::{SharedToolHeaders, ToolHeaders};
pub use resource::{
    INSUFFICIENT_SCOPE, Identity, IntrospectionOptions, IssuerOptions, MAX_SKEW, ResourceError,
    ResourceOptions, SIGNING_ALGORITHMS, insufficient_scope, key_fits,
};

use super::headers as h;
use crate::connection::Connection;
use crate::identity::SharedIdentity;
use guard::{Guard, Refusal};
use session::{Origin, Sessions};
use stream::{Opening, StreamBounds};

/// Receives each new connection: a handshake-era session, a legacy session, or a single
/// 2026-07-28 request. Whoever serves MCP starts a peer on it.
pub type OnConnection = Arc<dyn Fn(Connection) + Send + Sync>;

/// Settings of the HTTP server. The defaults are the safe ones.
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpServerOptions {
    /// The Streamable HTTP endpoint.
    pub endpoint: String,
    /// The legacy HTTP+SSE endpoints (SSE stream, message POST); `None` turns them off
    /// (as does `stateless`).
    pub legacy: Option<(String, String)>,
    /// Serve 2026-07-28 only: no sessions, GET and DELETE answer 405.
    pub stateless: bool,
    /// Host names accepted in `Host` and `Origin` besides the loopback names (which are
    /// always accepted when bound to loopback).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides those of allowed hosts.
    pub allowed_origins: Vec<String>,
    /// The bearer token every request must carry. Required to bind off loopback.
    pub token: Option<String>,
    /// Accept OAuth access tokens from an authorization server instead of a static token
    /// (a resource server, RFC 9728). Allows listening off loopback.
    pub resource: Option<ResourceOptions>,
    /// Listen off loopback without a token (for a trusted network behind a proxy that
    /// authenticates). Off by default.
    pub allow_unauthenticated: bool,
    /// Largest request body, in bytes (413 beyond).
    pub max_body_bytes: usize,
    /// Largest request head (request line and headers), in bytes.
    pub max_header_bytes: usize,
    /// How long a client may take to send its request head.
    pub header_timeout: Duration,
    /// How long a client may take to send its request body (408 beyond).
    pub body_timeout: Duration,
    /// Most TCP connections served at once; more wait to be accepted.
    pub max_connections: usize,
    /// Most live sessions; `initialize` beyond is refused with 503.
    pub max_sessions: usize,
    /// A session with no request and no open stream for this long is closed.
    pub session_idle_timeout: Duration,
    /// The reconnection delay suggested to SSE clients (`retry`), 2025-11-25 onwards.
    pub sse_retry: Duration,
    /// How often an idle SSE stream gets a comment, to keep intermediaries from closing it.
    pub keepalive: Duration,
    /// Queue length of each connection handed to MCP.
    pub queue: usize,
    /// Bytes of messages one SSE stream may hold for a client that does not read them;
    /// beyond, the stream is ended (memory stays bounded whatever clients do).
    pub sse_buffer_bytes: usize,
    /// The revisions accepted in `MCP-Protocol-Version`.
    pub versions: SupportedVersions,
    /// Which tool arguments are mirrored into `Mcp-Param-*` headers (2026-07-28).
    pub tool_headers: SharedToolHeaders,
    /// On shutdown, how long requests in flight may take to finish before their sessions
    /// are closed under them.
    pub drain_timeout: Duration,
    /// Answer `GET /healthz` and `GET /livez` (see the module documentation).
    pub health: bool,
    /// Told the status code of every response as its head goes out (for metrics).
    pub on_response: Option<ResponseHook>,
    /// Serve as one of several replicas sharing a session directory: a request for a
    /// session another replica holds is forwarded there, or the session taken over when
    /// that replica is gone (see [`directory`]).
    pub replication: Option<Replication>,
}

/// Told the status code of each response ([`HttpServerOptions::on_response`]).
pub type ResponseHook = Arc<dyn Fn(u16) + Send + Sync>;

impl Default for HttpServerOptions {
    fn default() -> Self {
        HttpServerOptions {
            endpoint: "/mcp".into(),
            legacy: Some(("/sse".into(), "/message".into())),
            stateless: false,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            token: None,
            resource: None,
            allow_unauthenticated: false,
            max_body_bytes: crate::Limits::default().max_message_bytes,
            max_header_bytes: 64 * 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_sessions: 10_000,
            session_idle_timeout: Duration::from_secs(30 * 60),
            sse_retry: Duration::from_millis(1000),
            keepalive: Duration::from_secs(15),
            queue: 256,
            sse_buffer_bytes: StreamBounds::default().max_queued_bytes,
            versions: SupportedVersions::default(),
            tool_headers: None,
            drain_timeout: Duration::from_secs(10),
            health: true,
            on_response: None,
            replication: None,
        }
    }
}

impl std::fmt::Debug for HttpServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServerOptions")
            .field("endpoint", &self.endpoint)
            .field("legacy", &self.legacy)
            .field("stateless", &self.stateless)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("resource", &self.resource)
            .field("replication", &self.replication)
            .finish_non_exhaustive()
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpServerError {
    /// Binding the address failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// Off loopback, a bearer token is required.
    #[error(
        "refusing to listen on {0} without a bearer token: anyone on the network could use the \
         server. Set a token (--token), or bind to 127.0.0.1"
    )]
    TokenRequired(SocketAddr),
    /// The OAuth resource server settings are unusable.
    #[error("OAuth resource server: {0}")]
    Resource(#[from] ResourceError),
}

/// The liveness path: 200 while the process serves.
pub const LIVE_PATH: &str = "/livez";
/// The readiness path: 200 when ready for requests, 503 while starting or draining.
pub const READY_PATH: &str = "/healthz";

/// Whether the server tells `/healthz` it is ready. Ready from the start unless the
/// application says otherwise (a gateway whose servers are still starting); never ready
/// again once draining.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<ReadinessState>);

#[derive(Debug, Default)]
struct ReadinessState {
    not_ready: std::sync::atomic::AtomicBool,
    draining: std::sync::atomic::AtomicBool,
}

impl Readiness {
    /// Say whether the application is ready (it is, unless told otherwise).
    pub fn set_ready(&self, ready: bool) {
        self.0
            .not_ready
            .store(!ready, std::sync::atomic::Ordering::Release);
    }

    /// Whether the server is draining (shutting down).
    pub fn is_draining(&self) -> bool {
        self.0.draining.load(std::sync::atomic::Ordering::Acquire)
    }

    fn drain(&self) {
        self.0
            .draining
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// What `/healthz` says: `ready`, `starting` or `draining`.
    pub fn status(&self) -> &'static str {
        use std::sync::atomic::Ordering::Acquire;
        if self.0.draining.load(Acquire) {
            "draining"
        } else if self.0.not_ready.load(Acquire) {
            "starting"
        } else {
            "ready"
        }
    }
}

struct Shared {
    options: HttpServerOptions,
    readiness: Readiness,
    guard: Guard,
    authorizer: Option<resource::Authorizer>,
    on_connection: OnConnection,
    sessions: Arc<Sessions>,
    bounds: StreamBounds,
    replication: Option<Replication>,
    /// Reaches the other replicas (with [`HttpServerOptions::replication`]).
    forwarder: Option<reqwest::Client>,
    /// Held while a session is taken over.
    takeovers: tokio::sync::Mutex<()>,
    /// Where sessions forwarded to lately live.
    owners: remote::Owners,
    /// Turns true when the server drains (relayed streams end with it).
    draining: tokio::sync::watch::Sender<bool>,
    /// Writes resumable streams' events to the directory (with replication).
    journal: Option<Arc<journal::Journal>>,
}

/// Reports on a running [`HttpServer`].
#[derive(Clone)]
pub struct HttpServerHandle {
    sessions: std::sync::Weak<Sessions>,
}

impl std::fmt::Debug for HttpServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServerHandle")
            .field("live_sessions", &self.live_sessions())
            .finish()
    }
}

impl HttpServerHandle {
    /// Sessions alive now (handshake era and legacy); 0 once the server has stopped.
    pub fn live_sessions(&self) -> usize {
        self.sessions.upgrade().map_or(0, |s| s.len())
    }
}

/// A bound server, ready to run.
pub struct HttpServer {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.listener.local_addr().ok())
            .finish()
    }
}

impl HttpServer {
    /// Bind `addr` (port 0 picks a free one).
    pub async fn bind(
        addr: SocketAddr,
        options: HttpServerOptions,
        on_connection: OnConnection,
    ) -> Result<HttpServer, HttpServerError> {
        let loopback = addr.ip().is_loopback();
        if !loopback
            && options.token.is_none()
            && options.resource.is_none()
            && !options.allow_unauthenticated
        {
            return Err(HttpServerError::TokenRequired(addr));
        }
        if options.token.is_some() && options.resource.is_some() {
            return Err(ResourceError::WithStaticToken.into());
        }
        let authorizer = options
            .resource
            .clone()
            .map(resource::Authorizer::new)
            .transpose()?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpServerError::Bind { addr, source })?;
        let mut hosts = options.allowed_hosts.clone();
        if loopback {
            hosts.extend(["localhost", "127.0.0.1", "[::1]"].map(String::from));
        }
        let guard = Guard {
            hosts,
            origins: options.allowed_origins.clone(),
            token: options.token.clone(),
        };
        let replication = options.replication.clone();
        let tag = match &replication {
            Some(r) => r.replica.id.clone(),
            None => format!("{:06x}", rand::random::<u32>() & 0xff_ffff),
        };
        let journal = replication
            .as_ref()
            .map(|r| journal::Journal::start(r.directory.clone()));
        Ok(HttpServer {
            listener,
            shared: Arc::new(Shared {
                guard,
                authorizer,
                on_connection,
                sessions: Arc::new(Sessions::new(&tag, journal.clone())),
                journal,
                forwarder: replication.as_ref().map(|_| forward::client()),
                replication,
                takeovers: tokio::sync::Mutex::new(()),
                owners: remote::Owners::default(),
                draining: tokio::sync::watch::Sender::new(false),
                readiness: Readiness::default(),
                bounds: StreamBounds {
                    max_queued_bytes: options.sse_buffer_bytes.max(1),
                    ..StreamBounds::default()
                },
                options,
            }),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// What `/healthz` answers, for the application to set.
    pub fn readiness(&self) -> Readiness {
        self.shared.readiness.clone()
    }

    /// A handle that reports on the server while it runs.
    pub fn handle(&self) -> HttpServerHandle {
        HttpServerHandle {
            sessions: Arc::downgrade(&self.shared.sessions),
        }
    }

    /// Serve until the process ends.
    pub async fn run(self) -> std::io::Result<()> {
        self.run_until(std::future::pending()).await
    }

    /// Serve until `shutdown` resolves; then drain (see the module documentation) and close
    /// every session.
    pub async fn run_until(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> std::io::Result<()> {
        let shared = self.shared.clone();
        let reaper = tokio::spawn(reap(Arc::downgrade(&shared), {
            let idle = shared.options.session_idle_timeout;
            // Replicas also learn this often of sessions taken over from them.
            let most = if shared.replication.is_some() {
                CHECK_OWNERSHIP
            } else {
                Duration::from_secs(30)
            };
            (idle, (idle / 4).clamp(Duration::from_millis(50), most))
        }));
        let slots = Arc::new(Semaphore::new(shared.options.max_connections.max(1)));
        let connections = hyper_util::server::graceful::GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                _ = &mut shutdown => break,
                p = slots.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let accepted = tokio::select! {
                _ = &mut shutdown => break,
                a = self.listener.accept() => a,
            };
            let (tcp, _) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let shared = shared.clone();
            let watcher = connections.watcher();
            tokio::spawn(async move {
                let header_timeout = shared.options.header_timeout;
                let max_head = shared.options.max_header_bytes.max(8192);
                let service = hyper::service::service_fn(move |req| {
                    let shared = shared.clone();
                    async move {
                        let response = handle(&shared, req).await;
                        if let Some(hook) = &shared.options.on_response {
                            hook(response.status().as_u16());
                        }
                        Ok::<_, Infallible>(response)
                    }
                });
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    .max_buf_size(max_head);
                let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(tcp), service);
                if let Err(e) = watcher.watch(conn).await {
                    tracing::debug!(error = %e, "HTTP connection ended with an error");
                }
                drop(permit);
            });
        }
        // Drain: new connections are refused from here (a load balancer retries them on
        // another replica), idle ones close, streams that carry no answer end, and the
        // requests in flight get `drain_timeout` to finish.
        drop(self.listener);
        shared.readiness.drain();
        shared.sessions.end_idle_streams();
        shared.draining.send_replace(true);
        let in_flight = shared.sessions.len();
        let drained = tokio::time::timeout(shared.options.drain_timeout, connections.shutdown())
            .await
            .is_ok();
        if !drained {
            tracing::warn!(
                sessions = in_flight,
                "requests were still in flight after the drain timeout; closing their sessions"
            );
        }
        reaper.abort();
        shared.sessions.close_all();
        if let Some(journal) = &shared.journal {
            // The replicas taking these sessions over replay from what is written.
            journal.flush().await;
        }
        Ok(())
    }
}

/// How often a replica asks the directory which of its sessions another replica took over
/// (while this one could not be reached), and drops its copies of them.
const CHECK_OWNERSHIP: Duration = Duration::from_secs(2);

async fn reap(shared: std::sync::Weak<Shared>, (idle, every): (Duration, Duration)) {
    loop {
        tokio::time::sleep(every).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let expired = shared.sessions.expire(idle);
        if let Some(replication) = &shared.replication {
            for id in &expired {
                remote::forget(&shared, id, true).await;
            }
            // Records no replica has touched for a while belong to sessions nobody took
            // over after their replica died.
            let live = shared.sessions.ids();
            match replication
                .directory
                .touch(&live, &replication.replica.id, idle * 2)
                .await
            {
                Ok(elsewhere) => {
                    for id in elsewhere {
                        // Taken over while this replica could not be reached: its copy is
                        // stale, and the session's requests belong to the new owner.
                        tracing::info!(
                            session = %id,
                            "another replica took this session over; dropping the copy here"
                        );
                        shared.sessions.close(&id);
                    }
                }
                Err(e) => tracing::warn!("refreshing the session directory failed: {e}"),
            }
        }
    }
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = status;
    r
}

fn json_response(status: StatusCode, json: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(full(json));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// An HTTP error with a JSON-RPC error body (`id` when known).
fn error(
    status: StatusCode,
    code: i64,
    message: impl Into<String>,
    id: Option<&RequestId>,
) -> Response<Body> {
    let err = ErrorObject::new(code, message.into());
    json_response(status, jsonrpc::encode_error(id, &err))
}

fn bad_request(message: impl Into<String>) -> Response<Body> {
    error(StatusCode::BAD_REQUEST, TRANSPORT_ERROR, message, None)
}

fn bad_request_for(id: Option<&RequestId>, message: impl Into<String>) -> Response<Body> {
    error(StatusCode::BAD_REQUEST, TRANSPORT_ERROR, message, id)
}

fn sse_response(
    body: impl hyper::body::Body<Data = Bytes, Error = Infallible> + Send + 'static,
) -> Response<Body> {
    let mut r = Response::new(body.boxed_unsync());
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

fn with_session(mut r: Response<Body>, id: &str) -> Response<Body> {
    if let Ok(v) = HeaderValue::from_str(id) {
        r.headers_mut().insert(h::SESSION_ID, v);
    }
    r
}

/// `/livez` and `/healthz`, before any check: probes come from the orchestrator, by address,
/// without a token, and learn nothing but the status.
fn health(shared: &Shared, req: &Request<Incoming>) -> Option<Response<Body>> {
    if !shared.options.health || !matches!(*req.method(), Method::GET | Method::HEAD) {
        return None;
    }
    let path = req.uri().path();
    if path == shared.options.endpoint {
        return None;
    }
    let (status, text) = match path {
        LIVE_PATH => (StatusCode::OK, "alive"),
        READY_PATH => match shared.readiness.status() {
            "ready" => (StatusCode::OK, "ready"),
            other => (StatusCode::SERVICE_UNAVAILABLE, other),
        },
        _ => return None,
    };
    let body = format!("{{\"status\":\"{text}\"}}\n");
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Some(r)
}

async fn handle(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    if let Some(r) = health(shared, &req) {
        return r;
    }
    if let Err(refusal) = shared.guard.check(req.headers()) {
        return match refusal {
            Refusal::Forbidden(m) => error(StatusCode::FORBIDDEN, TRANSPORT_ERROR, m, None),
            Refusal::Unauthorized { message, challenge } => {
                let mut r = error(StatusCode::UNAUTHORIZED, TRANSPORT_ERROR, message, None);
                if let Ok(v) = HeaderValue::from_str(&challenge) {
                    r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
                }
                r
            }
        };
    }
    let mut req = req;
    if let Some(authorizer) = &shared.authorizer {
        if let Some(r) = resource_metadata(authorizer, &req) {
            return r;
        }
        match authorizer.check(req.headers()).await {
            // The identity rides with the request to whichever handler takes it.
            Ok(identity) => {
                tracing::debug!(subject = ?identity.subject, client = ?identity.client_id, "access token accepted");
                req.extensions_mut().insert(Caller(Arc::new(identity)));
            }
            Err(denial) => {
                let c = authorizer.challenge(&denial);
                let mut r = error(c.status, TRANSPORT_ERROR, c.message, None);
                if let Ok(v) = HeaderValue::from_str(&c.header) {
                    r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
                }
                return r;
            }
        }
    }
    let path = req.uri().path();
    let opts = &shared.options;
    if path == opts.endpoint {
        return match *req.method() {
            Method::POST => post(shared, req).await,
            Method::GET => get(shared, req).await,
            Method::DELETE => delete(shared, req).await,
            _ => not_allowed(shared),
        };
    }
    // Legacy sessions are sessions: a stateless server has none.
    if let Some((sse, message)) = opts.legacy.as_ref().filter(|_| !opts.stateless) {
        let (on_sse, on_message) = (path == sse, path == message);
        match *req.method() {
            Method::GET if on_sse => return legacy::open(shared, &req, message).await,
            Method::POST if on_message => return legacy::post(shared, req).await,
            // The path exists, the method does not: 405, which is what sends a client
            // POSTing to the SSE URL (the spec's auto-detection) on to the GET.
            _ if on_sse || on_message => {
                let allow = match (on_sse, on_message) {
                    (true, true) => "GET, POST",
                    (true, false) => "GET",
                    _ => "POST",
                };
                return legacy::not_allowed(allow);
            }
            _ => {}
        }
    }
    error(
        StatusCode::NOT_FOUND,
        TRANSPORT_ERROR,
        format!("Not found: the MCP endpoint is {}", opts.endpoint),
        None,
    )
}

/// A handler's refusal of a caller lacking a tool's scopes, as the 403 that asks the client
/// to step up; `None` for any other answer (or without OAuth, when there is no challenge to
/// make).
fn step_up(shared: &Shared, answer: &str) -> Option<Response<Body>> {
    let authorizer = shared.authorizer.as_ref()?;
    let needed = resource::scopes_needed(answer)?;
    let c = authorizer.step_up(needed);
    let mut r = json_response(c.status, answer.to_owned());
    if let Ok(v) = HeaderValue::from_str(&c.header) {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    Some(r)
}

/// The identity the resource server found behind a request's token, kept in the request's
/// extensions on its way to MCP.
#[derive(Clone)]
struct Caller(SharedIdentity);

fn caller_of(extensions: &http::Extensions) -> Option<SharedIdentity> {
    extensions.get::<Caller>().map(|c| c.0.clone())
}

/// A GET of the Protected Resource Metadata, answered without a token.
fn resource_metadata(
    authorizer: &resource::Authorizer,
    req: &Request<Incoming>,
) -> Option<Response<Body>> {
    let path = req.uri().path();
    if req.method() != Method::GET
        || !resource::well_known_paths(authorizer.resource())
            .iter()
            .any(|p| p == path)
    {
        return None;
    }
    let mut r = json_response(StatusCode::OK, authorizer.metadata_json().to_owned());
    r.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    Some(r)
}

fn not_allowed(shared: &Shared) -> Response<Body> {
    let mut r = error(
        StatusCode::METHOD_NOT_ALLOWED,
        TRANSPORT_ERROR,
        "Method not allowed",
        None,
    );
    let allow = if shared.options.stateless {
        "POST"
    } else {
        "GET, POST, DELETE"
    };
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// What the `Accept` header allows.
struct Accepts {
    json: bool,
    sse: bool,
}

fn accepts(req: &Request<Incoming>) -> Accepts {
    let mut a = Accepts {
        json: false,
        sse: false,
    };
    for value in req.headers().get_all(header::ACCEPT) {
        for part in value.to_str().unwrap_or("").split(',') {
            let media = part.split(';').next().unwrap_or("").trim();
            match media {
                "application/json" | "application/*" => a.json = true,
                "text/event-stream" => a.sse = true,
                "*/*" => {
                    a.json = true;
                    a.sse = true;
                }
                _ => {}
            }
        }
    }
    if req.headers().get(header::ACCEPT).is_none() {
        // No preference stated: anything goes.
        a.json = true;
        a.sse = true;
    }
    a
}

/// Read a request body within the size and time limits, as UTF-8 text.
async fn read_body(
    shared: &Shared,
    headers: &http::HeaderMap,
    body: Incoming,
) -> Result<String, Response<Body>> {
    let max = shared.options.max_body_bytes;
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            INVALID_REQUEST,
            format!("Payload too large: the limit is {max} bytes"),
            None,
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let collect = Limited::new(body, max).collect();
    let bytes = match tokio::time::timeout(shared.options.body_timeout, collect).await {
        Err(_) => {
            return Err(error(
                StatusCode::REQUEST_TIMEOUT,
                INVALID_REQUEST,
                "Request timeout: the body took too long to arrive",
                None,
            ));
        }
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return Err(too_large());
        }
        Ok(Err(e)) => {
            return Err(bad_request(format!(
                "Bad request: reading the body failed: {e}"
            )));
        }
        Ok(Ok(c)) => c.to_bytes(),
    };
    String::from_utf8(bytes.to_vec()).map_err(|_| {
        error(
            StatusCode::BAD_REQUEST,
            PARSE_ERROR,
            "Parse error: the body is not valid UTF-8",
            None,
        )
    })
}

/// The requests in a body (one message or a batch), or the error to answer with.
struct Parsed {
    requests: Vec<RequestId>,
    /// The single request's head, read once here: the checks look at it, and the session
    /// gets it without reading the params again.
    single: Option<OwnedRequestHead>,
    /// Whether anything in it is a response (the client answering our request).
    has_response: bool,
    batch: bool,
}

// The error is the HTTP answer itself, built once on a cold path: boxing it buys nothing.
#[allow(clippy::result_large_err)]
fn parse(text: &str) -> Result<Parsed, Response<Body>> {
    let invalid = |e: jsonrpc::EnvelopeError| {
        json_response(
            StatusCode::BAD_REQUEST,
            jsonrpc::encode_error(e.id.as_ref(), &e.error),
        )
    };
    let mut parsed = Parsed {
        requests: Vec::new(),
        single: None,
        has_response: false,
        batch: false,
    };
    if jsonrpc::is_batch(text) {
        parsed.batch = true;
        for item in Message::parse_batch(text).map_err(invalid)? {
            match item.map_err(invalid)? {
                Message::Request(r) => parsed.requests.push(r.id),
                Message::Response(_) | Message::Error(_) => parsed.has_response = true,
                _ => {}
            }
        }
        return Ok(parsed);
    }
    match Message::parse(text).map_err(invalid)? {
        Message::Request(r) => {
            parsed.requests.push(r.id.clone());
            parsed.single = Some(RequestHead::read(r.id, r.method, r.params).into_owned());
        }
        Message::Response(_) | Message::Error(_) => parsed.has_response = true,
        _ => {}
    }
    Ok(parsed)
}

async fn post(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let content_type_ok = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if !content_type_ok {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            TRANSPORT_ERROR,
            "Unsupported media type: the body must be application/json",
            None,
        );
    }
    let accept = accepts(&req);
    if !accept.json {
        return error(
            StatusCode::NOT_ACCEPTABLE,
            TRANSPORT_ERROR,
            "Not acceptable: the client must accept application/json and text/event-stream",
            None,
        );
    }
    let session_header = req
        .headers()
        .get(h::SESSION_ID)
        .map(|v| v.to_str().unwrap_or("").to_owned());
    let version_header = req
        .headers()
        .get(h::PROTOCOL_VERSION)
        .map(|v| v.to_str().unwrap_or("").to_owned());
    let (head, body) = req.into_parts();
    let caller = caller_of(&head.extensions);
    let target = head
        .uri
        .path_and_query()
        .map_or_else(|| head.uri.path().to_owned(), |p| p.as_str().to_owned());
    let headers = head.headers;
    let text = match read_body(shared, &headers, body).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let parsed = match parse(&text) {
        Ok(p) => p,
        Err(r) => return r,
    };

    // 2026-07-28: a request whose `_meta` or header names a modern revision.
    let single = parsed.single.as_ref().map(OwnedRequestHead::view);
    let body_version = single
        .as_ref()
        .and_then(|h| h.meta.protocol_version.as_deref().map(str::to_owned));
    let is_initialize = single.as_ref().is_some_and(RequestHead::is_initialize);
    let request_id = parsed.single.as_ref().map(|h| h.id().clone());
    let header_era = version_header
        .as_deref()
        .map(|v| ProtocolVersion::parse(v).map(ProtocolVersion::era));
    // Which era is this request in? A session, a handshake-era header, or a bare body
    // (2025-03-26 clients send no header) mean the handshake era; any other header or a
    // `_meta` revision means 2026-07-28 rules, including the -32022 answer to a revision
    // nobody knows.
    let handshake = match header_era {
        Some(Some(Era::Handshake)) => true,
        Some(_) => false,
        None => session_header.is_some() || body_version.is_none(),
    };
    if shared.options.stateless || !handshake {
        return post_modern(shared, &headers, text, parsed, accept, caller).await;
    }
    if let Some(v) = &version_header {
        let ok = ProtocolVersion::parse(v)
            .is_some_and(|v| v.era() == Era::Handshake && shared.options.versions.contains(v));
        if !ok {
            return bad_request_for(
                request_id.as_ref(),
                format!(
                    "Bad request: unsupported MCP-Protocol-Version {v:?} (supported: {})",
                    shared
                        .options
                        .versions
                        .as_slice()
                        .iter()
                        .filter(|v| v.era() == Era::Handshake)
                        .map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
    }

    let (session, fresh) = match (&session_header, is_initialize) {
        (Some(id), _) => match shared.sessions.get(id, caller.as_deref()) {
            Some(s) => (s, false),
            None => {
                let away = Away {
                    method: Method::POST,
                    target: &target,
                    headers: &headers,
                    body: &text,
                    awaited: &parsed.requests,
                };
                match elsewhere(shared, id, caller.as_ref(), away).await {
                    Elsewhere::Here(s) => (s, false),
                    Elsewhere::Answered(r) => return r,
                }
            }
        },
        (None, true) => {
            if shared.sessions.len() >= shared.options.max_sessions {
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    TRANSPORT_ERROR,
                    "Service unavailable: too many sessions; retry later",
                    None,
                );
            }
            let (session, conn) = shared.sessions.open(
                shared.bounds,
                shared.options.queue,
                caller.as_deref(),
                false,
            );
            (shared.on_connection)(conn);
            (session, true)
        }
        (None, false) => {
            return bad_request_for(
                request_id.as_ref(),
                "Bad request: the Mcp-Session-Id header is required (initialize first)",
            );
        }
    };

    if let Some(change) = parsed
        .single
        .as_ref()
        .and_then(|h| remote::change_of(&h.view().method, &text))
    {
        remote::record_change(shared, &session.id, change).await;
    }
    if parsed.requests.is_empty() {
        return match session.deliver(text, Origin::of(caller, &headers)).await {
            Ok(()) => empty(StatusCode::ACCEPTED),
            Err(_) => error(
                StatusCode::NOT_FOUND,
                SESSION_NOT_FOUND,
                "Session not found",
                None,
            ),
        };
    }
    // SSE polling (priming events, `retry`, hanging up) is a 2025-11-25 feature of the
    // session, whatever revision a later request's header names.
    let negotiated_new = session
        .version()
        .or_else(|| version_header.as_deref().and_then(ProtocolVersion::parse))
        .is_some_and(|v| v >= ProtocolVersion::V2025_11_25);
    let stream = session.post_stream(&parsed.requests, accept.sse);
    if negotiated_new && accept.sse {
        stream.allow_hang_up();
    }
    // A single request goes on as the head read above; anything else as its text.
    // A new session's record needs the client's `initialize` parameters.
    let init_params = (fresh && shared.replication.is_some())
        .then(|| params_of(&text))
        .flatten();
    let opener = caller.clone();
    let origin = Origin::of(caller, &headers);
    let delivered = match parsed.single {
        Some(head) => session.deliver_request(head.with_line(text), origin).await,
        None => session.deliver(text, origin).await,
    };
    if delivered.is_err() {
        return error(
            StatusCode::NOT_FOUND,
            SESSION_NOT_FOUND,
            "Session not found",
            None,
        );
    }
    stream.first_event().await;
    let response = if let Some(json) = stream.take_single() {
        step_up(shared, &json).unwrap_or_else(|| json_response(StatusCode::OK, json.to_string()))
    } else if accept.sse {
        let opening = Opening {
            prime: negotiated_new,
            retry: negotiated_new.then_some(shared.options.sse_retry),
            keepalive: Some(shared.options.keepalive),
            ..Opening::default()
        };
        sse_response(stream.body(0, opening))
    } else {
        match stream.take_last().await {
            Some(json) => json_response(StatusCode::OK, json.to_string()),
            None => error(
                StatusCode::INTERNAL_SERVER_ERROR,
                INTERNAL_ERROR,
                "the session ended before answering",
                None,
            ),
        }
    };
    // An initialize whose session ended before it was answered leaves no session behind.
    if fresh && response.status() != StatusCode::OK {
        shared.sessions.close(&session.id);
        return response;
    }
    if fresh && let Some(replication) = &shared.replication {
        let mut record = directory::SessionRecord::new(&session.id, replication.replica.clone());
        record.version = session
            .version()
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default();
        record.initialize = init_params.unwrap_or_default();
        record.user = session::user_of(opener.as_deref());
        remote::register(shared, record).await;
    }
    with_session(response, &session.id)
}

async fn post_modern(
    shared: &Shared,
    headers: &http::HeaderMap,
    text: String,
    parsed: Parsed,
    accept: Accepts,
    caller: Option<SharedIdentity>,
) -> Response<Body> {
    if parsed.batch {
        return error(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "Invalid request: 2026-07-28 does not allow JSON-RPC batches",
            None,
        );
    }
    if parsed.has_response {
        return error(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "Invalid request: 2026-07-28 clients send no responses over HTTP (input goes in inputResponses)",
            None,
        );
    }
    let Some(head) = parsed.single else {
        // A notification: nothing in 2026-07-28 needs one over HTTP.
        return empty(StatusCode::ACCEPTED);
    };
    let id = head.id().clone();
    let view = head.view();
    // An `initialize` is no 2026-07-28 request, so there are no headers to hold it to: the
    // core refuses it on a connection that ends after one request, naming the revisions
    // to retry in.
    if !view.is_initialize()
        && let Err(err) = modern::validate(headers, &view, shared.options.tool_headers.as_deref())
    {
        return json_response(
            StatusCode::BAD_REQUEST,
            jsonrpc::encode_error(Some(&id), &err),
        );
    }
    drop(view);
    let origin = Origin::of(caller, headers);
    let Some(exchange) = modern::start(head.with_line(text), origin, &shared.on_connection).await
    else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            INTERNAL_ERROR,
            "Internal error: the request ended without an answer",
            Some(&id),
        );
    };
    if let Some(error) = modern::answer_of(&exchange.first) {
        let mut exchange = exchange;
        exchange.rest.cancel.answered();
        if let Some(r) = step_up(shared, &exchange.first.text) {
            return r;
        }
        return json_response(modern::status_for(error), exchange.first.text);
    }
    if accept.sse {
        return sse_response(modern::sse_body(exchange, shared.options.keepalive));
    }
    match modern::answer_only(exchange).await {
        Some((json, error)) => json_response(modern::status_for(error), json),
        None => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            INTERNAL_ERROR,
            "Internal error: the request ended without an answer",
            Some(&id),
        ),
    }
}

/// The `params` of a request, as JSON text.
fn params_of(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct WithParams<'a> {
        #[serde(borrow)]
        params: Option<&'a serde_json::value::RawValue>,
    }
    let parsed: WithParams<'_> = serde_json::from_str(text).ok()?;
    parsed.params.map(|p| p.get().to_owned())
}

/// A request for a session this replica does not hold, as [`elsewhere`] needs it.
struct Away<'a> {
    method: Method,
    target: &'a str,
    headers: &'a http::HeaderMap,
    body: &'a str,
    awaited: &'a [RequestId],
}

/// Where a request for a session this replica does not hold ended up.
enum Elsewhere {
    /// Served here: the session was taken over.
    Here(Arc<session::Session>),
    /// Answered already: by the owner it was forwarded to, or with an error.
    Answered(Response<Body>),
}

/// The request as it goes on to another replica.
fn outbound<'a>(shared: &Shared, away: &Away<'a>) -> forward::Outbound<'a> {
    forward::Outbound {
        method: away.method.clone(),
        target: away.target,
        headers: away.headers,
        body: Bytes::copy_from_slice(away.body.as_bytes()),
        awaited: away.awaited.to_vec(),
        drain: Some(shared.draining.subscribe()),
    }
}

/// A request for session `id`, which this replica does not hold: forwarded to the replica
/// that does, or the session taken over when that replica is gone, or refused.
async fn elsewhere(
    shared: &Shared,
    id: &str,
    caller: Option<&SharedIdentity>,
    away: Away<'_>,
) -> Elsewhere {
    use remote::Located;
    let forwarded = away.headers.contains_key(forward::FORWARDED);
    // Where it was lately: no directory round trip for each request of a session.
    if let (Some(replication), Some(client), Some(owner), false) = (
        &shared.replication,
        &shared.forwarder,
        shared.owners.get(id, caller),
        forwarded,
    ) {
        match forward::forward(
            client,
            &replication.replica,
            &owner,
            outbound(shared, &away),
        )
        .await
        {
            forward::Forwarded::Answer(r) if r.status() != StatusCode::NOT_FOUND => {
                return Elsewhere::Answered(r);
            }
            // Gone from there, or unreachable: ask the directory.
            _ => shared.owners.forget(id),
        }
    }
    let mut located = remote::locate(shared, id, caller, forwarded).await;
    // At most two forwards: to the owner, and to whoever took the session over meanwhile.
    for _ in 0..2 {
        let Located::There(record) = located else {
            break;
        };
        let (Some(replication), Some(client)) = (&shared.replication, &shared.forwarder) else {
            located = Located::Nowhere;
            break;
        };
        let sent = forward::forward(
            client,
            &replication.replica,
            &record.owner,
            outbound(shared, &away),
        )
        .await;
        located = match sent {
            forward::Forwarded::Answer(r) => {
                shared.owners.remember(&record);
                return Elsewhere::Answered(r);
            }
            forward::Forwarded::Unreachable => {
                shared.owners.forget(id);
                remote::take_over(shared, record, caller).await
            }
        };
    }
    match located {
        Located::Here(s) => Elsewhere::Here(s),
        Located::Unavailable(why) => Elsewhere::Answered(error(
            StatusCode::SERVICE_UNAVAILABLE,
            TRANSPORT_ERROR,
            format!("Service unavailable: the session directory cannot be used ({why}); retry"),
            None,
        )),
        Located::There(_) | Located::Nowhere => Elsewhere::Answered(error(
            StatusCode::NOT_FOUND,
            SESSION_NOT_FOUND,
            "Session not found: it ended or expired; initialize a new one",
            None,
        )),
    }
}

/// The session a GET or DELETE names: held here, taken over, or answered elsewhere.
async fn session_for(
    shared: &Shared,
    req: &Request<Incoming>,
) -> Result<Arc<session::Session>, Response<Body>> {
    let Some(id) = req.headers().get(h::SESSION_ID) else {
        return Err(bad_request(
            "Bad request: the Mcp-Session-Id header is required",
        ));
    };
    let id = id.to_str().unwrap_or("");
    let caller = caller_of(req.extensions());
    if let Some(s) = shared.sessions.get(id, caller.as_deref()) {
        return Ok(s);
    }
    let target = req
        .uri()
        .path_and_query()
        .map_or(shared.options.endpoint.as_str(), |p| p.as_str());
    let away = Away {
        method: req.method().clone(),
        target,
        headers: req.headers(),
        body: "",
        awaited: &[],
    };
    match elsewhere(shared, id, caller.as_ref(), away).await {
        Elsewhere::Here(s) => Ok(s),
        Elsewhere::Answered(r) => Err(r),
    }
}

fn is_modern_header(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(h::PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .and_then(ProtocolVersion::parse)
        .is_some_and(|v| v.era() == Era::Modern)
}

async fn get(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    if shared.options.stateless || is_modern_header(&req) {
        return not_allowed(shared);
    }
    if !accepts(&req).sse {
        return error(
            StatusCode::NOT_ACCEPTABLE,
            TRANSPORT_ERROR,
            "Not acceptable: a GET opens an SSE stream; accept text/event-stream",
            None,
        );
    }
    let session = match session_for(shared, &req).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let new_revision = session
        .version()
        .is_some_and(|v| v >= ProtocolVersion::V2025_11_25);
    let opening = Opening {
        prime: new_revision,
        retry: new_revision.then_some(shared.options.sse_retry),
        keepalive: Some(shared.options.keepalive),
        ..Opening::default()
    };
    if let Some(last) = req.headers().get(h::LAST_EVENT_ID) {
        let last = last.to_str().unwrap_or("");
        let resumed = stream::parse_event_id(last).and_then(|(prefix, seq)| {
            let stream = session.stream(prefix)?;
            let from = match seq {
                Some(seq) => stream.resume_point(seq)?,
                None => stream.resume_point_start()?,
            };
            Some((stream, from))
        });
        if resumed.is_none()
            && let Some(r) = resume_foreign(shared, &session, last, opening.clone()).await
        {
            return r;
        }
        return match resumed {
            Some((stream, _)) if stream.is_attached() => error(
                StatusCode::CONFLICT,
                TRANSPORT_ERROR,
                "Conflict: that stream is already being read",
                None,
            ),
            Some((stream, from)) => {
                let opening = Opening {
                    prime: false,
                    ..opening
                };
                with_session(sse_response(stream.body(from, opening)), &session.id)
            }
            None => error(
                StatusCode::NOT_FOUND,
                TRANSPORT_ERROR,
                format!("Not found: cannot resume after event {last:?}; its events are gone"),
                None,
            ),
        };
    }
    match session.standalone(true) {
        Some(stream) => with_session(sse_response(stream.body(0, opening)), &session.id),
        None => error(
            StatusCode::CONFLICT,
            TRANSPORT_ERROR,
            "Conflict: this session already has a standalone SSE stream open",
            None,
        ),
    }
}

async fn delete(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    if shared.options.stateless || is_modern_header(&req) {
        return not_allowed(shared);
    }
    if req.headers().get(h::SESSION_ID).is_none() {
        return bad_request("Bad request: the Mcp-Session-Id header is required");
    }
    // Only its user may end a session; one held by another replica ends there (or here,
    // taken over, when that replica is gone).
    let session = match session_for(shared, &req).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    if shared.sessions.close(&session.id) {
        remote::forget(shared, &session.id, false).await;
        empty(StatusCode::OK)
    } else {
        error(
            StatusCode::NOT_FOUND,
            SESSION_NOT_FOUND,
            "Session not found",
            None,
        )
    }
}

/// A resume of a stream the session's previous replica opened, after a takeover. The
/// events of it that were written to the directory and that the client has not seen come
/// first, with their own ids. Then a standalone stream goes on afresh; a stream awaiting
/// answers gets, for each request not answered in those events, the error saying it
/// failed (the stream's event ids name the requests it awaited).
async fn resume_foreign(
    shared: &Shared,
    session: &session::Session,
    last: &str,
    opening: Opening,
) -> Option<Response<Body>> {
    let (prefix, after) = stream::parse_event_id(last)?;
    let (tag, awaited) = session::foreign_stream(prefix)?;
    if tag == shared.sessions.tag() {
        return None;
    }
    let kept = match &shared.replication {
        Some(r) => r
            .directory
            .events(&session.id, prefix)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(session = %session.id, "reading a stream's events failed: {e}");
                Vec::new()
            }),
        None => Vec::new(),
    };
    // The events that follow the client's last one without a gap; after a gap (events
    // trimmed, or never written) the replay stops: the client must not miss one unawares.
    let first = after.map_or(0, |a| a + 1);
    let mut unseen = Vec::new();
    let later = kept.iter().filter(|e| after.is_none_or(|a| e.seq > a));
    for (expected, e) in (first..).zip(later) {
        if e.seq != expected {
            tracing::warn!(
                session = %session.id,
                stream = %prefix,
                "resuming a stream another replica served: its events from {expected} on \
                 are not all in the directory; the replay stops there"
            );
            break;
        }
        unseen.push(e);
    }
    let replayed: String = unseen
        .iter()
        .map(|e| stream::encode_event(Some(&format!("{prefix}.{}", e.seq)), &e.json))
        .collect();
    let replayed = (!replayed.is_empty()).then_some(replayed);
    if awaited.is_empty() {
        let stream = session.standalone(true)?;
        let opening = Opening {
            replayed,
            ..opening
        };
        return Some(with_session(
            sse_response(stream.body(0, opening)),
            &session.id,
        ));
    }
    // Answered: what the client saw before, and what it gets now.
    let seen = kept.iter().filter(|e| after.is_some_and(|a| e.seq <= a));
    let answered: std::collections::HashSet<RequestId> = seen
        .chain(unseen.iter().copied())
        .filter(|e| e.answers)
        .flat_map(|e| answered_ids(&e.json))
        .collect();
    let failed: Vec<&RequestId> = awaited.iter().filter(|id| !answered.contains(id)).collect();
    let stream = stream::Stream::new(None, failed.len(), shared.bounds);
    for id in &failed {
        let err = ErrorObject::new(
            INTERNAL_ERROR,
            "the server replica handling this request stopped before answering; the request \
             may or may not have taken effect",
        );
        stream.push(Arc::from(jsonrpc::encode_error(Some(id), &err)), 1);
    }
    if failed.is_empty() {
        stream.finish();
    }
    let opening = Opening {
        prime: false,
        retry: None,
        replayed,
        ..opening
    };
    Some(with_session(
        sse_response(stream.body(0, opening)),
        &session.id,
    ))
}

/// The ids a response (or a batch of them) answers.
fn answered_ids(json: &str) -> Vec<RequestId> {
    #[derive(serde::Deserialize)]
    struct Answer {
        id: Option<RequestId>,
    }
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Answers {
        One(Answer),
        Batch(Vec<Answer>),
    }
    match serde_json::from_str::<Answers>(json) {
        Ok(Answers::One(a)) => a.id.into_iter().collect(),
        Ok(Answers::Batch(all)) => all.into_iter().filter_map(|a| a.id).collect(),
        Err(_) => Vec::new(),
    }
}
