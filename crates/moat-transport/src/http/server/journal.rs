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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::directory::{SharedDirectory, StoredEvent};

/// Events waiting to be written, at most.
const QUEUE: usize = 16_384;

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
}

impl Journal {
    /// A journal writing to `directory`, from a task of its own.
    pub(crate) fn start(directory: SharedDirectory) -> Arc<Journal> {
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(write(directory, rx));
        Arc::new(Journal {
            queue,
            dropped: AtomicU64::new(0),
        })
    }

    /// Queue one event; never waits.
    pub(crate) fn record(&self, event: StoredEvent) {
        if self.queue.try_send(Item::Event(event)).is_err() {
            let before = self.dropped.fetch_add(1, Ordering::Relaxed);
            // Once, then at every 1,000th: the log must not become the next bottleneck.
            if before.is_multiple_of(1000) {
                tracing::warn!(
                    dropped = before + 1,
                    "stream events are not being written to the session directory as fast \
                     as they come; a session taken over after this replica dies may miss some"
                );
            }
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

async fn write(directory: SharedDirectory, mut rx: mpsc::Receiver<Item>) {
    let mut items = Vec::with_capacity(BATCH);
    let mut events = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut items, BATCH).await > 0 {
        let mut flushed = Vec::new();
        for item in items.drain(..) {
            match item {
                Item::Event(e) => events.push(e),
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
}
