//! Credentials to downstream URL servers (`[servers.NAME.auth]`): what the gateway sends
//! to a server behind it, never the caller's own token.
//!
//! - `static`: one secret of the gateway's, as a header on the server's one connection
//!   (added where the supervisor connects).
//! - `exchange`: each user's access token exchanged (RFC 8693, [`exchange`]) for a token
//!   whose audience is the server, kept per user until it expires ([`cache`]), and sent
//!   by that user's own connection ([`authorizer`]).
//! - `oauth`: the gateway as each user's OAuth client of the server ([`broker`]), a user
//!   without a token sent to authorize, tokens encrypted at rest ([`vault`]).
//!
//! Per-user connections, not one connection with a per-request header: in the handshake
//! era a session is opened by one token and belongs to its user (a moat server refuses
//! another user's token on it), and a server keeps per-session state (subscriptions, log
//! level, tasks) that must not mix users. So each user gets a client of their own
//! ([`UserClients`]), bounded in number. The server's shared connection — the catalog,
//! notifications, health checks — is the gateway's own: it authenticates with the client
//! credentials grant of the gateway's client, and no call is ever sent on it.

mod authorizer;
mod broker;
mod cache;
mod error;
mod exchange;
mod vault;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use moat::{Client, HttpOptions, RequestContext};
use moat_transport::http::oauth::{ClientCredentials, OAuthConfig};

use crate::config::{DownstreamAuth, ExchangeAuth, OAuthAuth, ServerConfig, ServerTransport};
use crate::inner::Inner;

pub use error::DownstreamError;

use authorizer::UserAuthorizer;
use cache::TokenCache;
use exchange::Exchanger;

/// Users whose exchanged tokens are kept, per server.
const TOKENS_PER_SERVER: usize = 4096;
/// Users with a connection of their own open, per server; the least recently used closes.
const CONNECTIONS_PER_SERVER: usize = 256;

/// Who a per-user credential belongs to: the issuer that vouched and the subject.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct UserKey {
    issuer: String,
    subject: String,
}

impl UserKey {
    pub(crate) fn new(issuer: &str, subject: &str) -> UserKey {
        UserKey {
            issuer: issuer.to_owned(),
            subject: subject.to_owned(),
        }
    }
}

/// The options of a server's shared connection, with the credentials its `auth` asks for:
/// the static header, or the gateway's own client credentials. A header of `headers` with
/// the same name as the credential's is left out: the credential wins.
pub(crate) fn shared_options(cfg: &ServerConfig, mut options: HttpOptions) -> HttpOptions {
    let ServerTransport::Url { headers, .. } = &cfg.transport else {
        return options;
    };
    let replaced = match &cfg.auth {
        Some(DownstreamAuth::Static(s)) => Some(s.header.as_str()),
        Some(_) => Some("authorization"),
        None => None,
    };
    for (name, value) in headers {
        if replaced.is_some_and(|r| r.eq_ignore_ascii_case(name)) {
            continue;
        }
        options = options.header(name, value);
    }
    match &cfg.auth {
        Some(DownstreamAuth::Static(s)) => options.header(&s.header, s.value()),
        Some(DownstreamAuth::Exchange(e)) => options.oauth(OAuthConfig::client_credentials(
            ClientCredentials::secret(&e.client_id, e.client_secret.expose()),
        )),
        // The gateway's own client, when it has a secret; else the server lists its tools
        // to anyone.
        Some(DownstreamAuth::OAuth(OAuthAuth {
            client_id: Some(id),
            client_secret: Some(secret),
            ..
        })) => options.oauth(OAuthConfig::client_credentials(ClientCredentials::secret(
            id,
            secret.expose(),
        ))),
        _ => options,
    }
}

