//! The OAuth 2.1 resource server: what lets moat's HTTP server accept access tokens from an
//! authorization server instead of one static bearer token.
//!
//! It publishes Protected Resource Metadata (RFC 9728, [`metadata`]), answers a request
//! without a usable token with a `WWW-Authenticate` challenge that points at it
//! ([`challenge`]), validates JWT access tokens against the issuer's keys ([`jwt`],
//! [`keys`]) or opaque ones by introspection ([`introspect`]), and checks the scopes the
//! server requires. What survives is an [`Identity`].
//!
//! Several authorization servers may be trusted at once ([`ResourceOptions::issuers`]),
//! each with its own keys, introspection and audiences. A JWT is checked against the one
//! its (unverified) `iss` names, and only that one: a token claiming an issuer not
//! configured is refused before any key is looked at, and a token signed by one issuer's
//! key but claiming another is checked against the other's keys, where it cannot verify.
//! An opaque token names no issuer: it is introspected at the issuers that introspect, in
//! the order configured, and the first that calls it active decides (so every such issuer
//! may see it; configure introspection only where opaque tokens come from).

mod challenge;
mod fetch;
mod introspect;
mod jwt;
mod keys;
mod metadata;
mod step_up;

use std::time::Duration;

use http::HeaderMap;
use http::header::AUTHORIZATION;
use serde_json::{Map, Value};
use url::Url;

pub use crate::identity::Identity;

pub(crate) use challenge::Challenge;
pub use jwt::SIGNING_ALGORITHMS;
pub use keys::key_fits;
pub(crate) use metadata::well_known_paths;
pub(crate) use step_up::scopes_needed;
pub use step_up::{INSUFFICIENT_SCOPE, insufficient_scope};

use crate::http::oauth::metadata::resource_metadata_urls;
use introspect::Introspector;
use keys::KeyCache;

/// The longest clock skew accepted on `exp` and `nbf`, whatever is configured.
pub const MAX_SKEW: Duration = Duration::from_secs(300);

/// Settings of the resource server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ResourceOptions {
    /// The authorization server's issuer identifier; tokens must carry it in `iss`, and its
    /// metadata (RFC 8414 or OpenID Connect Discovery) names the JWKS.
    pub issuer: String,
    /// This server's resource identifier (its canonical URL, e.g. `https://mcp.example/mcp`):
    /// tokens must name it in `aud` (RFC 8707).
    pub resource: String,
    /// Scopes every request needs; a token without them gets 403 `insufficient_scope`.
    pub scopes: Vec<String>,
    /// JWS algorithms accepted. HMAC algorithms are never accepted, whatever is listed.
    pub algorithms: Vec<jsonwebtoken::Algorithm>,
    /// Clock skew allowed on `exp` and `nbf` (at most [`MAX_SKEW`]).
    pub skew: Duration,
    /// How long after a JWKS fetch a token with an unknown `kid` may cause another one.
    pub jwks_refetch_interval: Duration,
    /// The JWKS URL, when the issuer publishes no metadata naming it.
    pub jwks_uri: Option<String>,
    /// Opaque tokens: the introspection endpoint (RFC 7662) and the client that may call it.
    /// Without it only JWTs are accepted.
    pub introspection: Option<IntrospectionOptions>,
    /// Token claims copied into the [`Identity`] (e.g. `email`, `groups`).
    pub claims: Vec<String>,
    /// Deadline of each call to the authorization server.
    pub timeout: Duration,
    /// The audiences accepted in `issuer`'s tokens; empty: `resource` alone (RFC 8707).
    pub audiences: Vec<String>,
    /// More authorization servers whose tokens are accepted, beside `issuer`.
    pub issuers: Vec<IssuerOptions>,
}

/// One more authorization server a resource server trusts, beside
/// [`ResourceOptions::issuer`]: its own keys, introspection and audiences.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IssuerOptions {
    /// Its issuer identifier: its tokens' `iss`; its metadata names the JWKS.
    pub issuer: String,
    /// The JWKS URL, when the issuer publishes no metadata naming it.
    pub jwks_uri: Option<String>,
    /// Opaque tokens of this issuer, by introspection.
    pub introspection: Option<IntrospectionOptions>,
    /// The audiences accepted in its tokens; empty: the resource alone.
    pub audiences: Vec<String>,
}

