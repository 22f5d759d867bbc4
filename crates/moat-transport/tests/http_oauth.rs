//! OAuth through the real HTTP client transport: an MCP server that answers 401 until it
//! sees a token its authorization server issued (and 403 `insufficient_scope` for
//! `tools/call` without the `write` scope), and that authorization server, both in-test
//! (hyper, on loopback) and recording every request. The transport must authorize on the
//! 401, send the request again, and carry the token on every request after that: POSTs, the
//! standalone GET stream, the session's DELETE, and both legacy HTTP+SSE requests.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame as BodyFrame;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use moat_transport::http::client::{ClientError, ClientOptions, TransportMode, connect};
use moat_transport::http::oauth::{
    AuthError, Authorizer, HeadlessUserAgent, OAuthConfig, RequestAuth, Verdict,
};
use moat_transport::{Connection, Frame, Inbound};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use url::Url;

// ---------------------------------------------------------------------------
// A recording HTTP server whose answers may be event streams.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Req {
    server: &'static str,
    method: String,
    path: String,
    query: HashMap<String, String>,
    headers: HeaderMap,
    body: String,
}

impl Req {
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    fn form(&self) -> HashMap<String, String> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .into_owned()
            .collect()
    }

    /// The JSON-RPC method of a POST, else the HTTP method.
    fn what(&self) -> String {
        match self.json().get("method").and_then(Value::as_str) {
            Some(m) => m.to_owned(),
            None => self.method.clone(),
        }
    }

    fn token(&self) -> Option<String> {
        self.header("authorization")?
            .strip_prefix("Bearer ")
            .map(str::to_owned)
    }
}

enum Body {
    Text(String),
    /// An event stream: whatever is sent on the channel, until it is dropped.
    Sse(mpsc::UnboundedReceiver<String>),
}

struct Resp {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Body,
}

fn json_resp(status: u16, body: Value) -> Resp {
    Resp {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: Body::Text(body.to_string()),
    }
}

fn empty(status: u16) -> Resp {
    Resp {
        status,
        headers: vec![],
        body: Body::Text(String::new()),
    }
}

fn sse(rx: mpsc::UnboundedReceiver<String>) -> Resp {
    Resp {
        status: 200,
        headers: vec![("content-type", "text/event-stream".into())],
        body: Body::Sse(rx),
    }
}

type Handler = Arc<dyn Fn(&Req) -> Resp + Send + Sync>;
type Log = Arc<Mutex<Vec<Req>>>;

async fn bind() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://127.0.0.1:{}", l.local_addr().unwrap().port());
    (l, base)
}

