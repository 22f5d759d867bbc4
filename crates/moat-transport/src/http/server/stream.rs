//! One server→client SSE stream: the events queued for it, the body that delivers them,
//! and what is kept to replay after a dropped connection (`Last-Event-ID`).
//!
//! The session's router appends events without ever waiting for the client, so a client
//! that opens streams and never reads cannot stall the session: events beyond a bound are
//! not kept, and the stream is ended instead.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::StreamBody;
use hyper::body::Frame;
use tokio::sync::watch;

use super::journal::StreamJournal;

/// Bounds on what one stream keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamBounds {
    /// Events waiting for a slow or absent client, and bytes of them, before giving up.
    pub max_queued_events: usize,
    pub max_queued_bytes: usize,
    /// Events kept after delivery, for a client that resumes.
    pub replay_events: usize,
}

impl Default for StreamBounds {
    fn default() -> Self {
        StreamBounds {
            max_queued_events: 4096,
            max_queued_bytes: 16 * 1024 * 1024,
            replay_events: 64,
        }
    }
}

struct Event {
    seq: u64,
    /// Whether it answers a request.
    answers: bool,
    json: Arc<str>,
}

struct State {
    events: VecDeque<Event>,
    queued_bytes: usize,
    next_seq: u64,
    /// Sequence numbers below this were handed to a body.
    delivered: u64,
    /// Responses still to come before the stream is complete (POST streams).
    awaiting: usize,
    /// A standalone stream: it carries answers too (legacy transport) but never completes.
    open_ended: bool,
    finished: bool,
    /// Whether a body is reading this stream now.
    attached: bool,
    /// Bumped to end the bodies reading the stream without ending the stream.
    generation: u64,
    /// Hung up before any body read it: the next body ends after its opening.
    hang_up_pending: bool,
    /// Whether the client can resume after a hang-up (it was told event ids and `retry`).
    may_hang_up: bool,
    /// Whether events go to the journal (from the first SSE body on).
    journaling: bool,
}

/// A stream's shared state; cheap to clone.
#[derive(Clone)]
pub(crate) struct Stream {
    inner: Arc<Inner>,
}

struct Inner {
    /// Prefix of this stream's event ids (`<prefix>.<seq>`); `None`: events carry no id.
    prefix: Option<String>,
    bounds: StreamBounds,
    /// Where the events of a resumable stream are written for other replicas.
    journal: Option<StreamJournal>,
    state: Mutex<State>,
    /// Bumped on every change, so a waiting body wakes up.
    version: watch::Sender<u64>,
}

/// How a pushed message affected the stream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    Queued,
    /// The last awaited response arrived: the stream is complete.
    Completed,
    /// The client fell too far behind: the stream was ended and its events dropped.
    Overflowed,
    /// The stream had already ended.
    Gone,
}

impl Stream {
    /// A stream awaiting `awaiting` responses (0 for a standalone stream, which stays open).
    pub(crate) fn new(prefix: Option<String>, awaiting: usize, bounds: StreamBounds) -> Stream {
        Stream::journaled(prefix, awaiting, bounds, None)
    }

    /// A stream whose events, once it is read as SSE, are written to `journal` too (when it
    /// has a prefix: only a stream with event ids can be resumed).
    pub(crate) fn journaled(
        prefix: Option<String>,
        awaiting: usize,
        bounds: StreamBounds,
        journal: Option<StreamJournal>,
    ) -> Stream {
        let journal = journal.filter(|_| prefix.is_some());
        Stream {
            inner: Arc::new(Inner {
                prefix,
                bounds,
                journal,
                state: Mutex::new(State {
                    events: VecDeque::new(),
                    queued_bytes: 0,
                    next_seq: 0,
                    delivered: 0,
                    awaiting,
                    open_ended: awaiting == 0,
                    finished: false,
                    attached: false,
                    generation: 0,
                    hang_up_pending: false,
                    may_hang_up: false,
                    journaling: false,
                }),
                version: watch::channel(0).0,
            }),
        }
    }

    /// Whether both handles drive the same stream.
    pub(crate) fn ptr_eq(&self, other: &Stream) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wake(&self) {
        self.inner.version.send_modify(|v| *v += 1);
    }

