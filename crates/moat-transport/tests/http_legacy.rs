//! moat's HTTP client against moat's own HTTP server, over real sockets: in `Auto` mode the
//! client reaches the legacy HTTP+SSE pair from the SSE URL (the spec's backwards-compatible
//! detection: POST, refused with 405, then GET for the `endpoint` event) and still speaks
//! Streamable HTTP at the MCP endpoint; a POST to the SSE path gets a 405 only once the
//! Host/Origin checks and the token have passed.
//!
//! The server side has no SDK here (that lives above this crate): each connection the server
//! hands out is answered by a few lines that know `initialize` and `tools/list`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use moat_protocol::RequestId;
use moat_transport::http::client::{ClientOptions, TransportMode, connect};
use moat_transport::http::server::{HttpServer, HttpServerOptions, OnConnection};
use moat_transport::{Connection, Frame, Inbound, Outgoing};
use serde_json::{Value, json};

/// A running server and how many connections (sessions) it handed out.
struct Served {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Served {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Bind `options` on a free loopback port and serve until dropped.
async fn serve(options: HttpServerOptions) -> Served {
    let connections = Arc::new(AtomicUsize::new(0));
    let counter = connections.clone();
    let on_connection: OnConnection = Arc::new(move |conn| {
        counter.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(answer(conn));
    });
    let server = HttpServer::bind("127.0.0.1:0".parse().unwrap(), options, on_connection)
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    Served {
        addr,
        connections,
        stop: Some(stop),
    }
}

/// A minimal MCP server on one connection: `initialize`, `tools/list`, -32601 otherwise.
async fn answer(mut conn: Connection) {
    while let Some(item) = conn.inbound.recv().await {
        // A single request over Streamable HTTP arrives read (its head), with its line.
        let line = match item {
            Inbound::Frame(Frame::Line(line)) => line,
            Inbound::Request(head) => head.line().to_owned(),
            _ => continue,
        };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (msg["id"].as_i64(), msg["method"].as_str()) else {
            continue; // A notification or a response.
        };
        let reply = match method {
            "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "answer", "version": "1"}}}),
            "tools/list" => json!({"jsonrpc": "2.0", "id": id, "result": {
                "tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}}),
            _ => json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601, "message": format!("Method not found: {method}")}}),
        };
        let out = Outgoing::new(reply.to_string(), Some(RequestId::from(id)));
        if conn.outbound.send(out).await.is_err() {
            return;
        }
    }
}

fn options(mode: TransportMode) -> ClientOptions {
    ClientOptions::default()
        .mode(mode)
        .request_timeout(Some(Duration::from_secs(5)))
}

async fn send(conn: &Connection, msg: Value) {
    conn.outbound.send(msg.to_string().into()).await.unwrap();
}

async fn recv(conn: &mut Connection) -> Value {
    match tokio::time::timeout(Duration::from_secs(10), conn.inbound.recv()).await {
        Ok(Some(Inbound::Frame(Frame::Line(l)))) => serde_json::from_str(&l).unwrap(),
        other => panic!("expected a message, got {other:?}"),
    }
}

async fn close(mut conn: Connection) {
    if let Some(closer) = conn.closer.take() {
        closer().await;
    }
}

/// `initialize`, `notifications/initialized`, then `tools/list`: the tool names listed.
async fn list_tools(conn: &mut Connection, version: &str) -> Vec<String> {
    send(
        conn,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .await;
    let init = recv(conn).await;
    assert_eq!(init["result"]["protocolVersion"], version, "{init}");
    send(
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    send(
        conn,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let list = recv(conn).await;
    assert_eq!(list["id"], 2, "{list}");
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {list}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn auto_reaches_the_legacy_pair_from_the_sse_url_and_streamable_http_at_the_endpoint() {
    let server = serve(HttpServerOptions::default()).await;

    // The SSE URL: the first POST is refused with 405, the GET opens a legacy session.
    let mut conn = connect(&server.url("/sse"), options(TransportMode::Auto))
        .await
        .unwrap();
    assert_eq!(list_tools(&mut conn, "2024-11-05").await, ["echo"]);
    close(conn).await;
    assert_eq!(
        server.connections.load(Ordering::SeqCst),
        1,
        "one legacy session"
    );

    // The MCP endpoint: Streamable HTTP, no fallback.
    let mut conn = connect(&server.url("/mcp"), options(TransportMode::Auto))
        .await
        .unwrap();
    assert_eq!(list_tools(&mut conn, "2025-11-25").await, ["echo"]);
    close(conn).await;
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_post_to_the_sse_path_is_405_allowing_get_and_not_a_json_rpc_error() {
    let server = serve(HttpServerOptions::default()).await;
    let http = reqwest::Client::new();
    let resp = http
        .post(server.url("/sse"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(
        resp.headers().get("allow").and_then(|v| v.to_str().ok()),
        Some("GET")
    );
    let body = resp.text().await.unwrap();
    assert!(
        serde_json::from_str::<Value>(&body).is_err(),
        "a JSON body: {body}"
    );

    // And the message path takes POST only.
    let resp = http.get(server.url("/message")).send().await.unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(
        resp.headers().get("allow").and_then(|v| v.to_str().ok()),
        Some("POST")
    );
    assert_eq!(server.connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_legacy_paths_keep_the_origin_and_token_checks() {
    let mut opts = HttpServerOptions::default();
    opts.token = Some("s3cret".to_owned());
    let server = serve(opts).await;
    let http = reqwest::Client::new();
    let post = |origin: Option<&str>, token: Option<&str>| {
        let mut req = http
            .post(server.url("/sse"))
            .header("content-type", "application/json")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    // Refused before the path is looked at: no 405 to tell what is served here.
    assert_eq!(post(None, None).await.unwrap().status(), 401);
    assert_eq!(post(None, Some("wrong")).await.unwrap().status(), 401);
    assert_eq!(
        post(Some("http://evil.example"), Some("s3cret"))
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(post(None, Some("s3cret")).await.unwrap().status(), 405);

    // The client in Auto mode gets through with the token, and not without it.
    let mut conn = connect(
        &server.url("/sse"),
        options(TransportMode::Auto).bearer_token("s3cret"),
    )
    .await
    .unwrap();
    assert_eq!(list_tools(&mut conn, "2024-11-05").await, ["echo"]);
    close(conn).await;

    let mut conn = connect(&server.url("/sse"), options(TransportMode::Auto))
        .await
        .unwrap();
    send(
        &conn,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .await;
    // The server's own 401 error, passed on: no fallback past an authentication failure.
    let refused = recv(&mut conn).await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Unauthorized")),
        "{refused}"
    );
    close(conn).await;
    assert_eq!(
        server.connections.load(Ordering::SeqCst),
        1,
        "only the authorized client got a session"
    );
}

#[tokio::test]
async fn without_the_legacy_pair_auto_reports_both_refusals() {
    let mut opts = HttpServerOptions::default();
    opts.legacy = None;
    let server = serve(opts).await;
    let mut conn = connect(&server.url("/sse"), options(TransportMode::Auto))
        .await
        .unwrap();
    send(
        &conn,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .await;
    let refused = recv(&mut conn).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    // The server's own error (the POST's 404), then why the legacy GET did not help.
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert!(
        message.contains("the MCP endpoint is /mcp") && message.contains("legacy"),
        "{refused}"
    );
    close(conn).await;
    assert_eq!(server.connections.load(Ordering::SeqCst), 0);
}
