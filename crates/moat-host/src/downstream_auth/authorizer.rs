//! The credentials of one user's connection to one downstream server: the [`Authorizer`]
//! its HTTP transport asks before each request. It sends the user's exchanged token (kept
//! in the server's cache, exchanged again when missing or refused), only to the server's
//! own origin; the caller's token is what is exchanged, never what is sent.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use hyper::header::{AUTHORIZATION, HeaderValue};
use hyper::{HeaderMap, Method, StatusCode};
use moat_transport::AccessToken;
use moat_transport::http::oauth::{AuthError, Authorizer, RequestAuth, Verdict};
use url::Url;

use super::cache::TokenCache;
use super::exchange::Exchanger;
use super::user::UserKey;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One user's credentials to one server.
pub(crate) struct UserAuthorizer {
    user: UserKey,
    origin: String,
    exchanger: Arc<Exchanger>,
    cache: Arc<TokenCache>,
    /// The user's latest access token (each call brings the one it came with).
    subject: Mutex<AccessToken>,
    /// 401s in a row: the first drops the token and tries a new one; the next is the answer.
    refusals: AtomicU32,
}

impl UserAuthorizer {
    pub(crate) fn new(
        user: UserKey,
        server_url: &str,
        exchanger: Arc<Exchanger>,
        cache: Arc<TokenCache>,
        subject: AccessToken,
    ) -> UserAuthorizer {
        UserAuthorizer {
            user,
            origin: origin_of(server_url),
            exchanger,
            cache,
            subject: Mutex::new(subject),
            refusals: AtomicU32::new(0),
        }
    }

    /// The access token the user's latest call came with.
    pub(crate) fn set_subject(&self, token: AccessToken) {
        *self.subject.lock().unwrap_or_else(|e| e.into_inner()) = token;
    }

    /// The user's token for the server: held, else exchanged now.
    pub(crate) async fn token(&self) -> Result<String, super::DownstreamError> {
        if let Some(token) = self.cache.get(&self.user) {
            return Ok(token);
        }
        let subject = self
            .subject
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let exchanged = self.exchanger.exchange(subject.expose()).await?;
        self.cache.put(&self.user, exchanged.clone());
        Ok(exchanged.value)
    }
}

impl Authorizer for UserAuthorizer {
    fn prepare<'a>(
        &'a self,
        _method: &'a Method,
        url: &'a Url,
    ) -> BoxFuture<'a, Result<RequestAuth, AuthError>> {
        Box::pin(async move {
            if origin_of(url.as_str()) != self.origin {
                return Ok(RequestAuth::none());
            }
            let token = self
                .token()
                .await
                .map_err(|e| AuthError::GrantFailed(e.to_string()))?;
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                AuthError::GrantFailed("the exchanged token cannot be sent in a header".into())
            })?;
            value.set_sensitive(true);
            let mut headers = HeaderMap::new();
            headers.insert(AUTHORIZATION, value);
            Ok(RequestAuth::with_headers(headers))
        })
    }

    fn on_response<'a>(
        &'a self,
        sent: &'a RequestAuth,
        status: StatusCode,
        _headers: &'a HeaderMap,
    ) -> BoxFuture<'a, Result<Verdict, AuthError>> {
        Box::pin(async move {
            if status != StatusCode::UNAUTHORIZED {
                self.refusals.store(0, Ordering::Relaxed);
                return Ok(Verdict::Proceed);
            }
            // Refused (revoked, or the server's clock disagrees): drop it; one exchange
            // again, and a second refusal is the answer.
            let Some(sent) = sent
                .headers()
                .get(AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
            else {
                return Ok(Verdict::Proceed);
            };
            self.cache.forget(&self.user, sent);
            if self.refusals.fetch_add(1, Ordering::Relaxed) == 0 {
                return Ok(Verdict::Retry);
            }
            self.refusals.store(0, Ordering::Relaxed);
            Ok(Verdict::Proceed)
        })
    }
}

/// `scheme://host:port` of a URL, lowercased (empty when it does not parse).
fn origin_of(url: &str) -> String {
    Url::parse(url)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default()
}
