//! The HTTP client transport: a [`Connection`] to a remote MCP server over Streamable HTTP
//! (both eras) or the legacy HTTP+SSE transport of 2024-11-05.
//!
//! ```no_run
//! # async fn run() -> Result<(), moat_transport::http::client::ClientError> {
//! use moat_transport::http::client::{connect, ClientOptions};
//! let conn = connect("http://127.0.0.1:3001/mcp", ClientOptions::default().bearer_token("s3cret")).await?;
//! // Hand `conn` to a peer: every outbound message becomes one HTTP POST, and everything the
//! // server sends (JSON bodies, SSE `message` events) arrives on `conn.inbound`.
//! # drop(conn); Ok(()) }
//! ```
//!
//! What the transport does on its own, so that the peer above it knows nothing of HTTP:
//!
//! - **Handshake era** (2025-03-26 … 2025-11-25): keeps the `Mcp-Session-Id` the server assigns
//!   and the negotiated `MCP-Protocol-Version`, sends both on every later request, opens the
//!   standalone GET stream once `notifications/initialized` is sent (and waits up to 2 s for
//!   the server to answer it before sending the next message, so that nothing the server
//!   sends there early is lost), resumes dropped SSE streams with `Last-Event-ID` (dropping
//!   events it already delivered), re-initialises transparently when the server forgets the
//!   session (404), and deletes the session on close.
//! - **Modern era** (2026-07-28, recognised per request by its `_meta` protocol version): no
//!   session; mirrors `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and the `x-mcp-header`
//!   tool arguments into headers, removes tools whose `x-mcp-header` annotations are invalid
//!   from `tools/list` results, and cancels a request by dropping its response stream.
//! - **Failures** never leave a request hanging: an HTTP error, a connection error or a stream
//!   that ends without the answer becomes a JSON-RPC error response for that request.
//! - **Auto mode** tries Streamable HTTP first and falls back to HTTP+SSE when the server
//!   answers the first POST with 400/404/405, unless its body is a JSON-RPC error only a
//!   2026-07-28 server sends (unsupported revision, unknown method, header mismatch), as
//!   the spec describes; the fallback waits a few seconds at most for the `endpoint` event.
//! - **Authorization**: a static bearer token, or an [`Authorizer`] (normally an OAuth 2.1
//!   [`OAuthClient`], see [`ClientOptions::oauth`]) consulted
//!   for every request the transport sends — POSTs, SSE GETs and resumptions, the session's
//!   DELETE, both legacy requests: its headers go out with the request, every response goes
//!   back to it, and the request is sent again (a few times at most) when it says so, e.g.
//!   after it obtained a token on a 401 or a wider one on a 403 `insufficient_scope`. When
//!   authorization fails the request gets a JSON-RPC error saying why.
//!
//! Module map: `streamable` (POSTs, answers, resumption, Auto's probe), `session` (the
//! handshake era's GET stream, re-initialisation, DELETE), `legacy` (HTTP+SSE), `auth` (the
//! authorization loop every request goes through), `errors` (HTTP failures as JSON-RPC
//! errors), `body` (bounded bodies and SSE events), `xheader` (`x-mcp-header` filtering and
//! mirroring).

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use moat_protocol::jsonrpc;
use moat_protocol::{ErrorObject, RequestId};
use tokio::sync::{mpsc, watch};
use url::Url;

use crate::connection::{Closer, Connection, Inbound, Limits, Outgoing};
use crate::framing::Frame;
use crate::http::oauth::{Authorizer, OAuthClient, OAuthConfig};

mod auth;
mod body;
mod errors;
mod legacy;
mod session;
mod streamable;
mod wire;
mod xheader;

/// Which HTTP transport to speak.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportMode {
    /// Streamable HTTP first; fall back to legacy HTTP+SSE when the server answers the first
    /// POST with 400, 404 or 405, unless with a 2026-07-28 refusal (-32022, -32601, -32020)
    /// (the spec's backwards-compatibility procedure).
    #[default]
    Auto,
    /// Streamable HTTP only (2025-03-26 onwards, both eras).
    StreamableHttp,
    /// The HTTP+SSE transport of 2024-11-05 only: the URL is the SSE endpoint.
    LegacySse,
}

