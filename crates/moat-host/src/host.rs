//! The [`Host`]: one MCP server towards the client, made of every configured server.
//!
//! It owns the upstream [`moat::Server`] (so every revision, stdio and Streamable HTTP come
//! from the SDK), the supervision tasks, and the catalog: which exposed name belongs to
//! which server, which tools are held back (changed since approval, or poisoned), and the
//! registrations in the upstream server. Before a server starts, its launch pin is checked
//! ([`crate::launch_pins`]): a held server is not started until its launch is approved. Registration follows the policy's listing
//! predicate, and the call path ([`crate::call`]) asks the same policy again with the
//! arguments: a tool hidden from `tools/list` is refused on `tools/call` by the same rule.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};

use moat::{Client, Server, ServerNotification};
use moat_protocol::types::{
    CompleteRequestParams, CompletionReference, LoggingLevel, LoggingMessageNotificationParams,
    Tool,
};
use serde_json::Value;
use tokio::sync::watch;

use crate::HostError;
use crate::audit::AuditLog;
use crate::catalog::Catalog;
use crate::config::{Config, ServerConfig};
use crate::consent::Decisions;
use crate::pins::PinStore;
use crate::policy::{Labels, Policy, Unmatched};
use crate::sessions::Sessions;
use crate::state;
use crate::supervisor::{self, Live};

/// How the host runs, beyond what the configuration says.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostOptions {
    /// The binary that confines sandboxed servers (`BIN sandbox --stdio --profile JSON --
    /// CMD…`): the `moat` binary. Without it, a server with a sandbox profile cannot start.
    pub sandbox_helper: Option<PathBuf>,
    /// Keep pins, decisions and the audit trail in memory only (tests, `--ephemeral`).
    pub ephemeral: bool,
    /// How long a server has to start and answer `initialize`; also how long the lists
    /// and calls of a client wait for servers that are starting (unless the configuration's
    /// `[gateway] startup_timeout` says otherwise).
    pub start_timeout: Duration,
    /// Deadline of a call to a server, unless its configuration says otherwise.
    pub call_timeout: Duration,
    /// Health checks: a `ping` to every server this often (unless the configuration's
    /// `[gateway] health_interval` says otherwise).
    pub health_interval: Duration,
    /// How often the pin store is looked at for approvals made by `moat pins approve`.
    pub pins_poll: Duration,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            sandbox_helper: None,
            ephemeral: false,
            start_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(300),
            health_interval: Duration::from_secs(30),
            pins_poll: Duration::from_millis(500),
        }
    }
}

impl HostOptions {
    /// Confine sandboxed servers with `helper` (the `moat` binary).
    pub fn sandbox_helper(mut self, helper: impl Into<PathBuf>) -> Self {
        self.sandbox_helper = Some(helper.into());
        self
    }

    /// Keep all state in memory.
    pub fn ephemeral(mut self, ephemeral: bool) -> Self {
        self.ephemeral = ephemeral;
        self
    }
}

/// The configuration in force and its compiled policy.
pub(crate) struct Settings {
    pub(crate) config: Config,
    pub(crate) policy: Policy,
    /// Built once: it compiles the configured key globs.
    pub(crate) redactor: crate::audit::Redactor,
}

/// A tool the client may call (whether or not policy lists it).
pub(crate) struct ToolEntry {
    pub(crate) server: String,
    /// The definition as the server gave it (its own name), shared with the server's
    /// last list in the catalog.
    pub(crate) tool: Arc<Tool>,
    /// The compiled `inputSchema`, or why it would not compile. Built on the first call:
    /// a compiled schema costs tens of kilobytes, and most tools of a large catalog are
    /// never called.
    pub(crate) validator: OnceLock<Result<jsonschema::Validator, String>>,
    pub(crate) labels: Labels,
}

