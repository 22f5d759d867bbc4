//! [`Server`]: an MCP server built from plain async functions.
//!
//! ```no_run
//! use moat::{Server, schemars::JsonSchema};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Add { a: i64, b: i64 }
//!
//! # async fn run() -> moat::Result<()> {
//! Server::new("calc", "1.0")
//!     .tool("add", "Add two integers", |Add { a, b }| async move { Ok::<_, String>(a + b) })
//!     .resource("config://app", "The app's configuration", || async { Ok::<_, String>("debug = false") })
//!     .serve_stdio()
//!     .await
//! # }
//! ```

mod batch;
mod dispatch;
mod http;
mod inner;
mod options;
mod pagination;
mod prompts;
mod registry;
mod resources;
mod session;
pub mod skills;
mod task_store;
pub mod tasks;
mod template;
mod tools;

use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::sync::{Arc, Mutex, RwLock, Weak};

use moat_protocol::ErrorObject;
use moat_protocol::lifecycle::Role;
use moat_protocol::types::{
    CompleteRequestParams, GetPromptResult, Implementation, LoggingMessageNotificationParams,
    Prompt, Resource, ResourceTemplate, Tool, methods,
};
use moat_protocol::version::SupportedVersions;
use moat_transport::Connection;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

pub use batch::Batch;
pub use options::ServerOptions;
pub use prompts::{PromptOutput, PromptReturn};
pub use resources::{Blob, ResourceError, ResourceOutput, ResourceRequest, ResourceReturn};
pub use skills::{SkillBundle, SkillError, SkillSource};
pub use tasks::{TaskHandle, TaskOptions, TaskStart, TaskTool};
pub use template::{TemplateError, UriTemplate};
pub use tools::{Json, ToolOutput, ToolReturn};

use crate::error::Result;
use crate::handler::{BoxFuture, RequestContext};
use crate::peer::Peer;
use dispatch::SessionHandler;
use inner::ServerInner;
use registry::Registry;
use session::Session;
use tools::{ToolEntry, make_entry};

/// An MCP server: register tools, resources and prompts, then serve connections.
/// Cloning is cheap and clones share everything; registering after serving has started
/// updates live connections and sends them `list_changed`.
#[derive(Clone)]
pub struct Server {
    inner: Arc<ServerInner>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("info", &self.inner.info)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A server named `name` at `version`, with nothing registered yet.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Server {
        Server::with_info(Implementation::new(name, version))
    }

    /// A server described by `info` (title, website, icons, …).
    pub fn with_info(info: Implementation) -> Server {
        Server {
            inner: Arc::new(ServerInner {
                info,
                subscribe_hook: RwLock::new(None),
                ready_hook: RwLock::new(None),
                declare_all: std::sync::atomic::AtomicBool::new(false),
                roots_hook: RwLock::new(None),
                notices_hook: RwLock::new(None),
                instructions: RwLock::new(None),
                registry: RwLock::new(Registry::default()),
                skills: RwLock::new(Vec::new()),
                skill_source: RwLock::new(None),
                options: RwLock::new(Arc::new(ServerOptions::default())),
                sessions: Mutex::new(HashMap::new()),
                tasks: Arc::default(),
            }),
        }
    }

    /// Natural-language guidance for the model, sent at initialization.
    pub fn instructions(self, text: impl Into<String>) -> Self {
        *self
            .inner
            .instructions
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(text.into());
        self
    }

    /// Replace the server's options.
    pub fn options(self, options: ServerOptions) -> Self {
        self.inner.edit_options(|o| *o = options);
        self
    }

    /// The key sealing 2026-07-28 `requestState`, and earlier keys still accepted: give
    /// every instance behind a load balancer the same ones, so any instance takes a retry.
    pub fn state_keys(self, current: crate::StateKey, retired: Vec<crate::StateKey>) -> Self {
        self.inner.edit_options(|o| {
            o.state_key = current;
            o.retired_state_keys = retired;
        });
        self
    }

    /// Items per page of the list methods.
    pub fn page_size(self, n: usize) -> Self {
        self.inner.edit_options(|o| o.page_size = n.max(1));
        self
    }

    /// The protocol revisions to speak (all five by default).
    pub fn versions(self, versions: SupportedVersions) -> Self {
        self.inner.edit_options(|o| o.peer.versions = versions);
        self
    }

