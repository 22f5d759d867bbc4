//! The built-in servers (`moat serve fs`, `moat serve sqlite`, `moat serve exec`) driven by
//! the official SDK clients of other languages: the Python SDK (`interop/py_client.py`) and
//! the TypeScript SDK, 1.x and 2.x (`interop/ts_client.mjs [--sdk v2]`).
//!
//! Each test starts one server through its foreign client and checks what that client
//! sees: the tools by exact name with their `readOnlyHint` / `destructiveHint`, the main
//! tools called with realistic arguments (results, `structuredContent`, and refusals as
//! `isError` results rather than protocol errors), and a resource read. Every server is
//! driven by the Python client on its own policy (`auto`, which lands on 2026-07-28) and
//! pinned to 2025-06-18, by TS 1.x on its default handshake (2025-11-25), and by TS 2.x in
//! `auto` (2026-07-28). The TS SDKs also validate `structuredContent` against the tool's
//! `outputSchema`: a result that did not match would fail the client, and so the test.
//!
//! The peers live in `interop/` (see interop/README.md; `.ci/run` installs them), found at
//! `$CARGO_MANIFEST_DIR/../../interop` or `$MOAT_INTEROP_DIR`. When they are missing the
//! tests print a notice and pass, except under CI (`CI` set), where they fail. Every child
//! runs in its own process group with a deadline, killed as a group when it passes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod support;
use support::json::{array, strings};
use support::{Leftovers, Peers, Run};

/// Deadline for one client run (the client spawns the server and runs its whole script).
const TIMEOUT: Duration = Duration::from_secs(40);
/// The deadline handed to the client itself, shorter so that it reports before we kill it.
const CLIENT_TIMEOUT: &str = "30";
/// How long the output pipes may stay open after the client exited (longer means the
/// server it spawned outlived it).
const PIPE_GRACE: Duration = Duration::from_secs(10);

const VENV_PYTHON: &str = ".venv/bin/python";
/// The revision the Python client and TS 2.x reach in `auto` against our servers.
const MODERN_REVISION: &str = "2026-07-28";
/// What TS 1.x offers (and our servers accept) by default.
const TS_V1_LATEST: &str = "2025-11-25";
/// The older handshake revision every server is also checked on.
const PINNED_REVISION: &str = "2025-06-18";

// ---------------------------------------------------------------------------
// The foreign clients
// ---------------------------------------------------------------------------

/// Which SDK client drives the server, and on which revision.
#[derive(Debug, Clone, Copy)]
enum Client {
    /// Python SDK, `auto` (probes `server/discover`, falls back to `initialize`).
    PyAuto,
    /// Python SDK in legacy mode, offering 2025-06-18 in `initialize`.
    PyPinned,
    /// TypeScript SDK 1.x, its default handshake.
    TsV1,
    /// TypeScript SDK 2.x, `versionNegotiation: auto`.
    TsV2,
}

impl Client {
    /// The revision the connection must end up on.
    fn revision(self) -> &'static str {
        match self {
            Client::PyAuto | Client::TsV2 => MODERN_REVISION,
            Client::PyPinned => PINNED_REVISION,
            Client::TsV1 => TS_V1_LATEST,
        }
    }

    fn argv(self, peers: &Peers) -> Vec<String> {
        let node = |extra: &[&str]| {
            let mut v = vec!["node".to_owned(), peers.path("ts_client.mjs")];
            v.extend(extra.iter().map(|s| (*s).to_owned()));
            v
        };
        match self {
            Client::PyAuto => vec![peers.path(VENV_PYTHON), peers.path("py_client.py")],
            Client::PyPinned => vec![
                peers.path(VENV_PYTHON),
                peers.path("py_client.py"),
                "--protocol".into(),
                PINNED_REVISION.into(),
            ],
            Client::TsV1 => node(&[]),
            Client::TsV2 => node(&["--sdk", "v2"]),
        }
    }
}

