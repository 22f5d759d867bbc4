//! Where replicas of one server find each other's handshake-era sessions.
//!
//! A session lives in the memory of the replica that opened it (its *owner*): its streams,
//! its requests in flight, the MCP peer serving it. What a session needs to live on
//! elsewhere is written to a [`SessionDirectory`] shared by the replicas (a table in the
//! gateway's PostgreSQL store): the revision negotiated, the client's `initialize`
//! parameters (capabilities, client info), whose session it is, the log level and the
//! resource subscriptions.
//!
//! A request for a session another replica owns is forwarded to that replica, so a load
//! balancer needs no stickiness. When the owner cannot be reached (it was killed, or
//! restarted), the replica that has the request *takes the session over*: it claims the
//! record, replays the handshake, log level and subscriptions into a new MCP peer, and
//! serves the request. The client keeps its session id; what was in flight on the dead
//! replica is reported as failed.
//!
//! The events of resumable SSE streams are written to the directory too, in batches off
//! the call path (the server's journal): a client that resumes a dead replica's stream
//! on the replica that took its session over gets the events it had not seen, then an
//! error for each request whose answer died with the replica.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// One replica, as the others reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// Unique for the life of the process (a restarted replica has a new one).
    pub id: String,
    /// The base URL other replicas forward to (`http://10.0.3.7:8080`), without a path.
    pub url: String,
}

impl Replica {
    /// A replica reached at `url`, with a fresh random id.
    pub fn new(url: impl Into<String>) -> Replica {
        let bytes: [u8; 8] = rand::random();
        let id = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Replica {
            id,
            url: url.into().trim_end_matches('/').to_owned(),
        }
    }
}

/// Whose session it is: the issuer and subject of the access token that opened it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionUser {
    pub issuer: Option<String>,
    pub subject: Option<String>,
}

/// What another replica needs to serve a session.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionRecord {
    pub id: String,
    /// The replica serving it now.
    pub owner: Replica,
    /// The revision `initialize` settled on (empty for a legacy session before it).
    pub version: String,
    /// The `params` of the client's `initialize` request, as JSON.
    pub initialize: String,
    /// `None` when the session was opened without an access token.
    pub user: Option<SessionUser>,
    /// The level of the client's last `logging/setLevel`.
    pub log_level: Option<String>,
    /// The resources the client is subscribed to.
    pub subscriptions: Vec<String>,
    /// A legacy HTTP+SSE session: forwarded to, never taken over (its one stream died with
    /// its owner).
    pub legacy: bool,
}

impl SessionRecord {
    /// A record for a session `owner` just opened.
    pub fn new(id: impl Into<String>, owner: Replica) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            owner,
            version: String::new(),
            initialize: String::new(),
            user: None,
            log_level: None,
            subscriptions: Vec::new(),
            legacy: false,
        }
    }
}

/// A change to a session's record, as the client makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionChange {
    LogLevel(String),
    Subscribe(String),
    Unsubscribe(String),
}

/// One event of a resumable SSE stream, as kept for a replica that takes the session over.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredEvent {
    pub session: String,
    /// The stream's id prefix (the part of its event ids before the `.`).
    pub stream: String,
    /// The event's number in its stream (the part after the `.`).
    pub seq: u64,
    /// Whether the event answers a request (answers are kept for as long as their
    /// stream; of the other events only the latest [`KEPT_EVENTS`] are).
    pub answers: bool,
    /// The JSON-RPC message.
    pub json: String,
}

impl StoredEvent {
    pub fn new(
        session: impl Into<String>,
        stream: impl Into<String>,
        seq: u64,
        answers: bool,
        json: impl Into<String>,
    ) -> StoredEvent {
        StoredEvent {
            session: session.into(),
            stream: stream.into(),
            seq,
            answers,
            json: json.into(),
        }
    }
}

/// How many of a stream's events other than answers a directory keeps: the latest ones.
/// A resume needs those the client had not seen, which are few unless it stopped reading
/// (and then its stream overflows and ends anyway); the bound keeps the table small.
pub const KEPT_EVENTS: u64 = 256;

/// The directory could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("session directory: {0}")]
pub struct DirectoryError(pub String);

/// What a directory operation returns.
pub type DirectoryFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, DirectoryError>> + Send + 'a>>;

/// The shared table of handshake-era sessions (see the module documentation).
pub trait SessionDirectory: Send + Sync + 'static {
    /// Record a new session (or replace the record of one with the same id).
    fn register<'a>(&'a self, record: &'a SessionRecord) -> DirectoryFuture<'a, ()>;
    /// The record of session `id`, if any.
    fn find<'a>(&'a self, id: &'a str) -> DirectoryFuture<'a, Option<SessionRecord>>;
    /// Make `owner` the session's owner if `previous` (a replica id) still is; whether it
    /// did. Two replicas taking the same session over: one wins.
    fn claim<'a>(
        &'a self,
        id: &'a str,
        previous: &'a str,
        owner: &'a Replica,
    ) -> DirectoryFuture<'a, bool>;
    /// Apply a change the client made to its session.
    fn update<'a>(&'a self, id: &'a str, change: &'a SessionChange) -> DirectoryFuture<'a, ()>;
    /// Forget a session (it was deleted, or expired); with `owner` (a replica id), only
    /// while that replica owns it: a replica whose copy of a session expired must not take
    /// the record from the replica that took the session over meanwhile.
    fn remove<'a>(&'a self, id: &'a str, owner: Option<&'a str>) -> DirectoryFuture<'a, ()>;
    /// Say the sessions `ids`, which replica `owner` (an id) holds, are alive; records
    /// nobody has touched for `stale` may go, and so may stream events older than that.
    /// Returns those of `ids` another replica owns now: it took them over while `owner`
    /// could not be reached, and `owner` must drop its copies (a split brain ends here).
    fn touch<'a>(
        &'a self,
        ids: &'a [String],
        owner: &'a str,
        stale: Duration,
    ) -> DirectoryFuture<'a, Vec<String>>;
    /// Keep `events` (in the order given; an event already kept is kept once), and let go
    /// of all but the latest [`KEPT_EVENTS`] non-answers of each stream they belong to.
    fn append_events<'a>(&'a self, events: &'a [StoredEvent]) -> DirectoryFuture<'a, ()>;
    /// The events kept of one stream of a session, in order. Removing a session removes
    /// its events.
    fn events<'a>(
        &'a self,
        session: &'a str,
        stream: &'a str,
    ) -> DirectoryFuture<'a, Vec<StoredEvent>>;
}

