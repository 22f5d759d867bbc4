//! [`Client`]: connect to an MCP server, whatever its transport or revision, and use it.
//!
//! ```no_run
//! # async fn run() -> moat::Result<()> {
//! use serde_json::json;
//! let client = moat::Client::connect_command(["npx", "-y", "@modelcontextprotocol/server-everything"]).await?;
//! let tools = client.list_all_tools().await?;
//! let out = client.call_tool("echo", json!({ "message": "hi" })).await?;
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! A server behind a URL is one call too, over Streamable HTTP or, for old servers, the
//! legacy HTTP+SSE transport (found automatically; see [`HttpOptions`]):
//!
//! ```no_run
//! # async fn run() -> moat::Result<()> {
//! use moat::client::HttpOptions;
//! let client = moat::Client::builder()
//!     .connect_url("https://example.com/mcp", HttpOptions::default().bearer_token("s3cret"))
//!     .await?;
//! # client.close().await; Ok(()) }
//! ```
//!
//! A server that wants OAuth gets it from [`oauth`]: the transport asks for a token when the
//! server first answers 401, through the browser here, and uses it from then on.
//!
//! ```no_run
//! # async fn run() -> moat::Result<()> {
//! use moat::client::HttpOptions;
//! use moat::client::oauth::{LoopbackUserAgent, OAuthConfig};
//! let browser = LoopbackUserAgent::new().expect("a loopback port for the redirect");
//! let options = HttpOptions::default().oauth(OAuthConfig::authorization_code(browser));
//! let client = moat::Client::builder().connect_url("https://example.com/mcp", options).await?;
//! # client.close().await; Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moat_protocol::error::UNSUPPORTED_PROTOCOL_VERSION;
use moat_protocol::lifecycle::Role;
use moat_protocol::types::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, CompleteRequestParams,
    CompleteResult, CreateMessageRequestParams, CreateMessageResult, DiscoverResult,
    ElicitRequestParams, ElicitResult, EmptyResult, GetPromptRequestParams, GetPromptResult,
    Implementation, InitializeRequestParams, InitializeResult, InputRequest, InputRequests,
    InputRequiredResult, InputResponse, InputResponses, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListRootsResult, ListToolsResult,
    LoggingLevel, NotificationParams, PaginatedRequestParams, Prompt, RESULT_TYPE_INPUT_REQUIRED,
    ReadResourceRequestParams, ReadResourceResult, RequestParams, Resource, ResourceRequestParams,
    ResourceTemplate, Root, RootsCapability, ServerCapabilities, SetLevelRequestParams,
    SubscriptionFilter, SubscriptionsListenRequestParams, Tool, methods,
};
use moat_protocol::version::{
    META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION, SupportedVersions,
    VersionPreference,
};
use moat_protocol::{Era, ErrorObject, JsonObject, ProtocolVersion};
use moat_transport::{ChildConfig, ChildProcess, Connection};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::broadcast;

mod skills;
mod tasks;

pub use tasks::{RunningTask, ToolCall};

pub use crate::answerer::InputAnswerer;
use crate::error::{Error, Result};
use crate::handler::{BoxFuture, Handler, HandlerResult, IncomingRequest, RequestContext};
use crate::peer::{Peer, PeerOptions, RequestOptions};

/// Where an HTTP connection's per-request credentials come from: an OAuth configuration
/// ([`HttpOptions::oauth`]) or an authorizer of your own ([`HttpOptions::authorizer`]).
pub use moat_transport::http::client::Authorization as HttpAuthorization;
/// Why an HTTP connection could not be set up (it reaches callers as [`Error::Http`]).
pub use moat_transport::http::client::ClientError as HttpError;
/// How to reach a server over HTTP: transport mode, headers, bearer token, timeouts, limits,
/// redirects and reconnection. See [`ClientBuilder::connect_url`].
pub use moat_transport::http::client::ClientOptions as HttpOptions;
/// Which HTTP transport to speak: `Auto` (default), `StreamableHttp` or `LegacySse`.
pub use moat_transport::http::client::TransportMode as HttpTransport;
/// OAuth 2.1 for HTTP connections, as the MCP authorization spec describes: discovery,
/// registration, PKCE, step-up, client credentials, DPoP. Hand an [`oauth::OAuthConfig`] to
/// [`HttpOptions::oauth`].
pub use moat_transport::http::oauth;

/// A notification from the server (`notifications/message`, `…/list_changed`, `…/updated`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerNotification {
    /// The method.
    pub method: String,
    /// The params, if any.
    pub params: Option<Value>,
}

type SamplingFn = Arc<
    dyn Fn(CreateMessageRequestParams) -> BoxFuture<Result<CreateMessageResult, ErrorObject>>
        + Send
        + Sync,
>;
type ElicitationFn =
    Arc<dyn Fn(ElicitRequestParams) -> BoxFuture<Result<ElicitResult, ErrorObject>> + Send + Sync>;
type InputFn =
    Arc<dyn Fn(InputRequest) -> BoxFuture<Result<InputResponse, ErrorObject>> + Send + Sync>;

/// Configures and connects a [`Client`].
#[must_use]
pub struct ClientBuilder {
    info: Implementation,
    preference: VersionPreference,
    versions: SupportedVersions,
    capabilities: ClientCapabilities,
    options: PeerOptions,
    sampling: Option<SamplingFn>,
    elicitation: Option<ElicitationFn>,
    roots: Option<Vec<Root>>,
    input: Option<InputFn>,
    discover_timeout: Duration,
    handshake_timeout: Option<Duration>,
    /// Made before connecting, so that [`notifications`](Self::notifications) can be
    /// subscribed to before the server says anything.
    notifications: broadcast::Sender<ServerNotification>,
}

