//! The one way the transport sends an HTTP request: with the authorizer's credentials, every
//! response shown to it, and the request sent again while it says so (bounded).
//!
//! The authorizer (normally an [`OAuthClient`](crate::http::oauth::OAuthClient)) does the
//! rest: on a 401 it discovers, registers and obtains a token; on a 403
//! `insufficient_scope` it asks for more scope; a success resets its retry limit and may
//! bring a DPoP nonce. Concurrent 401s lead to one authorization, inside the authorizer.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method};
use url::Url;

use super::{Shared, error_chain};
use crate::http::oauth::Verdict;

/// How many times one request is sent again on its authorizer's word. A DPoP-bound request
/// may take two (the token, then the server's nonce) and a step-up one more; the
/// authorizer bounds its own authorizations, this is only a backstop.
pub(super) const MAX_AUTH_RETRIES: u32 = 4;

/// Why a request got no response to work with.
#[derive(Debug)]
pub(crate) enum SendError {
    /// The request could not be sent, or nothing came back in time.
    Http(String),
    /// No credentials could be had for it: the request was not sent (again).
    Auth(String),
}

impl SendError {
    pub(super) fn is_auth(&self) -> bool {
        matches!(self, SendError::Auth(_))
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Http(e) => f.write_str(e),
            SendError::Auth(e) => write!(f, "authorization failed: {e}"),
        }
    }
}

impl From<SendError> for String {
    fn from(e: SendError) -> String {
        e.to_string()
    }
}

/// Send `method url` with `headers` (and `body`), authorized. `wait` bounds each attempt
/// until the response headers arrive, not the authorization between attempts (which may
/// wait for a person at a browser; the authorizer has deadlines of its own).
pub(super) async fn send(
    shared: &Shared,
    method: Method,
    url: &Url,
    headers: HeaderMap,
    body: Option<Bytes>,
    wait: Option<Duration>,
) -> Result<reqwest::Response, SendError> {
    let Some(authorizer) = &shared.authorizer else {
        return once(shared, method, url, headers, body, wait).await;
    };
    let mut retries = 0;
    loop {
        let credentials = authorizer
            .prepare(&method, url)
            .await
            .map_err(|e| SendError::Auth(error_chain(&e)))?;
        let mut with = headers.clone();
        for (name, value) in credentials.headers() {
            with.insert(name.clone(), value.clone());
        }
        let resp = once(shared, method.clone(), url, with, body.clone(), wait).await?;
        let verdict = authorizer
            .on_response(&credentials, resp.status(), resp.headers())
            .await
            .map_err(|e| SendError::Auth(error_chain(&e)))?;
        match verdict {
            Verdict::Retry if retries < MAX_AUTH_RETRIES => {
                retries += 1;
                tracing::debug!(%method, status = %resp.status(), retries, "sending the request again with new credentials");
            }
            Verdict::Retry => {
                tracing::warn!(%method, %url, status = %resp.status(), "still refused after {MAX_AUTH_RETRIES} authorization retries");
                return Ok(resp);
            }
            _ => return Ok(resp),
        }
    }
}

/// One attempt: GETs through the client that follows same-origin redirects, the rest
/// through the one that keeps POSTs POSTs.
async fn once(
    shared: &Shared,
    method: Method,
    url: &Url,
    headers: HeaderMap,
    body: Option<Bytes>,
    wait: Option<Duration>,
) -> Result<reqwest::Response, SendError> {
    let client = if method == Method::GET {
        &shared.get
    } else {
        &shared.post
    };
    let mut request = client.request(method, url.clone()).headers(headers);
    if let Some(body) = body {
        request = request.body(body);
    }
    let fut = request.send();
    match wait {
        Some(t) => match tokio::time::timeout(t, fut).await {
            Ok(r) => r.map_err(|e| SendError::Http(error_chain(&e))),
            Err(_) => Err(SendError::Http(format!("no response within {t:?}"))),
        },
        None => fut.await.map_err(|e| SendError::Http(error_chain(&e))),
    }
}
