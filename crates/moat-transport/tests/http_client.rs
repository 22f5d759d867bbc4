//! The HTTP client transport against small hand-rolled HTTP/1.1 servers that script exactly
//! what a real server may do (forget a session, drop a stream mid-answer, serve a broken
//! tool definition) and record every request, headers included.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moat_transport::http::client::{ClientOptions, TransportMode, connect};
use moat_transport::{Connection, Frame, Inbound};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

// ---------------------------------------------------------------------------
// A scriptable HTTP/1.1 server: one request per TCP connection (`Connection: close`).
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Req {
    method: String,
    headers: HashMap<String, String>,
    body: String,
}

impl Req {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The JSON-RPC method of a POST, or the HTTP method otherwise.
    fn what(&self) -> String {
        match self.json().get("method").and_then(Value::as_str) {
            Some(m) => m.to_owned(),
            None => self.method.clone(),
        }
    }
}

enum Reply {
    /// A status with an optional JSON body and extra headers.
    Json(u16, Vec<(&'static str, String)>, Option<Value>),
    /// A status with a plain-text body and extra headers.
    Text(u16, Vec<(&'static str, String)>, String),
    /// An SSE stream: these raw event chunks, then close (or hold until the client hangs
    /// up, reporting it on the channel).
    Sse(Vec<String>, Option<mpsc::UnboundedSender<()>>),
}

type Handler = Arc<dyn Fn(&Req) -> Reply + Send + Sync>;

struct Mini {
    url: String,
    requests: mpsc::UnboundedReceiver<Req>,
}

impl Mini {
    async fn start(handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Mini {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let handler: Handler = Arc::new(handler);
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let handler = handler.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let _ = serve_one(sock, handler, tx).await;
                });
            }
        });
        Mini {
            url: format!("http://{addr}/mcp"),
            requests: rx,
        }
    }

    /// Every request received so far.
    fn drain(&mut self) -> Vec<Req> {
        let mut out = Vec::new();
        while let Ok(r) = self.requests.try_recv() {
            out.push(r);
        }
        out
    }
}

