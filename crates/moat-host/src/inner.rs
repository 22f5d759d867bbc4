//! The gateway's shared state ([`Inner`]): the configuration in force, the stores, the
//! catalog, the supervised servers and what clients watch, behind methods. The parts that
//! act on it (calls, publishing, search, supervision, the [`Host`](crate::Host)) sit above
//! it; nothing here calls out to them.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use moat::{Client, Server};
use moat_protocol::types::{LoggingLevel, LoggingMessageNotificationParams, Tool};
use serde_json::Value;
use tokio::sync::watch;

use crate::audit::AuditLog;
use crate::catalog::{Catalog, Held, ToolEntry};
use crate::config::{Config, ServerConfig};
use crate::consent::Decisions;
use crate::options::HostOptions;
use crate::pins::PinStore;
use crate::policy::Policy;
use crate::search_state::SearchState;
use crate::sessions::Sessions;
use crate::state;
use crate::store::Mirror;
use crate::watched::Watched;

/// The live connection of a server, shared with calls.
pub(crate) type Live = watch::Receiver<Option<Arc<Client>>>;

/// A map of names to client definitions, for lookups.
pub(crate) type Definitions = HashMap<String, Arc<Tool>>;

/// The configuration in force and its compiled policy.
pub(crate) struct Settings {
    pub(crate) config: Config,
    pub(crate) policy: Policy,
    /// Built once: it compiles the configured key globs.
    pub(crate) redactor: crate::audit::Redactor,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A server whose launch waits for approval: its configuration, and why, for people.
struct HeldServer {
    cfg: ServerConfig,
    reason: String,
}

/// The log message that tells a client why server `name` is held and what to run.
pub(crate) fn held_notice(name: &str, reason: &str) -> LoggingMessageNotificationParams {
    LoggingMessageNotificationParams {
        level: LoggingLevel::Warning,
        logger: Some("moat".into()),
        data: Value::String(format!(
            "moat: server {name} is held, not started: {reason}"
        )),
        meta: None,
    }
}

struct Running {
    cfg: ServerConfig,
    live: Live,
    stop: watch::Sender<bool>,
    /// Which supervision task this is: a server restarted by a reload gets a new one, and
    /// only the current one may withdraw its catalog.
    generation: u64,
}

/// Servers whose start is under way, for the requests that wait for them.
struct Startup {
    /// How many starts (a server's first attempt, and the start-up decisions that follow
    /// the first servers) have not ended yet.
    pending: watch::Sender<usize>,
    /// Waiting ends here, whatever is still starting.
    deadline: Mutex<Instant>,
}

/// The state the host opened: pins, decisions and the audit trail, and the shared store
/// the first two are a copy of.
pub(crate) struct Stores {
    pub(crate) pins: Arc<PinStore>,
    pub(crate) decisions: Arc<Decisions>,
    pub(crate) audit: Option<AuditLog>,
    pub(crate) shared: Option<Arc<Mirror>>,
}

/// Everything the gateway's parts share. Its fields are its own: the parts that call,
/// publish, search and supervise reach them through the methods below.
pub(crate) struct Inner {
    server: Server,
    settings: RwLock<Arc<Settings>>,
    pins: Arc<PinStore>,
    decisions: Arc<Decisions>,
    audit: Option<AuditLog>,
    /// The shared store the pins and decisions are a copy of (`[store] url`), if any.
    shared: Option<Arc<Mirror>>,
    catalog: Mutex<Catalog>,
    running: Mutex<HashMap<String, Running>>,
    generations: AtomicU64,
    startup: Startup,
    /// Why each server that is not up is not (its last error, its own last stderr lines).
    down: Mutex<HashMap<String, String>>,
    /// Servers not started because their launch changed (`launch_pins`), until approved.
    held_servers: Mutex<HashMap<String, HeldServer>>,
    /// The resources clients watch.
    watched: Watched,
    sessions: Sessions,
    search: SearchState,
    options: HostOptions,
    /// Prometheus metrics, when served (`[telemetry] metrics`).
    metrics: std::sync::OnceLock<crate::telemetry::metrics::Metrics>,
    /// The web console's consent channel, when it is served.
    console: std::sync::OnceLock<Arc<dyn crate::consent::Channel>>,
    /// How often each server went away while up and was restarted (for the console).
    restarts: Mutex<HashMap<String, u64>>,
    /// Per-user credentials and connections to downstream servers.
    downstream: crate::downstream_auth::state::Downstream,
    /// URL elicitations passed on to clients, until their servers complete them.
    url_elicitations: crate::url_elicitations::UrlElicitations,
}

impl Inner {
    pub(crate) fn new(
        server: Server,
        settings: Settings,
        stores: Stores,
        options: HostOptions,
    ) -> Inner {
        let Stores {
            pins,
            decisions,
            audit,
            shared,
        } = stores;
        let (pending, _) = watch::channel(0);
        Inner {
            server,
            settings: RwLock::new(Arc::new(settings)),
            pins,
            decisions,
            audit,
            shared,
            catalog: Mutex::new(Catalog::default()),
            running: Mutex::new(HashMap::new()),
            generations: AtomicU64::new(0),
            startup: Startup {
                pending,
                deadline: Mutex::new(Instant::now()),
            },
            down: Mutex::new(HashMap::new()),
            held_servers: Mutex::new(HashMap::new()),
            watched: Watched::default(),
            sessions: Sessions::default(),
            search: SearchState::default(),
            options,
            metrics: std::sync::OnceLock::new(),
            console: std::sync::OnceLock::new(),
            restarts: Mutex::new(HashMap::new()),
            downstream: Default::default(),
            url_elicitations: Default::default(),
        }
    }

