//! Who is calling, as a handler sees it: an SDK server over HTTP with an OAuth issuer
//! hands each request's identity (from its own access token) to the tool, in the handshake
//! era (a session is its opener's; the token of each request names the caller) and in
//! 2026-07-28; a tool that
//! requires a scope refuses a token without it with 403 `insufficient_scope` naming the
//! scope to ask for (step-up); over a connection served as the local user, the identity
//! is that user.

use std::net::SocketAddr;
use std::sync::Arc;

use moat::transport::http::server::{HttpServerHandle, HttpServerOptions, ResourceOptions};
use moat::{NoArgs, RequestContext, Server};
use moat_test_support::TestIssuer;
use reqwest::StatusCode;
use serde_json::{Value, json};

const RESOURCE: &str = "http://127.0.0.1/mcp";

fn server() -> Server {
    Server::new("identity-test", "1.0")
        .tool_with_context(
            "whoami",
            "Who is calling",
            |ctx: RequestContext, _: NoArgs| async move {
                let id = ctx.identity().ok_or("no identity")?;
                Ok::<_, String>(format!(
                    "{}|{}|{}",
                    id.subject.as_deref().unwrap_or("-"),
                    id.client_id.as_deref().unwrap_or("-"),
                    id.claim_strings("groups").join(",")
                ))
            },
        )
        .tool("drop_table", "Needs db:write", |_: NoArgs| async move {
            Ok::<_, String>("dropped")
        })
        .tool_scopes("drop_table", ["db:write"])
}

async fn start(issuer: &TestIssuer) -> (SocketAddr, HttpServerHandle) {
    let mut resource = ResourceOptions::new(issuer.url.clone(), RESOURCE);
    resource.scopes = vec!["mcp:tools".into()];
    resource.claims = vec!["groups".into()];
    let mut options = HttpServerOptions::default();
    options.resource = Some(resource);
    let http = server()
        .bind_http("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let addr = http.local_addr().unwrap();
    let handle = http.handle();
    tokio::spawn(http.run());
    (addr, handle)
}

fn post(addr: SocketAddr, token: &str, body: &Value) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(token)
        .body(body.to_string())
}

async fn initialize(addr: SocketAddr, token: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let r = post(addr, token, &init).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let id = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let r = post(
        addr,
        token,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .header("mcp-session-id", &id)
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    id
}

fn call(id: i64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": {}}})
}

fn text(v: &Value) -> String {
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {v}"))
        .to_owned()
}

#[tokio::test]
async fn each_request_carries_its_own_callers_identity() {
    let issuer = TestIssuer::start();
    let (addr, _handle) = start(&issuer).await;
    let alice = issuer.token(
        RESOURCE,
        "alice",
        "cli-a",
        "mcp:tools",
        json!({"groups": ["ops", "dev"]}),
    );
    let bob = issuer.token(RESOURCE, "bob", "cli-b", "mcp:tools", json!({}));

    // Handshake era: each user in a session of their own, and a session is its opener's:
    // another user's token does not get into it.
    let alice_session = initialize(addr, &alice).await;
    let bob_session = initialize(addr, &bob).await;
    for (n, token, session, want) in [
        (2, &alice, &alice_session, "alice|cli-a|ops,dev"),
        (3, &bob, &bob_session, "bob|cli-b|"),
        (4, &alice, &alice_session, "alice|cli-a|ops,dev"),
    ] {
        let r = post(addr, token, &call(n, "whoami"))
            .header("mcp-session-id", session)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
        assert_eq!(text(&v), want, "{v}");
    }
    let r = post(addr, &bob, &call(5, "whoami"))
        .header("mcp-session-id", &alice_session)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::NOT_FOUND,
        "bob used alice's session"
    );
    let r = reqwest::Client::new()
        .delete(format!("http://{addr}/mcp"))
        .bearer_auth(&bob)
        .header("mcp-session-id", &alice_session)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::NOT_FOUND,
        "bob ended alice's session"
    );

    // A new token of the same user (here with another client) in the same session: the
    // identity is the request's, not the session's.
    let alice_again = issuer.token(RESOURCE, "alice", "cli-c", "mcp:tools", json!({}));
    let r = post(addr, &alice_again, &call(6, "whoami"))
        .header("mcp-session-id", &alice_session)
        .send()
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(text(&v), "alice|cli-c|", "{v}");

    // 2026-07-28: a request on a connection of its own.
    for (token, want) in [(&alice, "alice|cli-a|ops,dev"), (&bob, "bob|cli-b|")] {
        let mut body = call(7, "whoami");
        body["params"]["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        });
        let r = post(addr, token, &body)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "whoami")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
        assert_eq!(text(&v), want, "{v}");
    }
}

