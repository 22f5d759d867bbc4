//! Malformed and out-of-place input over real stdio against `moat serve everything`.
//!
//! Each row writes raw bytes to the server's stdin and asserts the exact JSON-RPC answer
//! (error code and id), or silence where JSON-RPC/MCP say to answer nothing, and then that
//! the server still serves the next valid request (`ping` with a fresh id, and `tools/list`
//! once initialized). The same process takes every row of a phase, so damage accumulates:
//! at the end it must still be alive and exit cleanly when its stdin closes.

use std::panic::{self, AssertUnwindSafe};
use std::process::Child;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use serde_json::{Value, json};

mod support;
use support::Lines;

/// How long an answer may take.
const REPLY: Duration = Duration::from_secs(10);
/// How long to listen to make sure nothing is said.
const SILENCE: Duration = Duration::from_millis(300);
/// The default framing limit of the stdio transport (`moat serve` has no flag to change it).
const DEFAULT_MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// A `moat serve everything` process and its stdio.
struct Moat {
    child: Child,
    io: Lines,
    probes: u64,
}

impl Moat {
    fn spawn() -> Moat {
        let (child, io) = support::serve_everything();
        Moat {
            child,
            io,
            probes: 0,
        }
    }

    /// Write `bytes` and a newline.
    fn send(&mut self, bytes: &[u8]) {
        self.io.send(bytes);
    }

    fn send_json(&mut self, v: &Value) {
        self.io.send_json(v);
    }

    /// The next line the server writes, parsed.
    fn recv(&self, within: Duration, what: &str) -> Value {
        match self.io.recv(within) {
            Ok(line) => serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("{what}: the server wrote a non-JSON line ({e}): {line}")
            }),
            Err(RecvTimeoutError::Timeout) => panic!("{what}: no answer within {within:?}"),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("{what}: the server closed its stdout")
            }
        }
    }

    fn expect_silence(&self, what: &str) {
        match self.io.recv(SILENCE) {
            Ok(line) => panic!("{what}: expected no answer, got {line}"),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                panic!("{what}: the server closed its stdout")
            }
        }
    }

    /// Send a request with a fresh id; the very next line must be its answer.
    fn request(&mut self, method: &str, params: Option<Value>, what: &str) -> Value {
        self.probes += 1;
        let id = format!("probe-{}", self.probes);
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.send_json(&msg);
        let answer = self.recv(REPLY, &format!("{what}: {method} afterwards"));
        assert_eq!(
            answer["id"], id,
            "{what}: the next line should answer {method} {id}, got {answer}"
        );
        answer
    }

    /// The server still serves: `ping` answers `{}`; once initialized, `tools/list` lists tools.
    fn still_serves(&mut self, active: bool, what: &str) {
        let pong = self.request("ping", None, what);
        assert_eq!(pong["result"], json!({}), "{what}: ping afterwards: {pong}");
        if active {
            let list = self.request("tools/list", None, what);
            let tools = list["result"]["tools"].as_array();
            assert!(
                tools.is_some_and(|t| t.iter().any(|t| t["name"] == "test_simple_text")),
                "{what}: tools/list afterwards: {list}"
            );
        }
    }

    fn initialize(&mut self, version: &str) {
        let init = self.request(
            "initialize",
            Some(json!({
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "bad-input-test", "version": "0"},
            })),
            "initialize",
        );
        assert_eq!(
            init["result"]["protocolVersion"], version,
            "initialize: {init}"
        );
    }

    fn initialized(&mut self) {
        self.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    /// Still running; closing stdin makes it exit, successfully and promptly.
    fn close_and_wait(mut self) {
        assert!(
            self.child.try_wait().expect("try_wait").is_none(),
            "the server died during the test"
        );
        self.io.close();
        let Some(status) = support::wait_exit(&mut self.child, Duration::from_secs(5)) else {
            panic!("the server did not exit within 5 s of its stdin closing");
        };
        assert!(
            status.success(),
            "exit after stdin closed: {status} (expected success)"
        );
    }
}

