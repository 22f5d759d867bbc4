//! The SQLite side of the audit trail: opening the file, the `audit` table, inserts and queries.
//!
//! Only this file knows SQL. The table shares its file with other modules' tables, so nothing
//! here touches file-wide state other than the journal settings every user of the file wants.

use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{Glob, GlobMatcher};
use rusqlite::{Connection, OpenFlags, Row, params};

use super::{AuditError, AuditQuery, AuditRecord};

/// How long a statement waits for another connection's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

// One index only: every insert pays for each. `--since` uses it; the tool glob is matched
// here, not in SQL, and a server filter scans (stores of earlier versions lose the two
// indexes they had).
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
    kind         TEXT    NOT NULL DEFAULT 'call'
);
CREATE INDEX IF NOT EXISTS audit_time ON audit (time_ms);
DROP INDEX IF EXISTS audit_tool;
DROP INDEX IF EXISTS audit_server_tool;
";

const INSERT: &str = "INSERT INTO audit (time_ms, session, client, server, tool, exposed_name,
    args_digest, arguments, decision, rule, consent, outcome, duration_us, result_bytes, error,
    kind) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)";

const SELECT: &str = "SELECT time_ms, session, client, server, tool, exposed_name, args_digest,
    arguments, decision, rule, consent, outcome, duration_us, result_bytes, error, kind FROM audit";

/// [`SELECT`] for a store read-only and older than the `kind` column.
const SELECT_WITHOUT_KIND: &str = "SELECT time_ms, session, client, server, tool, exposed_name,
    args_digest, arguments, decision, rule, consent, outcome, duration_us, result_bytes, error,
    'call' FROM audit";

/// Stores written before records had a kind gain the column (every old record is a call).
fn add_kind_column(conn: &Connection) -> rusqlite::Result<()> {
    let has_kind: i64 = conn.query_row(
        "SELECT count(*) FROM pragma_table_info('audit') WHERE name = 'kind'",
        [],
        |r| r.get(0),
    )?;
    if has_kind == 0 {
        conn.execute_batch("ALTER TABLE audit ADD COLUMN kind TEXT NOT NULL DEFAULT 'call'")?;
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
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(%mode, "audit store: SQLite refused WAL mode");
        }
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.execute_batch(SCHEMA)?;
    add_kind_column(conn)
}

/// Inserts `records` in one transaction: all of them or none.
pub(super) fn insert_all(conn: &mut Connection, records: &[AuditRecord]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare_cached(INSERT)?;
        for r in records {
            let arguments = r.arguments.as_ref().map(|v| v.to_string());
            stmt.execute(params![
                r.time_ms,
                r.session,
                r.client,
                r.server,
                r.tool,
                r.exposed_name,
                r.args_digest,
                arguments,
                r.decision,
                r.rule,
                r.consent,
                r.outcome,
                to_i64(r.duration_us),
                to_i64(r.result_bytes),
                r.error,
                if r.kind.is_empty() { "call" } else { &r.kind },
            ])?;
        }
    }
    tx.commit()
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A compiled [`AuditQuery::tool`] filter.
struct ToolFilter(GlobMatcher);

impl ToolFilter {
    fn new(pattern: &str) -> Result<ToolFilter, AuditError> {
        let glob = Glob::new(pattern).map_err(|e| AuditError::BadPattern {
            pattern: pattern.to_string(),
            reason: e.kind().to_string(),
        })?;
        Ok(ToolFilter(glob.compile_matcher()))
    }

    fn matches(&self, r: &AuditRecord) -> bool {
        self.0.is_match(&r.exposed_name) || self.0.is_match(format!("{}/{}", r.server, r.tool))
    }
}

/// Runs `q` on `conn`: the newest `limit` matching records, oldest first.
pub(super) fn query(
    conn: &Connection,
    path: &Path,
    q: &AuditQuery,
) -> Result<Vec<AuditRecord>, AuditError> {
    query_with(conn, path, q, SELECT)
}

fn query_with(
    conn: &Connection,
    path: &Path,
    q: &AuditQuery,
    select: &str,
) -> Result<Vec<AuditRecord>, AuditError> {
    let filter = q.tool.as_deref().map(ToolFilter::new).transpose()?;
    let err = sqlite_err(path);
    // Newest first, so that a limit keeps the newest; reversed at the end.
    let sql = format!(
        "{select} WHERE (?1 IS NULL OR time_ms >= ?1) AND (?2 IS NULL OR server = ?2) \
         ORDER BY time_ms DESC, id DESC"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(&err)?;
    let mut rows = stmt.query(params![q.since_ms, q.server]).map_err(&err)?;
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
    })
}

/// A store opened for reading only, as `moat audit` does.
#[derive(Debug)]
pub struct AuditReader {
    conn: Connection,
    path: PathBuf,
    has_table: bool,
    has_kind: bool,
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
        let has_table = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'audit'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(&err)?
            > 0;
        let has_kind = has_table
            && conn
                .query_row(
                    "SELECT count(*) FROM pragma_table_info('audit') WHERE name = 'kind'",
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .map_err(&err)?
                > 0;
        Ok(AuditReader {
            conn,
            path: path.to_path_buf(),
            has_table,
            has_kind,
        })
    }

    /// Reads records back: the newest `limit` matching ones, oldest first.
    pub fn query(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, AuditError> {
        if !self.has_table {
            // Still reject a bad pattern, so the user hears about it even on an empty store.
            q.tool.as_deref().map(ToolFilter::new).transpose()?;
            return Ok(Vec::new());
        }
        let select = if self.has_kind {
            SELECT
        } else {
            SELECT_WITHOUT_KIND
        };
        query_with(&self.conn, &self.path, q, select)
    }
}
