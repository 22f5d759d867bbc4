//! `mode = "oauth"`: the gateway as each user's OAuth client of a downstream server,
//! through moat's client-side OAuth (discovery, CIMD/DCR, PKCE, resource indicators,
//! refresh with rotation) — one `OAuthClient` per user, its tokens in the [`Vault`].
//!
//! A user with no usable token is sent to authorize: the user's connection is made by a
//! task of its own, whose user agent ([`BrokerAgent`]) publishes the authorization URL and
//! waits for the redirect back at the gateway's callback listener ([`Callbacks`]). A call
//! that finds the URL published asks its client to open it — URL-mode elicitation
//! (2025-11-25), an input request in 2026-07-28 — and waits for the connection. The flow
//! belongs to the user, not to the call: a 2026-07-28 call that is retried with the answer
//! finds the same authorization under way, and a client that cannot open links is told the
//! URL, after which the next call finds the user connected.
//!
//! When the user comes back from authorizing, a 2025-11-25 client that was sent there by a
//! URL-mode elicitation is told so: `notifications/elicitation/complete` with the
//! elicitation's id, on the stream of the call that asked (the spec's way for a client to
//! close its "waiting for the browser" prompt). A 2026-07-28 client learns it from the
//! answer to its retried call instead.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moat::{Client, RequestContext};
use moat_protocol::types::methods::NOTIFICATIONS_ELICITATION_COMPLETE;
use moat_protocol::types::{
    ElicitAction, ElicitRequestParams, ElicitRequestURLParams,
    ElicitationCompleteNotificationParams,
};
use moat_protocol::version::Era;
use moat_transport::http::oauth::{
    AuthError, AuthorizationRequest, ClientRegistration, MemoryStore, OAuthClient, OAuthConfig,
    PreRegisteredClient, Secret, TokenSet, TokenStore, UserAgent,
};
use sha2::Digest as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::{oneshot, watch};
use url::Url;

use super::idle::{Verdict, judge};
use super::user::UserKey;
use super::vault::Vault;
use crate::config::OAuthAuth;

