//! RFC 8693 token exchange: a caller's access token (the subject token) traded at the
//! authorization server for a token whose audience is one downstream server.
//!
//! The token endpoint is the configured one, or the one the issuer's metadata names (RFC
//! 8414, then OpenID Discovery; the document's `issuer` must be the configured one). The
//! gateway authenticates as its own client (`client_secret_basic`). Nothing of the tokens
//! or the secret reaches an error message: the authorization server's `error` and
//! `error_description` do, clipped.

use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::OnceCell;

use crate::config::ExchangeAuth;

use super::error::DownstreamError;

/// The grant type of RFC 8693.
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The token type of an OAuth access token (RFC 8693 §3).
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// The lifetime assumed when the authorization server names none.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// The longest answer body read from the authorization server.
const MAX_BODY: usize = 256 * 1024;
/// The deadline of each request to the authorization server.
const TIMEOUT: Duration = Duration::from_secs(20);

/// A token the exchange gave, and until when it may be used.
#[derive(Clone)]
pub(crate) struct Exchanged {
    pub(crate) value: String,
    pub(crate) expires: Instant,
}

/// The exchanges of one downstream server.
pub(crate) struct Exchanger {
    config: ExchangeAuth,
    server: String,
    http: reqwest::Client,
    endpoint: OnceCell<String>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

#[derive(Deserialize)]
struct Metadata {
    issuer: String,
    token_endpoint: Option<String>,
}

impl Exchanger {
    pub(crate) fn new(server: &str, config: ExchangeAuth) -> Exchanger {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .build()
            .unwrap_or_default();
        Exchanger {
            config,
            server: server.to_owned(),
            http,
            endpoint: OnceCell::new(),
        }
    }

    /// A token for this server in exchange for `subject` (the caller's access token).
    pub(crate) async fn exchange(&self, subject: &str) -> Result<Exchanged, DownstreamError> {
        let endpoint = self
            .endpoint
            .get_or_try_init(|| self.discover())
            .await?
            .clone();
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", TOKEN_EXCHANGE),
            ("subject_token", subject),
            ("subject_token_type", ACCESS_TOKEN),
            ("requested_token_type", ACCESS_TOKEN),
            ("resource", &self.config.resource),
        ];
        if let Some(audience) = &self.config.audience {
            form.push(("audience", audience));
        }
        if let Some(scope) = &self.config.scope {
            form.push(("scope", scope));
        }
        let started = Instant::now();
        let response = self
            .http
            .post(&endpoint)
            .basic_auth(
                form_encode(&self.config.client_id),
                Some(form_encode(self.config.client_secret.expose())),
            )
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(encode_form(&form))
            .send()
            .await
            .map_err(|e| self.failed(format!("the token endpoint could not be reached ({e})")))?;
        let status = response.status();
        let body = read_limited(response).await.map_err(|e| self.failed(e))?;
        if !status.is_success() {
            let why = match serde_json::from_slice::<ErrorAnswer>(&body) {
                Ok(e) => match e.error_description {
                    Some(d) => format!("{}: {}", clip(&e.error), clip(&d)),
                    None => clip(&e.error),
                },
                Err(_) => format!("HTTP {status}"),
            };
            return Err(self.failed(format!("the authorization server refused: {why}")));
        }
        let answer: TokenAnswer = serde_json::from_slice(&body)
            .map_err(|e| self.failed(format!("its answer is not a token response ({e})")))?;
        if let Some(kind) = &answer.token_type
            && !kind.eq_ignore_ascii_case("bearer")
            && !kind.eq_ignore_ascii_case("n_a")
        {
            return Err(self.failed(format!(
                "it issued a {} token; only bearer tokens can be sent",
                clip(kind)
            )));
        }
        let lifetime = answer
            .expires_in
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_LIFETIME);
        Ok(Exchanged {
            value: answer.access_token,
            expires: started + lifetime,
        })
    }

    /// The token endpoint: configured, or from the issuer's metadata.
    async fn discover(&self) -> Result<String, DownstreamError> {
        if let Some(endpoint) = &self.config.token_endpoint {
            return Ok(endpoint.clone());
        }
        let Some(issuer) = &self.config.issuer else {
            return Err(self.failed("no issuer or token endpoint is configured".into()));
        };
        let mut last = String::new();
        for url in metadata_urls(issuer) {
            let response = match self.http.get(&url).send().await {
                Ok(r) if r.status().is_success() => r,
                Ok(r) => {
                    last = format!("{url}: HTTP {}", r.status());
                    continue;
                }
                Err(e) => {
                    last = format!("{url}: {e}");
                    continue;
                }
            };
            let body = read_limited(response).await.map_err(|e| self.failed(e))?;
            let Ok(doc) = serde_json::from_slice::<Metadata>(&body) else {
                last = format!("{url}: not authorization server metadata");
                continue;
            };
            if doc.issuer != *issuer {
                return Err(self.failed(format!(
                    "the metadata at {url} is for issuer {:?}, not {issuer:?}",
                    clip(&doc.issuer)
                )));
            }
            return doc.token_endpoint.ok_or_else(|| {
                self.failed(format!("the metadata at {url} names no token endpoint"))
            });
        }
        Err(self.failed(format!(
            "the issuer's metadata could not be fetched ({last})"
        )))
    }

    fn failed(&self, why: String) -> DownstreamError {
        DownstreamError::Exchange {
            server: self.server.clone(),
            why,
        }
    }
}

/// Where an issuer's metadata may be (RFC 8414 §3 for an issuer with a path, then OpenID
/// Discovery's place).
fn metadata_urls(issuer: &str) -> Vec<String> {
    let trimmed = issuer.trim_end_matches('/');
    let mut out = Vec::new();
    if let Ok(url) = url::Url::parse(trimmed) {
        let path = url.path().trim_end_matches('/');
        let origin = url.origin().ascii_serialization();
        out.push(format!(
            "{origin}/.well-known/oauth-authorization-server{path}"
        ));
        if !path.is_empty() {
            out.push(format!("{origin}/.well-known/openid-configuration{path}"));
        }
    }
    out.push(format!("{trimmed}/.well-known/openid-configuration"));
    out
}

async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("reading its answer failed ({e})"))?
    {
        if body.len() + chunk.len() > MAX_BODY {
            return Err("its answer is too large".into());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Text from the authorization server, shortened and without control characters.
fn clip(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// `application/x-www-form-urlencoded` of one value (as RFC 6749 §2.3.1 wants for Basic).
fn form_encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

fn encode_form(pairs: &[(&str, &str)]) -> String {
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        out.append_pair(k, v);
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_places() {
        assert_eq!(
            metadata_urls("https://idp.example"),
            [
                "https://idp.example/.well-known/oauth-authorization-server",
                "https://idp.example/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            metadata_urls("https://idp.example/realms/a"),
            [
                "https://idp.example/.well-known/oauth-authorization-server/realms/a",
                "https://idp.example/.well-known/openid-configuration/realms/a",
                "https://idp.example/realms/a/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn clipped_text_has_no_control_characters() {
        assert_eq!(clip("a\nb\u{1b}c"), "abc");
        assert_eq!(clip(&"x".repeat(500)).len(), 200);
    }
}
