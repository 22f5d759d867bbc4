//! Token endpoint requests: client authentication (RFC 6749 §2.3, RFC 7523 §2.2), DPoP
//! proofs with nonce retry (RFC 9449 §5, §8), and parsing the token response.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderName, HeaderValue};
use serde::Deserialize;
use url::Url;

use super::AuthError;
use super::config::{ClientAuth, ClientCredentials};
use super::fetch::{Fetcher, clip};
use super::jwt::{EcKey, client_assertion, dpop_proof};
use super::metadata::{ServerMetadata, origin_string};
use super::store::{ClientRegistration, Secret, TokenType};
use super::user_agent::strip_query;

pub(crate) const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
pub(crate) const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub(crate) const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
pub(crate) const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// A client as the token endpoint sees it.
#[derive(Debug, Clone)]
pub(crate) struct ClientCreds {
    pub client_id: String,
    pub secret: Option<Secret>,
    pub key: Option<EcKey>,
    /// The method assigned at registration or configured; else chosen from metadata.
    pub method: Option<String>,
}

impl ClientCreds {
    pub fn from_registration(r: &ClientRegistration) -> ClientCreds {
        ClientCreds {
            client_id: r.client_id.clone(),
            secret: r.client_secret.clone(),
            key: None,
            method: r.token_endpoint_auth_method.clone(),
        }
    }

    pub fn from_config(c: &ClientCredentials) -> ClientCreds {
        let (secret, key, method) = match &c.auth {
            ClientAuth::Secret(s) => (Some(s.clone()), None, None),
            ClientAuth::PrivateKeyJwt(k) => (None, Some(k.clone()), Some("private_key_jwt".into())),
            ClientAuth::None => (None, None, Some("none".into())),
        };
        ClientCreds {
            client_id: c.client_id.clone(),
            secret,
            key,
            method,
        }
    }

    /// The token endpoint authentication method to use with `meta`.
    pub fn method(&self, meta: &ServerMetadata) -> String {
        if let Some(m) = &self.method {
            return m.clone();
        }
        if self.key.is_some() {
            return "private_key_jwt".into();
        }
        if self.secret.is_none() {
            return "none".into();
        }
        match &meta.token_endpoint_auth_methods_supported {
            // RFC 8414 §2: absent means client_secret_basic.
            None => "client_secret_basic".into(),
            Some(list) => ["client_secret_basic", "client_secret_post", "none"]
                .into_iter()
                .find(|m| list.iter().any(|x| x == m))
                .unwrap_or("client_secret_basic")
                .into(),
        }
    }

    /// Add this client's authentication to a token request. `audience` is the `aud` of a
    /// `private_key_jwt` assertion (the authorization server's issuer).
    pub fn apply(
        &self,
        meta: &ServerMetadata,
        audience: &str,
        form: &mut Vec<(String, String)>,
        headers: &mut Vec<(HeaderName, HeaderValue)>,
    ) {
        let method = self.method(meta);
        match (method.as_str(), &self.secret, &self.key) {
            ("client_secret_basic", Some(secret), _) => {
                let raw = format!(
                    "{}:{}",
                    form_encode(&self.client_id),
                    form_encode(secret.expose())
                );
                if let Ok(mut v) = HeaderValue::from_str(&format!("Basic {}", STANDARD.encode(raw)))
                {
                    v.set_sensitive(true);
                    headers.push((http::header::AUTHORIZATION, v));
                }
            }
            ("client_secret_post", Some(secret), _) => {
                form.push(("client_id".into(), self.client_id.clone()));
                form.push(("client_secret".into(), secret.expose().to_owned()));
            }
            ("private_key_jwt", _, Some(key)) => {
                form.push(("client_id".into(), self.client_id.clone()));
                form.push(("client_assertion_type".into(), ASSERTION_TYPE.into()));
                form.push((
                    "client_assertion".into(),
                    client_assertion(key, &self.client_id, audience),
                ));
            }
            _ => form.push(("client_id".into(), self.client_id.clone())),
        }
    }
}

