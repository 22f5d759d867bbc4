//! Publishing the catalog: what every downstream server offers, screened (description scan,
//! pins, schema), named for the client, and kept in the upstream server in one order.
//!
//! Each server's last lists are kept as it gave them ([`Fetched`]); its tools are screened
//! when they arrive. [`Inner::sync`] then works out what the client sees from scratch, in
//! configuration order — servers in the order the configuration names them, each
//! server's items in its own order — so the lists are the same after every start, restart
//! and reload, whatever order the servers came up in, and a name two servers offer always
//! goes to the one named first. The upstream server is brought in line in one
//! [`moat::Server::batch`]: a server coming, going or restarting costs each client one
//! `list_changed` per list kind at most, and none when nothing it sees changed.

use crate::telemetry::spans;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use tracing::Instrument;

use moat::server::{TaskStart, TaskTool};
use moat::{Client, ResourceRequest};
use moat_protocol::ErrorObject;
use moat_protocol::types::{
    Prompt, Resource, ResourceContents, ResourceTemplate, TaskSupport, Tool,
};
use serde_json::Value;

use crate::audit::Refusal;
use crate::catalog::{Catalog, Fetched, Held, ToolEntry, passed_on};
use crate::config::compat::SchemaMode;
use crate::error::HostError;
use crate::inner::Inner;
use crate::naming::prefixed_name;
use crate::pins::{PinStatus, ServerIdentity};
use crate::policy::{ToolRef, TrustOverride};
use crate::scan::{self, ScanAction};

/// A resource read forwarded to its server.
type ReadFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Vec<ResourceContents>, ErrorObject>> + Send>,
>;