/// How long a user has to authorize before the flow (and the call waiting for it) ends.
pub(crate) const AUTHORIZE_WITHIN: Duration = Duration::from_secs(600);
/// The largest request head the callback listener reads.
const MAX_HEAD: usize = 16 * 1024;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Connects to the server as a user whose credentials the authorizer gives (the caller
/// knows how: the broker only knows the OAuth side).
pub(crate) type Connect = Arc<
    dyn Fn(
            Arc<dyn moat_transport::http::oauth::Authorizer>,
        ) -> BoxFuture<'static, Result<Client, String>>
        + Send
        + Sync,
>;

/// Where a user's connection to the server stands.
#[derive(Clone)]
enum Phase {
    Idle,
    Connecting,
    /// Waiting for the user at this authorization URL.
    Authorize(String),
    Ready(Arc<Client>),
    Failed(String),
}

/// One `oauth` server's users, vault and callback listener.
pub(crate) struct Broker {
    server: String,
    config: OAuthAuth,
    vault: Arc<Vault>,
    callbacks: Arc<Callbacks>,
    registrations: Arc<MemoryStore>,
    users: Mutex<HashMap<UserKey, UserEntry>>,
    /// Tests: run by a sweep between judging a client idle and letting it go, where a call
    /// may be reading the client from the channel.
    #[cfg(test)]
    after_judging: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

/// One user's connection as it stands, and when a call last had it.
struct UserEntry {
    phase: watch::Sender<Phase>,
    used: std::time::Instant,
}

impl Broker {
    pub(crate) fn new(
        server: &str,
        config: OAuthAuth,
        vault: Arc<Vault>,
        callbacks: Arc<Callbacks>,
    ) -> Broker {
        Broker {
            server: server.to_owned(),
            config,
            vault,
            callbacks,
            registrations: Arc::new(MemoryStore::new()),
            users: Mutex::new(HashMap::new()),
            #[cfg(test)]
            after_judging: Mutex::new(None),
        }
    }

    pub(crate) fn config(&self) -> &OAuthAuth {
        &self.config
    }

    /// The client `user`'s call goes out on, once they have authorized.
    pub(crate) async fn client_for(
        self: &Arc<Self>,
        ctx: &RequestContext,
        url: &str,
        user: UserKey,
        connect: Connect,
    ) -> Result<Arc<Client>, String> {
        let phase = lock(&self.users)
            .entry(user.clone())
            .or_insert_with(|| UserEntry {
                phase: watch::channel(Phase::Idle).0,
                used: std::time::Instant::now(),
            })
            .phase
            .clone();
        let mut rx = phase.subscribe();
        let deadline = tokio::time::Instant::now() + AUTHORIZE_WITHIN;
        // The id of the URL elicitation this call sent, once sent.
        let mut asked: Option<String> = None;
        loop {
            let now = rx.borrow_and_update().clone();
            match now {
                Phase::Ready(client) if !client.peer().is_closed() => {
                    // Let go by the sweeper since it was read: look again.
                    if !self.hand_out(&user, &phase, &client) {
                        continue;
                    }
                    self.completed(ctx, asked.as_deref()).await;
                    return Ok(client);
                }
                // Told once, to the call that finds it (in 2026-07-28, the retry of the call
                // that started it); the next call starts over.
                Phase::Failed(why) => {
                    self.completed(ctx, asked.as_deref()).await;
                    phase.send_if_modified(|p| {
                        let failed = matches!(p, Phase::Failed(_));
                        if failed {
                            *p = Phase::Idle;
                        }
                        failed
                    });
                    return Err(why);
                }
                Phase::Idle | Phase::Ready(_) => {
                    let claimed = phase.send_if_modified(|p| match p {
                        Phase::Idle => {
                            *p = Phase::Connecting;
                            true
                        }
                        Phase::Ready(c) if c.peer().is_closed() => {
                            *p = Phase::Connecting;
                            true
                        }
                        _ => false,
                    });
                    if claimed {
                        self.connect(url, user.clone(), phase.clone(), connect.clone());
                    }
                    continue;
                }
                Phase::Connecting => {}
                Phase::Authorize(link) => {
                    if asked.is_none() {
                        let id = elicitation_id();
                        asked = Some(id.clone());
                        self.ask(ctx, &link, id).await?;
                    }
                }
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    return Err(format!("server {}: the gateway is stopping", self.server));
                }
                Err(_) => {
                    return Err(format!(
                        "server {}: you did not authorize moat within {} minutes; call again to start over",
                        self.server,
                        AUTHORIZE_WITHIN.as_secs() / 60
                    ));
                }
            }
        }
    }

    /// Whether `client`, read from `user`'s `phase`, may go to a call: only if it is still
    /// the user's connection, checked and marked used under the users lock. The sweeper
    /// closes under that lock too, so the two exclude each other: a client handed out is
    /// held by its call (and freshly used) before any sweep can judge it, and one a sweep
    /// has let go is never handed out — the call finds the user idle and reconnects.
    fn hand_out(&self, user: &UserKey, phase: &watch::Sender<Phase>, client: &Arc<Client>) -> bool {
        let mut users = lock(&self.users);
        let current = matches!(&*phase.borrow(), Phase::Ready(c) if Arc::ptr_eq(c, client));
        if !current || client.peer().is_closed() {
            return false;
        }
        if let Some(entry) = users.get_mut(user) {
            entry.used = std::time::Instant::now();
        }
        true
    }

    /// Closes the users' connections unused for `idle`, and forgets the users with no
    /// connection whom no call is waiting for (their tokens stay in the vault: a user who
    /// comes back is connected again without authorizing).
    pub(crate) fn sweep(&self, idle: Duration) {
        let mut users = lock(&self.users);
        users.retain(|_, entry| {
            let now = entry.phase.borrow().clone();
            match now {
                Phase::Ready(client) => {
                    // Held by the channel, by `now`, and by any call it was handed to (or
                    // that is about to ask for it: it is kept, to be safe).
                    let verdict = judge(
                        Arc::strong_count(&client) > 2,
                        client.peer().pending_requests(),
                        client.peer().is_closed(),
                        entry.used.elapsed(),
                        idle,
                    );
                    match verdict {
                        Verdict::InUse => {
                            entry.used = std::time::Instant::now();
                            return true;
                        }
                        Verdict::Fresh => return true,
                        Verdict::Close => {}
                    }
                    #[cfg(test)]
                    if let Some(hook) = lock(&self.after_judging).as_ref() {
                        hook();
                    }
                    // Replaced only if nothing changed it meanwhile.
                    let closed = entry.phase.send_if_modified(|p| match p {
                        Phase::Ready(c) if Arc::ptr_eq(c, &client) => {
                            *p = Phase::Idle;
                            true
                        }
                        _ => false,
                    });
                    if closed {
                        tracing::debug!(server = %self.server, "closing a user's idle downstream connection");
                        tokio::spawn(async move { client.peer().close().await });
                    }
                }
                Phase::Idle => {}
                Phase::Connecting | Phase::Authorize(_) | Phase::Failed(_) => return true,
            }
            // Forgotten only when no call or connecting task has the channel.
            !(entry.phase.sender_count() == 1 && entry.phase.receiver_count() == 0)
        });
    }

    /// Tells the call's client that the authorization its URL elicitation `asked` sent the
    /// user to has ended (2025-11-25; a 2026-07-28 client has no stream to be told on, and
    /// learns it from its retried call's answer).
    async fn completed(&self, ctx: &RequestContext, asked: Option<&str>) {
        let Some(id) = asked else { return };
        if ctx
            .protocol_version()
            .is_none_or(|v| v.era() != Era::Handshake)
        {
            return;
        }
        let params = ElicitationCompleteNotificationParams {
            elicitation_id: id.to_owned(),
            meta: None,
        };
        // On the call's own stream: the client may have no other open.
        if let Err(e) = ctx
            .peer()
            .notify_related(
                NOTIFICATIONS_ELICITATION_COMPLETE,
                &params,
                Some(ctx.request_id()),
            )
            .await
        {
            tracing::debug!(server = %self.server, error = %e, "could not send elicitation/complete");
        }
    }

    /// Sends the user to `link` through the call's client, as the URL elicitation `id`.
    async fn ask(&self, ctx: &RequestContext, link: &str, id: String) -> Result<(), String> {
        let params = ElicitRequestParams::Url(ElicitRequestURLParams {
            message: format!(
                "Server {} acts on your behalf: open this link, sign in and approve moat's \
                 access. The call goes on once you have.",
                self.server
            ),
            url: link.to_owned(),
            elicitation_id: Some(id),
            ..Default::default()
        });
        // Keyed by the link: a 2026-07-28 retry answers this authorization, never a later
        // one (a new link is a new question).
        let digest: String = sha2::Sha256::digest(link.as_bytes())
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        match ctx
            .keyed(format!("authorize-{digest}"))
            .elicit(params)
            .await
        {
            Ok(answer) if answer.action == ElicitAction::Accept => Ok(()),
            Ok(_) => Err(format!(
                "you did not authorize moat for server {}: the call was not made",
                self.server
            )),
            Err(_) => Err(format!(
                "server {} acts on your behalf, and you have not authorized moat yet; this client \
                 cannot open a link for you: open {link} , approve, then call again",
                self.server
            )),
        }
    }

    /// Starts making `user`'s connection in a task of its own: it outlives the call that
    /// started it, as the user's authorization may outlive the call.
    fn connect(
        self: &Arc<Self>,
        url: &str,
        user: UserKey,
        phase: watch::Sender<Phase>,
        connect: Connect,
    ) {
        let this = self.clone();
        let url = url.to_owned();
        let key = user.clone();
        tokio::spawn(async move {
            let outcome = async {
                let server_url = Url::parse(&url).map_err(|e| e.to_string())?;
                let agent = BrokerAgent {
                    callback: Url::parse(&this.config.callback).map_err(|e| e.to_string())?,
                    callbacks: this.callbacks.clone(),
                    phase: phase.clone(),
                };
                let mut config = OAuthConfig::authorization_code(agent);
                config.store = Arc::new(UserStore {
                    vault: this.vault.clone(),
                    server: this.server.clone(),
                    user,
                    registrations: this.registrations.clone(),
                });
                if let Some(id) = &this.config.client_id {
                    config.pre_registered = vec![PreRegisteredClient::new(
                        id,
                        this.config
                            .client_secret
                            .as_ref()
                            .map(|s| Secret::new(s.expose())),
                    )];
                }
                let oauth = OAuthClient::new(server_url, config).map_err(|e| e.to_string())?;
                connect(Arc::new(oauth)).await
            };
            let next = match outcome.await {
                Ok(client) => Phase::Ready(Arc::new(client)),
                Err(why) => Phase::Failed(format!(
                    "server {}: could not connect as you: {why}",
                    this.server
                )),
            };
            // New is used: a sweep between this and the waiting call's taking it must not
            // judge it by when the user last had a connection (an authorization may have
            // taken longer than `idle`).
            let mut users = lock(&this.users);
            if let Some(entry) = users.get_mut(&key) {
                entry.used = std::time::Instant::now();
            }
            phase.send_replace(next);
            drop(users);
        });
    }
}

/// A fresh elicitation id: 96 random bits, hex.
fn elicitation_id() -> String {
    let mut id = [0u8; 12];
    let _ = getrandom::fill(&mut id);
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The user agent of one user's authorization: it publishes the URL for the call to show,
/// and waits for the redirect back.
struct BrokerAgent {
    callback: Url,
    callbacks: Arc<Callbacks>,
    phase: watch::Sender<Phase>,
}

impl UserAgent for BrokerAgent {
    fn redirect_uri(&self) -> Url {
        self.callback.clone()
    }

    fn authorize<'a>(
        &'a self,
        request: &'a AuthorizationRequest,
    ) -> BoxFuture<'a, Result<Url, AuthError>> {
        Box::pin(async move {
            let back = self.callbacks.expect(&request.state);
            self.phase
                .send_replace(Phase::Authorize(request.url.to_string()));
            let answer = tokio::time::timeout(AUTHORIZE_WITHIN, back).await;
            self.callbacks.forget(&request.state);
            self.phase.send_replace(Phase::Connecting);
            match answer {
                Ok(Ok(url)) => Ok(url),
                Ok(Err(_)) => Err(AuthError::UserAgent("the callback listener stopped".into())),
                Err(_) => Err(AuthError::UserAgent(format!(
                    "the user did not authorize within {} minutes",
                    AUTHORIZE_WITHIN.as_secs() / 60
                ))),
            }
        })
    }
}