fn serve(listener: TcpListener, server: &'static str, log: Log, handler: Handler) {
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handler = handler.clone();
            let log = log.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let handler = handler.clone();
                    let log = log.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let query = parts
                            .uri
                            .query()
                            .map(|q| {
                                url::form_urlencoded::parse(q.as_bytes())
                                    .into_owned()
                                    .collect()
                            })
                            .unwrap_or_default();
                        let r = Req {
                            server,
                            method: parts.method.to_string(),
                            path: parts.uri.path().to_owned(),
                            query,
                            headers: parts.headers,
                            body: String::from_utf8_lossy(&body).into_owned(),
                        };
                        log.lock().unwrap().push(r.clone());
                        let out = handler(&r);
                        let mut resp = hyper::Response::builder().status(out.status);
                        for (k, v) in out.headers {
                            resp = resp.header(k, v);
                        }
                        let body: BoxBody<Bytes, Infallible> = match out.body {
                            Body::Text(t) => Full::new(Bytes::from(t)).boxed(),
                            Body::Sse(rx) => {
                                let chunks = futures_util::stream::unfold(rx, |mut rx| async {
                                    let chunk = rx.recv().await?;
                                    Some((Ok(BodyFrame::data(Bytes::from(chunk))), rx))
                                });
                                BodyExt::boxed(StreamBody::new(chunks))
                            }
                        };
                        Ok::<_, Infallible>(resp.body(body).unwrap())
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

// ---------------------------------------------------------------------------
// The authorization server: metadata, DCR, a redirecting /authorize, PKCE-checking /token.
// ---------------------------------------------------------------------------

/// Tokens issued → their scopes.
type Tokens = Arc<Mutex<HashMap<String, Vec<String>>>>;

/// Codes handed out → their PKCE challenge and scopes.
type Codes = Arc<Mutex<HashMap<String, (String, Vec<String>)>>>;

fn as_handler(base: String, tokens: Tokens) -> Handler {
    let codes: Codes = Arc::default();
    let counter = Arc::new(AtomicUsize::new(0));
    Arc::new(move |req: &Req| {
        let scopes_of = |s: Option<&String>| -> Vec<String> {
            s.map(|s| s.split(' ').map(str::to_owned).collect())
                .unwrap_or_default()
        };
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/.well-known/oauth-authorization-server") => json_resp(
                200,
                json!({
                    "issuer": base,
                    "authorization_endpoint": format!("{base}/authorize"),
                    "token_endpoint": format!("{base}/token"),
                    "registration_endpoint": format!("{base}/register"),
                    "response_types_supported": ["code"],
                    "grant_types_supported": ["authorization_code", "refresh_token"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"],
                    "authorization_response_iss_parameter_supported": true,
                }),
            ),
            ("POST", "/register") => json_resp(
                201,
                json!({"client_id": "client-1", "redirect_uris": req.json()["redirect_uris"],
                       "token_endpoint_auth_method": "none"}),
            ),
            ("GET", "/authorize") => {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let code = format!("code-{n}");
                let challenge = req.query.get("code_challenge").cloned().unwrap_or_default();
                codes
                    .lock()
                    .unwrap()
                    .insert(code.clone(), (challenge, scopes_of(req.query.get("scope"))));
                let mut to = Url::parse(&req.query["redirect_uri"]).unwrap();
                to.query_pairs_mut()
                    .append_pair("code", &code)
                    .append_pair("state", &req.query["state"])
                    .append_pair("iss", &base);
                Resp {
                    status: 302,
                    headers: vec![("location", to.to_string())],
                    body: Body::Text(String::new()),
                }
            }
            ("POST", "/token") => {
                let form = req.form();
                let code = form.get("code").cloned().unwrap_or_default();
                let Some((challenge, scopes)) = codes.lock().unwrap().remove(&code) else {
                    return json_resp(400, json!({"error": "invalid_grant"}));
                };
                let verifier = form.get("code_verifier").cloned().unwrap_or_default();
                let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
                if computed != challenge || !form.contains_key("resource") {
                    return json_resp(400, json!({"error": "invalid_grant"}));
                }
                let token = format!("tok-{code}");
                tokens.lock().unwrap().insert(token.clone(), scopes.clone());
                json_resp(
                    200,
                    json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600,
                           "scope": scopes.join(" ")}),
                )
            }
            _ => json_resp(404, json!({"error": "not_found"})),
        }
    })
}

// ---------------------------------------------------------------------------
// The MCP server: Streamable HTTP (handshake era) at /mcp, legacy HTTP+SSE at /sse.
// ---------------------------------------------------------------------------

#[derive(Default)]
struct RsState {
    /// Open event streams, kept so that they stay open.
    streams: Vec<mpsc::UnboundedSender<String>>,
    /// The legacy stream, where answers to `/message` POSTs go.
    legacy: Option<mpsc::UnboundedSender<String>>,
}

fn answer(req: &Value) -> Value {
    let id = req["id"].clone();
    let result = match req["method"].as_str().unwrap_or("") {
        "initialize" => json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                               "serverInfo": {"name": "guarded", "version": "1"}}),
        "tools/list" => json!({"tools": []}),
        _ => json!({"content": [{"type": "text", "text": "done"}]}),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// `prm_resource`: what the protected resource metadata claims (`None`: the URL it is for).