/// RFC 6749 §2.3.1 encodes the id and secret before Basic; unreserved characters stay,
/// everything else is `%XX` (a space becomes `%20`, which every decoder agrees on).
pub(crate) fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The successful token response (RFC 6749 §5.1), with the fields we use.
#[derive(Debug)]
pub(crate) struct TokenResponse {
    pub access_token: Secret,
    pub token_type: TokenType,
    pub refresh_token: Option<Secret>,
    pub expires_at: Option<SystemTime>,
    pub scope: Option<String>,
    pub issued_token_type: Option<String>,
}

#[derive(Deserialize)]
struct RawTokenResponse {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    issued_token_type: Option<String>,
}

/// An access token must fit in an `Authorization` header: visible ASCII only.
fn header_safe(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= 16 * 1024
        && token.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// One token endpoint, with what a request needs around it.
pub(crate) struct TokenCall<'a> {
    pub fetcher: &'a Fetcher,
    pub url: &'a Url,
    pub what: &'static str,
    /// Sign a DPoP proof with this key (and expect a DPoP-bound token).
    pub dpop: Option<&'a EcKey>,
    /// DPoP nonces per authorization server origin.
    pub nonces: &'a Mutex<HashMap<String, String>>,
    /// When set, the token type is not checked (token exchange answers `N_A`).
    pub any_token_type: bool,
}