/// The redirects back from authorization servers, at one callback address: each is handed
/// to the authorization whose `state` it carries; others are refused.
pub(crate) struct Callbacks {
    base: Url,
    waiting: Mutex<HashMap<String, oneshot::Sender<Url>>>,
}

impl Callbacks {
    /// Listens at `callback`'s host and port.
    pub(crate) async fn listen(callback: &str) -> Result<Arc<Callbacks>, String> {
        let base = Url::parse(callback).map_err(|e| e.to_string())?;
        let host = base.host_str().unwrap_or("127.0.0.1").to_owned();
        let port = base.port_or_known_default().unwrap_or(80);
        let listener = tokio::net::TcpListener::bind((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|e| format!("cannot listen for OAuth callbacks at {host}:{port}: {e}"))?;
        let this = Arc::new(Callbacks {
            base,
            waiting: Mutex::new(HashMap::new()),
        });
        let weak = Arc::downgrade(&this);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let Some(this) = weak.upgrade() else { return };
                tokio::spawn(async move { this.serve(stream).await });
            }
        });
        Ok(this)
    }

    fn expect(&self, state: &str) -> oneshot::Receiver<Url> {
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(state.to_owned(), tx);
        rx
    }

    fn forget(&self, state: &str) {
        lock(&self.waiting).remove(state);
    }

    async fn serve(&self, mut stream: tokio::net::TcpStream) {
        let mut head = Vec::new();
        let mut buf = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                _ => return,
            }
        }
        let line = String::from_utf8_lossy(&head);
        let target = line
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("GET "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or("");
        let (status, body) = match self.base.join(target) {
            Ok(url) if url.path() == self.base.path() => {
                let state = url
                    .query_pairs()
                    .find(|(k, _)| k == "state")
                    .map(|(_, v)| v.into_owned());
                let waiter = state.and_then(|s| lock(&self.waiting).remove(&s));
                match waiter.map(|tx| tx.send(url).is_ok()) {
                    Some(true) => (
                        "200 OK",
                        "moat: authorization received. You can close this window and go back.",
                    ),
                    _ => (
                        "400 Bad Request",
                        "moat: no authorization is waiting for this answer (expired, or already used).",
                    ),
                }
            }
            _ => ("404 Not Found", "not found"),
        };
        let answer = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n\
             cache-control: no-store\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
    }
}