impl ClientBuilder {
    /// A client that introduces itself as `name` at `version`.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        ClientBuilder {
            info: Implementation::new(name, version),
            preference: VersionPreference::Auto,
            versions: SupportedVersions::default(),
            capabilities: ClientCapabilities::default(),
            options: PeerOptions::default(),
            sampling: None,
            elicitation: None,
            roots: None,
            input: None,
            discover_timeout: Duration::from_secs(5),
            handshake_timeout: None,
            // Notifications waiting for a slow subscriber; past this it skips the oldest
            // (and is told so). Each slot is allocated up front, for every client.
            notifications: broadcast::channel(256).0,
        }
    }

    /// The server's notifications, subscribed to before connecting: nothing it says right
    /// after the handshake (a log message, a `list_changed`) is missed, as it can be by
    /// [`Client::notifications`] called once `connect` has returned.
    pub fn notifications(&self) -> broadcast::Receiver<ServerNotification> {
        self.notifications.subscribe()
    }

    /// Which revision to speak: one, or `Auto` (modern first, then the handshake).
    ///
    /// A server that refuses the revision `server/discover` names (-32022) is asked again,
    /// once, with the newest modern revision its `supported` list shares with us; with an
    /// exact preference only if that is the very revision asked for.
    pub fn protocol(mut self, preference: VersionPreference) -> Self {
        self.preference = preference;
        self
    }

    /// Peer settings (timeouts, limits).
    pub fn options(mut self, options: PeerOptions) -> Self {
        self.options = options;
        self
    }

    /// Default deadline for each request.
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.options.request_timeout = timeout;
        self
    }

    /// How long `Auto` waits for an answer to `server/discover` before falling back.
    pub fn discover_timeout(mut self, timeout: Duration) -> Self {
        self.discover_timeout = timeout;
        self
    }

    /// Deadline for the answer to `initialize` or `server/discover`, when it should differ
    /// from [`request_timeout`](Self::request_timeout): a server may take far longer to start
    /// than to answer a call (an `npx` package fetched on first use).
    pub fn handshake_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    fn handshake_deadline(&self) -> Option<Duration> {
        self.handshake_timeout.or(self.options.request_timeout)
    }

    /// Answer the server's sampling requests (declares the `sampling` capability).
    pub fn on_sampling<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(CreateMessageRequestParams) -> Fut + Send + Sync + 'static,
        Fut:
            std::future::Future<Output = Result<CreateMessageResult, ErrorObject>> + Send + 'static,
    {
        self.capabilities.sampling = Some(Default::default());
        self.sampling = Some(Arc::new(move |p| Box::pin(f(p))));
        self
    }

    /// Answer the server's elicitation requests (declares the `elicitation` capability).
    pub fn on_elicitation<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(ElicitRequestParams) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<ElicitResult, ErrorObject>> + Send + 'static,
    {
        self.capabilities.elicitation = Some(Default::default());
        self.elicitation = Some(Arc::new(move |p| Box::pin(f(p))));
        self
    }

    /// Declare exactly these capabilities (sampling, elicitation, roots, …), replacing what
    /// the handlers set so far declared. Use with [`on_input`](Self::on_input), or with
    /// per-request answerers ([`InputAnswerer`]), to answer what they promise.
    pub fn capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Answer the server's sampling, elicitation and roots requests that neither a
    /// per-request [`InputAnswerer`] nor a handler of their own
    /// ([`on_sampling`](Self::on_sampling), …) takes. Declares nothing: see
    /// [`capabilities`](Self::capabilities).
    pub fn on_input<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(InputRequest) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<InputResponse, ErrorObject>> + Send + 'static,
    {
        let f = Arc::new(f);
        self.input = Some(Arc::new(move |request| {
            let f = f.clone();
            Box::pin(async move { f(request).await })
        }));
        self
    }

    /// Offer these roots (declares the `roots` capability).
    pub fn roots(mut self, roots: Vec<Root>) -> Self {
        self.capabilities.roots = Some(RootsCapability {
            list_changed: Some(false),
            ..Default::default()
        });
        self.roots = Some(roots);
        self
    }

    /// Launch `argv` as a child process and connect to it over stdio.
    pub async fn connect_command<I, S>(self, argv: I) -> Result<Client>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut argv = argv.into_iter().map(Into::into);
        let Some(program) = argv.next() else {
            return Err(Error::Spawn(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no command given",
            )));
        };
        self.connect_child(ChildConfig::new(program, argv.collect::<Vec<_>>()))
            .await
    }

    /// Launch a configured child process and connect to it over stdio. With `Auto`, a
    /// server that hangs up on `server/discover` is relaunched and spoken to with `initialize`.
    pub async fn connect_child(self, config: ChildConfig) -> Result<Client> {
        let (conn, child) = ChildProcess::spawn(config.clone()).map_err(Error::Spawn)?;
        let (peer, handler) = self.start(conn);
        match self.negotiate(&peer, &handler).await {
            Ok(client) => Ok(client.with_child(child)),
            Err(Error::Closed(why)) if self.preference == VersionPreference::Auto => {
                tracing::debug!(%why, "server closed during discovery; relaunching for the handshake");
                peer.close().await;
                let (conn, child) = ChildProcess::spawn(config).map_err(Error::Spawn)?;
                let (peer, handler) = self.start(conn);
                let version = self
                    .versions
                    .latest_handshake()
                    .unwrap_or(ProtocolVersion::LATEST_HANDSHAKE);
                let client = self.handshake(&peer, &handler, version).await?;
                Ok(client.with_child(child))
            }
            Err(e) => {
                peer.close().await;
                Err(e)
            }
        }
    }

    /// Connect to the server at an `http://` or `https://` URL.
    ///
    /// With [`HttpTransport::Auto`] (the default) the first request goes out as a
    /// Streamable HTTP POST; a server that refuses it the way pre-2025-03-26 servers do is
    /// spoken to over the legacy HTTP+SSE transport instead (then `url` is its SSE endpoint).
    /// The revision is negotiated as for any connection ([`protocol`](Self::protocol)).
    /// Sessions, resumption of dropped streams and the 2026-07-28 request headers are the
    /// transport's business, and so is authorization (a bearer token, or OAuth 2.1 with
    /// [`HttpOptions::oauth`]); HTTP failures reach the caller as JSON-RPC errors of the
    /// requests they hit. A URL that cannot be used, or a legacy SSE endpoint that cannot be
    /// opened, fails here with [`Error::Http`].
    pub async fn connect_url(self, url: &str, options: HttpOptions) -> Result<Client> {
        let conn = moat_transport::http::client::connect(url, options)
            .await
            .map_err(http_error)?;
        self.connect(conn).await
    }

    /// Connect over an existing connection.
    pub async fn connect(self, conn: Connection) -> Result<Client> {
        let (peer, handler) = self.start(conn);
        match self.negotiate(&peer, &handler).await {
            Ok(c) => Ok(c),
            Err(e) => {
                peer.close().await;
                Err(e)
            }
        }
    }

    fn start(&self, conn: Connection) -> (Peer, Arc<ClientHandler>) {
        let handler = Arc::new(ClientHandler {
            notifications: self.notifications.clone(),
            handlers: Arc::new(Handlers {
                sampling: self.sampling.clone(),
                elicitation: self.elicitation.clone(),
                roots: self.roots.clone(),
                input: self.input.clone(),
            }),
            answerers: Mutex::new(Vec::new()),
            next_answerer: AtomicU64::new(0),
        });
        let mut options = self.options.clone();
        options.versions = self.versions.clone();
        let peer = Peer::start(conn, Role::Client, handler.clone(), options);
        (peer, handler)
    }

    async fn negotiate(&self, peer: &Peer, handler: &Arc<ClientHandler>) -> Result<Client> {
        match self.preference {
            VersionPreference::Exact(v) if v.era() == Era::Handshake => {
                self.handshake(peer, handler, v).await
            }
            VersionPreference::Exact(v) => self.discover(peer, handler, v).await,
            _ => {
                let modern = self
                    .versions
                    .as_slice()
                    .iter()
                    .rev()
                    .copied()
                    .find(|v| v.era() == Era::Modern);
                let v = self
                    .versions
                    .latest_handshake()
                    .unwrap_or(ProtocolVersion::LATEST_HANDSHAKE);
                match modern {
                    Some(modern) => self.discover_then_handshake(peer, handler, modern, v).await,
                    None => self.handshake(peer, handler, v).await,
                }
            }
        }
    }

    /// `Auto`: ask with `server/discover`, and fall back to `initialize` when the server
    /// refuses it or has not answered within the discover timeout. A server that has not
    /// answered may ignore unknown methods (some handshake-era servers do) or may only be slow
    /// to start; a slow modern server answers `server/discover` first and then refuses the
    /// `initialize` sent after it (-32022). So the discover request is kept waiting while
    /// `initialize` is tried, and when `initialize` fails, a discover answer that has come
    /// (or comes within another discover timeout) decides instead.
    async fn discover_then_handshake(
        &self,
        peer: &Peer,
        handler: &Arc<ClientHandler>,
        modern: ProtocolVersion,
        handshake_version: ProtocolVersion,
    ) -> Result<Client> {
        let asking = self.ask_discover(peer, modern);
        tokio::pin!(asking);
        match tokio::time::timeout(self.discover_timeout, &mut asking).await {
            Ok(Ok(result)) => return self.enter_modern(peer, handler, result),
            Ok(Err(Error::Closed(why))) => return Err(Error::Closed(why)),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "server/discover failed; falling back to initialize");
                return self.handshake(peer, handler, handshake_version).await;
            }
            Err(_) => tracing::debug!(
                timeout = ?self.discover_timeout,
                "no answer to server/discover yet; trying initialize while still listening"
            ),
        }
        // `initialize` carries no 2026-07-28 `_meta`.
        peer.set_modern_meta(None);
        let refusal = match self.handshake(peer, handler, handshake_version).await {
            Ok(client) => return Ok(client),
            Err(e) => e,
        };
        match tokio::time::timeout(self.discover_timeout, &mut asking).await {
            Ok(Ok(result)) => {
                tracing::debug!(
                    error = %refusal,
                    "initialize failed after a late answer to server/discover; using that answer"
                );
                self.enter_modern(peer, handler, result)
            }
            _ => Err(refusal),
        }
    }

    fn modern_meta(&self, v: ProtocolVersion) -> JsonObject {
        let mut meta = JsonObject::new();
        meta.insert(
            META_PROTOCOL_VERSION.to_owned(),
            Value::String(v.as_str().to_owned()),
        );
        meta.insert(
            META_CLIENT_CAPABILITIES.to_owned(),
            serde_json::to_value(&self.capabilities).unwrap_or_default(),
        );
        meta.insert(
            META_CLIENT_INFO.to_owned(),
            serde_json::to_value(&self.info).unwrap_or_default(),
        );
        meta
    }

    /// The modern revision to ask for after the server refused `wanted` with `refusal`
    /// (-32022, whose `data.supported` lists what it takes): the newest one we share, and
    /// with an exact preference only that very revision.
    fn retry_version(
        &self,
        wanted: ProtocolVersion,
        refusal: &ErrorObject,
    ) -> Option<ProtocolVersion> {
        let supported = refusal.data.as_ref()?.get("supported")?.as_array()?;
        let next = self
            .versions
            .pick_common(supported.iter().filter_map(Value::as_str))
            .filter(|v| v.era() == Era::Modern)?;
        match self.preference {
            VersionPreference::Exact(_) if next != wanted => None,
            _ => Some(next),
        }
    }

    async fn discover(
        &self,
        peer: &Peer,
        handler: &Arc<ClientHandler>,
        v: ProtocolVersion,
    ) -> Result<Client> {
        let result = self.ask_discover(peer, v).await?;
        self.enter_modern(peer, handler, result)
    }

    /// Send `server/discover` naming `v` (asking once more with a shared revision when the
    /// server refuses it with -32022).
    async fn ask_discover(&self, peer: &Peer, v: ProtocolVersion) -> Result<DiscoverResult> {
        let mut asked = v;
        let mut retried = false;
        loop {
            peer.set_modern_meta(Some(self.modern_meta(asked)));
            let options = RequestOptions {
                timeout: self.handshake_deadline(),
                ..RequestOptions::default()
            };
            let answer: Result<DiscoverResult> = peer
                .request_with(methods::SERVER_DISCOVER, &RequestParams::default(), options)
                .await;
            // The server does not take the revision we named (-32022): ask again, once,
            // with one its `supported` list and we share.
            let retry = match &answer {
                Err(Error::Remote { error, .. })
                    if !retried && error.code == UNSUPPORTED_PROTOCOL_VERSION =>
                {
                    self.retry_version(v, error)
                }
                _ => None,
            };
            if let Some(next) = retry {
                tracing::debug!(
                    refused = asked.as_str(),
                    retrying = next.as_str(),
                    "server/discover was refused with -32022; asking again"
                );
                retried = true;
                asked = next;
                continue;
            }
            return match answer {
                Ok(r) => Ok(r),
                Err(e) => {
                    peer.set_modern_meta(None);
                    Err(e)
                }
            };
        }
    }

    /// Enter the 2026-07-28 era with the server's answer to `server/discover`.
    fn enter_modern(
        &self,
        peer: &Peer,
        handler: &Arc<ClientHandler>,
        result: DiscoverResult,
    ) -> Result<Client> {
        let offered = result.supported_versions.iter().map(String::as_str);
        let Some(agreed) = self
            .versions
            .pick_common(offered)
            .filter(|v| v.era() == Era::Modern)
        else {
            peer.set_modern_meta(None);
            return Err(Error::Negotiation(
                moat_protocol::version::NegotiationError::Unsupported {
                    offered: result.supported_versions.join(", "),
                    supported: self.versions.strings(),
                },
            ));
        };
        // Always set: after a late answer (see `discover_then_handshake`) it was cleared for
        // `initialize`, and the server may have agreed to another revision than we asked.
        peer.set_modern_meta(Some(self.modern_meta(agreed)));
        lifecycle_step(peer, |l| l.enter_modern(agreed))?;
        Ok(Client {
            peer: peer.clone(),
            handler: handler.clone(),
            server_info: result
                .server_info()
                .unwrap_or_else(|| Implementation::new("unknown", "unknown")),
            capabilities: result.capabilities.clone(),
            instructions: result.instructions.clone(),
            child: None,
        })
    }

    async fn handshake(
        &self,
        peer: &Peer,
        handler: &Arc<ClientHandler>,
        v: ProtocolVersion,
    ) -> Result<Client> {
        lifecycle_step(peer, |l| l.initialize_sent())?;
        let params = InitializeRequestParams {
            protocol_version: v.as_str().to_owned(),
            capabilities: self.capabilities.clone(),
            client_info: self.info.clone(),
            meta: None,
        };
        let options = RequestOptions {
            timeout: self.handshake_deadline(),
            ..RequestOptions::default()
        };
        let result: InitializeResult = match peer
            .request_with(methods::INITIALIZE, &params, options)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                peer.with_lifecycle(|l| l.handshake_failed());
                return Err(e);
            }
        };
        let agreed = match self.versions.accept_handshake(&result.protocol_version) {
            Ok(v) => v,
            Err(e) => {
                // We cannot speak what the server offered: say so and hang up, as the spec asks.
                peer.with_lifecycle(|l| l.handshake_failed());
                return Err(e.into());
            }
        };
        lifecycle_step(peer, |l| l.handshake_done(agreed))?;
        peer.notify(
            methods::NOTIFICATIONS_INITIALIZED,
            &NotificationParams::default(),
        )
        .await?;
        Ok(Client {
            peer: peer.clone(),
            handler: handler.clone(),
            server_info: result.server_info,
            capabilities: result.capabilities,
            instructions: result.instructions,
            child: None,
        })
    }
}