async fn serve_one(
    mut sock: TcpStream,
    handler: Handler,
    log: mpsc::UnboundedSender<Req>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let method = lines
        .next()
        .unwrap_or("")
        .split(' ')
        .next()
        .unwrap_or("")
        .to_owned();
    let mut headers = HashMap::new();
    for line in lines {
        if let Some((n, v)) = line.split_once(':') {
            headers.insert(n.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let mut chunk = vec![0u8; len - body.len()];
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let req = Req {
        method,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let reply = handler(&req);
    let _ = log.send(req);
    match reply {
        Reply::Json(status, extra, body) => {
            let body = body.map(|b| b.to_string()).unwrap_or_default();
            let ctype = if body.is_empty() {
                String::new()
            } else {
                "Content-Type: application/json\r\n".to_owned()
            };
            write_plain(&mut sock, status, &extra, &ctype, &body).await
        }
        Reply::Text(status, extra, body) => {
            write_plain(
                &mut sock,
                status,
                &extra,
                "Content-Type: text/plain\r\n",
                &body,
            )
            .await
        }
        Reply::Sse(chunks, hold) => {
            let mut head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                            Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
                .to_owned();
            head.push_str(&chunks.concat());
            sock.write_all(head.as_bytes()).await?;
            sock.flush().await?;
            if let Some(hold) = hold {
                // Wait for the client to hang up.
                let mut b = [0u8; 64];
                while sock.read(&mut b).await.unwrap_or(0) > 0 {}
                let _ = hold.send(());
            }
            sock.shutdown().await
        }
    }
}

async fn write_plain(
    sock: &mut TcpStream,
    status: u16,
    extra: &[(&'static str, String)],
    ctype: &str,
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} Scripted\r\n{ctype}");
    for (n, v) in extra {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    sock.write_all(head.as_bytes()).await?;
    sock.shutdown().await
}

fn sse_event(id: Option<&str>, data: &Value) -> String {
    match id {
        Some(id) => format!("id: {id}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn init_result(id: &Value) -> Value {
    result(
        id,
        json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
               "serverInfo": {"name": "mini", "version": "1"}}),
    )
}

// ---------------------------------------------------------------------------
// Driving a connection by hand.
// ---------------------------------------------------------------------------

fn options(mode: TransportMode) -> ClientOptions {
    ClientOptions::default()
        .mode(mode)
        .request_timeout(Some(Duration::from_secs(5)))
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(200))
}

async fn send(conn: &Connection, msg: Value) {
    conn.outbound.send(msg.to_string().into()).await.unwrap();
}

async fn recv(conn: &mut Connection) -> Value {
    match tokio::time::timeout(Duration::from_secs(5), conn.inbound.recv()).await {
        Ok(Some(Inbound::Frame(Frame::Line(l)))) => serde_json::from_str(&l).unwrap(),
        other => panic!("expected a message, got {other:?}"),
    }
}

/// Nothing more arrives for a short while.
async fn quiet(conn: &mut Connection) {
    if let Ok(Some(item)) =
        tokio::time::timeout(Duration::from_millis(300), conn.inbound.recv()).await
    {
        panic!("unexpected inbound item: {item:?}");
    }
}

async fn close(mut conn: Connection) {
    let closer = conn.closer.take().unwrap();
    closer().await;
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        while conn.inbound.recv().await.is_some() {}
    })
    .await;
    assert!(end.is_ok(), "the inbound stream did not end after close");
}

/// initialize + notifications/initialized over a fresh connection.
async fn handshake(conn: &mut Connection) {
    send(
        conn,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .await;
    let answer = recv(conn).await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");
    send(
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
}

// ---------------------------------------------------------------------------
// Handshake era
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_forgotten_session_is_reinitialised_and_the_request_retried() {
    let inits = Arc::new(AtomicUsize::new(0));
    let counter = inits.clone();
    let mut server = Mini::start(
        move |req| match (req.method.as_str(), req.what().as_str()) {
            ("POST", "initialize") => {
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                Reply::Json(
                    200,
                    vec![("Mcp-Session-Id", format!("s{n}"))],
                    Some(init_result(&req.json()["id"])),
                )
            }
            ("POST", "notifications/initialized") => Reply::Json(202, vec![], None),
            // The server restarted: it no longer knows s1.
            ("POST", "tools/list") if req.header("mcp-session-id") == Some("s1") => {
                Reply::Json(404, vec![], None)
            }
            ("POST", "tools/list") => Reply::Json(
                200,
                vec![],
                Some(result(&req.json()["id"], json!({"tools": []}))),
            ),
            ("GET", _) => Reply::Json(405, vec![], None),
            _ => Reply::Json(200, vec![], None),
        },
    )
    .await;
    let mut conn = connect(&server.url, options(TransportMode::StreamableHttp))
        .await
        .unwrap();
    handshake(&mut conn).await;
    send(
        &conn,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let answer = recv(&mut conn).await;
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["result"]["tools"], json!([]));
    // The replayed initialize was answered to the transport, not to us.
    quiet(&mut conn).await;
    close(conn).await;

    let posts: Vec<Req> = server
        .drain()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect();
    let seen: Vec<(String, Option<&str>)> = posts
        .iter()
        .map(|r| (r.what(), r.header("mcp-session-id")))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("initialize".to_owned(), None),
            ("notifications/initialized".to_owned(), Some("s1")),
            ("tools/list".to_owned(), Some("s1")),
            ("initialize".to_owned(), None),
            ("notifications/initialized".to_owned(), Some("s2")),
            ("tools/list".to_owned(), Some("s2")),
            ("DELETE".to_owned(), Some("s2")),
        ]
    );
    // The replay carries an id of the transport's own; the versions follow the handshake.
    assert_eq!(posts[3].json()["id"], "moat-transport-reinit-1");
    assert_eq!(posts[0].header("mcp-protocol-version"), None);
    assert_eq!(posts[2].header("mcp-protocol-version"), Some("2025-11-25"));
    assert_eq!(posts[5].header("mcp-protocol-version"), Some("2025-11-25"));
    for p in &posts[..6] {
        assert_eq!(
            p.header("accept"),
            Some("application/json, text/event-stream")
        );
        assert_eq!(p.header("content-type"), Some("application/json"));
    }
}

#[tokio::test]
async fn a_dropped_stream_is_resumed_with_last_event_id_without_loss_or_duplicates() {
    let progress = |n: u32| {
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": "p", "progress": n, "total": 3}})
    };
    let gets = Arc::new(Mutex::new(Vec::<Option<String>>::new()));
    let seen_gets = gets.clone();
    let mut server = Mini::start(
        move |req| match (req.method.as_str(), req.what().as_str()) {
            ("POST", "initialize") => Reply::Json(
                200,
                vec![("Mcp-Session-Id", "s1".to_owned())],
                Some(init_result(&req.json()["id"])),
            ),
            ("POST", "notifications/initialized") => Reply::Json(202, vec![], None),
            // The answer's stream: a priming event with `retry`, two events, then the
            // connection drops (the stream is not over).
            ("POST", "tools/call") => Reply::Sse(
                vec![
                    "id: e0\nretry: 30\ndata: \n\n".to_owned(),
                    sse_event(Some("e1"), &progress(1)),
                    sse_event(Some("e2"), &progress(2)),
                ],
                None,
            ),
            ("GET", _) => {
                let last = req.header("last-event-id").map(str::to_owned);
                seen_gets.lock().unwrap().push(last.clone());
                match last.as_deref() {
                    // The standalone stream is not offered.
                    None => Reply::Json(405, vec![], None),
                    // Resumption: replay from e2 (one event too many) and finish.
                    Some("e2") if req.header("mcp-session-id") == Some("s1") => Reply::Sse(
                        vec![
                            sse_event(Some("e2"), &progress(2)),
                            sse_event(Some("e3"), &progress(3)),
                            sse_event(
                                Some("e4"),
                                &result(&json!(7), json!({"content": [], "isError": false})),
                            ),
                        ],
                        None,
                    ),
                    Some(_) => Reply::Json(400, vec![], None),
                }
            }
            _ => Reply::Json(200, vec![], None),
        },
    )
    .await;
    let mut conn = connect(&server.url, options(TransportMode::StreamableHttp))
        .await
        .unwrap();
    handshake(&mut conn).await;
    send(
        &conn,
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "slow", "_meta": {"progressToken": "p"}}}),
    )
    .await;
    for n in 1..=3 {
        let note = recv(&mut conn).await;
        assert_eq!(note["method"], "notifications/progress", "{note}");
        assert_eq!(note["params"]["progress"], n, "{note}");
    }
    let answer = recv(&mut conn).await;
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["result"]["isError"], false);
    quiet(&mut conn).await;
    close(conn).await;
    let resumed: Vec<Option<String>> = gets.lock().unwrap().clone();
    assert!(
        resumed.contains(&Some("e2".to_owned())),
        "no GET resumed from e2: {resumed:?}"
    );
    assert_eq!(
        resumed.iter().filter(|g| g.is_some()).count(),
        1,
        "{resumed:?}"
    );
    drop(server.drain());
}

