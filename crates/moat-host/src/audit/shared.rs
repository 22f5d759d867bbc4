//! The audit trail in the shared store (PostgreSQL): one chain for every gateway on it.
//!
//! As with SQLite, a call only queues its record; a thread of its own (with a runtime of
//! its own, so no round trip ever runs on a worker of the gateway's) gathers what is queued
//! and commits it in one transaction. The transaction takes an advisory lock before it
//! reads the chain's head, so the batches of several gateways chain one after another.
//!
//! When the store is unreachable, records are kept (up to [`MAX_WAITING`]) and written when
//! it is back; a flush meanwhile reports how many wait. A record is acknowledged when a
//! flush returns `Ok`: from then on it is in the store. Records still waiting when the
//! process ends are lost, and logged. Signed heads (`[audit] sign`) are not written here.
//!
//! Each record gets a random key when it is queued. A commit whose acknowledgement is lost
//! (the connection drops as it returns) leaves the writer unsure whether its batch is in;
//! it sends the batch again, and the records whose keys are already there are skipped, so
//! each record is in the trail exactly once.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ed25519_dalek::VerifyingKey;
use tokio_postgres::Client;

use super::chain::{self, ChainEntry, Report, StoredRecord, Verifier, to_hex};
use super::error::AuditError;
use super::record::{AuditQuery, AuditRecord};
use super::store::ToolFilter;
use super::writer::{LINGER, MAX_BATCH, scrub};
use crate::store::postgres::Postgres;

/// Records kept while the store is unreachable; beyond, the oldest are dropped (and counted).
pub const MAX_WAITING: usize = 100_000;

/// How often writing is tried again while the store is unreachable.
const RETRY: Duration = Duration::from_millis(500);

/// How long records still waiting at shutdown are tried.
const LAST_TRY: Duration = Duration::from_secs(5);

/// The lock key batches are chained under ("audi").
const CHAIN_LOCK: i64 = 0x6175_6469;

const COLUMNS: &str = "id, time_ms, kind, session, client, server, tool, exposed_name, \
    args_digest, arguments, decision, rule, consent, outcome, duration_us, result_bytes, error, \
    prev_hash, hash, subject, client_id, record_key";

/// A record waiting to be written, with its key.
pub(super) struct Keyed {
    key: String,
    record: AuditRecord,
}

impl Keyed {
    fn new(record: AuditRecord) -> Keyed {
        let mut bits = [0u8; 16];
        if getrandom::fill(&mut bits).is_err() {
            // Unique enough without the OS's randomness: this process, now, and a count.
            static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let count = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            bits[..8].copy_from_slice(&now.to_le_bytes());
            bits[8..12].copy_from_slice(&std::process::id().to_le_bytes());
            bits[12..].copy_from_slice(&(count as u32).to_le_bytes());
        }
        Keyed {
            key: to_hex(&bits),
            record,
        }
    }
}

enum Msg {
    Record(Box<AuditRecord>),
    Flush(Sender<Result<(), AuditError>>),
    Query(AuditQuery, Sender<Result<Vec<AuditRecord>, AuditError>>),
}