/// A step of the handshake's lifecycle. Refused because the connection has already ended
/// (a server that exits at once can get there before we do), it fails with the reason the
/// connection ended, as a request would, not a bare "the connection has shut down".
fn lifecycle_step(
    peer: &Peer,
    step: impl FnOnce(
        &mut moat_protocol::lifecycle::Lifecycle,
    ) -> std::result::Result<(), moat_protocol::lifecycle::LifecycleError>,
) -> Result<()> {
    peer.with_lifecycle(step).map_err(|e| match e {
        moat_protocol::lifecycle::LifecycleError::Shutdown => Error::Closed(peer.close_reason()),
        e => e.into(),
    })
}

/// Answers the server's requests and fans out its notifications.
struct ClientHandler {
    notifications: broadcast::Sender<ServerNotification>,
    handlers: Arc<Handlers>,
    /// The answerers of our requests in flight, oldest first, each under a number of its own.
    answerers: Mutex<Vec<(u64, InputAnswerer)>>,
    next_answerer: AtomicU64,
}

/// Keeps an answerer in [`ClientHandler::answerers`] while its request is in flight.
struct AnswererGuard<'a> {
    handler: &'a ClientHandler,
    key: u64,
}

impl Drop for AnswererGuard<'_> {
    fn drop(&mut self) {
        let mut answerers = self
            .handler
            .answerers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        answerers.retain(|(k, _)| *k != self.key);
    }
}

