//! The SQLite server, driven in-process by a real moat client: every form of write is
//! refused and leaves the file as it was (checked from a separate, writable connection),
//! runaway statements stop at the timeout or on cancellation, results are limited, and
//! the schema is there to read, describe and complete.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use moat::transport::{Connection, Limits};
use moat::types::{
    CallToolResult, CompleteArgument, CompleteRequestParams, CompletionReference, ContentBlock,
    ResourceContents, ResourceTemplateReference,
};
use moat::{Client, RequestOptions};
use moat_servers::sqlite::{
    QueryResult, SCHEMA_URI, SqliteError, SqliteOptions, TABLE_TEMPLATE, TableDescription, server,
    table_uri,
};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::BufReader;

const ITEMS: i64 = 1000;

/// A database with a few related tables, a view, an index, a table whose name needs
/// quoting, and `ITEMS` rows in `items`.
fn sample() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("shop.db");
    let conn = rusqlite::Connection::open(&path).expect("create");
    conn.execute_batch(
        "CREATE TABLE items (
             id INTEGER PRIMARY KEY,
             name TEXT NOT NULL,
             qty INTEGER NOT NULL DEFAULT 0,
             price REAL,
             data BLOB
         );
         CREATE TABLE orders (
             id INTEGER PRIMARY KEY,
             item_id INTEGER NOT NULL REFERENCES items (id) ON DELETE CASCADE,
             placed TEXT
         );
         CREATE INDEX orders_by_item ON orders (item_id);
         CREATE TABLE \"order lines\" (order_id INTEGER, line TEXT, UNIQUE (order_id, line));
         CREATE VIEW cheap AS SELECT id, name FROM items WHERE price < 1.0;
         BEGIN;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
           INSERT INTO items (name, qty, price) SELECT 'item ' || i, i % 7, i / 10.0 FROM n;
         UPDATE items SET name = 'widget', data = x'00ff10' WHERE id = 3;
         INSERT INTO orders (item_id, placed) VALUES (3, '2025-01-01'), (4, '2025-01-02');
         COMMIT;",
    )
    .expect("fill");
    (dir, path)
}

/// Everything a write could change, read through a separate writable connection.
#[derive(Debug, PartialEq)]
struct Snapshot {
    schema: Vec<(String, String, Option<String>)>,
    items: i64,
    orders: i64,
    checksum: String,
    user_version: i64,
    journal_mode: String,
    files: Vec<String>,
}

fn snapshot(path: &Path) -> Snapshot {
    let conn = rusqlite::Connection::open(path).expect("open writable");
    let mut stmt = conn
        .prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name")
        .expect("prepare");
    let schema = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("schema")
        .collect::<Result<_, _>>()
        .expect("schema rows");
    let one = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).expect(sql) };
    let checksum = conn
        .query_row(
            "SELECT group_concat(id || ':' || name || ':' || qty, ',') FROM items",
            [],
            |r| r.get(0),
        )
        .expect("checksum");
    let journal_mode = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("journal_mode");
    let mut files: Vec<String> = std::fs::read_dir(path.parent().expect("dir"))
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with("-journal"))
        .collect();
    files.sort();
    Snapshot {
        schema,
        items: one("SELECT count(*) FROM items"),
        orders: one("SELECT count(*) FROM orders"),
        checksum,
        user_version: one("PRAGMA user_version"),
        journal_mode,
        files,
    }
}