/// The caller's side of the writer thread.
pub(super) struct SharedWriter {
    url: String,
    tx: Option<Sender<Msg>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl SharedWriter {
    pub(super) fn spawn(pg: Postgres) -> SharedWriter {
        let (tx, rx) = mpsc::channel();
        let url = pg.shown().to_owned();
        let thread = std::thread::Builder::new()
            .name("moat-audit-pg".into())
            .spawn(move || run(pg, rx));
        let thread = match thread {
            Ok(handle) => Some(handle),
            Err(e) => {
                tracing::error!(error = %e, "audit: cannot start the writer thread");
                None
            }
        };
        SharedWriter {
            url,
            tx: Some(tx),
            thread: Mutex::new(thread),
        }
    }

    pub(super) fn url(&self) -> &str {
        &self.url
    }

    fn send(&self, msg: Msg) -> Result<(), AuditError> {
        let tx = self.tx.as_ref().ok_or(AuditError::WriterGone)?;
        tx.send(msg).map_err(|_| AuditError::WriterGone)
    }

    pub(super) fn record(&self, record: AuditRecord) {
        if self.send(Msg::Record(Box::new(record))).is_err() {
            tracing::warn!(store = %self.url, "audit: writer stopped, record dropped");
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

impl Drop for SharedWriter {
    fn drop(&mut self) {
        drop(self.tx.take());
        let handle = self.thread.get_mut().ok().and_then(Option::take);
        if let Some(handle) = handle
            && handle.join().is_err()
        {
            tracing::error!("audit: the writer thread panicked");
        }
    }
}

/// The thread's state: its connection (made again after a failure) and what waits.
struct Link {
    pg: Postgres,
    client: Option<Client>,
    waiting: VecDeque<Keyed>,
    dropped: u64,
    last_error: Option<String>,
}

impl Link {
    async fn commit(&mut self) {
        while !self.waiting.is_empty() {
            if self.client.as_ref().is_none_or(Client::is_closed) {
                match self.pg.connect_one().await {
                    Ok(client) => self.client = Some(client),
                    Err(e) => {
                        self.fail(e.to_string());
                        return;
                    }
                }
            }
            let Some(client) = self.client.as_mut() else {
                return;
            };
            let n = self.waiting.len().min(MAX_BATCH);
            let batch: Vec<&Keyed> = self.waiting.iter().take(n).collect();
            match insert_all(client, &batch).await {
                Ok(()) => {
                    self.waiting.drain(..n);
                    if self.last_error.take().is_some() {
                        tracing::info!(
                            store = self.pg.shown(),
                            "audit: the store is back; waiting records written"
                        );
                    }
                }
                Err(e) => {
                    self.client = None;
                    self.fail(error_detail(&e));
                    return;
                }
            }
        }
    }

    fn fail(&mut self, detail: String) {
        if self.last_error.is_none() {
            tracing::warn!(store = self.pg.shown(), error = %detail, waiting = self.waiting.len(),
                "audit: the store is unreachable; records wait for it");
        }
        self.last_error = Some(detail);
    }

    fn keep(&mut self, record: AuditRecord) {
        if self.waiting.len() >= MAX_WAITING {
            self.waiting.pop_front();
            self.dropped += 1;
        }
        self.waiting.push_back(Keyed::new(scrub(record)));
    }

    fn flushed(&mut self) -> Result<(), AuditError> {
        if self.dropped > 0 {
            let count = std::mem::take(&mut self.dropped);
            return Err(AuditError::WriteFailed {
                path: self.pg.shown().into(),
                count,
                reason: format!("more than {MAX_WAITING} records waited for the store"),
            });
        }
        if self.waiting.is_empty() {
            return Ok(());
        }
        Err(AuditError::Waiting {
            url: self.pg.shown().to_owned(),
            count: self.waiting.len(),
            reason: self.last_error.clone().unwrap_or_default(),
        })
    }
}

fn run(pg: Postgres, rx: Receiver<Msg>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "audit: cannot start the writer's runtime");
            return;
        }
    };
    let mut link = Link {
        pg,
        client: None,
        waiting: VecDeque::new(),
        dropped: 0,
        last_error: None,
    };
    loop {
        let first = if link.waiting.is_empty() {
            match rx.recv() {
                Ok(msg) => Some(msg),
                Err(_) => break,
            }
        } else {
            match rx.recv_timeout(RETRY) {
                Ok(msg) => Some(msg),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        };
        if matches!(first, Some(Msg::Record(_))) {
            std::thread::sleep(LINGER);
        }
        let mut next = first;
        let mut request = None;
        while let Some(msg) = next.take() {
            match msg {
                Msg::Record(r) => link.keep(*r),
                other => {
                    request = Some(other);
                    break;
                }
            }
            if link.waiting.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        runtime.block_on(link.commit());
        match request {
            Some(Msg::Flush(reply)) => {
                let _ = reply.send(link.flushed());
            }
            Some(Msg::Query(q, reply)) => {
                let answer = runtime.block_on(query(&link.pg, &q));
                let _ = reply.send(answer);
            }
            Some(Msg::Record(_)) | None => {}
        }
    }
    let deadline = Instant::now() + LAST_TRY;
    while !link.waiting.is_empty() && Instant::now() < deadline {
        runtime.block_on(link.commit());
        if !link.waiting.is_empty() {
            std::thread::sleep(RETRY);
        }
    }
    if !link.waiting.is_empty() {
        tracing::error!(
            store = link.pg.shown(),
            lost = link.waiting.len(),
            "audit: the store stayed unreachable; records not written"
        );
    }
}

/// One batch, chained after the store's head, under the chain's lock.
async fn insert_all(client: &mut Client, records: &[&Keyed]) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CHAIN_LOCK])
        .await?;
    // Records of a batch sent before whose commit went through unacknowledged.
    let keys: Vec<&str> = records.iter().map(|k| k.key.as_str()).collect();
    let written: std::collections::HashSet<String> = tx
        .query(
            "SELECT record_key FROM audit WHERE record_key = ANY($1)",
            &[&keys],
        )
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let head = tx
        .query_opt("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1", &[])
        .await?;
    let (mut id, mut prev) = match head {
        Some(row) => {
            let hash: String = row.get(1);
            (
                row.get::<_, i64>(0),
                chain::from_hex(&hash).unwrap_or(chain::GENESIS),
            )
        }
        None => (0, chain::GENESIS),
    };
    let insert = tx
        .prepare(&format!(
            "INSERT INTO audit ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
             $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)"
        ))
        .await?;
    for keyed in records.iter().filter(|k| !written.contains(&k.key)) {
        let r = &keyed.record;
        id += 1;
        let s = StoredRecord::from_record(id, r);
        let hash = s.hash(&prev);
        tx.execute(
            &insert,
            &[
                &s.id,
                &s.time_ms,
                &s.kind,
                &s.session,
                &s.client,
                &s.server,
                &s.tool,
                &s.exposed_name,
                &s.args_digest,
                &s.arguments,
                &s.decision,
                &s.rule,
                &s.consent,
                &s.outcome,
                &s.duration_us,
                &s.result_bytes,
                &s.error,
                &to_hex(&prev),
                &to_hex(&hash),
                &s.subject,
                &s.client_id,
                &keyed.key,
            ],
        )
        .await?;
        prev = hash;
    }
    tx.commit().await
}