/// Finds the installed clients, or returns `None` (test skipped) when they are missing
/// outside CI. Under CI a missing peer is a test failure.
fn peers() -> Option<Peers> {
    support::peers(&[
        "node_modules/@modelcontextprotocol/sdk/package.json",
        "node_modules/@modelcontextprotocol/client/package.json",
        VENV_PYTHON,
        "ts_client.mjs",
        "py_client.py",
    ])
}

/// Runs `client` against `moat serve SERVER_ARGS...` with `script` (`--call`/`--read`
/// options), and returns its JSON summary, after checking the revision and server name.
fn drive(
    peers: &Peers,
    client: Client,
    server_args: &[&str],
    script: &[String],
    server_name: &str,
) -> Value {
    let mut argv = client.argv(peers);
    argv.extend(script.iter().cloned());
    argv.extend(["--timeout".into(), CLIENT_TIMEOUT.into(), "--".into()]);
    argv.push(env!("CARGO_BIN_EXE_moat").into());
    argv.push("serve".into());
    argv.extend(server_args.iter().map(|s| (*s).to_owned()));
    let run = run(&argv);
    let out = run.json(0);
    assert_eq!(
        out["protocolVersion"],
        client.revision(),
        "{client:?}: negotiated revision\n{}",
        run.describe()
    );
    assert_eq!(
        out.pointer("/serverInfo/name").and_then(Value::as_str),
        Some(server_name),
        "{client:?}: serverInfo\n{}",
        run.describe()
    );
    out
}

/// `--call NAME ARGS`.
fn call(name: &str, args: Value) -> [String; 3] {
    ["--call".into(), name.into(), args.to_string()]
}

/// `--read URI`.
fn read(uri: &str) -> [String; 2] {
    ["--read".into(), uri.into()]
}

// ---------------------------------------------------------------------------
// Running a child with a deadline
// ---------------------------------------------------------------------------

/// Runs `argv` (see [`support::run`]), failing past [`TIMEOUT`] or if a server it spawned
/// outlives it.
fn run(argv: &[String]) -> Run {
    support::run(argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail)
}

// ---------------------------------------------------------------------------
// JSON helpers
// ---------------------------------------------------------------------------

/// Every listed tool as the client saw it: name → (readOnlyHint, destructiveHint).
fn hints(out: &Value) -> BTreeMap<String, (Option<bool>, Option<bool>)> {
    array(out, "toolDetails")
        .iter()
        .map(|t| {
            let name = t["name"]
                .as_str()
                .unwrap_or_else(|| panic!("tool without a name: {t}"))
                .to_owned();
            let hint = |h: &str| {
                t.pointer(&format!("/annotations/{h}"))
                    .and_then(Value::as_bool)
            };
            (name, (hint("readOnlyHint"), hint("destructiveHint")))
        })
        .collect()
}

fn expect_hints(
    out: &Value,
    want: &[(&str, bool, bool)],
) -> BTreeMap<String, (Option<bool>, Option<bool>)> {
    let have = hints(out);
    let want: BTreeMap<String, (Option<bool>, Option<bool>)> = want
        .iter()
        .map(|(n, ro, d)| ((*n).to_owned(), (Some(*ro), Some(*d))))
        .collect();
    assert_eq!(
        have, want,
        "tools (name → readOnlyHint, destructiveHint) as the client lists them"
    );
    have
}

/// The `i`th call's result.
fn result(out: &Value, i: usize) -> &Value {
    let calls = array(out, "calls");
    calls
        .get(i)
        .map(|c| &c["result"])
        .unwrap_or_else(|| panic!("no call #{i} in {calls:#?}"))
}

fn is_error(result: &Value) -> bool {
    result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The concatenated text of every `{"type":"text"}` block in `result.content`.
fn text(result: &Value) -> String {
    array(result, "content")
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A result that must have succeeded, and its `structuredContent`.
fn structured(result: &Value) -> &Value {
    assert!(!is_error(result), "unexpected isError: {result:#}");
    result
        .get("structuredContent")
        .unwrap_or_else(|| panic!("no structuredContent: {result:#}"))
}

/// A result that must be a tool error (`isError: true`, not a JSON-RPC error), whose text
/// contains `needle`.
fn refused<'a>(result: &'a Value, needle: &str) -> &'a Value {
    assert!(is_error(result), "expected isError: {result:#}");
    let t = text(result);
    assert!(t.contains(needle), "error text lacks {needle:?}: {t:?}");
    result
}