impl IssuerOptions {
    /// Tokens of `issuer`, for the resource, found through its metadata.
    pub fn new(issuer: impl Into<String>) -> IssuerOptions {
        IssuerOptions {
            issuer: issuer.into(),
            jwks_uri: None,
            introspection: None,
            audiences: Vec::new(),
        }
    }
}

impl ResourceOptions {
    /// Tokens from `issuer` for the resource `resource`, with the safe defaults.
    pub fn new(issuer: impl Into<String>, resource: impl Into<String>) -> ResourceOptions {
        use jsonwebtoken::Algorithm::*;
        ResourceOptions {
            issuer: issuer.into(),
            resource: resource.into(),
            scopes: Vec::new(),
            algorithms: vec![
                RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA,
            ],
            skew: Duration::from_secs(60),
            jwks_refetch_interval: Duration::from_secs(30),
            jwks_uri: None,
            introspection: None,
            claims: Vec::new(),
            timeout: Duration::from_secs(10),
            audiences: Vec::new(),
            issuers: Vec::new(),
        }
    }

    /// Every issuer trusted, `issuer` first, as one list.
    fn all_issuers(&self) -> Vec<IssuerOptions> {
        let mut all = vec![IssuerOptions {
            issuer: self.issuer.clone(),
            jwks_uri: self.jwks_uri.clone(),
            introspection: self.introspection.clone(),
            audiences: self.audiences.clone(),
        }];
        all.extend(self.issuers.iter().cloned());
        all
    }
}

/// Where and as whom opaque tokens are introspected, and how long answers are kept.
#[derive(Clone)]
#[non_exhaustive]
pub struct IntrospectionOptions {
    /// The endpoint; `None`: the one the issuer's metadata names.
    pub endpoint: Option<String>,
    /// This resource server's client id at the authorization server.
    pub client_id: String,
    /// Its secret (sent with HTTP Basic).
    pub client_secret: String,
    /// The longest an active answer is reused (never past the token's `exp`).
    pub cache_ttl: Duration,
    /// The most answers kept.
    pub cache_entries: usize,
}

impl IntrospectionOptions {
    /// Introspect as `client_id` with `client_secret`, at the endpoint the issuer names.
    pub fn new(
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> IntrospectionOptions {
        IntrospectionOptions {
            endpoint: None,
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            cache_ttl: Duration::from_secs(60),
            cache_entries: 4096,
        }
    }
}

impl std::fmt::Debug for IntrospectionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntrospectionOptions")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// The resource server's configuration is unusable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResourceError {
    /// A URL is malformed, or would fetch keys or send tokens in the clear.
    #[error("{what} {url:?} must be an https URL (http only on a loopback host)")]
    Url { what: &'static str, url: String },
    /// No algorithm left once HMAC and unknown ones are taken out.
    #[error("no usable signing algorithm configured (HMAC algorithms are never accepted)")]
    NoAlgorithm,
    /// A static bearer token and OAuth at once: which one a request needs would be unclear.
    #[error("a static bearer token and an OAuth issuer cannot both be configured")]
    WithStaticToken,
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    /// The same issuer twice: which of its settings applies would be unclear.
    #[error("the issuer {0:?} is configured twice")]
    DuplicateIssuer(String),
}

/// Why a request's token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Denial {
    /// No bearer token at all: 401, and the challenge names no error (RFC 6750 §3.1).
    Missing,
    /// A token that is not valid here: 401 `invalid_token`.
    Invalid(String),
    /// A valid token without the scopes needed: 403 `insufficient_scope`.
    InsufficientScope(Vec<String>),
}

/// Checks the access tokens of requests; one per server, shared by its connections.
pub(crate) struct Authorizer {
    options: ResourceOptions,
    metadata_url: String,
    metadata_json: String,
    /// Every issuer trusted, in the order configured (`options.issuer` first).
    issuers: Vec<Trusted>,
}

/// One trusted issuer, ready to check its tokens.
struct Trusted {
    /// Its issuer identifier, as tokens carry it in `iss`.
    issuer: String,
    /// The audiences its tokens may name (the resource, unless configured otherwise).
    audiences: Vec<String>,
    keys: KeyCache,
    introspector: Option<Introspector>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let issuers: Vec<&str> = self.issuers.iter().map(|t| t.issuer.as_str()).collect();
        f.debug_struct("Authorizer")
            .field("issuers", &issuers)
            .field("resource", &self.options.resource)
            .finish_non_exhaustive()
    }
}

