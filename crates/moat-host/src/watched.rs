//! The resources clients watch: watchers per URI across every client connection, and a
//! signal when the watched set changes ([`crate::subscriptions`] forwards it to servers).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

/// Watchers per URI, across every client connection.
#[derive(Default)]
pub(crate) struct Watched {
    counts: Mutex<HashMap<String, usize>>,
    /// Bumped whenever a URI gains its first watcher or loses its last.
    version: watch::Sender<u64>,
}

impl Watched {
    /// A receiver that changes when the watched set does.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Counts a connection that started (`on`) or stopped watching `uri`; true when the
    /// watched set changed (its first watcher came or its last one went).
    pub(crate) fn count(&self, uri: &str, on: bool) -> bool {
        let edge = {
            let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            if on {
                let count = counts.entry(uri.to_owned()).or_insert(0);
                *count += 1;
                *count == 1
            } else {
                match counts.get_mut(uri) {
                    Some(count) if *count > 1 => {
                        *count -= 1;
                        false
                    }
                    Some(_) => {
                        counts.remove(uri);
                        true
                    }
                    None => false,
                }
            }
        };
        if edge {
            self.version.send_modify(|v| *v += 1);
        }
        edge
    }

    /// Every watched URI.
    pub(crate) fn uris(&self) -> Vec<String> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }
}