/// The `i`th read's first content.
fn read_content(out: &Value, i: usize) -> &Value {
    let reads = array(out, "reads");
    let r = reads
        .get(i)
        .unwrap_or_else(|| panic!("no read #{i} in {reads:#?}"));
    array(&r["result"], "contents")
        .first()
        .unwrap_or_else(|| panic!("read #{i} has no contents: {r:#}"))
}

// ---------------------------------------------------------------------------
// fs
// ---------------------------------------------------------------------------

const HELLO: &str = "hello from the fs server\nsecond line\n";
const NOTE: &str = "# Notes\n\nThe launch code is BLUE-42.\n";

/// A root with `hello.txt`, `docs/note.md` and `escape`, a link to `/etc`; and next to
/// the root, `secret.txt`, which nothing may reach.
fn fs_tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("moat-srvinterop-fs-")
        .tempdir()
        .expect("temp dir");
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("docs")).expect("mkdir");
    std::fs::write(root.join("hello.txt"), HELLO).expect("write hello.txt");
    std::fs::write(root.join("docs/note.md"), NOTE).expect("write note.md");
    std::fs::write(dir.path().join("secret.txt"), "outside\n").expect("write secret");
    std::os::unix::fs::symlink("/etc", root.join("escape")).expect("symlink");
    // The server names files by the root's canonical path.
    let root = root.canonicalize().expect("canonical root");
    (dir, root)
}

fn fs_vs(client: Client) {
    let Some(p) = peers() else { return };
    let (dir, root) = fs_tree();
    let root_s = root.to_string_lossy().into_owned();
    let secret = dir
        .path()
        .canonicalize()
        .expect("canonical dir")
        .join("secret.txt");
    let hello_uri = format!("file://{root_s}/hello.txt");
    let written = "written by the foreign client\n";
    let mut script = Vec::new();
    script.extend(call("list_directory", json!({})));
    script.extend(call("read_file", json!({ "path": "hello.txt" })));
    script.extend(call(
        "write_file",
        json!({ "path": "out/new.txt", "content": written, "create_dirs": true }),
    ));
    script.extend(call("read_file", json!({ "path": "out/new.txt" })));
    script.extend(call(
        "search_files",
        json!({ "pattern": "*.md", "content": "launch code" }),
    ));
    script.extend(call("stat", json!({ "path": "hello.txt" })));
    script.extend(call("read_file", json!({ "path": "../secret.txt" })));
    script.extend(call("read_file", json!({ "path": "escape/passwd" })));
    script.extend(call(
        "write_file",
        json!({ "path": secret.to_string_lossy(), "content": "overwritten" }),
    ));
    script.extend(read(&hello_uri));
    let out = drive(&p, client, &["fs", "--root", &root_s], &script, "moat-fs");

    expect_hints(
        &out,
        &[
            ("list_directory", true, false),
            ("read_file", true, false),
            ("search_files", true, false),
            ("stat", true, false),
            ("write_file", false, true),
            ("move_file", false, true),
            ("delete_file", false, true),
        ],
    );
    assert_eq!(
        out.pointer("/capabilities/resources/subscribe"),
        Some(&json!(true)),
        "{out:#}"
    );
    let resources = strings(&out, "resources", Some("uri"));
    assert!(resources.contains(&hello_uri), "{resources:?}");
    assert!(
        resources.contains(&format!("file://{root_s}/docs/note.md")),
        "{resources:?}"
    );
    assert_eq!(
        strings(&out, "resourceTemplates", Some("uriTemplate")),
        ["file:///{+path}"]
    );

    // list_directory: the root's entries, paths relative to it.
    let listing = structured(result(&out, 0));
    assert_eq!(listing["path"], ".", "{listing:#}");
    assert_eq!(listing["truncated"], false, "{listing:#}");
    let entries: BTreeMap<&str, &Value> = array(listing, "entries")
        .iter()
        .map(|e| (e["path"].as_str().unwrap_or_default(), e))
        .collect();
    assert_eq!(
        entries.keys().copied().collect::<Vec<_>>(),
        ["docs", "escape", "hello.txt"],
        "{listing:#}"
    );
    assert_eq!(entries["hello.txt"]["kind"], "file");
    assert_eq!(entries["hello.txt"]["size"], HELLO.len());
    assert_eq!(entries["docs"]["kind"], "directory");
    assert_eq!(entries["escape"]["kind"], "symlink");

    // read_file: the text, whole.
    let r = result(&out, 1);
    assert!(!is_error(r), "{r:#}");
    assert_eq!(text(r), HELLO);

    // write_file, then read back, through the client and on disk.
    let w = structured(result(&out, 2));
    assert_eq!(
        w,
        &json!({ "path": "out/new.txt", "bytes": written.len(), "created": true })
    );
    assert_eq!(text(result(&out, 3)), written);
    assert_eq!(
        std::fs::read_to_string(root.join("out/new.txt"))
            .ok()
            .as_deref(),
        Some(written)
    );

    // search_files: by glob and content, with the line found.
    let found = structured(result(&out, 4));
    assert_eq!(
        found,
        &json!({
            "matches": [{
                "path": "docs/note.md",
                "kind": "file",
                "line": 3,
                "text": "The launch code is BLUE-42."
            }],
            "truncated": false
        })
    );

    // stat.
    let st = structured(result(&out, 5));
    assert_eq!(st["path"], "hello.txt");
    assert_eq!(st["kind"], "file");
    assert_eq!(st["size"], HELLO.len());
    assert!(
        st["permissions"].as_str().is_some_and(|p| p.len() == 4),
        "{st:#}"
    );

    // Escapes: `..`, a symlink out of the root, an absolute path elsewhere. Each is a tool
    // error the client reads, and nothing outside was read or written.
    refused(result(&out, 6), "`..` is not allowed");
    let through_link = refused(result(&out, 7), "symbolic link");
    assert!(
        !text(through_link).contains("root:"),
        "/etc/passwd leaked: {through_link:#}"
    );
    refused(result(&out, 8), "outside the root");
    assert_eq!(
        std::fs::read_to_string(&secret).ok().as_deref(),
        Some("outside\n")
    );

    // resources/read of a file:// URI.
    let c = read_content(&out, 0);
    assert_eq!(c["uri"], hello_uri.as_str());
    assert_eq!(c["mimeType"], "text/plain");
    assert_eq!(c["text"], HELLO);
}

