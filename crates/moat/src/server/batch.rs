//! Changing what a server offers several items at a time: [`Server::batch`].
//!
//! Every registration method of [`Server`] is a batch of one. A batch holds the registry
//! for its whole length, so connections never see half of it, and tells each connection
//! once per list kind that changed (`notifications/tools/list_changed`, …) instead of once
//! per item: a gateway that swaps one downstream server's fifty tools sends one
//! notification, not a hundred.

use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;

use moat_protocol::ErrorObject;
use moat_protocol::types::{Prompt, Resource, ResourceTemplate, Tool};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use super::options::TaskTool;
use super::prompts::{self, PromptEntry, PromptOutput, PromptReturn, arguments_from_schema};
use super::registry::{Registry, as_error_object};
use super::resources::{ResourceEntry, ResourceRequest, ResourceReturn, TemplateEntry, make_read};
use super::template::{TemplateError, UriTemplate};
use super::tools::{ToolEntry, ToolReturn, make_entry};
use crate::handler::RequestContext;
use crate::schema;

/// Which lists a batch changed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Changed {
    pub(crate) tools: bool,
    pub(crate) resources: bool,
    pub(crate) prompts: bool,
}

/// Registry changes applied together; see [`Server::batch`](super::Server::batch).
///
/// The methods mirror [`Server`](super::Server)'s registration methods. The batch holds the
/// server's registry locked: do not call the server's own methods from inside it.
pub struct Batch<'a> {
    pub(crate) registry: &'a mut Registry,
    pub(crate) changed: Changed,
}

impl std::fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch").finish_non_exhaustive()
    }
}

