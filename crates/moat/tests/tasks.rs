//! Tasks: the tasks extension of 2026-07-28 (SEP-2663) and the experimental tasks of
//! 2025-11-25, from one set of task-capable tools.

mod support;
use support::pair;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use moat::protocol::ErrorObject;
use moat::schemars::{self, JsonSchema};
use moat::server::{TaskOptions, TaskStart, TaskTool};
use moat::types::{
    ElicitRequestFormParams, ElicitRequestParams, ElicitResult, ElicitValue, RequestedSchema,
    TaskSupport, Tool,
};
use moat::{
    Client, NoArgs, ProtocolVersion, RequestContext, Server, ServerNotification, ServerOptions,
    VersionPreference,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};

const EXT: &str = "io.modelcontextprotocol/tasks";

#[derive(Deserialize, JsonSchema)]
struct Sleep {
    ms: u64,
}

fn ask(message: &str, field: &str) -> ElicitRequestParams {
    let schema: RequestedSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": { field: { "type": "string" } },
        "required": [field]
    }))
    .unwrap();
    ElicitRequestParams::Form(ElicitRequestFormParams::new(message, schema))
}

fn text(answer: &ElicitResult, field: &str) -> String {
    match answer.content.as_ref().and_then(|c| c.get(field)) {
        Some(ElicitValue::String(s)) => s.clone(),
        _ => "?".to_owned(),
    }
}

/// Counts the handlers that were dropped before finishing.
#[derive(Default)]
struct Dropped(AtomicUsize);

struct Guard(Arc<Dropped>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn tool(name: &str) -> Tool {
    Tool::new(name, Value::Null).with_description(name)
}

fn server(options: ServerOptions, dropped: Arc<Dropped>) -> Server {
    Server::new("tasks", "1")
        .options(options)
        .tool("plain", "Never a task", |_: NoArgs| async {
            Ok::<_, String>("plain")
        })
        .task_tool(
            tool("sleep"),
            TaskTool::optional(),
            |_ctx: RequestContext, Sleep { ms }| async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok::<_, String>(format!("slept {ms}"))
            },
        )
        .task_tool(
            tool("quick_or_slow"),
            TaskTool::optional().start(TaskStart::After(Duration::from_millis(100))),
            |_ctx: RequestContext, Sleep { ms }| async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok::<_, String>(format!("slept {ms}"))
            },
        )
        // `tool_def` with a declared task support: a task at once.
        .tool_def(
            tool("must").with_task_support(TaskSupport::Required),
            |_ctx: RequestContext, _: NoArgs| async { Ok::<_, String>("done") },
        )
        .task_tool(
            tool("ask_two"),
            TaskTool::required(),
            |ctx: RequestContext, _: NoArgs| async move {
                let (a, b) = tokio::join!(
                    ctx.keyed("first").elicit(ask("first?", "name")),
                    ctx.elicit(ask("second?", "name")),
                );
                let (a, b) = (a.map_err(|e| e.to_string())?, b.map_err(|e| e.to_string())?);
                Ok::<_, String>(format!("{} {}", text(&a, "name"), text(&b, "name")))
            },
        )
        .task_tool(
            tool("interview"),
            TaskTool::optional().start(TaskStart::Manual),
            |ctx: RequestContext, _: NoArgs| async move {
                let name = ctx
                    .keyed("name")
                    .elicit(ask("name?", "name"))
                    .await
                    .map_err(|e| e.to_string())?;
                let name = text(&name, "name");
                if ctx.continue_as_task().await {
                    let id = ctx.task().map(|t| t.id().to_owned()).unwrap_or_default();
                    return Ok::<_, String>(format!("task {name} {}", !id.is_empty()));
                }
                Ok(format!("sync {name}"))
            },
        )
        .task_tool(
            tool("fail"),
            TaskTool::required(),
            |ctx: RequestContext, _: NoArgs| async move {
                if let Some(task) = ctx.task() {
                    task.set_status_message("about to fail");
                    task.fail(ErrorObject::new(-32000, "boom")).await;
                }
                Ok::<_, String>("not a task")
            },
        )
        .task_tool(
            tool("tool_error"),
            TaskTool::required(),
            |_ctx: RequestContext, _: NoArgs| async { Err::<String, _>("it went wrong") },
        )
        .task_tool(
            tool("panics"),
            TaskTool::required(),
            |_ctx: RequestContext, _: NoArgs| async {
                if true {
                    panic!("a bug");
                }
                Ok::<_, String>("never")
            },
        )
        .task_tool(
            tool("forever"),
            TaskTool::required(),
            move |_ctx: RequestContext, _: NoArgs| {
                let guard = Guard(dropped.clone());
                async move {
                    let _guard = guard;
                    std::future::pending::<()>().await;
                    Ok::<_, String>("never")
                }
            },
        )
}

