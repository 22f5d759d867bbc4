//! The web console (`moat gateway --console ADDR`): a small HTTP server of the gateway's own
//! where a person, in a browser, answers the calls that wait for consent (live), and sees
//! the servers, the tools with their policy decision and labels, the held pins (and
//! approves them), the audit trail, and the configuration errors of the last reload.
//!
//! Access: the gateway prints a login URL with a one-time token; opening it sets a session
//! cookie (`HttpOnly`, `SameSite=Strict`) and spends the token; sessions end when idle or
//! old ([`auth`]). With `[console.oidc]`, people
//! also sign in through an OpenID Connect provider ([`oidc`]), if its allow-list has them. Every action carries the
//! session's CSRF token in a header, and every request passes the same `Host`/`Origin`
//! checks as the MCP endpoint (DNS rebinding, cross-site requests). The page, its style and
//! its script are embedded in the binary; nothing is fetched from elsewhere.

mod assets;
mod auth;
mod body;
mod oidc;
mod pending;
mod routes;
mod server;
mod views;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

use crate::inner::Inner;

pub(crate) use pending::Pending;

/// What the console's handlers share.
pub(crate) struct State {
    pub(crate) inner: Weak<Inner>,
    pub(crate) auth: auth::Auth,
    /// Signing in through the identity provider, when configured.
    pub(crate) oidc: Option<oidc::Oidc>,
    pub(crate) pending: Arc<Pending>,
    /// The errors of the last configuration reload (empty when it applied).
    pub(crate) config_errors: Mutex<Vec<ConfigError>>,
}

/// A configuration reload that did not apply.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ConfigError {
    /// When it was seen (unix milliseconds).
    pub(crate) time_ms: i64,
    /// What was wrong.
    pub(crate) message: String,
}

/// A bound console; it serves until the gateway ends (or this is dropped).
pub struct Console {
    local: SocketAddr,
    login_url: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl Console {
    /// Binds `addr`, makes the console the gateway's consent channel, and serves.
    pub(crate) async fn bind(inner: &Arc<Inner>, addr: SocketAddr) -> std::io::Result<Console> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let (mut auth, token) = auth::Auth::new(local);
        // A console bound to every address is reached, from this machine, on loopback.
        let host = match local {
            SocketAddr::V6(v6) if v6.ip().is_unspecified() => format!("[::1]:{}", v6.port()),
            SocketAddr::V4(v4) if v4.ip().is_unspecified() => format!("127.0.0.1:{}", v4.port()),
            SocketAddr::V6(v6) => format!("[{}]:{}", v6.ip(), v6.port()),
            SocketAddr::V4(v4) => v4.to_string(),
        };
        let oidc = inner.settings().config.console.oidc.clone().map(|config| {
            let redirect = match &config.redirect_uri {
                Some(uri) => {
                    if let Some(name) = url::Url::parse(uri)
                        .ok()
                        .and_then(|u| u.host_str().map(str::to_owned))
                    {
                        auth.allow_host(&name);
                    }
                    uri.clone()
                }
                None => format!("http://{host}{}", oidc::CALLBACK_PATH),
            };
            oidc::Oidc::new(config, redirect)
        });
        let pending = Arc::new(Pending::new(Arc::downgrade(inner)));
        inner.set_console(pending.clone());
        let state = Arc::new(State {
            inner: Arc::downgrade(inner),
            auth,
            oidc,
            pending,
            config_errors: Mutex::new(Vec::new()),
        });
        let login_url = format!("http://{host}/login?token={token}");
        let task = tokio::spawn(server::serve(listener, state.clone()));
        Ok(Console {
            local,
            login_url,
            state,
            task,
        })
    }

    /// Where it listens (the port chosen when the address said port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The one-time login URL: the first browser to open it gets the session.
    pub fn login_url(&self) -> &str {
        &self.login_url
    }

    /// The identity provider people may also sign in with (`[console.oidc]`), by the name
    /// its button shows.
    pub fn sign_in_with(&self) -> Option<&str> {
        self.state.oidc.as_ref().map(|o| o.name())
    }

    /// Records the outcome of a configuration reload: `Some(error)` when it did not apply
    /// (shown on the page), `None` when it did (clears what was shown).
    pub fn reload_result(&self, error: Option<String>) {
        let mut errors = self
            .state
            .config_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        errors.clear();
        if let Some(message) = error {
            errors.push(ConfigError {
                time_ms: crate::audit::now_ms(),
                message,
            });
        }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.task.abort();
        self.state.pending.close();
    }
}
