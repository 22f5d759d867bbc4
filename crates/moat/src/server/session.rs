//! What belongs to one client connection of a [`Server`](super::Server): its peer, the
//! resources it subscribed to, its open `subscriptions/listen` streams, and the
//! notifications sent to it on those.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use moat_protocol::types::{
    META_SUBSCRIPTION_ID, NotificationParams, SubscriptionFilter, methods, tasks_extension,
};
use moat_protocol::{Era, ProtocolVersion, RequestId};
use tasks_extension::{DetailedTask, TaskStatusNotificationParams};

use crate::peer::Peer;

/// What belongs to one connection.
pub(crate) struct Session {
    peer: OnceLock<Peer>,
    /// Handshake era: URIs from `resources/subscribe`.
    pub(super) subscriptions: Mutex<HashSet<String>>,
    /// Modern era: open `subscriptions/listen` streams.
    pub(super) listeners: Mutex<Vec<Listener>>,
    /// Whether a 2025-11-25 task was ever made on this connection: only then is there
    /// anything of it in the server's task store to drop when it closes.
    owns_tasks: AtomicBool,
}

/// One open `subscriptions/listen` stream: its request id and what it honours.
pub(super) struct Listener {
    pub(super) id: RequestId,
    pub(super) filter: SubscriptionFilter,
    /// The tasks whose `notifications/tasks` it carries (the tasks extension).
    pub(super) task_ids: Vec<String>,
}

impl Session {
    pub(crate) fn new() -> Self {
        Session {
            peer: OnceLock::new(),
            subscriptions: Mutex::new(HashSet::new()),
            listeners: Mutex::new(Vec::new()),
            owns_tasks: AtomicBool::new(false),
        }
    }

    /// A task owned by this connection was made.
    pub(super) fn made_a_task(&self) {
        self.owns_tasks.store(true, Ordering::Relaxed);
    }

    /// Whether this connection may own tasks in the server's store.
    pub(super) fn owns_tasks(&self) -> bool {
        self.owns_tasks.load(Ordering::Relaxed)
    }

    pub(crate) fn set_peer(&self, peer: Peer) {
        let _ = self.peer.set(peer);
    }

    pub(crate) fn peer(&self) -> Option<&Peer> {
        self.peer.get()
    }

    /// Whether this connection wants `notifications/resources/updated` for `uri`, and on
    /// which listen streams (modern era).
    pub(crate) fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(uri)
    }

    fn listeners_for(&self, wants: impl Fn(&Listener) -> bool) -> Vec<RequestId> {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|l| wants(l))
            .map(|l| l.id.clone())
            .collect()
    }

    /// Send `notifications/tasks` for `task` on the listen streams that name it.
    pub(crate) async fn notify_task(&self, task: &DetailedTask) {
        let Some(peer) = self.peer() else { return };
        let ids = self.listeners_for(|l| l.task_ids.iter().any(|t| t == &task.task.task_id));
        for id in ids {
            let params = TaskStatusNotificationParams {
                task: task.clone(),
                meta: Some(stream_meta(&id)),
            };
            let _ = peer
                .notify_related(tasks_extension::NOTIFICATIONS_TASKS, &params, Some(&id))
                .await;
        }
    }

    /// Send `method` to this connection if it asked for it: an initialized handshake-era
    /// connection always, a modern one on each listen stream whose filter includes it.
    pub(crate) async fn notify_list_changed(&self, method: &str) {
        let Some(peer) = self.peer() else { return };
        let active = peer.lifecycle_state() == moat_protocol::lifecycle::State::Active;
        match peer.protocol_version().map(ProtocolVersion::era) {
            Some(Era::Handshake) if active => {
                let _ = peer.notify(method, &NotificationParams::default()).await;
            }
            Some(Era::Modern) => {
                let wants = |l: &Listener| {
                    let f = &l.filter;
                    let flag = match method {
                        methods::NOTIFICATIONS_TOOLS_LIST_CHANGED => f.tools_list_changed,
                        methods::NOTIFICATIONS_PROMPTS_LIST_CHANGED => f.prompts_list_changed,
                        methods::NOTIFICATIONS_RESOURCES_LIST_CHANGED => f.resources_list_changed,
                        _ => None,
                    };
                    flag == Some(true)
                };
                for id in self.listeners_for(wants) {
                    let _ = peer
                        .notify_related(method, &on_stream(&id, serde_json::Map::new()), Some(&id))
                        .await;
                }
            }
            _ => {}
        }
    }

    /// Send `notifications/resources/updated` for `uri` where it was subscribed to.
    pub(crate) async fn notify_updated(&self, uri: &str) {
        let Some(peer) = self.peer() else { return };
        let mut body = serde_json::Map::new();
        body.insert("uri".to_owned(), serde_json::Value::String(uri.to_owned()));
        if self.is_subscribed(uri) {
            let _ = peer
                .notify(
                    methods::NOTIFICATIONS_RESOURCES_UPDATED,
                    &serde_json::Value::Object(body.clone()),
                )
                .await;
        }
        let wants = |l: &Listener| {
            l.filter
                .resource_subscriptions
                .as_ref()
                .is_some_and(|r| r.iter().any(|u| u == uri))
        };
        for id in self.listeners_for(wants) {
            let _ = peer
                .notify_related(
                    methods::NOTIFICATIONS_RESOURCES_UPDATED,
                    &on_stream(&id, body.clone()),
                    Some(&id),
                )
                .await;
        }
    }
}

/// Notification params delivered on listen stream `id`: `body` plus `_meta.subscriptionId`.
pub(super) fn on_stream(
    id: &RequestId,
    mut body: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    body.insert(
        "_meta".to_owned(),
        serde_json::Value::Object(stream_meta(id)),
    );
    serde_json::Value::Object(body)
}

/// `_meta` naming listen stream `id`.
pub(super) fn stream_meta(id: &RequestId) -> serde_json::Map<String, serde_json::Value> {
    let mut meta = serde_json::Map::new();
    meta.insert(
        META_SUBSCRIPTION_ID.to_owned(),
        serde_json::to_value(id).unwrap_or_default(),
    );
    meta
}