fn default_server() -> (Server, Arc<Dropped>) {
    let dropped = Arc::new(Dropped::default());
    (server(ServerOptions::default(), dropped.clone()), dropped)
}

async fn modern(server: &Server) -> Client {
    let (s, c) = pair();
    let _peer = server.start(s);
    Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
        .connect(c)
        .await
        .unwrap()
}

/// Per-request client capabilities: elicitation, and the tasks extension if `tasks`.
fn caps(tasks: bool) -> Value {
    let mut c = json!({ "elicitation": {} });
    if tasks {
        c["extensions"] = json!({ EXT: {} });
    }
    json!({ "io.modelcontextprotocol/clientCapabilities": c })
}

async fn call(
    client: &Client,
    method: &str,
    mut params: Value,
    tasks: bool,
) -> Result<Value, ErrorObject> {
    params["_meta"] = caps(tasks);
    client
        .peer()
        .request::<_, Value>(method, &params)
        .await
        .map_err(|e| {
            e.remote()
                .cloned()
                .unwrap_or_else(|| panic!("{method}: {e}"))
        })
}

async fn get(client: &Client, id: &str) -> Value {
    call(client, "tasks/get", json!({ "taskId": id }), true)
        .await
        .unwrap()
}

/// Poll `tasks/get` until `done` holds.
async fn poll(client: &Client, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..200 {
        let task = get(client, id).await;
        if done(&task) {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("task {id} never got there: {}", get(client, id).await);
}

fn terminal(task: &Value) -> bool {
    ["completed", "failed", "cancelled"].contains(&task["status"].as_str().unwrap_or(""))
}

async fn create(client: &Client, tool: &str, args: Value) -> String {
    let created = call(
        client,
        "tools/call",
        json!({ "name": tool, "arguments": args }),
        true,
    )
    .await
    .unwrap();
    assert_eq!(created["resultType"], "task", "{created}");
    created["taskId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn each_revision_advertises_its_own_tasks() {
    let (server, _) = default_server();
    let client = modern(&server).await;
    let caps = client.server_capabilities();
    assert!(caps.extensions.as_ref().unwrap().contains_key(EXT));
    assert!(caps.tasks.is_none(), "no 2025-11-25 tasks capability");
    let tools = client.list_all_tools().await.unwrap();
    assert!(
        tools.iter().all(|t| t.execution.is_none()),
        "no execution in 2026-07-28"
    );

    for (version, legacy) in [
        (ProtocolVersion::V2025_11_25, true),
        (ProtocolVersion::V2025_06_18, false),
    ] {
        let (s, c) = pair();
        let _peer = server.start(s);
        let client = Client::builder()
            .protocol(VersionPreference::Exact(version))
            .connect(c)
            .await
            .unwrap();
        let caps = client.server_capabilities();
        assert!(caps.extensions.is_none(), "{version}");
        assert_eq!(caps.tasks.is_some(), legacy, "{version}");
        if legacy {
            let requests = caps.tasks.as_ref().unwrap().requests.as_ref().unwrap();
            assert!(requests.tools.as_ref().unwrap().call.is_some());
        }
        let tools = client.list_all_tools().await.unwrap();
        let support = |n: &str| {
            tools
                .iter()
                .find(|t| t.name == n)
                .unwrap()
                .execution
                .clone()
        };
        if legacy {
            assert_eq!(
                support("sleep").unwrap().task_support,
                Some(TaskSupport::Optional)
            );
            assert_eq!(
                support("must").unwrap().task_support,
                Some(TaskSupport::Required)
            );
            assert!(support("plain").is_none());
        } else {
            assert!(tools.iter().all(|t| t.execution.is_none()), "{version}");
        }
    }
}

#[tokio::test]
async fn a_task_answers_at_once_and_inlines_its_result_when_done() {
    let (server, _) = default_server();
    let client = modern(&server).await;
    let created = call(
        &client,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 200 } }),
        true,
    )
    .await
    .unwrap();
    assert_eq!(created["resultType"], "task");
    assert_eq!(created["status"], "working");
    for key in ["createdAt", "lastUpdatedAt"] {
        assert!(created[key].as_str().unwrap().ends_with('Z'), "{created}");
    }
    assert!(created["ttlMs"].as_u64().unwrap() > 0);
    assert!(created["pollIntervalMs"].as_u64().unwrap() > 0);
    for absent in [
        "task",
        "result",
        "error",
        "inputRequests",
        "requestState",
        "ttl",
    ] {
        assert!(created.get(absent).is_none(), "{absent} in {created}");
    }
    let id = created["taskId"].as_str().unwrap();

    // Stored before it was announced.
    let working = get(&client, id).await;
    assert_eq!(working["resultType"], "complete");
    assert_eq!(working["status"], "working");
    assert!(working.get("result").is_none());

    let done = poll(&client, id, terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["resultType"], "complete");
    assert_eq!(done["result"]["content"][0]["text"], "slept 200");
    assert_eq!(done["result"]["resultType"], "complete");
    assert!(
        done["result"].get("_meta").is_none(),
        "no related-task meta"
    );

    // A tool error is still a completed task; `tool_def` with taskSupport works as well.
    let id = create(&client, "tool_error", json!({})).await;
    let done = poll(&client, &id, terminal).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["result"]["isError"], true);
    let id = create(&client, "must", json!({})).await;
    let done = poll(&client, &id, terminal).await;
    assert_eq!(done["result"]["content"][0]["text"], "done");

    // Synchronous tools stay synchronous, whatever the client accepts.
    let plain = call(&client, "tools/call", json!({ "name": "plain" }), true)
        .await
        .unwrap();
    assert_eq!(plain["resultType"], "complete");
    assert_eq!(plain["content"][0]["text"], "plain");
}