/// Where a connection's per-request credentials come from (besides a static
/// [`bearer_token`](ClientOptions::bearer_token)).
#[derive(Clone)]
#[non_exhaustive]
pub enum Authorization {
    /// This authorizer, as it is (e.g. an [`OAuthClient`] kept to call
    /// [`logout`](OAuthClient::logout) later, or a custom one).
    Authorizer(Arc<dyn Authorizer>),
    /// An [`OAuthClient`] made by [`connect`] for the URL it connects to (for the legacy
    /// transport, the SSE endpoint's URL).
    OAuth(Box<OAuthConfig>),
}

impl fmt::Debug for Authorization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Authorization::Authorizer(_) => f.write_str("Authorizer(..)"),
            Authorization::OAuth(config) => f.debug_tuple("OAuth").field(config).finish(),
        }
    }
}

/// How to reach and talk to an HTTP MCP server. Build it with [`ClientOptions::default`] and
/// the setters.
#[derive(Clone)]
#[non_exhaustive]
pub struct ClientOptions {
    /// Which transport to speak. Default: [`TransportMode::Auto`].
    pub mode: TransportMode,
    /// Extra headers sent on every request (e.g. an API key header).
    pub headers: Vec<(String, String)>,
    /// Sent as `Authorization: Bearer …`, to the server's origin only.
    pub bearer_token: Option<String>,
    /// Per-request credentials, e.g. OAuth 2.1 ([`ClientOptions::oauth`]). Its
    /// `Authorization` header, when it has one, replaces the static bearer token's.
    pub authorization: Option<Authorization>,
    /// Longest wait for a TCP (and TLS) connection. Default: 10 s.
    pub connect_timeout: Duration,
    /// Longest wait for a non-streaming answer (headers and JSON body) or a legacy POST.
    /// SSE streams are not bounded by it. `None`: no limit. Default: 5 minutes.
    pub request_timeout: Option<Duration>,
    /// Largest message accepted (a JSON body or one SSE event). Default: [`Limits::default`].
    pub max_message_bytes: usize,
    /// Messages buffered in each direction. Default: [`Limits::default`].
    pub queue: usize,
    /// Most redirects followed per request; only to the same origin (scheme, host and port),
    /// so the bearer token never leaves it, and a POST only through 307/308. Default: 3.
    pub max_redirects: usize,
    /// How many times in a row a dropped SSE stream is reconnected before giving up.
    /// Default: 5.
    pub reconnect_attempts: u32,
    /// Delay before reconnecting when the server gave no `retry`. Default: 1 s.
    pub reconnect_delay: Duration,
    /// The longest delay between reconnection attempts (backoff doubles up to it). Default: 30 s.
    pub max_backoff: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        let limits = Limits::default();
        ClientOptions {
            mode: TransportMode::Auto,
            headers: Vec::new(),
            bearer_token: None,
            authorization: None,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Some(Duration::from_secs(300)),
            max_message_bytes: limits.max_message_bytes,
            queue: limits.queue,
            max_redirects: 3,
            reconnect_attempts: 5,
            reconnect_delay: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values and the token are secrets as often as not.
        let headers: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ClientOptions")
            .field("mode", &self.mode)
            .field("headers", &headers)
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field("authorization", &self.authorization)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("queue", &self.queue)
            .field("max_redirects", &self.max_redirects)
            .field("reconnect_attempts", &self.reconnect_attempts)
            .field("reconnect_delay", &self.reconnect_delay)
            .field("max_backoff", &self.max_backoff)
            .finish()
    }
}

impl ClientOptions {
    /// Set the transport mode.
    pub fn mode(mut self, mode: TransportMode) -> Self {
        self.mode = mode;
        self
    }