impl Inner {
    /// Fetches a server's tools, resources and prompts and publishes them, provided
    /// `client` is still the server's live connection (it may have been stopped or
    /// replaced meanwhile: its lists would bring back what nobody can call).
    pub(crate) async fn refresh_catalog(
        self: &Arc<Self>,
        server: &str,
        client: &Arc<Client>,
    ) -> Result<(), HostError> {
        let caps = client.server_capabilities().clone();
        let mut fetched = Fetched {
            modern: client.protocol_version().map(|v| v.era()) == Some(moat_protocol::Era::Modern),
            ..Fetched::default()
        };
        if caps.tools.is_some() {
            fetched.tools = client
                .list_all_tools()
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(server, error = %e, "tools/list failed");
                    Vec::new()
                })
                .into_iter()
                .map(Arc::new)
                .collect();
        }
        if caps.resources.is_some() {
            fetched.resources = client.list_all_resources().await.unwrap_or_default();
            fetched.templates = client
                .list_all_resource_templates()
                .await
                .unwrap_or_default();
        }
        if caps.prompts.is_some() {
            fetched.prompts = client.list_all_prompts().await.unwrap_or_default();
        }
        if client.offers_skills() {
            fetched.skills = client
                .list_all_skills()
                .await
                .unwrap_or_default()
                .iter()
                .map(|s| s.name().to_owned())
                .collect();
        }
        let current = self
            .live_client(server)
            .is_some_and(|live| Arc::ptr_eq(&live, client));
        if !current {
            return Ok(());
        }
        let screened = self.screen_server(server, &fetched.tools);
        {
            let mut catalog = self.catalog();
            catalog.fetched.insert(server.to_owned(), fetched);
            install_screened(&mut catalog, server, screened);
        }
        self.sync();
        Ok(())
    }

    /// Screens every server's last tool list again and republishes (policy reloaded, pins
    /// approved, tool search switched).
    pub(crate) fn republish_all(self: &Arc<Self>) {
        let fetched: Vec<(String, Vec<Arc<Tool>>)> = self
            .catalog()
            .fetched
            .iter()
            .map(|(k, v)| (k.clone(), v.tools.clone()))
            .collect();
        for (server, tools) in fetched {
            let screened = self.screen_server(&server, &tools);
            let mut catalog = self.catalog();
            if catalog.fetched.contains_key(&server) {
                install_screened(&mut catalog, &server, screened);
            }
        }
        self.sync();
    }

    /// Removes everything of `server` from what the client sees (it went away, or was
    /// removed from the configuration).
    pub(crate) fn withdraw(self: &Arc<Self>, server: &str) {
        {
            let mut catalog = self.catalog();
            // Its last lists go too: a republish (pins, policy) must not bring back what
            // a server that is down or removed offered.
            catalog.fetched.remove(server);
            catalog.screened.remove(server);
            catalog.held.retain(|_, h| h.server != server);
        }
        self.sync();
    }

    /// Screens one server's tools: each is held back (poisoned description, changed pin,
    /// broken schema) or callable under its exposed name, in the server's order.
    fn screen_server(self: &Arc<Self>, server: &str, tools: &[Arc<Tool>]) -> Screened {
        let settings = self.settings();
        let cfg = self.server_config(server);
        let trust = cfg.as_ref().map(trust_override).unwrap_or_default();
        // Pins are the server's, whatever it is called here (see `pins`).
        let identity = cfg
            .as_ref()
            .map(ServerIdentity::of)
            .unwrap_or_else(|| ServerIdentity::named(server));
        let prefix = cfg
            .as_ref()
            .map(|c| c.exposed_prefix())
            .unwrap_or_else(|| format!("{server}{}", crate::naming::SEPARATOR));
        let others: Vec<(String, String)> = {
            let catalog = self.catalog();
            catalog
                .fetched
                .iter()
                .filter(|(s, _)| s.as_str() != server)
                .flat_map(|(s, f)| f.tools.iter().map(|t| (s.clone(), t.name.clone())))
                .collect()
        };
        let other_refs: Vec<(&str, &str)> = others
            .iter()
            .map(|(s, t)| (s.as_str(), t.as_str()))
            .collect();
        let index = scan::ToolIndex::new(&other_refs);

        let mut out = Screened::default();
        let mut seen: HashMap<String, String> = HashMap::new();
        for tool in tools {
            let exposed = prefixed_name(&prefix, &tool.name);
            if let Some(first) = seen.insert(exposed.clone(), tool.name.clone()) {
                out.collisions.push(format!(
                    "server {server} lists tools {first:?} and {:?}, which would both be shown as \
                     {exposed}; the first keeps the name",
                    tool.name
                ));
                continue;
            }
            let pins = &settings.config.pins;
            if let Some(h) = self.screen(server, &identity, &exposed, tool, &index, pins) {
                out.held.push((exposed, h));
                continue;
            }
            // Checked against the meta-schema now; compiled on the tool's first call (see
            // `ToolEntry::validator`).
            if let Err(e) = jsonschema::meta::validate(&tool.input_schema) {
                out.held.push((
                    exposed,
                    Held {
                        server: server.to_owned(),
                        rule: Refusal::Schema,
                        reason: format!(
                            "its inputSchema is not a valid JSON Schema ({e}); moat cannot check its arguments"
                        ),
                    },
                ));
                continue;
            }
            let labels = settings.policy.labels(
                &ToolRef {
                    server,
                    tool: &tool.name,
                    annotations: tool.annotations.as_ref(),
                },
                &trust,
            );
            out.entries.push((
                exposed,
                Arc::new(ToolEntry {
                    server: server.to_owned(),
                    tool: tool.clone(),
                    validator: OnceLock::new(),
                    labels,
                }),
            ));
        }
        out
    }

    /// Held back, or fit to publish: the description scan first, then the pin.
    fn screen(
        &self,
        server: &str,
        identity: &ServerIdentity,
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
                rule: Refusal::Rule(format!("scan: {}", first.kind)),
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
        match self.pins().observe(identity, server, exposed, tool) {
            Ok(PinStatus::Changed { pinned }) => {
                let diff =
                    crate::pins::diff(&pinned.definition, &crate::pins::pinned_definition(tool));
                Some(Held {
                    server: server.to_owned(),
                    rule: Refusal::PinChanged,
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
                rule: Refusal::PinStore,
                reason: format!("its pin could not be checked ({e}); held back to be safe"),
            }),
        }
    }

    /// Works out what the client sees from every server's screened lists, in
    /// configuration order, and brings the upstream server in line in one batch.
    pub(crate) fn sync(self: &Arc<Self>) {
        let settings = self.settings();
        let mut catalog = self.catalog();
        let catalog = &mut *catalog;
        // Configuration order; a server no longer configured (still being stopped) last.
        let configured: Vec<&str> = settings
            .config
            .servers
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        let mut servers: Vec<String> = configured
            .iter()
            .filter(|n| catalog.fetched.contains_key(**n))
            .map(|n| (*n).to_owned())
            .collect();
        let mut strays: Vec<String> = catalog
            .fetched
            .keys()
            .filter(|n| !configured.contains(&n.as_str()))
            .cloned()
            .collect();
        strays.sort();
        servers.extend(strays);
        let prefixes: HashMap<&str, String> = settings
            .config
            .servers
            .iter()
            .map(|s| (s.name.as_str(), s.exposed_prefix()))
            .collect();

        let mut collisions = BTreeSet::new();
        for server in &servers {
            if let Some(found) = catalog.screened.get(server) {
                collisions.extend(found.1.iter().cloned());
            }
        }

        // Tools: the first server (in configuration order) to offer a name keeps it.
        let mut tools: HashMap<String, Arc<ToolEntry>> = HashMap::new();
        let mut listed: Vec<(String, Arc<Tool>)> = Vec::new();
        for server in &servers {
            let Some((entries, _)) = catalog.screened.get(server) else {
                continue;
            };
            let modern = catalog.fetched.get(server).is_some_and(|f| f.modern);
            for (exposed, entry) in entries {
                if let Some(owner) = tools.get(exposed) {
                    collisions.insert(format!(
                        "{exposed} is offered by server {} and by server {server}; {} keeps it \
                         (it comes first in the configuration)",
                        owner.server, owner.server
                    ));
                    continue;
                }
                tools.insert(exposed.clone(), entry.clone());
                let visible = settings.policy.visible(&ToolRef {
                    server,
                    tool: &entry.tool.name,
                    annotations: entry.tool.annotations.as_ref(),
                });
                if visible {
                    let def = client_definition(
                        exposed,
                        &entry.tool,
                        modern,
                        settings.config.compat.schemas,
                    );
                    // Unchanged definitions keep their allocation (shared with the list).
                    let def = match catalog.searchable.get(exposed) {
                        Some((_, old)) if **old == def => old.clone(),
                        _ => Arc::new(def),
                    };
                    listed.push((exposed.clone(), def));
                }
            }
        }
        let searchable: HashMap<String, (String, Arc<Tool>)> = listed
            .iter()
            .filter_map(|(n, d)| {
                tools
                    .get(n)
                    .map(|e| (n.clone(), (e.server.clone(), d.clone())))
            })
            .collect();
        // In search mode only the always-listed tools are registered; the rest are found
        // through search_tools.
        if self.search().is_active() {
            listed.retain(|(exposed, _)| self.search().always_listed(exposed));
        }
        let tool_rank: HashMap<String, usize> = listed
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), i))
            .collect();

        // Resources, templates and prompts: the same rule.
        let mut resources: Vec<(String, Resource)> = Vec::new();
        let mut templates: Vec<(String, ResourceTemplate)> = Vec::new();
        let mut prompts: Vec<(String, String, Prompt)> = Vec::new();
        let mut shadowed = BTreeSet::new();
        let mut resource_owner: HashMap<String, String> = HashMap::new();
        let mut template_owner: HashMap<String, String> = HashMap::new();
        let mut prompt_owner: HashMap<String, String> = HashMap::new();
        for server in &servers {
            let Some(fetched) = catalog.fetched.get(server) else {
                continue;
            };
            for resource in &fetched.resources {
                if let Some(owner) = resource_owner.get(&resource.uri) {
                    shadowed.insert(format!(
                        "resource {} is offered by server {owner} and by server {server}; {owner} keeps it",
                        resource.uri
                    ));
                    continue;
                }
                resource_owner.insert(resource.uri.clone(), server.clone());
                resources.push((server.clone(), resource.clone()));
            }
            for template in &fetched.templates {
                if moat::server::UriTemplate::parse(&template.uri_template).is_err() {
                    tracing::warn!(server, template = %template.uri_template, "resource template skipped: malformed");
                    continue;
                }
                if let Some(owner) = template_owner.get(&template.uri_template) {
                    shadowed.insert(format!(
                        "resource template {} is offered by server {owner} and by server {server}; {owner} keeps it",
                        template.uri_template
                    ));
                    continue;
                }
                template_owner.insert(template.uri_template.clone(), server.clone());
                templates.push((server.clone(), template.clone()));
            }
            let prefix = prefixes
                .get(server.as_str())
                .cloned()
                .unwrap_or_else(|| format!("{server}{}", crate::naming::SEPARATOR));
            for prompt in &fetched.prompts {
                let exposed = prefixed_name(&prefix, &prompt.name);
                if let Some(owner) = prompt_owner.get(&exposed) {
                    collisions.insert(format!(
                        "prompt {exposed} is offered by server {owner} and by server {server}; {owner} keeps it"
                    ));
                    continue;
                }
                prompt_owner.insert(exposed.clone(), server.clone());
                prompts.push((exposed, server.clone(), prompt.clone()));
            }
        }
        for message in collisions.difference(&catalog.collisions) {
            tracing::error!("{message}");
        }
        for message in shadowed.difference(&catalog.shadowed) {
            tracing::warn!("{message}");
        }

        let gone_tools: Vec<String> = catalog
            .registered
            .keys()
            .filter(|n| !tool_rank.contains_key(*n))
            .cloned()
            .collect();
        let new_tools: Vec<(String, Arc<Tool>)> = listed
            .iter()
            .filter(|(n, d)| catalog.registered.get(n) != Some(d))
            .cloned()
            .collect();
        let resource_rank: HashMap<&str, usize> = resources
            .iter()
            .enumerate()
            .map(|(i, (_, r))| (r.uri.as_str(), i))
            .collect();
        let template_rank: HashMap<&str, usize> = templates
            .iter()
            .enumerate()
            .map(|(i, (_, t))| (t.uri_template.as_str(), i))
            .collect();
        let prompt_rank: HashMap<&str, usize> = prompts
            .iter()
            .enumerate()
            .map(|(i, (n, _, _))| (n.as_str(), i))
            .collect();

        self.server().batch(|b| {
            for name in &gone_tools {
                b.remove_tool(name);
            }
            for (exposed, def) in &new_tools {
                self.register_tool(b, def.clone(), exposed.clone());
            }
            // Tools of the gateway's own (tool search's) come first, in their order.
            b.sort_tools_by_key(|t| tool_rank.get(&t.name).map_or((0, 0), |&i| (1, i)));

            let kept: HashSet<&str> = resource_rank.keys().copied().collect();
            for uri in catalog.resources.keys() {
                if !kept.contains(uri.as_str()) {
                    b.remove_resource(uri);
                }
            }
            for (server, resource) in &resources {
                if catalog.resources.get(&resource.uri) != Some(&(server.clone(), resource.clone()))
                {
                    b.resource_def(resource.clone(), self.reader(server));
                }
            }
            b.sort_resources_by_key(|r| resource_rank.get(r.uri.as_str()).copied());

            let kept: HashSet<&str> = template_rank.keys().copied().collect();
            for key in catalog.templates.keys() {
                if !kept.contains(key.as_str()) {
                    b.remove_resource_template(key);
                }
            }
            for (server, template) in &templates {
                let same = catalog.templates.get(&template.uri_template)
                    == Some(&(server.clone(), template.clone()));
                if !same {
                    // Checked above: it parses.
                    let _ = b.try_resource_template(template.clone(), self.reader(server));
                }
            }
            b.sort_resource_templates_by_key(|t| {
                template_rank.get(t.uri_template.as_str()).copied()
            });

            let kept: HashSet<&str> = prompt_rank.keys().copied().collect();
            for name in catalog.prompts.keys() {
                if !kept.contains(name.as_str()) {
                    b.remove_prompt(name);
                }
            }
            for (exposed, server, prompt) in &prompts {
                if catalog.prompts.get(exposed) != Some(&(server.clone(), prompt.clone())) {
                    self.register_prompt(b, exposed, server, prompt);
                }
            }
            b.sort_prompts_by_key(|p| prompt_rank.get(p.name.as_str()).copied());
        });

        catalog.tools = tools;
        catalog.registered = listed.into_iter().collect();
        catalog.searchable = searchable;
        catalog.resources = resources
            .into_iter()
            .map(|(s, r)| (r.uri.clone(), (s, r)))
            .collect();
        catalog.templates = templates
            .into_iter()
            .map(|(s, t)| (t.uri_template.clone(), (s, t)))
            .collect();
        catalog.prompts = prompts.into_iter().map(|(n, s, p)| (n, (s, p))).collect();
        catalog.collisions = collisions;
        catalog.shadowed = shadowed;
        crate::reindex::catalog_changed(self);
    }

    fn register_tool(
        self: &Arc<Self>,
        b: &mut moat::server::Batch<'_>,
        def: Arc<Tool>,
        exposed: String,
    ) {
        let weak = Arc::downgrade(self);
        let handler = move |ctx: moat::RequestContext, args: Value| {
            let weak = weak.clone();
            let exposed = exposed.clone();
            async move {
                match weak.upgrade() {
                    Some(inner) => crate::call::call(inner, ctx, &exposed, args).await,
                    None => Err(ErrorObject::internal("the gateway is shutting down")),
                }
            }
        };
        // A task-capable tool becomes a task towards the client when its server makes the
        // call one (an optional one), or at once (a required one): see `call::forward`.
        let start = match def.task_support() {
            TaskSupport::Forbidden => {
                b.tool_def(def, handler);
                return;
            }
            TaskSupport::Required => TaskStart::Immediately,
            _ => TaskStart::Manual,
        };
        let task = TaskTool::with_support(def.task_support()).start(start);
        b.task_tool(Tool::clone(&def), task, handler);
    }

    fn register_prompt(
        self: &Arc<Self>,
        b: &mut moat::server::Batch<'_>,
        exposed: &str,
        server: &str,
        prompt: &Prompt,
    ) {
        let mut def = prompt.clone();
        def.name = exposed.to_owned();
        let weak = Arc::downgrade(self);
        let server = server.to_owned();
        let original = prompt.name.clone();
        b.prompt_def(
            def,
            move |ctx: moat::RequestContext, args: BTreeMap<String, String>| {
                let weak = weak.clone();
                let server = server.clone();
                let original = original.clone();
                async move {
                    let inner = weak
                        .upgrade()
                        .ok_or_else(|| ErrorObject::internal("the gateway is shutting down"))?;
                    let client = inner
                        .wait_live(&server)
                        .await
                        .map_err(ErrorObject::internal)?;
                    let options = moat::RequestOptions::default().answer_with(
                        crate::requests::answerer_for(&inner, &ctx, &server, &client),
                    );
                    client
                        .get_prompt_with(&original, args, options)
                        .instrument(spans::request("prompts/get", &original, &server))
                        .await
                        .map_err(|e| passed_on(&server, e))
                }
            },
        );
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
                let inner = weak
                    .upgrade()
                    .ok_or_else(|| ErrorObject::internal("the gateway is shutting down"))?;
                let client = inner
                    .wait_live(&server)
                    .await
                    .map_err(ErrorObject::internal)?;
                let options = moat::RequestOptions::default().answer_with(
                    crate::requests::answerer_for(&inner, &req.ctx, &server, &client),
                );
                let result = client
                    .read_resource_with(&req.uri, options)
                    .instrument(spans::request("resources/read", &req.uri, &server))
                    .await
                    .map_err(|e| passed_on(&server, e))?;
                if inner
                    .server_config(&server)
                    .and_then(|c| c.trust.untrusted)
                    .unwrap_or(false)
                {
                    inner
                        .sessions()
                        .taint(&req.ctx, &format!("resource {} of {server}", req.uri));
                }
                Ok(result.contents)
            })
        }
    }
}