#[tokio::test]
async fn a_stream_that_ends_without_the_answer_fails_the_request() {
    let mut server = Mini::start(
        move |req| match (req.method.as_str(), req.what().as_str()) {
            ("POST", "initialize") => Reply::Json(
                200,
                vec![("Mcp-Session-Id", "s1".to_owned())],
                Some(init_result(&req.json()["id"])),
            ),
            ("POST", "notifications/initialized") => Reply::Json(202, vec![], None),
            // No event id: nothing to resume from.
            ("POST", "ping") => Reply::Sse(vec![": keep-alive\n\n".to_owned()], None),
            // An event id, but the server does not allow resuming.
            ("POST", "tools/list") => Reply::Sse(vec!["id: x1\ndata: \n\n".to_owned()], None),
            ("GET", _) => Reply::Json(405, vec![], None),
            _ => Reply::Json(200, vec![], None),
        },
    )
    .await;
    let mut conn = connect(&server.url, options(TransportMode::StreamableHttp))
        .await
        .unwrap();
    handshake(&mut conn).await;
    send(&conn, json!({"jsonrpc": "2.0", "id": 2, "method": "ping"})).await;
    let answer = recv(&mut conn).await;
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["error"]["code"], -32603);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("before answering"), "{message}");

    send(
        &conn,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    )
    .await;
    let answer = recv(&mut conn).await;
    assert_eq!(answer["id"], 3, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("405"), "{message}");
    close(conn).await;
    drop(server.drain());
}

