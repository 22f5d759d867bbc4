//! The HTTP server's health endpoints and its drain on shutdown, over real sockets: `/livez`
//! and `/healthz` answer probes that carry no token and any `Host`; `/healthz` says 503 while
//! the application is not ready; on shutdown new connections are refused, a session's GET
//! stream ends at once, the call in flight finishes and is answered, and a call that outlasts
//! `drain_timeout` does not keep the server from stopping.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use moat::transport::http::server::{HttpServer, HttpServerOptions};
use moat::{NoArgs, Server};
use reqwest::StatusCode;
use serde_json::json;
use tokio::sync::{Notify, oneshot};

/// Generous bounds for "it happens" (nothing here measures time).
const WITHIN: Duration = Duration::from_secs(30);

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// A server whose `wait` tool says when it started and answers when released.
fn server(started: Arc<Notify>, release: Arc<Notify>) -> Server {
    Server::new("drain-test", "1.0").tool("wait", "Wait to be released", move |_: NoArgs| {
        let (started, release) = (started.clone(), release.clone());
        async move {
            started.notify_one();
            release.notified().await;
            "finished"
        }
    })
}

async fn bind(options: HttpServerOptions) -> (HttpServer, SocketAddr, Arc<Notify>, Arc<Notify>) {
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let http = server(started.clone(), release.clone())
        .bind_http("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let addr = http.local_addr().unwrap();
    (http, addr, started, release)
}

fn post(c: &reqwest::Client, addr: SocketAddr, body: String) -> reqwest::RequestBuilder {
    c.post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body)
}

async fn initialize(c: &reqwest::Client, addr: SocketAddr) -> String {
    let r = post(c, addr, INIT.to_owned()).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let id = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let r = post(
        c,
        addr,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
    )
    .header("mcp-session-id", &id)
    .header("mcp-protocol-version", "2025-11-25")
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    id
}

fn call_wait() -> String {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
           "params": {"name": "wait", "arguments": {}}})
    .to_string()
}

/// Waits until a new connection to `addr` is refused.
async fn refused(addr: SocketAddr) {
    tokio::time::timeout(WITHIN, async {
        loop {
            match reqwest::get(format!("http://{addr}/livez")).await {
                Err(e) if e.is_connect() => return,
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    })
    .await
    .expect("new connections are refused once draining");
}

#[tokio::test]
async fn probes_need_no_token_or_allowed_host_and_readiness_is_the_applications() {
    let mut options = HttpServerOptions::default();
    options.token = Some("secret".into());
    let (http, addr, _, _) = bind(options).await;
    let readiness = http.readiness();
    tokio::spawn(http.run());
    let c = reqwest::Client::new();

    let live = c
        .get(format!("http://{addr}/livez"))
        .header("host", "10.1.2.3:8080")
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), StatusCode::OK);
    assert_eq!(live.text().await.unwrap().trim(), r#"{"status":"alive"}"#);
    let ready = c
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    assert_eq!(ready.text().await.unwrap().trim(), r#"{"status":"ready"}"#);

    readiness.set_ready(false);
    let starting = c
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(starting.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        starting.text().await.unwrap().trim(),
        r#"{"status":"starting"}"#
    );
    readiness.set_ready(true);
    let ready = c
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), StatusCode::OK);

    // Only GET and HEAD are probes; the MCP endpoint still wants its token and host.
    let r = c
        .post(format!("http://{addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = post(&c, addr, INIT.to_owned()).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = post(&c, addr, INIT.to_owned())
        .bearer_auth("secret")
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn probes_can_be_turned_off() {
    let mut options = HttpServerOptions::default();
    options.health = false;
    let (http, addr, _, _) = bind(options).await;
    tokio::spawn(http.run());
    let r = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn shutdown_lets_the_call_in_flight_finish_and_refuses_new_connections() {
    let mut options = HttpServerOptions::default();
    options.drain_timeout = WITHIN;
    let (http, addr, started, release) = bind(options).await;
    let readiness = http.readiness();
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(http.run_until(async {
        let _ = stopped.await;
    }));

    let c = reqwest::Client::new();
    let session = initialize(&c, addr).await;
    let get = c
        .get(format!("http://{addr}/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), StatusCode::OK);
    let call = tokio::spawn(
        post(&c, addr, call_wait())
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .send(),
    );
    started.notified().await;

    stop.send(()).unwrap();
    // The GET stream carries no answer: it ends now, and its client reconnects elsewhere.
    tokio::time::timeout(WITHIN, get.text())
        .await
        .expect("the GET stream ends when the drain starts")
        .expect("the GET stream ends cleanly");
    refused(addr).await;
    assert!(readiness.is_draining());
    assert!(
        !served.is_finished(),
        "the server waits for the call in flight"
    );

    release.notify_one();
    let answer = call.await.unwrap().expect("the call's response");
    assert_eq!(answer.status(), StatusCode::OK);
    let text = answer.text().await.expect("the call's answer");
    assert!(text.contains("finished"), "{text}");
    tokio::time::timeout(WITHIN, served)
        .await
        .expect("the server stops once the call is answered")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_call_outlasting_the_drain_timeout_does_not_keep_the_server_running() {
    let mut options = HttpServerOptions::default();
    options.drain_timeout = Duration::from_millis(200);
    let (http, addr, started, _release) = bind(options).await;
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(http.run_until(async {
        let _ = stopped.await;
    }));
    let c = reqwest::Client::new();
    let session = initialize(&c, addr).await;
    let call = tokio::spawn(async move {
        let r = post(&c, addr, call_wait())
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await?;
        r.text().await
    });
    started.notified().await;
    stop.send(()).unwrap();
    tokio::time::timeout(WITHIN, served)
        .await
        .expect("the server stops after the drain timeout")
        .unwrap()
        .unwrap();
    // The client is not left hanging: its response ends, without an answer.
    let text = tokio::time::timeout(WITHIN, call)
        .await
        .expect("the call's response ends")
        .unwrap()
        .unwrap_or_default();
    assert!(!text.contains("finished"), "{text}");
}
