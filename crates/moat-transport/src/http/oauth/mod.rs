//! OAuth 2.1 for MCP clients: the client side of the MCP authorization spec (2025-03-26
//! through 2026-07-28), plus the client credentials, JWT bearer, enterprise-managed and
//! DPoP extensions.
//!
//! An HTTP transport holds an [`Authorizer`] (normally an [`OAuthClient`], one per MCP
//! server) and does two things per request: it adds the headers of
//! [`prepare`](Authorizer::prepare), and it hands every response to
//! [`on_response`](Authorizer::on_response), retrying when told to.
//!
//! ```no_run
//! # async fn run() -> Result<(), moat_transport::http::oauth::AuthError> {
//! use moat_transport::http::oauth::{Authorizer, HeadlessUserAgent, OAuthClient, OAuthConfig, Verdict};
//! let url = url::Url::parse("https://mcp.example.com/mcp").expect("url");
//! let oauth = OAuthClient::new(url.clone(), OAuthConfig::authorization_code(HeadlessUserAgent::default()))?;
//! let http = reqwest::Client::new();
//! for _round in 0..4 {
//!     let auth = oauth.prepare(&http::Method::POST, &url).await?;
//!     let response = http.post(url.clone()).headers(auth.headers().clone()).body("{}").send().await
//!         .expect("network");
//!     match oauth.on_response(&auth, response.status(), response.headers()).await? {
//!         Verdict::Retry => continue,
//!         _ => break, // use `response`
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # The flow, on a 401
//!
//! 1. **Challenge.** The `WWW-Authenticate` header ([`challenge`]) may name the
//!    `resource_metadata` URL and the `scope` the operation needs.
//! 2. **Protected Resource Metadata** (RFC 9728): from `resource_metadata`, else
//!    `/.well-known/oauth-protected-resource/<path>`, else the root one. Its `resource` must
//!    cover the MCP URL (same origin, path prefix) or we stop before talking to any
//!    authorization server ([`AuthError::ResourceMismatch`]). No PRM at all, and no
//!    `resource_metadata`: the 2025-03-26 rules, the server's origin is the authorization
//!    server.
//! 3. **Authorization server metadata** for the first listed issuer (RFC 8414 and OpenID
//!    Discovery, path-aware: for an issuer with a path, never the root document). Its `issuer`
//!    must equal the one we asked for, byte for byte ([`AuthError::IssuerMismatch`]); only the
//!    2025-03-26 case skips that, and without any document the defaults `/authorize`,
//!    `/token`, `/register` at the origin are used.
//! 4. **Client identity**, per issuer: a pre-registered client, a registration kept from
//!    before, our Client ID Metadata Document URL when the server supports them, else
//!    Dynamic Client Registration (RFC 7591, with `application_type`). A new authorization
//!    server means a new registration: credentials never cross issuers.
//! 5. **Scopes**: the challenge's `scope` (united with what we asked before, for step-up),
//!    else the PRM's `scopes_supported`, else none; `offline_access` is added only when the
//!    authorization server lists it.
//! 6. **Grant.** Authorization code with PKCE S256 (refused if the server does not list
//!    S256), `state`, and `resource` = the PRM resource exactly; the [`UserAgent`] brings back
//!    the redirect, whose `iss` is checked against the recorded issuer (RFC 9207: simple string
//!    comparison; a promised but absent `iss` is refused) before `state`, `error` and `code`
//!    are looked at. Or client credentials (`client_secret_basic`/`_post`, `private_key_jwt`),
//!    a JWT bearer assertion, or the enterprise-managed token exchange.
//! 7. **Token request** with the client authentication the registration or the metadata
//!    calls for, and a DPoP proof when DPoP is on (retried once with the server's nonce).
//! 8. The caller **retries** with `Authorization: Bearer …` (or `DPoP …` plus a fresh proof).
//!
//! A 401 with a refresh token held tries the refresh first. A 403 with
//! `error="insufficient_scope"` re-authorizes with the union of scopes. At most
//! [`OAuthConfig::max_authorizations`] full authorizations happen in a row without an
//! accepted request ([`AuthError::TooManyAttempts`]). Concurrent challenges wait for the one
//! authorization in progress and then retry with its token.
//!
//! # Safety rules kept here
//!
//! - Tokens are only attached to requests for the MCP server's origin; client secrets only
//!   go to the token endpoint of the issuer they were registered with.
//! - Credentials travel only over `https`, or `http` to a loopback host
//!   ([`OAuthConfig::allow_insecure_http`] to relax).
//! - Every HTTP call has a deadline and a body limit and follows no redirects.
//! - No token, code, verifier or secret is logged; [`Secret`] redacts itself in `Debug`.
//! - Server-controlled text is clipped before it lands in an error.
//!
//! # Not here yet
//!
//! A file-backed [`TokenStore`] (the trait is small; tokens are keyed by server URL,
//! registrations by issuer), choosing among several listed authorization servers (the
//! first is used), and refreshing DPoP-bound tokens across processes (the DPoP key lives
//! in memory only).

pub mod challenge;
mod client;
mod config;
mod error;
mod fetch;
mod jwt;
pub mod metadata;
mod store;
mod token;
pub mod user_agent;

pub use challenge::{BearerChallenge, Challenge, parse_www_authenticate};
pub use client::{Authorizer, OAuthClient, RequestAuth, Verdict};
pub use config::{
    ApplicationType, ClientAuth, ClientCredentials, Grant, IdentityAssertion, OAuthConfig,
    PreRegisteredClient,
};
pub use error::AuthError;
pub use jwt::EcKey;
pub use metadata::{ResourceMetadata, ServerMetadata};
pub use store::{ClientRegistration, MemoryStore, Secret, TokenSet, TokenStore, TokenType};
pub use user_agent::{
    AuthorizationRequest, HeadlessUserAgent, LoopbackUserAgent, UrlOpener, UserAgent,
    open_in_browser,
};
