//! The [`Host`]: one MCP server towards the client, made of every configured server.
//!
//! It owns the upstream [`moat::Server`] (so every revision, stdio and Streamable HTTP come
//! from the SDK), the supervision tasks, and the catalog: which exposed name belongs to
//! which server, which tools are held back (changed since approval, or poisoned), and the
//! registrations in the upstream server. Before a server starts, its launch pin is checked
//! ([`crate::launch_pins`]): a held server is not started until its launch is approved. Registration follows the policy's listing
//! predicate, and the call path ([`crate::call`]) asks the same policy again with the
//! arguments: a tool hidden from `tools/list` is refused on `tools/call` by the same rule.

use std::sync::{Arc, Weak};
use std::time::Duration;

use moat::Server;
use moat_protocol::types::{CompleteRequestParams, CompletionReference, LoggingLevel};
use tokio::sync::watch;

use crate::audit::AuditLog;
use crate::catalog::passed_on;
use crate::config::{Config, ServerConfig};
use crate::consent::Decisions;
use crate::error::HostError;
use crate::inner::{Inner, Settings, Stores, held_notice};
pub use crate::options::HostOptions;
use crate::pins::PinStore;
use crate::policy::{Policy, Unmatched};
use crate::state;
use crate::supervisor;

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

impl Host {
    /// Starts every enabled server of `config` and returns at once: a client can connect
    /// while they start. Its lists and calls wait for the servers being started (bounded
    /// by the start timeout), so its first `tools/list` already has their tools; a server
    /// that fails to start is retried in the background. [`Host::ready`] waits the same way.
    pub async fn start(config: Config, options: HostOptions) -> Result<Host, HostError> {
        let policy = Policy::for_config(&config)?;
        warn_unmatched(policy.unmatched_servers());
        let redactor = config.audit.redactor();
        let open_state_result = open_state(&config, &options).await?;
        let server = Server::new("moat", env!("CARGO_PKG_VERSION")).instructions(
            "moat gateway: the tools of several MCP servers, each named after its server \
             (server__tool) unless configured otherwise, each call checked against the user's \
             policy.",
        );
        let inner = Arc::new(Inner::new(
            server,
            Settings {
                config,
                policy,
                redactor,
            },
            open_state_result,
            options,
        ));
        install_upstream_hooks(&inner);
        if inner.shared().is_some() {
            spawn_store_sync(Arc::downgrade(&inner));
        }
        // Counting starts before the first server does, so its start is counted.
        if inner.settings().config.telemetry.metrics.is_some() {
            inner.enable_metrics();
        }
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

    /// Counts what the gateway does from now on and serves it at `http://ADDR/metrics` in
    /// the Prometheus text format, until the returned endpoint is dropped.
    pub async fn serve_metrics(
        &self,
        addr: std::net::SocketAddr,
    ) -> Result<crate::telemetry::MetricsEndpoint, HostError> {
        self.inner.enable_metrics();
        let weak = Arc::downgrade(&self.inner);
        let render = Arc::new(move || {
            weak.upgrade()
                .and_then(|inner| Some(inner.metrics()?.render(&metrics_snapshot(&inner))))
                .unwrap_or_default()
        });
        crate::telemetry::MetricsEndpoint::bind(addr, render)
            .await
            .map_err(|source| HostError::Metrics { addr, source })
    }

    /// What the HTTP server calls with each response's status code, counted in the
    /// metrics once they are served ([`serve_metrics`](Self::serve_metrics)); give it to
    /// `HttpServerOptions::on_response`.
    pub fn http_response_hook(&self) -> moat::transport::http::server::ResponseHook {
        let weak = Arc::downgrade(&self.inner);
        Arc::new(move |code| {
            if let Some(metrics) = weak.upgrade().as_ref().and_then(|i| i.metrics()) {
                metrics.http_response(code);
            }
        })
    }

    /// The HTTP session directory replicas of this gateway share, when the state lives in
    /// PostgreSQL (`[store] url`); give it to `HttpServerOptions::replication`.
    pub fn session_directory(
        &self,
    ) -> Option<moat::transport::http::server::directory::SharedDirectory> {
        let mirror = self.inner.shared()?;
        Some(Arc::new(crate::store::PostgresDirectory::new(
            mirror.postgres().clone(),
        )))
    }

    /// Serves the web console at `http://ADDR/` until the returned console is dropped, and
    /// makes it a consent channel (after the client's elicitation, before the terminal)
    /// while a browser has it open. Its one-time login URL is [`Console::login_url`].
    ///
    /// [`Console::login_url`]: crate::console::Console::login_url
    pub async fn serve_console(
        &self,
        addr: std::net::SocketAddr,
    ) -> Result<crate::console::Console, HostError> {
        crate::console::Console::bind(&self.inner, addr)
            .await
            .map_err(|source| HostError::Console { addr, source })
    }

    /// Waits until every server being started has come up or failed its first attempt,
    /// and the start-up decisions are made (bounded by the start timeout).
    pub async fn ready(&self) {
        self.inner.wait_for_starts(0).await;
    }

    /// Names that two servers offer (or one server twice), and which one keeps each: the
    /// first in configuration order.
    pub fn collisions(&self) -> Vec<String> {
        self.inner.catalog().collisions.iter().cloned().collect()
    }

    /// Why each server that is not up right now is not: its last error, with the last
    /// lines it wrote on stderr when it has any.
    pub fn down_reasons(&self) -> Vec<(String, String)> {
        self.servers_down()
            .into_iter()
            .map(|name| {
                let why = self
                    .inner
                    .down_reason(&name)
                    .unwrap_or_else(|| "starting".to_owned());
                (name, why)
            })
            .collect()
    }

    /// The MCP server the client talks to: serve it over stdio or HTTP.
    pub fn server(&self) -> &Server {
        self.inner.server()
    }

    /// Serve this process's stdin/stdout until the client closes stdin, then stop every
    /// server.
    pub async fn serve_stdio(&self) -> Result<(), HostError> {
        let result = self.inner.server().clone().serve_stdio().await;
        self.shutdown().await;
        Ok(result?)
    }

    /// Applies a new configuration: the policy at once (the tool list follows), servers
    /// added, removed or changed are started, stopped or restarted; unchanged servers and
    /// client sessions are left alone.
    pub async fn reload(&self, config: Config) -> Result<(), HostError> {
        let policy = Policy::for_config(&config)?;
        warn_unmatched(policy.unmatched_servers());
        let redactor = config.audit.redactor();
        let old: Vec<ServerConfig> = self.inner.settings().config.servers.clone();
        // A file new to the configuration is the user's own doing (they imported it): its
        // servers are trusted on first use; one added to a file already read is held.
        let known_files = crate::launch_pins::files(&self.inner.settings().config);
        let new_servers = config.servers.clone();
        self.inner.replace_settings(Settings {
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
        for name in self.inner.running_names() {
            self.inner.stop_server(&name);
        }
        // Give the supervisors a moment to close their children gracefully.
        for _ in 0..50 {
            if self.inner.live_servers() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // What this gateway decided last goes to the shared store before it stops.
        if let Some(shared) = self.inner.shared()
            && let Err(e) = shared.sync().await
        {
            tracing::warn!(error = %e, "pins and decisions not sent to the store");
        }
        if let Some(audit) = &self.inner.audit()
            && let Err(e) = audit.flush()
        {
            tracing::warn!(error = %e, "audit trail not fully written");
        }
    }

    /// Builds the tool search index of the catalog as it is now, with the embedding model
    /// when one is loaded, and waits for it: the index a running gateway has once its
    /// background rebuild is done (for `--check`, which reports on it and exits).
    pub async fn settle_search(&self) {
        if self.inner.search().is_active() {
            crate::reindex::rebuild_now(&self.inner, true, None).await;
        }
    }

    /// What the tool definitions cost in the model's context, in full and in search mode.
    pub fn tool_cost(&self) -> crate::search::ToolCost {
        crate::search::cost(&self.inner)
    }

    /// Runs `search_tools` as the client would: ranked names and scores (`None` when
    /// search mode is off or the index is not built yet).
    pub fn search_tools(&self, query: &str, limit: usize) -> Option<Vec<(String, f64)>> {
        if !self.inner.search().is_active() {
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
        let mut names: Vec<String> = self.inner.catalog().registered.keys().cloned().collect();
        names.sort();
        names
    }

    /// The configured servers that are not running right now (starting, restarting, or
    /// failing to start).
    pub fn servers_down(&self) -> Vec<String> {
        self.inner.servers_down()
    }

    /// The servers not started because their launch changed since it was approved (or was
    /// added to a client's file while the gateway ran), with why and what to run.
    pub fn held_servers(&self) -> Vec<(String, String)> {
        self.inner.held_reasons()
    }

    /// The tools held back (changed since approval, or poisoned), with why.
    pub fn held_tools(&self) -> Vec<(String, String)> {
        let mut held: Vec<(String, String)> = self
            .inner
            .catalog()
            .held
            .iter()
            .map(|(k, v)| (k.clone(), v.reason.clone()))
            .collect();
        held.sort();
        held
    }

    /// The audit trail, unless turned off.
    pub fn audit(&self) -> Option<&AuditLog> {
        self.inner.audit()
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

/// What the metrics' gauges show, read at each scrape.
fn metrics_snapshot(inner: &Inner) -> crate::telemetry::metrics::Snapshot {
    let live: std::collections::HashSet<String> = inner
        .live_clients()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let mut servers: Vec<(String, bool)> = inner
        .running_names()
        .into_iter()
        .map(|name| {
            let up = live.contains(&name);
            (name, up)
        })
        .collect();
    servers.sort();
    crate::telemetry::metrics::Snapshot {
        servers,
        held_servers: inner.held_reasons().len(),
        held_tools: inner.catalog().held.len(),
        sessions: inner.server().connections().len(),
    }
}

/// The tool globs of [`Host::unmatched`].
fn unmatched_tools(inner: &Inner) -> Vec<Unmatched> {
    let settings = inner.settings();
    let catalog = inner.catalog();
    let mut tools: Vec<(&str, &str)> = catalog
        .fetched
        .iter()
        .flat_map(|(server, f)| f.tools.iter().map(|t| (server.as_str(), t.name.as_str())))
        .collect();
    tools.sort_unstable();
    // A rule may name a skill: policy shows or hides skills as it does tools of their name.
    let mut named = tools.clone();
    named.extend(
        catalog
            .fetched
            .iter()
            .flat_map(|(server, f)| f.skills.iter().map(|name| (server.as_str(), name.as_str()))),
    );
    named.sort_unstable();
    let listed: Vec<&str> = catalog.fetched.keys().map(String::as_str).collect();
    let mut out = settings.policy.unmatched_tools(&named, &listed);
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

async fn open_state(config: &Config, options: &HostOptions) -> Result<Stores, HostError> {
    let audit_enabled = config.audit.enabled;
    if config.store.url.is_some() {
        // Pins, decisions and the audit trail in the shared store (`--ephemeral` or not).
        let pg = crate::store::Postgres::connect(&config.store).await?;
        let audit = match (audit_enabled, config.audit.sign) {
            (false, _) => None,
            (true, false) => Some(AuditLog::open_shared(pg.clone())),
            (true, true) => {
                // Each gateway signs with the key in its own state directory.
                let dir = state::state_dir(config.state_dir.as_deref())?;
                let key = crate::audit::key::load_or_create(&crate::audit::key::key_path(&dir))?;
                Some(AuditLog::open_shared_signing(
                    pg.clone(),
                    key,
                    config.audit.sign_every,
                ))
            }
        };
        let mirror = crate::store::Mirror::open(pg).await?;
        return Ok(Stores {
            pins: mirror.pins().clone(),
            decisions: mirror.decisions().clone(),
            audit,
            shared: Some(Arc::new(mirror)),
        });
    }
    if options.ephemeral {
        let audit = if audit_enabled {
            Some(AuditLog::open_in_memory()?)
        } else {
            None
        };
        return Ok(Stores {
            pins: Arc::new(PinStore::open_in_memory()?),
            decisions: Arc::new(Decisions::in_memory()?),
            audit,
            shared: None,
        });
    }
    let dir = state::state_dir(config.state_dir.as_deref())?;
    let pins_path = state::pins_path(&dir);
    let pins = PinStore::open(&pins_path)?;
    let decisions = Decisions::open(&pins_path)?;
    // The store (and, with `[audit] sign`, the signing key) where the configuration says.
    let audit = AuditLog::from_config(&config.audit, &dir)?;
    Ok(Stores {
        pins: Arc::new(pins),
        decisions: Arc::new(decisions),
        audit,
        shared: None,
    })
}

/// Subscriptions and completions go to the server that owns the resource or prompt.
fn install_upstream_hooks(inner: &Arc<Inner>) {
    let weak = Arc::downgrade(inner);
    let hook_weak = weak.clone();
    let ready_weak = weak.clone();
    let roots_weak = weak.clone();
    let notices_weak = weak.clone();
    // Clients connect while servers start: what the catalog will hold is declared now.
    // (A `Server` is a handle: its hook setters set the shared server's hooks.)
    inner
        .server()
        .clone()
        .declare_every_capability()
        .ready_when(move || ready_weak.upgrade().and_then(|inner| inner.ready_wait()))
        .skill_source(crate::skills::Forwarder::new(weak.clone()))
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
        })
        .on_subscribe(move |uri, on| {
            if let Some(inner) = hook_weak.upgrade() {
                inner.watch_changed(uri, on);
            }
        });
    // The handlers of unlisted tools and of completions, installed together.
    let unknown_weak = weak.clone();
    let filter_weak = weak.clone();
    inner.server().batch(|b| {
        // With rules on who calls, each caller is listed what their own calls may reach.
        b.tool_filter(move |ctx, tool| {
            filter_weak
                .upgrade()
                .is_none_or(|inner| inner.listed_to(ctx, &tool.name))
        });
        b.unknown_tool(move |ctx, name, args| {
            let weak = unknown_weak.clone();
            async move {
                let inner = weak.upgrade().ok_or_else(|| {
                    moat_protocol::ErrorObject::internal("the gateway is shutting down")
                })?;
                crate::call::call_unlisted(inner, ctx, &name, args).await
            }
        })
        .completion(move |params: CompleteRequestParams| {
            let weak = weak.clone();
            async move {
                let inner = weak.upgrade().ok_or_else(|| {
                    moat_protocol::ErrorObject::internal("the gateway is shutting down")
                })?;
                inner.complete(params).await
            }
        });
    });
}

/// Keeps the copy of the shared store in step (see [`crate::store::mirror`]): sends this
/// gateway's pins and decisions, takes the others'. An outage is logged once, and its end.
fn spawn_store_sync(weak: Weak<Inner>) {
    tokio::spawn(async move {
        let mut down = false;
        loop {
            let Some(inner) = weak.upgrade() else { return };
            let Some(shared) = inner.shared().cloned() else {
                return;
            };
            match shared.sync().await {
                Ok(synced) => {
                    if synced.received {
                        // An approval made elsewhere: publish now, not at the next poll.
                        inner.republish_all();
                        inner.retry_held();
                    }
                    if down {
                        tracing::info!(
                            store = shared.postgres().shown(),
                            "the store is reachable again"
                        );
                        down = false;
                    }
                    if synced.refused > 0 {
                        tracing::info!(
                            refused = synced.refused,
                            "pins or decisions changed elsewhere first: the store's were taken"
                        );
                    }
                }
                Err(e) if !down => {
                    tracing::warn!(error = %e, "pins and decisions are served from this gateway's copy until the store is back");
                    down = true;
                }
                Err(_) => {}
            }
            drop(inner);
            tokio::time::sleep(crate::store::SYNC_EVERY).await;
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
            let mut every = inner.options().pins_poll;
            if inner.shared().is_some() {
                every = every.min(crate::store::SYNC_EVERY);
            }
            let version = inner.pins().version().ok();
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
    /// Starts `cfg` unless its launch pin holds it (`launch_pins`; `trust_new`: a launch
    /// never seen is pinned and started rather than held).
    fn launch(self: &Arc<Self>, cfg: ServerConfig, trust_new: bool) {
        match self.launch_hold(&cfg, trust_new) {
            None => {
                if self.unhold(&cfg.name) {
                    self.set_down(&cfg.name, None);
                }
                self.supervise_server(cfg);
            }
            Some(reason) => self.hold_server(cfg, reason),
        }
    }

    /// Keeps `cfg` from running (stopping what ran under its name): its tools go, and
    /// clients and the terminal are told why and what to run.
    fn hold_server(self: &Arc<Self>, cfg: ServerConfig, reason: String) {
        let name = cfg.name.clone();
        self.untrack(&name);
        self.withdraw(&name);
        self.set_down(&name, Some(reason.clone()));
        let again = self.hold(cfg, &reason);
        if again {
            return;
        }
        tracing::warn!(server = %name, "server held, not started: {reason}");
        let params = held_notice(&name, &reason);
        let peers = self.server().connections();
        tokio::spawn(async move {
            for peer in peers {
                if peer.log_level().is_some_and(|l| l > LoggingLevel::Warning) {
                    continue;
                }
                let _ = peer.notify("notifications/message", &params).await;
            }
        });
    }

    /// Looks again at every held server (after an approval, or a reload): those whose
    /// launch is approved now start.
    pub(crate) fn retry_held(self: &Arc<Self>) {
        let held = self.held_configs();
        let configured = self.settings().config.servers.clone();
        for cfg in held {
            // Only as configured now (a reload may have replaced or removed it).
            if !configured.iter().any(|c| *c == cfg && c.enabled) {
                continue;
            }
            if self.launch_hold(&cfg, false).is_none() {
                tracing::info!(server = %cfg.name, "launch approved: starting it");
                self.unhold(&cfg.name);
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
        // Dropping a predecessor's stop sender ends its task.
        let generation = self.track(cfg.clone(), live_rx, stop_tx);
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
        self.untrack(name);
        self.forget(name);
        self.withdraw(name);
    }

    async fn complete(
        &self,
        mut params: CompleteRequestParams,
    ) -> Result<Vec<String>, moat_protocol::ErrorObject> {
        let server = match &mut params.reference {
            CompletionReference::Prompt(p) => {
                let (server, original) = self
                    .catalog()
                    .prompts
                    .get(&p.name)
                    .map(|(server, prompt)| (server.clone(), prompt.name.clone()))
                    .ok_or_else(|| {
                        moat_protocol::ErrorObject::invalid_params(format!("no prompt {}", p.name))
                    })?;
                p.name = original;
                server
            }
            CompletionReference::Resource(r) => self
                .catalog()
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
            .map_err(|e| passed_on(&server, e))
    }
}