#[tokio::test]
async fn http_errors_become_json_rpc_errors_for_the_request() {
    let mut server = Mini::start(move |req| match req.what().as_str() {
        "tools/list" => Reply::Json(
            401,
            vec![(
                "WWW-Authenticate",
                "Bearer resource_metadata=\"http://x/.well-known\"".to_owned(),
            )],
            None,
        ),
        // A JSON-RPC error with a null id: passed on, addressed to our request.
        "prompts/list" => Reply::Json(
            500,
            vec![],
            Some(json!({"jsonrpc": "2.0", "id": null,
                        "error": {"code": -32000, "message": "backend down"}})),
        ),
        "resources/list" => Reply::Text(502, vec![], "<html>bad gateway</html>".to_owned()),
        _ => Reply::Json(405, vec![], None),
    })
    .await;
    let mut conn = connect(&server.url, options(TransportMode::StreamableHttp))
        .await
        .unwrap();
    send(
        &conn,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    let answer = recv(&mut conn).await;
    assert_eq!(answer["id"], 1, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("401"), "{message}");
    assert!(message.contains("requires authorization"), "{message}");
    assert!(message.contains("resource_metadata"), "{message}");

    send(
        &conn,
        json!({"jsonrpc": "2.0", "id": "b", "method": "prompts/list"}),
    )
    .await;
    let answer = recv(&mut conn).await;
    assert_eq!(answer["id"], "b", "{answer}");
    assert_eq!(answer["error"]["code"], -32000);
    assert_eq!(answer["error"]["message"], "backend down");

    send(
        &conn,
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/list"}),
    )
    .await;
    let answer = recv(&mut conn).await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(answer["error"]["code"], -32603);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("502"), "{message}");
    assert!(message.contains(&server.url), "{message}");
    assert!(message.contains("bad gateway"), "{message}");
    close(conn).await;
    drop(server.drain());
}

#[tokio::test]
async fn redirects_to_another_origin_are_not_followed() {
    let mut elsewhere = Mini::start(|_| Reply::Json(200, vec![], Some(json!({})))).await;
    let target = elsewhere.url.clone();
    let mut server =
        Mini::start(move |_| Reply::Json(307, vec![("Location", target.clone())], None)).await;
    let mut conn = connect(
        &server.url,
        options(TransportMode::StreamableHttp).bearer_token("secret"),
    )
    .await
    .unwrap();
    send(&conn, json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).await;
    let answer = recv(&mut conn).await;
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("another origin"), "{message}");
    close(conn).await;
    assert!(
        elsewhere.drain().is_empty(),
        "the request (and token) went to another origin"
    );
    assert_eq!(
        server.drain()[0].header("authorization"),
        Some("Bearer secret")
    );
}

// ---------------------------------------------------------------------------
// Modern era (2026-07-28)
// ---------------------------------------------------------------------------

