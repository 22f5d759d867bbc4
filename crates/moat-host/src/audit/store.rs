//! The SQLite side of the audit trail: opening the file, the `audit` table, inserts and queries.
//!
//! Only this file knows SQL. The table shares its file with other modules' tables, so nothing
//! here touches file-wide state other than the journal settings every user of the file wants.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ed25519_dalek::{SigningKey, VerifyingKey};
use globset::{Glob, GlobMatcher};
use rusqlite::{Connection, OpenFlags, OptionalExtension as _, Row, TransactionBehavior, params};

use super::chain::{
    self, ChainEntry, Checkpoint, ExportLine, Hash, Report, StoredRecord, Verifier, to_hex,
};
use super::error::AuditError;
use super::record::{AuditQuery, AuditRecord, now_ms};

/// How long a statement waits for another connection's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

// One index only: every insert pays for each. `--since` uses it; the tool glob is matched
// here, not in SQL, and a server filter scans (stores of earlier versions lose the two
// indexes they had). `prev_hash` and `hash` (hex) chain the records (see `chain`); they are
// NULL in records written before chaining existed.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS audit (
    id           INTEGER PRIMARY KEY,
    time_ms      INTEGER NOT NULL,
    session      TEXT    NOT NULL,
    client       TEXT,
    server       TEXT    NOT NULL,
    tool         TEXT    NOT NULL,
    exposed_name TEXT    NOT NULL,
    args_digest  TEXT    NOT NULL,
    arguments    TEXT,
    decision     TEXT    NOT NULL,
    rule         TEXT    NOT NULL,
    consent      TEXT,
    outcome      TEXT    NOT NULL,
    duration_us  INTEGER NOT NULL,
    result_bytes INTEGER NOT NULL,
    error        TEXT,
    kind         TEXT    NOT NULL DEFAULT 'call',
    prev_hash    TEXT,
    hash         TEXT,
    subject      TEXT,
    client_id    TEXT
);
CREATE INDEX IF NOT EXISTS audit_time ON audit (time_ms);
DROP INDEX IF EXISTS audit_tool;
DROP INDEX IF EXISTS audit_server_tool;
CREATE TABLE IF NOT EXISTS audit_checkpoint (
    id           INTEGER PRIMARY KEY,
    record_id    INTEGER NOT NULL,
    head         TEXT    NOT NULL,
    time_ms      INTEGER NOT NULL,
    public_key   TEXT    NOT NULL,
    signature    TEXT    NOT NULL
);
";

const INSERT: &str = "INSERT INTO audit (id, time_ms, session, client, server, tool, exposed_name,
    args_digest, arguments, decision, rule, consent, outcome, duration_us, result_bytes, error,
    kind, prev_hash, hash, subject, client_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,
    ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)";

const SELECT: &str = "SELECT time_ms, session, client, server, tool, exposed_name, args_digest,
    arguments, decision, rule, consent, outcome, duration_us, result_bytes, error, kind, subject,
    client_id FROM audit";

/// [`SELECT`] for a store read-only and older than a column: its default instead.
fn select_records(has_kind: bool, has_subject: bool) -> String {
    format!(
        "SELECT time_ms, session, client, server, tool, exposed_name, args_digest, arguments,
         decision, rule, consent, outcome, duration_us, result_bytes, error, {kind}, {caller}
         FROM audit",
        kind = if has_kind { "kind" } else { "'call'" },
        caller = if has_subject {
            "subject, client_id"
        } else {
            "NULL, NULL"
        },
    )
}