fn rs_handler(
    base: String,
    as_base: String,
    tokens: Tokens,
    prm_resource: Option<String>,
) -> Handler {
    let state: Arc<Mutex<RsState>> = Arc::default();
    Arc::new(move |req: &Req| {
        let prm_prefix = "/.well-known/oauth-protected-resource";
        if let Some(path) = req.path.strip_prefix(prm_prefix) {
            let resource = prm_resource
                .clone()
                .unwrap_or_else(|| format!("{base}{path}"));
            return json_resp(
                200,
                json!({"resource": resource, "authorization_servers": [as_base],
                       "scopes_supported": ["read", "write"]}),
            );
        }
        // The resource the request belongs to: legacy messages belong to /sse.
        let mount = if req.path == "/message" {
            "/sse"
        } else {
            req.path.as_str()
        };
        let prm = format!("{base}{prm_prefix}{mount}");
        let challenge = |status: u16, error: &str, scope: &str| Resp {
            status,
            headers: vec![(
                "www-authenticate",
                format!("Bearer error=\"{error}\", scope=\"{scope}\", resource_metadata=\"{prm}\""),
            )],
            body: Body::Text(String::new()),
        };
        let scopes = req
            .token()
            .and_then(|t| tokens.lock().unwrap().get(&t).cloned());
        let Some(scopes) = scopes else {
            return challenge(401, "invalid_token", "read");
        };
        let message = req.json();
        if message["method"] == "tools/call" && !scopes.iter().any(|s| s == "write") {
            return challenge(403, "insufficient_scope", "read write");
        }
        let mut st = state.lock().unwrap();
        match (req.method.as_str(), req.path.as_str()) {
            ("POST", "/mcp") if message.get("id").is_none() => empty(202),
            ("POST", "/mcp") => {
                let mut r = json_resp(200, answer(&message));
                r.headers.push(("mcp-session-id", "session-1".into()));
                r
            }
            ("GET", "/mcp") => {
                let (tx, rx) = mpsc::unbounded_channel();
                let _ = tx.send(": open\n\n".to_owned());
                st.streams.push(tx);
                sse(rx)
            }
            ("DELETE", "/mcp") => empty(200),
            ("GET", "/sse") => {
                let (tx, rx) = mpsc::unbounded_channel();
                let _ = tx.send("event: endpoint\ndata: /message?sessionId=1\n\n".to_owned());
                st.legacy = Some(tx);
                sse(rx)
            }
            ("POST", "/message") => {
                if message.get("id").is_some()
                    && let Some(tx) = &st.legacy
                {
                    let _ = tx.send(format!("event: message\ndata: {}\n\n", answer(&message)));
                }
                empty(202)
            }
            _ => empty(404),
        }
    })
}

struct World {
    rs: String,
    log: Log,
}

impl World {
    async fn new(prm_resource: Option<&str>) -> World {
        let log: Log = Arc::default();
        let tokens: Tokens = Arc::default();
        let (as_listener, as_base) = bind().await;
        let (rs_listener, rs) = bind().await;
        serve(
            as_listener,
            "as",
            log.clone(),
            as_handler(as_base.clone(), tokens.clone()),
        );
        serve(
            rs_listener,
            "rs",
            log.clone(),
            rs_handler(rs.clone(), as_base, tokens, prm_resource.map(str::to_owned)),
        );
        World { rs, log }
    }

    fn requests(&self, server: &str) -> Vec<Req> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.server == server)
            .cloned()
            .collect()
    }

    /// The MCP server's requests, without the metadata it served.
    fn mcp_requests(&self) -> Vec<Req> {
        self.requests("rs")
            .into_iter()
            .filter(|r| !r.path.starts_with("/.well-known/"))
            .collect()
    }

    fn authorizations(&self) -> Vec<Req> {
        self.requests("as")
            .into_iter()
            .filter(|r| r.path == "/authorize")
            .collect()
    }
}