    /// The web console's consent channel, when it is served.
    pub(crate) fn console(&self) -> Option<&dyn crate::consent::Channel> {
        self.console.get().map(|c| &**c)
    }

    /// Makes `channel` the console's consent channel (the first one set stays).
    pub(crate) fn set_console(&self, channel: Arc<dyn crate::consent::Channel>) {
        let _ = self.console.set(channel);
    }

    /// Notes that `server` went away while up and is being restarted.
    pub(crate) fn note_restart(&self, server: &str) {
        *lock(&self.restarts).entry(server.to_owned()).or_default() += 1;
    }

    /// How often `server` was restarted after going away.
    pub(crate) fn restarts(&self, server: &str) -> u64 {
        lock(&self.restarts).get(server).copied().unwrap_or(0)
    }

    /// Per-user credentials and connections to downstream servers.
    pub(crate) fn downstream(&self) -> &crate::downstream_auth::state::Downstream {
        &self.downstream
    }

    /// The URL elicitations passed on to clients and not yet completed.
    pub(crate) fn url_elicitations(&self) -> &crate::url_elicitations::UrlElicitations {
        &self.url_elicitations
    }

    /// The upstream server the clients talk to.
    pub(crate) fn server(&self) -> &Server {
        &self.server
    }

    pub(crate) fn pins(&self) -> &PinStore {
        &self.pins
    }

    /// Standing consent decisions ("always allow").
    pub(crate) fn decisions(&self) -> &Decisions {
        &self.decisions
    }

    /// The shared store, when the state lives in PostgreSQL.
    pub(crate) fn shared(&self) -> Option<&Arc<Mirror>> {
        self.shared.as_ref()
    }

    /// The audit trail, unless turned off.
    pub(crate) fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_ref()
    }