fn has_column(conn: &Connection, column: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM pragma_table_info('audit') WHERE name = ?1",
        [column],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// Stores written before records had a kind gain the column (every old record is a call),
/// and stores written before the chain gain its two columns (NULL: the legacy prefix).
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    if !has_column(conn, "kind")? {
        conn.execute_batch("ALTER TABLE audit ADD COLUMN kind TEXT NOT NULL DEFAULT 'call'")?;
    }
    if !has_column(conn, "hash")? {
        conn.execute_batch(
            "ALTER TABLE audit ADD COLUMN prev_hash TEXT; ALTER TABLE audit ADD COLUMN hash TEXT;",
        )?;
    }
    if !has_column(conn, "subject")? {
        conn.execute_batch(
            "ALTER TABLE audit ADD COLUMN subject TEXT; ALTER TABLE audit ADD COLUMN client_id TEXT;",
        )?;
    }
    Ok(())
}

fn sqlite_err(path: &Path) -> impl Fn(rusqlite::Error) -> AuditError + '_ {
    move |source| AuditError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// Opens or creates the store at `path`, with WAL and the `audit` table in place.
pub(super) fn open_writable(path: &Path) -> Result<Connection, AuditError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| AuditError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let conn = Connection::open(path).map_err(sqlite_err(path))?;
    prepare(&conn, true).map_err(sqlite_err(path))?;
    Ok(conn)
}

pub(super) fn open_in_memory() -> Result<Connection, AuditError> {
    let path = Path::new(":memory:");
    let conn = Connection::open_in_memory().map_err(sqlite_err(path))?;
    prepare(&conn, false).map_err(sqlite_err(path))?;
    Ok(conn)
}

fn prepare(conn: &Connection, wal: bool) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    if wal {
        // A killed host then loses at most the transaction it was writing: committed ones are in the WAL.
        let mode = crate::sqlite::use_wal(conn)?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(%mode, "audit store: SQLite refused WAL mode");
        }
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // One transaction, so that two processes opening an old store do not both add a column.
    let tx = conn.unchecked_transaction()?;
    tx.execute_batch(SCHEMA)?;
    migrate(&tx)?;
    tx.commit()
}

/// Signs chain heads while writing (see [`Signer::due`] for when).
pub(super) struct Signer {
    pub(super) key: SigningKey,
    /// Sign once this many records follow the last signed head.
    pub(super) every: i64,
}

/// Sign also when the last signed head is older than this and records followed it, so a
/// quiet gateway does not leave its records unsigned for long.
const SIGN_INTERVAL_MS: i64 = 60_000;

impl Signer {
    /// Whether the head `head_id` is to be signed now, given the last checkpoint (`None`:
    /// none yet). `force`: sign whenever the head moved (flush, shutdown).
    pub(super) fn due(
        &self,
        last: Option<(i64, i64)>,
        head_id: i64,
        now: i64,
        force: bool,
    ) -> bool {
        match last {
            None => true,
            Some((record_id, _)) if head_id <= record_id => false,
            Some(_) if force => true,
            Some((record_id, time_ms)) => {
                head_id - record_id >= self.every || now - time_ms >= SIGN_INTERVAL_MS
            }
        }
    }
}

/// The newest record's id and the hash the next record follows. Read inside the write
/// transaction, so records of other connections and processes are chained too.
fn chain_head(conn: &Connection) -> rusqlite::Result<(i64, Hash)> {
    // Once per committed batch: the statement is kept prepared.
    let newest: Option<(i64, Option<String>)> = conn
        .prepare_cached("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((id, hash)) = newest else {
        return Ok((0, chain::GENESIS));
    };
    if let Some(hash) = hash {
        // A malformed stored hash: chain on from zeros; verifying names that record.
        return Ok((id, chain::from_hex(&hash).unwrap_or(chain::GENESIS)));
    }
    let newest_chained: Option<String> = conn
        .query_row(
            "SELECT hash FROM audit WHERE hash IS NOT NULL ORDER BY id DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(hash) = newest_chained {
        // Unchained records after chained ones (an older moat still writing): verifying
        // reports the first of them; the chain goes on from its own head.
        return Ok((id, chain::from_hex(&hash).unwrap_or(chain::GENESIS)));
    }
    // Only legacy records: the chain starts after them (once per store).
    let mut stmt = conn.prepare(&format!("{} ORDER BY id", select_chain(true, true, true)))?;
    let mut rows = stmt.query([])?;
    let mut head = chain::GENESIS;
    while let Some(row) = rows.next()? {
        head = stored_from_row(row)?.hash(&head);
    }
    Ok((id, head))
}

