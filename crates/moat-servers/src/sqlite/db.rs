//! Connections that cannot write, and the small pool the server runs them from.
//!
//! Writes are refused three times over, each time by SQLite itself rather than by reading
//! the SQL text:
//! - the file is opened `SQLITE_OPEN_READ_ONLY`, with `PRAGMA query_only`;
//! - an authorizer allows only the actions a read needs, and refuses everything else
//!   while the statement is prepared (and while it runs, for what SQLite asks then);
//! - a statement runs only if `sqlite3_stmt_readonly` says it writes nothing. This catches
//!   what the authorizer is not asked about while preparing: a bare `REINDEX`, and
//!   `VACUUM INTO`, which writes a new file even through a read-only connection (the
//!   authorizer sees only the `ATTACH` it makes once running).
//!
//! The unit tests below take each layer alone and show that it refuses the writes.
//!
//! Every statement runs on a blocking thread under a deadline: a progress handler checks
//! it every [`PROGRESS_OPS`] virtual-machine instructions and interrupts the statement
//! once the deadline passes or the request is cancelled.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use moat::RequestContext;
use rusqlite::config::DbConfig;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;

/// Instructions between two looks at the deadline: often enough to stop within a
/// millisecond or so, rarely enough to cost nothing measurable.
const PROGRESS_OPS: i32 = 1000;

/// Pragmas that only report, whatever their argument (which names a table or an index).
const READ_PRAGMAS: &[&str] = &[
    "collation_list",
    "compile_options",
    "foreign_key_check",
    "foreign_key_list",
    "function_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "module_list",
    "pragma_list",
    "table_info",
    "table_list",
    "table_xinfo",
];

/// Pragmas that report without a value and change a setting with one (`PRAGMA
/// user_version` reads, `PRAGMA user_version = 5` writes): allowed without a value only.
const VALUE_PRAGMAS: &[&str] = &[
    "application_id",
    "auto_vacuum",
    "data_version",
    "encoding",
    "foreign_keys",
    "freelist_count",
    "journal_mode",
    "page_count",
    "page_size",
    "query_only",
    "schema_version",
    "user_version",
];

/// SQL functions that reach outside the database or into SQLite's internals. Most are not
/// compiled into the bundled SQLite (the `fileio` ones belong to the shell), and
/// `load_extension` is off unless enabled; they are refused by name all the same, so that
/// a different build of SQLite cannot quietly bring them back.
const DENIED_FUNCTIONS: &[&str] = &[
    "edit",
    "fts3_tokenizer",
    "load_extension",
    "readfile",
    "writefile",
];

/// Whether a statement may do `action`: `Err` names what was refused.
pub(super) fn decide(action: &AuthAction<'_>) -> Result<(), String> {
    match *action {
        AuthAction::Select | AuthAction::Recursive | AuthAction::Read { .. } => Ok(()),
        AuthAction::Function { function_name } => {
            let name = function_name.to_ascii_lowercase();
            if DENIED_FUNCTIONS.contains(&name.as_str()) {
                Err(format!("the function {function_name}()"))
            } else {
                Ok(())
            }
        }
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => {
            let name = pragma_name.to_ascii_lowercase();
            let reads = READ_PRAGMAS.contains(&name.as_str())
                || (pragma_value.is_none() && VALUE_PRAGMAS.contains(&name.as_str()));
            if reads {
                Ok(())
            } else if let Some(value) = pragma_value {
                Err(format!("PRAGMA {pragma_name} = {value}"))
            } else {
                Err(format!("PRAGMA {pragma_name}"))
            }
        }
        ref other => Err(describe_action(other)),
    }
}

/// A refused action in words, for the error the model sees.
fn describe_action(action: &AuthAction<'_>) -> String {
    if touches_schema_table(action) {
        return "a change to the schema (CREATE, DROP or ALTER)".to_owned();
    }
    match *action {
        AuthAction::Insert { table_name } => format!("INSERT into {table_name}"),
        AuthAction::Update { table_name, .. } => format!("UPDATE of {table_name}"),
        AuthAction::Delete { table_name } => format!("DELETE from {table_name}"),
        AuthAction::CreateTable { table_name } | AuthAction::CreateTempTable { table_name } => {
            format!("CREATE TABLE {table_name}")
        }
        AuthAction::DropTable { table_name } | AuthAction::DropTempTable { table_name } => {
            format!("DROP TABLE {table_name}")
        }
        AuthAction::AlterTable { table_name, .. } => format!("ALTER TABLE {table_name}"),
        AuthAction::Attach { filename } => format!("ATTACH '{filename}'"),
        AuthAction::Detach { database_name } => format!("DETACH {database_name}"),
        AuthAction::Transaction { operation } => format!("transaction control ({operation:?})"),
        AuthAction::Savepoint { savepoint_name, .. } => format!("SAVEPOINT {savepoint_name}"),
        ref other => format!("{other:?}"),
    }
}

