//! The [`Host`]: one MCP server towards the client, made of every configured server.
//!
//! It owns the upstream [`moat::Server`] (so every revision, stdio and Streamable HTTP come
//! from the SDK), the supervision tasks, and the catalog: which exposed name belongs to
//! which server, which tools are held back (changed since approval, or poisoned), and the
//! registrations in the upstream server. Registration follows the policy's listing
//! predicate, and the call path ([`crate::call`]) asks the same policy again with the
//! arguments: a tool hidden from `tools/list` is refused on `tools/call` by the same rule.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

use moat::{Client, ResourceRequest, Server, ServerNotification};
use moat_protocol::types::{
    CompleteRequestParams, CompletionReference, Prompt, Resource, ResourceContents,
    ResourceTemplate, Tool,
};
use serde_json::Value;
use tokio::sync::{oneshot, watch};

use crate::HostError;
use crate::audit::AuditLog;
use crate::config::{Config, ServerConfig};
use crate::consent::Decisions;
use crate::naming::exposed_name;
use crate::pins::{PinStatus, PinStore};
use crate::policy::{Labels, Policy, ToolRef, TrustOverride};
use crate::scan::{self, ScanAction};
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
    /// How long a server has to start and answer `initialize`.
    pub start_timeout: Duration,
    /// Deadline of a call to a server, unless its configuration says otherwise.
    pub call_timeout: Duration,
    /// Health checks: a `ping` to every server this often.
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
    validator: OnceLock<Result<jsonschema::Validator, String>>,
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

/// What a forwarded resource read resolves to.
type ReadFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Vec<ResourceContents>, String>> + Send>,
>;

/// A tool kept from the client, and why.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub(crate) server: String,
    /// For the audit trail: "pin changed", "scan: hidden instructions", …
    pub(crate) rule: String,
    /// For the client: what happened and what to do.
    pub(crate) reason: String,
}

#[derive(Default)]
struct Catalog {
    /// The last tool list of each server (republished when pins or policy change).
    fetched: HashMap<String, Vec<Arc<Tool>>>,
    tools: HashMap<String, Arc<ToolEntry>>,
    held: HashMap<String, Held>,
    /// What the upstream server lists, by exposed name.
    registered: HashMap<String, Arc<Tool>>,
    /// Every tool policy lets the client see, by exposed name: its server and its
    /// definition as the client sees it (what tool search ranks and describes).
    /// Shares each definition with `registered`.
    searchable: HashMap<String, (String, Arc<Tool>)>,
    resources: HashMap<String, String>,
    templates: HashMap<String, String>,
    prompts: HashMap<String, (String, String)>,
}

struct Running {
    cfg: ServerConfig,
    live: Live,
    stop: watch::Sender<bool>,
}

pub(crate) struct Inner {
    pub(crate) server: Server,
    settings: RwLock<Arc<Settings>>,
    pub(crate) pins: PinStore,
    pub(crate) decisions: Decisions,
    pub(crate) audit: Option<AuditLog>,
    catalog: Mutex<Catalog>,
    running: Mutex<HashMap<String, Running>>,
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Host {
    /// Starts every enabled server of `config` and waits for each one's first attempt (up
    /// or failed: a server that fails to start is retried in the background). Refuses to
    /// start when two tools would be shown under one name.
    pub async fn start(config: Config, options: HostOptions) -> Result<Host, HostError> {
        let policy = Policy::new(&config.policy)?;
        let redactor = config.audit.redactor();
        let (pins, decisions, audit) = open_state(&config, &options)?;
        let server = Server::new("moat", env!("CARGO_PKG_VERSION")).instructions(
            "moat gateway: the tools of several MCP servers, named server__tool, each call \
             checked against the user's policy.",
        );
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
            sessions: Sessions::default(),
            search: crate::search::SearchState::default(),
            options,
        });
        install_upstream_hooks(&inner);
        let host = Host { inner };
        let servers: Vec<ServerConfig> = host.inner.settings().config.servers.clone();
        let mut waits = Vec::new();
        for cfg in servers.into_iter().filter(|s| s.enabled) {
            waits.push(host.inner.launch(cfg));
        }
        for wait in waits {
            if let Ok(Err(e)) = wait.await {
                host.shutdown().await;
                return Err(e);
            }
        }
        crate::search::apply(&host.inner).await;
        spawn_pins_poll(Arc::downgrade(&host.inner));
        Ok(host)
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
        let policy = Policy::new(&config.policy)?;
        let redactor = config.audit.redactor();
        let old: Vec<ServerConfig> = self.inner.settings().config.servers.clone();
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
        for name in diff.removed.iter().chain(diff.changed.iter()) {
            self.inner.stop_server(name);
        }
        let mut waits = Vec::new();
        for cfg in enabled(&new_servers) {
            if diff.added.contains(&cfg.name) || diff.changed.contains(&cfg.name) {
                waits.push(self.inner.launch(cfg));
            }
        }
        for wait in waits {
            if let Ok(Err(e)) = wait.await {
                tracing::error!(error = %e, "after reload");
            }
        }
        // Also republishes: the policy and `[tool_search]` may both have changed.
        crate::search::apply(&self.inner).await;
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
    let audit = if audit_enabled {
        let path = config
            .audit
            .path
            .clone()
            .unwrap_or_else(|| state::audit_path(&dir));
        Some(AuditLog::open(&path)?)
    } else {
        None
    };
    Ok((pins, decisions, audit))
}