#[tokio::test]
async fn clients_without_the_extension_get_no_tasks() {
    let (server, _) = default_server();
    let client = modern(&server).await;
    // An optional tool runs synchronously; the 2025-11-25 `task` param means nothing.
    let sync = call(
        &client,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 1 }, "task": { "ttl": 1000 } }),
        false,
    )
    .await
    .unwrap();
    assert_eq!(sync["resultType"], "complete");
    assert_eq!(sync["content"][0]["text"], "slept 1");

    // A required one is refused, naming the extension.
    let err = call(&client, "tools/call", json!({ "name": "must" }), false)
        .await
        .unwrap_err();
    assert_eq!(err.code, -32021);
    assert_eq!(
        err.data.unwrap()["requiredCapabilities"]["extensions"][EXT],
        json!({})
    );

    // So are the task methods, whatever the task.
    for (method, params) in [
        ("tasks/get", json!({ "taskId": "x" })),
        (
            "tasks/update",
            json!({ "taskId": "x", "inputResponses": {} }),
        ),
        ("tasks/cancel", json!({ "taskId": "x" })),
    ] {
        let err = call(&client, method, params, false).await.unwrap_err();
        assert_eq!(err.code, -32021, "{method}");
    }
    // 2025-11-25's methods are gone.
    for method in ["tasks/result", "tasks/list"] {
        let err = call(&client, method, json!({ "taskId": "x" }), true)
            .await
            .unwrap_err();
        assert_eq!(err.code, -32601, "{method}");
    }
}

