//! [`OAuthClient`]: discovery, client identity, the grants, and the state between them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest as _, Sha256};
use url::Url;

use super::AuthError;
use super::challenge::{BearerChallenge, split_scopes};
use super::config::{Grant, IdentityAssertion, OAuthConfig};
use super::fetch::{Fetcher, clip};
use super::jwt::{EcKey, b64url, dpop_proof, random_b64url};
use super::metadata::{
    ResourceMetadata, ServerMetadata, canonical_resource, origin_string, resource_covers,
    resource_metadata_urls, server_metadata_urls,
};
use super::store::{ClientRegistration, Secret, TokenSet, TokenType};
use super::token::{
    ClientCreds, ID_JAG, ID_TOKEN, JWT_BEARER, TOKEN_EXCHANGE, TokenCall, TokenResponse, lock,
};
use super::user_agent::{AuthorizationRequest, UserAgent, strip_query};

/// Refresh a token this long before it expires.
const EXPIRY_SKEW: Duration = Duration::from_secs(30);

/// What the transport should do with a response, as decided by
/// [`Authorizer::on_response`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Use the response as it is (success, or an error authorization cannot fix).
    Proceed,
    /// Credentials changed: send the same request again, with fresh
    /// [`Authorizer::prepare`] headers.
    Retry,
}

/// The credentials attached to one HTTP request. Keep it until the response is in and hand
/// it to [`Authorizer::on_response`]: it records which token (and DPoP nonce) the request
/// carried, so that concurrent 401s lead to one authorization, not many.
#[derive(Debug, Clone, Default)]
pub struct RequestAuth {
    headers: HeaderMap,
    generation: u64,
    nonce: Option<String>,
    carried_token: bool,
    ours: bool,
}

impl RequestAuth {
    /// No credentials (what an [`Authorizer`] that has none returns).
    pub fn none() -> RequestAuth {
        RequestAuth::default()
    }

    /// Credentials made of `headers` (for custom [`Authorizer`]s).
    pub fn with_headers(headers: HeaderMap) -> RequestAuth {
        RequestAuth {
            carried_token: !headers.is_empty(),
            headers,
            ours: true,
            ..RequestAuth::default()
        }
    }

    /// The headers to add to the request: `Authorization` and, for DPoP, `DPoP`. Values
    /// are marked sensitive.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// Whether the request carries an access token.
    pub fn has_token(&self) -> bool {
        self.carried_token
    }
}

/// What an HTTP transport needs from an authorization provider. Per request:
///
/// ```text
/// loop {
///     let auth = authorizer.prepare(&method, &url).await?;   // headers to add
///     let response = send(request + auth.headers()).await?;
///     match authorizer.on_response(&auth, response.status(), response.headers()).await? {
///         Verdict::Retry => continue,        // (bound the loop, e.g. 4 rounds)
///         Verdict::Proceed => break response,
///     }
/// }
/// ```
///
/// `on_response` must see every response (not only 401/403): successes reset the
/// authorization retry limit and may carry a new DPoP nonce. An `Err` from either call is an
/// authorization failure to report to the caller of the request.
pub trait Authorizer: Send + Sync + 'static {
    /// The credentials for a request of `method` to `url`. Never credentials for a URL of
    /// another origin than the one they were issued for.
    fn prepare<'a>(
        &'a self,
        method: &'a Method,
        url: &'a Url,
    ) -> BoxFuture<'a, Result<RequestAuth, AuthError>>;

    /// Judge the response to a request sent with `sent`. On 401, and on 403 with
    /// `insufficient_scope`, this (re-)authorizes, which may take as long as the user takes
    /// to approve; other callers wait for that one authorization instead of starting theirs.
    fn on_response<'a>(
        &'a self,
        sent: &'a RequestAuth,
        status: StatusCode,
        headers: &'a HeaderMap,
    ) -> BoxFuture<'a, Result<Verdict, AuthError>>;
}

/// The OAuth 2.1 client of one MCP server: cheap to clone (the clones share state).
#[derive(Clone, Debug)]
pub struct OAuthClient {
    inner: Arc<Inner>,
}

struct Inner {
    server: Url,
    server_key: String,
    config: OAuthConfig,
    fetcher: Fetcher,
    dpop_key: Option<EcKey>,
    state: Mutex<State>,
    /// Held for the whole of a (re-)authorization or refresh.
    flow: tokio::sync::Mutex<()>,
    metadata: Mutex<HashMap<String, Arc<ServerMetadata>>>,
    as_nonces: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClient")
            .field("server", &self.server.as_str())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    tokens: Option<TokenSet>,
    /// Bumped whenever `tokens` changes.
    generation: u64,
    /// How to refresh `tokens`.
    session: Option<Session>,
    /// The scopes of the last authorization (without `offline_access`).
    requested_scopes: Vec<String>,
    /// Full authorizations since a request with our token was last accepted.
    streak: u32,
    /// The resource server's DPoP nonce.
    rs_nonce: Option<String>,
    /// A non-interactive grant failed at the token endpoint: do not ask again.
    failed: Option<String>,
}

#[derive(Clone)]
struct Session {
    token_endpoint: Url,
    metadata: Arc<ServerMetadata>,
    client: Option<ClientCreds>,
    issuer: String,
    resource: String,
    dpop: bool,
}