fn secure_url(what: &'static str, url: &str) -> Result<Url, ResourceError> {
    let err = || ResourceError::Url {
        what,
        url: url.to_owned(),
    };
    let parsed = Url::parse(url).map_err(|_| err())?;
    if fetch::is_secure(&parsed) {
        Ok(parsed)
    } else {
        Err(err())
    }
}

impl Authorizer {
    pub(crate) fn new(mut options: ResourceOptions) -> Result<Authorizer, ResourceError> {
        options
            .algorithms
            .retain(|a| jwt::SIGNING_ALGORITHMS.contains(a));
        if options.algorithms.is_empty() {
            return Err(ResourceError::NoAlgorithm);
        }
        options.skew = options.skew.min(MAX_SKEW);
        let resource = secure_url("the resource", &options.resource)?;
        let metadata_url = resource_metadata_urls(&resource)
            .first()
            .map(Url::to_string)
            .unwrap_or_default();
        let metadata_json = metadata::document(&options);
        let fetcher = fetch::Fetcher::new(options.timeout).map_err(ResourceError::Client)?;
        let mut issuers: Vec<Trusted> = Vec::new();
        for i in options.all_issuers() {
            if issuers.iter().any(|t| t.issuer == i.issuer) {
                return Err(ResourceError::DuplicateIssuer(i.issuer));
            }
            issuers.push(Trusted::new(&fetcher, i, &options)?);
        }
        Ok(Authorizer {
            options,
            metadata_url,
            metadata_json,
            issuers,
        })
    }

    /// The Protected Resource Metadata document.
    pub(crate) fn metadata_json(&self) -> &str {
        &self.metadata_json
    }

    /// The resource identifier (for the well-known paths).
    pub(crate) fn resource(&self) -> &str {
        &self.options.resource
    }

    /// The 403 challenge of a call a handler refused for lacking `needed` (one tool's
    /// scopes): the scopes to ask for are the server's and the tool's.
    pub(crate) fn step_up(&self, needed: Vec<String>) -> Challenge {
        let mut scopes = self.options.scopes.clone();
        for s in needed {
            if !scopes.contains(&s) {
                scopes.push(s);
            }
        }
        Challenge::new(
            &Denial::InsufficientScope(scopes.clone()),
            &self.metadata_url,
            &scopes,
        )
    }

    /// The challenge for a refusal.
    pub(crate) fn challenge(&self, denial: &Denial) -> Challenge {
        Challenge::new(denial, &self.metadata_url, &self.options.scopes)
    }

    /// The identity behind the request's bearer token, or why there is none.
    pub(crate) async fn check(&self, headers: &HeaderMap) -> Result<Identity, Denial> {
        let token = bearer(headers).ok_or(Denial::Missing)?;
        let mut identity = if jwt::looks_like_jwt(token) {
            let trusted = self.issuer_of_jwt(token)?;
            jwt::validate(token, &self.options, trusted).await?
        } else {
            self.introspect(token).await?
        };
        let missing: Vec<String> = self
            .options
            .scopes
            .iter()
            .filter(|s| !identity.scopes.contains(s))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Denial::InsufficientScope(self.options.scopes.clone()));
        }
        identity.access_token = Some(crate::identity::AccessToken::new(token));
        Ok(identity)
    }

    /// The trusted issuer a JWT claims (its `iss`, read before anything is verified: it
    /// only chooses whose keys and rules check the rest).
    fn issuer_of_jwt(&self, token: &str) -> Result<&Trusted, Denial> {
        let iss = jwt::unverified_issuer(token)
            .ok_or_else(|| Denial::Invalid("the access token has no \"iss\" claim".into()))?;
        self.issuers
            .iter()
            .find(|t| t.issuer == iss)
            .ok_or_else(|| Denial::Invalid("the access token was issued by another issuer".into()))
    }

    /// An opaque token, introspected at each issuer that introspects, in order, until one
    /// calls it active (its answer then decides, for better or worse).
    async fn introspect(&self, token: &str) -> Result<Identity, Denial> {
        let mut last = None;
        for trusted in &self.issuers {
            let Some(introspector) = &trusted.introspector else {
                continue;
            };
            match introspector.check(token, &self.options, trusted).await {
                Ok(identity) => return Ok(identity),
                Err(introspect::Refusal::Inactive(why)) => last = Some(why),
                Err(introspect::Refusal::Final(why)) => return Err(Denial::Invalid(why)),
            }
        }
        Err(Denial::Invalid(last.unwrap_or_else(|| {
            "the access token is not a JWT, and this server introspects no opaque tokens".into()
        })))
    }
}