#[tokio::test]
async fn a_tool_scope_missing_is_403_with_the_scope_to_step_up_to() {
    let issuer = TestIssuer::start();
    let (addr, _handle) = start(&issuer).await;
    let reader = issuer.token(RESOURCE, "alice", "cli", "mcp:tools", json!({}));
    let writer = issuer.token(RESOURCE, "alice", "cli", "mcp:tools db:write", json!({}));
    let session = initialize(addr, &reader).await;

    let r = post(addr, &reader, &call(2, "drop_table"))
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(
        challenge.contains(r#"error="insufficient_scope""#),
        "{challenge}"
    );
    assert!(
        challenge.contains(r#"scope="mcp:tools db:write""#),
        "{challenge}"
    );
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(
        v["error"]["code"],
        moat::transport::http::server::INSUFFICIENT_SCOPE
    );
    assert_eq!(v["error"]["data"]["scope"], "db:write");

    // Stepped up: the same session, a token with the scope.
    let r = post(addr, &writer, &call(3, "drop_table"))
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(text(&v), "dropped");

    // A tool without a scope of its own is not affected.
    let r = post(addr, &reader, &call(4, "whoami"))
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_connection_served_as_the_local_user_is_that_user() {
    use moat::transport::{Connection, Identity, Limits};
    let (a, b) = tokio::io::duplex(64 * 1024);
    let ((ar, aw), (br, bw)) = (tokio::io::split(a), tokio::io::split(b));
    let me = Identity::local_user();
    let subject = me.subject.clone().expect("the local user has a name");
    let _peer = server().start_as(
        Connection::from_lines(tokio::io::BufReader::new(ar), aw, Limits::default()),
        Some(Arc::new(me)),
    );
    let client = moat::Client::builder()
        .connect(Connection::from_lines(
            tokio::io::BufReader::new(br),
            bw,
            Limits::default(),
        ))
        .await
        .unwrap();
    let result = client.call_tool("whoami", json!({})).await.unwrap();
    let v = serde_json::to_value(&result).unwrap();
    assert_eq!(v["content"][0]["text"], format!("{subject}|-|"), "{v}");
    // The local user has no token: a tool's scopes are not asked of them.
    let result = client.call_tool("drop_table", json!({})).await.unwrap();
    assert_ne!(result.is_error, Some(true));
}

/// A legacy (2024-11-05 HTTP+SSE) session: the stream, and the path to post to.
struct Legacy {
    stream: reqwest::Response,
    buffer: String,
    post_path: String,
}

impl Legacy {
    async fn open(addr: SocketAddr, token: &str) -> Legacy {
        let stream = reqwest::Client::new()
            .get(format!("http://{addr}/sse"))
            .header("accept", "text/event-stream")
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), StatusCode::OK);
        let mut legacy = Legacy {
            stream,
            buffer: String::new(),
            post_path: String::new(),
        };
        legacy.post_path = legacy.event("endpoint").await;
        legacy
    }

    /// The data of the next event named `name` (`message` events are JSON-RPC messages).
    async fn event(&mut self, name: &str) -> String {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let mut kind = "message";
                let mut data = String::new();
                for line in event.lines() {
                    if let Some(k) = line.strip_prefix("event:") {
                        kind = k.trim();
                    } else if let Some(d) = line.strip_prefix("data:") {
                        data.push_str(d.trim_start());
                    }
                }
                if kind == name {
                    return data;
                }
            }
            let chunk =
                tokio::time::timeout(std::time::Duration::from_secs(10), self.stream.chunk())
                    .await
                    .expect("an event within 10 s")
                    .unwrap()
                    .expect("the stream is open");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    async fn post(&self, addr: SocketAddr, token: &str, body: &Value) -> StatusCode {
        reqwest::Client::new()
            .post(format!("http://{addr}{}", self.post_path))
            .header("content-type", "application/json")
            .bearer_auth(token)
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .status()
    }

    /// The answer to request `id`, from the stream.
    async fn answer(&mut self, id: i64) -> Value {
        loop {
            let v: Value = serde_json::from_str(&self.event("message").await).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }
}

#[tokio::test]
async fn legacy_sessions_carry_the_caller_and_are_the_openers() {
    let issuer = TestIssuer::start();
    let (addr, _handle) = start(&issuer).await;
    let alice = issuer.token(RESOURCE, "alice", "cli-a", "mcp:tools", json!({}));
    let bob = issuer.token(RESOURCE, "bob", "cli-b", "mcp:tools", json!({}));
    let mut session = Legacy::open(addr, &alice).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    assert_eq!(
        session.post(addr, &alice, &init).await,
        StatusCode::ACCEPTED
    );
    session.answer(1).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        session.post(addr, &alice, &initialized).await,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        session.post(addr, &alice, &call(2, "whoami")).await,
        StatusCode::ACCEPTED
    );
    assert_eq!(text(&session.answer(2).await), "alice|cli-a|");
    // Bob's token does not find alice's session.
    assert_eq!(
        session.post(addr, &bob, &call(3, "whoami")).await,
        StatusCode::NOT_FOUND
    );
}