fn modern(id: u32, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test]
async fn modern_requests_mirror_their_fields_into_headers_and_invalid_tools_are_dropped() {
    let mut server = Mini::start(move |req| {
        let id = &req.json()["id"];
        match req.what().as_str() {
            "tools/list" => Reply::Json(
                200,
                vec![],
                Some(result(
                    id,
                    json!({"tools": [
                        {"name": "query", "inputSchema": {"type": "object", "properties": {
                            "region": {"type": "string", "x-mcp-header": "Region"},
                            "opts": {"type": "object", "properties": {
                                "limit": {"type": "integer", "x-mcp-header": "Limit"},
                                "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}
                            }},
                            "note": {"type": "string", "x-mcp-header": "Note"},
                            "sql": {"type": "string"}
                        }}},
                        {"name": "broken", "inputSchema": {"type": "object", "properties": {
                            "ratio": {"type": "number", "x-mcp-header": "Ratio"}
                        }}},
                        {"name": "sneaky", "inputSchema": {"type": "object", "properties": {
                            "xs": {"type": "array", "items": {"type": "string", "x-mcp-header": "X"}}
                        }}},
                        {"name": "plain", "inputSchema": {"type": "object"}}
                    ]}),
                )),
            ),
            "tools/call" => Reply::Sse(
                vec![sse_event(
                    None,
                    &result(id, json!({"content": [], "isError": false})),
                )],
                None,
            ),
            _ => Reply::Json(200, vec![], Some(result(id, json!({})))),
        }
    })
    .await;
    let mut conn = connect(&server.url, options(TransportMode::StreamableHttp))
        .await
        .unwrap();
    send(&conn, modern(1, "tools/list", json!({}))).await;
    let listed = recv(&mut conn).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["query", "plain"], "{listed}");

    send(
        &conn,
        modern(
            2,
            "tools/call",
            json!({"name": "query", "arguments": {
                "region": "us-west1", "opts": {"limit": 42, "dry": false},
                "note": "Hello, 世界", "sql": "SELECT 1"}}),
        ),
    )
    .await;
    assert_eq!(recv(&mut conn).await["id"], 2);
    // Null and absent values are not mirrored.
    send(
        &conn,
        modern(
            3,
            "tools/call",
            json!({"name": "query", "arguments": {"region": null}}),
        ),
    )
    .await;
    assert_eq!(recv(&mut conn).await["id"], 3);
    send(
        &conn,
        modern(4, "resources/read", json!({"uri": "file:///tmp/ä.txt"})),
    )
    .await;
    assert_eq!(recv(&mut conn).await["id"], 4);
    close(conn).await;

    let reqs = server.drain();
    assert_eq!(reqs.len(), 4, "{reqs:?}");
    for r in &reqs {
        assert_eq!(r.header("mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(r.header("mcp-method"), Some(r.what().as_str()));
        assert_eq!(r.header("mcp-session-id"), None);
    }
    assert_eq!(reqs[0].header("mcp-name"), None);
    let call = &reqs[1];
    assert_eq!(call.header("mcp-name"), Some("query"));
    assert_eq!(call.header("mcp-param-region"), Some("us-west1"));
    assert_eq!(call.header("mcp-param-limit"), Some("42"));
    assert_eq!(call.header("mcp-param-dry-run"), Some("false"));
    assert_eq!(
        call.header("mcp-param-note"),
        Some("=?base64?SGVsbG8sIOS4lueVjA==?=")
    );
    let mirrored = |r: &Req| {
        r.headers
            .keys()
            .filter(|k| k.starts_with("mcp-param-"))
            .count()
    };
    assert_eq!(mirrored(call), 4);
    assert_eq!(mirrored(&reqs[2]), 0);
    assert_eq!(
        reqs[3].header("mcp-name"),
        Some(moat_transport::http::headers::encode_value("file:///tmp/ä.txt").as_str())
    );
}

#[tokio::test]
async fn cancelling_a_modern_request_closes_its_stream_instead_of_notifying() {
    let (hung_up_tx, mut hung_up) = mpsc::unbounded_channel();
    let mut server = Mini::start(move |req| match req.what().as_str() {
        "tools/call" => Reply::Sse(vec![": working\n\n".to_owned()], Some(hung_up_tx.clone())),
        _ => Reply::Json(202, vec![], None),
    })
    .await;
    let mut conn = connect(&server.url, options(TransportMode::StreamableHttp))
        .await
        .unwrap();
    send(
        &conn,
        modern(5, "tools/call", json!({"name": "slow", "arguments": {}})),
    )
    .await;
    // Give the POST time to reach the server, then cancel.
    tokio::time::sleep(Duration::from_millis(200)).await;
    send(
        &conn,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": 5, "reason": "user"}}),
    )
    .await;
    tokio::time::timeout(Duration::from_secs(5), hung_up.recv())
        .await
        .expect("the stream was not closed")
        .unwrap();
    // No answer is synthesized for a cancelled request.
    quiet(&mut conn).await;
    close(conn).await;
    let posts: Vec<String> = server.drain().iter().map(Req::what).collect();
    assert_eq!(posts, ["tools/call"], "the cancellation was sent over HTTP");
}

// ---------------------------------------------------------------------------
// Legacy HTTP+SSE
// ---------------------------------------------------------------------------

#[tokio::test]
async fn auto_falls_back_to_legacy_when_the_refusal_is_not_a_modern_json_rpc_error() {
    // A server serving the legacy pair next to a Streamable endpoint may answer a POST to its
    // SSE URL with a JSON-RPC error of its own (moat's did): that is still "not here".
    let (post_tx, mut posted) = mpsc::unbounded_channel::<String>();
    let posts = AtomicUsize::new(0);
    let mut server = Mini::start(move |req| match req.method.as_str() {
        // The first POST is the probe, to the URL given (the SSE URL).
        "POST" if posts.fetch_add(1, Ordering::SeqCst) == 0 => Reply::Json(
            404,
            vec![],
            Some(json!({"jsonrpc": "2.0", "id": null,
                        "error": {"code": -32000, "message": "Not found: the MCP endpoint is /mcp"}})),
        ),
        "GET" => Reply::Sse(
            vec![
                "event: endpoint\ndata: /message?sessionId=1\n\n".to_owned(),
                sse_event(None, &init_result(&json!("probe"))),
            ],
            None,
        ),
        _ => {
            let _ = post_tx.send(req.body.clone());
            Reply::Text(202, vec![], "Accepted".to_owned())
        }
    })
    .await;
    let mut conn = connect(&server.url, options(TransportMode::Auto))
        .await
        .unwrap();
    send(
        &conn,
        json!({"jsonrpc": "2.0", "id": "probe", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .await;
    // The same request, POSTed again to the endpoint the stream named.
    let reposted = tokio::time::timeout(Duration::from_secs(5), posted.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&reposted).unwrap()["id"],
        "probe"
    );
    let answer = recv(&mut conn).await;
    assert_eq!(answer["id"], "probe", "{answer}");
    assert!(answer["result"]["protocolVersion"].is_string(), "{answer}");
    close(conn).await;
    let methods: Vec<String> = server.drain().iter().map(|r| r.method.clone()).collect();
    assert_eq!(methods, ["POST", "GET", "POST"]);
}

#[tokio::test]
async fn auto_does_not_fall_back_on_a_modern_refusal() {
    // -32022 (unsupported revision) is what only a 2026-07-28 server answers: no GET.
    let mut server = Mini::start(|req| match req.method.as_str() {
        "POST" => Reply::Json(
            400,
            vec![],
            Some(json!({"jsonrpc": "2.0", "id": 1, "error": {
                "code": -32022, "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"]}}})),
        ),
        _ => Reply::Sse(
            vec!["event: endpoint\ndata: /message?sessionId=1\n\n".to_owned()],
            None,
        ),
    })
    .await;
    let mut conn = connect(&server.url, options(TransportMode::Auto))
        .await
        .unwrap();
    send(&conn, modern(1, "server/discover", json!({}))).await;
    let answer = recv(&mut conn).await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["error"]["code"], -32022, "{answer}");
    close(conn).await;
    let methods: Vec<String> = server.drain().iter().map(|r| r.method.clone()).collect();
    assert!(!methods.contains(&"GET".to_owned()), "{methods:?}");
}

