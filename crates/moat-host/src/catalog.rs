//! The catalog: what every downstream server offers, as it gave it and as the client sees
//! it (screened, named), kept as data. [`crate::publish`] fills it and brings the upstream
//! server in line with it.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use moat_protocol::ErrorObject;
use moat_protocol::types::{Prompt, Resource, ResourceTemplate, Tool};

use crate::audit::Refusal;
use crate::policy::Labels;

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
    pub(crate) rule: Refusal,
    /// For the client: what happened and what to do.
    pub(crate) reason: String,
}

/// One server's last lists, as it gave them.
#[derive(Default, Clone)]
pub(crate) struct Fetched {
    /// The server speaks 2026-07-28, where any call may become a task (its tools say
    /// nothing about it).
    pub(crate) modern: bool,
    pub(crate) tools: Vec<Arc<Tool>>,
    pub(crate) resources: Vec<Resource>,
    pub(crate) templates: Vec<ResourceTemplate>,
    pub(crate) prompts: Vec<Prompt>,
    /// The names of its skills when it started (policy rules may name them; the skills
    /// themselves are asked for when a client asks).
    pub(crate) skills: Vec<String>,
}

#[derive(Default)]
pub(crate) struct Catalog {
    /// Each server's last lists (republished when pins or policy change).
    pub(crate) fetched: HashMap<String, Fetched>,
    /// Each server's tools that passed screening, in its order, by exposed name, and the
    /// names it offered twice.
    pub(crate) screened: HashMap<String, ScreenedTools>,
    /// Tools kept from the client, by exposed name.
    pub(crate) held: HashMap<String, Held>,
    /// Every callable tool (listed or not), by exposed name.
    pub(crate) tools: HashMap<String, Arc<ToolEntry>>,
    /// What the upstream server lists, by exposed name.
    pub(crate) registered: HashMap<String, Arc<Tool>>,
    /// Every tool policy lets the client see, by exposed name: its server and its
    /// definition as the client sees it (what tool search ranks and describes).
    /// Shares each definition with `registered`.
    pub(crate) searchable: HashMap<String, (String, Arc<Tool>)>,
    /// Registered fixed resources by URI: the owner and the definition.
    pub(crate) resources: HashMap<String, (String, Resource)>,
    /// Registered resource templates by template: the owner and the definition.
    pub(crate) templates: HashMap<String, (String, ResourceTemplate)>,
    /// Registered prompts by exposed name: the owner and the server's own definition.
    pub(crate) prompts: HashMap<String, (String, Prompt)>,
    /// Names two servers (or one server twice) offer, and who keeps them.
    pub(crate) collisions: BTreeSet<String>,
    /// Resource URIs and templates two servers offer (not an error: resources have no
    /// prefix to tell them apart, so the first server's is read).
    pub(crate) shadowed: BTreeSet<String>,
}

/// A server's callable tools by exposed name, and its own collisions.
pub(crate) type ScreenedTools = (Vec<(String, Arc<ToolEntry>)>, Vec<String>);

impl Catalog {
    /// The server that owns the resource at `uri` (a fixed resource, else a template
    /// that matches it, the first in configuration order).
    pub(crate) fn resource_owner(&self, uri: &str) -> Option<String> {
        let catalog = self;
        if let Some((owner, _)) = catalog.resources.get(uri) {
            return Some(owner.clone());
        }
        let mut matching: Vec<(&String, &String)> = catalog
            .templates
            .iter()
            .filter(|(t, _)| {
                moat::server::UriTemplate::parse(t)
                    .ok()
                    .and_then(|t| t.matches(uri))
                    .is_some()
            })
            .map(|(t, (owner, _))| (t, owner))
            .collect();
        // Deterministic when several match: the template listed first.
        matching.sort();
        matching.first().map(|(_, owner)| (*owner).clone())
    }
}

/// What a server's failure becomes for the client: its own JSON-RPC error as it is (an
/// intermediary must not change it), anything else an internal error naming the server.
pub(crate) fn passed_on(server: &str, e: moat::Error) -> ErrorObject {
    match e {
        moat::Error::Remote { error, .. } => error,
        other => ErrorObject::internal(format!("server {server}: {other}")),
    }
}
