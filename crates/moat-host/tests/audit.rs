//! The audit trail against a real SQLite file: round trips, filters, redaction, several writers,
//! and a writer process killed mid-write.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use moat_host::audit::{
    AuditConfig, AuditError, AuditLog, AuditQuery, AuditRecord, REDACTED, args_digest, read_only,
    redact,
};
use serde_json::json;

/// Set in a child copy of this test binary: the store to write to.
const WRITER_ENV: &str = "MOAT_AUDIT_TEST_WRITER";
/// Set with `WRITER_ENV`: `finite` writes a fixed number of records, `forever` loops until killed.
const MODE_ENV: &str = "MOAT_AUDIT_TEST_MODE";
const FINITE_COUNT: i64 = 300;

fn rec(i: i64, server: &str, tool: &str) -> AuditRecord {
    AuditRecord {
        time_ms: 1_000_000 + i,
        session: format!("session-{i}"),
        client: Some("test-client/1.0".into()),
        server: server.into(),
        tool: tool.into(),
        exposed_name: format!("{server}__{tool}"),
        args_digest: args_digest(&json!({ "i": i })),
        arguments: None,
        decision: "allow".into(),
        rule: "default".into(),
        consent: None,
        outcome: "ok".into(),
        duration_us: 10 * i as u64,
        result_bytes: i as u64,
        error: None,
        kind: "call".into(),
    }
}

fn q() -> AuditQuery {
    AuditQuery::default()
}

#[test]
fn round_trip_through_file_and_reader() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/state/moat.db");
    let log = AuditLog::open(&path).unwrap();
    let mut records = vec![
        rec(1, "fs", "read_file"),
        rec(2, "exec", "run"),
        rec(3, "fs", "write_file"),
    ];
    records[1].decision = "deny".into();
    records[1].rule = "rule 2 (no-writes)".into();
    records[1].outcome = "refused".into();
    records[1].consent = Some("denied via terminal".into());
    records[2].error = Some("disk full".into());
    records[2].arguments = Some(json!({"path": "/tmp/x", "n": [1, 2.5, null]}));
    records[2].duration_us = u64::MAX;
    for r in &records {
        log.record(r.clone());
    }
    log.flush().unwrap();

    let mut expected = records.clone();
    // Sizes beyond SQLite's i64 are clamped, not wrapped.
    expected[2].duration_us = i64::MAX as u64;
    assert_eq!(log.query(&q()).unwrap(), expected);
    assert_eq!(read_only(&path).unwrap().query(&q()).unwrap(), expected);

    // JSON output is serde of the record, and reads back.
    let text = serde_json::to_string(&expected).unwrap();
    let back: Vec<AuditRecord> = serde_json::from_str(&text).unwrap();
    assert_eq!(back, expected);
}

#[test]
fn in_memory_and_query_sees_unflushed_records() {
    let log = AuditLog::open_in_memory().unwrap();
    for i in 0..50 {
        log.record(rec(i, "fs", "read"));
    }
    // No flush: a query is answered after everything handed over before it.
    assert_eq!(log.query(&q()).unwrap().len(), 50);
    log.flush().unwrap();
    log.flush().unwrap();
}

#[test]
fn dropping_the_last_clone_commits_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let log = AuditLog::open(&path).unwrap();
    let clone = log.clone();
    let handle = std::thread::spawn(move || {
        for i in 0..100 {
            clone.record(rec(i, "fs", "read"));
        }
    });
    handle.join().unwrap();
    drop(log);
    assert_eq!(read_only(&path).unwrap().query(&q()).unwrap().len(), 100);
}