/// The result of discovery.
struct Discovery {
    /// The `resource` parameter: PRM `resource` exactly as published, or the canonical
    /// server URI without PRM.
    resource: String,
    prm: Option<ResourceMetadata>,
    metadata: Arc<ServerMetadata>,
    /// The metadata came from a document (not the 2025-03-26 default endpoints).
    documented: bool,
    /// Who we deal with: the issuer named by PRM (validated against the metadata), or the
    /// MCP server's origin without PRM. Registrations and tokens are bound to it.
    issuer: String,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Reason {
    Unauthorized,
    InsufficientScope,
}

impl OAuthClient {
    /// An OAuth client for the MCP server at `server` (the URL the transport connects to).
    /// Tokens saved in the configured store for that server are picked up.
    pub fn new(server: Url, config: OAuthConfig) -> Result<OAuthClient, AuthError> {
        if !matches!(server.scheme(), "http" | "https") || server.host().is_none() {
            return Err(AuthError::Config(format!(
                "not an HTTP server URL: {}",
                strip_query(&server)
            )));
        }
        if let Grant::AuthorizationCode { user_agent } = &config.grant {
            let r = user_agent.redirect_uri();
            if !matches!(r.scheme(), "http" | "https") {
                return Err(AuthError::Config(format!(
                    "redirect URI {r} is not http(s)"
                )));
            }
        }
        let fetcher = Fetcher::new(
            config.timeout,
            config.max_body_bytes,
            config.allow_insecure_http,
        )?;
        let server_key = canonical_resource(&server);
        let mut state = State::default();
        match config.store.load_tokens(&server_key) {
            Ok(Some(t)) if resource_covers(&t.resource, &server) => {
                tracing::debug!(server = %server_key, "using saved tokens");
                state.requested_scopes = t.scopes.clone();
                state.tokens = Some(t);
                state.generation = 1;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "token store: could not load tokens"),
        }
        let dpop_key = config.dpop.then(EcKey::generate);
        Ok(OAuthClient {
            inner: Arc::new(Inner {
                server,
                server_key,
                config,
                fetcher,
                dpop_key,
                state: Mutex::new(state),
                flow: tokio::sync::Mutex::new(()),
                metadata: Mutex::new(HashMap::new()),
                as_nonces: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The MCP server this client authorizes for.
    pub fn server(&self) -> &Url {
        &self.inner.server
    }

    /// Whether an access token is held.
    pub fn has_token(&self) -> bool {
        lock(&self.inner.state).tokens.is_some()
    }

    /// The scopes of the token held, if any.
    pub fn granted_scopes(&self) -> Option<Vec<String>> {
        lock(&self.inner.state)
            .tokens
            .as_ref()
            .map(|t| t.scopes.clone())
    }

    /// Authorize now, without waiting for a 401: discovery through the well-known
    /// locations, then the configured grant (e.g. for a `login` command).
    pub async fn authorize_now(&self) -> Result<(), AuthError> {
        let _flow = self.inner.flow.lock().await;
        self.inner
            .reauthorize(&BearerChallenge::default(), Reason::Unauthorized)
            .await
    }

    /// Forget the tokens (here and in the store) and any remembered failure.
    pub fn logout(&self) {
        let mut s = lock(&self.inner.state);
        s.tokens = None;
        s.session = None;
        s.failed = None;
        s.streak = 0;
        s.generation += 1;
        drop(s);
        if let Err(e) = self.inner.config.store.clear_tokens(&self.inner.server_key) {
            tracing::warn!(error = %e, "token store: could not clear tokens");
        }
    }

    /// See [`Authorizer::prepare`].
    pub async fn prepare(&self, method: &Method, url: &Url) -> Result<RequestAuth, AuthError> {
        self.inner.prepare(method, url).await
    }

    /// See [`Authorizer::on_response`].
    pub async fn on_response(
        &self,
        sent: &RequestAuth,
        status: StatusCode,
        headers: &HeaderMap,
    ) -> Result<Verdict, AuthError> {
        self.inner.on_response(sent, status, headers).await
    }
}

impl Authorizer for OAuthClient {
    fn prepare<'a>(
        &'a self,
        method: &'a Method,
        url: &'a Url,
    ) -> BoxFuture<'a, Result<RequestAuth, AuthError>> {
        Box::pin(self.inner.prepare(method, url))
    }

    fn on_response<'a>(
        &'a self,
        sent: &'a RequestAuth,
        status: StatusCode,
        headers: &'a HeaderMap,
    ) -> BoxFuture<'a, Result<Verdict, AuthError>> {
        Box::pin(self.inner.on_response(sent, status, headers))
    }
}

fn sensitive(value: &str) -> Option<HeaderValue> {
    let mut v = HeaderValue::from_str(value).ok()?;
    v.set_sensitive(true);
    Some(v)
}

fn union(mut a: Vec<String>, b: &[String]) -> Vec<String> {
    for s in b {
        if !a.contains(s) {
            a.push(s.clone());
        }
    }
    a
}

fn endpoint(meta: &ServerMetadata, value: &Option<String>, name: &str) -> Result<Url, AuthError> {
    let invalid = |detail: String| AuthError::InvalidResponse {
        what: "authorization server metadata",
        url: meta.issuer.clone(),
        detail,
    };
    let v = value
        .as_deref()
        .ok_or_else(|| invalid(format!("no {name}")))?;
    Url::parse(v).map_err(|_| invalid(format!("{name} is not a URL")))
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    async fn prepare(&self, method: &Method, url: &Url) -> Result<RequestAuth, AuthError> {
        let mut auth = RequestAuth::default();
        // Tokens belong to the server's origin; nothing goes anywhere else.
        if url.origin() != self.server.origin() {
            return Ok(auth);
        }
        auth.ours = true;
        let refresh = {
            let s = self.state();
            s.session.is_some()
                && s.tokens
                    .as_ref()
                    .is_some_and(|t| t.expired(EXPIRY_SKEW) && t.refresh_token.is_some())
        };
        if refresh {
            let _flow = self.flow.lock().await;
            let still = self
                .state()
                .tokens
                .as_ref()
                .is_some_and(|t| t.expired(EXPIRY_SKEW) && t.refresh_token.is_some());
            if still && let Err(e) = self.refresh(None).await {
                tracing::info!(error = %e, "token refresh failed; the server will ask again");
            }
        }
        let s = self.state();
        auth.generation = s.generation;
        let Some(tokens) = &s.tokens else {
            return Ok(auth);
        };
        let token = tokens.access_token.expose();
        match tokens.token_type {
            TokenType::Bearer => {
                if let Some(v) = sensitive(&format!("Bearer {token}")) {
                    auth.headers.insert(http::header::AUTHORIZATION, v);
                    auth.carried_token = true;
                }
            }
            TokenType::DPoP => {
                // A DPoP token is useless without the key it is bound to (e.g. one saved
                // by an earlier process): send nothing and let the server ask again.
                let Some(key) = &self.dpop_key else {
                    return Ok(auth);
                };
                let mut htu = url.clone();
                htu.set_query(None);
                htu.set_fragment(None);
                let proof = dpop_proof(
                    key,
                    method.as_str(),
                    htu.as_str(),
                    Some(token),
                    s.rs_nonce.as_deref(),
                );
                if let (Some(a), Some(p)) = (sensitive(&format!("DPoP {token}")), sensitive(&proof))
                {
                    auth.headers.insert(http::header::AUTHORIZATION, a);
                    auth.headers.insert(HeaderName::from_static("dpop"), p);
                    auth.nonce = s.rs_nonce.clone();
                    auth.carried_token = true;
                }
            }
        }
        Ok(auth)
    }

    async fn on_response(
        &self,
        sent: &RequestAuth,
        status: StatusCode,
        headers: &HeaderMap,
    ) -> Result<Verdict, AuthError> {
        if !sent.ours {
            return Ok(Verdict::Proceed);
        }
        let new_nonce = headers
            .get("dpop-nonce")
            .and_then(|v| v.to_str().ok())
            .filter(|n| !n.is_empty() && n.len() <= 1024)
            .map(str::to_owned);
        if self.dpop_key.is_some()
            && let Some(n) = &new_nonce
        {
            self.state().rs_nonce = Some(n.clone());
        }
        let code = status.as_u16();
        if code != 401 && code != 403 {
            if code < 400 && sent.carried_token {
                let mut s = self.state();
                if s.generation == sent.generation {
                    s.streak = 0;
                }
            }
            return Ok(Verdict::Proceed);
        }
        let challenge = BearerChallenge::from_headers(headers);
        tracing::debug!(
            status = code,
            error = challenge.error.as_deref().unwrap_or(""),
            scope = challenge.scope.as_deref().unwrap_or(""),
            "authorization challenge"
        );
        if code == 401
            && challenge.error.as_deref() == Some("use_dpop_nonce")
            && self.dpop_key.is_some()
        {
            let current = self.state().rs_nonce.clone();
            if current.is_some() && current != sent.nonce {
                return Ok(Verdict::Retry);
            }
            return Err(AuthError::Unauthorized(
                "the server repeated its DPoP nonce challenge".into(),
            ));
        }
        if code == 403 && challenge.error.as_deref() != Some("insufficient_scope") {
            return Ok(Verdict::Proceed);
        }
        let _flow = self.flow.lock().await;
        {
            let s = self.state();
            if s.generation != sent.generation && s.tokens.is_some() {
                // Someone re-authorized while this request was out: try the new token.
                return Ok(Verdict::Retry);
            }
            if let Some(f) = &s.failed {
                return Err(AuthError::GrantFailed(f.clone()));
            }
        }
        let reason = if code == 401 {
            Reason::Unauthorized
        } else {
            Reason::InsufficientScope
        };
        self.reauthorize(&challenge, reason).await?;
        Ok(Verdict::Retry)
    }

    /// Discovery, then a refresh or a full authorization. The flow lock is held.
    async fn reauthorize(
        &self,
        challenge: &BearerChallenge,
        reason: Reason,
    ) -> Result<(), AuthError> {
        let disc = self.discover(challenge).await?;
        let refreshable = {
            let mut s = self.state();
            let bound_here = s
                .tokens
                .as_ref()
                .map(|t| t.issuer == disc.issuer && t.resource == disc.resource);
            if bound_here == Some(false) {
                // The server now names another authorization server (or resource): tokens
                // and the session from the old one are never used again.
                tracing::info!(issuer = %disc.issuer, "authorization server changed; starting over");
                s.tokens = None;
                s.session = None;
                s.generation += 1;
            }
            bound_here == Some(true) && s.tokens.as_ref().is_some_and(|t| t.refresh_token.is_some())
        };
        if reason == Reason::Unauthorized && refreshable {
            match self.refresh(Some(&disc)).await {
                Ok(()) => return Ok(()),
                Err(e) => tracing::info!(error = %e, "token refresh failed; authorizing again"),
            }
        }
        {
            let mut s = self.state();
            if s.streak >= self.config.max_authorizations {
                tracing::warn!(attempts = s.streak, "authorization retry limit reached");
                return Err(AuthError::TooManyAttempts(s.streak));
            }
            s.streak += 1;
        }
        let scopes = self.select_scopes(challenge, &disc);
        let dpop = self.dpop_key.as_ref().filter(|_| {
            disc.metadata.supports_dpop_es256()
                || challenge.dpop
                || disc
                    .prm
                    .as_ref()
                    .is_some_and(|p| p.dpop_bound_access_tokens_required == Some(true))
        });
        tracing::info!(
            server = %self.server_key,
            issuer = %disc.issuer,
            scope = %scopes.join(" "),
            dpop = dpop.is_some(),
            "authorizing"
        );
        let result = match &self.config.grant {
            Grant::AuthorizationCode { user_agent } => {
                self.authorization_code(user_agent.as_ref(), &disc, &scopes, dpop)
                    .await
            }
            Grant::ClientCredentials(c) => {
                let client = ClientCreds::from_config(c);
                self.simple_grant(
                    &disc,
                    &scopes,
                    dpop,
                    Some(client),
                    vec![("grant_type".into(), "client_credentials".into())],
                )
                .await
            }
            Grant::JwtBearer {
                assertion,
                client_id,
            } => {
                let mut form = vec![
                    ("grant_type".to_owned(), JWT_BEARER.to_owned()),
                    ("assertion".to_owned(), assertion.expose().to_owned()),
                ];
                if let Some(id) = client_id {
                    form.push(("client_id".into(), id.clone()));
                }
                self.simple_grant(&disc, &scopes, dpop, None, form).await
            }
            Grant::IdentityAssertion(ia) => self.identity_assertion(ia, &disc, &scopes, dpop).await,
        };
        match result {
            Ok((tokens, session)) => {
                self.install(tokens, session, scopes);
                Ok(())
            }
            Err(e) => {
                let interactive = matches!(self.config.grant, Grant::AuthorizationCode { .. });
                if !interactive && matches!(e, AuthError::TokenEndpoint { .. }) {
                    self.state().failed = Some(e.to_string());
                }
                tracing::warn!(error = %e, "authorization failed");
                Err(e)
            }
        }
    }

    fn install(&self, tokens: TokenSet, session: Session, scopes: Vec<String>) {
        if let Err(e) = self.config.store.save_tokens(&self.server_key, &tokens) {
            tracing::warn!(error = %e, "token store: could not save tokens");
        }
        let mut s = self.state();
        tracing::info!(
            server = %self.server_key,
            scope = %tokens.scopes.join(" "),
            refresh = tokens.refresh_token.is_some(),
            "authorized"
        );
        s.tokens = Some(tokens);
        s.session = Some(session);
        s.requested_scopes = scopes;
        s.generation += 1;
        s.failed = None;
    }

    /// The scopes to ask for: the union of what we asked before and what the challenge
    /// names; else what we asked before; else the resource's `scopes_supported`; else none.
    fn select_scopes(&self, challenge: &BearerChallenge, disc: &Discovery) -> Vec<String> {
        let challenged = challenge.scopes();
        let previous = self.state().requested_scopes.clone();
        let previous: Vec<String> = previous
            .into_iter()
            .filter(|s| s != "offline_access")
            .collect();
        if !challenged.is_empty() {
            union(previous, &challenged)
        } else if !previous.is_empty() {
            previous
        } else {
            let supported = disc
                .prm
                .as_ref()
                .and_then(|p| p.scopes_supported.as_ref())
                .map(|s| s.join(" "));
            split_scopes(supported.as_deref())
        }
    }

    // ---------------------------------------------------------------- discovery

    async fn discover(&self, challenge: &BearerChallenge) -> Result<Discovery, AuthError> {
        let server = &self.server;
        match self.fetch_resource_metadata(challenge).await? {
            Some(prm) => {
                if !resource_covers(&prm.resource, server) {
                    tracing::warn!(resource = %clip(&prm.resource), server = %self.server_key, "protected resource metadata is for another resource");
                    return Err(AuthError::ResourceMismatch {
                        resource: clip(&prm.resource),
                        server: self.server_key.clone(),
                    });
                }
                let issuer = prm
                    .authorization_servers
                    .first()
                    .cloned()
                    .ok_or(AuthError::NoAuthorizationServer)?;
                let issuer_url = Url::parse(&issuer)
                    .ok()
                    .filter(|u| u.query().is_none() && u.fragment().is_none())
                    .ok_or_else(|| AuthError::InvalidResponse {
                        what: "protected resource metadata",
                        url: self.server_key.clone(),
                        detail: format!(
                            "authorization server {:?} is not an issuer URL",
                            clip(&issuer)
                        ),
                    })?;
                self.fetcher.check(&issuer_url)?;
                let metadata = self
                    .server_metadata(&issuer, &issuer_url, true)
                    .await?
                    .ok_or_else(|| AuthError::NoServerMetadata(issuer.clone()))?;
                Ok(Discovery {
                    resource: prm.resource.clone(),
                    prm: Some(prm),
                    metadata,
                    documented: true,
                    issuer,
                })
            }
            None => {
                // 2025-03-26: no PRM; the MCP server's origin is the authorization server.
                let origin_str = origin_string(server);
                let origin = Url::parse(&origin_str).map_err(|_| {
                    AuthError::Config(format!("server URL {origin_str} has no usable origin"))
                })?;
                tracing::info!(server = %self.server_key, "no protected resource metadata: using the server's origin as the authorization server");
                let (metadata, documented) =
                    match self.server_metadata(&origin_str, &origin, false).await? {
                        Some(m) => (m, true),
                        None => (Arc::new(ServerMetadata::fallback(&origin)), false),
                    };
                Ok(Discovery {
                    resource: canonical_resource(server),
                    prm: None,
                    metadata,
                    documented,
                    issuer: origin_str,
                })
            }
        }
    }

    /// The PRM: from the challenge's `resource_metadata`, else the well-known locations.
    /// `None` only when the server gave no `resource_metadata` and nothing is published.
    async fn fetch_resource_metadata(
        &self,
        challenge: &BearerChallenge,
    ) -> Result<Option<ResourceMetadata>, AuthError> {
        const WHAT: &str = "protected resource metadata";
        let named = match &challenge.resource_metadata {
            Some(rm) => match self.server.join(rm) {
                Ok(u) => Some(u),
                Err(_) => {
                    tracing::warn!(value = %clip(rm), "unusable resource_metadata URL in the challenge");
                    None
                }
            },
            None => None,
        };
        let candidates: Vec<Url> = named
            .iter()
            .cloned()
            .chain(resource_metadata_urls(&self.server))
            .collect();
        for url in &candidates {
            match self.fetcher.get(WHAT, url).await {
                Ok(reply) if reply.status == StatusCode::OK => {
                    let prm: ResourceMetadata = reply.json(WHAT, url)?;
                    tracing::debug!(url = %strip_query(url), "found protected resource metadata");
                    return Ok(Some(prm));
                }
                Ok(reply) => {
                    tracing::debug!(url = %strip_query(url), status = reply.status.as_u16(), "no protected resource metadata here")
                }
                Err(e) => tracing::debug!(error = %e, "protected resource metadata fetch failed"),
            }
        }
        if named.is_some() {
            return Err(AuthError::NoResourceMetadata(self.server_key.clone()));
        }
        Ok(None)
    }

    /// Authorization server metadata for `issuer`, from the cache or the well-known
    /// locations. With `validate`, a document for another issuer is an error.
    async fn server_metadata(
        &self,
        issuer: &str,
        issuer_url: &Url,
        validate: bool,
    ) -> Result<Option<Arc<ServerMetadata>>, AuthError> {
        const WHAT: &str = "authorization server metadata";
        let key = format!("{validate} {issuer}");
        if let Some(m) = lock(&self.metadata).get(&key) {
            return Ok(Some(m.clone()));
        }
        let mut failure = None;
        for url in server_metadata_urls(issuer_url) {
            match self.fetcher.get(WHAT, &url).await {
                Ok(reply) if reply.status == StatusCode::OK => {
                    let meta: ServerMetadata = reply.json(WHAT, &url)?;
                    if validate && meta.issuer != issuer {
                        tracing::warn!(expected = %issuer, found = %clip(&meta.issuer), "authorization server metadata issuer mismatch");
                        return Err(AuthError::IssuerMismatch {
                            expected: issuer.to_owned(),
                            found: clip(&meta.issuer),
                        });
                    }
                    tracing::debug!(url = %url, "found authorization server metadata");
                    let meta = Arc::new(meta);
                    lock(&self.metadata).insert(key, meta.clone());
                    return Ok(Some(meta));
                }
                Ok(reply) => {
                    tracing::debug!(url = %url, status = reply.status.as_u16(), "no authorization server metadata here")
                }
                Err(e) => failure = Some(e),
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    // ---------------------------------------------------------------- client identity

    /// A client identity usable without registering (pre-registered, kept from an
    /// earlier registration, or a Client ID Metadata Document).
    fn known_client(
        &self,
        disc: &Discovery,
        redirect: Option<&Url>,
    ) -> Result<Option<ClientCreds>, AuthError> {
        if let Some(p) = self
            .config
            .pre_registered
            .iter()
            .find(|p| p.issuer.as_deref().is_none_or(|i| i == disc.issuer))
        {
            return Ok(Some(ClientCreds {
                client_id: p.client_id.clone(),
                secret: p.client_secret.clone(),
                key: None,
                method: p.auth_method.clone(),
            }));
        }
        if let Some(r) = self.config.store.load_registration(&disc.issuer)? {
            let redirect_ok = redirect.is_none_or(|u| {
                r.redirect_uris.is_empty() || r.redirect_uris.iter().any(|x| x == u.as_str())
            });
            let fresh = r
                .client_secret_expires_at
                .is_none_or(|at| std::time::SystemTime::now() < at);
            if redirect_ok && fresh {
                return Ok(Some(ClientCreds::from_registration(&r)));
            }
        }
        if disc.metadata.client_id_metadata_document_supported == Some(true)
            && let Some(url) = &self.config.client_metadata_url
        {
            return Ok(Some(ClientCreds {
                client_id: url.clone(),
                secret: None,
                key: None,
                method: Some("none".into()),
            }));
        }
        Ok(None)
    }

    async fn client_identity(
        &self,
        disc: &Discovery,
        redirect: &Url,
    ) -> Result<ClientCreds, AuthError> {
        if let Some(c) = self.known_client(disc, Some(redirect))? {
            return Ok(c);
        }
        let Some(endpoint) = &disc.metadata.registration_endpoint else {
            return Err(AuthError::NoClientIdentity(disc.issuer.clone()));
        };
        let url = Url::parse(endpoint).map_err(|_| AuthError::InvalidResponse {
            what: "authorization server metadata",
            url: disc.issuer.clone(),
            detail: "registration_endpoint is not a URL".into(),
        })?;
        let registration = self.register(&url, &disc.metadata, redirect).await?;
        self.config
            .store
            .save_registration(&disc.issuer, &registration)?;
        Ok(ClientCreds::from_registration(&registration))
    }

    /// RFC 7591 Dynamic Client Registration.
    async fn register(
        &self,
        url: &Url,
        meta: &ServerMetadata,
        redirect: &Url,
    ) -> Result<ClientRegistration, AuthError> {
        const WHAT: &str = "client registration";
        let method = match &meta.token_endpoint_auth_methods_supported {
            None => "client_secret_basic",
            Some(list) => ["none", "client_secret_basic", "client_secret_post"]
                .into_iter()
                .find(|m| list.iter().any(|x| x == m))
                .unwrap_or("none"),
        };
        let body = json!({
            "client_name": self.config.client_name,
            "redirect_uris": [redirect.as_str()],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": self.config.application_type.as_str(),
        });
        tracing::info!(url = %strip_query(url), "registering client");
        let reply = self.fetcher.post_json(WHAT, url, &body).await?;
        if !matches!(reply.status.as_u16(), 200 | 201) {
            let (error, description) = reply.oauth_error();
            return Err(AuthError::Registration {
                url: strip_query(url),
                status: reply.status.as_u16(),
                error,
                description,
            });
        }
        #[derive(Deserialize)]
        struct Registered {
            client_id: String,
            #[serde(default)]
            client_secret: Option<String>,
            #[serde(default)]
            token_endpoint_auth_method: Option<String>,
            #[serde(default)]
            redirect_uris: Option<Vec<String>>,
            #[serde(default)]
            client_secret_expires_at: Option<u64>,
        }
        let r: Registered = reply.json(WHAT, url)?;
        if r.client_id.is_empty() {
            return Err(AuthError::InvalidResponse {
                what: WHAT,
                url: strip_query(url),
                detail: "empty client_id".into(),
            });
        }
        Ok(ClientRegistration {
            client_id: r.client_id,
            client_secret: r.client_secret.filter(|s| !s.is_empty()).map(Secret::new),
            token_endpoint_auth_method: r.token_endpoint_auth_method,
            redirect_uris: r
                .redirect_uris
                .unwrap_or_else(|| vec![redirect.to_string()]),
            // 0 means "never expires" (RFC 7591 §3.2.1).
            client_secret_expires_at: r
                .client_secret_expires_at
                .filter(|&t| t > 0)
                .map(|t| std::time::UNIX_EPOCH + Duration::from_secs(t)),
        })
    }

    // ---------------------------------------------------------------- grants

    fn token_call<'a>(
        &'a self,
        url: &'a Url,
        what: &'static str,
        dpop: Option<&'a EcKey>,
    ) -> TokenCall<'a> {
        TokenCall {
            fetcher: &self.fetcher,
            url,
            what,
            dpop,
            nonces: &self.as_nonces,
            any_token_type: false,
        }
    }

    fn token_set(
        &self,
        resp: TokenResponse,
        disc_resource: &str,
        issuer: &str,
        requested: &[String],
    ) -> TokenSet {
        let scopes = match resp.scope.as_deref() {
            Some(s) => split_scopes(Some(s)),
            None => requested.to_vec(),
        };
        TokenSet {
            access_token: resp.access_token,
            token_type: resp.token_type,
            refresh_token: resp.refresh_token,
            expires_at: resp.expires_at,
            scopes,
            resource: disc_resource.to_owned(),
            issuer: issuer.to_owned(),
        }
    }

    async fn authorization_code(
        &self,
        user_agent: &dyn UserAgent,
        disc: &Discovery,
        scopes: &[String],
        dpop: Option<&EcKey>,
    ) -> Result<(TokenSet, Session), AuthError> {
        let meta = &disc.metadata;
        if disc.documented && !meta.supports_s256() {
            return Err(AuthError::PkceUnsupported(disc.issuer.clone()));
        }
        let authorization_endpoint =
            endpoint(meta, &meta.authorization_endpoint, "authorization_endpoint")?;
        let token_endpoint = endpoint(meta, &meta.token_endpoint, "token_endpoint")?;
        self.fetcher.check(&authorization_endpoint)?;
        self.fetcher.check(&token_endpoint)?;
        let redirect = user_agent.redirect_uri();
        let client = self.client_identity(disc, &redirect).await?;

        let mut scope = scopes.to_vec();
        if self.config.request_offline_access
            && !scope.is_empty()
            && meta.supports_scope("offline_access")
            && !scope.iter().any(|s| s == "offline_access")
        {
            scope.push("offline_access".into());
        }
        let verifier = random_b64url::<32>();
        let code_challenge = b64url(&Sha256::digest(verifier.as_bytes()));
        let state = random_b64url::<16>();
        let mut url = authorization_endpoint.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &client.client_id)
                .append_pair("redirect_uri", redirect.as_str())
                .append_pair("state", &state)
                .append_pair("code_challenge", &code_challenge)
                .append_pair("code_challenge_method", "S256");
            if !scope.is_empty() {
                q.append_pair("scope", &scope.join(" "));
            }
            q.append_pair("resource", &disc.resource);
        }
        let request = AuthorizationRequest {
            url,
            redirect_uri: redirect.clone(),
            state: state.clone(),
        };
        let callback = user_agent.authorize(&request).await?;
        let code = check_callback(&callback, &redirect, &state, disc)?;

        let resp = self
            .token_call(&token_endpoint, "token request", dpop)
            .send(|| {
                let mut form = vec![
                    ("grant_type".to_owned(), "authorization_code".to_owned()),
                    ("code".to_owned(), code.expose().to_owned()),
                    ("code_verifier".to_owned(), verifier.clone()),
                    ("redirect_uri".to_owned(), redirect.to_string()),
                    ("resource".to_owned(), disc.resource.clone()),
                ];
                let mut headers = Vec::new();
                client.apply(meta, &disc.issuer, &mut form, &mut headers);
                (form, headers)
            })
            .await?;
        let tokens = self.token_set(resp, &disc.resource, &disc.issuer, &scope);
        Ok((
            tokens,
            Session {
                token_endpoint,
                metadata: meta.clone(),
                client: Some(client),
                issuer: disc.issuer.clone(),
                resource: disc.resource.clone(),
                dpop: dpop.is_some(),
            },
        ))
    }

