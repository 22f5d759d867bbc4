//! Why authorization failed.

/// Why authorization could not be obtained. Every field that came from a server is a plain
/// string the server chose: show it, never trust it. No variant carries a token, a code or a
/// client secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The configuration cannot work (a bad key, a missing redirect URI, …).
    #[error("OAuth configuration: {0}")]
    Config(String),
    /// A URL we were told to use is neither `https` nor `http` on a loopback host.
    #[error("refusing to send credentials over an insecure URL: {0}")]
    InsecureUrl(String),
    /// A network error talking to an authorization or resource server.
    #[error("{what} at {url}: {source}")]
    Http {
        /// What we were fetching.
        what: &'static str,
        /// Where.
        url: String,
        /// The underlying error.
        #[source]
        source: reqwest::Error,
    },
    /// An HTTP call took longer than its deadline.
    #[error("{what} at {url}: no answer within the deadline")]
    Timeout {
        /// What we were fetching.
        what: &'static str,
        /// Where.
        url: String,
    },
    /// A server answered with an unexpected HTTP status.
    #[error("{what} at {url}: HTTP {status}")]
    Status {
        /// What we were fetching.
        what: &'static str,
        /// Where.
        url: String,
        /// The status code.
        status: u16,
    },
    /// A server's answer was not the JSON document it should be.
    #[error("{what} at {url}: invalid response: {detail}")]
    InvalidResponse {
        /// What we were fetching.
        what: &'static str,
        /// Where.
        url: String,
        /// What was wrong with it.
        detail: String,
    },
    /// No Protected Resource Metadata was found, and the server gave no other clue.
    #[error("no protected resource metadata for {0}")]
    NoResourceMetadata(String),
    /// The Protected Resource Metadata names a resource that is not the MCP server we talk
    /// to (another origin, or a path that does not contain ours). Nothing was sent to any
    /// authorization server.
    #[error("protected resource metadata names resource {resource}, which does not cover {server}")]
    ResourceMismatch {
        /// The `resource` the metadata claimed.
        resource: String,
        /// The MCP server URL.
        server: String,
    },
    /// The Protected Resource Metadata lists no authorization server.
    #[error("protected resource metadata lists no authorization server")]
    NoAuthorizationServer,
    /// No authorization server metadata was found at any well-known location.
    #[error("no authorization server metadata for issuer {0}")]
    NoServerMetadata(String),
    /// The authorization server metadata names another issuer than the one it was fetched
    /// for (RFC 8414 §3.3). It was not used.
    #[error(
        "authorization server metadata issuer {found:?} is not the expected issuer {expected:?}"
    )]
    IssuerMismatch {
        /// The issuer we fetched metadata for.
        expected: String,
        /// The issuer the document claims.
        found: String,
    },
    /// The authorization server does not advertise PKCE with S256.
    #[error("authorization server {0} does not advertise PKCE (S256)")]
    PkceUnsupported(String),
    /// No client identity could be had: no pre-registered client for this issuer, no Client
    /// ID Metadata Document support, no registration endpoint.
    #[error("no client identity for authorization server {0}: pre-register a client")]
    NoClientIdentity(String),
    /// Dynamic Client Registration was refused.
    #[error("client registration at {url} refused (HTTP {status}): {error}{}", describe(.description))]
    Registration {
        /// The registration endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The OAuth error code, or a summary.
        error: String,
        /// The server's description, if any.
        description: Option<String>,
    },
    /// The user agent could not complete the authorization step.
    #[error("user agent: {0}")]
    UserAgent(String),
    /// The authorization response did not come back to our redirect URI.
    #[error("the authorization response was not a redirect to the registered redirect URI")]
    RedirectMismatch,
    /// The `iss` parameter of the authorization response is absent although the server
    /// promised it, or does not equal the recorded issuer (RFC 9207). The code was not used.
    #[error("authorization response issuer {found:?} does not match {expected:?}")]
    IssMismatch {
        /// The issuer recorded from validated metadata.
        expected: String,
        /// The `iss` received, if any.
        found: Option<String>,
    },
    /// The `state` of the authorization response is not the one we sent.
    #[error("authorization response state does not match the request")]
    StateMismatch,
    /// The authorization server refused the authorization request.
    #[error("authorization refused: {error}{}", describe(.description))]
    AuthorizationDenied {
        /// The OAuth error code.
        error: String,
        /// The server's description, if any.
        description: Option<String>,
    },
    /// The authorization response carried no code.
    #[error("authorization response carried no code")]
    MissingCode,
    /// A token endpoint answered with an OAuth error.
    #[error("token request at {url} refused (HTTP {status}): {error}{}", describe(.description))]
    TokenEndpoint {
        /// The token endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The OAuth error code (`invalid_grant`, …) or a summary.
        error: String,
        /// The server's description, if any.
        description: Option<String>,
    },
    /// The server still refuses after as many authorizations as we allow in a row.
    #[error("still unauthorized after {0} authorization attempts")]
    TooManyAttempts(u32),
    /// An earlier attempt with a grant that must not be retried (client credentials, JWT
    /// bearer, identity assertion) failed; the same error is reported again without asking
    /// the authorization server.
    #[error("authorization failed earlier and is not retried: {0}")]
    GrantFailed(String),
    /// The server answered 401 in a way that authorization cannot fix (e.g. a DPoP nonce
    /// challenge repeated with the nonce we already sent).
    #[error("the server keeps refusing the request: {0}")]
    Unauthorized(String),
    /// The token store failed.
    #[error("token store: {0}")]
    Store(String),
}

fn describe(description: &Option<String>) -> String {
    match description {
        Some(d) if !d.is_empty() => format!(" ({d})"),
        _ => String::new(),
    }
}

impl AuthError {
    /// Whether this error leaves the flow in a state where retrying later (with the same
    /// configuration) could succeed: network failures and timeouts.
    pub fn is_transient(&self) -> bool {
        matches!(self, AuthError::Http { .. } | AuthError::Timeout { .. })
    }
}