#[test]
fn fs_py_auto() {
    fs_vs(Client::PyAuto);
}

#[test]
fn fs_py_2025_06_18() {
    fs_vs(Client::PyPinned);
}

#[test]
fn fs_ts_v1_default() {
    fs_vs(Client::TsV1);
}

#[test]
fn fs_ts_v2_auto() {
    fs_vs(Client::TsV2);
}

/// `--read-only` offers the four reading tools and nothing else.
#[test]
fn fs_read_only_ts_v1() {
    let Some(p) = peers() else { return };
    let (_dir, root) = fs_tree();
    let root_s = root.to_string_lossy().into_owned();
    let script: Vec<String> = call("read_file", json!({ "path": "docs/note.md" })).into();
    let out = drive(
        &p,
        Client::TsV1,
        &["fs", "--root", &root_s, "--read-only"],
        &script,
        "moat-fs",
    );
    expect_hints(
        &out,
        &[
            ("list_directory", true, false),
            ("read_file", true, false),
            ("search_files", true, false),
            ("stat", true, false),
        ],
    );
    assert_eq!(text(result(&out, 0)), NOTE);
}

/// `resources/read` of `uri` by TS 1.x against `moat serve SERVER_ARGS...`, expected to
/// fail: the client exits 1 with the server's JSON-RPC error on stderr, which is returned.
fn failed_read(peers: &Peers, server_args: &[&str], uri: &str) -> String {
    let mut argv = Client::TsV1.argv(peers);
    argv.extend(read(uri));
    argv.extend(["--timeout".into(), CLIENT_TIMEOUT.into(), "--".into()]);
    argv.push(env!("CARGO_BIN_EXE_moat").into());
    argv.push("serve".into());
    argv.extend(server_args.iter().map(|s| (*s).to_owned()));
    let run = run(&argv);
    assert_eq!(
        run.code,
        Some(1),
        "the read should fail\n{}",
        run.describe()
    );
    assert!(
        run.stdout.trim().is_empty(),
        "nothing may be printed as read\n{}",
        run.describe()
    );
    run.stderr
}