    /// A grant that is one token request: client credentials, JWT bearer.
    async fn simple_grant(
        &self,
        disc: &Discovery,
        scopes: &[String],
        dpop: Option<&EcKey>,
        client: Option<ClientCreds>,
        grant: Vec<(String, String)>,
    ) -> Result<(TokenSet, Session), AuthError> {
        let meta = &disc.metadata;
        let token_endpoint = endpoint(meta, &meta.token_endpoint, "token_endpoint")?;
        self.fetcher.check(&token_endpoint)?;
        if let Some((_, g)) = grant.iter().find(|(k, _)| k == "grant_type")
            && !meta.may_support_grant(g)
        {
            tracing::warn!(grant = %g, "the authorization server does not list this grant type");
        }
        let resp = self
            .token_call(&token_endpoint, "token request", dpop)
            .send(|| {
                let mut form = grant.clone();
                form.push(("resource".into(), disc.resource.clone()));
                if !scopes.is_empty() {
                    form.push(("scope".into(), scopes.join(" ")));
                }
                let mut headers = Vec::new();
                if let Some(c) = &client {
                    c.apply(meta, &disc.issuer, &mut form, &mut headers);
                }
                (form, headers)
            })
            .await?;
        let tokens = self.token_set(resp, &disc.resource, &disc.issuer, scopes);
        Ok((
            tokens,
            Session {
                token_endpoint,
                metadata: meta.clone(),
                client,
                issuer: disc.issuer.clone(),
                resource: disc.resource.clone(),
                dpop: dpop.is_some(),
            },
        ))
    }