/// The options of one user's connection: the configured headers but `Authorization` (the
/// user's credentials come from their authorizer, never a shared token).
pub(crate) fn user_options(cfg: &ServerConfig, mut options: HttpOptions) -> HttpOptions {
    if let ServerTransport::Url { headers, .. } = &cfg.transport {
        for (name, value) in headers {
            if !name.eq_ignore_ascii_case("authorization") {
                options = options.header(name, value);
            }
        }
    }
    options
}

/// The per-user state of every server whose credentials are per user.
#[derive(Default)]
pub(crate) struct Downstream {
    servers: Mutex<HashMap<String, Arc<PerServer>>>,
    brokers: tokio::sync::Mutex<HashMap<String, Arc<broker::Broker>>>,
    /// Callback listeners by address, shared by the servers that name the same one.
    callbacks: tokio::sync::Mutex<HashMap<String, Arc<broker::Callbacks>>>,
}

/// One server's exchanges, tokens and user connections.
struct PerServer {
    config: ExchangeAuth,
    url: String,
    exchanger: Arc<Exchanger>,
    cache: Arc<TokenCache>,
    users: UserClients,
}

/// The user connections of one server.
#[derive(Default)]
struct UserClients {
    slots: Mutex<HashMap<UserKey, Arc<tokio::sync::Mutex<Option<UserClient>>>>>,
}

struct UserClient {
    client: Arc<Client>,
    authorizer: Arc<UserAuthorizer>,
    used: Instant,
}

impl Downstream {
    /// The broker of the `oauth` server `name` (made on first use, anew when configured
    /// anew): its vault opened, its callback address listened on.
    async fn broker(
        &self,
        inner: &Arc<Inner>,
        name: &str,
        config: &OAuthAuth,
    ) -> Result<Arc<broker::Broker>, String> {
        let mut brokers = self.brokers.lock().await;
        if let Some(b) = brokers.get(name)
            && b.config() == config
        {
            return Ok(b.clone());
        }
        let dir = inner.downstream_tokens_dir();
        let key_file = config.key_file.clone().unwrap_or_else(|| dir.join("key"));
        let vault = vault::Vault::open(
            dir.join("tokens"),
            config.key.as_ref().map(|k| k.expose()),
            &key_file,
        )
        .map_err(|e| e.to_string())?;
        let address = url::Url::parse(&config.callback)
            .ok()
            .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
            .unwrap_or_default();
        let callbacks = {
            let mut listening = self.callbacks.lock().await;
            match listening.get(&address) {
                Some(c) => c.clone(),
                None => {
                    let c = broker::Callbacks::listen(&config.callback).await?;
                    listening.insert(address, c.clone());
                    c
                }
            }
        };
        let b = Arc::new(broker::Broker::new(
            name,
            config.clone(),
            Arc::new(vault),
            callbacks,
        ));
        brokers.insert(name.to_owned(), b.clone());
        Ok(b)
    }

    fn server(&self, name: &str, url: &str, config: &ExchangeAuth) -> Arc<PerServer> {
        let mut servers = lock(&self.servers);
        if let Some(s) = servers.get(name)
            && s.config == *config
            && s.url == url
        {
            return s.clone();
        }
        // New, or configured anew: nothing of the old settings' tokens is reused.
        let s = Arc::new(PerServer {
            config: config.clone(),
            url: url.to_owned(),
            exchanger: Arc::new(Exchanger::new(name, config.clone())),
            cache: Arc::new(TokenCache::new(TOKENS_PER_SERVER)),
            users: UserClients::default(),
        });
        servers.insert(name.to_owned(), s.clone());
        s
    }
}