async fn connect(path: &Path, options: SqliteOptions) -> Client {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    server(path.to_owned(), options)
        .expect("server")
        .start(Connection::from_lines(
            BufReader::new(ar),
            aw,
            Limits::default(),
        ));
    Client::builder()
        .request_timeout(Some(Duration::from_secs(20)))
        .connect(Connection::from_lines(
            BufReader::new(br),
            bw,
            Limits::default(),
        ))
        .await
        .expect("connect")
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn query(client: &Client, args: Value) -> CallToolResult {
    client
        .call_tool("query_database", args)
        .await
        .expect("call")
}

/// A query that must succeed, decoded from `structuredContent`.
async fn rows(client: &Client, args: Value) -> (QueryResult, String) {
    let result = query(client, args.clone()).await;
    assert!(!result.is_error(), "{args}: {}", text(&result));
    let structured = result.structured_content.clone().expect("structured");
    (
        serde_json::from_value(structured).expect("QueryResult"),
        text(&result),
    )
}

/// Run `sql`, which must be refused; returns the error text.
async fn refused(client: &Client, sql: &str) -> String {
    let result = query(client, json!({ "sql": sql })).await;
    let message = text(&result);
    assert!(result.is_error(), "{sql} was not refused: {message}");
    assert!(result.structured_content.is_none(), "{sql}");
    message
}

fn small() -> SqliteOptions {
    let mut options = SqliteOptions::default();
    options.statement_timeout = Duration::from_millis(300);
    options
}

#[tokio::test]
async fn writes_in_every_form_are_refused_and_change_nothing() {
    let (dir, path) = sample();
    let before = snapshot(&path);
    let client = connect(&path, small()).await;
    let attached = dir.path().join("attached.db");
    let copy = dir.path().join("copy.db");
    let attach = format!("ATTACH DATABASE '{}' AS y", attached.display());
    let vacuum_into = format!("VACUUM INTO '{}'", copy.display());
    let writes = [
        "INSERT INTO items (name) VALUES ('x')",
        "INSERT INTO items (name) VALUES ('x') RETURNING id",
        "REPLACE INTO items (id, name) VALUES (1, 'x')",
        "UPDATE items SET qty = qty + 1",
        "DELETE FROM orders",
        "DROP TABLE orders",
        "DROP VIEW cheap",
        "DROP INDEX orders_by_item",
        "CREATE TABLE t (a)",
        "CREATE TEMP TABLE t (a)",
        "CREATE INDEX i ON items (qty)",
        "CREATE VIEW v AS SELECT 1",
        "CREATE TRIGGER tr AFTER INSERT ON items BEGIN DELETE FROM orders; END",
        "ALTER TABLE items ADD COLUMN extra TEXT",
        "ALTER TABLE items RENAME TO goods",
        attach.as_str(),
        "ATTACH DATABASE ':memory:' AS m",
        "DETACH DATABASE main",
        "PRAGMA user_version = 5",
        "PRAGMA journal_mode = delete",
        "PRAGMA journal_mode = wal",
        "PRAGMA query_only = OFF",
        "PRAGMA writable_schema = ON",
        vacuum_into.as_str(),
        "VACUUM",
        "WITH x AS (SELECT 1) INSERT INTO items (name) SELECT 'x' FROM x",
        "WITH x AS (SELECT 1) DELETE FROM orders",
        "BEGIN",
        "BEGIN IMMEDIATE",
        "COMMIT",
        "SAVEPOINT s",
        "ANALYZE",
        "REINDEX",
        "SELECT load_extension('/nonexistent/evil')",
        "SELECT load_extension('/nonexistent/evil', 'entry')",
        "SELECT writefile('/tmp/moat-sqlite-test', 'x')",
        "SELECT 1; DROP TABLE orders",
        "SELECT 1; SELECT 2",
    ];
    for sql in writes {
        refused(&client, sql).await;
    }
    // The messages say what to do, and name what was refused.
    let insert = refused(&client, "INSERT INTO items (name) VALUES ('x')").await;
    assert!(insert.contains("INSERT into items"), "{insert}");
    assert!(insert.contains("read-only"), "{insert}");
    let pragma = refused(&client, "PRAGMA user_version = 5").await;
    assert!(pragma.contains("PRAGMA user_version = 5"), "{pragma}");
    let drop = refused(&client, "SELECT 1; DROP TABLE orders").await;
    assert!(drop.contains("a change to the schema"), "{drop}");
    let multi = refused(&client, "SELECT 1; SELECT 2").await;
    assert!(multi.contains("one statement"), "{multi}");
    // After ATTACH was refused, there is no `y` to write into either.
    refused(&client, "CREATE TABLE y.t (a)").await;
    refused(&client, "INSERT INTO y.t VALUES (1)").await;

    assert!(!attached.exists(), "ATTACH created {}", attached.display());
    assert!(!copy.exists(), "VACUUM INTO wrote {}", copy.display());
    assert!(!Path::new("/tmp/moat-sqlite-test").exists());
    assert_eq!(snapshot(&path), before);

    // Reads still work on the same connections afterwards.
    let (r, _) = rows(&client, json!({ "sql": "SELECT count(*) AS n FROM items" })).await;
    assert_eq!(r.rows, vec![vec![json!(ITEMS)]]);
    // And read-only pragmas answer, as pragmas and as table-valued functions.
    let (r, _) = rows(&client, json!({ "sql": "PRAGMA user_version" })).await;
    assert_eq!(r.rows, vec![vec![json!(0)]]);
    let (r, _) = rows(&client, json!({ "sql": "PRAGMA table_info(items)" })).await;
    assert_eq!(r.row_count, 5);
    let (r, _) = rows(
        &client,
        json!({ "sql": "SELECT name FROM pragma_table_info('orders') ORDER BY cid" }),
    )
    .await;
    assert_eq!(r.rows.len(), 3);
}

#[tokio::test]
async fn a_runaway_statement_is_stopped_by_the_timeout() {
    let (_dir, path) = sample();
    let client = connect(&path, small()).await;
    let started = Instant::now();
    let message = refused(
        &client,
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
    )
    .await;
    let took = started.elapsed();
    assert!(message.contains("timeout"), "{message}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(took >= Duration::from_millis(250), "took {took:?}");
    // The connection is usable again.
    let (r, _) = rows(&client, json!({ "sql": "SELECT 1 AS one" })).await;
    assert_eq!(r.rows, vec![vec![json!(1)]]);
}

#[tokio::test]
async fn a_cancelled_statement_frees_its_connection() {
    let (_dir, path) = sample();
    let mut options = SqliteOptions::default();
    options.statement_timeout = Duration::from_secs(30);
    options.connections = 1;
    let client = connect(&path, options).await;
    // The client gives up after 200 ms and sends notifications/cancelled.
    let runaway = json!({ "sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c" });
    let gave_up = client
        .call_tool_with(
            "query_database",
            runaway,
            RequestOptions::default().timeout(Duration::from_millis(200)),
        )
        .await;
    assert!(gave_up.is_err(), "{gave_up:?}");
    // With one connection, this waits for the runaway: it answers well before the 30 s
    // timeout only because the cancellation interrupted it.
    let started = Instant::now();
    let (r, _) = rows(&client, json!({ "sql": "SELECT 2 AS two" })).await;
    assert_eq!(r.rows, vec![vec![json!(2)]]);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn rows_are_limited_and_truncation_is_reported() {
    let (_dir, path) = sample();
    let mut options = small();
    options.default_rows = 100;
    options.max_rows = 300;
    let client = connect(&path, options).await;

    let (r, text) = rows(
        &client,
        json!({ "sql": "SELECT id FROM items ORDER BY id" }),
    )
    .await;
    assert_eq!((r.row_count, r.rows.len(), r.truncated), (100, 100, true));
    assert!(text.contains("truncated"), "{text}");
    let (r, _) = rows(
        &client,
        json!({ "sql": "SELECT id FROM items", "limit": 10 }),
    )
    .await;
    assert_eq!((r.row_count, r.truncated), (10, true));
    let (r, text) = rows(
        &client,
        json!({ "sql": "SELECT id FROM items", "limit": 100000 }),
    )
    .await;
    assert_eq!((r.row_count, r.truncated), (300, true));
    assert!(text.contains("300-row maximum"), "{text}");
    let (r, text) = rows(
        &client,
        json!({ "sql": "SELECT id FROM items WHERE id <= 5" }),
    )
    .await;
    assert_eq!((r.row_count, r.truncated), (5, false));
    assert!(text.contains("(5 rows"), "{text}");
    // Exactly the limit is not a truncation.
    let (r, _) = rows(
        &client,
        json!({ "sql": "SELECT id FROM items WHERE id <= 10", "limit": 10 }),
    )
    .await;
    assert_eq!((r.row_count, r.truncated), (10, false));
    let zero = query(&client, json!({ "sql": "SELECT 1", "limit": 0 })).await;
    assert!(zero.is_error());

    // The output size cap cuts off rows too.
    let mut options = small();
    options.max_output_bytes = 10_000;
    let client = connect(&path, options).await;
    let (r, text) = rows(
        &client,
        json!({ "sql": "SELECT printf('%.1000c', 'x') AS big FROM items", "limit": 100 }),
    )
    .await;
    assert!(r.truncated && r.row_count < 20, "{}", r.row_count);
    assert!(text.contains("output cap"), "{text}");
}

#[tokio::test]
async fn queries_take_parameters_and_return_text_and_structured_rows() {
    let (_dir, path) = sample();
    let client = connect(&path, small()).await;
    let (r, text) = rows(
        &client,
        json!({
            "sql": "SELECT id, name, qty, price, data, NULL AS empty FROM items WHERE name = ? AND qty >= ?",
            "params": ["widget", 2],
        }),
    )
    .await;
    assert_eq!(r.columns, ["id", "name", "qty", "price", "data", "empty"]);
    let blob = STANDARD.encode([0x00, 0xff, 0x10]);
    assert_eq!(
        r.rows,
        vec![vec![
            json!(3),
            json!("widget"),
            json!(3),
            json!(0.3),
            json!(blob),
            Value::Null
        ]]
    );
    assert_eq!((r.row_count, r.truncated), (1, false));
    assert!(
        text.starts_with("id | name   | qty | price | data"),
        "{text}"
    );
    assert!(text.contains("widget"), "{text}");
    assert!(text.contains("NULL"), "{text}");

    // Numbered and named placeholders, booleans and nulls.
    let (r, _) = rows(
        &client,
        json!({ "sql": "SELECT ?1 + 1, ?2 IS NULL, ?3", "params": [41, null, true] }),
    )
    .await;
    assert_eq!(r.rows, vec![vec![json!(42), json!(1), json!(1)]]);
    // A CTE, recursive or not, is a read.
    let (r, _) = rows(
        &client,
        json!({ "sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4) SELECT sum(i) FROM n" }),
    )
    .await;
    assert_eq!(r.rows, vec![vec![json!(10)]]);

    let wrong = query(&client, json!({ "sql": "SELECT ?", "params": [] })).await;
    assert!(
        wrong.is_error() && text_of(&wrong).contains("1 parameter"),
        "{}",
        text_of(&wrong)
    );
    let nested = query(&client, json!({ "sql": "SELECT ?", "params": [[1]] })).await;
    assert!(nested.is_error() && text_of(&nested).contains("params[0]"));
    let syntax = query(&client, json!({ "sql": "SELEKT 1" })).await;
    assert!(syntax.is_error() && text_of(&syntax).contains("syntax error"));
    let missing = query(&client, json!({ "sql": "SELECT * FROM nowhere" })).await;
    assert!(missing.is_error() && text_of(&missing).contains("no such table"));
}

fn text_of(result: &CallToolResult) -> String {
    text(result)
}

#[tokio::test]
async fn tools_declare_read_only_annotations_and_output_schemas() {
    let (_dir, path) = sample();
    let client = connect(&path, small()).await;
    let tools = client.list_all_tools().await.expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["query_database", "describe_table"]);
    for tool in &tools {
        let a = tool.annotations.as_ref().expect("annotations");
        assert_eq!(a.read_only_hint, Some(true), "{}", tool.name);
        assert_eq!(a.destructive_hint, Some(false), "{}", tool.name);
        assert_eq!(a.open_world_hint, Some(false), "{}", tool.name);
        assert!(tool.title.is_some());
        let out = tool.output_schema.as_ref().expect("outputSchema");
        assert_eq!(out["type"], "object");
    }
    let q = &tools[0];
    for field in ["columns", "rows", "row_count", "truncated", "elapsed_ms"] {
        assert!(
            q.output_schema.as_ref().unwrap()["properties"]
                .get(field)
                .is_some(),
            "{field}"
        );
    }
    assert_eq!(q.input_schema["properties"]["limit"]["maximum"], 5000);
    assert_eq!(q.input_schema["required"], json!(["sql"]));
}

#[tokio::test]
async fn describe_table_gives_columns_indexes_foreign_keys_and_count() {
    let (_dir, path) = sample();
    let client = connect(&path, small()).await;
    let result = client
        .call_tool("describe_table", json!({ "table": "ORDERS" }))
        .await
        .expect("call");
    assert!(!result.is_error(), "{}", text(&result));
    let d: TableDescription =
        serde_json::from_value(result.structured_content.clone().expect("structured"))
            .expect("TableDescription");
    assert_eq!((d.table.as_str(), d.kind.as_str()), ("orders", "table"));
    assert_eq!(d.row_count, Some(2));
    let cols: Vec<(&str, &str, bool, i64)> = d
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.declared_type.as_str(), c.notnull, c.pk))
        .collect();
    assert_eq!(
        cols,
        [
            ("id", "INTEGER", false, 1),
            ("item_id", "INTEGER", true, 0),
            ("placed", "TEXT", false, 0)
        ]
    );
    assert_eq!(d.indexes.len(), 1);
    assert_eq!(d.indexes[0].name, "orders_by_item");
    assert_eq!(d.indexes[0].columns, ["item_id"]);
    assert_eq!(d.foreign_keys.len(), 1);
    assert_eq!(d.foreign_keys[0].references, "items");
    assert_eq!(d.foreign_keys[0].on_delete, "CASCADE");
    assert!(text(&result).contains("CREATE TABLE orders"));

    let items = client
        .call_tool("describe_table", json!({ "table": "items" }))
        .await
        .expect("call");
    let d: TableDescription =
        serde_json::from_value(items.structured_content.clone().expect("structured")).unwrap();
    assert_eq!(d.row_count, Some(ITEMS));
    assert_eq!(d.columns[2].default.as_deref(), Some("0"));

    let unknown = client
        .call_tool("describe_table", json!({ "table": "nope" }))
        .await
        .expect("call");
    assert!(unknown.is_error());
    assert!(
        text(&unknown).contains("cheap, items, order lines, orders"),
        "{}",
        text(&unknown)
    );
}

