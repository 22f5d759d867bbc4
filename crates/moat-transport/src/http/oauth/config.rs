//! How an [`OAuthClient`](super::OAuthClient) gets its tokens: the grant, the client
//! identity, and the limits.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use url::Url;

use super::jwt::EcKey;
use super::store::{MemoryStore, Secret, TokenStore};
use super::user_agent::UserAgent;

/// The OAuth grant used to obtain tokens.
#[derive(Clone)]
#[non_exhaustive]
pub enum Grant {
    /// Authorization code with PKCE, on behalf of a user (the MCP default). The user agent
    /// takes the user through the authorization endpoint.
    AuthorizationCode {
        /// The user-agent step.
        user_agent: Arc<dyn UserAgent>,
    },
    /// Client credentials (RFC 6749 §4.4): the client acts on its own behalf.
    ClientCredentials(ClientCredentials),
    /// JWT bearer grant (RFC 7523 §2.1) with an assertion from elsewhere, e.g. a workload
    /// identity token. Failures are reported, never retried.
    JwtBearer {
        /// The assertion (a JWT whose audience is the authorization server).
        assertion: Secret,
        /// A client id to send along, if the authorization server wants one.
        client_id: Option<String>,
    },
    /// Enterprise-managed authorization (identity assertion authorization grant): exchange
    /// an identity provider's ID token for an ID-JAG (RFC 8693) at the IdP, then the ID-JAG
    /// for an access token (RFC 7523) at the MCP server's authorization server.
    IdentityAssertion(IdentityAssertion),
}

impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::AuthorizationCode { user_agent } => f
                .debug_struct("AuthorizationCode")
                .field("redirect_uri", &user_agent.redirect_uri().as_str())
                .finish(),
            Grant::ClientCredentials(c) => f.debug_tuple("ClientCredentials").field(c).finish(),
            Grant::JwtBearer { client_id, .. } => f
                .debug_struct("JwtBearer")
                .field("client_id", client_id)
                .finish_non_exhaustive(),
            Grant::IdentityAssertion(i) => f.debug_tuple("IdentityAssertion").field(i).finish(),
        }
    }
}

/// A client id and how the client proves it at the token endpoint.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientCredentials {
    /// The client id.
    pub client_id: String,
    /// How the client authenticates.
    pub auth: ClientAuth,
}

impl ClientCredentials {
    /// A confidential client with a secret (`client_secret_basic`, or `client_secret_post`
    /// when that is all the server supports).
    pub fn secret(client_id: impl Into<String>, secret: impl Into<Secret>) -> Self {
        ClientCredentials {
            client_id: client_id.into(),
            auth: ClientAuth::Secret(secret.into()),
        }
    }

    /// A client that signs `private_key_jwt` assertions (RFC 7523 §2.2) with `key`.
    pub fn private_key_jwt(client_id: impl Into<String>, key: EcKey) -> Self {
        ClientCredentials {
            client_id: client_id.into(),
            auth: ClientAuth::PrivateKeyJwt(key),
        }
    }
}

/// Token endpoint client authentication.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ClientAuth {
    /// A shared secret.
    Secret(Secret),
    /// An ES256 key for `private_key_jwt`.
    PrivateKeyJwt(EcKey),
    /// A public client (`none`).
    None,
}

/// The inputs of enterprise-managed authorization.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IdentityAssertion {
    /// The identity provider's token endpoint (where the token exchange happens).
    pub idp_token_endpoint: Url,
    /// Our client id at the identity provider.
    pub idp_client_id: String,
    /// Our client secret at the identity provider, if it wants one (sent with Basic).
    pub idp_client_secret: Option<Secret>,
    /// The user's ID token from the identity provider (the subject token).
    pub id_token: Secret,
    /// Our client at the MCP server's authorization server.
    pub client: ClientCredentials,
}

impl IdentityAssertion {
    /// The inputs with no IdP client secret.
    pub fn new(
        idp_token_endpoint: Url,
        idp_client_id: impl Into<String>,
        id_token: impl Into<Secret>,
        client: ClientCredentials,
    ) -> Self {
        IdentityAssertion {
            idp_token_endpoint,
            idp_client_id: idp_client_id.into(),
            idp_client_secret: None,
            id_token: id_token.into(),
            client,
        }
    }
}

/// A client registered ahead of time.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PreRegisteredClient {
    /// The issuer it is registered with. `None`: whatever authorization server the MCP
    /// server names (fine for a client id made for that one server).
    pub issuer: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client secret, for a confidential client.
    pub client_secret: Option<Secret>,
    /// The token endpoint authentication method to use; chosen from the server's metadata
    /// when `None`.
    pub auth_method: Option<String>,
}

impl PreRegisteredClient {
    /// A pre-registered client for any authorization server.
    pub fn new(client_id: impl Into<String>, client_secret: Option<Secret>) -> Self {
        PreRegisteredClient {
            issuer: None,
            client_id: client_id.into(),
            client_secret,
            auth_method: None,
        }
    }

    /// Bind it to one issuer: other authorization servers never see it.
    pub fn for_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }
}

/// OIDC `application_type` sent with Dynamic Client Registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ApplicationType {
    /// Desktop, mobile and CLI apps, and local web apps on `localhost`.
    #[default]
    Native,
    /// Browser apps served from a remote host.
    Web,
}

