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
//! process ends are lost, and logged.
//!
//! With `[audit] sign`, each gateway signs the chain's head with its own key when it is due
//! (as with SQLite: every so many records, a minute after the last signed head, at each
//! flush and at the end), in the transaction that wrote the records, under the chain's
//! lock; `audit_checkpoint` holds the signed heads of every gateway.
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

use super::chain::{self, ChainEntry, Checkpoint, Report, StoredRecord, Verifier, to_hex};
use super::error::AuditError;
use super::record::{AuditQuery, AuditRecord};
use super::store::{Signer, ToolFilter};
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
    pub(super) fn spawn(pg: Postgres, signer: Option<Signer>) -> SharedWriter {
        let (tx, rx) = mpsc::channel();
        let url = pg.shown().to_owned();
        let thread = std::thread::Builder::new()
            .name("moat-audit-pg".into())
            .spawn(move || run(pg, rx, signer));
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
    signer: Option<Signer>,
    client: Option<Client>,
    waiting: VecDeque<Keyed>,
    dropped: u64,
    last_error: Option<String>,
}

impl Link {
    /// Make the connection again if it was lost; whether there is one.
    async fn connect(&mut self) -> bool {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            match self.pg.connect_one().await {
                Ok(client) => self.client = Some(client),
                Err(e) => {
                    self.fail(e.to_string());
                    return false;
                }
            }
        }
        true
    }

    async fn commit(&mut self) {
        while !self.waiting.is_empty() {
            if !self.connect().await {
                return;
            }
            let Some(client) = self.client.as_mut() else {
                return;
            };
            let n = self.waiting.len().min(MAX_BATCH);
            let batch: Vec<&Keyed> = self.waiting.iter().take(n).collect();
            match insert_all(client, &batch, self.signer.as_ref()).await {
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

    /// Sign the head now if it moved since the last signed head (a flush, the end).
    async fn sign_head(&mut self) -> Result<(), AuditError> {
        if self.signer.is_none() {
            return Ok(());
        }
        if !self.connect().await {
            let detail = self.last_error.clone().unwrap_or_default();
            return Err(store_err(&self.pg, detail));
        }
        let (Some(client), Some(signer)) = (self.client.as_mut(), self.signer.as_ref()) else {
            return Ok(());
        };
        let signed = sign_head(client, signer).await;
        signed.map_err(|e| {
            self.client = None;
            store_err(&self.pg, error_detail(&e))
        })
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

fn run(pg: Postgres, rx: Receiver<Msg>, signer: Option<Signer>) {
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
        signer,
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
                let flushed = link.flushed();
                let signed = if flushed.is_ok() {
                    runtime.block_on(link.sign_head())
                } else {
                    Ok(())
                };
                let _ = reply.send(flushed.and(signed));
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
    } else if let Err(e) = runtime.block_on(link.sign_head()) {
        tracing::warn!(error = %e, "audit: could not sign the chain's head");
    }
}

/// One batch, chained after the store's head, under the chain's lock; the new head signed
/// when it is due.
async fn insert_all(
    client: &mut Client,
    records: &[&Keyed],
    signer: Option<&Signer>,
) -> Result<(), tokio_postgres::Error> {
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
    if let Some(signer) = signer {
        sign_if_due(&tx, signer, id, prev, false).await?;
    }
    tx.commit().await
}

/// Sign the store's head if it moved since the last signed head (under the chain's lock).
async fn sign_head(client: &mut Client, signer: &Signer) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CHAIN_LOCK])
        .await?;
    let head = tx
        .query_opt("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1", &[])
        .await?;
    if let Some(row) = head
        && let Some(hash) = chain::from_hex(&row.get::<_, String>(1))
    {
        sign_if_due(&tx, signer, row.get(0), hash, true).await?;
    }
    tx.commit().await
}