impl ToolEntry {
    pub(crate) fn validator(&self) -> Result<&jsonschema::Validator, &str> {
        self.validator
            .get_or_init(|| {
                jsonschema::validator_for(&self.tool.input_schema).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(String::as_str)
    }
}

/// A tool kept from the client, and why.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub(crate) server: String,
    /// For the audit trail: "pin changed", "scan: hidden instructions", …
    pub(crate) rule: String,
    /// For the client: what happened and what to do.
    pub(crate) reason: String,
}

/// A server whose launch waits for approval: its configuration, and why, for people.
struct HeldServer {
    cfg: ServerConfig,
    reason: String,
}

/// The log message that tells a client why server `name` is held and what to run.
fn held_notice(name: &str, reason: &str) -> LoggingMessageNotificationParams {
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

pub(crate) struct Inner {
    pub(crate) server: Server,
    settings: RwLock<Arc<Settings>>,
    pub(crate) pins: PinStore,
    pub(crate) decisions: Decisions,
    pub(crate) audit: Option<AuditLog>,
    pub(crate) catalog: Mutex<Catalog>,
    running: Mutex<HashMap<String, Running>>,
    generations: AtomicU64,
    startup: Startup,
    /// Why each server that is not up is not (its last error, its own last stderr lines).
    down: Mutex<HashMap<String, String>>,
    /// Servers not started because their launch changed (`launch_pins`), until approved.
    held_servers: Mutex<HashMap<String, HeldServer>>,
    /// The resources clients watch.
    pub(crate) watched: crate::subscriptions::Watched,
    pub(crate) sessions: Sessions,
    pub(crate) search: crate::search::SearchState,
    pub(crate) options: HostOptions,
}

/// The supervising gateway. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").finish_non_exhaustive()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Host {
    /// Starts every enabled server of `config` and returns at once: a client can connect
    /// while they start. Its lists and calls wait for the servers being started (bounded
    /// by the start timeout), so its first `tools/list` already has their tools; a server
    /// that fails to start is retried in the background. [`Host::ready`] waits the same way.
    pub async fn start(config: Config, options: HostOptions) -> Result<Host, HostError> {
        let policy = Policy::for_config(&config)?;
        warn_unmatched(policy.unmatched_servers());
        let redactor = crate::audit::Redactor::new(&config.audit.redact);
        let (pins, decisions, audit) = open_state(&config, &options)?;
        let server = Server::new("moat", env!("CARGO_PKG_VERSION")).instructions(
            "moat gateway: the tools of several MCP servers, each named after its server \
             (server__tool) unless configured otherwise, each call checked against the user's \
             policy.",
        );
        let (pending, _) = watch::channel(0);
        let inner = Arc::new(Inner {
            server,
            settings: RwLock::new(Arc::new(Settings {
                config,
                policy,
                redactor,
            })),
            pins,
            decisions,
            audit,
            catalog: Mutex::new(Catalog::default()),
            running: Mutex::new(HashMap::new()),
            generations: AtomicU64::new(0),
            startup: Startup {
                pending,
                deadline: Mutex::new(Instant::now()),
            },
            down: Mutex::new(HashMap::new()),
            held_servers: Mutex::new(HashMap::new()),
            watched: Default::default(),
            sessions: Sessions::default(),
            search: crate::search::SearchState::default(),
            options,
        });
        install_upstream_hooks(&inner);
        let host = Host { inner };
        // The start-up decisions (tool search's `auto`) need the first catalog: they are a
        // start of their own, that ends after the servers' first attempts.
        host.inner.starting();
        let servers: Vec<ServerConfig> = host.inner.settings().config.servers.clone();
        for cfg in servers.into_iter().filter(|s| s.enabled) {
            // The gateway's start: a launch never seen before is trusted on first use.
            host.inner.launch(cfg, true);
        }
        let weak = Arc::downgrade(&host.inner);
        tokio::spawn(async move {
            let Some(inner) = weak.upgrade() else { return };
            inner.wait_for_starts(1).await;
            crate::search::apply(&inner).await;
            inner.started();
            warn_unmatched(unmatched_tools(&inner));
            spawn_pins_poll(Arc::downgrade(&inner));
        });
        Ok(host)
    }

    /// Waits until every server being started has come up or failed its first attempt,
    /// and the start-up decisions are made (bounded by the start timeout).
    pub async fn ready(&self) {
        self.inner.wait_for_starts(0).await;
    }

    /// Names that two servers offer (or one server twice), and which one keeps each: the
    /// first in configuration order.
    pub fn collisions(&self) -> Vec<String> {
        lock(&self.inner.catalog)
            .collisions
            .iter()
            .cloned()
            .collect()
    }

    /// Why each server that is not up right now is not: its last error, with the last
    /// lines it wrote on stderr when it has any.
    pub fn down_reasons(&self) -> Vec<(String, String)> {
        let down = self.servers_down();
        let reasons = lock(&self.inner.down);
        down.into_iter()
            .map(|name| {
                let why = reasons
                    .get(&name)
                    .cloned()
                    .unwrap_or_else(|| "starting".to_owned());
                (name, why)
            })
            .collect()
    }

    /// The MCP server the client talks to: serve it over stdio or HTTP.
    pub fn server(&self) -> &Server {
        &self.inner.server
    }

    /// Serve this process's stdin/stdout until the client closes stdin, then stop every
    /// server.
    pub async fn serve_stdio(&self) -> Result<(), HostError> {
        let result = self.inner.server.clone().serve_stdio().await;
        self.shutdown().await;
        Ok(result?)
    }

    /// Applies a new configuration: the policy at once (the tool list follows), servers
    /// added, removed or changed are started, stopped or restarted; unchanged servers and
    /// client sessions are left alone.
    pub async fn reload(&self, config: Config) -> Result<(), HostError> {
        let policy = Policy::for_config(&config)?;
        warn_unmatched(policy.unmatched_servers());
        let redactor = crate::audit::Redactor::new(&config.audit.redact);
        let old: Vec<ServerConfig> = self.inner.settings().config.servers.clone();
        // A file new to the configuration is the user's own doing (they imported it): its
        // servers are trusted on first use; one added to a file already read is held.
        let known_files = crate::launch_pins::files(&self.inner.settings().config);
        let new_servers = config.servers.clone();
        *self
            .inner
            .settings
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Arc::new(Settings {
            config,
            policy,
            redactor,
        });
        let enabled = |list: &[ServerConfig]| -> Vec<ServerConfig> {
            list.iter().filter(|s| s.enabled).cloned().collect()
        };
        let diff = crate::watch::diff_servers(&enabled(&old), &enabled(&new_servers));
        for name in &diff.removed {
            self.inner.stop_server(name);
        }
        // A changed server keeps its catalog while its successor starts: when that one
        // comes up offering the same, clients see no change at all.
        self.inner.starting();
        let path = self.inner.settings().config.path.clone();
        for cfg in enabled(&new_servers) {
            if diff.added.contains(&cfg.name) || diff.changed.contains(&cfg.name) {
                let origin = crate::launch_pins::origin(path.as_deref(), &cfg);
                let trust_new = !known_files.contains(&origin);
                self.inner.launch(cfg, trust_new);
            }
        }
        // `[pins] servers` may have changed: the servers held so far are looked at again.
        self.inner.retry_held();
        self.inner.wait_for_starts(1).await;
        // Also republishes: the policy and `[tool_search]` may both have changed.
        crate::search::apply(&self.inner).await;
        self.inner.started();
        warn_unmatched(unmatched_tools(&self.inner));
        tracing::info!(
            added = diff.added.len(),
            removed = diff.removed.len(),
            changed = diff.changed.len(),
            "configuration reloaded"
        );
        Ok(())
    }

    /// Stops every server and writes out the audit trail.
    pub async fn shutdown(&self) {
        let names: Vec<String> = lock(&self.inner.running).keys().cloned().collect();
        for name in names {
            self.inner.stop_server(&name);
        }
        // Give the supervisors a moment to close their children gracefully.
        for _ in 0..50 {
            if self.inner.live_servers() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if let Some(audit) = &self.inner.audit
            && let Err(e) = audit.flush()
        {
            tracing::warn!(error = %e, "audit trail not fully written");
        }
    }

    /// What the tool definitions cost in the model's context, in full and in search mode.
    pub fn tool_cost(&self) -> crate::search::ToolCost {
        crate::search::cost(&self.inner)
    }

    /// Runs `search_tools` as the client would: ranked names and scores (`None` when
    /// search mode is off or the index is not built yet).
    pub fn search_tools(&self, query: &str, limit: usize) -> Option<Vec<(String, f64)>> {
        if !self.inner.search.is_active() {
            return None;
        }
        let hits = crate::search::ranked(&self.inner, query, limit).ok()?;
        Some(
            hits.into_iter()
                .map(|(hit, _)| (hit.name, f64::from(hit.score)))
                .collect(),
        )
    }

    /// The names of the tools the client is shown right now.
    pub fn listed_tools(&self) -> Vec<String> {
        let mut names: Vec<String> = lock(&self.inner.catalog)
            .registered
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// The configured servers that are not running right now (starting, restarting, or
    /// failing to start).
    pub fn servers_down(&self) -> Vec<String> {
        let mut down: Vec<String> = lock(&self.inner.running)
            .iter()
            .filter(|(_, r)| r.live.borrow().is_none())
            .map(|(name, _)| name.clone())
            .collect();
        down.sort();
        down
    }

    /// The servers not started because their launch changed since it was approved (or was
    /// added to a client's file while the gateway ran), with why and what to run.
    pub fn held_servers(&self) -> Vec<(String, String)> {
        let mut held: Vec<(String, String)> = lock(&self.inner.held_servers)
            .iter()
            .map(|(name, h)| (name.clone(), h.reason.clone()))
            .collect();
        held.sort();
        held
    }

    /// The tools held back (changed since approval, or poisoned), with why.
    pub fn held_tools(&self) -> Vec<(String, String)> {
        let mut held: Vec<(String, String)> = lock(&self.inner.catalog)
            .held
            .iter()
            .map(|(k, v)| (k.clone(), v.reason.clone()))
            .collect();
        held.sort();
        held
    }

    /// The audit trail, unless turned off.
    pub fn audit(&self) -> Option<&AuditLog> {
        self.inner.audit.as_ref()
    }

    /// Globs of the policy and of `[tool_search] always` that select nothing: server globs
    /// against the configured servers, tool globs against the tools the servers have listed
    /// (an entry about a server that has not listed its tools is not judged).
    pub fn unmatched(&self) -> Vec<Unmatched> {
        let mut out = self.inner.settings().policy.unmatched_servers();
        out.extend(unmatched_tools(&self.inner));
        out
    }
}

/// The tool globs of [`Host::unmatched`].
fn unmatched_tools(inner: &Inner) -> Vec<Unmatched> {
    let settings = inner.settings();
    let catalog = lock(&inner.catalog);
    let mut tools: Vec<(&str, &str)> = catalog
        .fetched
        .iter()
        .flat_map(|(server, f)| f.tools.iter().map(|t| (server.as_str(), t.name.as_str())))
        .collect();
    tools.sort_unstable();
    let listed: Vec<&str> = catalog.fetched.keys().map(String::as_str).collect();
    let mut out = settings.policy.unmatched_tools(&tools, &listed);
    let exposed: Vec<String> = tools
        .iter()
        .map(|(server, tool)| {
            settings
                .policy
                .exposed_name(&crate::policy::ToolRef::new(server, tool))
        })
        .collect();
    let exposed: Vec<&str> = exposed.iter().map(String::as_str).collect();
    out.extend(crate::policy::unmatched_names(
        "[tool_search]",
        "always",
        &settings.config.tool_search.always,
        &exposed,
    ));
    out
}

/// On stderr (through `tracing`): a glob that selects nothing is a rule that does nothing.
fn warn_unmatched(unmatched: Vec<Unmatched>) {
    for u in unmatched {
        tracing::warn!(
            "{u}: it does nothing as written (`moat gateway --check` lists every such glob)"
        );
    }
}

fn open_state(
    config: &Config,
    options: &HostOptions,
) -> Result<(PinStore, Decisions, Option<AuditLog>), HostError> {
    let audit_enabled = config.audit.enabled;
    if options.ephemeral {
        let audit = if audit_enabled {
            Some(AuditLog::open_in_memory()?)
        } else {
            None
        };
        return Ok((PinStore::open_in_memory()?, Decisions::in_memory()?, audit));
    }
    let dir = state::state_dir(config.state_dir.as_deref())?;
    let pins_path = state::pins_path(&dir);
    let pins = PinStore::open(&pins_path)?;
    let decisions = Decisions::open(&pins_path)?;
    // The store (and, with `[audit] sign`, the signing key) where the configuration says.
    let audit = AuditLog::from_config(&config.audit, &dir)?;
    Ok((pins, decisions, audit))
}

/// Subscriptions and completions go to the server that owns the resource or prompt.
fn install_upstream_hooks(inner: &Arc<Inner>) {
    let weak = Arc::downgrade(inner);
    let hook_weak = weak.clone();
    let ready_weak = weak.clone();
    let roots_weak = weak.clone();
    let notices_weak = weak.clone();
    // Clients connect while servers start: what the catalog will hold is declared now.
    let server = inner
        .server
        .clone()
        .declare_every_capability()
        .ready_when(move || ready_weak.upgrade().and_then(|inner| inner.ready_wait()))
        .on_roots_changed(move || {
            if let Some(inner) = roots_weak.upgrade() {
                crate::requests::roots_changed(&inner);
            }
        })
        .standing_notices(move || {
            notices_weak
                .upgrade()
                .map(|inner| inner.held_notices())
                .unwrap_or_default()
        });
    let server = server.on_subscribe(move |uri, on| {
        if let Some(inner) = hook_weak.upgrade() {
            inner.watch_changed(uri, on);
        }
    });
    let unknown_weak = weak.clone();
    let server = server.unknown_tool(move |ctx, name, args| {
        let weak = unknown_weak.clone();
        async move {
            let inner = weak.upgrade().ok_or_else(|| {
                moat_protocol::ErrorObject::internal("the gateway is shutting down")
            })?;
            crate::call::call_unlisted(inner, ctx, &name, args).await
        }
    });
    let _ = server.completion(move |params: CompleteRequestParams| {
        let weak = weak.clone();
        async move {
            let inner = weak.upgrade().ok_or_else(|| {
                moat_protocol::ErrorObject::internal("the gateway is shutting down")
            })?;
            inner.complete(params).await
        }
    });
}

/// Looks at the pin store now and then, so `moat pins approve` in another terminal
/// brings a held-back tool back without a restart.
fn spawn_pins_poll(weak: Weak<Inner>) {
    tokio::spawn(async move {
        let mut seen = None;
        loop {
            let Some(inner) = weak.upgrade() else { return };
            let every = inner.options.pins_poll;
            let version = inner.pins.version().ok();
            if seen.is_some() && version != seen {
                inner.republish_all();
                inner.retry_held();
            }
            seen = version;
            drop(inner);
            tokio::time::sleep(every).await;
        }
    });
}

impl Inner {
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

    /// Starts `cfg` unless its launch pin holds it (`launch_pins`; `trust_new`: a launch
    /// never seen is pinned and started rather than held).
    fn launch(self: &Arc<Self>, cfg: ServerConfig, trust_new: bool) {
        match self.launch_hold(&cfg, trust_new) {
            None => {
                if lock(&self.held_servers).remove(&cfg.name).is_some() {
                    self.set_down(&cfg.name, None);
                }
                self.supervise_server(cfg);
            }
            Some(reason) => self.hold_server(cfg, reason),
        }
    }

    /// Why `cfg` must not start now, if it must not.
    fn launch_hold(&self, cfg: &ServerConfig, trust_new: bool) -> Option<String> {
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

    /// Keeps `cfg` from running (stopping what ran under its name): its tools go, and
    /// clients and the terminal are told why and what to run.
    fn hold_server(self: &Arc<Self>, cfg: ServerConfig, reason: String) {
        let name = cfg.name.clone();
        if let Some(running) = lock(&self.running).remove(&name) {
            let _ = running.stop.send(true);
        }
        self.withdraw(&name);
        self.set_down(&name, Some(reason.clone()));
        let again = lock(&self.held_servers)
            .insert(
                name.clone(),
                HeldServer {
                    cfg,
                    reason: reason.clone(),
                },
            )
            .is_some_and(|h| h.reason == reason);
        if again {
            return;
        }
        tracing::warn!(server = %name, "server held, not started: {reason}");
        let params = held_notice(&name, &reason);
        let peers = self.server.connections();
        tokio::spawn(async move {
            for peer in peers {
                if peer.log_level().is_some_and(|l| l > LoggingLevel::Warning) {
                    continue;
                }
                let _ = peer.notify("notifications/message", &params).await;
            }
        });
    }

    /// What a client that arrives now is told about the servers held back.
    fn held_notices(&self) -> Vec<LoggingMessageNotificationParams> {
        let held = lock(&self.held_servers);
        let mut names: Vec<&String> = held.keys().collect();
        names.sort();
        names
            .into_iter()
            .map(|name| held_notice(name, &held[name].reason))
            .collect()
    }

    /// Looks again at every held server (after an approval, or a reload): those whose
    /// launch is approved now start.
    pub(crate) fn retry_held(self: &Arc<Self>) {
        let held: Vec<ServerConfig> = lock(&self.held_servers)
            .values()
            .map(|h| h.cfg.clone())
            .collect();
        let configured = self.settings().config.servers.clone();
        for cfg in held {
            // Only as configured now (a reload may have replaced or removed it).
            if !configured.iter().any(|c| *c == cfg && c.enabled) {
                continue;
            }
            if self.launch_hold(&cfg, false).is_none() {
                tracing::info!(server = %cfg.name, "launch approved: starting it");
                lock(&self.held_servers).remove(&cfg.name);
                self.set_down(&cfg.name, None);
                self.supervise_server(cfg);
            }
        }
    }

    /// Starts supervising `cfg` (replacing a task that supervised a server of that name);
    /// its first attempt counts as a start under way until it ends.
    fn supervise_server(self: &Arc<Self>, cfg: ServerConfig) {
        let (live_tx, live_rx) = watch::channel(None);
        let (stop_tx, stop_rx) = watch::channel(false);
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        self.starting();
        // Dropping a predecessor's stop sender ends its task.
        lock(&self.running).insert(
            cfg.name.clone(),
            Running {
                cfg: cfg.clone(),
                live: live_rx,
                stop: stop_tx,
                generation,
            },
        );
        tokio::spawn(supervisor::supervise(
            Arc::downgrade(self),
            cfg,
            generation,
            live_tx,
            stop_rx,
        ));
    }

    /// Stops a server for good (removed from the configuration, or the host stops).
    fn stop_server(self: &Arc<Self>, name: &str) {
        if let Some(running) = lock(&self.running).remove(name) {
            let _ = running.stop.send(true);
        }
        lock(&self.held_servers).remove(name);
        lock(&self.down).remove(name);
        self.withdraw(name);
    }

    /// Whether `generation` is the task supervising `server` now.
    pub(crate) fn is_current(&self, server: &str, generation: u64) -> bool {
        lock(&self.running)
            .get(server)
            .is_some_and(|r| r.generation == generation)
    }

    /// A start begins: requests that read the catalog wait for it (bounded).
    fn starting(&self) {
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
    async fn wait_for_starts(&self, left: usize) {
        let mut pending = self.startup.pending.subscribe();
        let deadline = *lock(&self.startup.deadline);
        let _ = tokio::time::timeout_at(deadline.into(), pending.wait_for(|n| *n <= left)).await;
    }

    /// What a request that reads the catalog waits for first: nothing, unless servers are
    /// starting.
    fn ready_wait(self: &Arc<Self>) -> Option<moat::handler::BoxFuture<()>> {
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
    fn startup_timeout(&self) -> Duration {
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

    fn live_servers(&self) -> usize {
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
    pub(crate) fn searchable_map(&self) -> crate::search::Definitions {
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
    pub(crate) fn lookup(&self, exposed: &str) -> Result<Arc<ToolEntry>, Option<Held>> {
        // Tools policy keeps from the list are here too: their calls meet the same rule.
        let catalog = lock(&self.catalog);
        match catalog.tools.get(exposed) {
            Some(entry) => Ok(entry.clone()),
            None => Err(catalog.held.get(exposed).cloned()),
        }
    }

    /// A notification from a downstream server.
    pub(crate) async fn downstream_notification(
        self: &Arc<Self>,
        server: &str,
        client: &Arc<Client>,
        n: ServerNotification,
    ) {
        match n.method.as_str() {
            "notifications/tools/list_changed"
            | "notifications/resources/list_changed"
            | "notifications/prompts/list_changed" => {
                if let Err(e) = self.refresh_catalog(server, client).await {
                    tracing::warn!(server, error = %e, "catalog refresh failed");
                }
            }
            "notifications/resources/updated" => {
                let uri = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("uri"))
                    .and_then(Value::as_str);
                if let Some(uri) = uri
                    && self.resource_owner(uri).as_deref() == Some(server)
                {
                    self.server.notify_resource_updated(uri).await;
                }
            }
            "notifications/message" => {
                tracing::info!(server, params = ?n.params, "server log");
            }
            _ => {}
        }
    }

    async fn complete(
        &self,
        mut params: CompleteRequestParams,
    ) -> Result<Vec<String>, moat_protocol::ErrorObject> {
        let server = match &mut params.reference {
            CompletionReference::Prompt(p) => {
                let (server, original) = lock(&self.catalog)
                    .prompts
                    .get(&p.name)
                    .map(|(server, prompt)| (server.clone(), prompt.name.clone()))
                    .ok_or_else(|| {
                        moat_protocol::ErrorObject::invalid_params(format!("no prompt {}", p.name))
                    })?;
                p.name = original;
                server
            }
            CompletionReference::Resource(r) => lock(&self.catalog)
                .templates
                .get(&r.uri)
                .map(|(server, _)| server.clone())
                .ok_or_else(|| {
                    moat_protocol::ErrorObject::invalid_params(format!(
                        "no resource template {}",
                        r.uri
                    ))
                })?,
            _ => {
                return Err(moat_protocol::ErrorObject::invalid_params(
                    "unknown completion reference",
                ));
            }
        };
        let client = self
            .wait_live(&server)
            .await
            .map_err(moat_protocol::ErrorObject::internal)?;
        client
            .complete(params)
            .await
            .map(|r| r.completion.values)
            .map_err(|e| crate::catalog::passed_on(&server, e))
    }
}