    /// Add a header sent on every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Send `Authorization: Bearer <token>` (to the server's origin only).
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }

    /// Authorize with OAuth 2.1 as the MCP authorization spec describes: an [`OAuthClient`]
    /// with `config` is made for the server URL when connecting, and obtains (and renews)
    /// its tokens when the server asks for them.
    pub fn oauth(mut self, config: OAuthConfig) -> Self {
        self.authorization = Some(Authorization::OAuth(Box::new(config)));
        self
    }

    /// Take each request's credentials from `authorizer` (an [`OAuthClient`] or your own).
    pub fn authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.authorization = Some(Authorization::Authorizer(authorizer));
        self
    }

    /// Set the connect timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Set the timeout for non-streaming answers (`None`: none).
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Set the largest message accepted.
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Set how many same-origin redirects are followed.
    pub fn max_redirects(mut self, n: usize) -> Self {
        self.max_redirects = n;
        self
    }

    /// Set how many reconnection attempts a dropped SSE stream gets.
    pub fn reconnect_attempts(mut self, n: u32) -> Self {
        self.reconnect_attempts = n;
        self
    }

    /// Set the first reconnection delay (when the server sent no `retry`) and the backoff cap.
    pub fn reconnect_backoff(mut self, first: Duration, max: Duration) -> Self {
        self.reconnect_delay = first;
        self.max_backoff = max;
        self
    }
}

/// Why a connection could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The URL does not parse, or is not `http:` / `https:`.
    #[error("invalid server URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An extra header has an invalid name or value, or the token cannot be a header value.
    #[error("invalid header {name:?}: {reason}")]
    InvalidHeader {
        /// The header name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built (e.g. no TLS roots).
    #[error("could not set up the HTTP client: {0}")]
    Setup(String),
    /// The server could not be reached.
    #[error("could not reach {url}: {detail}")]
    Unreachable {
        /// The URL.
        url: String,
        /// The underlying error, with its causes.
        detail: String,
    },
    /// The server refused the SSE stream with an HTTP error.
    #[error("GET {url} answered HTTP {status}: {detail}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// What the server said (a snippet of the body, or the authentication challenge).
        detail: String,
    },
    /// The legacy SSE handshake failed: not an event stream, or no `endpoint` event first.
    #[error("{url} is not a legacy HTTP+SSE endpoint: {detail}")]
    NotSse {
        /// The URL.
        url: String,
        /// What was wrong.
        detail: String,
    },
    /// Authorization failed before the connection could be set up (the OAuth configuration
    /// cannot work, or the legacy SSE endpoint asked for credentials that could not be had).
    #[error("authorization for {url} failed: {detail}")]
    Authorization {
        /// The URL.
        url: String,
        /// Why.
        detail: String,
    },
    /// The legacy `endpoint` event named a URL on another origin.
    #[error("the server's POST endpoint {endpoint} is not on the origin of {url}; refusing it")]
    CrossOrigin {
        /// The SSE URL.
        url: String,
        /// The endpoint it announced.
        endpoint: String,
    },
}

/// Connect to the MCP server at `url`.
///
/// Streamable HTTP (and `Auto`) does no I/O here: the first message sent is the first POST.
/// Legacy HTTP+SSE opens the event stream and waits for the `endpoint` event before returning.
pub async fn connect(url: &str, options: ClientOptions) -> Result<Connection, ClientError> {
    let shared = Shared::new(url, &options)?;
    let (out_tx, out_rx) = mpsc::channel::<Outgoing>(options.queue.max(1));
    let route = match options.mode {
        TransportMode::LegacySse => {
            let endpoint = legacy::open(&shared, legacy::endpoint_wait(&shared, None)).await?;
            Route::Legacy(endpoint)
        }
        TransportMode::StreamableHttp => Route::Streamable,
        TransportMode::Auto => Route::Probe,
    };
    let driver = shared.spawn(drive(shared.clone(), out_rx, route));
    let closing = shared.clone();
    let closer: Closer = Box::new(move || {
        Box::pin(async move {
            closing.close().await;
            driver.abort();
        })
    });
    Ok(Connection {
        inbound: shared.take_inbound(),
        outbound: out_tx,
        closer: Some(closer),
        single_request: false,
        driver: None,
    })
}