/// Resource reads that would leave the root fail, whatever the URI spells: a path elsewhere,
/// a symlink out, a `..`. The error reaches the foreign client; the content does not.
#[test]
fn fs_resource_reads_outside_the_root_fail_ts_v1() {
    let Some(p) = peers() else { return };
    let (dir, root) = fs_tree();
    let root_s = root.to_string_lossy().into_owned();
    let args = ["fs", "--root", root_s.as_str()];
    let outside = format!(
        "file://{}",
        dir.path()
            .canonicalize()
            .expect("canonical dir")
            .join("secret.txt")
            .display()
    );
    for (uri, why) in [
        ("file:///etc/passwd".to_owned(), "outside the root"),
        (outside, "outside the root"),
        (
            format!("file://{root_s}/escape/passwd"),
            "outside the root through a symbolic link",
        ),
        (
            format!("file://{root_s}/../secret.txt"),
            "`..` is not allowed",
        ),
    ] {
        let err = failed_read(&p, &args, &uri);
        assert!(err.contains(why), "{uri}: {err}");
        assert!(
            !err.contains("root:x:") && !err.contains("root:*:") && !err.contains("outside\n"),
            "{uri}: content leaked: {err}"
        );
    }
}

/// A URI that matches the server's template but names nothing (a missing file, an
/// unknown table) should be answered `-32002` (Resource not found) on the handshake
/// revisions, as a URI no resource matches is.
#[test]
fn resource_read_of_a_missing_resource_is_resource_not_found() {
    let Some(p) = peers() else { return };
    let (_dir, root) = fs_tree();
    let root_s = root.to_string_lossy().into_owned();
    let err = failed_read(
        &p,
        &["fs", "--root", &root_s],
        &format!("file://{root_s}/missing.txt"),
    );
    assert!(err.contains("code -32002"), "{err}");
    let (_dir, db) = shop_db();
    let db_s = db.to_string_lossy().into_owned();
    let err = failed_read(&p, &["sqlite", "--db", &db_s], "sqlite://table/nope");
    assert!(err.contains("code -32002"), "{err}");
}

// ---------------------------------------------------------------------------
// sqlite
// ---------------------------------------------------------------------------

/// A shop: two customers, three orders.
fn shop_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("moat-srvinterop-sqlite-")
        .tempdir()
        .expect("temp dir");
    let path = dir.path().join("shop.db");
    let conn = rusqlite::Connection::open(&path).expect("create db");
    conn.execute_batch(
        "CREATE TABLE customers (
             id INTEGER PRIMARY KEY,
             name TEXT NOT NULL,
             email TEXT UNIQUE
         );
         CREATE TABLE orders (
             id INTEGER PRIMARY KEY,
             customer_id INTEGER NOT NULL REFERENCES customers(id),
             total REAL NOT NULL,
             note TEXT
         );
         CREATE INDEX orders_customer ON orders (customer_id);
         INSERT INTO customers VALUES (1, 'Ada', 'ada@example.com'), (2, 'Grace', NULL);
         INSERT INTO orders VALUES (1, 1, 12.5, NULL), (2, 1, 30.0, 'gift'), (3, 2, 7.25, NULL);",
    )
    .expect("fill db");
    (dir, path)
}

fn customer_names(path: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).expect("open db");
    let mut stmt = conn
        .prepare("SELECT name FROM customers ORDER BY id")
        .expect("prepare");
    stmt.query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

