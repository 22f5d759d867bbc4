//! The user-agent step of the authorization code grant: take the user to the authorization
//! URL, come back with the redirect that carries `code`, `state` and `iss`.
//!
//! - [`HeadlessUserAgent`] fetches the authorization URL itself and reads the redirect from
//!   `Location`, which is what test authorization servers (and the conformance suite's mock)
//!   answer with.
//! - [`LoopbackUserAgent`] is for a person at this machine (RFC 8252): it opens the URL in
//!   the browser and takes the redirect on `http://127.0.0.1:<port>/callback`, a listener
//!   bound when the agent is built, so the redirect URI is known before registration.
//!
//! Other agents (an embedded web view, a device that shows a QR code) implement
//! [`UserAgent`]. The flow checks everything that matters in the result (redirect target,
//! `iss`, `state`, `error`, `code`), so an implementation needs no OAuth knowledge.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use url::Url;

use super::AuthError;

/// One authorization request handed to a [`UserAgent`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AuthorizationRequest {
    /// The full authorization URL to visit.
    pub url: Url,
    /// The redirect URI it names (from [`UserAgent::redirect_uri`]).
    pub redirect_uri: Url,
    /// The `state` it carries; a callback listener may use it to ignore stray requests.
    pub state: String,
}

/// Takes the user through the authorization endpoint.
pub trait UserAgent: Send + Sync + 'static {
    /// The redirect URI to register and to send in authorization requests.
    fn redirect_uri(&self) -> Url;

    /// Visit `request.url` and resolve to the URL the authorization server redirected back
    /// to (the redirect URI with `code`, `state`, `iss` or `error` in its query).
    fn authorize<'a>(
        &'a self,
        request: &'a AuthorizationRequest,
    ) -> BoxFuture<'a, Result<Url, AuthError>>;
}

/// A [`UserAgent`] with no user: it GETs the authorization URL without following redirects
/// and returns the `Location` it is sent to. Works with authorization servers that approve
/// without interaction (test servers, some device-bound setups).
#[derive(Debug, Clone)]
pub struct HeadlessUserAgent {
    redirect_uri: Url,
    timeout: Duration,
    http: reqwest::Client,
}

impl HeadlessUserAgent {
    /// A headless agent that registers `redirect_uri` (nothing listens there).
    pub fn new(redirect_uri: Url) -> HeadlessUserAgent {
        let timeout = Duration::from_secs(30);
        HeadlessUserAgent {
            redirect_uri,
            timeout,
            http: no_redirect_client(timeout),
        }
    }

    /// Set the deadline for the authorization request. Default: 30 s.
    pub fn timeout(mut self, timeout: Duration) -> HeadlessUserAgent {
        self.timeout = timeout;
        self.http = no_redirect_client(timeout);
        self
    }
}

impl Default for HeadlessUserAgent {
    /// Registers `http://localhost:3000/callback`.
    fn default() -> Self {
        // A literal that always parses.
        let redirect = Url::parse("http://localhost:3000/callback")
            .unwrap_or_else(|_| unreachable!("static URL"));
        HeadlessUserAgent::new(redirect)
    }
}

fn no_redirect_client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(timeout)
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

impl UserAgent for HeadlessUserAgent {
    fn redirect_uri(&self) -> Url {
        self.redirect_uri.clone()
    }

    fn authorize<'a>(
        &'a self,
        request: &'a AuthorizationRequest,
    ) -> BoxFuture<'a, Result<Url, AuthError>> {
        Box::pin(async move {
            let what = "authorization request";
            let send = self.http.get(request.url.clone()).send();
            let response = match tokio::time::timeout(self.timeout, send).await {
                Err(_) => {
                    return Err(AuthError::Timeout {
                        what,
                        url: strip_query(&request.url),
                    });
                }
                Ok(Err(source)) => {
                    return Err(AuthError::Http {
                        what,
                        url: strip_query(&request.url),
                        source: source.without_url(),
                    });
                }
                Ok(Ok(r)) => r,
            };
            let status = response.status();
            if !status.is_redirection() {
                tracing::debug!(
                    status = status.as_u16(),
                    "authorization endpoint did not redirect"
                );
                return Err(AuthError::UserAgent(format!(
                    "the authorization endpoint answered HTTP {} instead of redirecting; \
                     it needs an interactive user agent",
                    status.as_u16()
                )));
            }
            let location = response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    AuthError::UserAgent("redirect without a usable Location header".into())
                })?;
            request.url.join(location).map_err(|_| {
                AuthError::UserAgent(format!(
                    "unparsable redirect from {}",
                    strip_query(&request.url)
                ))
            })
        })
    }
}