    /// Enterprise-managed authorization: ID token → ID-JAG at the IdP (RFC 8693), ID-JAG →
    /// access token at the authorization server (RFC 7523).
    async fn identity_assertion(
        &self,
        ia: &IdentityAssertion,
        disc: &Discovery,
        scopes: &[String],
        dpop: Option<&EcKey>,
    ) -> Result<(TokenSet, Session), AuthError> {
        self.fetcher.check(&ia.idp_token_endpoint)?;
        let mut exchange = self.token_call(&ia.idp_token_endpoint, "token exchange", None);
        exchange.any_token_type = true;
        let jag = exchange
            .send(|| {
                let mut form = vec![
                    ("grant_type".to_owned(), TOKEN_EXCHANGE.to_owned()),
                    ("requested_token_type".to_owned(), ID_JAG.to_owned()),
                    ("audience".to_owned(), disc.issuer.clone()),
                    ("resource".to_owned(), disc.resource.clone()),
                    ("subject_token".to_owned(), ia.id_token.expose().to_owned()),
                    ("subject_token_type".to_owned(), ID_TOKEN.to_owned()),
                ];
                if !scopes.is_empty() {
                    form.push(("scope".into(), scopes.join(" ")));
                }
                let mut headers = Vec::new();
                let idp = ClientCreds {
                    client_id: ia.idp_client_id.clone(),
                    secret: ia.idp_client_secret.clone(),
                    key: None,
                    method: Some(if ia.idp_client_secret.is_some() {
                        "client_secret_basic".into()
                    } else {
                        "none".into()
                    }),
                };
                idp.apply(&ServerMetadata::default(), "", &mut form, &mut headers);
                (form, headers)
            })
            .await?;
        if let Some(t) = &jag.issued_token_type
            && t != ID_JAG
        {
            return Err(AuthError::InvalidResponse {
                what: "token exchange",
                url: strip_query(&ia.idp_token_endpoint),
                detail: format!("issued_token_type is {:?}, not an ID-JAG", clip(t)),
            });
        }
        let grant = vec![
            ("grant_type".to_owned(), JWT_BEARER.to_owned()),
            ("assertion".to_owned(), jag.access_token.expose().to_owned()),
        ];
        let client = ClientCreds::from_config(&ia.client);
        self.simple_grant(disc, scopes, dpop, Some(client), grant)
            .await
    }

