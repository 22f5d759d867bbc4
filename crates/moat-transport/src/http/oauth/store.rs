//! What the client keeps between requests (and, through [`TokenStore`], between runs):
//! tokens per MCP server, client registrations per authorization server.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::AuthError;

/// A string that must not be logged: `Debug` and `Display` print `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a secret.
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The secret itself. Every call site is a place the secret leaves this type: keep
    /// them few.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Secret {
        Secret(s)
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Secret {
        Secret(s.to_owned())
    }
}

/// How the access token is presented to the resource server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenType {
    /// `Authorization: Bearer <token>` (RFC 6750).
    Bearer,
    /// `Authorization: DPoP <token>` plus a `DPoP` proof per request (RFC 9449).
    DPoP,
}

/// The tokens for one MCP server, with what they are bound to.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TokenSet {
    /// The access token.
    pub access_token: Secret,
    /// How it is presented.
    pub token_type: TokenType,
    /// The refresh token, if one was issued.
    pub refresh_token: Option<Secret>,
    /// When the access token expires, if the server said.
    pub expires_at: Option<SystemTime>,
    /// The scopes granted (as the server reported them, else as requested).
    pub scopes: Vec<String>,
    /// The resource (`resource` parameter) the tokens were issued for.
    pub resource: String,
    /// The issuer of the authorization server that issued them.
    pub issuer: String,
}

impl TokenSet {
    /// A bearer access token for `resource` from `issuer`, with nothing else known (for a
    /// [`TokenStore`] that reads tokens back from where it keeps them; set the other fields).
    pub fn bearer(
        access_token: impl Into<Secret>,
        resource: impl Into<String>,
        issuer: impl Into<String>,
    ) -> TokenSet {
        TokenSet {
            access_token: access_token.into(),
            token_type: TokenType::Bearer,
            refresh_token: None,
            expires_at: None,
            scopes: Vec::new(),
            resource: resource.into(),
            issuer: issuer.into(),
        }
    }

    /// Whether the access token has expired (or will within `skew`).
    pub fn expired(&self, skew: Duration) -> bool {
        self.expires_at
            .is_some_and(|at| SystemTime::now() + skew >= at)
    }
}

/// A client identity at one authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientRegistration {
    /// The client id (a URL for Client ID Metadata Documents).
    pub client_id: String,
    /// The client secret, for confidential clients.
    pub client_secret: Option<Secret>,
    /// The token endpoint authentication method the server assigned or we were told to use.
    pub token_endpoint_auth_method: Option<String>,
    /// The redirect URIs it was registered with (empty when unknown).
    pub redirect_uris: Vec<String>,
    /// When the secret expires, if it does.
    pub client_secret_expires_at: Option<SystemTime>,
}

impl ClientRegistration {
    /// A registration with just a client id and optional secret.
    pub fn new(client_id: impl Into<String>, client_secret: Option<Secret>) -> Self {
        ClientRegistration {
            client_id: client_id.into(),
            client_secret,
            token_endpoint_auth_method: None,
            redirect_uris: Vec::new(),
            client_secret_expires_at: None,
        }
    }

    /// Set the token endpoint authentication method.
    pub fn with_auth_method(mut self, method: impl Into<String>) -> Self {
        self.token_endpoint_auth_method = Some(method.into());
        self
    }
}

/// Where tokens and registrations live. The default, [`MemoryStore`], forgets everything
/// when dropped; a CLI can implement this over a file to keep them across runs. Calls are
/// made with no lock held on the network, but from async code: keep them quick.
///
/// Tokens are keyed by the MCP server URL the [`OAuthClient`](super::OAuthClient) was made
/// for; registrations by authorization server issuer, as the spec requires (credentials from
/// one authorization server are never offered to another).
pub trait TokenStore: Send + Sync + 'static {
    /// The tokens saved for `server`.
    fn load_tokens(&self, server: &str) -> Result<Option<TokenSet>, AuthError>;
    /// Save (replace) the tokens for `server`.
    fn save_tokens(&self, server: &str, tokens: &TokenSet) -> Result<(), AuthError>;
    /// Forget the tokens for `server`.
    fn clear_tokens(&self, server: &str) -> Result<(), AuthError>;
    /// The client registration kept for the authorization server `issuer`.
    fn load_registration(&self, issuer: &str) -> Result<Option<ClientRegistration>, AuthError>;
    /// Save (replace) the client registration for `issuer`.
    fn save_registration(
        &self,
        issuer: &str,
        registration: &ClientRegistration,
    ) -> Result<(), AuthError>;
}

/// A [`TokenStore`] in memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    tokens: Mutex<HashMap<String, TokenSet>>,
    registrations: Mutex<HashMap<String, ClientRegistration>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind: keep using it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TokenStore for MemoryStore {
    fn load_tokens(&self, server: &str) -> Result<Option<TokenSet>, AuthError> {
        Ok(lock(&self.tokens).get(server).cloned())
    }

    fn save_tokens(&self, server: &str, tokens: &TokenSet) -> Result<(), AuthError> {
        lock(&self.tokens).insert(server.to_owned(), tokens.clone());
        Ok(())
    }

    fn clear_tokens(&self, server: &str) -> Result<(), AuthError> {
        lock(&self.tokens).remove(server);
        Ok(())
    }

    fn load_registration(&self, issuer: &str) -> Result<Option<ClientRegistration>, AuthError> {
        Ok(lock(&self.registrations).get(issuer).cloned())
    }

    fn save_registration(
        &self,
        issuer: &str,
        registration: &ClientRegistration,
    ) -> Result<(), AuthError> {
        lock(&self.registrations).insert(issuer.to_owned(), registration.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted() {
        let t = TokenSet {
            access_token: Secret::new("AT-123"),
            token_type: TokenType::Bearer,
            refresh_token: Some(Secret::new("RT-456")),
            expires_at: None,
            scopes: vec![],
            resource: "r".into(),
            issuer: "i".into(),
        };
        let s = format!("{t:?}");
        assert!(!s.contains("AT-123") && !s.contains("RT-456"), "{s}");
        let r = ClientRegistration::new("id", Some(Secret::new("SEC")));
        assert!(!format!("{r:?}").contains("SEC"));
    }

    #[test]
    fn memory_store_round_trip() {
        let s = MemoryStore::new();
        let r = ClientRegistration::new("id", None).with_auth_method("none");
        s.save_registration("https://as", &r).unwrap();
        assert_eq!(s.load_registration("https://as").unwrap(), Some(r));
        assert_eq!(s.load_registration("https://other").unwrap(), None);
    }
}
