//! The audit trail against a real SQLite file: round trips, filters, redaction, several writers,
//! a writer process killed mid-write, and the hash chain: intact, tampered with in each way,
//! after a legacy prefix, written by two processes, and copied while a writer runs.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use ed25519_dalek::{SigningKey, VerifyingKey};
use moat_host::audit::chain::{self, Break, ExportLine, Report, StoredRecord};
use moat_host::audit::{
    AuditConfig, AuditError, AuditLog, AuditQuery, AuditRecord, REDACTED, args_digest, key,
    read_only, redact,
};
use serde_json::json;

/// Set in a child copy of this test binary: the store to write to.
const WRITER_ENV: &str = "MOAT_AUDIT_TEST_WRITER";
/// Set with `WRITER_ENV`: `finite` writes a fixed number of records, `forever` loops until
/// killed, `paced` too but a record a millisecond (so a store being verified stays small).
const MODE_ENV: &str = "MOAT_AUDIT_TEST_MODE";
/// Set with `WRITER_ENV` to sign heads with the key at this path (made if absent).
const KEY_ENV: &str = "MOAT_AUDIT_TEST_KEY";
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
        subject: None,
        client_id: None,
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
    assert!(!d.sign && d.sign_every == 100);
    let signed: AuditConfig = toml::from_str("sign = true\nsign_every = 10").unwrap();
    assert!(signed.sign && signed.sign_every == 10);
    assert!(
        AuditLog::from_config(&c, Path::new("/nonexistent"))
            .unwrap()
            .is_none()
    );
}

/// Runs this very test binary as a writer process (see [`child_writer`]).
fn spawn_writer(path: &Path, mode: &str) -> std::process::Child {
    spawn_writer_with(path, mode, None)
}

fn spawn_writer_with(path: &Path, mode: &str, key: Option<&Path>) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
        .env(WRITER_ENV, path)
        .env(MODE_ENV, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(key) = key {
        cmd.env(KEY_ENV, key);
    }
    cmd.spawn().unwrap()
}