fn store_err(pg: &Postgres, detail: String) -> AuditError {
    AuditError::Store {
        url: pg.shown().to_owned(),
        detail,
    }
}

fn stored(row: &tokio_postgres::Row) -> StoredRecord {
    let mut s = StoredRecord::from_record(row.get(0), &AuditRecord::default());
    s.time_ms = row.get(1);
    s.kind = row.get(2);
    s.session = row.get(3);
    s.client = row.get(4);
    s.server = row.get(5);
    s.tool = row.get(6);
    s.exposed_name = row.get(7);
    s.args_digest = row.get(8);
    s.arguments = row.get(9);
    s.decision = row.get(10);
    s.rule = row.get(11);
    s.consent = row.get(12);
    s.outcome = row.get(13);
    s.duration_us = row.get(14);
    s.result_bytes = row.get(15);
    s.error = row.get(16);
    s.subject = row.get(19);
    s.client_id = row.get(20);
    s
}

fn record_of(s: StoredRecord) -> AuditRecord {
    AuditRecord {
        time_ms: s.time_ms,
        kind: s.kind,
        session: s.session,
        client: s.client,
        subject: s.subject,
        client_id: s.client_id,
        server: s.server,
        tool: s.tool,
        exposed_name: s.exposed_name,
        args_digest: s.args_digest,
        arguments: s
            .arguments
            .map(|text| serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))),
        decision: s.decision,
        rule: s.rule,
        consent: s.consent,
        outcome: s.outcome,
        duration_us: u64::try_from(s.duration_us).unwrap_or_default(),
        result_bytes: u64::try_from(s.result_bytes).unwrap_or_default(),
        error: s.error,
    }
}