impl ClientHandler {
    fn hold(&self, answerer: &InputAnswerer) -> AnswererGuard<'_> {
        let key = self.next_answerer.fetch_add(1, Ordering::Relaxed);
        self.answerers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((key, answerer.clone()));
        AnswererGuard { handler: self, key }
    }

    /// The answerer a server request arriving now belongs to: `Ok(None)` when no request
    /// of ours with one is in flight, an error when those in flight stand for different
    /// groups and the request does not say which it serves.
    fn answerer_now(&self, method: &str) -> Result<Option<InputAnswerer>, ErrorObject> {
        let answerers = self.answerers.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, newest)) = answerers.last() else {
            return Ok(None);
        };
        if answerers.iter().any(|(_, a)| a.group() != newest.group()) {
            let groups: std::collections::BTreeSet<&str> =
                answerers.iter().map(|(_, a)| a.group()).collect();
            return Err(ErrorObject::internal(format!(
                "{method} cannot be routed: requests from {} different clients are in flight on \
                 this connection and the request does not say which one it serves",
                groups.len()
            )));
        }
        Ok(Some(newest.clone()))
    }
}

/// The client's own answers to a server's questions (set on the builder).
struct Handlers {
    sampling: Option<SamplingFn>,
    elicitation: Option<ElicitationFn>,
    roots: Option<Vec<Root>>,
    input: Option<InputFn>,
}