/// Whether `action` writes to the schema table: SQLite asks that first for CREATE and
/// DROP, and stops at the refusal, before asking about the object itself.
fn touches_schema_table(action: &AuthAction<'_>) -> bool {
    let table = match *action {
        AuthAction::Insert { table_name }
        | AuthAction::Delete { table_name }
        | AuthAction::Update { table_name, .. } => table_name,
        _ => return false,
    };
    [
        "sqlite_master",
        "sqlite_temp_master",
        "sqlite_schema",
        "sqlite_temp_schema",
    ]
    .iter()
    .any(|t| table.eq_ignore_ascii_case(t))
}

/// When the running statement must stop: a deadline, or the request's cancellation.
#[derive(Debug, Default)]
pub(super) struct Stop {
    deadline: Mutex<Option<Instant>>,
    cancelled: AtomicBool,
}

impl Stop {
    fn arm(&self, timeout: Duration) {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Instant::now() + timeout);
        self.cancelled.store(false, Ordering::SeqCst);
    }

    fn disarm(&self) {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// Whether the last interruption was a cancellation (rather than the deadline).
    pub(super) fn was_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    fn should_stop(&self) -> bool {
        if self.cancelled.load(Ordering::SeqCst) {
            return true;
        }
        match *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(deadline) => Instant::now() >= deadline,
            None => false,
        }
    }
}

/// A connection opened by [`open`], with what its hooks report.
pub(super) struct Guarded {
    pub(super) conn: Connection,
    /// What the authorizer first refused in the current statement, to name it in the error.
    denied: Arc<Mutex<Option<String>>>,
    pub(super) stop: Arc<Stop>,
}

impl Guarded {
    /// What the authorizer refused since the last call, if anything.
    pub(super) fn take_denied(&self) -> Option<String> {
        self.denied
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// Open `path` read-only, with the authorizer and the deadline hook installed.
pub(super) fn open(path: &Path, busy_timeout: Duration) -> rusqlite::Result<Guarded> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    // The file may come from anyone: defensive mode keeps SQL from corrupting it through
    // the shadow tables, and an untrusted schema may not call functions with side effects
    // from its views and triggers.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, false)?;
    conn.pragma_update(None, "query_only", true)?;
    // A writer in another process may hold the lock for a moment; wait no longer than a
    // statement may run.
    conn.busy_timeout(busy_timeout)?;
    // Read the schema now, so that a file that is not a database is refused here rather
    // than on the first call.
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |row| {
        row.get::<_, i64>(0)
    })?;

    let denied: Arc<Mutex<Option<String>>> = Arc::default();
    let record = denied.clone();
    conn.authorizer(Some(move |ctx: AuthContext<'_>| {
        match decide(&ctx.action) {
            Ok(()) => Authorization::Allow,
            Err(what) => {
                tracing::debug!(refused = %what, "sqlite authorizer");
                // Keep the first refusal: it is the one that stopped the statement.
                record
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(what);
                Authorization::Deny
            }
        }
    }));
    let stop = Arc::new(Stop::default());
    let watch = stop.clone();
    conn.progress_handler(PROGRESS_OPS, Some(move || watch.should_stop()));
    Ok(Guarded { conn, denied, stop })
}

/// Why [`Pool::run`] did not run its closure to the end.
#[derive(Debug, thiserror::Error)]
pub(super) enum RunError {
    #[error("could not open the database: {0}")]
    Open(rusqlite::Error),
    #[error("the query thread failed: {0}")]
    Thread(String),
}

/// A few connections, each used by one statement at a time on a blocking thread.
pub(super) struct Pool {
    path: PathBuf,
    timeout: Duration,
    idle: Mutex<Vec<Guarded>>,
    /// One permit per connection; a permit is held until the statement's thread is done
    /// with the connection, even if the request that started it has gone.
    permits: Arc<Semaphore>,
}