    /// The catalog, locked.
    pub(crate) fn catalog(&self) -> MutexGuard<'_, Catalog> {
        lock(&self.catalog)
    }

    /// The resources clients watch.
    pub(crate) fn watched(&self) -> &Watched {
        &self.watched
    }

    /// Per-session consent and taint.
    pub(crate) fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Tool search's state.
    pub(crate) fn search(&self) -> &SearchState {
        &self.search
    }

    /// The metrics, when they are served.
    pub(crate) fn metrics(&self) -> Option<&crate::telemetry::metrics::Metrics> {
        self.metrics.get()
    }

    /// Starts counting (once; later calls change nothing).
    pub(crate) fn enable_metrics(&self) -> &crate::telemetry::metrics::Metrics {
        self.metrics
            .get_or_init(crate::telemetry::metrics::Metrics::new)
    }

    pub(crate) fn options(&self) -> &HostOptions {
        &self.options
    }

    /// Puts a new configuration in force.
    pub(crate) fn replace_settings(&self, settings: Settings) {
        *self.settings.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(settings);
    }

    /// Records a new supervision task for `cfg` (replacing one of that name, whose stop
    /// sender is dropped, which ends it) and counts its first attempt as a start under
    /// way; returns the task's generation.
    pub(crate) fn track(&self, cfg: ServerConfig, live: Live, stop: watch::Sender<bool>) -> u64 {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        self.starting();
        lock(&self.running).insert(
            cfg.name.clone(),
            Running {
                cfg,
                live,
                stop,
                generation,
            },
        );
        generation
    }

    /// Stops the supervision task of `name`, if there is one.
    pub(crate) fn untrack(&self, name: &str) {
        if let Some(running) = lock(&self.running).remove(name) {
            let _ = running.stop.send(true);
        }
    }

    /// Forgets why `name` was held or down (it left the configuration).
    pub(crate) fn forget(&self, name: &str) {
        lock(&self.held_servers).remove(name);
        lock(&self.down).remove(name);
    }

    /// Holds `cfg` back for `reason`; true when it was held for that same reason already.
    pub(crate) fn hold(&self, cfg: ServerConfig, reason: &str) -> bool {
        lock(&self.held_servers)
            .insert(
                cfg.name.clone(),
                HeldServer {
                    cfg,
                    reason: reason.to_owned(),
                },
            )
            .is_some_and(|h| h.reason == reason)
    }

    /// Lets `name` start again; true when it was held.
    pub(crate) fn unhold(&self, name: &str) -> bool {
        lock(&self.held_servers).remove(name).is_some()
    }

    /// The configurations of the servers held back.
    pub(crate) fn held_configs(&self) -> Vec<ServerConfig> {
        lock(&self.held_servers)
            .values()
            .map(|h| h.cfg.clone())
            .collect()
    }

    /// The servers held back, with why, in name order.
    pub(crate) fn held_reasons(&self) -> Vec<(String, String)> {
        let mut held: Vec<(String, String)> = lock(&self.held_servers)
            .iter()
            .map(|(name, h)| (name.clone(), h.reason.clone()))
            .collect();
        held.sort();
        held
    }

    /// The names of the servers under supervision.
    pub(crate) fn running_names(&self) -> Vec<String> {
        lock(&self.running).keys().cloned().collect()
    }

    /// The supervised servers that are not up, in name order.
    pub(crate) fn servers_down(&self) -> Vec<String> {
        let mut down: Vec<String> = lock(&self.running)
            .iter()
            .filter(|(_, r)| r.live.borrow().is_none())
            .map(|(name, _)| name.clone())
            .collect();
        down.sort();
        down
    }

    /// Why `server` is not up, when known.
    pub(crate) fn down_reason(&self, server: &str) -> Option<String> {
        lock(&self.down).get(server).cloned()
    }

    /// The server that owns the resource at `uri`.
    pub(crate) fn resource_owner(&self, uri: &str) -> Option<String> {
        self.catalog().resource_owner(uri)
    }

    /// The URIs of `server` some client watches, in order.
    pub(crate) fn watched_uris(&self, server: &str) -> BTreeSet<String> {
        self.watched
            .uris()
            .into_iter()
            .filter(|uri| self.resource_owner(uri).as_deref() == Some(server))
            .collect()
    }

    pub(crate) fn settings(&self) -> Arc<Settings> {
        self.settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The helper binary, the start timeout, the request timeout and the health interval
    /// for a server.
    pub(crate) fn supervision_settings(
        &self,
        cfg: &ServerConfig,
    ) -> (Option<PathBuf>, Duration, Duration, Duration) {
        let health = self
            .settings()
            .config
            .gateway
            .health_interval
            .unwrap_or(self.options.health_interval);
        (
            self.options.sandbox_helper.clone(),
            self.options.start_timeout,
            cfg.call_timeout.unwrap_or(self.options.call_timeout),
            health,
        )
    }

    /// Why `cfg` must not start now, if it must not.
    pub(crate) fn launch_hold(&self, cfg: &ServerConfig, trust_new: bool) -> Option<String> {
        use crate::launch_pins::{LaunchStatus, ServerPins};
        let settings = self.settings();
        let mode = settings.config.pins.servers;
        if mode == ServerPins::Off {
            return None;
        }
        let path = settings.config.path.as_deref();
        match self.pins.check_launch(path, cfg, mode, trust_new) {
            Ok(LaunchStatus::Held { pin }) => Some(pin.held_reason()),
            Ok(status) => {
                if status == LaunchStatus::Repinned {
                    tracing::info!(server = %cfg.name, "launch changed by the configuration's own settings: pinned anew");
                }
                None
            }
            Err(e) if mode == ServerPins::All || cfg.imported_from.is_some() => Some(format!(
                "its launch pin could not be checked ({e}); not started, to be safe"
            )),
            Err(e) => {
                tracing::warn!(server = %cfg.name, error = %e, "launch pin not checked");
                None
            }
        }
    }

    /// What a client that arrives now is told about the servers held back.
    pub(crate) fn held_notices(&self) -> Vec<LoggingMessageNotificationParams> {
        let held = lock(&self.held_servers);
        let mut names: Vec<&String> = held.keys().collect();
        names.sort();
        names
            .into_iter()
            .map(|name| held_notice(name, &held[name].reason))
            .collect()
    }

    /// Whether `generation` is the task supervising `server` now.
    pub(crate) fn is_current(&self, server: &str, generation: u64) -> bool {
        lock(&self.running)
            .get(server)
            .is_some_and(|r| r.generation == generation)
    }

    /// A start begins: requests that read the catalog wait for it (bounded).
    pub(crate) fn starting(&self) {
        let bound = self.startup_timeout();
        {
            let mut deadline = lock(&self.startup.deadline);
            *deadline = (*deadline).max(Instant::now() + bound);
        }
        self.startup.pending.send_modify(|n| *n += 1);
    }

    /// A start ended (up, or failed).
    pub(crate) fn started(&self) {
        self.startup
            .pending
            .send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Waits until at most `left` starts are under way, or the start-up deadline.
    pub(crate) async fn wait_for_starts(&self, left: usize) {
        let mut pending = self.startup.pending.subscribe();
        let deadline = *lock(&self.startup.deadline);
        let _ = tokio::time::timeout_at(deadline.into(), pending.wait_for(|n| *n <= left)).await;
    }

    /// What a request that reads the catalog waits for first: nothing, unless servers are
    /// starting.
    pub(crate) fn ready_wait(self: &Arc<Self>) -> Option<moat::handler::BoxFuture<()>> {
        if *self.startup.pending.borrow() == 0 {
            return None;
        }
        let weak = Arc::downgrade(self);
        Some(Box::pin(async move {
            if let Some(inner) = weak.upgrade() {
                inner.wait_for_starts(0).await;
            }
        }))
    }

    /// How long lists and calls wait for servers that are starting.
    pub(crate) fn startup_timeout(&self) -> Duration {
        self.settings()
            .config
            .gateway
            .startup_timeout
            .unwrap_or(self.options.start_timeout)
    }

    /// Notes why `server` is not up (`None`: it is up).
    pub(crate) fn set_down(&self, server: &str, why: Option<String>) {
        let mut down = lock(&self.down);
        match why {
            Some(why) => {
                down.insert(server.to_owned(), why);
            }
            None => {
                down.remove(server);
            }
        }
    }

    /// The live connection to `server`, waiting (bounded by the start timeout) while it
    /// starts or restarts; else why there is none, for the client.
    pub(crate) async fn wait_live(&self, server: &str) -> Result<Arc<Client>, String> {
        if lock(&self.held_servers).contains_key(server) {
            return Err(self.down_message(server));
        }
        let live = lock(&self.running).get(server).map(|r| r.live.clone());
        let Some(mut live) = live else {
            return Err(format!(
                "server {server} is not running (it is not in the configuration any more)"
            ));
        };
        if let Some(client) = live.borrow().clone() {
            return Ok(client);
        }
        let within = self.startup_timeout();
        if let Ok(Ok(client)) = tokio::time::timeout(within, live.wait_for(Option::is_some)).await
            && let Some(client) = client.clone()
        {
            return Ok(client);
        }
        Err(self.down_message(server))
    }

    /// The servers that are down and whose tools could be called `name`: the one whose
    /// prefix it starts with, else (with servers that show names as they are) every one.
    pub(crate) fn down_servers_for(&self, name: &str) -> Vec<String> {
        let settings = self.settings();
        let down = lock(&self.down);
        let mut out: Vec<String> = settings
            .config
            .servers
            .iter()
            .filter(|s| down.contains_key(&s.name))
            .filter(|s| name.starts_with(&s.exposed_prefix()))
            .map(|s| s.name.clone())
            .collect();
        // A prefixed match names the server; an empty prefix matches all, so keep the
        // most specific ones.
        if out.len() > 1 {
            let longest = out
                .iter()
                .filter_map(|n| settings.config.server(n))
                .map(|s| s.exposed_prefix().len())
                .max()
                .unwrap_or(0);
            out.retain(|n| {
                settings
                    .config
                    .server(n)
                    .is_some_and(|s| s.exposed_prefix().len() == longest || longest == 0)
            });
        }
        out
    }

    /// "server X is not running: why", for a client.
    pub(crate) fn down_message(&self, server: &str) -> String {
        if let Some(held) = lock(&self.held_servers).get(server) {
            return format!("server {server} is not running: {}", held.reason);
        }
        match lock(&self.down).get(server) {
            Some(why) => format!(
                "server {server} is not running: {why}\nmoat keeps trying to start it; \
                 `moat gateway --check` shows the same."
            ),
            None => {
                format!("server {server} is not running; moat is starting it. Try again shortly.")
            }
        }
    }

    pub(crate) fn live_servers(&self) -> usize {
        lock(&self.running)
            .values()
            .filter(|r| r.live.borrow().is_some())
            .count()
    }

    /// Every server that is up, with its connection.
    pub(crate) fn live_clients(&self) -> Vec<(String, Arc<Client>)> {
        lock(&self.running)
            .iter()
            .filter_map(|(name, r)| r.live.borrow().clone().map(|c| (name.clone(), c)))
            .collect()
    }

    /// The live connection to `server`, if it is up.
    pub(crate) fn live_client(&self, server: &str) -> Option<Arc<Client>> {
        lock(&self.running)
            .get(server)
            .and_then(|r| r.live.borrow().clone())
    }

    /// Every tool the client may see, as it would see it, in name order.
    pub(crate) fn searchable_definitions(&self) -> Vec<Value> {
        let catalog = lock(&self.catalog);
        let mut names: Vec<&String> = catalog.searchable.keys().collect();
        names.sort();
        names
            .into_iter()
            .filter_map(|n| catalog.searchable.get(n))
            .filter_map(|(_, d)| serde_json::to_value(&**d).ok())
            .collect()
    }

    /// [`Inner::searchable_definitions`] by name.
    pub(crate) fn searchable_map(&self) -> Definitions {
        lock(&self.catalog)
            .searchable
            .iter()
            .map(|(n, (_, d))| (n.clone(), d.clone()))
            .collect()
    }

    /// Where tool search caches embeddings: the state directory (none when ephemeral).
    pub(crate) fn search_cache_dir(&self) -> Option<PathBuf> {
        if self.options.ephemeral {
            return None;
        }
        let settings = self.settings();
        state::state_dir(settings.config.state_dir.as_deref())
            .ok()
            .map(|d| d.join("search-cache"))
    }

    /// Where per-user downstream tokens are kept (`downstream_auth`): the state directory,
    /// or a directory of this process's own when ephemeral.
    pub(crate) fn downstream_tokens_dir(&self) -> PathBuf {
        let settings = self.settings();
        match state::state_dir(settings.config.state_dir.as_deref()) {
            Ok(dir) if !self.options.ephemeral => dir.join("downstream-tokens"),
            _ => std::env::temp_dir().join(format!("moat-downstream-{}", std::process::id())),
        }
    }

    /// The per-server configuration, for trust labels.
    pub(crate) fn server_config(&self, server: &str) -> Option<ServerConfig> {
        lock(&self.running).get(server).map(|r| r.cfg.clone())
    }

    /// The deadline of a call to `server`: its own `call_timeout`, else the gateway's.
    pub(crate) fn call_timeout(&self, server: &str) -> Duration {
        lock(&self.running)
            .get(server)
            .and_then(|r| r.cfg.call_timeout)
            .unwrap_or(self.options.call_timeout)
    }

    /// A callable tool by exposed name, or why there is none.
    /// Whether `tools/list` shows `exposed` to the caller of `ctx`: the policy's listing
    /// predicate for that caller (the same as their calls').
    pub(crate) fn listed_to(&self, ctx: &moat::RequestContext, exposed: &str) -> bool {
        let settings = self.settings();
        if !settings.policy.has_identity_rules() {
            return true;
        }
        let Ok(entry) = self.lookup(exposed) else {
            // Not one of the servers' tools (the gateway's own, e.g. tool search).
            return true;
        };
        let caller = crate::caller::Caller::of(ctx, settings.config.auth.as_ref());
        settings.policy.visible_to(
            &crate::policy::ToolRef {
                server: &entry.server,
                tool: &entry.tool.name,
                annotations: entry.tool.annotations.as_ref(),
            },
            caller.who.as_ref(),
        )
    }

    pub(crate) fn lookup(&self, exposed: &str) -> Result<Arc<ToolEntry>, Option<Held>> {
        // Tools policy keeps from the list are here too: their calls meet the same rule.
        let catalog = lock(&self.catalog);
        match catalog.tools.get(exposed) {
            Some(entry) => Ok(entry.clone()),
            None => Err(catalog.held.get(exposed).cloned()),
        }
    }
}