#[tokio::test]
async fn input_requests_wait_for_tasks_update_and_may_be_answered_one_by_one() {
    let (server, _) = default_server();
    let client = modern(&server).await;
    let id = create(&client, "ask_two", json!({})).await;
    let asking = poll(&client, &id, |t| {
        t["inputRequests"].as_object().is_some_and(|r| r.len() == 2)
    })
    .await;
    assert_eq!(asking["status"], "input_required");
    let requests = asking["inputRequests"].as_object().unwrap();
    assert_eq!(requests["first"]["method"], "elicitation/create");
    assert_eq!(requests["elicitation-0"]["params"]["message"], "second?");

    let answer = |name: &str| json!({ "action": "accept", "content": { "name": name } });
    let ack = call(
        &client,
        "tasks/update",
        json!({ "taskId": id, "inputResponses": { "first": answer("Ada"), "unknown": {"x": 1} } }),
        true,
    )
    .await
    .unwrap();
    assert_eq!(ack, json!({ "resultType": "complete" }));
    let partial = get(&client, &id).await;
    assert_eq!(partial["status"], "input_required");
    let keys: Vec<&String> = partial["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["elicitation-0"]);

    // Answering an answered key again changes nothing.
    call(
        &client,
        "tasks/update",
        json!({ "taskId": id, "inputResponses": { "first": answer("Eve") } }),
        true,
    )
    .await
    .unwrap();
    call(
        &client,
        "tasks/update",
        json!({ "taskId": id, "inputResponses": { "elicitation-0": answer("Bob") } }),
        true,
    )
    .await
    .unwrap();
    let done = poll(&client, &id, terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Ada Bob");

    // An answer that is not an elicitation result fails the task.
    let id = create(&client, "ask_two", json!({})).await;
    poll(&client, &id, |t| t["status"] == "input_required").await;
    call(
        &client,
        "tasks/update",
        json!({ "taskId": id, "inputResponses": { "first": { "action": 42 } } }),
        true,
    )
    .await
    .unwrap();
    let failed = poll(&client, &id, terminal).await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], -32602);
}

#[tokio::test]
async fn cancel_is_an_acknowledgement_and_drops_the_work() {
    let (server, dropped) = default_server();
    let client = modern(&server).await;
    let id = create(&client, "forever", json!({})).await;
    let cancel = || call(&client, "tasks/cancel", json!({ "taskId": id }), true);
    assert_eq!(cancel().await.unwrap(), json!({ "resultType": "complete" }));
    let task = get(&client, &id).await;
    assert_eq!(task["status"], "cancelled");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        dropped.0.load(Ordering::SeqCst),
        1,
        "the handler was dropped"
    );
    // Again, on a finished task: the same acknowledgement.
    assert_eq!(cancel().await.unwrap(), json!({ "resultType": "complete" }));

    for (method, params) in [
        ("tasks/get", json!({ "taskId": "no-such-task" })),
        (
            "tasks/update",
            json!({ "taskId": "no-such-task", "inputResponses": {} }),
        ),
        ("tasks/cancel", json!({ "taskId": "no-such-task" })),
    ] {
        let err = call(&client, method, params, true).await.unwrap_err();
        assert_eq!(err.code, -32602, "{method}");
    }
}

#[tokio::test]
async fn protocol_failures_end_a_task_failed() {
    let (server, _) = default_server();
    let client = modern(&server).await;
    let id = create(&client, "fail", json!({})).await;
    let failed = poll(&client, &id, terminal).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(
        failed["error"],
        json!({ "code": -32000, "message": "boom" })
    );
    assert_eq!(failed["statusMessage"], "about to fail");
    assert!(failed.get("result").is_none());

    let id = create(&client, "panics", json!({})).await;
    let failed = poll(&client, &id, terminal).await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], -32603);
}

