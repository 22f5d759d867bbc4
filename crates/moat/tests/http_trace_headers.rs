//! W3C trace context in HTTP headers (`traceparent`, `tracestate`, `baggage`) reaches a
//! handler through `RequestContext::trace_context`, in both eras, when the request's
//! `_meta` carries none; `_meta`'s wins when both do (SEP-414 puts it there).

use std::net::SocketAddr;

use moat::transport::http::server::HttpServerOptions;
use moat::{NoArgs, RequestContext, Server};
use serde_json::{Value, json};

const HEADER_PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const META_PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

async fn serve() -> SocketAddr {
    let server = Server::new("traced", "1").tool_with_context(
        "trace",
        "The trace context it received",
        |ctx: RequestContext, _: NoArgs| async move {
            Ok::<_, String>(match ctx.trace_context() {
                Some(t) => json!({"traceparent": t.traceparent, "tracestate": t.tracestate,
                                  "baggage": t.baggage})
                .to_string(),
                None => "none".to_owned(),
            })
        },
    );
    let http = server
        .bind_http("127.0.0.1:0".parse().unwrap(), HttpServerOptions::default())
        .await
        .unwrap();
    let addr = http.local_addr().unwrap();
    tokio::spawn(http.run());
    addr
}

/// The text of the tool's answer (JSON or the first SSE answer).
async fn answer(r: reqwest::Response) -> String {
    let body = r.text().await.unwrap();
    let json = body
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .unwrap_or(&body)
        .trim()
        .to_owned();
    let v: Value = serde_json::from_str(&json).unwrap_or_else(|_| panic!("{body}"));
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_owned()
}

fn post(addr: SocketAddr) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
}

fn modern_call(meta: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "trace", "arguments": {},
        "_meta": meta}})
}

fn modern_meta(extra: Value) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    if let (Some(m), Some(e)) = (meta.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    meta
}

fn modern(addr: SocketAddr, body: &Value) -> reqwest::RequestBuilder {
    post(addr)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "trace")
        .body(body.to_string())
}

#[tokio::test]
async fn a_modern_request_takes_the_headers_trace_context() {
    let addr = serve().await;
    let r = modern(addr, &modern_call(modern_meta(json!({}))))
        .header("traceparent", HEADER_PARENT)
        .header("tracestate", "vendor=1")
        .header("baggage", "user=ada")
        .send()
        .await
        .unwrap();
    let got: Value = serde_json::from_str(&answer(r).await).unwrap();
    assert_eq!(
        got,
        json!({"traceparent": HEADER_PARENT, "tracestate": "vendor=1", "baggage": "user=ada"})
    );

    // Both: `_meta`'s is the request's own.
    let r = modern(
        addr,
        &modern_call(modern_meta(json!({"traceparent": META_PARENT}))),
    )
    .header("traceparent", HEADER_PARENT)
    .send()
    .await
    .unwrap();
    let got: Value = serde_json::from_str(&answer(r).await).unwrap();
    assert_eq!(got["traceparent"], META_PARENT);

    // Neither.
    let r = modern(addr, &modern_call(modern_meta(json!({}))))
        .send()
        .await
        .unwrap();
    assert_eq!(answer(r).await, "none");
}

#[tokio::test]
async fn a_session_request_takes_the_headers_trace_context() {
    let addr = serve().await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let r = post(addr).body(init.to_string()).send().await.unwrap();
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    post(addr)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .body(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .send()
        .await
        .unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "trace", "arguments": {}}});
    let r = post(addr)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("traceparent", HEADER_PARENT)
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    let got: Value = serde_json::from_str(&answer(r).await).unwrap();
    assert_eq!(got["traceparent"], HEADER_PARENT);
    assert_eq!(got["tracestate"], Value::Null);
}