impl ApplicationType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ApplicationType::Native => "native",
            ApplicationType::Web => "web",
        }
    }
}

/// Everything an [`OAuthClient`](super::OAuthClient) needs. Start from one of the
/// constructors and adjust with the setters.
#[derive(Clone)]
#[non_exhaustive]
pub struct OAuthConfig {
    /// How tokens are obtained.
    pub grant: Grant,
    /// `client_name` for Dynamic Client Registration. Default: `moat`.
    pub client_name: String,
    /// `application_type` for Dynamic Client Registration. Default: native.
    pub application_type: ApplicationType,
    /// Our Client ID Metadata Document URL (an `https` URL with a path), used as the client
    /// id when the authorization server supports them. Default: none.
    pub client_metadata_url: Option<String>,
    /// Clients registered ahead of time (tried first, for the authorization code grant).
    pub pre_registered: Vec<PreRegisteredClient>,
    /// Ask for `offline_access` (a refresh token) when the authorization server lists it.
    /// Default: true.
    pub request_offline_access: bool,
    /// Use DPoP-bound tokens (RFC 9449) when the authorization server supports ES256 proofs
    /// or the resource server challenges with `DPoP`. Default: false.
    pub dpop: bool,
    /// Most full authorizations in a row without a request being accepted (the spec's
    /// "retry limit" for step-up). Refreshes do not count. Default: 3.
    pub max_authorizations: u32,
    /// Deadline of each HTTP call (discovery, registration, token requests). Default: 30 s.
    pub timeout: Duration,
    /// Largest metadata or token response accepted. Default: 1 MiB.
    pub max_body_bytes: usize,
    /// Allow plain `http` to non-loopback hosts. Default: false (only `https`, or `http` to
    /// `localhost` and loopback addresses).
    pub allow_insecure_http: bool,
    /// Where tokens and registrations are kept. Default: a [`MemoryStore`].
    pub store: Arc<dyn TokenStore>,
}

impl fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("grant", &self.grant)
            .field("client_name", &self.client_name)
            .field("application_type", &self.application_type)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("pre_registered", &self.pre_registered)
            .field("request_offline_access", &self.request_offline_access)
            .field("dpop", &self.dpop)
            .field("max_authorizations", &self.max_authorizations)
            .field("timeout", &self.timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .finish_non_exhaustive()
    }
}

impl OAuthConfig {
    /// A configuration for `grant` with every default.
    pub fn new(grant: Grant) -> OAuthConfig {
        OAuthConfig {
            grant,
            client_name: "moat".into(),
            application_type: ApplicationType::Native,
            client_metadata_url: None,
            pre_registered: Vec::new(),
            request_offline_access: true,
            dpop: false,
            max_authorizations: 3,
            timeout: Duration::from_secs(30),
            max_body_bytes: 1 << 20,
            allow_insecure_http: false,
            store: Arc::new(MemoryStore::new()),
        }
    }

    /// The authorization code grant through `user_agent`.
    pub fn authorization_code(user_agent: impl UserAgent) -> OAuthConfig {
        OAuthConfig::new(Grant::AuthorizationCode {
            user_agent: Arc::new(user_agent),
        })
    }

    /// The client credentials grant.
    pub fn client_credentials(client: ClientCredentials) -> OAuthConfig {
        OAuthConfig::new(Grant::ClientCredentials(client))
    }

    /// The JWT bearer grant with `assertion`.
    pub fn jwt_bearer(assertion: impl Into<Secret>) -> OAuthConfig {
        OAuthConfig::new(Grant::JwtBearer {
            assertion: assertion.into(),
            client_id: None,
        })
    }

    /// Enterprise-managed authorization.
    pub fn identity_assertion(inputs: IdentityAssertion) -> OAuthConfig {
        OAuthConfig::new(Grant::IdentityAssertion(inputs))
    }

    /// Set the DCR `client_name`.
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// Set the DCR `application_type`.
    pub fn application_type(mut self, t: ApplicationType) -> Self {
        self.application_type = t;
        self
    }

    /// Use this Client ID Metadata Document URL where supported.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }

    /// Add a pre-registered client.
    pub fn pre_registered(mut self, client: PreRegisteredClient) -> Self {
        self.pre_registered.push(client);
        self
    }

    /// Whether to ask for `offline_access`.
    pub fn request_offline_access(mut self, yes: bool) -> Self {
        self.request_offline_access = yes;
        self
    }

    /// Whether to use DPoP.
    pub fn dpop(mut self, yes: bool) -> Self {
        self.dpop = yes;
        self
    }

    /// Set the authorization retry limit.
    pub fn max_authorizations(mut self, n: u32) -> Self {
        self.max_authorizations = n;
        self
    }

    /// Set the per-call HTTP deadline.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    /// Allow `http` to non-loopback hosts (tests on a private network only).
    pub fn allow_insecure_http(mut self, yes: bool) -> Self {
        self.allow_insecure_http = yes;
        self
    }

    /// Keep tokens and registrations in `store`.
    pub fn store(mut self, store: Arc<dyn TokenStore>) -> Self {
        self.store = store;
        self
    }
}