/// A shared directory.
pub type SharedDirectory = Arc<dyn SessionDirectory>;

/// The replica this server is, and the directory it shares with the others.
#[derive(Clone)]
pub struct Replication {
    pub replica: Replica,
    pub directory: SharedDirectory,
}

impl std::fmt::Debug for Replication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replication")
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

/// A directory in memory, shared by servers in one process (tests, examples).
#[derive(Debug, Default)]
pub struct MemoryDirectory {
    records: std::sync::Mutex<std::collections::HashMap<String, SessionRecord>>,
    /// Stream events by session, then by stream, in order.
    events: std::sync::Mutex<EventsBySession>,
}

type EventsBySession =
    std::collections::HashMap<String, std::collections::HashMap<String, Vec<StoredEvent>>>;

impl MemoryDirectory {
    fn records(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, SessionRecord>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stored(&self) -> std::sync::MutexGuard<'_, EventsBySession> {
        self.events.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many sessions it holds.
    pub fn len(&self) -> usize {
        self.records().len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.records().is_empty()
    }
}

impl SessionDirectory for MemoryDirectory {
    fn register<'a>(&'a self, record: &'a SessionRecord) -> DirectoryFuture<'a, ()> {
        self.records().insert(record.id.clone(), record.clone());
        Box::pin(async { Ok(()) })
    }

    fn find<'a>(&'a self, id: &'a str) -> DirectoryFuture<'a, Option<SessionRecord>> {
        let found = self.records().get(id).cloned();
        Box::pin(async move { Ok(found) })
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        previous: &'a str,
        owner: &'a Replica,
    ) -> DirectoryFuture<'a, bool> {
        let claimed = match self.records().get_mut(id) {
            Some(r) if r.owner.id == previous => {
                r.owner = owner.clone();
                true
            }
            _ => false,
        };
        Box::pin(async move { Ok(claimed) })
    }

    fn update<'a>(&'a self, id: &'a str, change: &'a SessionChange) -> DirectoryFuture<'a, ()> {
        if let Some(r) = self.records().get_mut(id) {
            apply(r, change);
        }
        Box::pin(async { Ok(()) })
    }

    fn remove<'a>(&'a self, id: &'a str, owner: Option<&'a str>) -> DirectoryFuture<'a, ()> {
        let mut records = self.records();
        if owner.is_none_or(|o| records.get(id).is_some_and(|r| r.owner.id == o)) {
            records.remove(id);
            self.stored().remove(id);
        }
        Box::pin(async { Ok(()) })
    }

    fn touch<'a>(
        &'a self,
        ids: &'a [String],
        owner: &'a str,
        _stale: Duration,
    ) -> DirectoryFuture<'a, Vec<String>> {
        let records = self.records();
        let elsewhere = ids
            .iter()
            .filter(|id| records.get(*id).is_some_and(|r| r.owner.id != owner))
            .cloned()
            .collect();
        Box::pin(async move { Ok(elsewhere) })
    }

    fn append_events<'a>(&'a self, events: &'a [StoredEvent]) -> DirectoryFuture<'a, ()> {
        let mut stored = self.stored();
        for e in events {
            let stream = stored
                .entry(e.session.clone())
                .or_default()
                .entry(e.stream.clone())
                .or_default();
            if stream.iter().all(|kept| kept.seq != e.seq) {
                stream.push(e.clone());
            }
            let newest = stream.iter().map(|kept| kept.seq).max().unwrap_or(0);
            stream.retain(|kept| kept.answers || kept.seq + KEPT_EVENTS > newest);
        }
        Box::pin(async { Ok(()) })
    }

    fn events<'a>(
        &'a self,
        session: &'a str,
        stream: &'a str,
    ) -> DirectoryFuture<'a, Vec<StoredEvent>> {
        let mut found = self
            .stored()
            .get(session)
            .and_then(|streams| streams.get(stream))
            .cloned()
            .unwrap_or_default();
        found.sort_by_key(|e| e.seq);
        Box::pin(async move { Ok(found) })
    }
}

/// `change` applied to `record`.
fn apply(record: &mut SessionRecord, change: &SessionChange) {
    match change {
        SessionChange::LogLevel(level) => record.log_level = Some(level.clone()),
        SessionChange::Subscribe(uri) => {
            if !record.subscriptions.contains(uri) {
                record.subscriptions.push(uri.clone());
            }
        }
        SessionChange::Unsubscribe(uri) => record.subscriptions.retain(|u| u != uri),
    }
}