#[test]
fn filters_since_tool_server_limit() {
    let log = AuditLog::open_in_memory().unwrap();
    log.record(rec(10, "fs", "read_file"));
    log.record(rec(20, "fs", "write_file"));
    log.record(rec(30, "exec", "run"));
    log.record(rec(40, "fs", "read_dir"));
    // Arrived earlier but recorded last: order is by arrival time.
    log.record(rec(5, "git", "status"));
    log.flush().unwrap();

    let times = |q: AuditQuery| -> Vec<i64> {
        log.query(&q)
            .unwrap()
            .iter()
            .map(|r| r.time_ms - 1_000_000)
            .collect()
    };
    assert_eq!(times(q()), [5, 10, 20, 30, 40]);
    let since = |ms: i64| AuditQuery {
        since_ms: Some(1_000_000 + ms),
        ..q()
    };
    assert_eq!(times(since(20)), [20, 30, 40]);
    assert_eq!(times(since(41)), Vec::<i64>::new());
    let tool = |glob: &str| AuditQuery {
        tool: Some(glob.into()),
        ..q()
    };
    assert_eq!(times(tool("fs__read_*")), [10, 40]);
    assert_eq!(times(tool("fs/*")), [10, 20, 40]);
    assert_eq!(times(tool("*/run")), [30]);
    assert_eq!(times(tool("exec__run")), [30]);
    assert_eq!(times(tool("*_file")), [10, 20]);
    assert_eq!(times(tool("nothing")), Vec::<i64>::new());
    let server = AuditQuery {
        server: Some("fs".into()),
        ..q()
    };
    assert_eq!(times(server), [10, 20, 40]);
    // A limit keeps the newest, still oldest first.
    let limit = AuditQuery {
        limit: Some(2),
        ..q()
    };
    assert_eq!(times(limit), [30, 40]);
    let combined = AuditQuery {
        since_ms: Some(1_000_015),
        tool: Some("fs/*".into()),
        limit: Some(1),
        ..q()
    };
    assert_eq!(times(combined), [40]);

    let err = log.query(&tool("fs__[")).unwrap_err();
    assert!(matches!(err, AuditError::BadPattern { .. }), "{err}");
}

#[test]
fn redacts_nested_secrets_and_token_values() {
    let args = json!({
        "query": "select 1",
        "max_tokens": 100,
        "password": "hunter2",
        "headers": {"Authorization": "Basic dXNlcjpwYXNz", "Accept": "text/plain"},
        "env": [{"name": "HOME", "value": "/root"}, {"GITHUB_TOKEN": "x"}],
        "config": {"db": {"ApiKey": {"nested": "object"}, "host": "db"}},
        "note": "use ghp_abcdefghijklmnopqrstuvwxyz0123456789 and sk-abcdefghijklmnopqrstu",
        "key_id": "AKIAIOSFODNN7EXAMPLE",
        "tenant": "acme",
    });
    let out = redact(&args, &["TENANT".into()]);
    assert_eq!(
        out,
        json!({
            "query": "select 1",
            "max_tokens": 100,
            "password": REDACTED,
            "headers": {"Authorization": REDACTED, "Accept": "text/plain"},
            "env": [{"name": "HOME", "value": "/root"}, {"GITHUB_TOKEN": REDACTED}],
            "config": {"db": {"ApiKey": REDACTED, "host": "db"}},
            "note": "use [redacted] and [redacted]",
            "key_id": REDACTED,
            "tenant": REDACTED,
        })
    );
    // Without the extra glob, the tenant stays.
    assert_eq!(redact(&args, &[])["tenant"], "acme");
}

#[test]
fn full_arguments_are_stored_redacted_and_digest_only_by_default() {
    let args = json!({"path": "/etc/hosts", "token": "s3cret-value"});
    let mut config: AuditConfig = toml::from_str("full_arguments = true").unwrap();
    let redactor = config.redactor();
    let log = AuditLog::open_in_memory().unwrap();

    let mut full = rec(1, "fs", "read");
    full.set_arguments(&args, &config, &redactor);
    log.record(full);
    config.full_arguments = false;
    let mut digest_only = rec(2, "fs", "read");
    digest_only.set_arguments(&args, &config, &redactor);
    log.record(digest_only);
    let mut failed = rec(3, "fs", "read");
    failed.error = Some("upstream said: bad credential Bearer abcdefghijklmnop".into());
    log.record(failed);

    let got = log.query(&q()).unwrap();
    assert_eq!(
        got[0].arguments,
        Some(json!({"path": "/etc/hosts", "token": REDACTED}))
    );
    assert_eq!(got[1].arguments, None);
    assert_eq!(got[0].args_digest, got[1].args_digest);
    let everything = serde_json::to_string(&got).unwrap();
    assert!(!everything.contains("s3cret"), "{everything}");
    assert!(!everything.contains("abcdefghijklmnop"), "{everything}");
    assert_eq!(
        got[2].error.as_deref(),
        Some("upstream said: bad credential [redacted]")
    );
}

