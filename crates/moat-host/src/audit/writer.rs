//! The writer thread: owns the store's connection and commits whatever is queued.
//!
//! Group commit: the thread wakes on the first queued record, sleeps [`LINGER`] so that the
//! records of the calls that follow join it, then takes everything waiting (up to
//! [`MAX_BATCH`]) and commits it in one transaction. A commit per record would cost a WAL
//! write of four pages and a wake-up of this thread for every call; gathered, both are paid
//! once per batch. The price is the window: a host killed within [`LINGER`] of a call loses
//! that call's record (as it would lose records still queued in any case); committed records
//! are never lost. Flushes and queries travel the same channel and are answered at once,
//! after every record handed over before them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::error::AuditError;
use super::record::{AuditQuery, AuditRecord};
use super::{redact, store};

/// Most records per transaction, so one commit stays short even after a backlog.
pub(super) const MAX_BATCH: usize = 512;

/// How long the first record of a batch waits for others. While the thread sleeps, sending
/// a record wakes nobody, which is most of the saving.
pub(super) const LINGER: Duration = Duration::from_millis(2);

/// How long after its last record the thread keeps waking itself instead of waiting to be
/// woken.
const AWAKE: Duration = Duration::from_millis(100);

enum Msg {
    Record(Box<AuditRecord>),
    Flush(Sender<Result<(), AuditError>>),
    Query(AuditQuery, Sender<Result<Vec<AuditRecord>, AuditError>>),
}