/// One server's screening: callable entries in its order, held tools, and names it
/// offered twice.
#[derive(Default)]
struct Screened {
    entries: Vec<(String, Arc<ToolEntry>)>,
    held: Vec<(String, Held)>,
    collisions: Vec<String>,
}

fn install_screened(catalog: &mut Catalog, server: &str, screened: Screened) {
    // Screening runs again on every republish (tool search settling, a reload, a pin
    // approved elsewhere): a tool still held for the same reason was already reported.
    let told: HashMap<String, String> = catalog
        .held
        .iter()
        .filter(|(_, h)| h.server == server)
        .map(|(exposed, h)| (exposed.clone(), h.reason.clone()))
        .collect();
    catalog.held.retain(|_, h| h.server != server);
    for (exposed, h) in screened.held {
        if told.get(&exposed) != Some(&h.reason) {
            tracing::warn!(tool = %exposed, reason = %h.reason, "tool held back");
        }
        catalog.held.insert(exposed, h);
    }
    catalog
        .screened
        .insert(server.to_owned(), (screened.entries, screened.collisions));
}

/// The definition the client sees: the server's, under the exposed name, with its task
/// support (the gateway runs a call as a task when its server does). A 2026-07-28 server's
/// tools say nothing of tasks, since any call may become one: towards the client they are
/// `optional`.
/// The definition a client sees: the exposed name, task support in modern revisions, and
/// with `[compat] schemas = "portable"` the schemas rewritten for model providers. Only
/// what is shown changes: pins hash, and calls are checked against, the server's own.
fn client_definition(exposed: &str, tool: &Tool, modern: bool, schemas: SchemaMode) -> Tool {
    let mut def = tool.clone();
    def.name = exposed.to_owned();
    if schemas == SchemaMode::Portable {
        def.input_schema = moat::schema::portable::portable_input(&tool.input_schema);
        def.output_schema = tool
            .output_schema
            .as_ref()
            .map(moat::schema::portable::portable_output);
    }
    if modern && def.task_support() == TaskSupport::Forbidden {
        def = def.with_task_support(TaskSupport::Optional);
    }
    def
}

fn trust_override(cfg: &crate::config::ServerConfig) -> TrustOverride {
    TrustOverride {
        untrusted: cfg.trust.untrusted,
        private: cfg.trust.private,
        sink: cfg.trust.sink,
    }
}