/// One user's tokens for one server, in the vault; registrations (the gateway's client
/// identity at an authorization server) are the gateway's, shared by its users.
struct UserStore {
    vault: Arc<Vault>,
    server: String,
    user: UserKey,
    registrations: Arc<MemoryStore>,
}

impl TokenStore for UserStore {
    fn load_tokens(&self, _server: &str) -> Result<Option<TokenSet>, AuthError> {
        Ok(self.vault.load(&self.server, &self.user))
    }

    fn save_tokens(&self, _server: &str, tokens: &TokenSet) -> Result<(), AuthError> {
        self.vault
            .save(&self.server, &self.user, tokens)
            .map_err(|e| AuthError::Store(e.to_string()))
    }

    fn clear_tokens(&self, _server: &str) -> Result<(), AuthError> {
        self.vault.clear(&self.server, &self.user);
        Ok(())
    }

    fn load_registration(&self, issuer: &str) -> Result<Option<ClientRegistration>, AuthError> {
        self.registrations.load_registration(issuer)
    }

    fn save_registration(
        &self,
        issuer: &str,
        registration: &ClientRegistration,
    ) -> Result<(), AuthError> {
        self.registrations.save_registration(issuer, registration)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use moat::transport::{Connection, Limits};
    use serde_json::{Value, json};
    use tokio::io::BufReader;

    use super::super::state::tests::connected_client;
    use super::*;

    fn test_broker(dir: &Path, idle: Duration) -> Arc<Broker> {
        let vault = Vault::open(dir.join("v"), None, &dir.join("key")).expect("vault");
        let callback = "http://127.0.0.1:1/callback";
        let callbacks = Arc::new(Callbacks {
            base: Url::parse(callback).expect("url"),
            waiting: Mutex::new(HashMap::new()),
        });
        let config = OAuthAuth {
            callback: callback.into(),
            client_id: Some("moat-gateway".into()),
            client_secret: None,
            key: None,
            key_file: None,
            idle_timeout: idle,
        };
        Arc::new(Broker::new("api", config, Arc::new(vault), callbacks))
    }

    /// `user` connected on `client`, last used an hour ago.
    fn ready(broker: &Broker, user: &UserKey, client: Arc<Client>) -> watch::Sender<Phase> {
        let phase = watch::channel(Phase::Ready(client)).0;
        let entry = UserEntry {
            phase: phase.clone(),
            used: std::time::Instant::now() - Duration::from_secs(3600),
        };
        lock(&broker.users).insert(user.clone(), entry);
        phase
    }

    /// The race a sweep and a call could run: the call reads the user's client from the
    /// channel just after the sweep judged it idle, before the sweep lets it go. The call
    /// is not handed that client (it finds the user idle and reconnects), and the client
    /// is closed.
    #[tokio::test]
    async fn a_client_read_while_a_sweep_lets_it_go_is_not_handed_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let broker = test_broker(dir.path(), Duration::from_secs(60));
        let user = UserKey::new("i", "alice");
        let phase = ready(&broker, &user, Arc::new(connected_client().await));
        let read: Arc<Mutex<Option<Arc<Client>>>> = Arc::default();
        let (rx, into) = (phase.subscribe(), read.clone());
        *lock(&broker.after_judging) = Some(Box::new(move || {
            if let Phase::Ready(c) = &*rx.borrow() {
                *lock(&into) = Some(c.clone());
            }
        }));
        broker.sweep(Duration::from_secs(60));
        let client = lock(&read).take().expect("the call read the client");
        assert!(
            !broker.hand_out(&user, &phase, &client),
            "a call was handed the client a sweep is closing"
        );
        assert!(matches!(*phase.borrow(), Phase::Idle));
        tokio::time::timeout(Duration::from_secs(5), client.peer().closed())
            .await
            .expect("the idle client was closed");
    }

