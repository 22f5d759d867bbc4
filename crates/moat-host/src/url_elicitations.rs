//! URL-mode elicitations (2025-11-25) the gateway passed on to its clients, remembered so
//! that the server's `notifications/elicitation/complete` reaches the client the
//! elicitation went to, and no other.
//!
//! A server names each URL elicitation (`elicitationId`) and may later say the page it sent
//! the user to is done, with that id. The id is the server's: two servers, or two
//! connections to one server (per-user connections, `[servers.NAME.auth]`), may use the
//! same one. So an elicitation is remembered under the downstream connection it came on
//! and its id, with the client session (and the call) it was passed to; a completion is
//! looked up the same way, from the notifications of that connection only. An id one
//! connection gave to two different client sessions is ambiguous and completes nobody's.
//!
//! Each entry is forgotten when it is completed, declined, expired ([`KEEP_FOR`]), when its
//! client or server connection closes, or when too many are waiting ([`MAX_PENDING`]).
//! A 2026-07-28 client is never an entry: that revision has no completion notification
//! (nor `elicitationId`), and a stateless request has no channel for one after its answer.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use moat::{Peer, RequestContext, ServerNotification};
use moat_protocol::RequestId;
use moat_protocol::types::ElicitationCompleteNotificationParams;
use moat_protocol::types::methods::NOTIFICATIONS_ELICITATION_COMPLETE;
use tokio::sync::broadcast;

/// How long a passed-on elicitation may wait for its completion: longer than the gateway's
/// own broker gives a user to authorize (10 minutes), for a person who is slow at a page.
const KEEP_FOR: Duration = Duration::from_secs(30 * 60);
/// Elicitations remembered at once, over all servers; past this the one nearest its expiry
/// is forgotten (its completion then goes nowhere, which a client must tolerate anyway).
const MAX_PENDING: usize = 4096;

/// The client a URL elicitation was passed to: its connection (session) and the call the
/// elicitation was part of, whose stream the completion goes on while it is open (else
/// the session's standalone stream).
#[derive(Clone)]
pub(crate) struct Recipient {
    peer: Peer,
    request: RequestId,
}

impl Recipient {
    /// The client behind `ctx`, and its call.
    pub(crate) fn of(ctx: &RequestContext) -> Recipient {
        Recipient {
            peer: ctx.peer().clone(),
            request: ctx.request_id().clone(),
        }
    }

    fn same_client(&self, other: &Recipient) -> bool {
        self.peer.id() == other.peer.id()
    }
}

/// Where a completion goes.
enum Target {
    To(Recipient),
    /// The server gave this id to more than one client: nobody can tell whose it is.
    Ambiguous,
}

struct Pending {
    target: Target,
    expires: Instant,
}

/// (downstream connection, elicitation id).
type Key = (u64, String);

#[derive(Default)]
struct State {
    pending: HashMap<Key, Pending>,
    /// The downstream connections whose notifications are followed.
    followed: HashSet<u64>,
}

/// The URL elicitations waiting for their completion; one per gateway.
#[derive(Clone, Default)]
pub(crate) struct UrlElicitations {
    state: Arc<Mutex<State>>,
}

impl UrlElicitations {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers that the URL elicitation `id` of downstream connection `connection` is
    /// being passed to `to`.
    pub(crate) fn sent(&self, connection: u64, id: &str, to: Recipient) {
        let now = Instant::now();
        let mut state = self.state();
        prune(&mut state.pending, now);
        let key = (connection, id.to_owned());
        let target = match state.pending.get(&key).map(|p| &p.target) {
            Some(Target::To(before)) if !before.same_client(&to) => {
                tracing::warn!(
                    elicitation = id,
                    "a server gave one elicitation id to two clients: its completion goes to neither"
                );
                Target::Ambiguous
            }
            Some(Target::Ambiguous) => Target::Ambiguous,
            _ => Target::To(to),
        };
        if !state.pending.contains_key(&key) && state.pending.len() >= MAX_PENDING {
            let nearest = state
                .pending
                .iter()
                .min_by_key(|(_, p)| p.expires)
                .map(|(k, _)| k.clone());
            if let Some(nearest) = nearest {
                state.pending.remove(&nearest);
            }
        }
        state.pending.insert(
            key,
            Pending {
                target,
                expires: now + KEEP_FOR,
            },
        );
    }

