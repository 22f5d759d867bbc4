//! The everything server's task tools (the `tasks-*` conformance scenarios), in-process:
//! tasks of the 2026-07-28 extension, tasks of 2025-11-25, and synchronous calls where a
//! revision has no tasks.

use std::collections::BTreeMap;
use std::time::Duration;

use moat::transport::{Connection, Limits};
use moat::types::{ElicitRequestParams, ElicitResult, ElicitValue};
use moat::{Client, ProtocolVersion, VersionPreference};
use moat_servers::everything::server;
use serde_json::{Value, json};
use tokio::io::BufReader;

fn conn_pair() -> (Connection, Connection) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    (
        Connection::from_lines(BufReader::new(ar), aw, Limits::default()),
        Connection::from_lines(BufReader::new(br), bw, Limits::default()),
    )
}

/// A client that confirms and names itself "Ada" when asked.
async fn connect(version: ProtocolVersion) -> Client {
    let (s, c) = conn_pair();
    server().start(s);
    Client::builder()
        .protocol(VersionPreference::Exact(version))
        .on_elicitation(|_p: ElicitRequestParams| async {
            let mut content = BTreeMap::new();
            content.insert("name".to_owned(), ElicitValue::String("Ada".into()));
            content.insert("confirm".to_owned(), ElicitValue::Boolean(true));
            Ok(ElicitResult::accept(content))
        })
        .connect(c)
        .await
        .unwrap()
}

async fn call(client: &Client, method: &str, mut params: Value) -> Result<Value, i64> {
    if client.protocol_version() == Some(ProtocolVersion::V2026_07_28) {
        params["_meta"] = json!({ "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        }});
    }
    client
        .peer()
        .request::<_, Value>(method, &params)
        .await
        .map_err(|e| e.remote().map_or(0, |e| e.code))
}

async fn settle(client: &Client, id: &str) -> Value {
    for _ in 0..100 {
        let task = call(client, "tasks/get", json!({ "taskId": id }))
            .await
            .unwrap();
        if ["completed", "failed", "cancelled"].contains(&task["status"].as_str().unwrap()) {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} did not finish");
}

#[tokio::test]
async fn extension_tasks() {
    let client = connect(ProtocolVersion::V2026_07_28).await;
    let greet = call(
        &client,
        "tools/call",
        json!({ "name": "greet", "arguments": { "name": "World" } }),
    )
    .await
    .unwrap();
    assert_eq!(greet["content"][0]["text"], "Hello, World!");

    // slow_compute: at once when instant, a task otherwise.
    let instant = call(
        &client,
        "tools/call",
        json!({ "name": "slow_compute", "arguments": { "seconds": 0 } }),
    )
    .await
    .unwrap();
    assert_eq!(instant["resultType"], "complete");
    let task = call(
        &client,
        "tools/call",
        json!({ "name": "slow_compute", "arguments": { "seconds": 1, "label": "x" } }),
    )
    .await
    .unwrap();
    assert_eq!(task["resultType"], "task");
    let done = settle(&client, task["taskId"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed");

    let failed = call(
        &client,
        "tools/call",
        json!({ "name": "protocol_error_job" }),
    )
    .await
    .unwrap();
    let failed = settle(&client, failed["taskId"].as_str().unwrap()).await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], -32603);

    // Multi-round-trip input, then a task.
    let round1 = call(
        &client,
        "tools/call",
        json!({ "name": "test_tool_with_task" }),
    )
    .await
    .unwrap();
    assert_eq!(round1["resultType"], "input_required");
    let round2 = call(
        &client,
        "tools/call",
        json!({
            "name": "test_tool_with_task",
            "inputResponses": { "user_name": { "action": "accept", "content": { "name": "Alice" } } },
            "requestState": round1["requestState"],
        }),
    )
    .await
    .unwrap();
    assert_eq!(round2["resultType"], "task");
    let done = settle(&client, round2["taskId"].as_str().unwrap()).await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Hello, Alice! (computed in task)"
    );
}

#[tokio::test]
async fn legacy_tasks() {
    let client = connect(ProtocolVersion::V2025_11_25).await;
    let created = call(
        &client,
        "tools/call",
        json!({ "name": "confirm_delete", "arguments": { "filename": "a.txt" }, "task": {} }),
    )
    .await
    .unwrap();
    let id = created["task"]["taskId"].as_str().unwrap();
    let result = call(&client, "tasks/result", json!({ "taskId": id }))
        .await
        .unwrap();
    assert_eq!(result["content"][0]["text"], "deleted 'a.txt'");
    // Required task tools need `task`.
    assert_eq!(
        call(&client, "tools/call", json!({ "name": "multi_input" })).await,
        Err(-32601)
    );
}

#[tokio::test]
async fn revisions_without_tasks_run_the_task_tools_synchronously() {
    let client = connect(ProtocolVersion::V2025_06_18).await;
    let text = |v: Value| v["content"][0]["text"].as_str().unwrap().to_owned();
    let r = call(&client, "tools/call", json!({ "name": "multi_input" }))
        .await
        .unwrap();
    assert_eq!(text(r), "name=Ada confirmed=true");
    let r = call(
        &client,
        "tools/call",
        json!({ "name": "test_tool_with_task" }),
    )
    .await
    .unwrap();
    assert_eq!(text(r), "Hello, Ada!");
    let r = call(
        &client,
        "tools/call",
        json!({ "name": "protocol_error_job" }),
    )
    .await
    .unwrap();
    assert_eq!(r["isError"], true);
}