fn last_checkpoint(conn: &Connection) -> rusqlite::Result<Option<(i64, i64)>> {
    conn.query_row(
        "SELECT record_id, time_ms FROM audit_checkpoint ORDER BY id DESC LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

fn insert_checkpoint(
    conn: &Connection,
    signer: &Signer,
    head_id: i64,
    head: Hash,
) -> rusqlite::Result<()> {
    let c = Checkpoint::sign(&signer.key, head_id, head, now_ms());
    conn.execute(
        "INSERT INTO audit_checkpoint (record_id, head, time_ms, public_key, signature)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            c.record_id,
            to_hex(&c.head),
            c.time_ms,
            to_hex(&c.public_key),
            to_hex(&c.signature)
        ],
    )?;
    Ok(())
}

/// Inserts `records` in one transaction, all of them or none, each chained to the one
/// before it; signs the new head when it is due.
///
/// `BEGIN IMMEDIATE` takes the write lock before the head is read, so two connections (or
/// processes) on one store never chain two records to the same predecessor.
pub(super) fn insert_all(
    conn: &mut Connection,
    records: &[AuditRecord],
    signer: Option<&Signer>,
) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (mut id, mut prev) = chain_head(&tx)?;
    {
        let mut stmt = tx.prepare_cached(INSERT)?;
        for r in records {
            id += 1;
            let s = StoredRecord::from_record(id, r);
            let hash = s.hash(&prev);
            stmt.execute(params![
                s.id,
                s.time_ms,
                s.session,
                s.client,
                s.server,
                s.tool,
                s.exposed_name,
                s.args_digest,
                s.arguments,
                s.decision,
                s.rule,
                s.consent,
                s.outcome,
                s.duration_us,
                s.result_bytes,
                s.error,
                s.kind,
                to_hex(&prev),
                to_hex(&hash),
                s.subject,
                s.client_id,
            ])?;
            prev = hash;
        }
    }
    if let Some(signer) = signer
        && !records.is_empty()
        && signer.due(last_checkpoint(&tx)?, id, now_ms(), false)
    {
        insert_checkpoint(&tx, signer, id, prev)?;
    }
    tx.commit()
}

/// Signs the store's head if records followed the last signed head (at flush and shutdown).
pub(super) fn sign_head(conn: &mut Connection, signer: &Signer) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let newest: Option<(i64, String)> = tx
        .query_row(
            "SELECT id, hash FROM audit WHERE hash IS NOT NULL ORDER BY id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    if let Some((id, hash)) = newest
        && let Some(head) = chain::from_hex(&hash)
        && signer.due(last_checkpoint(&tx)?, id, now_ms(), true)
    {
        insert_checkpoint(&tx, signer, id, head)?;
    }
    tx.commit()
}

/// The columns of a [`StoredRecord`] and its links, in [`stored_from_row`]'s order; a store
/// older than a column reads its default.
fn select_chain(has_kind: bool, has_hash: bool, has_subject: bool) -> String {
    format!(
        "SELECT id, time_ms, {kind}, session, client, server, tool, exposed_name, args_digest,
         arguments, decision, rule, consent, outcome, duration_us, result_bytes, error,
         {links}, {caller} FROM audit",
        kind = if has_kind { "kind" } else { "'call'" },
        links = if has_hash {
            "prev_hash, hash"
        } else {
            "NULL, NULL"
        },
        caller = if has_subject {
            "subject, client_id"
        } else {
            "NULL, NULL"
        },
    )
}