/// Subscriptions and completions go to the server that owns the resource or prompt.
fn install_upstream_hooks(inner: &Arc<Inner>) {
    let weak = Arc::downgrade(inner);
    let hook_weak = weak.clone();
    let server = inner.server.clone().on_subscribe(move |uri, on| {
        let Some(inner) = hook_weak.upgrade() else {
            return;
        };
        let Some(owner) = inner.resource_owner(uri) else {
            return;
        };
        let Some(client) = inner.live_client(&owner) else {
            return;
        };
        let uri = uri.to_owned();
        tokio::spawn(async move {
            let result = if on {
                client.subscribe(&uri).await
            } else {
                client.unsubscribe(&uri).await
            };
            if let Err(e) = result {
                tracing::debug!(server = %owner, %uri, error = %e, "subscription not forwarded");
            }
        });
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
            let inner = weak.upgrade().ok_or("the gateway is shutting down")?;
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
        (
            self.options.sandbox_helper.clone(),
            self.options.start_timeout,
            cfg.call_timeout.unwrap_or(self.options.call_timeout),
            self.options.health_interval,
        )
    }

    /// Starts supervising `cfg`; the receiver resolves after its first attempt.
    fn launch(self: &Arc<Self>, cfg: ServerConfig) -> oneshot::Receiver<Result<(), HostError>> {
        let (live_tx, live_rx) = watch::channel(None);
        let (stop_tx, stop_rx) = watch::channel(false);
        let (ready_tx, ready_rx) = oneshot::channel();
        lock(&self.running).insert(
            cfg.name.clone(),
            Running {
                cfg: cfg.clone(),
                live: live_rx,
                stop: stop_tx,
            },
        );
        tokio::spawn(supervisor::supervise(
            Arc::downgrade(self),
            cfg,
            live_tx,
            stop_rx,
            ready_tx,
        ));
        ready_rx
    }

    fn stop_server(&self, name: &str) {
        if let Some(running) = lock(&self.running).remove(name) {
            let _ = running.stop.send(true);
        }
        self.withdraw(name);
    }

    fn live_servers(&self) -> usize {
        lock(&self.running)
            .values()
            .filter(|r| r.live.borrow().is_some())
            .count()
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

    /// Fetches a server's tools, resources and prompts and publishes them. At start a
    /// name collision is an error; later it only drops the newcomer.
    pub(crate) async fn refresh_catalog(
        self: &Arc<Self>,
        server: &str,
        client: &Arc<Client>,
        at_start: bool,
    ) -> Result<(), HostError> {
        let caps = client.server_capabilities().clone();
        let tools: Vec<Arc<Tool>> = if caps.tools.is_some() {
            client
                .list_all_tools()
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(server, error = %e, "tools/list failed");
                    Vec::new()
                })
                .into_iter()
                .map(Arc::new)
                .collect()
        } else {
            Vec::new()
        };
        lock(&self.catalog)
            .fetched
            .insert(server.to_owned(), tools.clone());
        self.publish_tools(server, tools, at_start)?;
        if caps.resources.is_some() {
            let resources = client.list_all_resources().await.unwrap_or_default();
            let templates = client
                .list_all_resource_templates()
                .await
                .unwrap_or_default();
            self.publish_resources(server, resources, templates);
        }
        if caps.prompts.is_some() {
            let prompts = client.list_all_prompts().await.unwrap_or_default();
            self.publish_prompts(server, prompts, at_start)?;
        }
        Ok(())
    }

    /// Re-evaluates every server's last tool list (policy reloaded, pins approved).
    pub(crate) fn republish_all(self: &Arc<Self>) {
        let fetched: Vec<(String, Vec<Arc<Tool>>)> = lock(&self.catalog)
            .fetched
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (server, tools) in fetched {
            if let Err(e) = self.publish_tools(&server, tools, false) {
                tracing::warn!(%server, error = %e, "tools not republished");
            }
        }
    }

    /// Decides, for each tool of `server`, whether it is callable, listed or held back,
    /// and brings the upstream server's registrations in line.
    fn publish_tools(
        self: &Arc<Self>,
        server: &str,
        tools: Vec<Arc<Tool>>,
        at_start: bool,
    ) -> Result<(), HostError> {
        let settings = self.settings();
        let trust = self
            .server_config(server)
            .map(|c| trust_override(&c))
            .unwrap_or_default();
        let pins_config = &settings.config.pins;
        let others: Vec<(String, String)> = {
            let catalog = lock(&self.catalog);
            catalog
                .fetched
                .iter()
                .filter(|(s, _)| s.as_str() != server)
                .flat_map(|(s, list)| list.iter().map(|t| (s.clone(), t.name.clone())))
                .collect()
        };
        let other_refs: Vec<(&str, &str)> = others
            .iter()
            .map(|(s, t)| (s.as_str(), t.as_str()))
            .collect();
        let index = scan::ToolIndex::new(&other_refs);

        let mut entries: Vec<(String, Arc<ToolEntry>)> = Vec::new();
        let mut held: Vec<(String, Held)> = Vec::new();
        let mut seen: HashMap<String, String> = HashMap::new();
        for tool in tools {
            let exposed = exposed_name(server, &tool.name);
            if let Some(first) = seen.insert(exposed.clone(), tool.name.clone()) {
                let msg = format!(
                    "server {server} lists tools {first:?} and {:?}, which would both be shown as {exposed}",
                    tool.name
                );
                if at_start {
                    return Err(HostError::Collision(msg));
                }
                tracing::warn!("{msg}; the second is dropped");
                continue;
            }
            if let Some(h) = self.screen(server, &exposed, &tool, &index, pins_config) {
                held.push((exposed, h));
                continue;
            }
            // Checked against the meta-schema now; compiled on the tool's first call (see
            // `ToolEntry::validator`).
            match jsonschema::meta::validate(&tool.input_schema) {
                Ok(()) => {}
                Err(e) => {
                    held.push((
                        exposed,
                        Held {
                            server: server.to_owned(),
                            rule: "schema".into(),
                            reason: format!(
                                "its inputSchema is not a valid JSON Schema ({e}); moat cannot check its arguments"
                            ),
                        },
                    ));
                    continue;
                }
            }
            let labels = settings.policy.labels(
                &ToolRef {
                    server,
                    tool: &tool.name,
                    annotations: tool.annotations.as_ref(),
                },
                &trust,
            );
            entries.push((
                exposed,
                Arc::new(ToolEntry {
                    server: server.to_owned(),
                    tool,
                    validator: OnceLock::new(),
                    labels,
                }),
            ));
        }

        let mut catalog = lock(&self.catalog);
        if !catalog.fetched.contains_key(server) {
            // Withdrawn while this list was being screened (the server went away or was
            // removed): publishing now would bring back tools nobody can call.
            return Ok(());
        }
        for (exposed, _) in entries.iter() {
            if let Some(owner) = catalog.tools.get(exposed).map(|e| e.server.clone())
                && owner != server
            {
                let msg = format!(
                    "{exposed} would name a tool of server {server} and one of server {owner}"
                );
                if at_start {
                    return Err(HostError::Collision(msg));
                }
                tracing::warn!("{msg}; the newcomer is dropped");
            }
        }
        catalog.tools.retain(|_, e| e.server != server);
        catalog.held.retain(|_, h| h.server != server);
        for (exposed, h) in held {
            tracing::warn!(tool = %exposed, reason = %h.reason, "tool held back");
            catalog.held.insert(exposed, h);
        }
        let mut listed: HashMap<String, Arc<Tool>> = HashMap::new();
        for (exposed, entry) in entries {
            if catalog.tools.contains_key(&exposed) {
                continue;
            }
            let visible = settings.policy.visible(&ToolRef {
                server,
                tool: &entry.tool.name,
                annotations: entry.tool.annotations.as_ref(),
            });
            if visible {
                listed.insert(
                    exposed.clone(),
                    Arc::new(client_definition(&exposed, &entry.tool)),
                );
            }
            catalog.tools.insert(exposed, entry);
        }
        catalog.searchable.retain(|_, (owner, _)| owner != server);
        for (exposed, def) in &listed {
            catalog
                .searchable
                .insert(exposed.clone(), (server.to_owned(), def.clone()));
        }
        // In search mode only the always-listed tools are registered; the rest are found
        // through search_tools.
        if self.search.is_active() {
            listed.retain(|exposed, _| self.search.always_listed(exposed));
        }
        // Bring the upstream registrations in line: drop what went, add what changed.
        let gone: Vec<String> = catalog
            .registered
            .keys()
            .filter(|name| {
                owner_of(name, &catalog) == Some(server) || !catalog.tools.contains_key(*name)
            })
            .filter(|name| !listed.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            catalog.registered.remove(&name);
            self.server.remove_tool(&name);
        }
        for (exposed, def) in listed {
            if catalog.registered.get(&exposed) == Some(&def) {
                continue;
            }
            catalog.registered.insert(exposed.clone(), def.clone());
            self.register_tool(def, exposed);
        }
        drop(catalog);
        crate::search::catalog_changed(self);
        Ok(())
    }

    /// Held back, or fit to publish: the description scan first, then the pin.
    fn screen(
        &self,
        server: &str,
        exposed: &str,
        tool: &Tool,
        others: &scan::ToolIndex,
        pins: &crate::pins::PinsConfig,
    ) -> Option<Held> {
        let findings = scan::scan_tool_in(server, tool, others);
        let mut blocking = Vec::new();
        for finding in &findings {
            match pins.action(finding.kind) {
                ScanAction::Block => blocking.push(finding),
                ScanAction::Warn => {
                    tracing::warn!(tool = %exposed, finding = %finding.detail, "suspicious tool definition")
                }
                _ => {}
            }
        }
        if let Some(first) = blocking.first() {
            let details: Vec<String> = blocking.iter().map(|f| f.detail.clone()).collect();
            return Some(Held {
                server: server.to_owned(),
                rule: format!("scan: {}", first.kind),
                reason: format!(
                    "its definition looks poisoned ({}); moat keeps it from the model. \
                     If it is benign, set `[pins] {} = \"warn\"` in the configuration.",
                    details.join("; "),
                    first.kind.config_key()
                ),
            });
        }
        if !pins.enabled {
            return None;
        }
        match self.pins.observe(server, exposed, tool) {
            Ok(PinStatus::Changed { pinned }) => {
                let diff =
                    crate::pins::diff(&pinned.definition, &crate::pins::pinned_definition(tool));
                Some(Held {
                    server: server.to_owned(),
                    rule: "pin changed".into(),
                    reason: format!(
                        "its definition changed since it was approved, so it is held back until a \
                         person approves it again: `moat pins approve {exposed}` (see `moat pins list`). \
                         What changed:\n{diff}"
                    ),
                })
            }
            Ok(_) => None,
            Err(e) => Some(Held {
                server: server.to_owned(),
                rule: "pin store".into(),
                reason: format!("its pin could not be checked ({e}); held back to be safe"),
            }),
        }
    }

    fn register_tool(self: &Arc<Self>, def: Arc<Tool>, exposed: String) {
        let weak = Arc::downgrade(self);
        let _ = self
            .server
            .clone()
            .tool_def(def, move |ctx: moat::RequestContext, args: Value| {
                let weak = weak.clone();
                let exposed = exposed.clone();
                async move {
                    match weak.upgrade() {
                        Some(inner) => Ok(crate::call::call(inner, ctx, &exposed, args).await),
                        None => Err("the gateway is shutting down".to_owned()),
                    }
                }
            });
    }

    fn publish_resources(
        self: &Arc<Self>,
        server: &str,
        resources: Vec<Resource>,
        templates: Vec<ResourceTemplate>,
    ) {
        let mut catalog = lock(&self.catalog);
        let old: Vec<String> = catalog
            .resources
            .iter()
            .filter(|(_, s)| s.as_str() == server)
            .map(|(u, _)| u.clone())
            .collect();
        for uri in old {
            catalog.resources.remove(&uri);
            self.server.remove_resource(&uri);
        }
        let old: Vec<String> = catalog
            .templates
            .iter()
            .filter(|(_, s)| s.as_str() == server)
            .map(|(u, _)| u.clone())
            .collect();
        for t in old {
            catalog.templates.remove(&t);
            self.server.remove_resource_template(&t);
        }
        for resource in resources {
            if let Some(owner) = catalog.resources.get(&resource.uri) {
                tracing::warn!(uri = %resource.uri, %owner, other = server, "two servers offer one resource URI; the first keeps it");
                continue;
            }
            catalog
                .resources
                .insert(resource.uri.clone(), server.to_owned());
            let _ = self
                .server
                .clone()
                .resource_def(resource, self.reader(server));
        }
        for template in templates {
            if catalog.templates.contains_key(&template.uri_template) {
                continue;
            }
            let key = template.uri_template.clone();
            match self
                .server
                .clone()
                .try_resource_template(template, self.reader(server))
            {
                Ok(_) => {
                    catalog.templates.insert(key, server.to_owned());
                }
                Err(e) => {
                    tracing::warn!(server, template = %key, error = %e, "resource template skipped")
                }
            }
        }
    }

    /// A resource handler that reads from `server`.
    fn reader(
        self: &Arc<Self>,
        server: &str,
    ) -> impl Fn(ResourceRequest) -> ReadFuture + Send + Sync + 'static {
        let weak = Arc::downgrade(self);
        let server = server.to_owned();
        move |req: ResourceRequest| {
            let weak = weak.clone();
            let server = server.clone();
            Box::pin(async move {
                let inner = weak.upgrade().ok_or("the gateway is shutting down")?;
                let client = inner
                    .live_client(&server)
                    .ok_or_else(|| format!("server {server} is not running (restarting)"))?;
                let result = client
                    .read_resource(&req.uri)
                    .await
                    .map_err(|e| format!("server {server}: {e}"))?;
                if inner
                    .server_config(&server)
                    .and_then(|c| c.trust.untrusted)
                    .unwrap_or(false)
                {
                    inner
                        .sessions
                        .taint(&req.ctx, &format!("resource {} of {server}", req.uri));
                }
                Ok(result.contents)
            })
        }
    }

    fn publish_prompts(
        self: &Arc<Self>,
        server: &str,
        prompts: Vec<Prompt>,
        at_start: bool,
    ) -> Result<(), HostError> {
        let mut catalog = lock(&self.catalog);
        let old: Vec<String> = catalog
            .prompts
            .iter()
            .filter(|(_, (s, _))| s.as_str() == server)
            .map(|(k, _)| k.clone())
            .collect();
        for name in old {
            catalog.prompts.remove(&name);
            self.server.remove_prompt(&name);
        }
        for prompt in prompts {
            let exposed = exposed_name(server, &prompt.name);
            if let Some((owner, _)) = catalog.prompts.get(&exposed) {
                let msg =
                    format!("prompt {exposed} of server {server} collides with one of {owner}");
                if at_start {
                    return Err(HostError::Collision(msg));
                }
                tracing::warn!("{msg}; dropped");
                continue;
            }
            catalog
                .prompts
                .insert(exposed.clone(), (server.to_owned(), prompt.name.clone()));
            let mut def = prompt.clone();
            def.name = exposed;
            let weak = Arc::downgrade(self);
            let server = server.to_owned();
            let original = prompt.name.clone();
            let _ = self.server.clone().prompt_def(
                def,
                move |_ctx: moat::RequestContext, args: BTreeMap<String, String>| {
                    let weak = weak.clone();
                    let server = server.clone();
                    let original = original.clone();
                    async move {
                        let inner = weak.upgrade().ok_or("the gateway is shutting down")?;
                        let client = inner.live_client(&server).ok_or_else(|| {
                            format!("server {server} is not running (restarting)")
                        })?;
                        client
                            .get_prompt(&original, args)
                            .await
                            .map_err(|e| format!("server {server}: {e}"))
                    }
                },
            );
        }
        Ok(())
    }

    /// Removes everything of `server` from what the client sees (it went away).
    pub(crate) fn withdraw(&self, server: &str) {
        let mut catalog = lock(&self.catalog);
        // Its last list goes too: a republish (pins, policy) must not bring back the
        // tools of a server that is down or removed.
        catalog.fetched.remove(server);
        catalog.held.retain(|_, h| h.server != server);
        catalog.tools.retain(|_, e| e.server != server);
        catalog.searchable.retain(|_, (owner, _)| owner != server);
        let gone: Vec<String> = catalog
            .registered
            .keys()
            .filter(|n| !catalog.tools.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            catalog.registered.remove(&name);
            self.server.remove_tool(&name);
        }
        let uris: Vec<String> = catalog
            .resources
            .iter()
            .filter(|(_, s)| s.as_str() == server)
            .map(|(u, _)| u.clone())
            .collect();
        for uri in uris {
            catalog.resources.remove(&uri);
            self.server.remove_resource(&uri);
        }
        let templates: Vec<String> = catalog
            .templates
            .iter()
            .filter(|(_, s)| s.as_str() == server)
            .map(|(u, _)| u.clone())
            .collect();
        for t in templates {
            catalog.templates.remove(&t);
            self.server.remove_resource_template(&t);
        }
        let prompts: Vec<String> = catalog
            .prompts
            .iter()
            .filter(|(_, (s, _))| s.as_str() == server)
            .map(|(k, _)| k.clone())
            .collect();
        for p in prompts {
            catalog.prompts.remove(&p);
            self.server.remove_prompt(&p);
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
                if let Err(e) = self.refresh_catalog(server, client, false).await {
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

    fn resource_owner(&self, uri: &str) -> Option<String> {
        let catalog = lock(&self.catalog);
        if let Some(owner) = catalog.resources.get(uri) {
            return Some(owner.clone());
        }
        catalog.templates.iter().find_map(|(t, owner)| {
            moat::server::UriTemplate::parse(t)
                .ok()
                .and_then(|t| t.matches(uri))
                .map(|_| owner.clone())
        })
    }

    async fn complete(&self, mut params: CompleteRequestParams) -> Result<Vec<String>, String> {
        let server = match &mut params.reference {
            CompletionReference::Prompt(p) => {
                let (server, original) = lock(&self.catalog)
                    .prompts
                    .get(&p.name)
                    .cloned()
                    .ok_or_else(|| format!("no prompt {}", p.name))?;
                p.name = original;
                server
            }
            CompletionReference::Resource(r) => lock(&self.catalog)
                .templates
                .get(&r.uri)
                .cloned()
                .ok_or_else(|| format!("no resource template {}", r.uri))?,
            _ => return Err("unknown completion reference".into()),
        };
        let client = self
            .live_client(&server)
            .ok_or_else(|| format!("server {server} is not running (restarting)"))?;
        client
            .complete(params)
            .await
            .map(|r| r.completion.values)
            .map_err(|e| format!("server {server}: {e}"))
    }
}

fn owner_of<'a>(name: &str, catalog: &'a Catalog) -> Option<&'a str> {
    catalog.tools.get(name).map(|e| e.server.as_str())
}

/// The definition the client sees: the server's, under the exposed name. Task support is
/// dropped: the gateway answers each call itself.
fn client_definition(exposed: &str, tool: &Tool) -> Tool {
    let mut def = tool.clone();
    def.name = exposed.to_owned();
    def.execution = None;
    def
}

fn trust_override(cfg: &ServerConfig) -> TrustOverride {
    TrustOverride {
        untrusted: cfg.trust.untrusted,
        private: cfg.trust.private,
        sink: cfg.trust.sink,
    }
}
