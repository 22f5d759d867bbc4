//! Change detection by polling (no new dependencies, no inotify limits to run out of):
//!
//! - [`Subscriptions`]: while any connection subscribes to a file's URI, its fingerprint
//!   (inode, size, mtime, ctime, mode) is compared every [`FsOptions::watch_interval`];
//!   a change sends `notifications/resources/updated`. The poll task starts with the first
//!   subscription and stops with the last.
//! - [`list_watcher`]: every [`FsOptions::list_interval`] (or at once after a tool changed
//!   the tree) the listed files are walked again; files that appeared or went away are
//!   added to or removed from the server's resources, which sends `list_changed`.
//!
//! [`FsOptions::watch_interval`]: super::FsOptions::watch_interval
//! [`FsOptions::list_interval`]: super::FsOptions::list_interval

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};

use moat::WeakServer;
use moat::types::Resource;

use super::Fs;
use super::root::{Meta, RelPath};

struct Watched {
    /// How many subscriptions (over all connections) name this URI.
    count: usize,
    /// The path, if the URI names one under the root.
    rel: Option<RelPath>,
    /// The last fingerprint seen (`None`: missing or unreadable).
    last: Option<Meta>,
}

#[derive(Default)]
struct State {
    watched: HashMap<String, Watched>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Subscribed URIs and the task polling them.
pub(crate) struct Subscriptions {
    fs: Arc<Fs>,
    state: Mutex<State>,
}

impl Subscriptions {
    pub(crate) fn new(fs: Arc<Fs>) -> Arc<Subscriptions> {
        Arc::new(Subscriptions {
            fs,
            state: Mutex::new(State::default()),
        })
    }

    /// The server's subscribe hook: `uri` gained (`true`) or lost a watcher.
    pub(crate) fn changed(self: &Arc<Self>, uri: &str, watching: bool, server: &WeakServer) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if watching {
            if let Some(w) = state.watched.get_mut(uri) {
                w.count += 1;
            } else {
                let rel = self.fs.rel_from_uri(uri).ok();
                // The baseline is taken now, so a change right after subscribing counts.
                let last = rel.as_ref().and_then(|r| self.fs.root.fingerprint(r));
                state.watched.insert(
                    uri.to_owned(),
                    Watched {
                        count: 1,
                        rel,
                        last,
                    },
                );
            }
            if state.task.is_none() {
                let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                    tracing::warn!("no tokio runtime: subscribed files are not watched");
                    return;
                };
                let subs = Arc::downgrade(self);
                let server = server.clone();
                let every = self.fs.options.watch_interval;
                state.task = Some(runtime.spawn(poll(subs, server, every)));
            }
        } else {
            if let Some(w) = state.watched.get_mut(uri) {
                w.count = w.count.saturating_sub(1);
                if w.count == 0 {
                    state.watched.remove(uri);
                }
            }
            if state.watched.is_empty()
                && let Some(task) = state.task.take()
            {
                task.abort();
            }
        }
    }
}

async fn poll(subs: Weak<Subscriptions>, server: WeakServer, every: std::time::Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (Some(this), Some(server)) = (subs.upgrade(), server.upgrade()) else {
            return;
        };
        let items: Vec<(String, Option<RelPath>)> = {
            let state = this.state.lock().unwrap_or_else(|e| e.into_inner());
            state
                .watched
                .iter()
                .map(|(uri, w)| (uri.clone(), w.rel.clone()))
                .collect()
        };
        let fs = this.fs.clone();
        let Ok(fresh) = tokio::task::spawn_blocking(move || {
            items
                .into_iter()
                .map(|(uri, rel)| {
                    let now = rel.as_ref().and_then(|r| fs.root.fingerprint(r));
                    (uri, now)
                })
                .collect::<Vec<_>>()
        })
        .await
        else {
            continue;
        };
        let changed: Vec<String> = {
            let mut state = this.state.lock().unwrap_or_else(|e| e.into_inner());
            fresh
                .into_iter()
                .filter_map(|(uri, now)| {
                    let w = state.watched.get_mut(&uri)?;
                    (w.last != now).then(|| {
                        w.last = now;
                        uri
                    })
                })
                .collect()
        };
        drop(this);
        for uri in changed {
            tracing::debug!(%uri, "subscribed file changed");
            server.notify_resource_updated(&uri).await;
        }
    }
}

/// Keep the server's resources in step with the files under the root; `listed` is what is
/// registered already. Runs until the server is gone.
pub(crate) async fn list_watcher(
    fs: Arc<Fs>,
    server: WeakServer,
    mut listed: BTreeMap<String, Resource>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(fs.options.list_interval) => {}
            () = fs.tree_changed.notified() => {}
        }
        if server.upgrade().is_none() {
            return;
        }
        let walker = fs.clone();
        let Ok(now) = tokio::task::spawn_blocking(move || walker.snapshot()).await else {
            continue;
        };
        let Some(server) = server.upgrade() else {
            return;
        };
        for uri in listed.keys() {
            if !now.contains_key(uri) {
                server.remove_resource(uri);
            }
        }
        for (uri, def) in &now {
            if listed.get(uri) != Some(def) {
                super::register_file(&server, &fs, def.clone());
            }
        }
        listed = now;
    }
}