fn oauth_options(mode: TransportMode) -> ClientOptions {
    ClientOptions::default()
        .mode(mode)
        .request_timeout(Some(Duration::from_secs(5)))
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(200))
        .oauth(
            OAuthConfig::authorization_code(HeadlessUserAgent::default())
                .timeout(Duration::from_secs(5)),
        )
}

// ---------------------------------------------------------------------------
// Driving a connection by hand.
// ---------------------------------------------------------------------------

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
    let closer = conn.closer.take().unwrap();
    closer().await;
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

// ---------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------

/// The first POST meets a 401: the transport authorizes (PRM, metadata, registration,
/// authorization code with PKCE, token) and sends it again. From then on every request of
/// the session carries the token; `tools/call` meets a 403 `insufficient_scope` and is sent
/// again after a step-up authorization with both scopes.
#[tokio::test]
async fn a_401_is_authorized_and_retried_and_every_later_request_carries_the_token() {
    let world = World::new(None).await;
    let url = format!("{}/mcp", world.rs);
    let mut conn = connect(&url, oauth_options(TransportMode::StreamableHttp))
        .await
        .unwrap();
    send(&conn, initialize(1)).await;
    let init = recv(&mut conn).await;
    assert_eq!(init["result"]["serverInfo"]["name"], "guarded", "{init}");
    send(
        &conn,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    send(&conn, request(2, "tools/list", json!({}))).await;
    assert_eq!(recv(&mut conn).await["result"]["tools"], json!([]));
    send(&conn, request(3, "tools/call", json!({"name": "x"}))).await;
    let called = recv(&mut conn).await;
    assert_eq!(called["id"], 3, "{called}");
    assert_eq!(called["result"]["content"][0]["text"], "done", "{called}");
    close(conn).await;

    // One authorization for the 401 (the challenge's scope), one step-up (the union).
    let auths = world.authorizations();
    let scopes: Vec<_> = auths
        .iter()
        .map(|r| r.query.get("scope").cloned())
        .collect();
    assert_eq!(
        scopes,
        [Some("read".to_owned()), Some("read write".to_owned())]
    );
    assert!(auths.iter().all(|r| r.query.contains_key("resource")));

    let mcp = world.mcp_requests();
    let seen: Vec<String> = mcp
        .iter()
        .map(|r| format!("{} {}", r.what(), r.token().is_some()))
        .collect();
    // The very first request went without a token; everything after it carried one.
    assert_eq!(seen[0], "initialize false", "{seen:?}");
    assert!(mcp[1..].iter().all(|r| r.token().is_some()), "{seen:?}");
    for what in [
        "initialize true",
        "notifications/initialized true",
        "GET true",
        "tools/list true",
        "tools/call true",
        "DELETE true",
    ] {
        assert!(seen.iter().any(|s| s == what), "no {what:?} in {seen:?}");
    }
    // The step-up: tools/call went out with the first token, then with the wider one.
    let calls: Vec<_> = mcp.iter().filter(|r| r.what() == "tools/call").collect();
    assert_eq!(calls.len(), 2, "{seen:?}");
    assert_ne!(calls[0].token(), calls[1].token());
    // Tokens went to the MCP server only; the authorization server never saw one.
    assert!(
        world
            .requests("as")
            .iter()
            .all(|r| r.header("authorization").is_none())
    );
}

/// Two requests that meet their 401 together lead to one authorization, and both are
/// answered.
#[tokio::test]
async fn concurrent_401s_lead_to_one_authorization() {
    let world = World::new(None).await;
    let url = format!("{}/mcp", world.rs);
    let mut conn = connect(&url, oauth_options(TransportMode::StreamableHttp))
        .await
        .unwrap();
    // Modern-era requests: each is its own POST, sent at once.
    let meta = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
    send(&conn, request(1, "tools/list", meta.clone())).await;
    send(&conn, request(2, "tools/list", meta)).await;
    let mut ids = vec![recv(&mut conn).await["id"].clone()];
    ids.push(recv(&mut conn).await["id"].clone());
    ids.sort_by_key(|v| v.as_u64());
    assert_eq!(ids, [json!(1), json!(2)]);
    close(conn).await;
    assert_eq!(world.authorizations().len(), 1);
}

/// Legacy HTTP+SSE: the GET of the event stream meets the 401 and is authorized for the
/// SSE URL; the POSTs to the endpoint it names carry the token.
#[tokio::test]
async fn legacy_sse_is_authorized_for_the_sse_url() {
    let world = World::new(None).await;
    let url = format!("{}/sse", world.rs);
    let mut conn = connect(&url, oauth_options(TransportMode::LegacySse))
        .await
        .unwrap();
    send(&conn, request(1, "tools/list", json!({}))).await;
    let answer = recv(&mut conn).await;
    assert_eq!(answer["result"]["tools"], json!([]), "{answer}");
    close(conn).await;

    let auths = world.authorizations();
    assert_eq!(auths.len(), 1);
    assert_eq!(
        auths[0].query.get("resource").map(String::as_str),
        Some(url.as_str())
    );
    let seen: Vec<String> = world
        .mcp_requests()
        .iter()
        .map(|r| format!("{} {} {}", r.method, r.path, r.token().is_some()))
        .collect();
    assert_eq!(
        seen,
        ["GET /sse false", "GET /sse true", "POST /message true"],
    );
}

/// Authorization that cannot succeed (the metadata names another resource) fails the
/// request with a JSON-RPC error that says why, before any authorization server is asked.
#[tokio::test]
async fn an_authorization_failure_is_the_requests_error() {
    let world = World::new(Some("https://elsewhere.example.com/mcp")).await;
    let url = format!("{}/mcp", world.rs);
    let mut conn = connect(&url, oauth_options(TransportMode::StreamableHttp))
        .await
        .unwrap();
    send(&conn, initialize(1)).await;
    let answer = recv(&mut conn).await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("authorization failed"), "{message}");
    assert!(message.contains("elsewhere.example.com"), "{message}");
    assert!(message.contains("initialize"), "{message}");
    close(conn).await;
    assert!(world.requests("as").is_empty());
    assert_eq!(world.mcp_requests().len(), 1);
}