#[tokio::test]
async fn a_call_becomes_a_task_when_its_start_policy_says() {
    let (server, _) = default_server();
    let client = modern(&server).await;
    // After(100 ms): a quick call answers directly, a slow one becomes a task.
    let quick = call(
        &client,
        "tools/call",
        json!({ "name": "quick_or_slow", "arguments": { "ms": 0 } }),
        true,
    )
    .await
    .unwrap();
    assert_eq!(quick["resultType"], "complete");
    assert_eq!(quick["content"][0]["text"], "slept 0");
    let id = create(&client, "quick_or_slow", json!({ "ms": 400 })).await;
    let done = poll(&client, &id, terminal).await;
    assert_eq!(done["result"]["content"][0]["text"], "slept 400");

    // Manual: input over multi-round-trip results first, then the task.
    let round1 = call(&client, "tools/call", json!({ "name": "interview" }), true)
        .await
        .unwrap();
    assert_eq!(round1["resultType"], "input_required");
    assert!(round1.get("taskId").is_none());
    let retry = json!({
        "name": "interview",
        "inputResponses": { "name": { "action": "accept", "content": { "name": "Ada" } } },
        "requestState": round1["requestState"],
    });
    let round2 = call(&client, "tools/call", retry.clone(), true)
        .await
        .unwrap();
    assert_eq!(round2["resultType"], "task", "{round2}");
    assert!(round2.get("requestState").is_none());
    assert!(round2.get("inputRequests").is_none());
    let id = round2["taskId"].as_str().unwrap();
    let done = poll(&client, id, terminal).await;
    assert_eq!(done["result"]["content"][0]["text"], "task Ada true");

    // The same tool for a client without the extension: it cannot become a task, and
    // goes on synchronously.
    let round1 = call(&client, "tools/call", json!({ "name": "interview" }), false)
        .await
        .unwrap();
    let mut retry = retry;
    retry["requestState"] = round1["requestState"].clone();
    let sync = call(&client, "tools/call", retry, false).await.unwrap();
    assert_eq!(sync["resultType"], "complete");
    assert_eq!(sync["content"][0]["text"], "sync Ada");
}

#[tokio::test]
async fn tasks_expire_and_their_number_is_bounded() {
    let dropped = Arc::new(Dropped::default());
    let mut options = ServerOptions::default();
    options.tasks = {
        let mut t = TaskOptions::default();
        t.ttl = Duration::from_millis(300);
        t.max_tasks = 2;
        t
    };
    let server = server(options, dropped.clone());
    let client = modern(&server).await;
    let a = create(&client, "forever", json!({})).await;
    let created = call(&client, "tools/call", json!({ "name": "forever" }), true)
        .await
        .unwrap();
    assert_eq!(created["ttlMs"], 300);
    // Full: a required tool is refused, an optional one runs synchronously.
    let err = call(&client, "tools/call", json!({ "name": "must" }), true)
        .await
        .unwrap_err();
    assert_eq!(err.code, -32603);
    let sync = call(
        &client,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 1 } }),
        true,
    )
    .await
    .unwrap();
    assert_eq!(sync["resultType"], "complete");

    tokio::time::sleep(Duration::from_millis(450)).await;
    let err = call(&client, "tasks/get", json!({ "taskId": a }), true)
        .await
        .unwrap_err();
    assert_eq!(err.code, -32602, "expired");
    assert_eq!(
        dropped.0.load(Ordering::SeqCst),
        2,
        "the expired work stopped"
    );
    // Room again.
    create(&client, "must", json!({})).await;
}

async fn next(rx: &mut broadcast::Receiver<ServerNotification>) -> ServerNotification {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a notification")
        .unwrap()
}