impl Handlers {
    /// Answers one input request: the handler for its kind, else the general one.
    async fn answer(
        &self,
        method: &str,
        request: InputRequest,
    ) -> Result<InputResponse, ErrorObject> {
        match request {
            InputRequest::CreateMessage(p) if self.sampling.is_some() => match &self.sampling {
                Some(f) => f(p).await.map(InputResponse::CreateMessage),
                None => Err(ErrorObject::method_not_found(method)),
            },
            InputRequest::Elicit(p) if self.elicitation.is_some() => match &self.elicitation {
                Some(f) => f(p).await.map(InputResponse::Elicit),
                None => Err(ErrorObject::method_not_found(method)),
            },
            InputRequest::ListRoots(_) if self.roots.is_some() => {
                Ok(InputResponse::ListRoots(ListRootsResult {
                    roots: self.roots.clone().unwrap_or_default(),
                    ..Default::default()
                }))
            }
            request => match &self.input {
                Some(f) => f(request).await,
                None => Err(ErrorObject::method_not_found(method)),
            },
        }
    }
}

fn encode<T: serde::Serialize>(v: &T) -> HandlerResult {
    serde_json::value::to_raw_value(v).map_err(|e| ErrorObject::internal(e.to_string()))
}

impl Handler for ClientHandler {
    fn handle_request(
        &self,
        request: IncomingRequest,
        _ctx: RequestContext,
    ) -> BoxFuture<HandlerResult> {
        let method = request.method;
        let params = request.params;
        let decoded = match method.as_str() {
            methods::SAMPLING_CREATE_MESSAGE => {
                moat_protocol::jsonrpc::decode_params(params.as_deref())
                    .map(InputRequest::CreateMessage)
            }
            methods::ELICITATION_CREATE => {
                moat_protocol::jsonrpc::decode_params(params.as_deref()).map(InputRequest::Elicit)
            }
            methods::ROOTS_LIST => Ok(InputRequest::ListRoots(
                params
                    .as_deref()
                    .and_then(|p| serde_json::from_str(p.get()).ok()),
            )),
            other => Err(ErrorObject::method_not_found(other)),
        };
        let request = match decoded {
            Ok(request) => request,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        // The answerer is chosen now, while the request it serves is surely in flight.
        let chosen = self.answerer_now(&method);
        let handlers = self.handlers.clone();
        Box::pin(async move {
            let response = match chosen? {
                Some(answerer) => answerer.answer(None, request).await?,
                None => handlers.answer(&method, request).await?,
            };
            encode(&response)
        })
    }

    fn on_notification(&self, method: &str, params: Option<&RawValue>, _peer: &Peer) {
        let params = params.and_then(|p| serde_json::from_str(p.get()).ok());
        let _ = self.notifications.send(ServerNotification {
            method: method.to_owned(),
            params,
        });
    }
}

/// A connected MCP client.
pub struct Client {
    peer: Peer,
    handler: Arc<ClientHandler>,
    server_info: Implementation,
    capabilities: ServerCapabilities,
    instructions: Option<String>,
    child: Option<ChildProcess>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server_info.name)
            .field("version", &self.peer.protocol_version())
            .finish()
    }
}

/// Follow `nextCursor` until the last page; stop on a cursor that repeats (a broken server).
macro_rules! all_pages {
    ($self:ident, $method:ident, $field:ident) => {{
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        loop {
            let page = $self.$method(cursor.take()).await?;
            out.extend(page.$field);
            match page.next_cursor {
                Some(next) if seen.insert(next.clone()) => cursor = Some(next),
                _ => break,
            }
        }
        Ok(out)
    }};
}