    /// The implementation info sent to clients.
    pub fn info(&self) -> &Implementation {
        &self.inner.info
    }

    /// Register a tool: `f` takes the decoded arguments (`A`'s JSON Schema becomes the
    /// tool's `inputSchema`) and returns any [`ToolOutput`] or an error, which the client
    /// sees as an `isError` result.
    pub fn tool<A, O, F, Fut>(self, name: &str, description: &str, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: ToolReturn,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        let def = Tool::new(name, serde_json::Value::Null).with_description(description);
        self.tool_def(def, move |_ctx: RequestContext, a: A| f(a))
    }

    /// Register a tool whose handler also gets the [`RequestContext`] (progress, logging,
    /// cancellation, requests to the client).
    pub fn tool_with_context<A, O, F, Fut>(self, name: &str, description: &str, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: ToolReturn,
        F: Fn(RequestContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        let def = Tool::new(name, serde_json::Value::Null).with_description(description);
        self.tool_def(def, f)
    }

    /// Register a tool from a full definition (title, annotations, icons, …). A `Null`
    /// `inputSchema` is filled in from `A`; a missing `outputSchema` from the output type.
    /// A definition that declares `execution.taskSupport` makes a task-capable tool whose
    /// calls become tasks at once ([`task_tool`](Self::task_tool) chooses otherwise).
    pub fn tool_def<A, O, F, Fut>(self, def: impl Into<Arc<Tool>>, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: ToolReturn,
        F: Fn(RequestContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        self.register_tool(make_entry(def.into(), f))
    }

    /// Register a tool that may run as a task: as [`tool_def`](Self::tool_def), with the
    /// definition's `execution.taskSupport` and when a call becomes a task taken from
    /// `task`. See [`tasks`] for what the handler can do as a task.
    pub fn task_tool<A, O, F, Fut>(self, def: Tool, task: TaskTool, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: ToolReturn,
        F: Fn(RequestContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        self.batch(|b| {
            b.task_tool(def, task, f);
        });
        self
    }

    /// Require scopes of the callers of tool `name` (registered before); see
    /// [`Batch::tool_scopes`].
    pub fn tool_scopes<S: Into<String>>(
        self,
        name: &str,
        scopes: impl IntoIterator<Item = S>,
    ) -> Self {
        self.batch(|b| b.tool_scopes(name, scopes));
        self
    }

    fn register_tool(self, entry: ToolEntry) -> Self {
        self.batch(|b| b.tool_entry(entry));
        self
    }

    /// Change several things at once: `f` registers, removes and orders tools, resources
    /// and prompts on a [`Batch`], and live connections are then told once per list that
    /// changed. Connections never see the lists half changed. Do not call this server's
    /// own methods from inside `f`: the batch holds its registry.
    ///
    /// ```
    /// # use moat::Server;
    /// # use moat::protocol::types::Tool;
    /// # use serde_json::json;
    /// let server = Server::new("s", "1");
    /// server.batch(|b| {
    ///     for name in ["b", "a"] {
    ///         let def = Tool::new(name, json!({"type": "object"}));
    ///         b.tool_def(def, |_ctx, _: serde_json::Value| async { Ok::<_, String>("ok") });
    ///     }
    ///     b.sort_tools_by_key(|t| t.name.clone());
    /// });
    /// ```
    pub fn batch<T>(&self, f: impl FnOnce(&mut Batch<'_>) -> T) -> T {
        let (out, changed) = {
            let mut registry = self.inner.registry_mut();
            let mut batch = Batch {
                registry: &mut registry,
                changed: batch::Changed::default(),
            };
            let out = f(&mut batch);
            (out, batch.changed)
        };
        if changed.tools {
            self.spawn_notify(methods::NOTIFICATIONS_TOOLS_LIST_CHANGED);
        }
        if changed.resources {
            self.spawn_notify(methods::NOTIFICATIONS_RESOURCES_LIST_CHANGED);
        }
        if changed.prompts {
            self.spawn_notify(methods::NOTIFICATIONS_PROMPTS_LIST_CHANGED);
        }
        out
    }

    /// Remove a tool; live connections are told the list changed. Returns whether it existed.
    pub fn remove_tool(&self, name: &str) -> bool {
        self.batch(|b| b.remove_tool(name))
    }

    /// Remove the fixed resource at `uri`; live connections are told the list changed.
    /// Returns whether it existed.
    pub fn remove_resource(&self, uri: &str) -> bool {
        self.batch(|b| b.remove_resource(uri))
    }

    /// Remove the resource template `uri_template`; live connections are told the list
    /// changed. Returns whether it existed.
    pub fn remove_resource_template(&self, uri_template: &str) -> bool {
        self.batch(|b| b.remove_resource_template(uri_template))
    }

    /// Remove a prompt; live connections are told the list changed. Returns whether it
    /// existed.
    pub fn remove_prompt(&self, name: &str) -> bool {
        self.batch(|b| b.remove_prompt(name))
    }

    /// Offer a skill (the Skills extension, `io.modelcontextprotocol/skills`): listed by
    /// `skills/list`, its files read with `resources/read` and `resources/directory/read`.
    /// A skill with the same root URI is replaced.
    pub fn skill(self, skill: SkillBundle) -> Self {
        {
            let mut skills = self.inner.skills.write().unwrap_or_else(|e| e.into_inner());
            let root = skill.root_uri();
            match skills.iter().position(|s| s.root_uri() == root) {
                Some(i) => skills[i] = Arc::new(skill),
                None => skills.push(Arc::new(skill)),
            }
        }
        self
    }

    /// Offer the skills of `source` too, looked up when a client asks (after the skills
    /// given with [`skill`](Self::skill)); replaces an earlier source. The extension is
    /// declared from then on, even while the source has nothing to offer.
    pub fn skill_source(self, source: impl SkillSource) -> Self {
        *self
            .inner
            .skill_source
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(source));
        self
    }

    /// Offer every skill under `dir` (a directory holding a `SKILL.md`, or directories of
    /// them), read into memory now.
    pub fn skills_from(
        self,
        dir: impl AsRef<std::path::Path>,
    ) -> std::result::Result<Self, SkillError> {
        let mut server = self;
        for skill in skills::skills_in(dir)? {
            server = server.skill(skill);
        }
        Ok(server)
    }

    /// Register a fixed resource at `uri`.
    pub fn resource<O, F, Fut>(self, uri: &str, name: &str, f: F) -> Self
    where
        O: ResourceReturn,
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        self.resource_def(Resource::new(uri, name), move |_req: ResourceRequest| f())
    }

    /// Register a fixed resource from a full definition (description, MIME type, size, …).
    pub fn resource_def<O, F, Fut>(self, def: Resource, f: F) -> Self
    where
        O: ResourceReturn,
        F: Fn(ResourceRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        self.batch(|b| {
            b.resource_def(def, f);
        });
        self
    }

    /// Register a resource template (RFC 6570, e.g. `file:///{+path}`); `f` gets the URI
    /// and its variables.
    ///
    /// # Panics
    /// If the template is malformed: that is a programming error, found at startup.
    /// Use [`Server::try_resource_template`] for templates from configuration.
    pub fn resource_template<O, F, Fut>(self, uri_template: &str, name: &str, f: F) -> Self
    where
        O: ResourceReturn,
        F: Fn(ResourceRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        match self.try_resource_template(ResourceTemplate::new(uri_template, name), f) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// Register a resource template from a full definition, refusing a malformed template.
    pub fn try_resource_template<O, F, Fut>(
        self,
        def: ResourceTemplate,
        f: F,
    ) -> std::result::Result<Self, TemplateError>
    where
        O: ResourceReturn,
        F: Fn(ResourceRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        self.batch(|b| b.try_resource_template(def, f).map(|_| ()))?;
        Ok(self)
    }

    /// Register a prompt. Its arguments come from `A`'s fields (all strings on the wire);
    /// use [`NoArgs`](crate::NoArgs) for a prompt without arguments.
    pub fn prompt<A, O, F, Fut>(self, name: &str, description: &str, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: PromptReturn,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        let mut def = Prompt::new(name);
        def.description = Some(description.to_owned());
        self.prompt_def(def, move |_ctx: RequestContext, a: A| f(a))
    }

    /// Register a prompt from a full definition. Empty `arguments` are filled in from `A`.
    pub fn prompt_def<A, O, F, Fut>(self, def: Prompt, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: PromptReturn,
        F: Fn(RequestContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        self.batch(|b| {
            b.prompt_def(def, f);
        });
        self
    }

    /// Answer `tools/call` for names no registered tool has (by default: error -32602,
    /// "Unknown tool"). `f` gets the name and the raw arguments; a gateway uses it to
    /// refuse, and record, calls to tools it keeps from the list.
    pub fn unknown_tool<F, Fut>(self, f: F) -> Self
    where
        F: Fn(RequestContext, String, Option<Box<serde_json::value::RawValue>>) -> Fut
            + Send
            + Sync
            + 'static,
        Fut: Future<Output = std::result::Result<moat_protocol::types::CallToolResult, ErrorObject>>
            + Send
            + 'static,
    {
        self.batch(|b| {
            b.unknown_tool(f);
        });
        self
    }

    /// Answer `completion/complete`: `f` gets the reference (prompt or resource template),
    /// the argument being completed and its context, and returns suggestions.
    pub fn completion<E, F, Fut>(self, f: F) -> Self
    where
        E: Display + Send + 'static,
        F: Fn(CompleteRequestParams) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Vec<String>, E>> + Send + 'static,
    {
        self.batch(|b| {
            b.completion(f);
        });
        self
    }

    /// Be told when a connection starts (`true`) or stops (`false`) watching a resource: a
    /// handshake-era `resources/subscribe` / `resources/unsubscribe` (or the connection
    /// closing), or a 2026-07-28 listen stream naming the URI opening or closing. Use it to
    /// start and stop whatever watches the resource; call
    /// [`notify_resource_updated`](Self::notify_resource_updated) when it changes. The hook
    /// runs on the connection's task: keep it quick.
    pub fn on_subscribe<F>(self, hook: F) -> Self
    where
        F: Fn(&str, bool) + Send + Sync + 'static,
    {
        *self
            .inner
            .subscribe_hook
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(hook));
        self
    }

    /// Declare resources (with subscriptions), prompts and tasks even while none is
    /// registered. A server whose registry fills in after clients have connected (a gateway
    /// whose servers are still starting) says at `initialize` what it will offer, since
    /// clients do not ask again.
    pub fn declare_every_capability(self) -> Self {
        self.inner
            .declare_all
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// Hold the requests that read what the server offers (the lists, `tools/call`,
    /// `resources/read`, `prompts/get`, `completion/complete`) until the future `hook`
    /// returns is done; `hook` returns `None` when there is nothing to wait for, which
    /// costs nothing. `initialize`, `server/discover` and `ping` are never held. A gateway
    /// uses it while the servers it fronts are starting, so that a client's first
    /// `tools/list` already has their tools; keep the wait bounded.
    pub fn ready_when<F>(self, hook: F) -> Self
    where
        F: Fn() -> Option<BoxFuture<()>> + Send + Sync + 'static,
    {
        *self
            .inner
            .ready_hook
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(hook));
        self
    }

    /// Be told when a client sends `notifications/roots/list_changed`. The hook runs on the
    /// connection's reading task: keep it quick.
    pub fn on_roots_changed<F>(self, hook: F) -> Self
    where
        F: Fn() + Send + Sync + 'static,
    {
        *self
            .inner
            .roots_hook
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(hook));
        self
    }

    /// Log messages about the server's state that every client should see, whenever it
    /// arrives — such as a gateway's "this server is held back, and here is what to run".
    /// `hook` is asked each time: a handshake-era client gets them once, right after
    /// `notifications/initialized` (at its log level once it has set one); a 2026-07-28
    /// client, which has no start, gets them on each `tools/list` that asks for messages of
    /// their level. Messages to the clients connected when the state changes are the
    /// caller's to send.
    pub fn standing_notices<F>(self, hook: F) -> Self
    where
        F: Fn() -> Vec<LoggingMessageNotificationParams> + Send + Sync + 'static,
    {
        *self
            .inner
            .notices_hook
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(hook));
        self
    }

    /// The connections open now that outlive a request (stdio, and HTTP sessions of the
    /// handshake era; not 2026-07-28 requests), for requests to clients outside any call.
    pub fn connections(&self) -> Vec<Peer> {
        self.inner
            .live_sessions()
            .iter()
            .filter_map(|s| s.peer().cloned())
            .filter(|p| !p.is_single_request() && !p.is_closed())
            .collect()
    }

    /// A handle that does not keep the server alive (for tasks and handlers that refer back
    /// to the server without making a reference cycle).
    pub fn downgrade(&self) -> WeakServer {
        WeakServer(Arc::downgrade(&self.inner))
    }

    /// Tell subscribed clients that the resource at `uri` changed
    /// (`notifications/resources/updated`): handshake-era connections that called
    /// `resources/subscribe`, and 2026-07-28 listen streams that named the URI.
    pub async fn notify_resource_updated(&self, uri: &str) {
        for session in self.inner.live_sessions() {
            session.notify_updated(uri).await;
        }
    }

    /// Send a `list_changed` notification to every active connection.
    fn spawn_notify(&self, method: &'static str) {
        let sessions = self.inner.live_sessions();
        if sessions.is_empty() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                for session in sessions {
                    session.notify_list_changed(method).await;
                }
            });
        }
    }

    /// Serve one connection; returns a [`Peer`] at once (the connection runs in the background).
    pub fn start(&self, conn: Connection) -> Peer {
        self.start_as(conn, None)
    }

    /// Serve one connection whose messages all come from `identity` (unless the transport
    /// names another caller for a message).
    pub fn start_as(
        &self,
        conn: Connection,
        identity: Option<moat_transport::SharedIdentity>,
    ) -> Peer {
        let session = Arc::new(Session::new());
        // Notifications reach a session, or a 2026-07-28 request's connection once it opens
        // a `subscriptions/listen` stream (nothing else is ever sent to it unasked): a
        // stateless request then takes no global lock to come and go.
        if !conn.single_request {
            self.inner.hold(&session);
        }
        let handler = Arc::new(SessionHandler::new(self.inner.clone(), session.clone()));
        let mut options = self.inner.options().peer.clone();
        if identity.is_some() {
            options.identity = identity;
        }
        let peer = Peer::start(conn, Role::Server, handler, options);
        session.set_peer(peer.clone());
        peer
    }

    /// Serve one connection until it closes.
    pub async fn serve(&self, conn: Connection) -> Result<()> {
        let peer = self.start(conn);
        peer.closed().await;
        Ok(())
    }

    /// Serve this process's stdin/stdout until the client closes stdin. Requests come
    /// from the local OS user ([`RequestContext::identity`](crate::RequestContext::identity)):
    /// whoever writes to our stdin runs as that user.
    pub async fn serve_stdio(self) -> Result<()> {
        let limits = self.inner.options().limits;
        let me = Arc::new(moat_transport::Identity::local_user());
        let peer = self.start_as(moat_transport::stdio::stdio(limits), Some(me));
        peer.closed().await;
        Ok(())
    }
}

