//! What the gateway keeps of per-user downstream credentials, per server: the exchanges,
//! tokens and user connections of `exchange` servers, the brokers of `oauth` servers and
//! their callback listeners. Plain state: making connections is the caller's.
//!
//! A user's own connection is closed after `idle_timeout` unused (by a sweeper task per
//! server, which ends with the server's state), and the least recently used one when a
//! server has too many users. A connection some call holds is in use, however long ago
//! it was handed out.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use moat::Client;

use super::authorizer::UserAuthorizer;
use super::broker;
use super::cache::TokenCache;
use super::exchange::Exchanger;
use super::user::UserKey;
use super::vault;
use crate::config::{ExchangeAuth, OAuthAuth};

/// Users whose exchanged tokens are kept, per server.
const TOKENS_PER_SERVER: usize = 4096;

/// The per-user state of every server whose credentials are per user.
#[derive(Default)]
pub(crate) struct Downstream {
    servers: Mutex<HashMap<String, Arc<PerServer>>>,
    brokers: tokio::sync::Mutex<HashMap<String, Arc<broker::Broker>>>,
    /// Callback listeners by address, shared by the servers that name the same one.
    callbacks: tokio::sync::Mutex<HashMap<String, Arc<broker::Callbacks>>>,
    /// The shared store's token table, once a vault needs it.
    shared_tokens: std::sync::OnceLock<crate::store::SharedTokens>,
}

/// One server's exchanges, tokens and user connections.
pub(super) struct PerServer {
    config: ExchangeAuth,
    url: String,
    pub(super) exchanger: Arc<Exchanger>,
    pub(super) cache: Arc<TokenCache>,
    pub(super) users: UserClients,
}

/// The user connections of one server.
#[derive(Default)]
pub(super) struct UserClients {
    slots: Mutex<HashMap<UserKey, Slot>>,
}

/// One user's connection, locked while it is being made.
pub(super) type Slot = Arc<tokio::sync::Mutex<Option<UserClient>>>;

pub(super) struct UserClient {
    pub(super) client: Arc<Client>,
    pub(super) authorizer: Arc<UserAuthorizer>,
    pub(super) used: Instant,
}

impl UserClient {
    /// Whether a call holds the connection (or has a request on it) now.
    fn in_use(&self) -> bool {
        Arc::strong_count(&self.client) > 1 || self.client.peer().pending_requests() > 0
    }
}

/// How often a sweeper looks for connections idle for `idle`: often enough that none
/// outlives it by much more than a quarter.
pub(super) fn sweep_every(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30))
}

/// Calls `sweep` on what `weak` points to every [`sweep_every`]`(idle)`, until it is gone.
pub(super) fn spawn_sweeper<T: Send + Sync + 'static>(
    weak: Weak<T>,
    idle: Duration,
    sweep: fn(&T, Duration),
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(sweep_every(idle));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(this) = weak.upgrade() else { return };
            sweep(&this, idle);
        }
    });
}

impl UserClients {
    /// Closes the connections unused for `idle` (or already closed), and forgets the slots
    /// left empty that no call is about to fill.
    pub(super) fn sweep(&self, idle: Duration) {
        let mut slots = lock(&self.slots);
        slots.retain(|_, slot| {
            // Locked: a call is making or reusing this connection.
            let Ok(mut held) = slot.try_lock() else {
                return true;
            };
            if let Some(uc) = held.as_mut() {
                if uc.in_use() {
                    uc.used = Instant::now();
                    return true;
                }
                if uc.used.elapsed() < idle && !uc.client.peer().is_closed() {
                    return true;
                }
                if let Some(uc) = held.take() {
                    tracing::debug!("closing a user's idle downstream connection");
                    tokio::spawn(async move { uc.client.peer().close().await });
                }
            }
            drop(held);
            // Only the map holds it: no call can be about to use it.
            Arc::strong_count(slot) > 1
        });
    }

    /// `user`'s slot, made room for (at most `capacity` users) if new.
    pub(super) fn slot(&self, user: &UserKey, capacity: usize) -> Slot {
        let mut slots = lock(&self.slots);
        if !slots.contains_key(user) && slots.len() >= capacity {
            evict_one(&mut slots);
        }
        slots.entry(user.clone()).or_default().clone()
    }
}

impl Downstream {
    /// The broker of the `oauth` server `name` (made on first use, anew when configured
    /// anew): its vault opened, its callback address listened on.
    /// The broker of the `oauth` server `name` (made on first use, anew when configured
    /// anew): its vault opened (in `dir`), its callback address listened on.
    pub(super) async fn broker(
        &self,
        dir: &Path,
        store: Option<&crate::store::Postgres>,
        name: &str,
        config: &OAuthAuth,
    ) -> Result<Arc<broker::Broker>, String> {
        let mut brokers = self.brokers.lock().await;
        if let Some(b) = brokers.get(name)
            && b.config() == config
        {
            return Ok(b.clone());
        }
        let key_file = config.key_file.clone().unwrap_or_else(|| dir.join("key"));
        let key = config.key.as_ref().map(|k| k.expose());
        let vault = match store {
            // Every replica must open what the others sealed: a key of the state
            // directory's own would be this replica's alone.
            Some(_) if config.key.is_none() && config.key_file.is_none() => {
                return Err(
                    "its users' tokens are kept in the shared store ([store] url), so every \
                     gateway must seal them with the same key: set key_env or key_file in its \
                     [servers.NAME.auth] (the same on every replica)"
                        .into(),
                );
            }
            Some(pg) => {
                let tokens = self
                    .shared_tokens
                    .get_or_init(|| crate::store::SharedTokens::start(pg.clone()))
                    .clone();
                vault::Vault::open_shared(tokens, key, &key_file)
            }
            None => vault::Vault::open(dir.join("tokens"), key, &key_file),
        }
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
        spawn_sweeper(Arc::downgrade(&b), config.idle_timeout, |b, idle| {
            b.sweep(idle)
        });
        brokers.insert(name.to_owned(), b.clone());
        Ok(b)
    }

    /// The state of the `exchange` server `name` (anew when configured anew).
    pub(super) fn server(&self, name: &str, url: &str, config: &ExchangeAuth) -> Arc<PerServer> {
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
        spawn_sweeper(Arc::downgrade(&s), config.idle_timeout, |s, idle| {
            s.users.sweep(idle)
        });
        servers.insert(name.to_owned(), s.clone());
        s
    }
}

/// Closes the least recently used connection that no call is setting up.
fn evict_one(slots: &mut HashMap<UserKey, Slot>) {
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