impl TokenCall<'_> {
    /// POST the form built by `build` (called again for a DPoP nonce retry, so assertions
    /// and proofs are fresh each time).
    pub async fn send(
        &self,
        build: impl Fn() -> (Vec<(String, String)>, Vec<(HeaderName, HeaderValue)>),
    ) -> Result<TokenResponse, AuthError> {
        let origin = origin_string(self.url);
        let mut htu = self.url.clone();
        htu.set_query(None);
        htu.set_fragment(None);
        let mut nonce_retried = false;
        loop {
            let (form, mut headers) = build();
            if let Some(key) = self.dpop {
                let nonce = lock(self.nonces).get(&origin).cloned();
                let proof = dpop_proof(key, "POST", htu.as_str(), None, nonce.as_deref());
                if let Ok(v) = HeaderValue::from_str(&proof) {
                    headers.push((HeaderName::from_static("dpop"), v));
                }
            }
            let pairs: Vec<(&str, &str)> =
                form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let reply = self
                .fetcher
                .post_form(self.what, self.url, &pairs, headers)
                .await?;
            let new_nonce = reply
                .headers
                .get("dpop-nonce")
                .and_then(|v| v.to_str().ok())
                .filter(|n| !n.is_empty() && n.len() <= 1024)
                .map(str::to_owned);
            if self.dpop.is_some()
                && let Some(n) = &new_nonce
            {
                lock(self.nonces).insert(origin.clone(), n.clone());
            }
            if !reply.status.is_success() {
                let (error, description) = reply.oauth_error();
                if self.dpop.is_some()
                    && error == "use_dpop_nonce"
                    && new_nonce.is_some()
                    && !nonce_retried
                {
                    tracing::debug!(url = %strip_query(self.url), "token endpoint asked for a DPoP nonce; retrying");
                    nonce_retried = true;
                    continue;
                }
                return Err(AuthError::TokenEndpoint {
                    url: strip_query(self.url),
                    status: reply.status.as_u16(),
                    error,
                    description,
                });
            }
            let raw: RawTokenResponse = reply.json(self.what, self.url)?;
            return self.parse(raw);
        }
    }

    fn parse(&self, raw: RawTokenResponse) -> Result<TokenResponse, AuthError> {
        let invalid = |detail: String| AuthError::InvalidResponse {
            what: self.what,
            url: strip_query(self.url),
            detail,
        };
        if !header_safe(&raw.access_token) {
            return Err(invalid("access_token is empty or not visible ASCII".into()));
        }
        let kind = raw.token_type.as_deref().unwrap_or("");
        let token_type = if kind.eq_ignore_ascii_case("dpop") {
            if self.dpop.is_none() && !self.any_token_type {
                return Err(invalid(
                    "a DPoP token was issued without a DPoP proof".into(),
                ));
            }
            TokenType::DPoP
        } else if kind.eq_ignore_ascii_case("bearer") || self.any_token_type {
            if self.dpop.is_some() && !self.any_token_type {
                tracing::warn!(url = %strip_query(self.url), "DPoP proof sent but a Bearer token was issued");
            }
            TokenType::Bearer
        } else {
            return Err(invalid(format!("unsupported token_type {:?}", clip(kind))));
        };
        let expires_in = match raw.expires_in {
            Some(serde_json::Value::Number(n)) => n.as_u64(),
            Some(serde_json::Value::String(s)) => s.parse().ok(),
            _ => None,
        };
        let expires_at = expires_in.and_then(|s| {
            SystemTime::now().checked_add(Duration::from_secs(s.min(10 * 365 * 86_400)))
        });
        let refresh_token = raw.refresh_token.filter(|r| !r.is_empty()).map(Secret::new);
        Ok(TokenResponse {
            access_token: Secret::new(raw.access_token),
            token_type,
            refresh_token,
            expires_at,
            scope: raw.scope,
            issued_token_type: raw.issued_token_type,
        })
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(methods: Option<&[&str]>) -> ServerMetadata {
        ServerMetadata {
            issuer: "https://as".into(),
            token_endpoint_auth_methods_supported: methods
                .map(|m| m.iter().map(|s| s.to_string()).collect()),
            ..ServerMetadata::default()
        }
    }

    fn creds(secret: Option<&str>, method: Option<&str>) -> ClientCreds {
        ClientCreds {
            client_id: "id:1".into(),
            secret: secret.map(Secret::new),
            key: None,
            method: method.map(str::to_owned),
        }
    }

    #[test]
    fn method_choice() {
        assert_eq!(
            creds(Some("s"), None).method(&meta(None)),
            "client_secret_basic"
        );
        assert_eq!(
            creds(Some("s"), None).method(&meta(Some(&["client_secret_post"]))),
            "client_secret_post"
        );
        assert_eq!(
            creds(Some("s"), None).method(&meta(Some(&["none"]))),
            "none"
        );
        assert_eq!(
            creds(Some("s"), Some("client_secret_post")).method(&meta(Some(&["none"]))),
            "client_secret_post"
        );
        assert_eq!(
            creds(None, None).method(&meta(Some(&["client_secret_basic"]))),
            "none"
        );
    }

    #[test]
    fn basic_header_encodes() {
        let mut form = Vec::new();
        let mut headers = Vec::new();
        creds(Some("a b+c"), Some("client_secret_basic")).apply(
            &meta(None),
            "aud",
            &mut form,
            &mut headers,
        );
        assert!(form.is_empty());
        let v = headers[0].1.to_str().unwrap();
        let decoded = String::from_utf8(STANDARD.decode(&v["Basic ".len()..]).unwrap()).unwrap();
        assert_eq!(decoded, "id%3A1:a%20b%2Bc");
        assert!(headers[0].1.is_sensitive());
    }

    #[test]
    fn post_and_none() {
        let mut form = Vec::new();
        let mut headers = Vec::new();
        creds(Some("s"), Some("client_secret_post")).apply(
            &meta(None),
            "aud",
            &mut form,
            &mut headers,
        );
        assert_eq!(
            form,
            vec![
                ("client_id".into(), "id:1".into()),
                ("client_secret".into(), "s".into())
            ]
        );
        let mut form = Vec::new();
        creds(Some("s"), Some("none")).apply(&meta(None), "aud", &mut form, &mut headers);
        assert_eq!(form, vec![("client_id".to_string(), "id:1".to_string())]);
        assert!(headers.is_empty());
    }

    #[test]
    fn header_safety() {
        assert!(header_safe("abc.DEF-_~+/="));
        assert!(!header_safe(""));
        assert!(!header_safe("a b"));
        assert!(!header_safe("a\r\nX: y"));
    }
}