impl Client {
    /// A builder, to set the revision, capabilities and handlers before connecting.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::new("moat", env!("CARGO_PKG_VERSION"))
    }

    /// Launch `argv` and connect to it over stdio with default settings.
    pub async fn connect_command<I, S>(argv: I) -> Result<Client>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Client::builder().connect_command(argv).await
    }

    /// Connect to the server at an `http://` or `https://` URL with default settings
    /// (see [`ClientBuilder::connect_url`]).
    pub async fn connect_url(url: &str) -> Result<Client> {
        Client::builder()
            .connect_url(url, HttpOptions::default())
            .await
    }

    fn with_child(mut self, child: ChildProcess) -> Self {
        self.child = Some(child);
        self
    }

    /// The underlying peer (for raw requests and notifications).
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// The revision agreed with the server.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.peer.protocol_version()
    }

    /// What the server said about itself.
    pub fn server_info(&self) -> &Implementation {
        &self.server_info
    }

    /// The server's capabilities.
    pub fn server_capabilities(&self) -> &ServerCapabilities {
        &self.capabilities
    }

    /// The server's instructions for the model, if any.
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    /// The server process, when we launched it.
    pub fn child(&self) -> Option<&ChildProcess> {
        self.child.as_ref()
    }

    /// Notifications from the server, from now on. Slow readers miss the oldest ones.
    pub fn notifications(&self) -> broadcast::Receiver<ServerNotification> {
        self.handler.notifications.subscribe()
    }

    /// `ping`.
    pub async fn ping(&self) -> Result<()> {
        let _: EmptyResult = self
            .peer
            .request(methods::PING, &RequestParams::default())
            .await?;
        Ok(())
    }

    /// One page of `tools/list`.
    pub async fn list_tools(&self, cursor: Option<String>) -> Result<ListToolsResult> {
        self.peer
            .request(methods::TOOLS_LIST, &paginated(cursor))
            .await
    }

    /// Every tool, following pagination.
    pub async fn list_all_tools(&self) -> Result<Vec<Tool>> {
        all_pages!(self, list_tools, tools)
    }

    /// Call a tool. `arguments` must be a JSON object (or null for none).
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult> {
        self.call_tool_with(name, arguments, RequestOptions::default())
            .await
    }

    /// Call a tool with per-call options (deadline, progress).
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: RequestOptions,
    ) -> Result<CallToolResult> {
        let mut params = CallToolRequestParams::new(name);
        match arguments {
            Value::Object(map) => params.arguments = Some(map),
            Value::Null => {}
            other => {
                return Err(Error::Encode(moat_protocol::jsonrpc::EncodeError::from(
                    <serde_json::Error as serde::ser::Error>::custom(format!(
                        "tool arguments must be a JSON object, not {other}"
                    )),
                )));
            }
        }
        self.with_rounds(methods::TOOLS_CALL, params, options).await
    }

    /// Send a request that may be answered with an `InputRequiredResult` (2026-07-28): fulfil
    /// its input requests (with the request's [`InputAnswerer`], else this client's
    /// handlers) and retry, echoing `requestState`, until the real result arrives. In the
    /// handshake era the answerer stands ready for the server's requests meanwhile.
    async fn with_rounds<P, R>(
        &self,
        method: &str,
        mut params: P,
        options: RequestOptions,
    ) -> Result<R>
    where
        P: serde::Serialize + Retry,
        R: serde::de::DeserializeOwned,
    {
        if self.peer.protocol_version().map(ProtocolVersion::era) != Some(Era::Modern) {
            let _held = options.answerer.as_ref().map(|a| self.handler.hold(a));
            let raw = self.peer.request_raw(method, &params, options).await?;
            return decode_raw(method, &raw);
        }
        for _ in 0..MAX_ROUNDS {
            let raw = self
                .peer
                .request_raw(method, &params, options.clone())
                .await?;
            // Most results are complete: skip the second look unless the marker is there.
            if !raw.get().contains(RESULT_TYPE_INPUT_REQUIRED) {
                return decode_raw(method, &raw);
            }
            #[derive(serde::Deserialize)]
            struct Kind {
                #[serde(rename = "resultType", default)]
                result_type: Option<String>,
            }
            let kind: Kind = decode_raw(method, &raw)?;
            if kind.result_type.as_deref() != Some(RESULT_TYPE_INPUT_REQUIRED) {
                return decode_raw(method, &raw);
            }
            let asked: InputRequiredResult = decode_raw(method, &raw)?;
            let fulfil = self.fulfil(
                asked.input_requests.unwrap_or_default(),
                options.answerer.as_ref(),
            );
            // A server that goes away while its questions are answered can take no retry:
            // the call ends then, not when the answers come (a person may never give one).
            let responses = tokio::select! {
                responses = fulfil => responses?,
                _ = self.peer.closed() => return Err(Error::Closed(self.peer.close_reason())),
            };
            params.retry_with(responses, asked.request_state);
        }
        Err(Error::Decode {
            method: method.to_owned(),
            detail: format!("the server still wanted more input after {MAX_ROUNDS} rounds"),
        })
    }

    /// Answer a round of input requests with `answerer`, else this client's handlers.
    async fn fulfil(
        &self,
        requests: InputRequests,
        answerer: Option<&InputAnswerer>,
    ) -> Result<InputResponses> {
        let mut responses = InputResponses::new();
        if let Some(answerer) = answerer {
            // All at once, under the server's keys: an answerer that passes them on can
            // ask its own client for them together.
            let answers =
                futures_util::future::join_all(requests.into_iter().map(|(key, request)| {
                    let method = request.method().to_owned();
                    let asked = answerer.answer(Some(key.clone()), request);
                    async move { (key, asked.await.map_err(|error| remote(&method, error))) }
                }))
                .await;
            for (key, answer) in answers {
                responses.insert(key, answer?);
            }
            return Ok(responses);
        }
        for (key, request) in requests {
            let method = request.method().to_owned();
            let handlers = &self.handler.handlers;
            let lacks = match &request {
                InputRequest::CreateMessage(_) => {
                    (handlers.sampling.is_none() && handlers.input.is_none()).then_some("sampling")
                }
                InputRequest::Elicit(_) => (handlers.elicitation.is_none()
                    && handlers.input.is_none())
                .then_some("elicitation"),
                InputRequest::ListRoots(_) => {
                    (handlers.roots.is_none() && handlers.input.is_none()).then_some("roots")
                }
                _ => Some("an input request of an unknown kind"),
            };
            if let Some(what) = lacks {
                return Err(Error::ClientLacks(what));
            }
            let answer = handlers
                .answer(&method, request)
                .await
                .map_err(|error| remote(&method, error))?;
            responses.insert(key, answer);
        }
        Ok(responses)
    }

    /// One page of `resources/list`.
    pub async fn list_resources(&self, cursor: Option<String>) -> Result<ListResourcesResult> {
        self.peer
            .request(methods::RESOURCES_LIST, &paginated(cursor))
            .await
    }

    /// Every resource, following pagination.
    pub async fn list_all_resources(&self) -> Result<Vec<Resource>> {
        all_pages!(self, list_resources, resources)
    }

    /// One page of `resources/templates/list`.
    pub async fn list_resource_templates(
        &self,
        cursor: Option<String>,
    ) -> Result<ListResourceTemplatesResult> {
        self.peer
            .request(methods::RESOURCES_TEMPLATES_LIST, &paginated(cursor))
            .await
    }

    /// Every resource template, following pagination.
    pub async fn list_all_resource_templates(&self) -> Result<Vec<ResourceTemplate>> {
        all_pages!(self, list_resource_templates, resource_templates)
    }

    /// `resources/read`.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult> {
        self.read_resource_with(uri, RequestOptions::default())
            .await
    }

    /// `resources/read` with per-request options (deadline, an [`InputAnswerer`]).
    pub async fn read_resource_with(
        &self,
        uri: &str,
        options: RequestOptions,
    ) -> Result<ReadResourceResult> {
        let params = ReadResourceRequestParams {
            uri: uri.to_owned(),
            ..Default::default()
        };
        self.with_rounds(methods::RESOURCES_READ, params, options)
            .await
    }

    /// `resources/subscribe`.
    pub async fn subscribe(&self, uri: &str) -> Result<()> {
        let params = ResourceRequestParams {
            uri: uri.to_owned(),
            ..Default::default()
        };
        let _: EmptyResult = self
            .peer
            .request(methods::RESOURCES_SUBSCRIBE, &params)
            .await?;
        Ok(())
    }

    /// `resources/unsubscribe`.
    pub async fn unsubscribe(&self, uri: &str) -> Result<()> {
        let params = ResourceRequestParams {
            uri: uri.to_owned(),
            ..Default::default()
        };
        let _: EmptyResult = self
            .peer
            .request(methods::RESOURCES_UNSUBSCRIBE, &params)
            .await?;
        Ok(())
    }

    /// One page of `prompts/list`.
    pub async fn list_prompts(&self, cursor: Option<String>) -> Result<ListPromptsResult> {
        self.peer
            .request(methods::PROMPTS_LIST, &paginated(cursor))
            .await
    }

    /// Every prompt, following pagination.
    pub async fn list_all_prompts(&self) -> Result<Vec<Prompt>> {
        all_pages!(self, list_prompts, prompts)
    }

    /// `prompts/get`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<GetPromptResult> {
        self.get_prompt_with(name, arguments, RequestOptions::default())
            .await
    }

    /// `prompts/get` with per-request options (deadline, an [`InputAnswerer`]).
    pub async fn get_prompt_with(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
        options: RequestOptions,
    ) -> Result<GetPromptResult> {
        let params = GetPromptRequestParams {
            name: name.to_owned(),
            arguments: (!arguments.is_empty()).then_some(arguments),
            ..Default::default()
        };
        self.with_rounds(methods::PROMPTS_GET, params, options)
            .await
    }

    /// `completion/complete`.
    pub async fn complete(&self, params: CompleteRequestParams) -> Result<CompleteResult> {
        self.peer
            .request(methods::COMPLETION_COMPLETE, &params)
            .await
    }

    /// Open a `subscriptions/listen` stream (2026-07-28): the server then sends the
    /// notifications `filter` asks for (list changes, updates of the named resources), which
    /// arrive on [`notifications`](Self::notifications). Returns once the server has
    /// acknowledged, with what it agreed to honour; dropping the [`Listening`] handle
    /// cancels the stream.
    pub async fn listen(&self, filter: SubscriptionFilter) -> Result<Listening> {
        let mut notes = self.notifications();
        let peer = self.peer.clone();
        let params = SubscriptionsListenRequestParams {
            notifications: filter,
            meta: None,
        };
        let task = tokio::spawn(async move {
            let options = RequestOptions {
                timeout: Some(Duration::from_secs(u64::from(u32::MAX))),
                ..Default::default()
            };
            let _: Result<Value> = peer
                .request_with(methods::SUBSCRIPTIONS_LISTEN, &params, options)
                .await;
        });
        let acknowledged = async {
            loop {
                match notes.recv().await {
                    Ok(n) if n.method == methods::NOTIFICATIONS_SUBSCRIPTIONS_ACKNOWLEDGED => {
                        let honoured = n
                            .params
                            .and_then(|p| p.get("notifications").cloned())
                            .and_then(|f| serde_json::from_value(f).ok())
                            .unwrap_or_default();
                        return Ok(honoured);
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => {
                        return Err(Error::Closed("the connection ended".into()));
                    }
                }
            }
        };
        let timeout = self
            .peer
            .default_timeout()
            .unwrap_or(Duration::from_secs(60));
        match tokio::time::timeout(timeout, acknowledged).await {
            Ok(Ok(honoured)) => Ok(Listening { task, honoured }),
            Ok(Err(e)) => {
                task.abort();
                Err(e)
            }
            Err(_) => {
                task.abort();
                Err(Error::Timeout {
                    method: methods::SUBSCRIPTIONS_LISTEN.to_owned(),
                    after: timeout,
                })
            }
        }
    }

    /// `logging/setLevel`.
    pub async fn set_log_level(&self, level: LoggingLevel) -> Result<()> {
        let params = SetLevelRequestParams { level, meta: None };
        let _: EmptyResult = self
            .peer
            .request(methods::LOGGING_SET_LEVEL, &params)
            .await?;
        Ok(())
    }

    /// Close the connection; a launched server is shut down (stdin closed, then SIGTERM,
    /// then SIGKILL) and reaped.
    pub async fn close(self) {
        self.peer.close().await;
    }
}