#[tokio::test]
async fn every_table_has_a_schema_resource_and_the_template_completes_names() {
    let (_dir, path) = sample();
    let client = connect(&path, small()).await;
    let resources = client.list_all_resources().await.expect("resources");
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            SCHEMA_URI,
            "sqlite://table/cheap",
            "sqlite://table/items",
            "sqlite://table/order%20lines",
            "sqlite://table/orders",
        ]
    );
    assert_eq!(table_uri("order lines"), "sqlite://table/order%20lines");

    let read = |uri: String| {
        let client = &client;
        async move {
            let result = client.read_resource(&uri).await.expect("read");
            match &result.contents[0] {
                ResourceContents::Text(t) => t.text.clone(),
                other => panic!("{other:?}"),
            }
        }
    };
    let schema = read(SCHEMA_URI.to_owned()).await;
    assert!(schema.contains("CREATE TABLE items"), "{schema}");
    assert!(schema.contains("CREATE VIEW cheap"), "{schema}");
    assert!(schema.contains("CREATE INDEX orders_by_item"), "{schema}");
    let lines = read(table_uri("order lines")).await;
    assert!(lines.contains("CREATE TABLE \"order lines\""), "{lines}");
    assert!(lines.contains("UNIQUE"), "{lines}");

    // The template reads any table, now, by name.
    let templates = client
        .list_all_resource_templates()
        .await
        .expect("templates");
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, TABLE_TEMPLATE);
    let items = read("sqlite://table/ITEMS".to_owned()).await;
    assert!(items.contains("name TEXT NOT NULL"), "{items}");
    assert!(client.read_resource("sqlite://table/nope").await.is_err());

    let complete = |value: &str| {
        let client = &client;
        let params = CompleteRequestParams {
            reference: CompletionReference::Resource(ResourceTemplateReference {
                uri: TABLE_TEMPLATE.to_owned(),
            }),
            argument: CompleteArgument {
                name: "name".to_owned(),
                value: value.to_owned(),
            },
            context: None,
            meta: None,
        };
        async move {
            client
                .complete(params)
                .await
                .expect("complete")
                .completion
                .values
        }
    };
    assert_eq!(complete("or").await, ["order lines", "orders"]);
    assert_eq!(complete("I").await, ["items"]);
    assert_eq!(complete("").await.len(), 4);
    assert!(complete("zzz").await.is_empty());
}

#[tokio::test]
async fn missing_and_broken_files_are_refused_at_startup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.db");
    let err = server(missing.clone(), SqliteOptions::default()).expect_err("missing");
    assert!(matches!(err, SqliteError::NotFound { .. }), "{err}");
    // A read-only open must not have created it.
    assert!(!missing.exists());

    let junk = dir.path().join("junk.db");
    std::fs::write(
        &junk,
        b"this is not a database, just some text that is long enough",
    )
    .expect("write");
    let err = server(junk, SqliteOptions::default()).expect_err("junk");
    assert!(matches!(err, SqliteError::Open { .. }), "{err}");

    let (_dir, path) = sample();
    let mut options = SqliteOptions::default();
    options.default_rows = options.max_rows + 1;
    let err = server(path, options).expect_err("options");
    assert!(matches!(err, SqliteError::Options(_)), "{err}");
}
