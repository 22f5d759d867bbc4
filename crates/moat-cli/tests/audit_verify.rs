//! `moat audit verify`, `export` and `key` against real stores: an intact signed trail, one
//! tampered with in each way (a changed field, a deleted, inserted or moved record, an
//! altered signature), a trail with a legacy prefix, and the public key printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use moat_host::audit::{AuditConfig, AuditLog, AuditRecord, chain, key};
use serde_json::Value;

const RECORDS: i64 = 9;

struct Trail {
    _dir: tempfile::TempDir,
    state: PathBuf,
    store: PathBuf,
}

/// A state directory whose gateway-made store holds `RECORDS` signed records.
fn trail() -> Trail {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state/moat");
    let mut config = AuditConfig::default();
    config.sign = true;
    config.sign_every = 4;
    let log = AuditLog::from_config(&config, &state).unwrap().unwrap();
    for i in 1..=RECORDS {
        log.record(AuditRecord {
            time_ms: 1_700_000_000_000 + i,
            session: "s1".into(),
            server: "fs".into(),
            tool: "write_file".into(),
            exposed_name: "fs__write_file".into(),
            args_digest: format!("{i:064x}"),
            decision: if i % 2 == 0 { "deny" } else { "allow" }.into(),
            rule: "default".into(),
            outcome: "ok".into(),
            ..AuditRecord::default()
        });
    }
    drop(log);
    let store = state.join("audit.db");
    assert!(store.exists() && key::key_path(&state).exists());
    Trail {
        _dir: dir,
        state,
        store,
    }
}