/// An HTTP setup failure as an SDK error.
fn http_error(e: HttpError) -> Error {
    Error::Http(e)
}

fn paginated(cursor: Option<String>) -> PaginatedRequestParams {
    PaginatedRequestParams {
        cursor,
        ..Default::default()
    }
}

fn decode_raw<T: serde::de::DeserializeOwned>(method: &str, raw: &RawValue) -> Result<T> {
    serde_json::from_str(raw.get()).map_err(|e| Error::Decode {
        method: method.to_owned(),
        detail: e.to_string(),
    })
}

/// The most rounds of input a request may take before the client gives up.
const MAX_ROUNDS: usize = 16;

fn remote(method: &str, error: ErrorObject) -> Error {
    Error::Remote {
        method: method.to_owned(),
        error,
    }
}

/// Requests that may be retried with input responses (2026-07-28).
trait Retry {
    fn retry_with(&mut self, responses: InputResponses, state: Option<String>);
}

impl Retry for CallToolRequestParams {
    fn retry_with(&mut self, responses: InputResponses, state: Option<String>) {
        self.input_responses = Some(responses);
        self.request_state = state;
    }
}

impl Retry for GetPromptRequestParams {
    fn retry_with(&mut self, responses: InputResponses, state: Option<String>) {
        self.input_responses = Some(responses);
        self.request_state = state;
    }
}

impl Retry for ReadResourceRequestParams {
    fn retry_with(&mut self, responses: InputResponses, state: Option<String>) {
        self.input_responses = Some(responses);
        self.request_state = state;
    }
}

/// An open `subscriptions/listen` stream; dropping it cancels the stream.
#[derive(Debug)]
pub struct Listening {
    task: tokio::task::JoinHandle<()>,
    honoured: SubscriptionFilter,
}