#[tokio::test]
async fn listen_streams_carry_status_notifications_of_the_tasks_named() {
    let (server, _) = default_server();
    let client = modern(&server).await;
    let id = create(&client, "ask_two", json!({})).await;
    poll(&client, &id, |t| {
        t["inputRequests"].as_object().is_some_and(|r| r.len() == 2)
    })
    .await;

    // Task notifications need the extension.
    let err = call(
        &client,
        "subscriptions/listen",
        json!({ "notifications": { "taskIds": [id] } }),
        false,
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, -32021);

    let mut rx = client.notifications();
    let listener = {
        let client_peer = client.peer().clone();
        let params = json!({
            "notifications": { "taskIds": [id, "no-such-task"] },
            "_meta": caps(true),
        });
        tokio::spawn(async move {
            let _ = client_peer
                .request::<_, Value>("subscriptions/listen", &params)
                .await;
        })
    };
    let ack = next(&mut rx).await;
    assert_eq!(ack.method, "notifications/subscriptions/acknowledged");
    assert_eq!(ack.params.unwrap()["notifications"]["taskIds"], json!([id]));
    let now = next(&mut rx).await;
    assert_eq!(now.method, "notifications/tasks");
    let params = now.params.unwrap();
    assert_eq!(params["status"], "input_required");
    assert!(params["_meta"]["io.modelcontextprotocol/subscriptionId"].is_number());

    let answers = json!({
        "first": { "action": "accept", "content": { "name": "a" } },
        "elicitation-0": { "action": "accept", "content": { "name": "b" } },
    });
    call(
        &client,
        "tasks/update",
        json!({ "taskId": id, "inputResponses": answers }),
        true,
    )
    .await
    .unwrap();
    let last = loop {
        let n = next(&mut rx).await;
        assert_eq!(n.method, "notifications/tasks");
        let params = n.params.unwrap();
        assert_eq!(params["taskId"], id.as_str());
        if params["status"] != "working" {
            break params;
        }
    };
    assert_eq!(last["status"], "completed");
    assert_eq!(last["result"]["content"][0]["text"], "a b");
    listener.abort();
}

// ---------------------------------------------------------------------------------------
// 2025-11-25

/// A 2025-11-25 client whose elicitation handler answers `name` once `go` is notified.
async fn legacy(
    server: &Server,
    go: Arc<Notify>,
    seen: Arc<std::sync::Mutex<Vec<Value>>>,
) -> Client {
    let (s, c) = pair();
    let _peer = server.start(s);
    Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .on_elicitation(move |p| {
            let go = go.clone();
            let seen = seen.clone();
            async move {
                let ElicitRequestParams::Form(form) = p else {
                    panic!("form expected")
                };
                seen.lock()
                    .unwrap()
                    .push(serde_json::to_value(&form.meta).unwrap());
                go.notified().await;
                let mut content = BTreeMap::new();
                let name = form.message.trim_end_matches('?').to_owned();
                content.insert("name".to_owned(), ElicitValue::String(name));
                Ok(ElicitResult::accept(content))
            }
        })
        .connect(c)
        .await
        .unwrap()
}

async fn raw(client: &Client, method: &str, params: Value) -> Result<Value, ErrorObject> {
    client
        .peer()
        .request::<_, Value>(method, &params)
        .await
        .map_err(|e| {
            e.remote()
                .cloned()
                .unwrap_or_else(|| panic!("{method}: {e}"))
        })
}