    /// The other order: a client handed to a call is not closed by a later sweep, however
    /// short the idle time, as long as the call has it; once it has let go, it is.
    #[tokio::test]
    async fn a_client_handed_out_is_kept_while_the_call_has_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let broker = test_broker(dir.path(), Duration::ZERO);
        let user = UserKey::new("i", "alice");
        let phase = ready(&broker, &user, Arc::new(connected_client().await));
        let client = match &*phase.borrow() {
            Phase::Ready(c) => c.clone(),
            _ => unreachable!("ready"),
        };
        assert!(broker.hand_out(&user, &phase, &client));
        broker.sweep(Duration::ZERO);
        assert!(matches!(&*phase.borrow(), Phase::Ready(c) if Arc::ptr_eq(c, &client)));
        client.ping().await.expect("the call's client works");
        let peer = client.peer().clone();
        drop(client);
        broker.sweep(Duration::ZERO);
        assert!(matches!(*phase.borrow(), Phase::Idle));
        tokio::time::timeout(Duration::from_secs(5), peer.closed())
            .await
            .expect("the idle client was closed");
    }

    /// Many calls of one user through [`Broker::client_for`], while a sweep with no idle
    /// time at all runs without pause: every call's round trip on the client it was given
    /// succeeds (none is handed a client a sweep is closing), and clients are both reused
    /// and, between calls, closed and made anew.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_sweep_never_closes_a_client_handed_to_a_call() {
        let dir = tempfile::tempdir().expect("tempdir");
        let broker = test_broker(dir.path(), Duration::ZERO);
        let made = Arc::new(AtomicUsize::new(0));
        let connect: Connect = {
            let made = made.clone();
            Arc::new(move |_authorizer| {
                let made = made.clone();
                Box::pin(async move {
                    made.fetch_add(1, Ordering::Relaxed);
                    Ok(connected_client().await)
                })
            })
        };
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sweeper = {
            let (broker, stop) = (broker.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    broker.sweep(Duration::ZERO);
                    tokio::task::yield_now().await;
                }
            })
        };
        // The gateway's side of the calls: a tool whose handler takes the user's client and
        // makes a round trip on it.
        let front = {
            let broker = broker.clone();
            moat::Server::new("gateway", "1").tool_def(
                moat_protocol::types::Tool::new("call", json!({"type": "object"})),
                move |ctx: RequestContext, _: Value| {
                    let (broker, connect) = (broker.clone(), connect.clone());
                    async move {
                        let user = UserKey::new("i", "alice");
                        let client = broker
                            .client_for(&ctx, "http://127.0.0.1:1/mcp", user, connect)
                            .await?;
                        client
                            .ping()
                            .await
                            .map_err(|e| format!("the client was closed under the call: {e}"))?;
                        Ok::<_, String>("ok")
                    }
                },
            )
        };
        let (a, b) = tokio::io::duplex(1 << 16);
        let (ar, aw) = tokio::io::split(a);
        let (br, bw) = tokio::io::split(b);
        let _front_peer = front.start(Connection::from_lines(
            BufReader::new(ar),
            aw,
            Limits::default(),
        ));
        let caller = Arc::new(
            Client::builder()
                .protocol(moat::VersionPreference::Exact(
                    moat::ProtocolVersion::V2025_11_25,
                ))
                .connect(Connection::from_lines(
                    BufReader::new(br),
                    bw,
                    Limits::default(),
                ))
                .await
                .expect("connect"),
        );
        let mut calls = Vec::new();
        for n in 0..6u64 {
            let caller = caller.clone();
            calls.push(tokio::spawn(async move {
                for i in 0..50u64 {
                    let answer = caller.call_tool("call", json!({})).await.expect("call");
                    assert_ne!(answer.is_error, Some(true), "{answer:?}");
                    tokio::time::sleep(Duration::from_micros((i * 7 + n * 13) % 1500)).await;
                }
            }));
        }
        for call in calls {
            call.await.expect("a call failed");
        }
        stop.store(true, Ordering::Relaxed);
        sweeper.await.expect("sweeper");
        let made = made.load(Ordering::Relaxed);
        assert!(made > 1, "no client was swept and made anew");
        assert!(made < 300, "no client was reused");
    }
}