impl Trusted {
    fn new(
        fetcher: &fetch::Fetcher,
        i: IssuerOptions,
        options: &ResourceOptions,
    ) -> Result<Trusted, ResourceError> {
        let issuer_url = secure_url("the issuer", &i.issuer)?;
        let jwks_uri = match &i.jwks_uri {
            Some(u) => Some(secure_url("the JWKS URL", u)?),
            None => None,
        };
        let introspection_endpoint =
            match i.introspection.as_ref().and_then(|i| i.endpoint.as_ref()) {
                Some(u) => Some(secure_url("the introspection endpoint", u)?),
                None => None,
            };
        let keys = KeyCache::new(
            fetcher.clone(),
            i.issuer.clone(),
            issuer_url,
            jwks_uri,
            options.jwks_refetch_interval,
        );
        let introspector = i
            .introspection
            .map(|o| Introspector::new(fetcher.clone(), o, introspection_endpoint));
        let audiences = if i.audiences.is_empty() {
            vec![options.resource.clone()]
        } else {
            i.audiences
        };
        Ok(Trusted {
            issuer: i.issuer,
            audiences,
            keys,
            introspector,
        })
    }
}

/// The token of `Authorization: Bearer <token>`, if that is what the request carries.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    let token = rest.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The scopes of a token's claims: `scope` (space-separated, RFC 9068) or `scp` (a list or
/// a string, as some issuers send).
fn scopes_of(claims: &Map<String, Value>) -> Vec<String> {
    let split = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) => split(s),
        (_, Some(Value::Array(a))) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        (_, Some(Value::String(s))) => split(s),
        _ => Vec::new(),
    }
}

/// The identity a validated set of claims from `issuer` describes.
fn identity_of(claims: &Map<String, Value>, options: &ResourceOptions, issuer: &str) -> Identity {
    let text = |k: &str| claims.get(k).and_then(Value::as_str).map(str::to_owned);
    Identity {
        issuer: Some(issuer.to_owned()),
        subject: text("sub"),
        client_id: text("client_id").or_else(|| text("azp")),
        scopes: scopes_of(claims),
        claims: options
            .claims
            .iter()
            .filter_map(|k| claims.get(k).map(|v| (k.clone(), v.clone())))
            .collect(),
        access_token: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bearer_needs_the_scheme_and_a_token() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
        h.insert(AUTHORIZATION, "Bearer  ".parse().unwrap());
        assert_eq!(bearer(&h), None);
        h.insert(AUTHORIZATION, "bearer abc".parse().unwrap());
        assert_eq!(bearer(&h), Some("abc"));
    }

    #[test]
    fn scopes_from_either_claim() {
        let c = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(scopes_of(&c(json!({"scope": "a b"}))), ["a", "b"]);
        assert_eq!(scopes_of(&c(json!({"scp": ["a", "b"]}))), ["a", "b"]);
        assert_eq!(scopes_of(&c(json!({"scp": "a"}))), ["a"]);
        assert!(scopes_of(&c(json!({"scope": 3}))).is_empty());
    }

    #[test]
    fn hmac_and_insecure_urls_are_refused() {
        let mut o = ResourceOptions::new("https://as.example", "https://mcp.example/mcp");
        o.algorithms = vec![jsonwebtoken::Algorithm::HS256];
        assert!(matches!(
            Authorizer::new(o),
            Err(ResourceError::NoAlgorithm)
        ));
        let o = ResourceOptions::new("http://as.example", "https://mcp.example/mcp");
        assert!(matches!(Authorizer::new(o), Err(ResourceError::Url { .. })));
    }
}
