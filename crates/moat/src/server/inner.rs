//! The state behind a [`Server`](super::Server): its description, hooks, options,
//! registry, live connections and tasks. Every clone of the server and every connection
//! holds it.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock, Weak};

use moat_protocol::types::{Implementation, LoggingMessageNotificationParams, TaskSupport};

use super::options::ServerOptions;
use super::registry::Registry;
use super::session::Session;
use super::task_store::TaskStore;
use crate::handler::BoxFuture;

/// Called when a connection starts (`true`) or stops (`false`) watching a resource URI.
pub(super) type SubscribeHook = Arc<dyn Fn(&str, bool) + Send + Sync>;

/// Called when a client says its roots changed.
pub(super) type RootsHook = Arc<dyn Fn() + Send + Sync>;

/// What requests that read the registry wait for first: `None` when there is nothing to wait for.
pub(super) type ReadyHook = Arc<dyn Fn() -> Option<BoxFuture<()>> + Send + Sync>;

/// The log messages about the server's state that every client should see.
pub(super) type NoticesHook = Arc<dyn Fn() -> Vec<LoggingMessageNotificationParams> + Send + Sync>;

/// What every clone of a [`Server`](super::Server) shares, and every connection reads.
pub(crate) struct ServerInner {
    pub(super) info: Implementation,
    pub(super) subscribe_hook: RwLock<Option<SubscribeHook>>,
    pub(super) ready_hook: RwLock<Option<ReadyHook>>,
    /// Declare resources, prompts and tasks even while none is registered.
    pub(super) declare_all: AtomicBool,
    pub(super) roots_hook: RwLock<Option<RootsHook>>,
    pub(super) notices_hook: RwLock<Option<NoticesHook>>,
    pub(super) instructions: RwLock<Option<String>>,
    pub(super) registry: RwLock<Registry>,
    /// The skills offered (the Skills extension), in listing order.
    pub(super) skills: RwLock<Vec<Arc<super::skills::SkillBundle>>>,
    /// Skills looked up when asked for, after `skills`.
    pub(super) skill_source: RwLock<Option<Arc<dyn super::skills::SkillSource>>>,
    /// Shared, so that reading the options on every request is a reference count, not a copy.
    pub(super) options: RwLock<Arc<ServerOptions>>,
    /// Every connection's session, by its address ([`session_key`]): one is added and
    /// removed per 2026-07-28 request, so neither may cost a walk over all the others.
    pub(super) sessions: Mutex<HashMap<usize, Weak<Session>>>,
    /// Every task, of every connection.
    pub(super) tasks: Arc<TaskStore>,
}

impl ServerInner {
    pub(super) fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn registry_mut(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn skills(&self) -> Vec<Arc<super::skills::SkillBundle>> {
        self.skills
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn skill_source(&self) -> Option<Arc<dyn super::skills::SkillSource>> {
        self.skill_source
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the Skills extension is declared: some skill is given, or a source is.
    pub(super) fn offers_skills(&self) -> bool {
        self.skill_source
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
            || !self
                .skills
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
    }

    pub(super) fn options(&self) -> Arc<ServerOptions> {
        self.options
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn edit_options(&self, edit: impl FnOnce(&mut ServerOptions)) {
        let mut guard = self.options.write().unwrap_or_else(|e| e.into_inner());
        edit(Arc::make_mut(&mut guard));
    }

    /// Tell the server's hook that `uri` gained (`true`) or lost (`false`) a watcher.
    pub(crate) fn subscription_changed(&self, uri: &str, subscribed: bool) {
        let hook = self
            .subscribe_hook
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(hook) = hook {
            hook(uri, subscribed);
        }
    }

    /// Runs the hook set by
    /// [`Server::on_roots_changed`](super::Server::on_roots_changed), if any.
    pub(crate) fn roots_changed(&self) {
        let hook = self
            .roots_hook
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(hook) = hook {
            hook();
        }
    }

    /// The standing notices of
    /// [`Server::standing_notices`](super::Server::standing_notices) (none without a hook).
    pub(crate) fn notices(&self) -> Vec<LoggingMessageNotificationParams> {
        let hook = self
            .notices_hook
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        hook.map(|hook| hook()).unwrap_or_default()
    }

    /// Waits for the hook set by [`Server::ready_when`](super::Server::ready_when), if any.
    pub(crate) async fn ready(&self) {
        let hook = self
            .ready_hook
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(wait) = hook.and_then(|hook| hook()) {
            wait.await;
        }
    }

    /// Whether every capability is declared whatever is registered (see
    /// [`Server::declare_every_capability`](super::Server::declare_every_capability)).
    pub(super) fn declares_all(&self) -> bool {
        self.declare_all.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether some tool may run as a task (the server then serves the task methods).
    pub(super) fn offers_tasks(&self) -> bool {
        self.declares_all()
            || self
                .registry()
                .tools
                .iter()
                .any(|t| t.def.task_support() != TaskSupport::Forbidden)
    }

    /// Keep `session` among those notifications reach.
    pub(super) fn hold(&self, session: &Arc<Session>) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session_key(session), Arc::downgrade(session));
    }

    /// `session` closed: notifications no longer look for it.
    pub(super) fn let_go(&self, session: &Arc<Session>) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&session_key(session));
    }

    pub(super) fn live_sessions(&self) -> Vec<Arc<Session>> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, s| s.strong_count() > 0);
        sessions.values().filter_map(Weak::upgrade).collect()
    }
}

/// The key of `session` among the server's sessions: its address, which stays its own while
/// the map holds a `Weak` to it.
pub(super) fn session_key(session: &Arc<Session>) -> usize {
    Arc::as_ptr(session) as usize
}