/// Where outbound messages go.
enum Route {
    /// Auto mode before the first request was answered.
    Probe,
    Streamable,
    /// Legacy HTTP+SSE: POST to this endpoint.
    Legacy(Url),
}

/// Sends each outbound message the way the route says, in order.
async fn drive(shared: Arc<Shared>, mut out: mpsc::Receiver<Outgoing>, mut route: Route) {
    while let Some(msg) = out.recv().await {
        match &route {
            Route::Streamable => streamable::send(&shared, msg.text).await,
            Route::Legacy(endpoint) => legacy::send(&shared, endpoint, msg.text).await,
            Route::Probe => {
                if let Some(decided) = streamable::probe(&shared, msg.text).await {
                    route = decided;
                }
            }
        }
    }
    // Everyone dropped the sender: nothing more to send, so the connection is over.
    shared.close().await;
}

/// What every task of one connection shares.
pub(crate) struct Shared {
    url: Url,
    /// For POSTs: follows only 307/308 redirects, to the same origin.
    post: reqwest::Client,
    /// For GETs (SSE streams): follows same-origin redirects.
    get: reqwest::Client,
    /// Extra headers and `Authorization`.
    base_headers: HeaderMap,
    /// Per-request credentials.
    authorizer: Option<Arc<dyn Authorizer>>,
    options: ClientOptions,
    inbound: mpsc::Sender<Inbound>,
    inbound_rx: Mutex<Option<mpsc::Receiver<Inbound>>>,
    stop: watch::Sender<bool>,
    closing: AtomicBool,
    state: Mutex<streamable::State>,
    /// One re-initialisation at a time.
    reinit: tokio::sync::Mutex<()>,
}

impl Shared {
    fn new(url: &str, options: &ClientOptions) -> Result<Arc<Shared>, ClientError> {
        let parsed = Url::parse(url).map_err(|e| ClientError::InvalidUrl {
            url: url.to_owned(),
            reason: e.to_string(),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ClientError::InvalidUrl {
                url: url.to_owned(),
                reason: format!(
                    "the scheme must be http or https, not {:?}",
                    parsed.scheme()
                ),
            });
        }
        if parsed.host_str().is_none() {
            return Err(ClientError::InvalidUrl {
                url: url.to_owned(),
                reason: "no host".to_owned(),
            });
        }
        let base_headers = base_headers(options)?;
        let authorizer = match &options.authorization {
            None => None,
            Some(Authorization::Authorizer(a)) => Some(a.clone()),
            Some(Authorization::OAuth(config)) => {
                let client = OAuthClient::new(parsed.clone(), (**config).clone()).map_err(|e| {
                    ClientError::Authorization {
                        url: url.to_owned(),
                        detail: error_chain(&e),
                    }
                })?;
                Some(Arc::new(client) as Arc<dyn Authorizer>)
            }
        };
        let post = http_client(options, true)?;
        let get = http_client(options, false)?;
        let (tx, rx) = mpsc::channel(options.queue.max(1));
        let (stop, _) = watch::channel(false);
        Ok(Arc::new(Shared {
            url: parsed,
            post,
            get,
            base_headers,
            authorizer,
            options: options.clone(),
            inbound: tx,
            inbound_rx: Mutex::new(Some(rx)),
            stop,
            closing: AtomicBool::new(false),
            state: Mutex::new(streamable::State::default()),
            reinit: tokio::sync::Mutex::new(()),
        }))
    }

    fn take_inbound(&self) -> mpsc::Receiver<Inbound> {
        let taken = self
            .inbound_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        // Taken once, by `connect`, right after construction.
        taken.unwrap_or_else(|| mpsc::channel(1).1)
    }

