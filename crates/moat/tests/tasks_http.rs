//! The tasks extension over Streamable HTTP (2026-07-28): every request is a connection of
//! its own, yet a task outlives the `tools/call` that created it and is reachable from any
//! later request that holds its id.

use std::net::SocketAddr;
use std::time::Duration;

use moat::server::TaskTool;
use moat::transport::http::server::HttpServerOptions;
use moat::types::{ElicitRequestFormParams, ElicitRequestParams, RequestedSchema, Tool};
use moat::{NoArgs, RequestContext, Server};
use reqwest::StatusCode;
use serde_json::{Value, json};

fn server() -> Server {
    Server::new("tasks-http", "1").task_tool(
        Tool::new("confirm", Value::Null).with_description("Ask, wait, answer"),
        TaskTool::required(),
        |ctx: RequestContext, _: NoArgs| async move {
            let schema: RequestedSchema = serde_json::from_value(json!({
                "type": "object",
                "properties": { "ok": { "type": "boolean" } },
                "required": ["ok"]
            }))
            .unwrap();
            let params = ElicitRequestParams::Form(ElicitRequestFormParams::new("Sure?", schema));
            let answer = ctx.elicit(params).await.map_err(|e| e.to_string())?;
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, String>(format!("answered {:?}", answer.action))
        },
    )
}

async fn start() -> SocketAddr {
    let http = server()
        .bind_http("127.0.0.1:0".parse().unwrap(), HttpServerOptions::default())
        .await
        .unwrap();
    let addr = http.local_addr().unwrap();
    tokio::spawn(http.run());
    addr
}

/// One 2026-07-28 request, with the headers that mirror it (`Mcp-Name`: the tool, or the
/// task for the task methods).
async fn request(addr: SocketAddr, method: &str, mut params: Value, name: &str) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        }
    });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{method}");
    let text = r.text().await.unwrap();
    // JSON, or an SSE stream whose last event is the answer.
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .unwrap_or(&text);
    let v: Value = serde_json::from_str(json.trim()).unwrap();
    v["result"].clone()
}

#[tokio::test]
async fn a_task_outlives_the_request_that_created_it() {
    let addr = start().await;
    let created = request(addr, "tools/call", json!({ "name": "confirm" }), "confirm").await;
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().unwrap().to_owned();

    let mut task = Value::Null;
    for _ in 0..100 {
        task = request(addr, "tasks/get", json!({ "taskId": id }), &id).await;
        if task["status"] == "input_required" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(task["status"], "input_required", "{task}");
    let key = task["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let ack = request(
        addr,
        "tasks/update",
        json!({ "taskId": id, "inputResponses": { key: { "action": "accept", "content": { "ok": true } } } }),
        &id,
    )
    .await;
    assert_eq!(ack, json!({ "resultType": "complete" }));
    for _ in 0..100 {
        task = request(addr, "tasks/get", json!({ "taskId": id }), &id).await;
        if task["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        task["result"]["content"][0]["text"], "answered Accept",
        "{task}"
    );
    let ack = request(addr, "tasks/cancel", json!({ "taskId": id }), &id).await;
    assert_eq!(ack, json!({ "resultType": "complete" }));
}