fn sqlite_vs(client: Client) {
    let Some(p) = peers() else { return };
    let (_dir, db) = shop_db();
    let db_s = db.to_string_lossy().into_owned();
    let mut script = Vec::new();
    script.extend(call(
        "query_database",
        json!({
            "sql": "SELECT c.name, count(*) AS orders, sum(o.total) AS spent \
                    FROM customers c JOIN orders o ON o.customer_id = c.id \
                    WHERE o.total > ? GROUP BY c.id ORDER BY c.id",
            "params": [5]
        }),
    ));
    script.extend(call(
        "query_database",
        json!({ "sql": "SELECT id, note FROM orders ORDER BY id", "limit": 2 }),
    ));
    script.extend(call(
        "query_database",
        json!({ "sql": "UPDATE customers SET name = ? WHERE id = 1", "params": ["Mallory"] }),
    ));
    script.extend(call("describe_table", json!({ "table": "orders" })));
    script.extend(call("describe_table", json!({ "table": "invoices" })));
    script.extend(read("sqlite://schema"));
    script.extend(read("sqlite://table/customers"));
    let out = drive(
        &p,
        client,
        &["sqlite", "--db", &db_s],
        &script,
        "moat-sqlite",
    );

    expect_hints(
        &out,
        &[
            ("query_database", true, false),
            ("describe_table", true, false),
        ],
    );
    for tool in array(&out, "toolDetails") {
        assert_eq!(
            tool.pointer("/outputSchema/type").and_then(Value::as_str),
            Some("object"),
            "outputSchema: {tool:#}"
        );
    }
    assert_eq!(
        strings(&out, "resources", Some("uri")),
        [
            "sqlite://schema",
            "sqlite://table/customers",
            "sqlite://table/orders"
        ]
    );
    assert_eq!(
        strings(&out, "resourceTemplates", Some("uriTemplate")),
        ["sqlite://table/{name}"]
    );

    // A join with a bound parameter: rows as JSON, in column order, typed.
    let q = structured(result(&out, 0));
    assert_eq!(q["columns"], json!(["name", "orders", "spent"]), "{q:#}");
    assert_eq!(
        q["rows"],
        json!([["Ada", 2, 42.5], ["Grace", 1, 7.25]]),
        "{q:#}"
    );
    assert_eq!(q["row_count"], 2);
    assert_eq!(q["truncated"], false);
    assert!(q["elapsed_ms"].is_u64(), "{q:#}");
    let table = text(result(&out, 0));
    assert!(table.contains("Ada") && table.contains("42.5"), "{table}");

    // The row limit: two of three rows, NULL as null, and said to be truncated.
    let q = structured(result(&out, 1));
    assert_eq!(q["rows"], json!([[1, null], [2, "gift"]]), "{q:#}");
    assert_eq!(q["row_count"], 2);
    assert_eq!(q["truncated"], true);

    // A write: refused by the database, seen as a tool error, nothing changed.
    refused(result(&out, 2), "UPDATE of customers");
    assert_eq!(customer_names(&db), ["Ada", "Grace"]);

    // describe_table.
    let d = structured(result(&out, 3));
    assert_eq!(d["table"], "orders");
    assert_eq!(d["kind"], "table");
    assert_eq!(d["row_count"], 3);
    let columns: Vec<&str> = array(d, "columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(columns, ["id", "customer_id", "total", "note"], "{d:#}");
    assert_eq!(d["foreign_keys"][0]["references"], "customers", "{d:#}");
    assert_eq!(d["foreign_keys"][0]["columns"], json!(["customer_id"]));
    assert_eq!(d["indexes"][0]["name"], "orders_customer", "{d:#}");
    // An unknown table: the error names the ones there are.
    refused(result(&out, 4), "customers, orders");

    // The schema resource: every CREATE statement.
    let schema = read_content(&out, 0);
    assert_eq!(schema["uri"], "sqlite://schema");
    let sql = schema["text"].as_str().unwrap_or_default();
    for create in [
        "CREATE TABLE customers",
        "CREATE TABLE orders",
        "CREATE INDEX orders_customer",
    ] {
        assert!(sql.contains(create), "{create} missing from {sql}");
    }
    let customers = read_content(&out, 1);
    assert_eq!(customers["uri"], "sqlite://table/customers");
    assert!(
        customers["text"]
            .as_str()
            .is_some_and(|t| t.contains("email TEXT")),
        "{customers:#}"
    );
}

#[test]
fn sqlite_py_auto() {
    sqlite_vs(Client::PyAuto);
}

#[test]
fn sqlite_py_2025_06_18() {
    sqlite_vs(Client::PyPinned);
}

#[test]
fn sqlite_ts_v1_default() {
    sqlite_vs(Client::TsV1);
}

#[test]
fn sqlite_ts_v2_auto() {
    sqlite_vs(Client::TsV2);
}

// ---------------------------------------------------------------------------
// exec
// ---------------------------------------------------------------------------

fn exec_vs(client: Client) {
    let Some(p) = peers() else { return };
    let dir = tempfile::Builder::new()
        .prefix("moat-srvinterop-exec-")
        .tempdir()
        .expect("temp dir");
    let work = dir.path().canonicalize().expect("canonical dir");
    std::fs::write(work.join("data.txt"), "payload\n").expect("write data.txt");
    let work_s = work.to_string_lossy().into_owned();
    let mut script = Vec::new();
    script.extend(call("run_command", json!({ "argv": ["/bin/echo", "hi"] })));
    script.extend(call("run_command", json!({ "argv": ["sh", "-c", "x"] })));
    script.extend(call(
        "run_command",
        json!({ "argv": ["sleep", "30"], "timeout_secs": 0.5 }),
    ));
    script.extend(call("run_command", json!({ "argv": ["cat", "data.txt"] })));
    script.extend(call(
        "run_command",
        json!({ "argv": ["cat", "missing.txt"] }),
    ));
    let started = Instant::now();
    let out = drive(
        &p,
        client,
        &["exec", "--ro", &work_s, "--cwd", &work_s],
        &script,
        "moat-exec",
    );
    // The sleep was killed at its timeout, not waited out.
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "took {:?}",
        started.elapsed()
    );

    expect_hints(&out, &[("run_command", false, true)]);
    let tool = &array(&out, "toolDetails")[0];
    assert_eq!(
        tool.pointer("/annotations/openWorldHint"),
        Some(&json!(false)),
        "no network, so not open-world: {tool:#}"
    );
    assert_eq!(
        tool.pointer("/inputSchema/required"),
        Some(&json!(["argv"])),
        "{tool:#}"
    );
    assert!(out["resources"].is_null(), "no resources: {out:#}");

    // echo: exit 0 and its stdout, in structuredContent.
    let r = structured(result(&out, 0));
    assert_eq!(r["stdout"], "hi\n", "{r:#}");
    assert_eq!(r["stderr"], "");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["signal"], Value::Null);
    assert_eq!(r["timed_out"], false);
    assert_eq!(r["limit_hit"], Value::Null);
    assert_eq!(r["truncated"], false);

    // A shell: refused before anything runs.
    refused(result(&out, 1), "sh is a shell");

    // The timeout: killed, and said so (a result, not a tool error).
    let r = structured(result(&out, 2));
    assert_eq!(r["timed_out"], true, "{r:#}");
    assert_eq!(r["limit_hit"], "timeout");
    assert_eq!(r["exit_code"], Value::Null);
    assert_eq!(r["signal"], 9);
    assert!(r["wall_ms"].as_u64().is_some_and(|ms| ms < 10_000), "{r:#}");

    // The working directory is --cwd, readable.
    assert_eq!(structured(result(&out, 3))["stdout"], "payload\n");
    // A failing command is a result with its status and stderr.
    let r = structured(result(&out, 4));
    assert_eq!(r["exit_code"], 1, "{r:#}");
    assert!(
        r["stderr"]
            .as_str()
            .is_some_and(|e| e.contains("missing.txt")),
        "{r:#}"
    );
}

#[test]
fn exec_py_auto() {
    exec_vs(Client::PyAuto);
}

#[test]
fn exec_py_2025_06_18() {
    exec_vs(Client::PyPinned);
}

#[test]
fn exec_ts_v1_default() {
    exec_vs(Client::TsV1);
}

#[test]
fn exec_ts_v2_auto() {
    exec_vs(Client::TsV2);
}