/// Interrupts the statement when dropped before [`Interrupt::finished`]: the SDK drops a
/// handler's future when its request is cancelled, and the thread must not run on alone.
struct Interrupt {
    stop: Arc<Stop>,
    finished: bool,
}

impl Interrupt {
    fn finished(mut self) {
        self.finished = true;
    }
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        if !self.finished {
            self.stop.cancel();
        }
    }
}

impl Pool {
    /// A pool of at most `size` connections to `path`, starting with `first`.
    pub(super) fn new(path: PathBuf, first: Guarded, size: usize, timeout: Duration) -> Pool {
        Pool {
            path,
            timeout,
            idle: Mutex::new(vec![first]),
            permits: Arc::new(Semaphore::new(size.max(1))),
        }
    }

    /// Run `f` on a connection, on a blocking thread, with the deadline armed. Cancelling
    /// `ctx`, or dropping the returned future, interrupts the statement.
    pub(super) async fn run<T, F>(
        self: &Arc<Self>,
        ctx: Option<&RequestContext>,
        f: F,
    ) -> Result<T, RunError>
    where
        T: Send + 'static,
        F: FnOnce(&Guarded) -> T + Send + 'static,
    {
        // Waiting for a connection does not hold a thread. The semaphore is never closed,
        // so this cannot fail; it is answered rather than unwrapped all the same.
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| RunError::Thread(e.to_string()))?;
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let guarded = match idle {
            Some(g) => g,
            None => {
                let (path, timeout) = (self.path.clone(), self.timeout);
                tokio::task::spawn_blocking(move || open(&path, timeout))
                    .await
                    .map_err(|e| RunError::Thread(e.to_string()))?
                    .map_err(RunError::Open)?
            }
        };
        guarded.take_denied();
        guarded.stop.arm(self.timeout);
        let interrupt = Interrupt {
            stop: guarded.stop.clone(),
            finished: false,
        };
        let pool = self.clone();
        let handle = tokio::task::spawn_blocking(move || {
            let out = f(&guarded);
            guarded.stop.disarm();
            // The thread, not the request, gives the connection back: the request may be
            // gone by now.
            pool.idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(guarded);
            drop(permit);
            out
        });
        let cancelled = async {
            match ctx {
                Some(ctx) => ctx.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let joined = tokio::select! {
            joined = handle => joined,
            () = cancelled => {
                // The statement stops at its next progress check; its thread then returns
                // the connection. No answer is sent for a cancelled request.
                drop(interrupt);
                return Err(RunError::Thread("the request was cancelled".to_owned()));
            }
        };
        interrupt.finished();
        // A panicked thread took its connection with it; the next run opens a fresh one.
        joined.map_err(|e| RunError::Thread(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    //! Each layer on its own: the authorizer on a writable connection, and the read-only
    //! open without the authorizer. Together with the integration tests (all layers),
    //! removing either layer fails a test here.

    use super::*;

    fn sample(dir: &Path) -> PathBuf {
        let path = dir.join("t.db");
        let conn = Connection::open(&path).expect("create");
        conn.execute_batch(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT);
             CREATE INDEX t_name ON t (name);
             INSERT INTO t (name) VALUES ('a'), ('b');",
        )
        .expect("fill");
        path
    }

    fn count(path: &Path) -> i64 {
        Connection::open(path)
            .expect("open")
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .expect("count")
    }

    const WRITES: &[&str] = &[
        "INSERT INTO t (name) VALUES ('x')",
        "UPDATE t SET name = 'x'",
        "DELETE FROM t",
        "DROP TABLE t",
        "CREATE TABLE u (x)",
        "ALTER TABLE t ADD COLUMN y",
        "PRAGMA user_version = 5",
        "PRAGMA journal_mode = delete",
        "WITH x AS (SELECT 1) INSERT INTO t (name) SELECT 'x' FROM x",
        "BEGIN",
        "SAVEPOINT s",
        "ANALYZE",
        "CREATE INDEX i ON t (name)",
        "REINDEX",
    ];

    /// What the authorizer is never asked about: a bare `REINDEX` rebuilds every index
    /// without a callback. The read-only open and the read-only statement check refuse it.
    const UNASKED: usize = 1;

    /// The authorizer alone, on a connection that could write, refuses every write.
    #[test]
    fn the_authorizer_alone_refuses_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = sample(dir.path());
        let conn = Connection::open(&path).expect("open writable");
        conn.authorizer(Some(|ctx: AuthContext<'_>| match decide(&ctx.action) {
            Ok(()) => Authorization::Allow,
            Err(_) => Authorization::Deny,
        }));
        for sql in &WRITES[..WRITES.len() - UNASKED] {
            let err = conn
                .execute_batch(sql)
                .expect_err(&format!("{sql} was allowed"));
            assert!(err.to_string().contains("not authorized"), "{sql}: {err}");
        }
        let attach = dir.path().join("other.db");
        let sql = format!("ATTACH DATABASE '{}' AS y", attach.display());
        assert!(conn.execute_batch(&sql).is_err());
        assert!(!attach.exists());
        // VACUUM INTO is asked about only when it runs, through the ATTACH it does.
        let out = dir.path().join("copy.db");
        let sql = format!("VACUUM INTO '{}'", out.display());
        assert!(conn.execute_batch(&sql).is_err());
        assert!(!out.exists());
        assert!(
            conn.query_row("SELECT load_extension('x')", [], |_| Ok(()))
                .is_err()
        );
        // Reads still work.
        let n: i64 = conn
            .query_row("SELECT count(*) FROM pragma_table_info('t')", [], |r| {
                r.get(0)
            })
            .expect("read");
        assert_eq!(n, 2);
        drop(conn);
        assert_eq!(count(&path), 2);
    }

    /// The read-only open alone, without the authorizer, refuses writes to the database.
    #[test]
    fn the_read_only_open_alone_refuses_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = sample(dir.path());
        let g = open(&path, Duration::from_secs(1)).expect("open");
        g.conn
            .authorizer(None::<fn(AuthContext<'_>) -> Authorization>);
        for sql in &WRITES[..6] {
            let err = g
                .conn
                .execute_batch(sql)
                .expect_err(&format!("{sql} was allowed"));
            assert!(err.to_string().contains("readonly"), "{sql}: {err}");
        }
        // Without `query_only`, the read-only open still refuses.
        g.conn
            .execute_batch("PRAGMA query_only = OFF")
            .expect("query_only off");
        for sql in &WRITES[..6] {
            let err = g
                .conn
                .execute_batch(sql)
                .expect_err(&format!("{sql} was allowed"));
            assert!(err.to_string().contains("readonly"), "{sql}: {err}");
        }
        drop(g);
        assert_eq!(count(&path), 2);
    }

    /// The read-only statement check alone, on a writable connection without the
    /// authorizer, refuses every write before it runs.
    #[test]
    fn the_statement_check_alone_refuses_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = sample(dir.path());
        let g = Guarded {
            conn: Connection::open(&path).expect("open writable"),
            denied: Arc::default(),
            stop: Arc::default(),
        };
        let limits = super::super::query::Limits {
            rows: 10,
            bytes: 1 << 20,
        };
        let out = dir.path().join("copy.db");
        let vacuum = format!("VACUUM INTO '{}'", out.display());
        // BEGIN and SAVEPOINT write nothing by themselves, so SQLite counts them as
        // read-only; the authorizer is what refuses them.
        let writes = WRITES
            .iter()
            .copied()
            .filter(|sql| !matches!(*sql, "BEGIN" | "SAVEPOINT s"));
        for sql in writes.chain([vacuum.as_str(), "VACUUM"]) {
            let err = super::super::query::run(&g, sql, &[], limits)
                .expect_err(&format!("{sql} was allowed"));
            assert!(err.contains("writes"), "{sql}: {err}");
        }
        assert!(!out.exists());
        drop(g);
        assert_eq!(count(&path), 2);
    }

    #[test]
    fn read_pragmas_pass_and_setting_pragmas_do_not() {
        let pragma = |name, value| AuthAction::Pragma {
            pragma_name: name,
            pragma_value: value,
        };
        assert!(decide(&pragma("table_info", Some("t"))).is_ok());
        assert!(decide(&pragma("USER_VERSION", None)).is_ok());
        assert!(decide(&pragma("user_version", Some("5"))).is_err());
        assert!(decide(&pragma("query_only", Some("0"))).is_err());
        assert!(decide(&pragma("writable_schema", None)).is_err());
        let function = |name| AuthAction::Function {
            function_name: name,
        };
        assert!(decide(&function("LOAD_EXTENSION")).is_err());
        assert!(decide(&function("upper")).is_ok());
    }
}