/// The newest `limit` records matching `q`, oldest first (as [`super::AuditReader::query`]).
pub async fn query(pg: &Postgres, q: &AuditQuery) -> Result<Vec<AuditRecord>, AuditError> {
    let filter = q.tool.as_deref().map(ToolFilter::new).transpose()?;
    let client = pg
        .client()
        .await
        .map_err(|e| store_err(pg, e.to_string()))?;
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM audit WHERE ($1::BIGINT IS NULL OR time_ms >= $1) \
                 AND ($2::TEXT IS NULL OR server = $2) AND ($3::TEXT IS NULL OR subject = $3) \
                 ORDER BY time_ms DESC, id DESC"
            ),
            &[&q.since_ms, &q.server, &q.user],
        )
        .await
        .map_err(|e| store_err(pg, error_detail(&e)))?;
    let limit = q.limit.unwrap_or(usize::MAX);
    let mut out: Vec<AuditRecord> = rows
        .iter()
        .map(|row| record_of(stored(row)))
        .filter(|r| filter.as_ref().is_none_or(|f| f.matches(r)))
        .take(limit)
        .collect();
    out.reverse();
    Ok(out)
}

/// Checks the whole chain of the store (as [`super::AuditReader::verify`]; there are no
/// signed heads in the shared store).
pub async fn verify(pg: &Postgres, trusted: Vec<VerifyingKey>) -> Result<Report, AuditError> {
    let client = pg
        .client()
        .await
        .map_err(|e| store_err(pg, e.to_string()))?;
    let rows = client
        .query(&format!("SELECT {COLUMNS} FROM audit ORDER BY id"), &[])
        .await
        .map_err(|e| store_err(pg, error_detail(&e)))?;
    let mut verifier = Verifier::new(Vec::new(), trusted);
    for row in &rows {
        let id: i64 = row.get(0);
        let link = |i: usize, what: &'static str| -> Result<Option<chain::Hash>, chain::Break> {
            let text: String = row.get(i);
            chain::from_hex(&text)
                .map(Some)
                .ok_or(chain::Break::Malformed { id, what })
        };
        match (link(17, "prev_hash"), link(18, "hash")) {
            (Ok(prev_hash), Ok(hash)) => verifier.push(&ChainEntry {
                record: stored(row),
                prev_hash,
                hash,
            }),
            (Err(problem), _) | (_, Err(problem)) => verifier.fail(problem),
        }
        if verifier.failed() {
            break;
        }
    }
    Ok(verifier.finish())
}

fn error_detail(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch sent again after its commit (the acknowledgement lost) is written once, and
    /// the chain still verifies; records new in the second batch are written after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_sent_twice_is_written_once() {
        let Some(store) = crate::store::postgres::TestStore::open("audit_once").await else {
            return;
        };
        let pg = store.pg.clone();
        let mut client = pg.connect_one().await.expect("client");

        let record = |tool: &str| {
            Keyed::new(AuditRecord {
                tool: tool.into(),
                server: "s".into(),
                outcome: "ok".into(),
                ..AuditRecord::default()
            })
        };
        let (a, b, c) = (record("a"), record("b"), record("c"));
        insert_all(&mut client, &[&a, &b]).await.expect("first");
        // Sent again, with a record queued since.
        insert_all(&mut client, &[&a, &b, &c]).await.expect("again");
        let tools: Vec<String> = client
            .query("SELECT tool FROM audit ORDER BY id", &[])
            .await
            .expect("read")
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(tools, ["a", "b", "c"]);
        let report = verify(&pg, Vec::new()).await.expect("verify");
        assert!(report.ok(), "{report:?}");
        store.close().await;
    }
}