/// An OAuth configuration that cannot work is refused when connecting.
#[tokio::test]
async fn an_unusable_oauth_configuration_is_refused_up_front() {
    let agent = HeadlessUserAgent::new(Url::parse("ftp://localhost/callback").unwrap());
    let options = ClientOptions::default().oauth(OAuthConfig::authorization_code(agent));
    let err = connect("http://127.0.0.1:9/mcp", options)
        .await
        .map(drop)
        .unwrap_err();
    assert!(matches!(err, ClientError::Authorization { .. }), "{err:?}");
}

/// An authorizer of one's own: it sees every response (successes too), may ask for several
/// retries of one request, and a request it keeps retrying ends after a bounded number.
#[derive(Default)]
struct Scripted {
    /// Statuses seen by `on_response`, in order.
    seen: Mutex<Vec<u16>>,
    /// Retry every 401 (else only the first two).
    always: bool,
}

impl Authorizer for Scripted {
    fn prepare<'a>(
        &'a self,
        _method: &'a Method,
        _url: &'a Url,
    ) -> BoxFuture<'a, Result<RequestAuth, AuthError>> {
        let round = self.seen.lock().unwrap().len();
        let mut headers = HeaderMap::new();
        headers.insert(
            "authorization",
            format!("Bearer round-{round}").parse().unwrap(),
        );
        Box::pin(async move { Ok(RequestAuth::with_headers(headers)) })
    }

    fn on_response<'a>(
        &'a self,
        _sent: &'a RequestAuth,
        status: StatusCode,
        _headers: &'a HeaderMap,
    ) -> BoxFuture<'a, Result<Verdict, AuthError>> {
        let mut seen = self.seen.lock().unwrap();
        seen.push(status.as_u16());
        let retries = seen.iter().filter(|s| **s == 401).count();
        let verdict = if status == StatusCode::UNAUTHORIZED && (self.always || retries <= 2) {
            Verdict::Retry
        } else {
            Verdict::Proceed
        };
        Box::pin(async move { Ok(verdict) })
    }
}