    fn state(&self) -> MutexGuard<'_, streamable::State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    /// Spawn a task that ends when the connection closes.
    fn spawn<F>(&self, f: F) -> tokio::task::AbortHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut stop = self.stop.subscribe();
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => {}
                _ = f => {}
            }
        })
        .abort_handle()
    }

    /// Hand one message to the peer.
    async fn deliver(&self, line: String) {
        if self.stopped() {
            return;
        }
        let _ = self.inbound.send(Inbound::Frame(Frame::Line(line))).await;
    }

    /// Answer our request `id` with an error.
    async fn deliver_error(&self, id: &RequestId, error: &ErrorObject) {
        self.deliver(jsonrpc::encode_error(Some(id), error)).await;
    }

    /// Tell the peer the connection is over.
    async fn end(&self, why: String) {
        if !self.stopped() {
            let _ = self.inbound.send(Inbound::Ended(why)).await;
        }
    }

    /// Close: delete the session (if any), then stop every task.
    async fn close(&self) {
        if self.closing.swap(true, Ordering::SeqCst) {
            return; // Already closing.
        }
        session::delete_session(self).await;
        self.stop.send_replace(true);
    }

    /// Headers every request carries: the extras and `Authorization`.
    fn headers(&self) -> HeaderMap {
        self.base_headers.clone()
    }
}

fn base_headers(options: &ClientOptions) -> Result<HeaderMap, ClientError> {
    let mut map = HeaderMap::new();
    for (name, value) in &options.headers {
        let n =
            HeaderName::from_bytes(name.as_bytes()).map_err(|e| ClientError::InvalidHeader {
                name: name.clone(),
                reason: e.to_string(),
            })?;
        let mut v = HeaderValue::from_str(value).map_err(|e| ClientError::InvalidHeader {
            name: name.clone(),
            reason: e.to_string(),
        })?;
        if n == http::header::AUTHORIZATION || n == http::header::COOKIE {
            v.set_sensitive(true);
        }
        map.append(n, v);
    }
    if let Some(token) = &options.bearer_token {
        let mut v = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            ClientError::InvalidHeader {
                name: "authorization".to_owned(),
                reason: "the bearer token holds characters a header may not carry".to_owned(),
            }
        })?;
        v.set_sensitive(true);
        map.insert(http::header::AUTHORIZATION, v);
    }
    Ok(map)
}

fn http_client(options: &ClientOptions, for_post: bool) -> Result<reqwest::Client, ClientError> {
    let max = options.max_redirects;
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        let Some(first) = attempt.previous().first() else {
            return attempt.stop();
        };
        let same_origin = attempt.url().origin() == first.origin();
        if !same_origin {
            let msg = format!(
                "refusing to follow a redirect to another origin ({}): credentials stay with {}",
                attempt.url(),
                first.origin().ascii_serialization()
            );
            return attempt.error(msg);
        }
        if for_post && !matches!(attempt.status().as_u16(), 307 | 308) {
            let msg = format!(
                "refusing to follow a {} redirect of a POST (it would become a GET)",
                attempt.status()
            );
            return attempt.error(msg);
        }
        if attempt.previous().len() > max {
            let msg = format!("more than {max} redirects");
            return attempt.error(msg);
        }
        attempt.follow()
    });
    reqwest::Client::builder()
        .connect_timeout(options.connect_timeout)
        .redirect(policy)
        .build()
        .map_err(|e| ClientError::Setup(error_chain(&e)))
}

/// An error and its causes, `: `-separated.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// `Auto`/`LegacySse` building blocks shared with the streamable module.
pub(crate) fn is_event_stream(resp: &reqwest::Response) -> bool {
    content_type(resp).is_some_and(|t| t.eq_ignore_ascii_case("text/event-stream"))
}

/// The media type of a response, without parameters.
pub(crate) fn content_type(resp: &reqwest::Response) -> Option<String> {
    let raw = resp
        .headers()
        .get(http::header::CONTENT_TYPE)?
        .to_str()
        .ok()?;
    let media = raw.split(';').next().unwrap_or("").trim();
    Some(media.to_ascii_lowercase())
}