#[tokio::test]
async fn legacy_tasks_are_created_on_request_and_polled() {
    let (server, _) = default_server();
    let go = Arc::new(Notify::new());
    let client = legacy(&server, go.clone(), Default::default()).await;
    let mut rx = client.notifications();

    let created = raw(
        &client,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 100 }, "task": { "ttl": 60000 } }),
    )
    .await
    .unwrap();
    let task = &created["task"];
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttl"], 60000);
    assert!(task["pollInterval"].as_u64().is_some());
    assert!(created.get("resultType").is_none());
    let id = task["taskId"].as_str().unwrap().to_owned();

    let got = raw(&client, "tasks/get", json!({ "taskId": id }))
        .await
        .unwrap();
    assert_eq!(got["taskId"], id.as_str());
    let list = raw(&client, "tasks/list", json!({})).await.unwrap();
    assert_eq!(list["tasks"][0]["taskId"], id.as_str());

    // tasks/result waits for the end, and answers what the call would have.
    let result = raw(&client, "tasks/result", json!({ "taskId": id }))
        .await
        .unwrap();
    assert_eq!(result["content"][0]["text"], "slept 100");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    let n = next(&mut rx).await;
    assert_eq!(n.method, "notifications/tasks/status");
    assert_eq!(n.params.unwrap()["status"], "completed");

    // Finished tasks cannot be cancelled.
    let err = raw(&client, "tasks/cancel", json!({ "taskId": id }))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32602);

    // The tool's taskSupport must agree with the request.
    let err = raw(&client, "tools/call", json!({ "name": "must" }))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32601);
    let err = raw(
        &client,
        "tools/call",
        json!({ "name": "plain", "task": {} }),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, -32601);
    // An optional tool without `task` answers directly.
    let sync = raw(
        &client,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 1 } }),
    )
    .await
    .unwrap();
    assert_eq!(sync["content"][0]["text"], "slept 1");
    // tasks/update is the extension's.
    let err = raw(
        &client,
        "tasks/update",
        json!({ "taskId": id, "inputResponses": {} }),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, -32601);
}

#[tokio::test]
async fn legacy_task_input_goes_to_the_client_marked_with_the_task() {
    let (server, _) = default_server();
    let go = Arc::new(Notify::new());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let client = legacy(&server, go.clone(), seen.clone()).await;
    let created = raw(
        &client,
        "tools/call",
        json!({ "name": "ask_two", "task": {} }),
    )
    .await
    .unwrap();
    let id = created["task"]["taskId"].as_str().unwrap().to_owned();
    let status = || async {
        raw(&client, "tasks/get", json!({ "taskId": id }))
            .await
            .unwrap()["status"]
            .clone()
    };
    for _ in 0..100 {
        if seen.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status().await, "input_required");
    for meta in seen.lock().unwrap().iter() {
        assert_eq!(
            meta["io.modelcontextprotocol/related-task"]["taskId"],
            id.as_str()
        );
    }
    go.notify_waiters();
    let result = raw(&client, "tasks/result", json!({ "taskId": id }))
        .await
        .unwrap();
    assert_eq!(result["content"][0]["text"], "first second");
}

#[tokio::test]
async fn legacy_tasks_belong_to_their_connection() {
    let (server, dropped) = default_server();
    let first = legacy(&server, Default::default(), Default::default()).await;
    let second = legacy(&server, Default::default(), Default::default()).await;
    let created = raw(
        &first,
        "tools/call",
        json!({ "name": "forever", "task": {} }),
    )
    .await
    .unwrap();
    let id = created["task"]["taskId"].as_str().unwrap().to_owned();
    let err = raw(&second, "tasks/get", json!({ "taskId": id }))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32602);
    assert_eq!(
        raw(&second, "tasks/list", json!({})).await.unwrap()["tasks"],
        json!([])
    );

    // Cancelling answers the cancelled task; its result is an error.
    let cancelled = raw(&first, "tasks/cancel", json!({ "taskId": id }))
        .await
        .unwrap();
    assert_eq!(cancelled["status"], "cancelled");
    assert!(
        raw(&first, "tasks/result", json!({ "taskId": id }))
            .await
            .is_err()
    );

    // A connection that closes takes its tasks along.
    let created = raw(
        &first,
        "tools/call",
        json!({ "name": "forever", "task": {} }),
    )
    .await
    .unwrap();
    assert!(created["task"]["taskId"].is_string());
    first.peer().close().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(dropped.0.load(Ordering::SeqCst), 2);
}