/// The caller's side of the writer thread.
pub(super) struct Writer {
    path: PathBuf,
    // `Option`s so that `Drop` can close the channel and then join.
    tx: Option<Sender<Msg>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    pub(super) fn spawn(conn: Connection, path: PathBuf, signer: Option<store::Signer>) -> Writer {
        let (tx, rx) = mpsc::channel();
        let thread_path = path.clone();
        let thread = std::thread::Builder::new()
            .name("moat-audit".into())
            .spawn(move || run(conn, thread_path, rx, signer));
        let thread = match thread {
            Ok(handle) => Some(handle),
            Err(e) => {
                // Records then fail loudly at `flush`/`query` (WriterGone) instead of vanishing quietly.
                tracing::error!(error = %e, "audit: cannot start the writer thread");
                None
            }
        };
        Writer {
            path,
            tx: Some(tx),
            thread: Mutex::new(thread),
        }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    fn send(&self, msg: Msg) -> Result<(), AuditError> {
        let tx = self.tx.as_ref().ok_or(AuditError::WriterGone)?;
        tx.send(msg).map_err(|_| AuditError::WriterGone)
    }

    pub(super) fn record(&self, record: AuditRecord) {
        if self.send(Msg::Record(Box::new(record))).is_err() {
            tracing::warn!(path = %self.path.display(), "audit: writer stopped, record dropped");
        }
    }

    pub(super) fn flush(&self) -> Result<(), AuditError> {
        let (reply, answer) = mpsc::channel();
        self.send(Msg::Flush(reply))?;
        answer.recv().map_err(|_| AuditError::WriterGone)?
    }

    pub(super) fn query(&self, q: AuditQuery) -> Result<Vec<AuditRecord>, AuditError> {
        let (reply, answer) = mpsc::channel();
        self.send(Msg::Query(q, reply))?;
        answer.recv().map_err(|_| AuditError::WriterGone)?
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the channel ends the thread once it has committed what is queued.
        drop(self.tx.take());
        let handle = self.thread.get_mut().ok().and_then(Option::take);
        if let Some(handle) = handle
            && handle.join().is_err()
        {
            tracing::error!("audit: the writer thread panicked");
        }
    }
}

/// Failures since the last flush, reported by the next one.
#[derive(Default)]
struct Lost {
    count: u64,
    first: Option<String>,
}

fn run(mut conn: Connection, path: PathBuf, rx: Receiver<Msg>, signer: Option<store::Signer>) {
    let signer = signer.as_ref();
    let mut lost = Lost::default();
    let mut batch: Vec<AuditRecord> = Vec::new();
    let mut busy_until: Option<Instant> = None;
    loop {
        // While calls keep coming the thread wakes itself every LINGER and takes what is
        // queued: a caller then never pays for waking it (a futex wake, and on a VM often
        // an interrupt to another vCPU) while the answer to its call is on its way. Idle
        // for AWAKE, it goes back to waiting on the channel.
        let first = if busy_until.is_some_and(|until| Instant::now() < until) {
            std::thread::sleep(LINGER);
            match rx.try_recv() {
                Ok(msg) => msg,
                Err(mpsc::TryRecvError::Empty) => continue,
                Err(mpsc::TryRecvError::Disconnected) => break,
            }
        } else {
            let Ok(msg) = rx.recv() else { break };
            if matches!(msg, Msg::Record(_)) {
                std::thread::sleep(LINGER);
            }
            msg
        };
        if matches!(first, Msg::Record(_)) {
            busy_until = Some(Instant::now() + AWAKE);
        }
        let mut next = Some(first);
        // Gather records until the queue is empty, the batch is full, or a request needs an answer.
        let mut request = None;
        while let Some(msg) = next.take() {
            match msg {
                Msg::Record(r) => batch.push(scrub(*r)),
                other => {
                    request = Some(other);
                    break;
                }
            }
            if batch.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        commit(&mut conn, &path, &mut batch, &mut lost, signer);
        match request {
            Some(Msg::Flush(reply)) => {
                let signed = sign_head(&mut conn, &path, signer);
                let _ = reply.send(take_lost(&mut lost, &path).and(signed));
            }
            Some(Msg::Query(q, reply)) => {
                let _ = reply.send(store::query(&conn, &path, &q));
            }
            Some(Msg::Record(_)) | None => {}
        }
    }
    commit(&mut conn, &path, &mut batch, &mut lost, signer);
    // The head at shutdown is signed, so records since the last signature are covered too.
    if let Err(e) = sign_head(&mut conn, &path, signer) {
        tracing::warn!(error = %e, "audit: could not sign the chain's head");
    }
}

fn sign_head(
    conn: &mut Connection,
    path: &Path,
    signer: Option<&store::Signer>,
) -> Result<(), AuditError> {
    let Some(signer) = signer else { return Ok(()) };
    store::sign_head(conn, signer).map_err(|source| AuditError::Sqlite {
        path: path.to_path_buf(),
        source,
    })
}

fn commit(
    conn: &mut Connection,
    path: &Path,
    batch: &mut Vec<AuditRecord>,
    lost: &mut Lost,
    signer: Option<&store::Signer>,
) {
    if batch.is_empty() {
        return;
    }
    if let Err(e) = store::insert_all(conn, batch, signer) {
        tracing::warn!(path = %path.display(), records = batch.len(), error = %e,
            "audit: could not write records");
        lost.count += batch.len() as u64;
        lost.first.get_or_insert_with(|| e.to_string());
    }
    batch.clear();
}

fn take_lost(lost: &mut Lost, path: &Path) -> Result<(), AuditError> {
    let taken = std::mem::take(lost);
    match taken.count {
        0 => Ok(()),
        count => Err(AuditError::WriteFailed {
            path: path.to_path_buf(),
            count,
            reason: taken.first.unwrap_or_default(),
        }),
    }
}

/// Last line of defence, off the hot path: token-looking strings in the free-text error.
pub(super) fn scrub(mut record: AuditRecord) -> AuditRecord {
    if let Some(error) = record.error.take() {
        record.error = Some(redact::scrub_tokens(&error).into_owned());
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn log_is_send_and_sync() {
        assert_send_sync::<super::super::AuditLog>();
    }

    #[test]
    fn a_failed_commit_is_reported_by_the_next_flush_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locked.db");
        let conn = store::open_writable(&path).unwrap();
        // No waiting for the lock below, so the failure is immediate.
        conn.busy_timeout(std::time::Duration::ZERO).unwrap();
        let writer = Writer::spawn(conn, path.clone(), None);

        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
        writer.record(AuditRecord::default());
        writer.record(AuditRecord::default());
        let err = writer.flush().unwrap_err();
        assert!(
            matches!(err, AuditError::WriteFailed { count: 2, .. }),
            "{err}"
        );

        holder.execute_batch("COMMIT").unwrap();
        writer.record(AuditRecord::default());
        writer.flush().unwrap();
        let all = writer.query(AuditQuery::default()).unwrap();
        assert_eq!(all.len(), 1);
    }
}