fn moat(trail: &Trail, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(args)
        .env("XDG_STATE_HOME", trail.state.parent().unwrap())
        .env_remove("HOME")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A copy of the trail's store with `sql` applied, verified by `moat audit verify --json`.
fn verify_tampered(trail: &Trail, name: &str, sql: &str) -> (Output, Value) {
    let copy = trail.store.with_file_name(name);
    std::fs::copy(&trail.store, &copy).unwrap();
    let conn = rusqlite::Connection::open(&copy).unwrap();
    conn.execute_batch(sql).unwrap();
    drop(conn);
    let out = moat(
        trail,
        &[
            "audit",
            "verify",
            "--json",
            "--store",
            copy.to_str().unwrap(),
        ],
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, json)
}

fn assert_broken_at(out: &Output, json: &Value, record: i64) {
    assert_eq!(out.status.code(), Some(3), "{}", text(out));
    assert_eq!(json["ok"], false, "{json}");
    assert_eq!(json["record"], record, "{json}");
    let message = json["message"].as_str().unwrap();
    assert!(message.contains(&format!("record {record}")), "{message}");
}

const COLUMNS: &str = "time_ms, session, client, server, tool, exposed_name, args_digest,
    arguments, decision, rule, consent, outcome, duration_us, result_bytes, error, kind,
    prev_hash, hash";

#[test]
fn an_intact_trail_verifies() {
    let trail = trail();
    let out = moat(&trail, &["audit", "verify"]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = text(&out);
    assert!(shown.contains("intact: 9 record(s) chained"), "{shown}");
    assert!(shown.contains("the newest at record 9"), "{shown}");

    let out = moat(&trail, &["audit", "verify", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["chained"], RECORDS);
    assert_eq!(json["legacy"], 0);
    assert_eq!(json["key_trusted"], true);
    assert_eq!(json["signed_through"], RECORDS);
    assert_eq!(json["head"]["id"], RECORDS);
    assert!(json["problem"].is_null(), "{json}");
}

#[test]
fn each_tampering_fails_naming_the_record() {
    let trail = trail();

    let (out, json) = verify_tampered(
        &trail,
        "changed.db",
        "UPDATE audit SET decision = 'allow' WHERE id = 4",
    );
    assert_broken_at(&out, &json, 4);
    assert_eq!(json["problem"]["problem"], "altered", "{json}");

    let (out, json) = verify_tampered(&trail, "deleted.db", "DELETE FROM audit WHERE id = 6");
    assert_broken_at(&out, &json, 6);
    assert_eq!(json["problem"]["problem"], "missing", "{json}");

    // Inserted between 2 and 3 (the ids after it moved up one to make room).
    let (out, json) = verify_tampered(
        &trail,
        "inserted.db",
        &format!(
            "UPDATE audit SET id = id + 100 WHERE id > 2; UPDATE audit SET id = id - 99 WHERE id > 100;
             INSERT INTO audit (id, {COLUMNS}) SELECT 3, {COLUMNS} FROM audit WHERE id = 2;"
        ),
    );
    assert_broken_at(&out, &json, 3);

    // Two records swapped.
    let (out, json) = verify_tampered(
        &trail,
        "swapped.db",
        &format!(
            "CREATE TEMP TABLE t AS SELECT * FROM audit WHERE id IN (7, 8);
             DELETE FROM audit WHERE id IN (7, 8);
             INSERT INTO audit (id, {COLUMNS}) SELECT 15 - id, {COLUMNS} FROM t;"
        ),
    );
    assert_broken_at(&out, &json, 7);

    // The newest signed head's signature altered.
    let (out, json) = verify_tampered(
        &trail,
        "signature.db",
        "UPDATE audit_checkpoint SET signature =
            (CASE substr(signature, 1, 1) WHEN 'a' THEN 'b' ELSE 'a' END) || substr(signature, 2)
         WHERE id = (SELECT max(id) FROM audit_checkpoint)",
    );
    assert_broken_at(&out, &json, RECORDS);
    assert_eq!(json["problem"]["problem"], "bad_signature", "{json}");

    // Text output names the record too.
    let copy = trail.store.with_file_name("changed.db");
    let out = moat(
        &trail,
        &["audit", "verify", "--store", copy.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out).contains("BROKEN at record 4: record 4 was altered"),
        "{}",
        text(&out)
    );
}

#[test]
fn keys_trusted_given_or_missing() {
    let trail = trail();
    let out = moat(&trail, &["audit", "key"]);
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    let public = key::public_key(&key::key_path(&trail.state)).unwrap();
    assert_eq!(printed.trim(), chain::to_hex(public.as_bytes()));

    // The printed key, given explicitly, is trusted; another one is not.
    let out = moat(&trail, &["audit", "verify", "--key", printed.trim()]);
    assert!(out.status.success(), "{}", text(&out));
    let other = "11".repeat(32);
    let out = moat(&trail, &["audit", "verify", "--json", "--key", &other]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["problem"]["problem"], "unknown_key", "{json}");
    let out = moat(&trail, &["audit", "verify", "--key", "nothex"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));

    // Without the key file, signatures are checked against the key each names, and said so.
    std::fs::remove_file(key::key_path(&trail.state)).unwrap();
    let out = moat(&trail, &["audit", "verify"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("no trusted key"), "{}", text(&out));
    let out = moat(&trail, &["audit", "key"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("sign = true"), "{}", text(&out));
}

#[test]
fn export_writes_records_with_their_chain() {
    let trail = trail();
    let out = moat(&trail, &["audit", "export"]);
    assert!(out.status.success(), "{}", text(&out));
    let lines: Vec<Value> = String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let records: Vec<&Value> = lines.iter().filter(|l| l["type"] == "record").collect();
    assert_eq!(records.len() as i64, RECORDS);
    assert!(lines.iter().any(|l| l["type"] == "checkpoint"));
    for pair in records.windows(2) {
        assert_eq!(pair[1]["prev_hash"], pair[0]["hash"]);
        assert_eq!(pair[1]["id"], pair[0]["id"].as_i64().unwrap() + 1);
    }
    assert_eq!(records[0]["prev_hash"], "0".repeat(64));
    assert!(text(&out).contains("exported 9 record(s)"));

    let out = moat(&trail, &["audit", "export", "--after", "7"]);
    let ids: Vec<i64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] == "record")
        .map(|l| l["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [8, 9]);
}

#[test]
fn a_legacy_prefix_is_reported() {
    let trail = trail();
    // A store from before the chain, then opened by this version and written to.
    let old = trail.store.with_file_name("old.db");
    let conn = rusqlite::Connection::open(&old).unwrap();
    conn.execute_batch(
        "CREATE TABLE audit (id INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL, session TEXT NOT NULL,
            client TEXT, server TEXT NOT NULL, tool TEXT NOT NULL, exposed_name TEXT NOT NULL,
            args_digest TEXT NOT NULL, arguments TEXT, decision TEXT NOT NULL, rule TEXT NOT NULL,
            consent TEXT, outcome TEXT NOT NULL, duration_us INTEGER NOT NULL,
            result_bytes INTEGER NOT NULL, error TEXT, kind TEXT NOT NULL DEFAULT 'call');
         INSERT INTO audit (time_ms, session, server, tool, exposed_name, args_digest, decision,
            rule, outcome, duration_us, result_bytes)
            VALUES (1, 's', 'fs', 'read_file', 'fs__read_file', 'd', 'allow', 'default', 'ok', 1, 1),
                   (2, 's', 'fs', 'read_file', 'fs__read_file', 'd', 'allow', 'default', 'ok', 1, 1);",
    )
    .unwrap();
    drop(conn);
    let store = |p: &Path| p.to_str().unwrap().to_owned();
    let out = moat(&trail, &["audit", "verify", "--store", &store(&old)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("no chained records yet"),
        "{}",
        text(&out)
    );

    let log = AuditLog::open(&old).unwrap();
    log.record(AuditRecord {
        tool: "after".into(),
        ..AuditRecord::default()
    });
    drop(log);
    let out = moat(&trail, &["audit", "verify", "--store", &store(&old)]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = text(&out);
    assert!(shown.contains("1 record(s) chained (3 … 3)"), "{shown}");
    assert!(shown.contains("2 record(s) before the chain"), "{shown}");
    assert!(shown.contains("legacy prefix"), "{shown}");
    let out = moat(
        &trail,
        &["audit", "verify", "--json", "--store", &store(&old)],
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (json["legacy"].as_i64(), json["chained"].as_i64()),
        (Some(2), Some(1))
    );
}

/// The gateway itself, with `[audit] sign = true`: it makes the key (mode 0600) in its state
/// directory on first start, chains and signs each call, and the trail verifies.
#[test]
fn a_signing_gateway_leaves_a_verified_trail() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = dir.path().join("moat.toml");
    let moat_bin = env!("CARGO_BIN_EXE_moat");
    std::fs::write(
        &config,
        format!(
            "state_dir = {state:?}\n[audit]\nsign = true\n[policy]\ndefault = \"allow\"\n\
             [servers.ev]\ncommand = {moat_bin:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n"
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    for _ in 0..2 {
        let out = Command::new(moat_bin)
            .args([
                "call",
                "ev__test_simple_text",
                "--",
                moat_bin,
                "gateway",
                "--config",
                config,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    let key_file = key::key_path(&state);
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let out = Command::new(moat_bin)
        .args(["audit", "verify", "--json", "--config", config])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["chained"], 2, "{json}");
    assert_eq!(json["signed_through"], 2, "{json}");
    assert_eq!(json["key_trusted"], true, "{json}");
}

/// An export verifies on its own, whole or from where `--after` started it; an edited
/// export fails naming the record.
#[test]
fn an_export_verifies_with_from() {
    let trail = trail();
    let dir = trail.store.parent().unwrap();
    let whole = dir.join("whole.jsonl");
    let tail = dir.join("tail.jsonl");
    for (file, args) in [
        (&whole, vec!["audit", "export"]),
        (&tail, vec!["audit", "export", "--after", "5"]),
    ] {
        let out = moat(&trail, &args);
        assert!(out.status.success(), "{}", text(&out));
        std::fs::write(file, &out.stdout).unwrap();
    }
    let from = |file: &Path| {
        moat(
            &trail,
            &[
                "audit",
                "verify",
                "--json",
                "--from",
                file.to_str().unwrap(),
            ],
        )
    };
    let out = from(&whole);
    assert!(out.status.success(), "{}", text(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (json["chained"].as_i64(), json["signed_through"].as_i64()),
        (Some(RECORDS), Some(RECORDS))
    );
    let out = from(&tail);
    assert!(out.status.success(), "{}", text(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (json["chained"].as_i64(), json["anchored_after"].as_i64()),
        (Some(4), Some(5))
    );

    // One field of record 7 edited in the file.
    let edited = dir.join("edited.jsonl");
    let text_in = std::fs::read_to_string(&whole).unwrap();
    let changed: Vec<String> = text_in
        .lines()
        .map(|l| {
            if l.contains(r#""type":"record","id":7,"#) {
                l.replace(r#""decision":"allow""#, r#""decision":"deny""#)
            } else {
                l.to_owned()
            }
        })
        .collect();
    assert_ne!(changed.join("\n") + "\n", text_in);
    std::fs::write(&edited, changed.join("\n")).unwrap();
    let out = from(&edited);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["record"], 7, "{json}");

    std::fs::write(&edited, "not json\n").unwrap();
    let out = from(&edited);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("line 1"), "{}", text(&out));
}