fn stored_from_row(row: &Row<'_>) -> rusqlite::Result<StoredRecord> {
    Ok(StoredRecord {
        id: row.get(0)?,
        time_ms: row.get(1)?,
        kind: row.get(2)?,
        session: row.get(3)?,
        client: row.get(4)?,
        server: row.get(5)?,
        tool: row.get(6)?,
        exposed_name: row.get(7)?,
        args_digest: row.get(8)?,
        arguments: row.get(9)?,
        decision: row.get(10)?,
        rule: row.get(11)?,
        consent: row.get(12)?,
        outcome: row.get(13)?,
        duration_us: row.get(14)?,
        result_bytes: row.get(15)?,
        error: row.get(16)?,
        subject: row.get(19)?,
        client_id: row.get(20)?,
    })
}

/// A row as a chain entry; `Err(Break)` when a stored value is not what moat writes (a
/// column of the wrong type, a link that is not a hash).
fn entry_from_row(row: &Row<'_>) -> rusqlite::Result<Result<ChainEntry, chain::Break>> {
    let id: i64 = row.get(0)?;
    let record = match stored_from_row(row) {
        Ok(record) => record,
        Err(
            rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..),
        ) => {
            return Ok(Err(chain::Break::Malformed {
                id,
                what: "column types",
            }));
        }
        Err(e) => return Err(e),
    };
    let link =
        |i: usize, what: &'static str| -> rusqlite::Result<Result<Option<Hash>, chain::Break>> {
            let text: Option<String> = match row.get(i) {
                Ok(text) => text,
                Err(rusqlite::Error::InvalidColumnType(..)) => {
                    return Ok(Err(chain::Break::Malformed { id, what }));
                }
                Err(e) => return Err(e),
            };
            Ok(match text {
                None => Ok(None),
                Some(text) => chain::from_hex(&text)
                    .map(Some)
                    .ok_or(chain::Break::Malformed { id, what }),
            })
        };
    let prev_hash = match link(17, "prev_hash")? {
        Ok(h) => h,
        Err(b) => return Ok(Err(b)),
    };
    let hash = match link(18, "hash")? {
        Ok(h) => h,
        Err(b) => return Ok(Err(b)),
    };
    Ok(Ok(ChainEntry {
        record,
        prev_hash,
        hash,
    }))
}

/// A checkpoint row. A value that does not parse is kept zeroed, never skipped: verifying
/// then reports the checkpoint instead of overlooking it.
fn checkpoint_from_row(row: &Row<'_>) -> rusqlite::Result<Checkpoint> {
    let text = |i: usize| -> rusqlite::Result<String> {
        Ok(row
            .get::<_, Option<String>>(i)
            .ok()
            .flatten()
            .unwrap_or_default())
    };
    Ok(Checkpoint {
        id: row.get(0)?,
        record_id: row.get::<_, i64>(1).unwrap_or(-1),
        head: chain::from_hex(&text(2)?).unwrap_or([0; 32]),
        time_ms: row.get::<_, i64>(3).unwrap_or(0),
        public_key: chain::from_hex(&text(4)?).unwrap_or([0; 32]),
        signature: chain::from_hex(&text(5)?).unwrap_or([0; 64]),
    })
}

/// A compiled [`AuditQuery::tool`] filter.
pub(super) struct ToolFilter(GlobMatcher);

impl ToolFilter {
    pub(super) fn new(pattern: &str) -> Result<ToolFilter, AuditError> {
        let glob = Glob::new(pattern).map_err(|e| AuditError::BadPattern {
            pattern: pattern.to_string(),
            reason: e.kind().to_string(),
        })?;
        Ok(ToolFilter(glob.compile_matcher()))
    }

    pub(super) fn matches(&self, r: &AuditRecord) -> bool {
        self.0.is_match(&r.exposed_name) || self.0.is_match(format!("{}/{}", r.server, r.tool))
    }
}

/// Runs `q` on `conn`: the newest `limit` matching records, oldest first.
pub(super) fn query(
    conn: &Connection,
    path: &Path,
    q: &AuditQuery,
) -> Result<Vec<AuditRecord>, AuditError> {
    query_with(conn, path, q, SELECT, true)
}

