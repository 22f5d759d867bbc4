//! moat's resource server against a real authorization server: oidc-provider (an
//! OpenID-certified implementation, `interop/oidc_issuer.mjs`) on loopback, with two users,
//! two clients and a resource indicator, issuing JWT access tokens for the resource.
//!
//! A user's RS256 token and a client's EdDSA token are both accepted, and each request
//! reaches MCP marked with its own caller (subject, client, scopes, groups); a token the
//! issuer made for this resource is refused by a server that is another resource; a token
//! without the scope the server needs gets 403 with the scope to ask for; the issuer
//! rotates its keys while the server runs (tokens of the new key accepted, the old key's
//! still, until they expire); its JWKS going down leaves the keys held in use and refuses a
//! key not held with a clear error.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use moat_protocol::RequestId;
use moat_test_support::peers;
use moat_transport::http::server::{HttpServer, HttpServerOptions, OnConnection, ResourceOptions};
use moat_transport::{Connection, Inbound, Outgoing};
use serde_json::{Value, json};

const RESOURCE: &str = "http://127.0.0.1/mcp";

/// oidc-provider, ended with the test.
struct Issuer {
    child: Child,
    url: String,
    http: reqwest::Client,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Issuer {
    fn start() -> Option<Issuer> {
        let peers = peers(&["node_modules/oidc-provider", "oidc_issuer.mjs"])?;
        let mut child = Command::new("node")
            .arg(peers.path("oidc_issuer.mjs"))
            .arg(RESOURCE)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start node");
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        // The rest is oidc-provider's notices: read, so that writing them never fails.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let url = serde_json::from_str::<Value>(&line)
            .unwrap_or_else(|e| panic!("issuer's first line {line:?}: {e}"))["issuer"]
            .as_str()
            .unwrap()
            .to_owned();
        Some(Issuer {
            child,
            url,
            // A connection per request: the issuer's server may close idle ones first.
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .unwrap(),
        })
    }

    /// An access token from the token endpoint: `grant` is `client_credentials` or the
    /// script's user grant (`username` set).
    async fn token(&self, client: &str, user: Option<&str>, scope: &str) -> String {
        let secret = format!("secret-{}", client.trim_start_matches("client-"));
        let mut form = vec![
            ("client_id", client.to_owned()),
            ("client_secret", secret),
            ("resource", RESOURCE.to_owned()),
            ("scope", scope.to_owned()),
        ];
        match user {
            Some(u) => {
                form.push(("grant_type", "urn:moat:test:user".into()));
                form.push(("username", u.into()));
            }
            None => form.push(("grant_type", "client_credentials".into())),
        }
        let body = form
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    url::form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>()
                )
            })
            .collect::<Vec<_>>()
            .join("&");
        let r = self
            .http
            .post(format!("{}/token", self.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
        assert!(status.is_success(), "token endpoint: {v}");
        v["access_token"].as_str().unwrap().to_owned()
    }

    async fn admin(&self, what: &str) {
        let r = self
            .http
            .post(format!("{}/_test/{what}", self.url))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }
}

fn header_alg(token: &str) -> String {
    jsonwebtoken::decode_header(token)
        .map(|h| format!("{:?}", h.alg))
        .unwrap()
}

/// A resource server whose MCP side answers each request with who sent it.
async fn serve(resource: ResourceOptions) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let on_connection: OnConnection = Arc::new(|conn| {
        tokio::spawn(answer(conn));
    });
    let mut options = HttpServerOptions::default();
    options.resource = Some(resource);
    options.stateless = true;
    let server = HttpServer::bind("127.0.0.1:0".parse().unwrap(), options, on_connection)
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    (addr, stop)
}

async fn answer(mut conn: Connection) {
    while let Some(item) = conn.inbound.recv().await {
        let (who, item) = match item {
            Inbound::Caller(identity, item) => (
                json!({"subject": identity.subject, "client": identity.client_id,
                       "scopes": identity.scopes, "groups": identity.claim_strings("groups")}),
                *item,
            ),
            item => (Value::Null, item),
        };
        let Inbound::Request(head) = item else {
            continue;
        };
        let msg: Value = serde_json::from_str(head.line()).unwrap();
        let reply = json!({"jsonrpc": "2.0", "id": msg["id"], "result": {"who": who}});
        let id = RequestId::from(msg["id"].as_i64().unwrap());
        let _ = conn
            .outbound
            .send(Outgoing::answer(reply.to_string(), id, None))
            .await;
    }
}

/// A 2026-07-28 `ping`-like request (`server/discover`) as `token`: the status, the
/// challenge, and who the server saw.
async fn call(addr: SocketAddr, token: &str) -> (u16, String, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "server/discover")
        .bearer_auth(token)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap_or(Value::Null);
    (status, challenge, v["result"]["who"].clone())
}