#[test]
fn digest_ignores_key_order_but_not_values() {
    let a: serde_json::Value =
        serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "s"}}"#).unwrap();
    let b: serde_json::Value =
        serde_json::from_str(r#"{"a": {"x": "s", "y": [1, 2]}, "b": 1}"#).unwrap();
    let c = json!({"a": {"x": "s", "y": [2, 1]}, "b": 1});
    assert_eq!(args_digest(&a), args_digest(&b));
    assert_ne!(args_digest(&a), args_digest(&c));
    assert_ne!(
        args_digest(&json!({"a": 1})),
        args_digest(&json!({"a": "1"}))
    );
    let d = args_digest(&a);
    assert_eq!(d.len(), 64);
    assert!(
        d.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
}

#[test]
fn two_logs_on_one_file_and_a_table_of_another_module() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moat.db");
    // Another module's table in the same file, made first, is left alone.
    let other = rusqlite::Connection::open(&path).unwrap();
    other
        .execute_batch("CREATE TABLE pins (name TEXT); INSERT INTO pins VALUES ('fs__read');")
        .unwrap();
    let one = AuditLog::open(&path).unwrap();
    let two = AuditLog::open(&path).unwrap();
    let a = std::thread::spawn({
        let one = one.clone();
        move || (0..200).for_each(|i| one.record(rec(i, "a", "t")))
    });
    let b = std::thread::spawn({
        let two = two.clone();
        move || (0..200).for_each(|i| two.record(rec(i, "b", "t")))
    });
    a.join().unwrap();
    b.join().unwrap();
    one.flush().unwrap();
    two.flush().unwrap();
    let reader = read_only(&path).unwrap();
    assert_eq!(reader.query(&q()).unwrap().len(), 400);
    let only_b = AuditQuery {
        server: Some("b".into()),
        ..q()
    };
    assert_eq!(reader.query(&only_b).unwrap().len(), 200);
    // `one` sees what `two` wrote.
    assert_eq!(one.query(&only_b).unwrap().len(), 200);
    let pinned: String = other
        .query_row("SELECT name FROM pins", [], |r| r.get(0))
        .unwrap();
    assert_eq!(pinned, "fs__read");
}

/// A store written before records had a kind: read as it is (every record a call), and
/// given the column when a gateway opens it for writing.
#[test]
fn a_store_from_before_kinds_reads_and_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let old = rusqlite::Connection::open(&path).unwrap();
    old.execute_batch(
        "CREATE TABLE audit (id INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL, session TEXT NOT NULL,
            client TEXT, server TEXT NOT NULL, tool TEXT NOT NULL, exposed_name TEXT NOT NULL,
            args_digest TEXT NOT NULL, arguments TEXT, decision TEXT NOT NULL, rule TEXT NOT NULL,
            consent TEXT, outcome TEXT NOT NULL, duration_us INTEGER NOT NULL,
            result_bytes INTEGER NOT NULL, error TEXT);
         INSERT INTO audit (time_ms, session, server, tool, exposed_name, args_digest, decision,
            rule, outcome, duration_us, result_bytes)
            VALUES (1, 's', 'fs', 'read_file', 'fs__read_file', 'd', 'allow', 'default', 'ok', 1, 1);",
    )
    .unwrap();
    drop(old);
    let before = read_only(&path).unwrap().query(&q()).unwrap();
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].kind, "call");

    let log = AuditLog::open(&path).unwrap();
    let mut sampling = rec(2, "fs", "sampling/createMessage");
    sampling.kind = "sampling".into();
    log.record(sampling);
    log.flush().unwrap();
    let kinds: Vec<String> = read_only(&path)
        .unwrap()
        .query(&q())
        .unwrap()
        .into_iter()
        .map(|r| r.kind)
        .collect();
    assert_eq!(kinds, ["call", "sampling"]);
}

