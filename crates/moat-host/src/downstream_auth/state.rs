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
use super::idle::{Verdict, judge};
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
    /// What a sweep does with this connection, unused since `self.used`.
    fn verdict(&self, idle: Duration) -> Verdict {
        judge(
            // Held by this slot and by any call it was handed to.
            Arc::strong_count(&self.client) > 1,
            self.client.peer().pending_requests(),
            self.client.peer().is_closed(),
            self.used.elapsed(),
            idle,
        )
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
                match uc.verdict(idle) {
                    Verdict::InUse => {
                        uc.used = Instant::now();
                        return true;
                    }
                    Verdict::Fresh => return true,
                    Verdict::Close => {}
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

    /// The open connection in a slot the call has locked, marked used: under the slot's
    /// lock, which a sweep must take (`try_lock`) to close it, so the two exclude each other.
    pub(super) fn reuse(held: &mut Option<UserClient>) -> Option<Arc<Client>> {
        let uc = held.as_mut().filter(|uc| !uc.client.peer().is_closed())?;
        uc.used = Instant::now();
        Some(uc.client.clone())
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

/// Closes the least recently used connection that no call has, is setting up or is about
/// to ask for. With none such, none is closed: the map outgrows `capacity` by at most the
/// calls in progress, rather than a call's connection closing under it (or a call filling a
/// slot the map no longer has, a connection nothing would ever close).
fn evict_one(slots: &mut HashMap<UserKey, Slot>) {
    let oldest = slots
        .iter()
        .filter(|(_, slot)| Arc::strong_count(slot) == 1)
        .filter_map(|(k, slot)| {
            let held = slot.try_lock().ok()?;
            if held
                .as_ref()
                .is_some_and(|u| u.verdict(Duration::MAX) == Verdict::InUse)
            {
                return None;
            }
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

#[cfg(test)]
pub(super) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use moat::transport::{Connection, Limits};
    use tokio::io::BufReader;

    use super::*;

    /// A client connected in-process to a server that answers pings.
    pub(crate) async fn connected_client() -> Client {
        let (a, b) = tokio::io::duplex(1 << 16);
        let (ar, aw) = tokio::io::split(a);
        let (br, bw) = tokio::io::split(b);
        let server = moat::Server::new("downstream", "1");
        let peer = server.start(Connection::from_lines(
            BufReader::new(ar),
            aw,
            Limits::default(),
        ));
        // The server lives as long as its connection.
        tokio::spawn(async move {
            peer.closed().await;
            drop(server);
        });
        moat::Client::builder()
            // A session (closed by `close`), where `ping` is a method.
            .protocol(moat::VersionPreference::Exact(
                moat::ProtocolVersion::V2025_11_25,
            ))
            .connect(Connection::from_lines(
                BufReader::new(br),
                bw,
                Limits::default(),
            ))
            .await
            .expect("connect")
    }

    #[test]
    fn the_sweeps_decision() {
        let (idle, long, short) = (
            Duration::from_secs(60),
            Duration::from_secs(61),
            Duration::from_secs(1),
        );
        // A call has it, or a request is on it: in use, however long unused or closed.
        assert_eq!(judge(true, 0, false, long, idle), Verdict::InUse);
        assert_eq!(judge(false, 1, false, long, idle), Verdict::InUse);
        assert_eq!(judge(true, 0, true, long, idle), Verdict::InUse);
        assert_eq!(judge(false, 0, false, short, idle), Verdict::Fresh);
        assert_eq!(judge(false, 0, false, idle, idle), Verdict::Close);
        assert_eq!(judge(false, 0, false, long, idle), Verdict::Close);
        // Closed by the server: let go at once.
        assert_eq!(judge(false, 0, true, short, idle), Verdict::Close);
    }

    /// Calls taking the user's connection as `client_for_call` does, while a sweep with no
    /// idle time at all runs without pause: no call is ever handed a connection that is
    /// closed under it, and none of them is left without a connection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_sweep_never_closes_a_connection_a_call_was_given() {
        let users = Arc::new(UserClients::default());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sweeper = {
            let (users, stop) = (users.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    users.sweep(Duration::ZERO);
                    tokio::task::yield_now().await;
                }
            })
        };
        let user = UserKey::new("i", "alice");
        let (reused, made) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut calls = Vec::new();
        for n in 0..6u64 {
            let (users, user) = (users.clone(), user.clone());
            let (reused, made) = (reused.clone(), made.clone());
            calls.push(tokio::spawn(async move {
                for i in 0..60u64 {
                    let slot = users.slot(&user, 8);
                    let client = {
                        let mut held = slot.lock().await;
                        match UserClients::reuse(&mut held) {
                            Some(c) => {
                                reused.fetch_add(1, Ordering::Relaxed);
                                c
                            }
                            None => {
                                made.fetch_add(1, Ordering::Relaxed);
                                let client = Arc::new(connected_client().await);
                                *held = Some(UserClient {
                                    client: client.clone(),
                                    authorizer: test_authorizer(&user),
                                    used: Instant::now(),
                                });
                                client
                            }
                        }
                    };
                    drop(slot);
                    // The call: a round trip on the connection it was given.
                    client
                        .ping()
                        .await
                        .expect("a call's connection was closed under it");
                    drop(client);
                    // Pauses of their own: at times no call has the connection, and the
                    // sweep closes it.
                    tokio::time::sleep(Duration::from_micros((i * 7 + n * 13) % 1500)).await;
                }
            }));
        }
        for call in calls {
            call.await.expect("a call failed");
        }
        stop.store(true, Ordering::Relaxed);
        sweeper.await.expect("sweeper");
        // Both paths were taken: connections were reused, and swept ones made anew.
        assert!(reused.load(Ordering::Relaxed) > 0);
        assert!(made.load(Ordering::Relaxed) > 1);
    }

    #[tokio::test]
    async fn eviction_spares_a_connection_in_use() {
        let users = UserClients::default();
        let (alice, bob) = (UserKey::new("i", "alice"), UserKey::new("i", "bob"));
        let client = Arc::new(connected_client().await);
        *users.slot(&alice, 1).lock().await = Some(UserClient {
            client: client.clone(),
            authorizer: test_authorizer(&alice),
            used: Instant::now() - Duration::from_secs(3600),
        });
        // Alice's call holds her connection: Bob's coming does not close it.
        let _bob = users.slot(&bob, 1);
        tokio::task::yield_now().await;
        assert!(!client.peer().is_closed());
        assert!(lock(&users.slots).contains_key(&alice));
        // Once her call is done, hers is the one to go (Bob's call is about to fill his).
        drop(client);
        let _carol = users.slot(&UserKey::new("i", "carol"), 2);
        assert!(!lock(&users.slots).contains_key(&alice));
        assert!(lock(&users.slots).contains_key(&bob));
    }

    fn test_authorizer(user: &UserKey) -> Arc<UserAuthorizer> {
        let exchanger = Arc::new(Exchanger::new("api", test_exchange_config()));
        Arc::new(UserAuthorizer::new(
            user.clone(),
            "http://127.0.0.1:1/mcp",
            exchanger,
            Arc::new(TokenCache::new(4)),
            moat_transport::AccessToken::new("subject-token"),
        ))
    }

    fn test_exchange_config() -> ExchangeAuth {
        ExchangeAuth {
            issuer: None,
            token_endpoint: Some("http://127.0.0.1:1/token".into()),
            client_id: "moat-gateway".into(),
            client_secret: crate::config::SecretValue::new("secret"),
            audience: None,
            resource: "http://127.0.0.1:1/mcp".into(),
            scope: None,
            idle_timeout: Duration::from_secs(60),
        }
    }
}