impl Listening {
    /// The notifications the server agreed to send.
    pub fn honoured(&self) -> &SubscriptionFilter {
        &self.honoured
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        // Dropping the request future sends `notifications/cancelled` for it.
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    use moat_transport::{Frame, Inbound, Outgoing};
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::*;

    type Seen = Arc<Mutex<Vec<Value>>>;

    /// A scripted server: records each message the client sends and answers each request
    /// with `answer(request)`.
    fn scripted(answer: impl Fn(&Value) -> Value + Send + 'static) -> (Connection, Seen) {
        scripted_with(Duration::ZERO, move |req| Some(answer(req)))
    }

    /// A scripted server that takes `delay` over each request, one at a time in the order
    /// they came, and leaves unanswered those `answer` gives no reply for.
    fn scripted_with(
        delay: Duration,
        answer: impl Fn(&Value) -> Option<Value> + Send + 'static,
    ) -> (Connection, Seen) {
        let (in_tx, in_rx) = mpsc::channel(16);
        let (out_tx, mut out_rx) = mpsc::channel::<Outgoing>(16);
        let seen = Seen::default();
        let log = seen.clone();
        tokio::spawn(async move {
            while let Some(msg) = out_rx.recv().await {
                let request: Value = serde_json::from_str(&msg.text).expect("JSON");
                log.lock().expect("log").push(request.clone());
                if request.get("id").is_none() {
                    continue;
                }
                tokio::time::sleep(delay).await;
                if let Some(reply) = answer(&request) {
                    let _ = in_tx
                        .send(Inbound::Frame(Frame::Line(reply.to_string())))
                        .await;
                }
            }
        });
        let conn = Connection {
            inbound: in_rx,
            outbound: out_tx,
            closer: None,
            single_request: false,
            driver: None,
        };
        (conn, seen)
    }

    #[tokio::test]
    async fn a_slow_modern_server_is_spoken_to_in_2026_07_28() {
        // Answers `server/discover` after the client's patience has run out, then refuses the
        // `initialize` sent meanwhile, as a 2026-07-28 server that has started slowly does.
        let (conn, seen) = scripted_with(Duration::from_millis(300), |req| {
            Some(if req["method"] == methods::SERVER_DISCOVER {
                discover_answer(req, "2026-07-28")
            } else {
                json!({"jsonrpc": "2.0", "id": req["id"], "error": {
                    "code": -32022,
                    "message": "connection is serving the 2026-07-28 protocol"
                }})
            })
        });
        let client = Client::builder()
            .discover_timeout(Duration::from_millis(100))
            .connect(conn)
            .await
            .expect("the late discover answer decides");
        assert_eq!(
            client.protocol_version(),
            Some(ProtocolVersion::V2026_07_28)
        );
        let methods_sent: Vec<Value> = seen
            .lock()
            .expect("log")
            .iter()
            .map(|m| m["method"].clone())
            .collect();
        assert_eq!(
            methods_sent,
            [json!(methods::SERVER_DISCOVER), json!(methods::INITIALIZE)]
        );
        // Requests now carry the 2026-07-28 `_meta` again.
        let _ = client.ping().await;
        let last = seen
            .lock()
            .expect("log")
            .last()
            .cloned()
            .expect("ping sent");
        assert_eq!(last["method"], methods::PING);
        assert_eq!(last["params"]["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
        client.close().await;
    }

    #[tokio::test]
    async fn a_server_that_ignores_discover_gets_the_handshake() {
        let (conn, seen) = scripted_with(Duration::ZERO, |req| {
            (req["method"] == methods::INITIALIZE).then(|| {
                json!({"jsonrpc": "2.0", "id": req["id"], "result": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "serverInfo": {"name": "old", "version": "1"}
                }})
            })
        });
        let client = Client::builder()
            .discover_timeout(Duration::from_millis(100))
            .connect(conn)
            .await
            .expect("falls back to initialize");
        assert_eq!(
            client.protocol_version(),
            Some(ProtocolVersion::V2025_11_25)
        );
        let initialize = seen
            .lock()
            .expect("log")
            .iter()
            .find(|m| m["method"] == methods::INITIALIZE)
            .cloned()
            .expect("initialize sent");
        assert!(
            initialize["params"].get("_meta").is_none(),
            "initialize must not carry the 2026-07-28 _meta: {initialize}"
        );
        client.close().await;
    }

    /// `server/discover` answered if it names `supported`, else refused with -32022.
    fn discover_answer(request: &Value, supported: &str) -> Value {
        let named = &request["params"]["_meta"][META_PROTOCOL_VERSION];
        if request["method"] == methods::SERVER_DISCOVER && named == supported {
            json!({"jsonrpc": "2.0", "id": request["id"], "result": {
                "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                "supportedVersions": [supported], "capabilities": {},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}
            }})
        } else {
            refusal(request, supported)
        }
    }

    fn refusal(request: &Value, supported: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": request["id"], "error": {
            "code": -32022, "message": "Unsupported protocol version",
            "data": {
                "supported": [supported],
                "requested": request["params"]["_meta"][META_PROTOCOL_VERSION]
            }
        }})
    }

    #[tokio::test]
    async fn a_refused_first_request_is_retried_with_a_supported_revision() {
        // Refuses the first request whatever it names, as the conformance suite's mock does.
        let first = AtomicBool::new(true);
        let (conn, seen) = scripted(move |req| {
            if first.swap(false, Ordering::SeqCst) {
                refusal(req, "2026-07-28")
            } else {
                discover_answer(req, "2026-07-28")
            }
        });
        let client = Client::builder()
            .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
            .connect(conn)
            .await
            .expect("connects after the retry");
        assert_eq!(
            client.protocol_version(),
            Some(ProtocolVersion::V2026_07_28)
        );
        let seen = seen.lock().expect("log").clone();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_ne!(seen[0]["id"], seen[1]["id"]);
        for request in &seen {
            assert_eq!(request["method"], methods::SERVER_DISCOVER);
            assert_eq!(
                request["params"]["_meta"][META_PROTOCOL_VERSION],
                "2026-07-28"
            );
        }
        client.close().await;
    }

    #[tokio::test]
    async fn a_refusal_naming_nothing_we_share_is_final() {
        let (conn, seen) = scripted(|req| discover_answer(req, "2099-01-01"));
        let err = Client::builder()
            .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
            .connect(conn)
            .await
            .expect_err("nothing in common");
        match err {
            Error::Remote { error, .. } => assert_eq!(error.code, UNSUPPORTED_PROTOCOL_VERSION),
            other => panic!("unexpected error: {other}"),
        }
        let seen = seen.lock().expect("log").clone();
        assert_eq!(
            seen.len(),
            1,
            "no retry without a shared revision: {seen:?}"
        );
    }
}