#[tokio::test]
async fn a_legacy_endpoint_on_another_origin_is_refused() {
    let _server = Mini::start(|_| {
        Reply::Sse(
            vec!["event: endpoint\ndata: http://evil.example/message\n\n".to_owned()],
            None,
        )
    })
    .await;
    let err = connect(&_server.url, options(TransportMode::LegacySse))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("evil.example"), "{err}");
}

#[tokio::test]
async fn legacy_messages_flow_and_the_end_of_the_stream_ends_the_connection() {
    let (post_tx, mut posted) = mpsc::unbounded_channel::<String>();
    let mut server = Mini::start(move |req| match req.method.as_str() {
        "GET" => Reply::Sse(
            vec![
                ": hello\n\n".to_owned(),
                "event: endpoint\ndata: /message?session=1\n\n".to_owned(),
                format!(
                    "event: message\ndata: {}\n\n",
                    json!({"jsonrpc": "2.0", "method": "notifications/hi"})
                ),
                sse_event(None, &result(&json!(1), json!({}))),
            ],
            None,
        ),
        _ => {
            let _ = post_tx.send(req.body.clone());
            Reply::Text(202, vec![], "Accepted".to_owned())
        }
    })
    .await;
    let mut conn = connect(&server.url, options(TransportMode::LegacySse))
        .await
        .unwrap();
    send(&conn, json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).await;
    let posted = tokio::time::timeout(Duration::from_secs(5), posted.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&posted).unwrap()["method"],
        "ping"
    );
    assert_eq!(recv(&mut conn).await["method"], "notifications/hi");
    assert_eq!(recv(&mut conn).await["id"], 1);
    match tokio::time::timeout(Duration::from_secs(5), conn.inbound.recv()).await {
        Ok(Some(Inbound::Ended(why))) => assert!(why.contains("closed"), "{why}"),
        other => panic!("expected the end of the connection, got {other:?}"),
    }
    close(conn).await;
    let reqs = server.drain();
    assert_eq!(reqs[0].header("accept"), Some("text/event-stream"));
    assert_eq!(reqs[1].header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn oversized_answers_fail_the_request_instead_of_buffering() {
    let big = "x".repeat(4096);
    let mut server = Mini::start(move |req| {
        let id = req.json()["id"].clone();
        match req.what().as_str() {
            "tools/list" => Reply::Json(200, vec![], Some(result(&id, json!({"blob": big})))),
            _ => Reply::Sse(
                vec![sse_event(Some("1"), &result(&id, json!({"blob": big})))],
                None,
            ),
        }
    })
    .await;
    let mut conn = connect(
        &server.url,
        options(TransportMode::StreamableHttp).max_message_bytes(1024),
    )
    .await
    .unwrap();
    for (id, method) in [(1, "tools/list"), (2, "prompts/list")] {
        send(&conn, json!({"jsonrpc": "2.0", "id": id, "method": method})).await;
        let answer = recv(&mut conn).await;
        assert_eq!(answer["id"], id, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("1024"), "{message}");
    }
    close(conn).await;
    drop(server.drain());
}

#[tokio::test]
async fn bad_urls_and_headers_are_refused_up_front() {
    assert!(
        connect("ftp://x/mcp", ClientOptions::default())
            .await
            .is_err()
    );
    assert!(
        connect("not a url", ClientOptions::default())
            .await
            .is_err()
    );
    let bad = ClientOptions::default().header("x-bad", "a\nb");
    assert!(connect("http://127.0.0.1:1/mcp", bad).await.is_err());
}