impl Batch<'_> {
    /// Answer `tools/call` for names no registered tool has; see
    /// [`Server::unknown_tool`](super::Server::unknown_tool). Changes no list.
    pub fn unknown_tool<F, Fut>(&mut self, f: F) -> &mut Self
    where
        F: Fn(RequestContext, String, Option<Box<serde_json::value::RawValue>>) -> Fut
            + Send
            + Sync
            + 'static,
        Fut: Future<Output = Result<moat_protocol::types::CallToolResult, ErrorObject>>
            + Send
            + 'static,
    {
        let f = Arc::new(f);
        self.registry.unknown_tool = Some(Arc::new(move |ctx, name, args| {
            let f = f.clone();
            Box::pin(async move { f(ctx, name, args).await })
        }));
        self
    }

    /// Show each caller only the tools `f` lets them see in `tools/list` (a gateway whose
    /// policy depends on who asks). It hides from the list only: calls are the handler's
    /// to refuse. Changes no list.
    pub fn tool_filter<F>(&mut self, f: F) -> &mut Self
    where
        F: Fn(&RequestContext, &moat_protocol::types::Tool) -> bool + Send + Sync + 'static,
    {
        self.registry.tool_filter = Some(Arc::new(f));
        self
    }

    /// Answer `completion/complete`; see [`Server::completion`](super::Server::completion).
    /// Changes no list.
    pub fn completion<E, F, Fut>(&mut self, f: F) -> &mut Self
    where
        E: Display + Send + 'static,
        F: Fn(moat_protocol::types::CompleteRequestParams) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<String>, E>> + Send + 'static,
    {
        let f = Arc::new(f);
        self.registry.completion = Some(Arc::new(move |_ctx, params| {
            let f = f.clone();
            Box::pin(async move {
                let mut values = f(params).await.map_err(|e| as_error_object(&e))?;
                // The spec caps a completion at 100 values.
                let total = values.len() as u64;
                values.truncate(100);
                Ok(moat_protocol::types::Completion {
                    has_more: Some(total > values.len() as u64),
                    total: Some(total),
                    values,
                })
            })
        }));
        self
    }

    /// Register (or replace, keeping its place) a tool from a full definition; see
    /// [`Server::tool_def`](super::Server::tool_def).
    pub fn tool_def<A, O, F, Fut>(&mut self, def: impl Into<Arc<Tool>>, f: F) -> &mut Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: ToolReturn,
        F: Fn(RequestContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        self.tool_entry(make_entry(def.into(), f));
        self
    }

    /// Register (or replace, keeping its place) a tool that may run as a task; see
    /// [`Server::task_tool`](super::Server::task_tool).
    pub fn task_tool<A, O, F, Fut>(&mut self, def: Tool, task: TaskTool, f: F) -> &mut Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: ToolReturn,
        F: Fn(RequestContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        let mut entry = make_entry(Arc::new(def.with_task_support(task.support)), f);
        entry.start = task.start;
        self.tool_entry(entry);
        self
    }

    pub(crate) fn tool_entry(&mut self, entry: ToolEntry) {
        let reg = &mut *self.registry;
        match reg.tool_index.get(&entry.def.name) {
            Some(&i) => reg.tools[i] = entry,
            None => {
                let i = reg.tools.len();
                reg.tool_index.insert(entry.def.name.clone(), i);
                reg.tools.push(entry);
            }
        }
        self.changed.tools = true;
    }

    /// Require the scopes `scopes` of callers of tool `name`: a caller whose OAuth access
    /// token lacks one is refused with error [`INSUFFICIENT_SCOPE`], which the HTTP server
    /// answers with 403 and `WWW-Authenticate: Bearer error="insufficient_scope",
    /// scope="…"` (step-up). Callers no issuer vouches for (stdio, a static token) have no
    /// scopes to check. Returns whether the tool exists; re-registering it clears them.
    ///
    /// [`INSUFFICIENT_SCOPE`]: moat_transport::http::server::INSUFFICIENT_SCOPE
    pub fn tool_scopes<S: Into<String>>(
        &mut self,
        name: &str,
        scopes: impl IntoIterator<Item = S>,
    ) -> bool {
        let reg = &mut *self.registry;
        let Some(&i) = reg.tool_index.get(name) else {
            return false;
        };
        reg.tools[i].scopes = scopes.into_iter().map(Into::into).collect();
        true
    }

    /// Remove a tool. Returns whether it existed.
    pub fn remove_tool(&mut self, name: &str) -> bool {
        let reg = &mut *self.registry;
        let Some(i) = reg.tool_index.remove(name) else {
            return false;
        };
        reg.tools.remove(i);
        for entry in &reg.tools[i..] {
            if let Some(slot) = reg.tool_index.get_mut(&entry.def.name) {
                *slot -= 1;
            }
        }
        self.changed.tools = true;
        true
    }

    /// Put the tools in the order of `key` (stable: equal keys keep their order). Clients
    /// are told only if the order changed.
    pub fn sort_tools_by_key<K: Ord>(&mut self, mut key: impl FnMut(&Tool) -> K) {
        let reg = &mut *self.registry;
        if sort_if_needed(&mut reg.tools, |t| key(&t.def)) {
            reg.tool_index = index_of(reg.tools.iter().map(|t| t.def.name.clone()));
            self.changed.tools = true;
        }
    }

    /// Register (or replace, keeping its place) a fixed resource; see
    /// [`Server::resource_def`](super::Server::resource_def).
    pub fn resource_def<O, F, Fut>(&mut self, def: Resource, f: F) -> &mut Self
    where
        O: ResourceReturn,
        F: Fn(ResourceRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        let read = make_read(def.mime_type.clone(), f);
        let entry = ResourceEntry { def, read };
        upsert(&mut self.registry.resources, entry, |a, b| {
            a.def.uri == b.def.uri
        });
        self.changed.resources = true;
        self
    }

    /// Remove the fixed resource at `uri`. Returns whether it existed.
    pub fn remove_resource(&mut self, uri: &str) -> bool {
        let removed = remove_where(&mut self.registry.resources, |r| r.def.uri == uri);
        self.changed.resources |= removed;
        removed
    }

    /// Put the fixed resources in the order of `key` (stable).
    pub fn sort_resources_by_key<K: Ord>(&mut self, mut key: impl FnMut(&Resource) -> K) {
        self.changed.resources |= sort_if_needed(&mut self.registry.resources, |r| key(&r.def));
    }

    /// Register (or replace, keeping its place) a resource template, refusing a malformed
    /// one; see [`Server::try_resource_template`](super::Server::try_resource_template).
    pub fn try_resource_template<O, F, Fut>(
        &mut self,
        def: ResourceTemplate,
        f: F,
    ) -> std::result::Result<&mut Self, TemplateError>
    where
        O: ResourceReturn,
        F: Fn(ResourceRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        let template = UriTemplate::parse(&def.uri_template)?;
        let read = make_read(def.mime_type.clone(), f);
        let entry = TemplateEntry {
            def,
            template,
            read,
        };
        upsert(&mut self.registry.templates, entry, |a, b| {
            a.def.uri_template == b.def.uri_template
        });
        self.changed.resources = true;
        Ok(self)
    }

    /// Remove the resource template `uri_template`. Returns whether it existed.
    pub fn remove_resource_template(&mut self, uri_template: &str) -> bool {
        let removed = remove_where(&mut self.registry.templates, |t| {
            t.def.uri_template == uri_template
        });
        self.changed.resources |= removed;
        removed
    }

    /// Put the resource templates in the order of `key` (stable).
    pub fn sort_resource_templates_by_key<K: Ord>(
        &mut self,
        mut key: impl FnMut(&ResourceTemplate) -> K,
    ) {
        self.changed.resources |= sort_if_needed(&mut self.registry.templates, |t| key(&t.def));
    }

    /// Register (or replace, keeping its place) a prompt from a full definition; see
    /// [`Server::prompt_def`](super::Server::prompt_def).
    pub fn prompt_def<A, O, F, Fut>(&mut self, mut def: Prompt, f: F) -> &mut Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: PromptReturn,
        F: Fn(RequestContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        if def.arguments.as_ref().is_none_or(Vec::is_empty) {
            let args = arguments_from_schema(&schema::input_schema::<A>());
            def.arguments = (!args.is_empty()).then_some(args);
        }
        let f = Arc::new(f);
        let name = def.name.clone();
        let get: prompts::PromptFn = Arc::new(move |ctx, args| {
            let f = f.clone();
            let decoded = serde_json::from_value::<A>(args).map_err(|e| {
                ErrorObject::invalid_params(format!("Invalid arguments for prompt {name}: {e}"))
            });
            Box::pin(async move {
                let args = decoded?;
                f(ctx, args)
                    .await
                    .into_result()
                    .map(PromptOutput::into_prompt_result)
                    .map_err(|e| as_error_object(&e))
            })
        });
        let entry = PromptEntry { def, get };
        upsert(&mut self.registry.prompts, entry, |a, b| {
            a.def.name == b.def.name
        });
        self.changed.prompts = true;
        self
    }

    /// Remove a prompt. Returns whether it existed.
    pub fn remove_prompt(&mut self, name: &str) -> bool {
        let removed = remove_where(&mut self.registry.prompts, |p| p.def.name == name);
        self.changed.prompts |= removed;
        removed
    }

    /// Put the prompts in the order of `key` (stable).
    pub fn sort_prompts_by_key<K: Ord>(&mut self, mut key: impl FnMut(&Prompt) -> K) {
        self.changed.prompts |= sort_if_needed(&mut self.registry.prompts, |p| key(&p.def));
    }
}

/// Put `entry` in the place of the item `same` pairs it with, else at the end.
fn upsert<T>(list: &mut Vec<T>, entry: T, same: impl Fn(&T, &T) -> bool) {
    match list.iter_mut().find(|item| same(item, &entry)) {
        Some(slot) => *slot = entry,
        None => list.push(entry),
    }
}

/// Remove the items `gone` picks; whether there were any.
fn remove_where<T>(list: &mut Vec<T>, gone: impl Fn(&T) -> bool) -> bool {
    let before = list.len();
    list.retain(|item| !gone(item));
    list.len() != before
}

/// Sort `list` by `key` (stable) unless it already is; whether the order changed.
fn sort_if_needed<T, K: Ord>(list: &mut [T], mut key: impl FnMut(&T) -> K) -> bool {
    if list.is_sorted_by_key(&mut key) {
        return false;
    }
    list.sort_by_key(key);
    true
}

fn index_of(names: impl Iterator<Item = String>) -> HashMap<String, usize> {
    names.enumerate().map(|(i, n)| (n, i)).collect()
}
