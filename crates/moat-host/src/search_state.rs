//! What tool search keeps between calls: whether it is on, the always-listed globs, the
//! embedding model and the index ([`crate::search`] and [`crate::reindex`] act on it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use globset::GlobSet;
use moat_search::{Embedder, Index};

/// The search state of one gateway.
#[derive(Default)]
pub(crate) struct SearchState {
    pub(crate) active: AtomicBool,
    pub(crate) always: RwLock<GlobSet>,
    pub(crate) embedder: Mutex<Option<Arc<Embedder>>>,
    /// Whether the "no model" note was printed.
    pub(crate) told: AtomicBool,
    pub(crate) index: RwLock<Option<Arc<Index>>>,
    pub(crate) generation: AtomicU64,
}

impl SearchState {
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Whether `exposed` is listed directly in search mode.
    pub(crate) fn always_listed(&self, exposed: &str) -> bool {
        self.always
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_match(exposed)
    }

    pub(crate) fn index(&self) -> Option<Arc<Index>> {
        self.index.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