fn query_with(
    conn: &Connection,
    path: &Path,
    q: &AuditQuery,
    select: &str,
    has_subject: bool,
) -> Result<Vec<AuditRecord>, AuditError> {
    let filter = q.tool.as_deref().map(ToolFilter::new).transpose()?;
    let err = sqlite_err(path);
    // Newest first, so that a limit keeps the newest; reversed at the end.
    let sql = format!(
        "{select} WHERE (?1 IS NULL OR time_ms >= ?1) AND (?2 IS NULL OR server = ?2) \
         AND (?3 IS NULL OR {subject} = ?3) ORDER BY time_ms DESC, id DESC",
        subject = if has_subject { "subject" } else { "NULL" }
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(&err)?;
    let mut rows = stmt
        .query(params![q.since_ms, q.server, q.user])
        .map_err(&err)?;
    let limit = q.limit.unwrap_or(usize::MAX);
    let mut out = Vec::new();
    while out.len() < limit {
        let Some(row) = rows.next().map_err(&err)? else {
            break;
        };
        let record = from_row(row).map_err(&err)?;
        if filter.as_ref().is_none_or(|f| f.matches(&record)) {
            out.push(record);
        }
    }
    out.reverse();
    Ok(out)
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<AuditRecord> {
    let arguments: Option<String> = row.get(7)?;
    let arguments = arguments.map(|text| {
        // Stored by us as JSON; should it ever not parse, show the text rather than fail the query.
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
    });
    let duration_us: i64 = row.get(12)?;
    let result_bytes: i64 = row.get(13)?;
    Ok(AuditRecord {
        time_ms: row.get(0)?,
        session: row.get(1)?,
        client: row.get(2)?,
        server: row.get(3)?,
        tool: row.get(4)?,
        exposed_name: row.get(5)?,
        args_digest: row.get(6)?,
        arguments,
        decision: row.get(8)?,
        rule: row.get(9)?,
        consent: row.get(10)?,
        outcome: row.get(11)?,
        duration_us: u64::try_from(duration_us).unwrap_or(0),
        result_bytes: u64::try_from(result_bytes).unwrap_or(0),
        error: row.get(14)?,
        kind: row.get(15)?,
        subject: row.get(16)?,
        client_id: row.get(17)?,
    })
}

/// A store opened for reading only, as `moat audit` does.
#[derive(Debug)]
pub struct AuditReader {
    conn: Connection,
    path: PathBuf,
    has_table: bool,
    has_kind: bool,
    has_hash: bool,
    has_subject: bool,
    has_checkpoints: bool,
}

fn table_exists(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

impl AuditReader {
    pub(super) fn open(path: &Path) -> Result<AuditReader, AuditError> {
        if !path.exists() {
            return Err(AuditError::Missing(path.to_path_buf()));
        }
        let err = sqlite_err(path);
        // No CREATE flag: a path that vanished in between fails instead of leaving an empty file.
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(&err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(&err)?;
        let has_table = table_exists(&conn, "audit").map_err(&err)?;
        let has_kind = has_table && has_column(&conn, "kind").map_err(&err)?;
        let has_hash = has_table && has_column(&conn, "hash").map_err(&err)?;
        let has_subject = has_table && has_column(&conn, "subject").map_err(&err)?;
        let has_checkpoints = table_exists(&conn, "audit_checkpoint").map_err(&err)?;
        Ok(AuditReader {
            conn,
            path: path.to_path_buf(),
            has_table,
            has_kind,
            has_hash,
            has_subject,
            has_checkpoints,
        })
    }

    /// Reads records back: the newest `limit` matching ones, oldest first.
    pub fn query(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, AuditError> {
        if !self.has_table {
            // Still reject a bad pattern, so the user hears about it even on an empty store.
            q.tool.as_deref().map(ToolFilter::new).transpose()?;
            return Ok(Vec::new());
        }
        if self.has_kind && self.has_subject {
            return query_with(&self.conn, &self.path, q, SELECT, true);
        }
        // A store older than a column: a user asked for is in none of its records.
        if q.user.is_some() && !self.has_subject {
            return Ok(Vec::new());
        }
        let select = select_records(self.has_kind, self.has_subject);
        query_with(&self.conn, &self.path, q, &select, self.has_subject)
    }

    /// Checks the whole chain and every signed head. `trusted`: the public keys allowed to
    /// sign heads (empty: each is checked against the key it names).
    ///
    /// Reads one snapshot: a gateway writing meanwhile does not disturb it.
    pub fn verify(&self, trusted: Vec<VerifyingKey>) -> Result<Report, AuditError> {
        let err = sqlite_err(&self.path);
        let tx = self.conn.unchecked_transaction().map_err(&err)?;
        let checkpoints = self.checkpoints(&tx).map_err(&err)?;
        let mut verifier = Verifier::new(checkpoints, trusted);
        if self.has_table {
            let sql = format!(
                "{} ORDER BY id",
                select_chain(self.has_kind, self.has_hash, self.has_subject)
            );
            let mut stmt = tx.prepare(&sql).map_err(&err)?;
            let mut rows = stmt.query([]).map_err(&err)?;
            while let Some(row) = rows.next().map_err(&err)? {
                match entry_from_row(row).map_err(&err)? {
                    Ok(entry) => verifier.push(&entry),
                    Err(problem) => verifier.fail(problem),
                }
                if verifier.failed() {
                    break;
                }
            }
        }
        Ok(verifier.finish())
    }

    fn checkpoints(&self, conn: &Connection) -> rusqlite::Result<Vec<Checkpoint>> {
        if !self.has_checkpoints {
            return Ok(Vec::new());
        }
        let mut stmt = conn.prepare(
            "SELECT id, record_id, head, time_ms, public_key, signature FROM audit_checkpoint
             ORDER BY id",
        )?;
        let rows = stmt.query_map([], checkpoint_from_row)?;
        rows.collect()
    }

    /// Hands every record with an id above `after` (all when `None`), with its links, to
    /// `sink` in id order, each signed head right after the record it signs. Returns how
    /// many records went out.
    pub fn export(
        &self,
        after: Option<i64>,
        mut sink: impl FnMut(&ExportLine) -> std::io::Result<()>,
    ) -> Result<u64, AuditError> {
        let err = sqlite_err(&self.path);
        let write_err = |source| AuditError::Write { source };
        let tx = self.conn.unchecked_transaction().map_err(&err)?;
        let after = after.unwrap_or(i64::MIN);
        let mut checkpoints = self.checkpoints(&tx).map_err(&err)?;
        checkpoints.retain(|c| c.record_id > after);
        checkpoints.sort_by_key(|c| (c.record_id, c.id));
        let mut checkpoints = checkpoints.into_iter().peekable();
        let mut count = 0;
        if self.has_table {
            let sql = format!(
                "{} WHERE id > ?1 ORDER BY id",
                select_chain(self.has_kind, self.has_hash, self.has_subject)
            );
            let mut stmt = tx.prepare(&sql).map_err(&err)?;
            let mut rows = stmt.query([after]).map_err(&err)?;
            while let Some(row) = rows.next().map_err(&err)? {
                let record = stored_from_row(row).map_err(&err)?;
                let link = |i: usize| row.get::<_, Option<String>>(i).ok().flatten();
                let id = record.id;
                sink(&ExportLine::Record {
                    prev_hash: link(17),
                    hash: link(18),
                    record,
                })
                .map_err(write_err)?;
                count += 1;
                while let Some(c) = checkpoints.next_if(|c| c.record_id <= id) {
                    sink(&ExportLine::from(&c)).map_err(write_err)?;
                }
            }
        }
        for c in checkpoints {
            sink(&ExportLine::from(&c)).map_err(write_err)?;
        }
        Ok(count)
    }
}