/// The client a call to `server` goes out on: the server's shared connection, or, for a
/// server with per-user credentials, the calling user's own (made on their first call).
pub(crate) async fn client_for_call(
    inner: &Arc<Inner>,
    ctx: &RequestContext,
    server: &str,
) -> Result<Arc<Client>, String> {
    // Up (or waited for) first: a server that is down is down for every user.
    let shared = inner.wait_live(server).await?;
    let settings = inner.settings();
    let Some(cfg) = settings.config.server(server) else {
        return Ok(shared);
    };
    let ServerTransport::Url { url, .. } = &cfg.transport else {
        return Ok(shared);
    };
    let exchange = match &cfg.auth {
        Some(DownstreamAuth::Exchange(exchange)) => exchange,
        Some(DownstreamAuth::OAuth(oauth)) => {
            // The local OS user (stdio) is a user too: their tokens are theirs.
            let user = match ctx.identity() {
                Some(i) => UserKey::new(
                    i.issuer.as_deref().unwrap_or("local"),
                    i.subject.as_deref().unwrap_or(""),
                ),
                None => UserKey::new("anonymous", ""),
            };
            if user.subject.is_empty() {
                return Err(format!(
                    "server {server} acts on behalf of each user, and nobody vouches for who \
                     is calling: configure [auth] for HTTP callers"
                ));
            }
            let broker = inner
                .downstream()
                .broker(inner, server, oauth)
                .await
                .map_err(|e| format!("server {server}: {e}"))?;
            return broker.client_for(inner, ctx, cfg, url, user).await;
        }
        _ => return Ok(shared),
    };
    let no_token = || DownstreamError::NoCallerToken {
        server: server.to_owned(),
    };
    let identity = ctx.identity().ok_or_else(|| no_token().to_string())?;
    let (Some(issuer), Some(subject), Some(token)) = (
        identity.issuer.as_deref(),
        identity.subject.as_deref(),
        identity.access_token.clone(),
    ) else {
        return Err(no_token().to_string());
    };
    let user = UserKey::new(issuer, subject);
    let per_server = inner.downstream().server(server, url, exchange);
    let slot = {
        let mut slots = lock(&per_server.users.slots);
        if !slots.contains_key(&user) && slots.len() >= CONNECTIONS_PER_SERVER {
            evict_one(&mut slots);
        }
        slots.entry(user.clone()).or_default().clone()
    };
    let mut held = slot.lock().await;
    if let Some(uc) = held.as_mut()
        && !uc.client.peer().is_closed()
    {
        uc.authorizer.set_subject(token);
        uc.used = Instant::now();
        return Ok(uc.client.clone());
    }
    let authorizer = Arc::new(UserAuthorizer::new(
        user,
        url,
        per_server.exchanger.clone(),
        per_server.cache.clone(),
        token,
    ));
    // Exchanged before connecting: a refusal reads as the exchange's, not as a failed start.
    authorizer
        .token()
        .await
        .map_err(|e: DownstreamError| e.to_string())?;
    let (_, start_timeout, request_timeout, _) = inner.supervision_settings(cfg);
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let client = crate::supervisor::connect_as_user(
        &weak,
        cfg,
        authorizer.clone(),
        request_timeout,
        start_timeout,
    )
    .await
    .map_err(|e| {
        DownstreamError::Connect {
            server: server.to_owned(),
            why: e.to_string(),
        }
        .to_string()
    })?;
    let client = Arc::new(client);
    *held = Some(UserClient {
        client: client.clone(),
        authorizer,
        used: Instant::now(),
    });
    Ok(client)
}

/// Closes the least recently used connection that no call is setting up.
fn evict_one(slots: &mut HashMap<UserKey, Arc<tokio::sync::Mutex<Option<UserClient>>>>) {
    let oldest = slots
        .iter()
        .filter_map(|(k, slot)| {
            let held = slot.try_lock().ok()?;
            Some((k.clone(), held.as_ref().map(|u| u.used)))
        })
        .min_by_key(|(_, used)| *used)
        .map(|(k, _)| k);
    if let Some(key) = oldest
        && let Some(slot) = slots.remove(&key)
        && let Ok(mut held) = slot.try_lock()
        && let Some(uc) = held.take()
    {
        tokio::spawn(async move { uc.client.peer().close().await });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
