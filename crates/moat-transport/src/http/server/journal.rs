//! The events of resumable SSE streams, written to the session directory so that a replica
//! taking a session over can replay what the client had not yet seen (see
//! [`super::directory`]).
//!
//! A stream starts writing when it becomes an SSE body (an answer sent as plain JSON cannot
//! be resumed, so it is never written). Events go to one task per server through a bounded
//! queue, and the task writes whatever has gathered in one batch while the previous batch is
//! in flight: no store round trip on the path of a message, and under load one round trip
//! carries many events. What the price is: events a replica made in the moment before it
//! died may not have been written (a resume then ends a little early, with the errors of
//! the requests it awaited), and when the queue is full (the store is slow or down) events
//! are not written (logged; a live replica still replays them from memory).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::directory::{SharedDirectory, StoredEvent};

/// Events waiting to be written, at most.
const QUEUE: usize = 16_384;

/// Bytes of events waiting to be written, at most: a slow store must not make the queue
/// hold a copy of every large tool result.
const QUEUE_BYTES: usize = 32 * 1024 * 1024;

/// An event larger than this is not written (logged): replaying it from the store after a
/// takeover is not worth holding and writing a copy of every large result. A resume that
/// needed it ends there (see [`super::resume_foreign`]'s gap rule).
const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// Events written in one batch, at most.
const BATCH: usize = 512;

/// How long a server that stops waits for what is queued to be written.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(3);

enum Item {
    Event(StoredEvent),
    /// Answered once everything queued before it is written.
    Flush(oneshot::Sender<()>),
}

/// The writer of one server's stream events.
pub(crate) struct Journal {
    queue: mpsc::Sender<Item>,
    dropped: AtomicU64,
    /// Bytes of the events queued now.
    queued_bytes: Arc<AtomicUsize>,
}

impl Journal {
    /// A journal writing to `directory`, from a task of its own.
    pub(crate) fn start(directory: SharedDirectory) -> Arc<Journal> {
        let (queue, rx) = mpsc::channel(QUEUE);
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        tokio::spawn(write(directory, rx, queued_bytes.clone()));
        Arc::new(Journal {
            queue,
            dropped: AtomicU64::new(0),
            queued_bytes,
        })
    }

    /// Queue one event; never waits.
    pub(crate) fn record(&self, event: StoredEvent) {
        let size = event.json.len();
        if size > MAX_EVENT_BYTES {
            return self.not_written();
        }
        if self.queued_bytes.fetch_add(size, Ordering::Relaxed) + size > QUEUE_BYTES {
            self.queued_bytes.fetch_sub(size, Ordering::Relaxed);
            return self.not_written();
        }
        if self.queue.try_send(Item::Event(event)).is_err() {
            self.queued_bytes.fetch_sub(size, Ordering::Relaxed);
            self.not_written();
        }
    }

    fn not_written(&self) {
        let before = self.dropped.fetch_add(1, Ordering::Relaxed);
        // Once, then at every 1,000th: the log must not become the next bottleneck.
        if before.is_multiple_of(1000) {
            tracing::warn!(
                dropped = before + 1,
                "stream events are not being written to the session directory (too large, or \
                 coming faster than it takes them); a session taken over after this replica \
                 dies may have to end a resumed stream early"
            );
        }
    }

    /// Wait (a bounded time) until everything queued so far is written.
    pub(crate) async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.queue.send(Item::Flush(tx)).await.is_ok() {
            let _ = tokio::time::timeout(FLUSH_TIMEOUT, rx).await;
        }
    }
}

/// One stream's way into the journal.
#[derive(Clone)]
pub(crate) struct StreamJournal {
    pub journal: Arc<Journal>,
    pub session: Arc<str>,
}

impl StreamJournal {
    pub(crate) fn record(&self, stream: &str, seq: u64, answers: bool, json: &str) {
        self.journal
            .record(StoredEvent::new(&*self.session, stream, seq, answers, json));
    }
}

async fn write(
    directory: SharedDirectory,
    mut rx: mpsc::Receiver<Item>,
    queued_bytes: Arc<AtomicUsize>,
) {
    let mut items = Vec::with_capacity(BATCH);
    let mut events = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut items, BATCH).await > 0 {
        let mut flushed = Vec::new();
        for item in items.drain(..) {
            match item {
                Item::Event(e) => {
                    queued_bytes.fetch_sub(e.json.len(), Ordering::Relaxed);
                    events.push(e);
                }
                Item::Flush(done) => flushed.push(done),
            }
        }
        if !events.is_empty()
            && let Err(e) = directory.append_events(&events).await
        {
            // Not retried: the events are still in this replica's memory, and are needed
            // from the store only if this replica dies too.
            tracing::warn!(
                events = events.len(),
                "writing stream events to the session directory failed: {e}"
            );
        }
        events.clear();
        for done in flushed {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::server::MemoryDirectory;
    use crate::http::server::directory::SessionDirectory;

    #[tokio::test]
    async fn queued_events_are_written_in_order_and_kept_once() {
        let directory = Arc::new(MemoryDirectory::default());
        let journal = Journal::start(directory.clone());
        let stream = StreamJournal {
            journal: journal.clone(),
            session: "s".into(),
        };
        for seq in 0..5 {
            stream.record("t_1", seq, seq == 4, &format!("{{\"n\":{seq}}}"));
        }
        stream.record("t_1", 2, false, "{\"n\":2}"); // written twice, kept once
        journal.flush().await;
        let kept = directory.events("s", "t_1").await.unwrap();
        let seqs: Vec<u64> = kept.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
        assert!(kept[4].answers && !kept[3].answers);
        assert!(directory.events("s", "t_2").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn an_event_too_large_is_not_written_and_the_rest_are() {
        let directory = Arc::new(MemoryDirectory::default());
        let journal = Journal::start(directory.clone());
        let stream = StreamJournal {
            journal: journal.clone(),
            session: "s".into(),
        };
        let huge = format!("{{\"n\":\"{}\"}}", "x".repeat(MAX_EVENT_BYTES));
        stream.record("t_1", 0, false, "{}");
        stream.record("t_1", 1, false, &huge);
        stream.record("t_1", 2, true, "{}");
        journal.flush().await;
        let seqs: Vec<u64> = directory
            .events("s", "t_1")
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(
            seqs,
            vec![0, 2],
            "the large one is left out (a resume stops before it)"
        );
        assert_eq!(journal.queued_bytes.load(Ordering::Relaxed), 0);
    }
}