/// Silence "unused" for re-exported helper types used only by users.
#[allow(dead_code)]
fn _assert_types(_: GetPromptResult) {}

/// A [`Server`] handle that does not keep it alive; see [`Server::downgrade`].
#[derive(Clone)]
pub struct WeakServer(Weak<ServerInner>);

impl std::fmt::Debug for WeakServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakServer")
    }
}

impl WeakServer {
    /// The server, if it still exists.
    pub fn upgrade(&self) -> Option<Server> {
        self.0.upgrade().map(|inner| Server { inner })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(server: &Server) -> usize {
        server
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Sessions come and go, and so does a connection per 2026-07-28 request: each is
    /// forgotten when it ends, so that a server taking millions of them holds only those
    /// still open.
    #[tokio::test]
    async fn a_closed_connection_leaves_no_session_behind() {
        let server = Server::new("t", "1");
        let connect = |single_request| {
            let (in_tx, inbound) = tokio::sync::mpsc::channel(4);
            let (outbound, out_rx) = tokio::sync::mpsc::channel(4);
            let peer = server.start(Connection {
                inbound,
                outbound,
                closer: None,
                single_request,
                driver: None,
            });
            (peer, in_tx, out_rx)
        };
        let kept = connect(false);
        for single_request in [true, false] {
            for _ in 0..100 {
                let (peer, in_tx, _out) = connect(single_request);
                drop(in_tx); // the request's stream ended, or the session's
                peer.closed().await;
            }
        }
        // `on_close` runs just after `closed` resolves.
        for _ in 0..100 {
            if held(&server) == 1 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(held(&server), 1, "only the open connection is held");
        assert_eq!(server.inner.live_sessions().len(), 1);
        drop(kept);
    }
}