fn options(issuer: &Issuer, resource: &str, scopes: &[&str]) -> ResourceOptions {
    let mut r = ResourceOptions::new(issuer.url.clone(), resource);
    r.scopes = scopes.iter().map(|s| (*s).to_owned()).collect();
    r.claims = vec!["groups".into()];
    r.jwks_refetch_interval = Duration::ZERO;
    r
}

#[tokio::test]
async fn users_and_clients_of_a_real_issuer_reach_mcp_as_themselves() {
    let Some(issuer) = Issuer::start() else {
        return;
    };
    let (addr, _stop) = serve(options(&issuer, RESOURCE, &["mcp:tools"])).await;

    let alice = issuer.token("client-a", Some("alice"), "mcp:tools").await;
    assert_eq!(header_alg(&alice), "RS256");
    let (status, challenge, who) = call(addr, &alice).await;
    assert_eq!(status, 200, "{challenge}");
    assert_eq!(
        who,
        json!({"subject": "alice", "client": "client-a", "scopes": ["mcp:tools"], "groups": ["ops"]})
    );

    let bob = issuer
        .token("client-b", Some("bob"), "mcp:tools db:write")
        .await;
    assert_eq!(header_alg(&bob), "EdDSA");
    let (status, challenge, who) = call(addr, &bob).await;
    assert_eq!(status, 200, "{challenge}");
    assert_eq!(who["subject"], "bob");
    assert_eq!(who["client"], "client-b");
    assert_eq!(who["scopes"], json!(["mcp:tools", "db:write"]));

    // A client on its own behalf: the subject is the client.
    let service = issuer.token("client-b", None, "mcp:tools").await;
    let (status, _, who) = call(addr, &service).await;
    assert_eq!(status, 200);
    assert_eq!(
        (who["subject"].as_str(), who["client"].as_str()),
        (Some("client-b"), Some("client-b"))
    );

    // Without the scope the server needs: 403, naming it.
    let writer_only = issuer.token("client-a", Some("alice"), "db:write").await;
    let (status, challenge, who) = call(addr, &writer_only).await;
    assert_eq!(status, 403, "{challenge}");
    assert!(
        challenge.contains(r#"error="insufficient_scope""#)
            && challenge.contains(r#"scope="mcp:tools""#),
        "{challenge}"
    );
    assert_eq!(who, Value::Null);

    // The same issuer's token for this resource, replayed at another resource: refused.
    let (other, _stop_other) = serve(options(&issuer, "http://127.0.0.1/other", &[])).await;
    let (status, challenge, who) = call(other, &alice).await;
    assert_eq!(status, 401, "{challenge}");
    assert!(
        challenge.contains(r#"error="invalid_token""#),
        "{challenge}"
    );
    assert_eq!(who, Value::Null);
}

#[tokio::test]
async fn key_rotation_and_a_jwks_outage_at_a_real_issuer() {
    let Some(issuer) = Issuer::start() else {
        return;
    };
    let (addr, _stop) = serve(options(&issuer, RESOURCE, &[])).await;
    let old_rsa = issuer.token("client-a", Some("alice"), "mcp:tools").await;
    let old_ed = issuer.token("client-b", Some("bob"), "mcp:tools").await;
    assert_eq!(call(addr, &old_rsa).await.0, 200);
    assert_eq!(call(addr, &old_ed).await.0, 200);

    // The issuer rotates while the server runs: tokens of the new keys are accepted (their
    // kid is fetched), and the old keys' tokens still are.
    issuer.admin("rotate").await;
    let new_rsa = issuer.token("client-a", Some("alice"), "mcp:tools").await;
    let new_ed = issuer.token("client-b", Some("bob"), "mcp:tools").await;
    let kid = |t: &str| jsonwebtoken::decode_header(t).unwrap().kid.unwrap();
    assert_eq!(
        (kid(&new_rsa).as_str(), kid(&new_ed).as_str()),
        ("rsa-2", "ed-2")
    );
    for token in [&new_rsa, &new_ed, &old_rsa, &old_ed] {
        let (status, challenge, _) = call(addr, token).await;
        assert_eq!(status, 200, "{}: {challenge}", kid(token));
    }

    // The JWKS goes down: keys held stay in use; a key rotated in meanwhile cannot be
    // fetched, and the refusal says so.
    issuer.admin("jwks-down").await;
    assert_eq!(call(addr, &new_rsa).await.0, 200);
    issuer.admin("rotate").await;
    let unseen = issuer.token("client-a", Some("alice"), "mcp:tools").await;
    let (status, challenge, _) = call(addr, &unseen).await;
    assert_eq!(status, 401, "{challenge}");
    assert!(challenge.contains("could not be fetched"), "{challenge}");
    // Back up: the new key is fetched and accepted.
    issuer.admin("jwks-up").await;
    let (status, challenge, _) = call(addr, &unseen).await;
    assert_eq!(status, 200, "{challenge}");
}