/// Sign the head `(id, hash)` when the signer says it is due after the last signed head.
async fn sign_if_due(
    tx: &tokio_postgres::Transaction<'_>,
    signer: &Signer,
    id: i64,
    hash: chain::Hash,
    force: bool,
) -> Result<(), tokio_postgres::Error> {
    if id == 0 {
        return Ok(());
    }
    let last: Option<(i64, i64)> = tx
        .query_opt(
            "SELECT record_id, time_ms FROM audit_checkpoint ORDER BY id DESC LIMIT 1",
            &[],
        )
        .await?
        .map(|row| (row.get(0), row.get(1)));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    if !signer.due(last, id, now, force) {
        return Ok(());
    }
    let c = Checkpoint::sign(&signer.key, id, hash, now);
    tx.execute(
        "INSERT INTO audit_checkpoint (record_id, head, time_ms, public_key, signature) \
         VALUES ($1, $2, $3, $4, $5)",
        &[
            &c.record_id,
            &to_hex(&c.head),
            &c.time_ms,
            &to_hex(&c.public_key),
            &to_hex(&c.signature),
        ],
    )
    .await?;
    Ok(())
}

/// Every signed head in the store.
async fn checkpoints(client: &Client) -> Result<Vec<Checkpoint>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT id, record_id, head, time_ms, public_key, signature FROM audit_checkpoint \
             ORDER BY id",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| {
            let text = |i: usize| row.get::<_, String>(i);
            Checkpoint {
                id: row.get(0),
                record_id: row.get(1),
                head: chain::from_hex(&text(2)).unwrap_or([0; 32]),
                time_ms: row.get(3),
                public_key: chain::from_hex(&text(4)).unwrap_or([0; 32]),
                signature: chain::from_hex(&text(5)).unwrap_or([0; 64]),
            }
        })
        .collect())
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

/// Checks the whole chain of the store and its signed heads (as
/// [`super::AuditReader::verify`]).
pub async fn verify(pg: &Postgres, trusted: Vec<VerifyingKey>) -> Result<Report, AuditError> {
    let client = pg
        .client()
        .await
        .map_err(|e| store_err(pg, e.to_string()))?;
    let signed = checkpoints(&client)
        .await
        .map_err(|e| store_err(pg, error_detail(&e)))?;
    let rows = client
        .query(&format!("SELECT {COLUMNS} FROM audit ORDER BY id"), &[])
        .await
        .map_err(|e| store_err(pg, error_detail(&e)))?;
    let mut verifier = Verifier::new(signed, trusted);
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
        insert_all(&mut client, &[&a, &b], None)
            .await
            .expect("first");
        // Sent again, with a record queued since.
        insert_all(&mut client, &[&a, &b, &c], None)
            .await
            .expect("again");
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

    /// With a signer the head is signed when due and when asked; verifying checks the
    /// signatures against the trusted key, and finds a signed record altered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn heads_are_signed_and_checked() {
        let Some(store) = crate::store::postgres::TestStore::open("audit_signed").await else {
            return;
        };
        let pg = store.pg.clone();
        let mut client = pg.connect_one().await.expect("client");
        let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let signer = Signer {
            key: key.clone(),
            every: 2,
        };
        let record = |tool: &str| {
            Keyed::new(AuditRecord {
                tool: tool.into(),
                server: "s".into(),
                outcome: "ok".into(),
                ..AuditRecord::default()
            })
        };
        // The first head is signed at once; the next is not yet due (every 2 records).
        insert_all(&mut client, &[&record("a")], Some(&signer))
            .await
            .expect("a");
        assert_eq!(checkpoints(&client).await.expect("read").len(), 1);
        insert_all(&mut client, &[&record("b")], Some(&signer))
            .await
            .expect("b");
        assert_eq!(checkpoints(&client).await.expect("read").len(), 1);
        // A flush signs the head that moved; a second one, with nothing new, does not.
        sign_head(&mut client, &signer).await.expect("sign");
        sign_head(&mut client, &signer).await.expect("again");
        assert_eq!(checkpoints(&client).await.expect("read").len(), 2);

        let report = verify(&pg, vec![key.verifying_key()])
            .await
            .expect("verify");
        assert!(report.ok(), "{report:?}");
        assert_eq!(report.checkpoints, 2);
        // Another key is not trusted.
        let other = ed25519_dalek::SigningKey::from_bytes(&[8; 32]).verifying_key();
        assert!(!verify(&pg, vec![other]).await.expect("verify").ok());
        // A signed record altered (with its hash made again would not help: the head is
        // signed) breaks the chain.
        client
            .execute("UPDATE audit SET tool = 'x' WHERE id = 1", &[])
            .await
            .expect("tamper");
        assert!(!verify(&pg, Vec::new()).await.expect("verify").ok());
        store.close().await;
    }
}