#[test]
fn reader_never_creates_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.db");
    let err = read_only(&path).unwrap_err();
    assert!(matches!(err, AuditError::Missing(_)), "{err}");
    assert!(err.to_string().contains("absent.db"));
    assert!(!path.exists());

    // A file that holds no audit table reads as empty.
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    assert!(read_only(&empty).unwrap().query(&q()).unwrap().is_empty());
}

#[test]
fn config_defaults_and_toml() {
    let d = AuditConfig::default();
    assert!(d.enabled && !d.full_arguments && d.path.is_none() && d.redact.is_empty());
    assert_eq!(toml::from_str::<AuditConfig>("").unwrap(), d);
    let c: AuditConfig = toml::from_str(
        "enabled = false\npath = \"/x/a.db\"\nfull_arguments = true\nredact = [\"x-*\"]",
    )
    .unwrap();
    assert!(!c.enabled && c.full_arguments);
    assert_eq!(c.store_path(Path::new("/state")), Path::new("/x/a.db"));
    assert_eq!(
        d.store_path(Path::new("/state")),
        Path::new("/state/audit.db")
    );
    assert!(toml::from_str::<AuditConfig>("enable = true").is_err());
    assert!(
        AuditLog::from_config(&c, Path::new("/nonexistent"))
            .unwrap()
            .is_none()
    );
}

/// Runs this very test binary as a writer process (see [`child_writer`]).
fn spawn_writer(path: &Path, mode: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
        .env(WRITER_ENV, path)
        .env(MODE_ENV, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Not a test of its own: the body of the writer process, when this binary is run as one.
#[test]
fn child_writer() {
    let Some(path) = std::env::var_os(WRITER_ENV) else {
        return;
    };
    let forever = std::env::var(MODE_ENV).as_deref() == Ok("forever");
    let log = AuditLog::open(Path::new(&path)).unwrap();
    let mut i: i64 = 0;
    // Bounded, so a writer whose parent vanished still ends.
    while i < if forever { 5_000_000 } else { FINITE_COUNT } {
        let mut r = rec(i, "srv", "tool");
        r.arguments = Some(json!({ "i": i, "pad": "x".repeat(200) }));
        log.record(r);
        i += 1;
        if i % 50 == 0 {
            log.flush().unwrap();
            println!("committed {i}");
        }
    }
    log.flush().unwrap();
    println!("committed {i}");
}

fn assert_intact(records: &[AuditRecord]) {
    for (i, r) in records.iter().enumerate() {
        let i = i as i64;
        assert_eq!(r.time_ms, 1_000_000 + i);
        assert_eq!(r.session, format!("session-{i}"));
        assert_eq!(r.args_digest, args_digest(&json!({ "i": i })));
        assert_eq!(r.arguments.as_ref().unwrap()["i"], i);
        assert_eq!(r.duration_us, 10 * i as u64);
    }
}

#[test]
fn records_written_by_another_process_are_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("child.db");
    let out = spawn_writer(&path, "finite").wait_with_output().unwrap();
    assert!(out.status.success());
    let records = read_only(&path).unwrap().query(&q()).unwrap();
    assert_eq!(records.len() as i64, FINITE_COUNT);
    assert_intact(&records);
}

#[test]
fn a_writer_killed_mid_write_leaves_a_readable_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.db");
    let mut child = spawn_writer(&path, "forever");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut committed = 0;
    while committed < 2_000 {
        let line = lines.next().expect("writer ended early").unwrap();
        if let Some(n) = line.strip_prefix("committed ") {
            committed = n.parse().unwrap();
        }
    }
    // SIGKILL, most likely in the middle of a transaction.
    child.kill().unwrap();
    child.wait().unwrap();

    let reader = read_only(&path).unwrap();
    let records = reader.query(&q()).unwrap();
    assert!(
        records.len() >= committed,
        "{} rows, {committed} committed",
        records.len()
    );
    assert_intact(&records);

    // And the store still takes writes after the crash.
    let log = AuditLog::open(&path).unwrap();
    log.record(rec(9_999_999, "after", "crash"));
    log.flush().unwrap();
    assert_eq!(log.query(&q()).unwrap().len(), records.len() + 1);
}