    /// Refresh the tokens held. With `disc` (after a 401) the session may be rebuilt from
    /// discovery; without it, the current session is used.
    async fn refresh(&self, disc: Option<&Discovery>) -> Result<(), AuthError> {
        let (tokens, session) = {
            let s = self.state();
            (s.tokens.clone(), s.session.clone())
        };
        let Some(tokens) = tokens else {
            return Ok(());
        };
        let Some(refresh_token) = tokens.refresh_token.clone() else {
            return Err(AuthError::Unauthorized("no refresh token".into()));
        };
        let session = match (session, disc) {
            (Some(s), _) if s.issuer == tokens.issuer && s.resource == tokens.resource => s,
            (_, Some(disc)) => {
                let meta = &disc.metadata;
                let token_endpoint = endpoint(meta, &meta.token_endpoint, "token_endpoint")?;
                let client = match &self.config.grant {
                    Grant::ClientCredentials(c) => Some(ClientCreds::from_config(c)),
                    Grant::IdentityAssertion(ia) => Some(ClientCreds::from_config(&ia.client)),
                    Grant::JwtBearer { .. } => None,
                    Grant::AuthorizationCode { user_agent } => {
                        let redirect = user_agent.redirect_uri();
                        self.known_client(disc, Some(&redirect))?
                    }
                };
                Session {
                    token_endpoint,
                    metadata: meta.clone(),
                    client,
                    issuer: disc.issuer.clone(),
                    resource: disc.resource.clone(),
                    dpop: tokens.token_type == TokenType::DPoP,
                }
            }
            (_, None) => return Err(AuthError::Unauthorized("nothing to refresh with".into())),
        };
        self.fetcher.check(&session.token_endpoint)?;
        let dpop = self.dpop_key.as_ref().filter(|_| session.dpop);
        tracing::debug!(server = %self.server_key, "refreshing the access token");
        let result = self
            .token_call(&session.token_endpoint, "token refresh", dpop)
            .send(|| {
                let mut form = vec![
                    ("grant_type".to_owned(), "refresh_token".to_owned()),
                    (
                        "refresh_token".to_owned(),
                        refresh_token.expose().to_owned(),
                    ),
                    ("resource".to_owned(), session.resource.clone()),
                ];
                let mut headers = Vec::new();
                if let Some(c) = &session.client {
                    c.apply(&session.metadata, &session.issuer, &mut form, &mut headers);
                }
                (form, headers)
            })
            .await;
        let resp = match result {
            Ok(r) => r,
            Err(e) => {
                if matches!(e, AuthError::TokenEndpoint { .. }) {
                    // The refresh token is dead: drop it so we do not try it again.
                    let mut s = self.state();
                    if let Some(t) = &mut s.tokens {
                        t.refresh_token = None;
                    }
                }
                return Err(e);
            }
        };
        let mut new = self.token_set(resp, &session.resource, &session.issuer, &tokens.scopes);
        if new.refresh_token.is_none() {
            new.refresh_token = Some(refresh_token);
        }
        if let Err(e) = self.config.store.save_tokens(&self.server_key, &new) {
            tracing::warn!(error = %e, "token store: could not save tokens");
        }
        let mut s = self.state();
        s.tokens = Some(new);
        s.session = Some(session);
        s.generation += 1;
        tracing::debug!(server = %self.server_key, "access token refreshed");
        Ok(())
    }
}

/// Check the authorization response (the redirect back to us) and return the code. The
/// `iss` check comes first (RFC 9207 §2.4): on a mismatch not even `error` is acted on.
fn check_callback(
    callback: &Url,
    redirect: &Url,
    state: &str,
    disc: &Discovery,
) -> Result<Secret, AuthError> {
    if callback.scheme() != redirect.scheme()
        || callback.host_str() != redirect.host_str()
        || callback.port_or_known_default() != redirect.port_or_known_default()
        || callback.path() != redirect.path()
    {
        return Err(AuthError::RedirectMismatch);
    }
    let mut params: HashMap<String, String> = HashMap::new();
    for (k, v) in callback.query_pairs() {
        params
            .entry(k.into_owned())
            .or_insert_with(|| v.into_owned());
    }
    if disc.documented {
        let expected = &disc.metadata.issuer;
        match params.get("iss") {
            Some(iss) if iss == expected => {}
            Some(iss) => {
                tracing::warn!(expected = %expected, found = %clip(iss), "authorization response from the wrong issuer");
                return Err(AuthError::IssMismatch {
                    expected: expected.clone(),
                    found: Some(clip(iss)),
                });
            }
            None if disc.metadata.authorization_response_iss_parameter_supported == Some(true) => {
                tracing::warn!(expected = %expected, "authorization response without the promised iss");
                return Err(AuthError::IssMismatch {
                    expected: expected.clone(),
                    found: None,
                });
            }
            None => {}
        }
    }
    // Not a timing oracle worth worrying about: the state is single-use and random.
    if params.get("state").map(String::as_str) != Some(state) {
        return Err(AuthError::StateMismatch);
    }
    if let Some(error) = params.get("error") {
        return Err(AuthError::AuthorizationDenied {
            error: clip(error),
            description: params.get("error_description").map(|d| clip(d)),
        });
    }
    match params.remove("code") {
        Some(code) if !code.is_empty() => Ok(Secret::new(code)),
        _ => Err(AuthError::MissingCode),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disc(iss_supported: Option<bool>, documented: bool) -> Discovery {
        Discovery {
            resource: "https://rs/mcp".into(),
            prm: None,
            metadata: Arc::new(ServerMetadata {
                issuer: "https://as.example".into(),
                authorization_response_iss_parameter_supported: iss_supported,
                ..ServerMetadata::default()
            }),
            documented,
            issuer: "https://as.example".into(),
        }
    }

    fn cb(q: &str) -> Url {
        Url::parse(&format!("http://localhost:3000/callback?{q}")).unwrap()
    }

    #[test]
    fn callback_checks() {
        let r = Url::parse("http://localhost:3000/callback").unwrap();
        let ok = |q: &str, d: &Discovery| check_callback(&cb(q), &r, "s1", d);
        let d = disc(Some(true), true);
        assert_eq!(
            ok("code=c&state=s1&iss=https%3A%2F%2Fas.example", &d)
                .unwrap()
                .expose(),
            "c"
        );
        assert!(matches!(
            ok("code=c&state=s1", &d),
            Err(AuthError::IssMismatch { found: None, .. })
        ));
        assert!(matches!(
            ok("code=c&state=s1&iss=https%3A%2F%2Fas.example%2F", &d),
            Err(AuthError::IssMismatch { .. })
        ));
        assert!(matches!(
            ok("error=access_denied&state=s1&iss=https%3A%2F%2Fevil", &d),
            Err(AuthError::IssMismatch { .. })
        ));
        let d = disc(None, true);
        assert!(ok("code=c&state=s1", &d).is_ok());
        assert!(matches!(
            ok("code=c&state=s1&iss=https%3A%2F%2Fevil", &d),
            Err(AuthError::IssMismatch { .. })
        ));
        assert!(matches!(
            ok("code=c&state=s2", &d),
            Err(AuthError::StateMismatch)
        ));
        assert!(matches!(ok("state=s1", &d), Err(AuthError::MissingCode)));
        assert!(matches!(
            ok("state=s1&error=access_denied", &d),
            Err(AuthError::AuthorizationDenied { .. })
        ));
        // No metadata document (2025-03-26 defaults): iss cannot be checked.
        let d = disc(None, false);
        assert!(ok("code=c&state=s1&iss=x", &d).is_ok());
        let other = Url::parse("http://localhost:3001/callback?code=c&state=s1").unwrap();
        assert!(matches!(
            check_callback(&other, &r, "s1", &d),
            Err(AuthError::RedirectMismatch)
        ));
    }

    #[test]
    fn union_keeps_order() {
        let u = union(vec!["a".into(), "b".into()], &["b".into(), "c".into()]);
        assert_eq!(u, vec!["a", "b", "c"]);
    }
}