    /// Forgets the elicitation `id` of `connection` passed to `to` (the client declined
    /// it, or never got it): no page was opened, so nothing will be completed.
    pub(crate) fn unsent(&self, connection: u64, id: &str, to: &Recipient) {
        let mut state = self.state();
        let key = (connection, id.to_owned());
        if let Some(Pending {
            target: Target::To(r),
            ..
        }) = state.pending.get(&key)
            && r.same_client(to)
        {
            state.pending.remove(&key);
        }
    }

    /// The client the elicitation `id` of `connection` went to, forgotten (a completion
    /// completes once), if it is known, unexpired and unambiguous.
    fn take(&self, connection: u64, id: &str) -> Option<Recipient> {
        let mut state = self.state();
        let pending = state.pending.remove(&(connection, id.to_owned()))?;
        match pending.target {
            Target::To(r) if pending.expires > Instant::now() && !r.peer.is_closed() => Some(r),
            _ => None,
        }
    }

    /// Follows the notifications of downstream connection `connection` (of `server`), once
    /// per connection, passing each completion of an elicitation remembered for it on to its
    /// client, until the connection closes.
    pub(crate) fn follow(
        &self,
        connection: u64,
        server: &str,
        mut notes: broadcast::Receiver<ServerNotification>,
    ) {
        if !self.state().followed.insert(connection) {
            return;
        }
        let this = self.clone();
        let server = server.to_owned();
        tokio::spawn(async move {
            use broadcast::error::RecvError;
            loop {
                match notes.recv().await {
                    Ok(note) if note.method == NOTIFICATIONS_ELICITATION_COMPLETE => {
                        this.completed(connection, &server, note).await;
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(missed)) => {
                        tracing::debug!(%server, missed, "missed notifications of a server");
                    }
                    Err(RecvError::Closed) => break,
                }
            }
            this.forget_connection(connection);
        });
    }

    /// A completion from `connection`: to the client its elicitation went to, or nowhere.
    async fn completed(&self, connection: u64, server: &str, note: ServerNotification) {
        let Some(mut params) = note
            .params
            .and_then(|p| serde_json::from_value::<ElicitationCompleteNotificationParams>(p).ok())
        else {
            tracing::debug!(server, "an elicitation completion without an elicitationId");
            return;
        };
        let Some(to) = self.take(connection, &params.elicitation_id) else {
            // Unknown, already completed, expired or ambiguous: a client would ignore it,
            // and another client must never see it.
            tracing::debug!(
                server,
                elicitation = %params.elicitation_id,
                "a completion of no elicitation passed on to a client: dropped"
            );
            return;
        };
        // What the protocol keeps in `_meta` belongs to the server's connection.
        if let Some(meta) = &mut params.meta {
            meta.retain(|key, _| !key.starts_with(crate::naming::PROTOCOL_KEYS));
            if meta.is_empty() {
                params.meta = None;
            }
        }
        if let Err(e) = to
            .peer
            .notify_related(
                NOTIFICATIONS_ELICITATION_COMPLETE,
                &params,
                Some(&to.request),
            )
            .await
        {
            tracing::debug!(server, error = %e, "could not pass on an elicitation completion");
        }
    }

    /// A downstream connection closed: its elicitations will never complete.
    fn forget_connection(&self, connection: u64) {
        let mut state = self.state();
        state.followed.remove(&connection);
        state.pending.retain(|(c, _), _| *c != connection);
    }
}

/// Drops expired entries and those whose client has gone.
fn prune(pending: &mut HashMap<Key, Pending>, now: Instant) {
    pending.retain(|_, p| {
        p.expires > now
            && match &p.target {
                Target::To(r) => !r.peer.is_closed(),
                Target::Ambiguous => true,
            }
    });
}