/// A URL for messages: no query (it may carry codes), no fragment.
pub(crate) fn strip_query(url: &Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

/// Opens a URL for the user: a browser launcher, or anything that shows the URL.
pub type UrlOpener = Arc<dyn Fn(&Url) -> std::io::Result<()> + Send + Sync>;

/// A [`UserAgent`] for a person at this machine (RFC 8252): the authorization URL is opened
/// in their browser, and the redirect comes back to a one-shot HTTP listener on
/// `http://127.0.0.1:<port>/callback`, bound when the agent is made (so the redirect URI is
/// known before registration). Requests to other paths, or with another `state`, are
/// answered 404 and ignored; the wait is bounded by [`LoopbackUserAgent::timeout`].
#[derive(Clone)]
pub struct LoopbackUserAgent {
    listener: Arc<std::net::TcpListener>,
    redirect_uri: Url,
    timeout: Duration,
    open: UrlOpener,
}

impl std::fmt::Debug for LoopbackUserAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackUserAgent")
            .field("redirect_uri", &self.redirect_uri.as_str())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl LoopbackUserAgent {
    /// Bind the callback listener on an ephemeral loopback port. The URL is opened with
    /// [`open_in_browser`].
    pub fn new() -> std::io::Result<LoopbackUserAgent> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        let redirect_uri = Url::parse(&format!("http://127.0.0.1:{port}/callback"))
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(LoopbackUserAgent {
            listener: Arc::new(listener),
            redirect_uri,
            timeout: Duration::from_secs(300),
            open: Arc::new(open_in_browser),
        })
    }

    /// Open authorization URLs with `open` instead of the browser (e.g. print them).
    pub fn opener(
        mut self,
        open: impl Fn(&Url) -> std::io::Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.open = Arc::new(open);
        self
    }

    /// How long to wait for the user. Default: 5 minutes.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn wait(
        &self,
        listener: &tokio::net::TcpListener,
        state: &str,
    ) -> Result<Url, AuthError> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        loop {
            let (mut stream, _) = listener
                .accept()
                .await
                .map_err(|e| AuthError::UserAgent(format!("callback listener: {e}")))?;
            // Read the request head, bounded in size and time.
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            let read = async {
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
            };
            if tokio::time::timeout(Duration::from_secs(10), read)
                .await
                .is_err()
            {
                continue;
            }
            let line = String::from_utf8_lossy(&head);
            let target = line
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("GET "))
                .and_then(|l| l.split(' ').next())
                .unwrap_or("");
            let url = self.redirect_uri.join(target).ok();
            let matches = url.as_ref().is_some_and(|u| {
                u.path() == self.redirect_uri.path()
                    && u.query_pairs().any(|(k, v)| k == "state" && v == state)
            });
            let (status, body) = if matches {
                ("200 OK", "Authorization complete. You can close this tab.")
            } else {
                ("404 Not Found", "Not found.")
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
            if matches && let Some(u) = url {
                return Ok(u);
            }
        }
    }
}

/// Open `url` in the desktop browser (`open` on macOS, `xdg-open` elsewhere), and log it
/// so a user without one can copy it.
pub fn open_in_browser(url: &Url) -> std::io::Result<()> {
    tracing::info!(url = %url, "open this URL to authorize");
    let program = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    std::process::Command::new(program)
        .arg(url.as_str())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(drop)
}

impl UserAgent for LoopbackUserAgent {
    fn redirect_uri(&self) -> Url {
        self.redirect_uri.clone()
    }

    fn authorize<'a>(
        &'a self,
        request: &'a AuthorizationRequest,
    ) -> BoxFuture<'a, Result<Url, AuthError>> {
        Box::pin(async move {
            let listener = self
                .listener
                .try_clone()
                .and_then(|l| {
                    l.set_nonblocking(true)?;
                    tokio::net::TcpListener::from_std(l)
                })
                .map_err(|e| AuthError::UserAgent(format!("callback listener: {e}")))?;
            (self.open)(&request.url)
                .map_err(|e| AuthError::UserAgent(format!("could not open the browser: {e}")))?;
            match tokio::time::timeout(self.timeout, self.wait(&listener, &request.state)).await {
                Ok(r) => r,
                Err(_) => Err(AuthError::UserAgent(
                    "no authorization response before the deadline".into(),
                )),
            }
        })
    }
}