impl Drop for Moat {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What a row must produce.
enum Expect {
    /// One error response with this code, addressed to this id (`null` when unreadable).
    Error(i64, Value),
    /// A successful, empty result (`{}`) addressed to this id.
    Empty(Value),
    /// Nothing at all.
    Silence,
    /// One batch answer: an array with these (id, outcome) pairs, in order;
    /// `Ok` means a result, `Err(code)` an error.
    Batch(Vec<(Value, Result<(), i64>)>),
}

struct Row {
    name: &'static str,
    input: Vec<u8>,
    expect: Expect,
}

fn row(name: &'static str, input: impl Into<Vec<u8>>, expect: Expect) -> Row {
    Row {
        name,
        input: input.into(),
        expect,
    }
}

fn deep(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// Run the rows in order against one server; after each, check it still serves. Every row
/// runs even if an earlier one failed; the failures are reported together at the end.
fn run(moat: &mut Moat, rows: Vec<Row>, active: bool) -> Vec<String> {
    let mut failures = Vec::new();
    for row in rows {
        let what = row.name;
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| check_row(moat, row, active)));
        if let Err(e) = outcome {
            let message = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failures.push(format!("row {what:?}: {message}"));
            // Resynchronize: drop whatever else the row provoked.
            while moat.io.recv(SILENCE).is_ok() {}
            assert!(
                moat.child.try_wait().expect("try_wait").is_none(),
                "the server died at row {what:?}"
            );
        }
    }
    failures
}

fn check_row(moat: &mut Moat, row: Row, active: bool) {
    let what = row.name;
    moat.send(&row.input);
    match row.expect {
        Expect::Error(code, id) => {
            let answer = moat.recv(REPLY, what);
            assert_eq!(answer["jsonrpc"], "2.0", "{what}: {answer}");
            assert_eq!(
                answer["error"]["code"], code,
                "{what}: expected error {code}, got {answer}"
            );
            assert_eq!(
                answer.get("id"),
                Some(&id),
                "{what}: expected the error addressed to id {id}, got {answer}"
            );
            assert!(
                answer["error"]["message"].is_string(),
                "{what}: the error has no message: {answer}"
            );
            assert!(
                answer.get("result").is_none(),
                "{what}: both error and result: {answer}"
            );
        }
        Expect::Empty(id) => {
            let answer = moat.recv(REPLY, what);
            assert_eq!(
                answer,
                json!({"jsonrpc": "2.0", "id": id, "result": {}}),
                "{what}"
            );
        }
        Expect::Silence => moat.expect_silence(what),
        Expect::Batch(want) => {
            let answer = moat.recv(REPLY, what);
            let items = answer
                .as_array()
                .unwrap_or_else(|| panic!("{what}: expected an array, got {answer}"));
            assert_eq!(items.len(), want.len(), "{what}: {answer}");
            for (item, (id, outcome)) in items.iter().zip(&want) {
                assert_eq!(&item["id"], id, "{what}: {answer}");
                match outcome {
                    Ok(()) => assert!(item.get("result").is_some(), "{what}: {item}"),
                    Err(code) => assert_eq!(item["error"]["code"], *code, "{what}: {item}"),
                }
            }
        }
    }
    moat.still_serves(active, what);
}

