//! Keeps the tool search index in step with the catalog: a rebuild after each change,
//! once the changes settle.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use moat_search::{Index, ToolDoc};

use crate::inner::Inner;

/// How long catalog changes settle before the index is rebuilt.
const REBUILD_DELAY: Duration = Duration::from_millis(100);

/// Schedules an index rebuild after the catalog settles (no-op when search is off).
pub(crate) fn catalog_changed(inner: &Arc<Inner>) {
    if !inner.search().is_active() {
        return;
    }
    let generation = inner.search().generation.fetch_add(1, Ordering::AcqRel) + 1;
    let weak = Arc::downgrade(inner);
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        tokio::time::sleep(REBUILD_DELAY).await;
        let Some(inner) = weak.upgrade() else { return };
        if inner.search().generation.load(Ordering::Acquire) == generation {
            rebuild_now(&inner, true, Some(generation)).await;
        }
    });
}

/// Builds the index of what is listed now; with `model`, hybrid when a model is loaded.
/// A build for `generation` is dropped if the catalog changed meanwhile (a newer build
/// is on its way).
pub(crate) async fn rebuild_now(inner: &Arc<Inner>, model: bool, generation: Option<u64>) {
    // The client definitions carry the exposed names already.
    let mut docs: Vec<ToolDoc> = inner
        .searchable_map()
        .into_values()
        .map(|def| ToolDoc {
            name: def.name.clone(),
            title: def.title.clone(),
            description: def.description.clone(),
            input_schema: def.input_schema.clone(),
            annotations: def
                .annotations
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
        })
        .collect();
    // In name order, so that ties rank the same way on every build.
    docs.sort_by(|a, b| a.name.cmp(&b.name));
    let state = &inner.search();
    let embedder = state
        .embedder
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .filter(|_| model);
    let cache = inner.search_cache_dir();
    let built = tokio::task::spawn_blocking(move || {
        match Index::build(docs.clone(), embedder, cache.as_deref()) {
            Ok(index) => Ok(index),
            // A model that fails on this catalog must not take search away: words only.
            Err(e) => {
                tracing::warn!(error = %e, "tool search: embedding failed; ranking by words");
                Index::build(docs, None, None).map_err(|e| e.to_string())
            }
        }
    })
    .await;
    match built {
        Ok(Ok(index)) => {
            let current = state.generation.load(Ordering::Acquire);
            if generation.is_none_or(|g| g == current) {
                *state.index.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(index));
            }
        }
        Ok(Err(e)) => tracing::warn!(error = %e, "tool search: index not rebuilt"),
        Err(e) => tracing::warn!(error = %e, "tool search: index build stopped"),
    }
}