/// A server that refuses the first `refusals` POSTs with 401, then answers.
async fn refusing_server(refusals: usize) -> (String, Log) {
    let (listener, base) = bind().await;
    let log: Log = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    serve(
        listener,
        "rs",
        log.clone(),
        Arc::new(move |req: &Req| {
            if req.method != "POST" {
                return empty(405);
            }
            if count.fetch_add(1, Ordering::SeqCst) < refusals {
                let mut r = empty(401);
                r.headers
                    .push(("www-authenticate", "Bearer error=\"invalid_token\"".into()));
                return r;
            }
            json_resp(200, answer(&req.json()))
        }),
    );
    (format!("{base}/mcp"), log)
}

#[tokio::test]
async fn a_request_is_sent_again_as_often_as_the_authorizer_asks_within_a_bound() {
    // Two retries (a DPoP-bound token takes that many: the token, then the nonce), then
    // the answer; the success is shown to the authorizer too.
    let (url, log) = refusing_server(2).await;
    let scripted = Arc::new(Scripted::default());
    let options = ClientOptions::default()
        .mode(TransportMode::StreamableHttp)
        .authorizer(scripted.clone());
    let mut conn = connect(&url, options).await.unwrap();
    send(&conn, initialize(1)).await;
    assert_eq!(
        recv(&mut conn).await["result"]["serverInfo"]["name"],
        "guarded"
    );
    close(conn).await;
    assert_eq!(*scripted.seen.lock().unwrap(), [401, 401, 200]);
    let tokens: Vec<_> = log.lock().unwrap().iter().map(Req::token).collect();
    assert_eq!(
        tokens,
        [
            Some("round-0".to_owned()),
            Some("round-1".to_owned()),
            Some("round-2".to_owned())
        ]
    );

    // An authorizer that never stops asking: the request ends with the last 401.
    let (url, log) = refusing_server(usize::MAX).await;
    let scripted = Arc::new(Scripted {
        always: true,
        ..Scripted::default()
    });
    let options = ClientOptions::default()
        .mode(TransportMode::StreamableHttp)
        .authorizer(scripted.clone());
    let mut conn = connect(&url, options).await.unwrap();
    send(&conn, initialize(1)).await;
    let answer = recv(&mut conn).await;
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("401"), "{message}");
    assert!(
        message.contains("does not accept the credentials"),
        "{message}"
    );
    close(conn).await;
    assert_eq!(log.lock().unwrap().len(), 5, "one send and four retries");
}

/// The options print no credential: not the bearer token, not a client secret.
#[test]
fn options_never_show_credentials() {
    use moat_transport::http::oauth::{ClientCredentials, PreRegisteredClient, Secret};
    let options = ClientOptions::default()
        .bearer_token("bearer-s3cret")
        .oauth(
            OAuthConfig::client_credentials(ClientCredentials::secret("id", "client-s3cret"))
                .pre_registered(PreRegisteredClient::new(
                    "pre",
                    Some(Secret::new("pre-s3cret")),
                )),
        );
    let shown = format!("{options:?}");
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("OAuth"), "{shown}");
    let options = ClientOptions::default().authorizer(Arc::new(Scripted::default()));
    assert!(format!("{options:?}").contains("Authorizer"));
}
