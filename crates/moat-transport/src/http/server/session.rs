//! Handshake-era sessions (2025-03-26 … 2025-11-25, and the legacy HTTP+SSE transport):
//! one [`Connection`] per session, and a router that sends each outgoing message to the
//! stream it belongs to — the POST stream of the request it relates to, else the
//! standalone stream (GET, or the legacy transport's one SSE stream).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use moat_protocol::jsonrpc::Message;
use moat_protocol::session::OwnedRequestHead;
use moat_protocol::{ProtocolVersion, RequestId};
use tokio::sync::mpsc;

use super::directory::{SessionRecord, SessionUser};
use super::journal::{Journal, StreamJournal};
use super::stream::{Pushed, Stream, StreamBounds};
use crate::connection::{Closer, Connection, Inbound, Outgoing, TraceHeaders};
use crate::framing::Frame;
use crate::identity::{Identity, SharedIdentity};

/// Live sessions by id.
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    /// Starts every stream id of this process, so the ids stay unique in a session that
    /// another replica takes over (it numbers its streams from 1 again).
    tag: String,
    /// Where resumable streams' events are written for the other replicas.
    journal: Option<Arc<Journal>>,
}

impl Sessions {
    pub(crate) fn new(tag: &str, journal: Option<Arc<Journal>>) -> Sessions {
        Sessions {
            map: Mutex::new(HashMap::new()),
            tag: tag.chars().filter(char::is_ascii_alphanumeric).collect(),
            journal,
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session `id`, if `caller` may use it: a session opened with an access token
    /// belongs to that token's user, and is unknown to anyone else (a session id that
    /// leaks is no way into another user's session).
    pub(crate) fn get(&self, id: &str, caller: Option<&Identity>) -> Option<Arc<Session>> {
        let session = self.map().get(id).cloned()?;
        if session.owner != Owner::of(caller) {
            return None;
        }
        session.touch();
        Some(session)
    }

    /// The process's part of stream ids.
    pub(crate) fn tag(&self) -> &str {
        &self.tag
    }

    pub(crate) fn len(&self) -> usize {
        self.map().len()
    }

    /// Open a session: the returned connection goes to whoever serves MCP on it.
    pub(crate) fn open(
        self: &Arc<Self>,
        bounds: StreamBounds,
        queue: usize,
        caller: Option<&Identity>,
        legacy: bool,
    ) -> (Arc<Session>, Connection) {
        self.open_as(new_session_id(), bounds, queue, Owner::of(caller), legacy)
    }

    /// Open again, under its own id, a session another replica opened (a takeover).
    pub(crate) fn reopen(
        self: &Arc<Self>,
        record: &SessionRecord,
        bounds: StreamBounds,
        queue: usize,
    ) -> (Arc<Session>, Connection) {
        let owner = Owner(
            record
                .user
                .as_ref()
                .map(|u| (u.issuer.clone(), u.subject.clone())),
        );
        let (session, conn) = self.open_as(record.id.clone(), bounds, queue, owner, false);
        if let Some(v) = ProtocolVersion::parse(&record.version) {
            let _ = session.version.set(v);
        }
        (session, conn)
    }

    fn open_as(
        self: &Arc<Self>,
        id: String,
        bounds: StreamBounds,
        queue: usize,
        owner: Owner,
        legacy: bool,
    ) -> (Arc<Session>, Connection) {
        let (in_tx, in_rx) = mpsc::channel(queue);
        let (out_tx, out_rx) = mpsc::channel(queue);
        let session = Arc::new(Session {
            id: id.clone(),
            inbound: Mutex::new(Some(in_tx)),
            state: Mutex::new(Routes::default()),
            last_active: Mutex::new(Instant::now()),
            bounds,
            version: std::sync::OnceLock::new(),
            owner,
            legacy,
            tag: self.tag.clone(),
            // A legacy session is never taken over: its streams need no journal.
            journal: self
                .journal
                .as_ref()
                .filter(|_| !legacy)
                .map(|journal| StreamJournal {
                    journal: journal.clone(),
                    session: Arc::from(id.as_str()),
                }),
        });
        self.map().insert(id.clone(), session.clone());
        tokio::spawn(route(Arc::downgrade(&session), out_rx));
        let table = Arc::downgrade(self);
        let closer: Closer = Box::new(move || {
            Box::pin(async move {
                if let Some(table) = table.upgrade() {
                    table.close(&id);
                }
            })
        });
        let conn = Connection {
            inbound: in_rx,
            outbound: out_tx,
            closer: Some(closer),
            single_request: false,
            driver: None,
        };
        (session, conn)
    }

    /// End a session: its streams finish, and its connection sees the end of input.
    pub(crate) fn close(&self, id: &str) -> bool {
        let session = self.map().remove(id);
        match session {
            Some(s) => {
                s.end();
                true
            }
            None => false,
        }
    }

    /// The ids of the live sessions.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.map().keys().cloned().collect()
    }

    /// Close sessions idle longer than `idle` with no stream a client is reading; their ids.
    pub(crate) fn expire(&self, idle: std::time::Duration) -> Vec<String> {
        let now = Instant::now();
        let stale: Vec<String> = self
            .map()
            .iter()
            .filter(|(_, s)| now.duration_since(s.last_active()) > idle && !s.has_reader())
            .map(|(id, _)| id.clone())
            .collect();
        for id in &stale {
            tracing::debug!(session = %id, "session expired after being idle");
            self.close(id);
        }
        stale
    }

    /// For a drain: end every session's stream that carries no answer (the standalone GET
    /// stream), so its client resumes or reconnects elsewhere; streams awaiting answers
    /// stay open until those are sent.
    pub(crate) fn end_idle_streams(&self) {
        let all: Vec<Arc<Session>> = self.map().values().cloned().collect();
        for s in all.iter().filter(|s| !s.legacy) {
            if let Some(stream) = &s.routes().standalone {
                stream.finish();
            }
        }
    }

    pub(crate) fn close_all(&self) {
        let all: Vec<Arc<Session>> = self.map().drain().map(|(_, s)| s).collect();
        for s in all {
            s.end();
        }
    }
}

/// A session id: 32 bytes from a CSPRNG (seeded from the OS), hex-encoded (visible ASCII).
fn new_session_id() -> String {
    let bytes: [u8; 32] = rand::random();
    let mut id = String::with_capacity(64);
    for b in bytes {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

#[derive(Default)]
struct Routes {
    /// POST streams by the id of a request whose answer they await.
    by_request: HashMap<RequestId, Stream>,
    /// Streams that can be resumed, by id prefix.
    streams: HashMap<String, Stream>,
    /// Where messages tied to no request go.
    standalone: Option<Stream>,
    next_stream: u64,
    ended: bool,
}

/// One session.
pub(crate) struct Session {
    pub(crate) id: String,
    inbound: Mutex<Option<mpsc::Sender<Inbound>>>,
    state: Mutex<Routes>,
    last_active: Mutex<Instant>,
    bounds: StreamBounds,
    /// The revision `initialize` settled on, once its answer went out.
    version: std::sync::OnceLock<ProtocolVersion>,
    /// Whose session it is.
    owner: Owner,
    /// A legacy HTTP+SSE session, whose one stream carries every answer.
    legacy: bool,
    /// The process's part of stream ids ([`Sessions::tag`]).
    tag: String,
    journal: Option<StreamJournal>,
}

/// The user a session belongs to: the issuer and subject of the token that opened it
/// (nobody's without OAuth).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner(Option<(Option<String>, Option<String>)>);

impl Owner {
    fn of(caller: Option<&Identity>) -> Owner {
        Owner(caller.map(|c| (c.issuer.clone(), c.subject.clone())))
    }
}

/// Whether `caller` is the user a directory record says the session belongs to.
pub(crate) fn belongs_to(record: &SessionRecord, caller: Option<&Identity>) -> bool {
    let owner = record
        .user
        .as_ref()
        .map(|u| (u.issuer.clone(), u.subject.clone()));
    Owner(owner) == Owner::of(caller)
}

/// The user of a session opened by `caller`, for its directory record.
pub(crate) fn user_of(caller: Option<&Identity>) -> Option<SessionUser> {
    caller.map(|c| SessionUser {
        issuer: c.issuer.clone(),
        subject: c.subject.clone(),
    })
}

/// Why a message could not be handed to the session.
#[derive(Debug)]
pub(crate) enum Closed {
    Gone,
}

impl Session {
    fn routes(&self) -> MutexGuard<'_, Routes> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The revision negotiated on this session, once known.
    pub(crate) fn version(&self) -> Option<ProtocolVersion> {
        self.version.get().copied()
    }

    fn touch(&self) {
        *self.last_active.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn last_active(&self) -> Instant {
        *self.last_active.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn has_reader(&self) -> bool {
        let routes = self.routes();
        routes.streams.values().any(Stream::is_attached)
            || routes.standalone.as_ref().is_some_and(Stream::is_attached)
    }

    /// Hand one message (or batch) from the client to MCP.
    pub(crate) async fn deliver(&self, text: String, origin: Origin) -> Result<(), Closed> {
        self.hand_on(origin.wrap(Inbound::Frame(Frame::Line(text))))
            .await
    }

    /// Hand one request, its head already read, from the client to MCP.
    pub(crate) async fn deliver_request(
        &self,
        head: OwnedRequestHead,
        origin: Origin,
    ) -> Result<(), Closed> {
        self.hand_on(origin.wrap(Inbound::Request(Box::new(head))))
            .await
    }

    async fn hand_on(&self, item: Inbound) -> Result<(), Closed> {
        let tx = self
            .inbound
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let tx = tx.ok_or(Closed::Gone)?;
        tx.send(item).await.map_err(|_| Closed::Gone)
    }

    fn new_stream(&self, prefix: Option<String>, awaiting: usize) -> Stream {
        Stream::journaled(prefix, awaiting, self.bounds, self.journal.clone())
    }

    /// A new stream for the answers to `requests` (which must not be in flight already).
    pub(crate) fn post_stream(&self, requests: &[RequestId], resumable: bool) -> Stream {
        let mut routes = self.routes();
        let prefix = resumable.then(|| {
            routes.next_stream += 1;
            stream_prefix(&self.tag, routes.next_stream, requests)
        });
        let stream = self.new_stream(prefix.clone(), requests.len());
        if routes.ended {
            stream.finish();
        }
        for id in requests {
            routes.by_request.insert(id.clone(), stream.clone());
        }
        if let Some(p) = prefix {
            prune(&mut routes);
            routes.streams.insert(p, stream.clone());
        }
        stream
    }

    /// The stream for messages tied to no request; `None` when one is already being read.
    pub(crate) fn standalone(&self, resumable: bool) -> Option<Stream> {
        let mut routes = self.routes();
        if let Some(s) = &routes.standalone {
            if s.is_attached() {
                return None;
            }
            if !s.is_finished() {
                return Some(s.clone());
            }
        }
        let prefix = resumable.then(|| {
            routes.next_stream += 1;
            stream_prefix(&self.tag, routes.next_stream, &[])
        });
        let stream = self.new_stream(prefix.clone(), 0);
        if routes.ended {
            stream.finish();
        }
        if let Some(p) = prefix {
            routes.streams.insert(p, stream.clone());
        }
        routes.standalone = Some(stream.clone());
        Some(stream)
    }

    /// A stream a client may resume, by the prefix of its event ids.
    pub(crate) fn stream(&self, prefix: &str) -> Option<Stream> {
        self.routes().streams.get(prefix).cloned()
    }

    /// End the session's side of things: no more input to MCP, every stream finishes.
    fn end(&self) {
        self.inbound
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let mut routes = self.routes();
        routes.ended = true;
        for s in routes.by_request.values() {
            s.finish();
        }
        for s in routes.streams.values() {
            s.finish();
        }
        if let Some(s) = &routes.standalone {
            s.finish();
        }
        routes.by_request.clear();
    }
}

/// Forget streams nobody can need any more: finished and fully delivered, or (beyond a
/// few) finished and abandoned.
/// What the HTTP request a message came in says about it besides the message: who sent it
/// (when the request was authenticated) and the trace context of its headers.
#[derive(Clone, Default)]
pub(crate) struct Origin {
    pub identity: Option<SharedIdentity>,
    pub trace: Option<TraceHeaders>,
}

impl Origin {
    /// The origin of a request with these headers, from `identity`.
    pub(crate) fn of(identity: Option<SharedIdentity>, headers: &http::HeaderMap) -> Origin {
        Origin {
            identity,
            trace: TraceHeaders::from_http(headers),
        }
    }

    /// `item`, marked with what is known of where it came from.
    pub(super) fn wrap(self, item: Inbound) -> Inbound {
        let item = match self.identity {
            Some(identity) => Inbound::Caller(identity, Box::new(item)),
            None => item,
        };
        match self.trace {
            Some(trace) => Inbound::Traced(trace, Box::new(item)),
            None => item,
        }
    }
}

fn prune(routes: &mut Routes) {
    routes.streams.retain(|_, s| !s.is_spent());
    const KEEP_ABANDONED: usize = 32;
    if routes.streams.len() > KEEP_ABANDONED {
        let mut finished: Vec<(u64, String)> = routes
            .streams
            .iter()
            .filter(|(_, s)| s.is_finished() && !s.is_attached())
            .map(|(p, _)| (stream_number(p), p.clone()))
            .collect();
        finished.sort();
        let excess = routes.streams.len() - KEEP_ABANDONED;
        for (_, p) in finished.into_iter().take(excess) {
            routes.streams.remove(&p);
        }
    }
}

/// Send each outgoing message to its stream. Never waits for a client: streams queue.
async fn route(session: Weak<Session>, mut outbound: mpsc::Receiver<Outgoing>) {
    while let Some(msg) = outbound.recv().await {
        let Some(session) = session.upgrade() else {
            return;
        };
        if msg.hang_up {
            let stream = msg
                .related
                .as_ref()
                .and_then(|id| session.routes().by_request.get(id).cloned());
            if let Some(stream) = stream {
                stream.hang_up();
            }
            continue;
        }
        let responses = answers(&msg);
        if responses == 1
            && session.version.get().is_none()
            && let Some(v) = negotiated(&msg.text)
        {
            let _ = session.version.set(v);
        }
        let json: Arc<str> = Arc::from(msg.text);
        let mut routes = session.routes();
        let target = match msg.related.as_ref() {
            Some(id) if responses > 0 => routes.by_request.remove(id),
            Some(id) => routes.by_request.get(id).cloned(),
            None => None,
        };
        // A batch answer settles every request of the batch.
        if responses > 1
            && let Some(t) = &target
        {
            routes.by_request.retain(|_, s| !s.ptr_eq(t));
        }
        let target = match target {
            Some(t) => t,
            None => match &routes.standalone {
                Some(s) if !s.is_finished() => s.clone(),
                _ => {
                    // No stream yet: keep it for the GET stream the client may open.
                    let prefix = {
                        routes.next_stream += 1;
                        stream_prefix(&session.tag, routes.next_stream, &[])
                    };
                    let s = session.new_stream(Some(prefix.clone()), 0);
                    routes.streams.insert(prefix, s.clone());
                    routes.standalone = Some(s.clone());
                    s
                }
            },
        };
        drop(routes);
        if target.push(json, responses) == Pushed::Overflowed {
            tracing::warn!(
                session = %session.id,
                "a client stopped reading an SSE stream; the stream was ended"
            );
        }
    }
    // The MCP side is gone: nothing more will be sent on any stream.
    if let Some(session) = session.upgrade() {
        session.end();
    }
}

/// The revision in an `initialize` answer.
fn negotiated(text: &str) -> Option<ProtocolVersion> {
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Init,
    }
    #[derive(serde::Deserialize)]
    struct Init {
        #[serde(rename = "protocolVersion")]
        protocol_version: String,
    }
    if !text.contains("\"protocolVersion\"") {
        return None;
    }
    let answer: Answer = serde_json::from_str(text).ok()?;
    ProtocolVersion::parse(&answer.result.protocol_version)
}

/// How many requests `msg` answers: 1 for a response, the number of answers for a batch.
fn answers(msg: &Outgoing) -> usize {
    let text = msg.text.trim_start();
    if text.starts_with('[') {
        return match serde_json::from_str::<Vec<&serde_json::value::RawValue>>(text) {
            Ok(items) => items.len(),
            Err(_) => 0,
        };
    }
    match Message::parse(text) {
        Ok(Message::Response(_)) | Ok(Message::Error(_)) => 1,
        _ => 0,
    }
}

/// A stream's id prefix: `<tag>_<n>` for a stream that awaits no answer, and
/// `<tag>_<n>_<ids>` for one that awaits the answers to requests, their ids as base64url
/// JSON when that is short. A replica that takes the session over after its owner died
/// cannot resume such a stream (its events died too), but can still tell the client which
/// of its requests failed.
fn stream_prefix(tag: &str, n: u64, requests: &[RequestId]) -> String {
    use base64::Engine as _;
    const MOST_ENCODED: usize = 192;
    if requests.is_empty() {
        return format!("{tag}_{n}");
    }
    let ids = serde_json::to_string(requests).unwrap_or_default();
    if ids.len() > MOST_ENCODED {
        return format!("{tag}_{n}");
    }
    let ids = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(ids);
    format!("{tag}_{n}_{ids}")
}

/// The number in a stream prefix (0 when there is none).
fn stream_number(prefix: &str) -> u64 {
    prefix
        .split('_')
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// For a stream prefix another process made: its tag, and the requests it awaited.
pub(crate) fn foreign_stream(prefix: &str) -> Option<(&str, Vec<RequestId>)> {
    use base64::Engine as _;
    let mut parts = prefix.splitn(3, '_');
    let tag = parts.next()?;
    parts.next()?.parse::<u64>().ok()?;
    let ids = match parts.next() {
        None => Vec::new(),
        Some(encoded) => {
            let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(encoded)
                .ok()?;
            serde_json::from_slice(&json).ok()?
        }
    };
    Some((tag, ids))
}

#[cfg(test)]
mod prefix_tests {
    use super::*;

    #[test]
    fn a_prefix_names_its_tag_and_requests() {
        let ids = [RequestId::Number(7), RequestId::String("a_b.c".into())];
        let p = stream_prefix("ab12", 3, &ids);
        assert!(!p.contains('.'), "{p}");
        let (tag, back) = foreign_stream(&p).expect("parses");
        assert_eq!(tag, "ab12");
        assert_eq!(back, ids);
        assert_eq!(stream_number(&p), 3);
        assert_eq!(foreign_stream("ab12_4"), Some(("ab12", vec![])));
        assert_eq!(foreign_stream("garbage"), None);
        assert_eq!(foreign_stream("t_1_!!"), None);
    }

    #[test]
    fn long_request_ids_are_not_encoded() {
        let long = RequestId::String("x".repeat(500).into());
        assert_eq!(stream_prefix("t", 1, &[long]), "t_1");
    }
}