    /// Queue a message; `response` says whether it answers one of the awaited requests
    /// (`count` of them, for a batch answer).
    pub(crate) fn push(&self, json: Arc<str>, responses: usize) -> Pushed {
        let outcome = {
            let mut st = self.state();
            if st.finished {
                return Pushed::Gone;
            }
            let undelivered = st.events.iter().filter(|e| e.seq >= st.delivered).count();
            if undelivered >= self.inner.bounds.max_queued_events
                || st.queued_bytes + json.len() > self.inner.bounds.max_queued_bytes
            {
                st.finished = true;
                st.events.clear();
                st.queued_bytes = 0;
                Pushed::Overflowed
            } else {
                let seq = st.next_seq;
                st.next_seq += 1;
                st.queued_bytes += json.len();
                let answers = responses > 0;
                if st.journaling {
                    self.journal(seq, answers, &json);
                }
                st.events.push_back(Event { seq, answers, json });
                st.awaiting = st.awaiting.saturating_sub(responses);
                if responses > 0 && st.awaiting == 0 && !st.open_ended {
                    st.finished = true;
                    Pushed::Completed
                } else {
                    Pushed::Queued
                }
            }
        };
        self.wake();
        outcome
    }

    /// End the body reading this stream now, keeping the stream for the client to resume
    /// (SSE polling).
    pub(crate) fn hang_up(&self) {
        {
            let mut st = self.state();
            if !st.may_hang_up {
                return; // the client could not resume: keep the stream open
            }
            if st.attached {
                st.generation += 1;
                st.attached = false;
            } else {
                st.hang_up_pending = true;
            }
        }
        self.wake();
    }

    /// Let [`hang_up`](Self::hang_up) end bodies: the client knows how to resume.
    pub(crate) fn allow_hang_up(&self) {
        self.state().may_hang_up = true;
    }

    /// End the stream (the session closed): bodies end after what is queued.
    pub(crate) fn finish(&self) {
        self.state().finished = true;
        self.wake();
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.state().finished
    }

    pub(crate) fn is_attached(&self) -> bool {
        self.state().attached
    }

    /// Whether the stream is over and a client has been handed everything.
    pub(crate) fn is_spent(&self) -> bool {
        let st = self.state();
        st.finished && st.delivered >= st.next_seq
    }