/// Not a test of its own: the body of the writer process, when this binary is run as one.
#[test]
fn child_writer() {
    let Some(path) = std::env::var_os(WRITER_ENV) else {
        return;
    };
    let mode = std::env::var(MODE_ENV).unwrap_or_default();
    let forever = mode == "forever" || mode == "paced";
    let pause = (mode == "paced").then_some(std::time::Duration::from_millis(1));
    let log = match std::env::var_os(KEY_ENV) {
        Some(key) => {
            let key = moat_host::audit::key::load_or_create(Path::new(&key)).unwrap();
            AuditLog::open_signing(Path::new(&path), key, 100).unwrap()
        }
        None => AuditLog::open(Path::new(&path)).unwrap(),
    };
    let mut i: i64 = 0;
    // Bounded, so a writer whose parent vanished still ends.
    while i < if forever { 5_000_000 } else { FINITE_COUNT } {
        let mut r = rec(i, "srv", "tool");
        r.arguments = Some(json!({ "i": i, "pad": "x".repeat(200) }));
        log.record(r);
        i += 1;
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
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

// ---- The hash chain ----

/// A signed store of `n` records (ids 1..=n) at `dir/name`, closed; returns its path and
/// the trusted public key.
fn signed_store(dir: &Path, name: &str, n: i64) -> (std::path::PathBuf, VerifyingKey) {
    let path = dir.join(name);
    let key = key::load_or_create(&dir.join("audit.key")).unwrap();
    let public = key.verifying_key();
    let log = AuditLog::open_signing(&path, key, 4).unwrap();
    for i in 1..=n {
        let mut r = rec(i, "fs", "read_file");
        if i % 3 == 0 {
            r.arguments = Some(json!({"path": format!("/tmp/{i}"), "n": 1.5}));
            r.error = Some("boom".into());
            r.kind = "sampling".into();
        }
        log.record(r);
        if i % 5 == 0 {
            log.flush().unwrap();
        }
    }
    drop(log);
    (path, public)
}

fn verify(path: &Path, key: &VerifyingKey) -> Report {
    read_only(path).unwrap().verify(vec![*key]).unwrap()
}

/// Runs `sql` on a copy of `path` (named `name`) and verifies the copy.
fn tampered(path: &Path, name: &str, key: &VerifyingKey, sql: &str) -> Report {
    let copy = path.with_file_name(name);
    std::fs::copy(path, &copy).unwrap();
    let conn = rusqlite::Connection::open(&copy).unwrap();
    conn.execute_batch(sql).unwrap();
    drop(conn);
    verify(&copy, key)
}

/// Every column of `audit` but the id, for copying rows around.
const COLUMNS: &str = "time_ms, session, client, server, tool, exposed_name, args_digest,
    arguments, decision, rule, consent, outcome, duration_us, result_bytes, error, kind,
    prev_hash, hash";

#[test]
fn callers_are_recorded_filtered_and_covered_by_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let log = AuditLog::open(&path).unwrap();
    let mut records = vec![
        rec(1, "fs", "read"),
        rec(2, "fs", "read"),
        rec(3, "fs", "read"),
    ];
    records[0].subject = Some("alice".into());
    records[0].client_id = Some("cli-a".into());
    records[1].subject = Some("bob".into());
    for r in &records {
        log.record(r.clone());
    }
    log.flush().unwrap();
    drop(log);
    let reader = read_only(&path).unwrap();
    let alice = reader
        .query(&AuditQuery {
            user: Some("alice".into()),
            ..q()
        })
        .unwrap();
    assert_eq!(alice, vec![records[0].clone()]);
    assert!(reader.verify(Vec::new()).unwrap().ok());
    // The user is part of what the hash covers: changing it breaks the chain.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("UPDATE audit SET subject = 'mallory' WHERE subject = 'alice'")
        .unwrap();
    drop(conn);
    let report = read_only(&path).unwrap().verify(Vec::new()).unwrap();
    assert!(!report.ok(), "{report:?}");
}

#[test]
fn an_intact_chain_verifies_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let (path, public) = signed_store(dir.path(), "audit.db", 12);
    let report = verify(&path, &public);
    assert!(report.ok(), "{report:?}");
    assert_eq!((report.legacy, report.chained), (0, 12));
    assert_eq!(report.first_chained, Some(1));
    assert_eq!(report.head.as_ref().map(|h| h.id), Some(12));
    assert_eq!(report.signed_through, Some(12));
    assert!(report.checkpoints >= 3 && report.key_trusted, "{report:?}");
    // Without a trusted key, signatures are checked against the key each names.
    let untrusted = read_only(&path).unwrap().verify(Vec::new()).unwrap();
    assert!(untrusted.ok() && !untrusted.key_trusted, "{untrusted:?}");

    // The export: one line per record with its links, signed heads after their records;
    // each line alone is enough to recompute its hash.
    let mut lines = Vec::new();
    let count = read_only(&path)
        .unwrap()
        .export(None, |line| {
            lines.push(serde_json::to_string(line).unwrap());
            Ok(())
        })
        .unwrap();
    assert_eq!(count, 12);
    let parsed: Vec<ExportLine> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut prev = chain::GENESIS;
    let mut records = 0;
    let mut heads = 0;
    for line in &parsed {
        match line {
            ExportLine::Record {
                record,
                prev_hash,
                hash,
            } => {
                assert_eq!(prev_hash.as_deref(), Some(chain::to_hex(&prev).as_str()));
                prev = record.hash(&prev);
                assert_eq!(hash.as_deref(), Some(chain::to_hex(&prev).as_str()));
                records += 1;
            }
            ExportLine::Checkpoint {
                record_id, head, ..
            } => {
                assert_eq!(*record_id, records);
                assert_eq!(head, &chain::to_hex(&prev));
                heads += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((records, heads), (12, report.checkpoints as i64));
    assert!(lines[2].contains(r#""type":"record""#), "{}", lines[2]);
    assert!(
        lines.iter().any(|l| l.contains(r#""arguments":"{"#)),
        "{lines:?}"
    );
    // Only what follows a given record.
    let mut tail = 0;
    read_only(&path)
        .unwrap()
        .export(Some(10), |line| {
            tail += matches!(line, ExportLine::Record { .. }) as i64;
            Ok(())
        })
        .unwrap();
    assert_eq!(tail, 2);
}

#[test]
fn each_kind_of_tampering_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (path, key) = signed_store(dir.path(), "audit.db", 10);
    assert!(verify(&path, &key).ok());

    // A changed field.
    let r = tampered(
        &path,
        "changed.db",
        &key,
        "UPDATE audit SET decision = 'deny' WHERE id = 4",
    );
    assert_eq!(r.problem, Some(Break::Altered { id: 4 }), "{r:?}");
    let r = tampered(
        &path,
        "kind.db",
        &key,
        "UPDATE audit SET kind = 'call' WHERE id = 6",
    );
    assert_eq!(r.problem, Some(Break::Altered { id: 6 }), "{r:?}");
    let r = tampered(
        &path,
        "null.db",
        &key,
        "UPDATE audit SET client = NULL WHERE id = 2",
    );
    assert_eq!(r.problem, Some(Break::Altered { id: 2 }), "{r:?}");

    // A deleted record.
    let r = tampered(&path, "deleted.db", &key, "DELETE FROM audit WHERE id = 5");
    assert_eq!(
        r.problem,
        Some(Break::Missing {
            missing: 5,
            id: 6,
            prev_id: 4
        }),
        "{r:?}"
    );
    assert!(
        r.problem
            .unwrap()
            .to_string()
            .contains("record 5 is missing")
    );

    // A deleted record and the ids after it renumbered.
    let r = tampered(
        &path,
        "renumbered.db",
        &key,
        "DELETE FROM audit WHERE id = 5;
         UPDATE audit SET id = id + 100 WHERE id > 5; UPDATE audit SET id = id - 101 WHERE id > 100;",
    );
    assert_eq!(
        r.problem,
        Some(Break::Unlinked { id: 5, prev_id: 4 }),
        "{r:?}"
    );

    // An inserted record: at the end without a hash, and in the middle with a hash forged
    // to follow the record before it.
    let r = tampered(
        &path,
        "appended.db",
        &key,
        &format!(
            "INSERT INTO audit (id, {COLUMNS}) SELECT 11, {COLUMNS} FROM audit WHERE id = 3;
                  UPDATE audit SET hash = NULL, prev_hash = NULL WHERE id = 11"
        ),
    );
    assert_eq!(r.problem, Some(Break::Unchained { id: 11 }), "{r:?}");
    let forged = {
        let records = read_only(&path).unwrap().query(&q()).unwrap();
        let report = verify(&path, &key);
        assert!(report.ok());
        let mut prev = chain::GENESIS;
        for (i, r) in records.iter().take(4).enumerate() {
            prev = StoredRecord::from_record(i as i64 + 1, r).hash(&prev);
        }
        let mut fake = records[0].clone();
        fake.decision = "allow".into();
        let hash = StoredRecord::from_record(5, &fake).hash(&prev);
        (chain::to_hex(&prev), chain::to_hex(&hash))
    };
    let r = tampered(
        &path,
        "inserted.db",
        &key,
        &format!(
            "UPDATE audit SET id = id + 100 WHERE id > 4; UPDATE audit SET id = id - 99 WHERE id > 100;
             INSERT INTO audit (id, {COLUMNS}) SELECT 5, {COLUMNS} FROM audit WHERE id = 1;
             UPDATE audit SET decision = 'allow', prev_hash = '{}', hash = '{}' WHERE id = 5;",
            forged.0, forged.1
        ),
    );
    // The forged record links to its predecessor; the record after it does not link to it,
    // and a head signed at id 5 (when a batch ended there) no longer matches.
    assert!(
        matches!(
            r.problem,
            Some(Break::Unlinked { id: 6, prev_id: 5 } | Break::HeadChanged { record_id: 5, .. })
        ),
        "{r:?}"
    );

    // Two records swapped (every column but the id).
    let swap = format!(
        "CREATE TEMP TABLE t AS SELECT * FROM audit WHERE id IN (4, 5);
         DELETE FROM audit WHERE id IN (4, 5);
         INSERT INTO audit (id, {COLUMNS}) SELECT 9 - id, {COLUMNS} FROM t;"
    );
    let r = tampered(&path, "swapped.db", &key, &swap);
    assert_eq!(
        r.problem,
        Some(Break::Unlinked { id: 4, prev_id: 3 }),
        "{r:?}"
    );
    assert_eq!(r.problem.as_ref().map(Break::record_id), Some(4));

    // A signed head's signature altered (one hex digit of the last checkpoint).
    let r = tampered(
        &path,
        "signature.db",
        &key,
        "UPDATE audit_checkpoint SET signature =
            substr(signature, 1, 10) || (CASE substr(signature, 11, 1) WHEN '0' THEN '1' ELSE '0' END)
            || substr(signature, 12)
         WHERE id = (SELECT max(id) FROM audit_checkpoint)",
    );
    assert!(
        matches!(r.problem, Some(Break::BadSignature { record_id: 10, .. })),
        "{r:?}"
    );

    // The chain rewritten from record 7 on, re-hashed by someone without the key: the
    // signed head no longer matches.
    let rehashed = {
        let records = read_only(&path).unwrap().query(&q()).unwrap();
        let mut prev = chain::GENESIS;
        let mut sql = String::new();
        for (i, r) in records.iter().enumerate() {
            let id = i as i64 + 1;
            let mut r = r.clone();
            if id == 7 {
                r.outcome = "failed".into();
                sql += "UPDATE audit SET outcome = 'failed' WHERE id = 7;";
            }
            let hash = StoredRecord::from_record(id, &r).hash(&prev);
            sql += &format!(
                "UPDATE audit SET prev_hash = '{}', hash = '{}' WHERE id = {id};",
                chain::to_hex(&prev),
                chain::to_hex(&hash)
            );
            prev = hash;
        }
        sql
    };
    let r = tampered(&path, "rehashed.db", &key, &rehashed);
    assert!(
        matches!(r.problem, Some(Break::HeadChanged { record_id, .. }) if record_id >= 7),
        "{r:?}"
    );

    // The newest records cut off, below a signed head.
    let r = tampered(&path, "cut.db", &key, "DELETE FROM audit WHERE id > 8");
    assert!(
        matches!(r.problem, Some(Break::HeadMissing { record_id, .. }) if record_id > 8),
        "{r:?}"
    );

    // Signed by another key than the trusted one.
    let other = SigningKey::from_bytes(&[9; 32]).verifying_key();
    let r = verify(&path, &other);
    assert!(matches!(r.problem, Some(Break::UnknownKey { .. })), "{r:?}");
}

/// A store written before the chain (and before kinds): its records verify as a legacy
/// prefix, before and after new records are chained after them.
#[test]
fn a_legacy_store_then_new_records_verifies_with_a_legacy_prefix() {
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
            VALUES (1, 's', 'fs', 'read_file', 'fs__read_file', 'd', 'allow', 'default', 'ok', 1, 1),
                   (2, 's', 'fs', 'write_file', 'fs__write_file', 'd', 'deny', 'rule 1', 'refused', 1, 0),
                   (3, 's', 'fs', 'read_file', 'fs__read_file', 'd', 'allow', 'default', 'ok', 1, 9);",
    )
    .unwrap();
    drop(old);
    let key = SigningKey::from_bytes(&[3; 32]);
    let public = key.verifying_key();
    let r = verify(&path, &public);
    assert!(r.ok(), "{r:?}");
    assert_eq!((r.legacy, r.chained, r.head), (3, 0, None));

    let log = AuditLog::open_signing(&path, key, 100).unwrap();
    log.record(rec(4, "fs", "read_file"));
    log.record(rec(5, "fs", "read_file"));
    log.flush().unwrap();
    drop(log);
    let r = verify(&path, &public);
    assert!(r.ok(), "{r:?}");
    assert_eq!((r.legacy, r.chained, r.first_chained), (3, 2, Some(4)));
    assert_eq!(r.signed_through, Some(5));

    // Legacy records are covered from the moment the chain starts after them.
    let r = tampered(
        &path,
        "legacy-changed.db",
        &public,
        "UPDATE audit SET decision = 'allow' WHERE id = 2",
    );
    assert_eq!(
        r.problem,
        Some(Break::LegacyChanged { id: 4, legacy: 3 }),
        "{r:?}"
    );
    let r = tampered(
        &path,
        "legacy-deleted.db",
        &public,
        "DELETE FROM audit WHERE id = 1",
    );
    assert_eq!(
        r.problem,
        Some(Break::LegacyChanged { id: 4, legacy: 2 }),
        "{r:?}"
    );
}

/// Two processes append to one store at once: one chain, no two records on one predecessor.
#[test]
fn two_processes_writing_one_store_keep_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let key_path = dir.path().join("audit.key");
    let a = spawn_writer_with(&path, "finite", Some(&key_path));
    let b = spawn_writer_with(&path, "finite", Some(&key_path));
    assert!(a.wait_with_output().unwrap().status.success());
    assert!(b.wait_with_output().unwrap().status.success());
    let public = key::public_key(&key_path).unwrap();
    let r = verify(&path, &public);
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.chained, 2 * FINITE_COUNT as u64);
    assert_eq!(r.signed_through, Some(2 * FINITE_COUNT));
}

/// A store copied while a writer process keeps appending (and signing) verifies: through
/// SQLite's `VACUUM INTO`, and as the database file and its WAL copied under a read
/// transaction.
#[test]
fn a_store_copied_while_a_writer_runs_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let key_path = dir.path().join("audit.key");
    let mut child = spawn_writer_with(&path, "paced", Some(&key_path));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut wait_for = |n: usize| {
        let mut committed = 0;
        while committed < n {
            let line = lines.next().expect("writer ended early").unwrap();
            if let Some(c) = line.strip_prefix("committed ") {
                committed = c.parse().unwrap();
            }
        }
    };
    let public = loop {
        wait_for(1);
        if let Ok(k) = key::public_key(&key_path) {
            break k;
        }
    };
    let mut seen = Vec::new();
    for round in 0..4 {
        wait_for(300 * (round + 1));
        let vacuumed = dir.path().join(format!("vacuum-{round}.db"));
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        conn.execute("VACUUM INTO ?1", [vacuumed.to_str().unwrap()])
            .unwrap();

        let raw = dir.path().join(format!("raw-{round}"));
        std::fs::create_dir(&raw).unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        let _: i64 = tx
            .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
            .unwrap();
        std::fs::copy(&path, raw.join("live.db")).unwrap();
        let wal = path.with_file_name("live.db-wal");
        if wal.exists() {
            std::fs::copy(&wal, raw.join("live.db-wal")).unwrap();
        }
        drop(tx);
        drop(conn);

        for copy in [vacuumed, raw.join("live.db")] {
            let r = verify(&copy, &public);
            assert!(r.ok(), "{}: {r:?}", copy.display());
            assert!(r.chained >= 300 * (round as u64 + 1), "{r:?}");
            assert!(r.checkpoints > 0, "{r:?}");
            seen.push(r.chained);
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // And the live store itself, after the writer was killed mid-write.
    let r = verify(&path, &public);
    assert!(r.ok(), "{r:?}");
    assert!(r.chained >= *seen.iter().max().unwrap(), "{r:?} {seen:?}");
}
