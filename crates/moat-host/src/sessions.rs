//! What the host remembers about each client session: whether it has taken in untrusted
//! content (prompt-injection containment), and the tools approved "for this session".
//!
//! A session is an upstream connection: the stdio client (any revision), or one Streamable
//! HTTP session of the handshake era. A 2026-07-28 client over HTTP has no sessions (each
//! request is a connection of its own), so its requests share one gateway-wide session: untrusted content seen by any of them
//! counts for all — stricter, never looser.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use moat::RequestContext;

/// The session key of requests that have no session (2026-07-28).
const SESSIONLESS: u64 = 0;

/// Per-session state, shared by every call.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// Session → what brought untrusted content in first.
    tainted: HashMap<u64, String>,
    approved: HashSet<(u64, String)>,
    /// Sessions whose end is being watched (so their entries are dropped).
    watched: HashSet<u64>,
}

impl State {
    fn forget(&mut self, key: u64) {
        self.tainted.remove(&key);
        self.approved.retain(|(k, _)| *k != key);
        self.watched.remove(&key);
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl Sessions {
    /// The session a request belongs to.
    pub(crate) fn key(ctx: &RequestContext) -> u64 {
        if ctx.peer().is_single_request() {
            SESSIONLESS
        } else {
            ctx.peer().id()
        }
    }

    /// Whether the request belongs to no session (2026-07-28).
    pub(crate) fn is_sessionless(ctx: &RequestContext) -> bool {
        Self::key(ctx) == SESSIONLESS
    }

    /// What tainted the request's session, if anything has.
    pub(crate) fn taint_source(&self, ctx: &RequestContext) -> Option<String> {
        lock(&self.state).tainted.get(&Self::key(ctx)).cloned()
    }

    /// The request's session has taken in untrusted content from `source`.
    pub(crate) fn taint(&self, ctx: &RequestContext, source: &str) {
        let key = Self::key(ctx);
        lock(&self.state)
            .tainted
            .entry(key)
            .or_insert_with(|| source.to_owned());
        self.watch_end(key, ctx);
    }

    /// Whether `tool` was approved for the request's session.
    pub(crate) fn approved(&self, ctx: &RequestContext, tool: &str) -> bool {
        lock(&self.state)
            .approved
            .contains(&(Self::key(ctx), tool.to_owned()))
    }

    /// Approve `tool` for the rest of the request's session.
    pub(crate) fn approve(&self, ctx: &RequestContext, tool: &str) {
        let key = Self::key(ctx);
        lock(&self.state).approved.insert((key, tool.to_owned()));
        self.watch_end(key, ctx);
    }

    /// Forget a session's state when its connection closes.
    fn watch_end(&self, key: u64, ctx: &RequestContext) {
        if key == SESSIONLESS || !lock(&self.state).watched.insert(key) {
            return;
        }
        let peer = ctx.peer().clone();
        let state = Arc::downgrade(&self.state);
        tokio::spawn(async move {
            peer.closed().await;
            if let Some(state) = state.upgrade() {
                lock(&state).forget(key);
            }
        });
    }
}
