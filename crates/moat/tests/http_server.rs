//! The HTTP server under attack and at its edges: every refusal the issue names is tried
//! for real, over a socket, against a real `Server`.

use std::net::SocketAddr;
use std::time::Duration;

use moat::Server;
use moat::transport::http::server::{HttpServerHandle, HttpServerOptions};
use moat::{NoArgs, RequestContext};
use reqwest::StatusCode;
use serde_json::{Value, json};

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// How many calls of `wait` have ended (each only by being cancelled).
static WAITS_ENDED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn server() -> Server {
    Server::new("http-test", "1.0")
        .tool("echo", "Echo text", |a: Echo| async move {
            Ok::<_, String>(a.text)
        })
        .tool_with_context(
            "wait",
            "Report progress once, then wait until cancelled",
            |ctx: RequestContext, _: NoArgs| async move {
                // The handler is dropped when its request is cancelled: count the drop.
                struct Count;
                impl Drop for Count {
                    fn drop(&mut self) {
                        WAITS_ENDED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                let _count = Count;
                ctx.progress(1.0, None, None).await;
                ctx.cancelled().await;
                Ok::<_, String>("cancelled".to_owned())
            },
        )
        .tool_with_context(
            "flood",
            "Send many big progress notifications",
            |ctx: RequestContext, _: NoArgs| async move {
                let blob = "x".repeat(64 * 1024);
                for i in 0..600 {
                    ctx.progress(i as f64, None, Some(blob.clone())).await;
                }
                Ok::<_, String>("done".to_owned())
            },
        )
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Echo {
    text: String,
}

async fn start(options: HttpServerOptions) -> (SocketAddr, HttpServerHandle) {
    let http = server()
        .bind_http("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let addr = http.local_addr().unwrap();
    let handle = http.handle();
    tokio::spawn(http.run());
    (addr, handle)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn post(c: &reqwest::Client, addr: SocketAddr, body: &str) -> reqwest::RequestBuilder {
    c.post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_owned())
}

async fn initialize(c: &reqwest::Client, addr: SocketAddr) -> String {
    let r = post(c, addr, INIT).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let id = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert!(id.len() >= 32 && id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    let r = post(
        c,
        addr,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .header("mcp-session-id", &id)
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    id
}

async fn json_of(r: reqwest::Response) -> Value {
    serde_json::from_str(&r.text().await.unwrap()).unwrap()
}

#[tokio::test]
async fn dns_rebinding_is_refused_with_403() {
    let (addr, _) = start(HttpServerOptions::default()).await;
    let c = client();
    let r = post(&c, addr, INIT)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = post(&c, addr, INIT)
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // The same request from a local origin is served.
    let r = post(&c, addr, INIT)
        .header("origin", format!("http://localhost:{}", addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn sessions_are_required_checked_and_ended() {
    let (addr, handle) = start(HttpServerOptions::default()).await;
    let c = client();
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    // Missing session: 400.
    let r = post(&c, addr, list).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // Forged session: 404.
    let r = post(&c, addr, list)
        .header("mcp-session-id", "f".repeat(64))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // A real one works, then DELETE ends it and it is gone.
    let id = initialize(&c, addr).await;
    assert_eq!(handle.live_sessions(), 1);
    let r = post(&c, addr, list)
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json_of(r).await["result"]["tools"][0]["name"], "echo");
    let r = c
        .delete(format!("http://{addr}/mcp"))
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(handle.live_sessions(), 0);
    let r = post(&c, addr, list)
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn idle_sessions_expire_and_are_freed() {
    let mut options = HttpServerOptions::default();
    options.session_idle_timeout = Duration::from_millis(200);
    let (addr, handle) = start(options).await;
    let c = client();
    let id = initialize(&c, addr).await;
    assert_eq!(handle.live_sessions(), 1);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(handle.live_sessions(), 0, "the idle session was not freed");
    let r = post(&c, addr, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn oversized_bodies_get_413() {
    let mut options = HttpServerOptions::default();
    options.max_body_bytes = 1024;
    let (addr, _) = start(options).await;
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"pad":"{}"}}}}"#,
        "x".repeat(4096)
    );
    let r = post(&client(), addr, &big).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Chunked, with no Content-Length to refuse up front: still 413.
    let chunks =
        futures_util::stream::iter((0..8).map(|_| Ok::<_, std::io::Error>(vec![b' '; 512])));
    let r = client()
        .post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn bearer_tokens_are_enforced_with_a_challenge() {
    let mut options = HttpServerOptions::default();
    options.token = Some("s3cret-token".into());
    let (addr, _) = start(options).await;
    let c = client();
    for auth in [None, Some("Bearer wrong"), Some("Basic czNjcmV0LXRva2Vu")] {
        let mut req = post(&c, addr, INIT);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{auth:?}");
        let challenge = r.headers()["www-authenticate"].to_str().unwrap();
        assert!(challenge.starts_with("Bearer"), "{challenge}");
    }
    let r = post(&c, addr, INIT)
        .header("authorization", "Bearer s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn binding_off_loopback_needs_a_token() {
    let err = server()
        .bind_http("0.0.0.0:0".parse().unwrap(), HttpServerOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("bearer token"), "{err}");
}

fn modern_call(name: &str, text: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": name, "arguments": {"text": text},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }
    }})
    .to_string()
}

#[tokio::test]
async fn modern_requests_are_held_to_their_headers() {
    let (addr, _) = start(HttpServerOptions::default()).await;
    let c = client();
    let body = modern_call("echo", "hi");
    let ok = post(&c, addr, &body)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let v = json_of(ok).await;
    assert_eq!(v["result"]["content"][0]["text"], "hi", "{v}");
    assert!(v.get("mcp-session-id").is_none());

    let wrong_name = post(&c, addr, &body)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "delete_everything")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_name.status(), StatusCode::BAD_REQUEST);
    let v = json_of(wrong_name).await;
    assert_eq!(v["error"]["code"], -32020, "{v}");
    assert_eq!(v["id"], 7);

    let missing_method = post(&c, addr, &body)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-name", "echo")
        .send()
        .await
        .unwrap();
    assert_eq!(missing_method.status(), StatusCode::BAD_REQUEST);
    assert_eq!(json_of(missing_method).await["error"]["code"], -32020);

    // No sessions in this era: GET and DELETE are not part of it.
    let r = c
        .get(format!("http://{addr}/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_client_that_never_reads_cannot_grow_the_server() {
    let mut options = HttpServerOptions::default();
    options.sse_buffer_bytes = 1024 * 1024;
    let (addr, _) = start(options).await;
    let c = client();
    let id = initialize(&c, addr).await;
    // `flood` sends 600 × 64 KiB of progress (37.5 MiB). The client asks for progress and
    // then does not read for a while.
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"flood","arguments":{},"_meta":{"progressToken":"p"}}}"#;
    let r = post(&c, addr, call)
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Meanwhile the session still serves other requests.
    let ping = post(&c, addr, r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#)
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(json_of(ping).await["result"], json!({}));
    // What the stream still delivers is bounded by the buffer plus socket buffers, far
    // below what the tool produced: the server dropped the stream rather than queue it.
    let mut total = 0usize;
    let mut body = r.bytes_stream();
    use futures_util::StreamExt;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(b) => total += b.len(),
            Err(_) => break,
        }
    }
    assert!(total < 20 * 1024 * 1024, "read {total} bytes");
}

#[tokio::test]
async fn legacy_sse_sessions_work_and_end_with_their_stream() {
    let (addr, handle) = start(HttpServerOptions::default()).await;
    let c = client();
    let r = c
        .get(format!("http://{addr}/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let mut stream = r.bytes_stream();
    use futures_util::StreamExt;
    let mut seen = String::new();
    while !seen.contains("\n\n") {
        seen.push_str(&String::from_utf8_lossy(
            &stream.next().await.unwrap().unwrap(),
        ));
    }
    let endpoint = seen
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap()
        .to_owned();
    assert!(seen.starts_with("event: endpoint\n"), "{seen}");
    assert!(endpoint.starts_with("/message?sessionId="), "{endpoint}");
    let init = INIT.replace("2025-11-25", "2024-11-05");
    let r = c
        .post(format!("http://{addr}{endpoint}"))
        .header("content-type", "application/json")
        .body(init)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let mut answer = String::new();
    while !answer.contains("protocolVersion") {
        answer.push_str(&String::from_utf8_lossy(
            &stream.next().await.unwrap().unwrap(),
        ));
    }
    assert!(answer.contains("\"2024-11-05\""), "{answer}");
    assert_eq!(handle.live_sessions(), 1);
    drop(stream);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(handle.live_sessions(), 0, "the session outlived its stream");
}

#[tokio::test]
async fn slow_clients_are_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut options = HttpServerOptions::default();
    options.header_timeout = Duration::from_millis(300);
    options.body_timeout = Duration::from_millis(300);
    let (addr, _) = start(options).await;

    // Headers that never finish: the connection is closed.
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server kept a half-sent request open");

    // A body that never finishes: 408.
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
          Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"",
    )
    .await
    .unwrap();
    let mut buf = vec![0; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), slow.read(&mut buf))
        .await
        .expect("no answer to a stalled body")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
}

/// A 2026-07-28 request lives as long as its response: a client that drops the stream it is
/// reading (or the connection, while waiting for a JSON answer) cancels the request, and the
/// server stops working on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_request_ends_when_its_client_goes() {
    let (addr, _) = start(HttpServerOptions::default()).await;
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "wait", "arguments": {},
        "_meta": {
            "progressToken": "p",
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }
    }})
    .to_string();
    let request = |c: &reqwest::Client, accept: &str| {
        c.post(format!("http://{addr}/mcp"))
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(body.clone())
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "wait")
    };
    let ended_by = |n: usize| async move {
        for _ in 0..100 {
            if WAITS_ENDED.load(std::sync::atomic::Ordering::SeqCst) >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    };
    let before = WAITS_ENDED.load(std::sync::atomic::Ordering::SeqCst);

    // An SSE stream: its first event is the progress; then the client goes away.
    let c = client();
    let mut stream = request(&c, "application/json, text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let first = stream.chunk().await.unwrap().expect("an event");
    assert!(String::from_utf8_lossy(&first).contains("notifications/progress"));
    drop(stream);
    drop(c);
    assert!(
        ended_by(before + 1).await,
        "the dropped stream's request still runs"
    );

    // JSON only: the client gives up waiting and closes its connection.
    let c = client();
    let gave_up = request(&c, "application/json")
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(gave_up.is_err(), "no answer was expected: {gave_up:?}");
    drop(c);
    assert!(
        ended_by(before + 2).await,
        "the abandoned request still runs"
    );
}