fn assert_no_failures(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} row(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Rows whose answer does not depend on the lifecycle.
fn envelope_rows() -> Vec<Row> {
    vec![
        row(
            "invalid JSON",
            "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ",
            Expect::Error(PARSE_ERROR, Value::Null),
        ),
        row(
            "not JSON at all",
            "hello",
            Expect::Error(PARSE_ERROR, Value::Null),
        ),
        row(
            "a number",
            "42",
            Expect::Error(INVALID_REQUEST, Value::Null),
        ),
        row(
            "a string",
            "\"x\"",
            Expect::Error(INVALID_REQUEST, Value::Null),
        ),
        row("null", "null", Expect::Error(INVALID_REQUEST, Value::Null)),
        row(
            "missing jsonrpc",
            r#"{"id":101,"method":"ping"}"#,
            Expect::Error(INVALID_REQUEST, json!(101)),
        ),
        row(
            "jsonrpc 1.0",
            r#"{"jsonrpc":"1.0","id":"v1","method":"ping"}"#,
            Expect::Error(INVALID_REQUEST, json!("v1")),
        ),
        row(
            "jsonrpc as a number",
            r#"{"jsonrpc":2.0,"id":102,"method":"ping"}"#,
            Expect::Error(INVALID_REQUEST, json!(102)),
        ),
        row(
            "id null",
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            Expect::Error(INVALID_REQUEST, Value::Null),
        ),
        row(
            "id object",
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            Expect::Error(INVALID_REQUEST, Value::Null),
        ),
        row(
            "id array",
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
            Expect::Error(INVALID_REQUEST, Value::Null),
        ),
        row(
            "id boolean",
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            Expect::Error(INVALID_REQUEST, Value::Null),
        ),
        row(
            "method not a string",
            r#"{"jsonrpc":"2.0","id":103,"method":5}"#,
            Expect::Error(INVALID_REQUEST, json!(103)),
        ),
        row(
            "no method, result or error",
            r#"{"jsonrpc":"2.0","id":104}"#,
            Expect::Error(INVALID_REQUEST, json!(104)),
        ),
        row(
            "params a number",
            r#"{"jsonrpc":"2.0","id":105,"method":"ping","params":3}"#,
            Expect::Error(INVALID_REQUEST, json!(105)),
        ),
        row(
            "params a string",
            r#"{"jsonrpc":"2.0","id":106,"method":"ping","params":"x"}"#,
            Expect::Error(INVALID_REQUEST, json!(106)),
        ),
        row(
            "invalid UTF-8",
            b"\xff\xfe\xfd".to_vec(),
            Expect::Error(PARSE_ERROR, Value::Null),
        ),
        row(
            "invalid UTF-8 inside a string of a valid envelope",
            b"{\"jsonrpc\":\"2.0\",\"id\":107,\"method\":\"ping\",\"params\":{\"a\":\"\xc3\x28\"}}"
                .to_vec(),
            Expect::Error(PARSE_ERROR, Value::Null),
        ),
        row(
            "10,000-deep nesting in params",
            format!(
                r#"{{"jsonrpc":"2.0","id":108,"method":"ping","params":{{"a":{}}}}}"#,
                deep(10_000)
            ),
            Expect::Error(PARSE_ERROR, json!(108)),
        ),
        row(
            "10,000-deep nesting as the whole message",
            deep(10_000),
            Expect::Error(INVALID_REQUEST, Value::Null),
        ),
        row(
            "a response to an id never sent",
            r#"{"jsonrpc":"2.0","id":"never-sent","result":{}}"#,
            Expect::Silence,
        ),
        row(
            "an error response to an id never sent",
            r#"{"jsonrpc":"2.0","id":"never-sent-2","error":{"code":-1,"message":"x"}}"#,
            Expect::Silence,
        ),
        row(
            "an error response with id null",
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
            Expect::Silence,
        ),
        row(
            "a response with both result and error",
            r#"{"jsonrpc":"2.0","id":"never-sent-3","result":{},"error":{"code":-1,"message":"x"}}"#,
            Expect::Silence,
        ),
        row(
            "an unknown notification",
            r#"{"jsonrpc":"2.0","method":"notifications/no_such_thing"}"#,
            Expect::Silence,
        ),
        row(
            "a notification with jsonrpc 1.0",
            r#"{"jsonrpc":"1.0","method":"notifications/no_such_thing"}"#,
            Expect::Silence,
        ),
        row(
            "a notification with params a number",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":3}"#,
            Expect::Silence,
        ),
        row(
            "a cancellation of an unknown request",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nope"}}"#,
            Expect::Silence,
        ),
        row("a blank line", "   ", Expect::Silence),
    ]
}

#[test]
fn bad_input_before_and_after_initialize() {
    let mut moat = Moat::spawn();
    let mut failures = Vec::new();

    // Before initialize: ping is allowed, everything else is refused.
    let mut rows = vec![
        row(
            "ping before initialize",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            Expect::Empty(json!(1)),
        ),
        row(
            "tools/list before initialize",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            Expect::Error(INVALID_REQUEST, json!(2)),
        ),
        row(
            "an unknown method before initialize",
            r#"{"jsonrpc":"2.0","id":3,"method":"no/such/method"}"#,
            Expect::Error(INVALID_REQUEST, json!(3)),
        ),
        row(
            "a batch before initialize",
            r#"[{"jsonrpc":"2.0","id":4,"method":"ping"}]"#,
            Expect::Error(INVALID_REQUEST, Value::Null),
        ),
        row(
            "notifications/initialized before initialize",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            Expect::Silence,
        ),
        row(
            "tools/list after a premature notifications/initialized",
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
            Expect::Error(INVALID_REQUEST, json!(5)),
        ),
    ];
    rows.extend(envelope_rows());
    failures.extend(run(&mut moat, rows, false));

    // The oversized line: the stdio limit is 8 MiB and `moat serve` has no flag for it.
    let mut big = br#"{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":""#.to_vec();
    big.resize(DEFAULT_MAX_MESSAGE_BYTES + 16, b'a');
    big.extend_from_slice(br#""}}"#);
    failures.extend(run(
        &mut moat,
        vec![row(
            "a line over the 8 MiB limit",
            big,
            Expect::Error(INVALID_REQUEST, Value::Null),
        )],
        false,
    ));

    // Between initialize and notifications/initialized.
    moat.initialize("2025-11-25");
    failures.extend(run(
        &mut moat,
        vec![row(
            "tools/list between initialize and initialized",
            r#"{"jsonrpc":"2.0","id":10,"method":"tools/list"}"#,
            Expect::Error(INVALID_REQUEST, json!(10)),
        )],
        false,
    ));
    moat.initialized();

    // Active (2025-11-25).
    let mut rows = vec![
        row(
            "an unknown method",
            r#"{"jsonrpc":"2.0","id":"u-1","method":"no/such/method"}"#,
            Expect::Error(METHOD_NOT_FOUND, json!("u-1")),
        ),
        row(
            "tools/call with name of the wrong type",
            r#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":5}}"#,
            Expect::Error(INVALID_PARAMS, json!(20)),
        ),
        row(
            "tools/call without a name",
            r#"{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{}}"#,
            Expect::Error(INVALID_PARAMS, json!(21)),
        ),
        row(
            "tools/call with params 3",
            r#"{"jsonrpc":"2.0","id":22,"method":"tools/call","params":3}"#,
            Expect::Error(INVALID_REQUEST, json!(22)),
        ),
        row(
            "tools/call with params an array",
            r#"{"jsonrpc":"2.0","id":23,"method":"tools/call","params":["test_simple_text"]}"#,
            Expect::Error(INVALID_PARAMS, json!(23)),
        ),
        row(
            "resources/read with uri of the wrong type",
            r#"{"jsonrpc":"2.0","id":24,"method":"resources/read","params":{"uri":[]}}"#,
            Expect::Error(INVALID_PARAMS, json!(24)),
        ),
        row(
            "logging/setLevel with an unknown level",
            r#"{"jsonrpc":"2.0","id":25,"method":"logging/setLevel","params":{"level":"loud"}}"#,
            Expect::Error(INVALID_PARAMS, json!(25)),
        ),
        row(
            "a second initialize",
            r#"{"jsonrpc":"2.0","id":26,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"again","version":"0"}}}"#,
            Expect::Error(INVALID_REQUEST, json!(26)),
        ),
        row(
            "a notification method sent with an id",
            r#"{"jsonrpc":"2.0","id":9,"method":"notifications/initialized"}"#,
            Expect::Error(METHOD_NOT_FOUND, json!(9)),
        ),
        row(
            "a batch in a 2025-11-25 session",
            r#"[{"jsonrpc":"2.0","id":27,"method":"ping"},{"jsonrpc":"2.0","id":28,"method":"tools/list"}]"#,
            Expect::Error(INVALID_REQUEST, Value::Null),
        ),
        row(
            "an empty batch in a 2025-11-25 session",
            "[]",
            Expect::Error(INVALID_REQUEST, Value::Null),
        ),
    ];
    rows.extend(envelope_rows());
    failures.extend(run(&mut moat, rows, true));
    moat.close_and_wait();
    assert_no_failures(failures);
}

#[test]
fn batches_in_a_2025_03_26_session() {
    let mut moat = Moat::spawn();
    moat.initialize("2025-03-26");
    moat.initialized();
    let rows = vec![
        row(
            "a batch of two requests",
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"two","method":"tools/list"}]"#,
            Expect::Batch(vec![(json!(1), Ok(())), (json!("two"), Ok(()))]),
        ),
        row(
            "a batch mixing requests, a notification, a bad element and an unknown method",
            r#"[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/no_such_thing"},42,{"jsonrpc":"2.0","id":4,"method":"no/such/method"}]"#,
            Expect::Batch(vec![
                (json!(3), Ok(())),
                (Value::Null, Err(INVALID_REQUEST)),
                (json!(4), Err(METHOD_NOT_FOUND)),
            ]),
        ),
        row(
            "a batch of notifications only",
            r#"[{"jsonrpc":"2.0","method":"notifications/no_such_thing"}]"#,
            Expect::Silence,
        ),
        row(
            "an empty batch",
            "[]",
            Expect::Error(INVALID_REQUEST, Value::Null),
        ),
        row(
            "a batch that is not JSON",
            "[{\"jsonrpc\":",
            Expect::Error(PARSE_ERROR, Value::Null),
        ),
    ];
    let failures = run(&mut moat, rows, true);
    moat.close_and_wait();
    assert_no_failures(failures);
}

/// Requests read before stdin closed are still answered: `printf '…' | moat serve everything`
/// must print the answers to what it was given.
#[test]
fn stdin_eof_still_answers_what_was_read() {
    for attempt in 0..5 {
        let mut moat = Moat::spawn();
        moat.send_json(&json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"eof","version":"0"}}}));
        moat.send_json(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        moat.send_json(&json!({"jsonrpc":"2.0","id":2,"method":"ping"}));
        moat.send_json(&json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
            "params":{"name":"test_simple_text","arguments":{}}}));
        moat.io.close();
        let mut ids = Vec::new();
        while let Ok(line) = moat.io.recv(REPLY) {
            let v: Value = serde_json::from_str(&line).expect("JSON");
            ids.push(v["id"].clone());
        }
        ids.sort_by_key(|id| id.as_i64());
        assert_eq!(
            ids,
            vec![json!(1), json!(2), json!(3)],
            "attempt {attempt}: answers written before exiting on stdin EOF"
        );
    }
}