    /// Wait until there is something to decide on: an event, or the end.
    pub(crate) async fn first_event(&self) {
        let mut rx = self.inner.version.subscribe();
        loop {
            {
                let st = self.state();
                if st.finished || !st.events.is_empty() || st.hang_up_pending {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// If the stream holds exactly one message and is complete, take it: it can be sent
    /// as a plain JSON response.
    pub(crate) fn take_single(&self) -> Option<Arc<str>> {
        let mut st = self.state();
        if st.finished && st.events.len() == 1 && st.delivered == 0 && st.awaiting == 0 {
            st.delivered = st.next_seq;
            return st.events.pop_front().map(|e| e.json);
        }
        None
    }

    /// Wait for the end and return the last message (for a client that cannot take SSE:
    /// the notifications before the answer are dropped).
    pub(crate) async fn take_last(&self) -> Option<Arc<str>> {
        let mut rx = self.inner.version.subscribe();
        loop {
            {
                let mut st = self.state();
                if st.finished {
                    st.delivered = st.next_seq;
                    return st.events.pop_back().map(|e| e.json);
                }
            }
            if rx.changed().await.is_err() {
                return None;
            }
        }
    }

    /// Where a resuming client should continue: after event `seq` if it is still known.
    /// `None`: the stream cannot be resumed there (events were dropped).
    pub(crate) fn resume_point(&self, after_seq: u64) -> Option<u64> {
        let st = self.state();
        let oldest = st.events.front().map_or(st.next_seq, |e| e.seq);
        (after_seq + 1 >= oldest && after_seq < st.next_seq.max(1)).then_some(after_seq + 1)
    }

    /// Where a client that saw only the priming event resumes: the start, if still kept.
    pub(crate) fn resume_point_start(&self) -> Option<u64> {
        let st = self.state();
        let oldest = st.events.front().map_or(st.next_seq, |e| e.seq);
        (oldest == 0).then_some(0)
    }

    /// Write one event to the journal, if the stream has one. (Called under the state
    /// lock, so events are queued in their order; queueing never waits.)
    fn journal(&self, seq: u64, answers: bool, json: &str) {
        if let (Some(journal), Some(prefix)) = (&self.inner.journal, &self.inner.prefix) {
            journal.record(prefix, seq, answers, json);
        }
    }

    fn event_id(&self, seq: u64) -> Option<String> {
        self.inner.prefix.as_ref().map(|p| format!("{p}.{seq}"))
    }

    /// The SSE body: optionally a priming event (an id and empty data, so the client can
    /// resume even before the first message) with a `retry` hint, then events from
    /// `from_seq`, comments as keep-alives while idle, until the stream is finished.
    pub(crate) fn body(&self, from_seq: u64, opening: Opening) -> SseBody {
        let generation = {
            let mut st = self.state();
            st.attached = true;
            if self.inner.journal.is_some() && !std::mem::replace(&mut st.journaling, true) {
                // Read as SSE from now on, so resumable: what came before is written too.
                // (Nothing was delivered before the first body, so nothing was trimmed.)
                for e in &st.events {
                    self.journal(e.seq, e.answers, &e.json);
                }
            }
            if std::mem::take(&mut st.hang_up_pending) {
                // Hung up before anyone read it: this body gets its opening (the priming
                // event and `retry`) and ends; the client comes back for the rest.
                st.attached = false;
                st.generation.wrapping_sub(1)
            } else {
                st.generation
            }
        };
        let mut first = String::new();
        if let Some(retry) = opening.retry {
            first.push_str(&format!("retry: {}\n", retry.as_millis()));
        }
        if let Some(replayed) = &opening.replayed {
            // Events of a stream another replica served, each with its own id: they come
            // before the priming event, so the client's last id then names this stream.
            if !first.is_empty() {
                first.push('\n');
            }
            first.push_str(replayed);
        }
        if opening.prime
            && let Some(prefix) = &self.inner.prefix
        {
            // The priming id names the position before the first event.
            let id = if from_seq == 0 {
                format!("{prefix}.p")
            } else {
                format!("{prefix}.{}", from_seq - 1)
            };
            first.push_str(&format!("id: {id}\ndata: \n\n"));
        }
        if !first.is_empty() && !first.ends_with("\n\n") {
            first.push('\n');
        }
        let reader = Reader {
            generation,
            stream: self.clone(),
            cursor: from_seq,
            rx: self.inner.version.subscribe(),
            keepalive: opening.keepalive,
            opening: (!first.is_empty()).then(|| Bytes::from(first)),
            legacy_endpoint: opening.endpoint,
        };
        StreamBody::new(Box::pin(futures_util::stream::unfold(reader, Reader::next)))
    }
}

/// How a body starts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Opening {
    pub prime: bool,
    pub retry: Option<Duration>,
    pub keepalive: Option<Duration>,
    /// The legacy transport's first event: `event: endpoint` with this URL.
    pub endpoint: Option<String>,
    /// Encoded events to send first (a resume of a stream another replica served).
    pub replayed: Option<String>,
}

/// The body type of an SSE response.
pub(crate) type SseBody = StreamBody<
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send>>,
>;

struct Reader {
    generation: u64,
    stream: Stream,
    cursor: u64,
    rx: watch::Receiver<u64>,
    keepalive: Option<Duration>,
    opening: Option<Bytes>,
    legacy_endpoint: Option<String>,
}

impl Reader {
    async fn next(mut self) -> Option<(Result<Frame<Bytes>, Infallible>, Reader)> {
        if let Some(endpoint) = self.legacy_endpoint.take() {
            let text = format!("event: endpoint\ndata: {endpoint}\n\n");
            return Some((Ok(Frame::data(Bytes::from(text))), self));
        }
        if let Some(opening) = self.opening.take() {
            return Some((Ok(Frame::data(opening)), self));
        }
        loop {
            let ready = {
                let mut st = self.stream.state();
                if st.generation != self.generation {
                    return None; // hung up: the client will resume
                }
                match st.events.iter().find(|e| e.seq >= self.cursor) {
                    Some(e) => {
                        let seq = e.seq;
                        let text = encode_event(self.stream.event_id(seq).as_deref(), &e.json);
                        self.cursor = seq + 1;
                        st.delivered = st.delivered.max(self.cursor);
                        trim(&mut st, self.stream.inner.bounds.replay_events);
                        Some(Some(text))
                    }
                    None if st.finished => Some(None),
                    None => None,
                }
            };
            match ready {
                Some(Some(text)) => return Some((Ok(Frame::data(Bytes::from(text))), self)),
                Some(None) => return None,
                None => {}
            }
            let changed = match self.keepalive {
                Some(every) => match tokio::time::timeout(every, self.rx.changed()).await {
                    Ok(r) => r,
                    Err(_) => return Some((Ok(Frame::data(Bytes::from_static(b":\n\n"))), self)),
                },
                None => self.rx.changed().await,
            };
            if changed.is_err() {
                return None;
            }
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let mut st = self.stream.state();
        if st.generation == self.generation {
            st.attached = false;
        }
    }
}

#[cfg(test)]
impl Stream {
    fn pending_hang_up(&self) -> bool {
        self.state().hang_up_pending
    }
}

/// Drop delivered events beyond what is kept for replay.
fn trim(st: &mut State, keep: usize) {
    while st.events.len() > keep {
        match st.events.front() {
            Some(e) if e.seq < st.delivered => {
                st.queued_bytes -= e.json.len();
                st.events.pop_front();
            }
            _ => break,
        }
    }
}

/// One SSE event carrying a JSON-RPC message.
pub(crate) fn encode_event(id: Option<&str>, json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 40);
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(id);
        out.push('\n');
    }
    out.push_str("event: message\n");
    // Encoded JSON has no raw newlines, but be safe: each line is its own `data:` field.
    for line in json.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// Split an event id of ours into its stream prefix and sequence number.
pub(crate) fn parse_event_id(id: &str) -> Option<(&str, Option<u64>)> {
    let (prefix, seq) = id.rsplit_once('.')?;
    if seq == "p" {
        return Some((prefix, None));
    }
    Some((prefix, Some(seq.parse().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn read_all(body: SseBody) -> String {
        let bytes = body.collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_single_answer_can_go_as_json() {
        let s = Stream::new(Some("s1".into()), 1, StreamBounds::default());
        assert_eq!(s.push("{\"id\":1}".into(), 1), Pushed::Completed);
        assert_eq!(s.take_single().as_deref(), Some("{\"id\":1}"));
    }

    #[tokio::test]
    async fn events_stream_in_order_then_end() {
        let s = Stream::new(Some("s1".into()), 1, StreamBounds::default());
        s.push("{\"n\":1}".into(), 0);
        s.push("{\"id\":1}".into(), 1);
        assert!(s.take_single().is_none());
        let text = read_all(s.body(0, Opening::default())).await;
        assert_eq!(
            text,
            "id: s1.0\nevent: message\ndata: {\"n\":1}\n\nid: s1.1\nevent: message\ndata: {\"id\":1}\n\n"
        );
        assert!(s.is_spent());
    }

    #[tokio::test]
    async fn a_resumed_stream_replays_only_what_follows() {
        let s = Stream::new(Some("s1".into()), 1, StreamBounds::default());
        for i in 0..3 {
            s.push(format!("{{\"n\":{i}}}").into(), 0);
        }
        s.push("{\"id\":1}".into(), 1);
        assert_eq!(s.resume_point(1), Some(2));
        let text = read_all(s.body(2, Opening::default())).await;
        assert!(text.starts_with("id: s1.2\n"), "{text}");
        assert_eq!(text.matches("data:").count(), 2);
    }

    #[tokio::test]
    async fn priming_and_retry_come_first() {
        let s = Stream::new(Some("s1".into()), 1, StreamBounds::default());
        s.push("{\"id\":1}".into(), 1);
        let opening = Opening {
            prime: true,
            retry: Some(Duration::from_millis(500)),
            ..Opening::default()
        };
        let text = read_all(s.body(0, opening)).await;
        assert!(
            text.starts_with("retry: 500\nid: s1.p\ndata: \n\n"),
            "{text}"
        );
        assert_eq!(parse_event_id("s1.p"), Some(("s1", None)));
        assert_eq!(parse_event_id("a.b.7"), Some(("a.b", Some(7))));
    }

    #[tokio::test]
    async fn a_hung_up_stream_ends_its_body_and_resumes_later() {
        let s = Stream::new(Some("s1".into()), 1, StreamBounds::default());
        s.allow_hang_up();
        s.push("{\"n\":0}".into(), 0);
        let body = s.body(0, Opening::default());
        s.hang_up();
        assert_eq!(read_all(body).await, "");
        assert!(!s.is_finished());
        assert!(!s.is_attached());
        s.push("{\"id\":1}".into(), 1);
        // The client saw only the priming event: it resumes from the start.
        let from = s.resume_point_start().unwrap();
        let rest = read_all(s.body(from, Opening::default())).await;
        assert_eq!(rest.matches("data:").count(), 2, "{rest}");
    }

    #[tokio::test]
    async fn hanging_up_before_the_first_event_sends_only_the_opening() {
        let s = Stream::new(Some("s1".into()), 1, StreamBounds::default());
        s.allow_hang_up();
        s.hang_up();
        s.first_event().await; // returns: there is something to decide on
        assert!(s.pending_hang_up());
        let opening = Opening {
            prime: true,
            retry: Some(Duration::from_millis(500)),
            ..Opening::default()
        };
        let text = read_all(s.body(0, opening)).await;
        assert_eq!(text, "retry: 500\nid: s1.p\ndata: \n\n");
        s.push("{\"id\":1}".into(), 1);
        let rest = read_all(s.body(s.resume_point_start().unwrap(), Opening::default())).await;
        assert!(rest.contains("{\"id\":1}"));
    }

    #[test]
    fn a_client_that_never_reads_is_cut_off() {
        let bounds = StreamBounds {
            max_queued_events: 10,
            ..StreamBounds::default()
        };
        let s = Stream::new(None, 0, bounds);
        for _ in 0..10 {
            assert_eq!(s.push("{}".into(), 0), Pushed::Queued);
        }
        assert_eq!(s.push("{}".into(), 0), Pushed::Overflowed);
        assert_eq!(s.push("{}".into(), 0), Pushed::Gone);
        assert!(s.is_finished());
    }
}
