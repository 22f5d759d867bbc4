//! moat's HTTP server as an OAuth 2.1 resource server, against an authorization server made
//! here: it serves its metadata, its JWKS (which a test can rotate or take down) and an
//! introspection endpoint, and the tests sign tokens with keys generated here.
//!
//! Every attack on the resource server is refused with 401 and the right challenge, a token
//! without the needed scope with 403, and none of them reaches MCP: the server hands out a
//! connection only for a request that passed (the tests count them).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use moat_protocol::RequestId;
use moat_transport::http::server::{
    HttpServer, HttpServerError, HttpServerOptions, IntrospectionOptions, IssuerOptions,
    OnConnection, ResourceError, ResourceOptions,
};
use moat_transport::{Connection, Inbound, Outgoing};
use p256::ecdsa::SigningKey;
use p256::pkcs8::EncodePrivateKey as _;
use serde_json::{Value, json};

const RESOURCE: &str = "https://mcp.test/mcp";
const METADATA_URL: &str = "https://mcp.test/.well-known/oauth-protected-resource/mcp";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A P-256 key with its id: signs tokens, and publishes its public half as a JWK.
#[derive(Clone)]
struct Key {
    kid: String,
    signing: SigningKey,
}

impl Key {
    fn new(kid: &str) -> Key {
        let signing = loop {
            let bytes: [u8; 32] = rand::random();
            if let Ok(k) = SigningKey::from_bytes(&bytes.into()) {
                break k;
            }
        };
        Key {
            kid: kid.into(),
            signing,
        }
    }

    fn public_point(&self) -> (Vec<u8>, Vec<u8>) {
        let point = self.signing.verifying_key().to_encoded_point(false);
        (point.x().unwrap().to_vec(), point.y().unwrap().to_vec())
    }

    fn jwk(&self) -> Value {
        let (x, y) = self.public_point();
        json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig", "alg": "ES256",
               "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)})
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        header.typ = Some("at+jwt".into());
        let der = self.signing.to_pkcs8_der().unwrap();
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(der.as_bytes())).unwrap()
    }
}

/// What the test authorization server publishes and has seen.
#[derive(Default)]
struct IssuerState {
    keys: Vec<Value>,
    jwks_down: bool,
    jwks_fetches: usize,
    introspections: usize,
    /// Opaque token → introspection answer.
    opaque: HashMap<String, Value>,
}

struct Issuer {
    url: String,
    state: Arc<Mutex<IssuerState>>,
}

impl Issuer {
    async fn start(keys: &[&Key]) -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(IssuerState {
            keys: keys.iter().map(|k| k.jwk()).collect(),
            ..IssuerState::default()
        }));
        let (base, shared) = (url.clone(), state.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (base, shared) = (base.clone(), shared.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let (base, shared) = (base.clone(), shared.clone());
                        async move { Ok::<_, Infallible>(issuer_answer(&base, &shared, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        Issuer { url, state }
    }

    fn fetches(&self) -> usize {
        self.state.lock().unwrap().jwks_fetches
    }

    /// Claims of a good token for RESOURCE, valid for an hour, with `scope`.
    fn claims(&self, scope: &str) -> Value {
        json!({"iss": self.url, "aud": RESOURCE, "sub": "alice", "client_id": "cli",
               "scope": scope, "iat": now(), "exp": now() + 3600, "email": "alice@example.com"})
    }
}

async fn issuer_answer(
    base: &str,
    state: &Mutex<IssuerState>,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Full<Bytes>> {
    let reply = |status: u16, body: Value| {
        hyper::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap()
    };
    match req.uri().path() {
        "/.well-known/oauth-authorization-server" => reply(
            200,
            json!({"issuer": base, "jwks_uri": format!("{base}/jwks"),
                   "introspection_endpoint": format!("{base}/introspect"),
                   "token_endpoint": format!("{base}/token")}),
        ),
        "/jwks" => {
            let mut s = state.lock().unwrap();
            s.jwks_fetches += 1;
            if s.jwks_down {
                reply(503, json!({"error": "down"}))
            } else {
                reply(200, json!({"keys": s.keys}))
            }
        }
        "/introspect" => {
            let authorized = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                == Some(&format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode("rs:rs-secret")
                ));
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let token = url::form_urlencoded::parse(&body)
                .find(|(k, _)| k == "token")
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default();
            let mut s = state.lock().unwrap();
            s.introspections += 1;
            if !authorized {
                return reply(401, json!({"error": "invalid_client"}));
            }
            reply(
                200,
                s.opaque
                    .get(&token)
                    .cloned()
                    .unwrap_or(json!({"active": false})),
            )
        }
        _ => reply(404, json!({})),
    }
}

/// A resource server and how many connections (requests that got through) it handed out.
struct Served {
    addr: SocketAddr,
    reached: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn resource_options(issuer: &Issuer) -> ResourceOptions {
    let mut r = ResourceOptions::new(issuer.url.clone(), RESOURCE);
    r.scopes = vec!["mcp:tools".into()];
    r.claims = vec!["email".into()];
    r
}

async fn serve(resource: ResourceOptions) -> Served {
    let reached = Arc::new(AtomicUsize::new(0));
    let counter = reached.clone();
    let on_connection: OnConnection = Arc::new(move |conn| {
        counter.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(answer(conn));
    });
    let mut options = HttpServerOptions::default();
    options.resource = Some(resource);
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
        reached,
        stop: Some(stop),
    }
}

/// A minimal MCP server: answers `initialize`.
async fn answer(mut conn: Connection) {
    while let Some(item) = conn.inbound.recv().await {
        // With OAuth every request comes marked with its caller.
        let item = match item {
            Inbound::Caller(_, item) => *item,
            item => item,
        };
        let Inbound::Request(head) = item else {
            continue;
        };
        let msg: Value = serde_json::from_str(head.line()).unwrap();
        let reply = json!({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {},
            "serverInfo": {"name": "answer", "version": "1"}}});
        let id = RequestId::from(msg["id"].as_i64().unwrap());
        if conn
            .outbound
            .send(Outgoing::new(reply.to_string(), Some(id)))
            .await
            .is_err()
        {
            return;
        }
    }
}

/// The status and `WWW-Authenticate` of an `initialize` POST with `token`.
async fn call(served: &Served, token: Option<&str>) -> (u16, String) {
    let mut req = reqwest::Client::new()
        .post(format!("http://{}/mcp", served.addr))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
        );
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (r.status().as_u16(), challenge)
}

/// Asserts a 401 `invalid_token` whose description contains `why`, and that nothing ran.
async fn refused(served: &Served, token: &str, why: &str) {
    let before = served.reached.load(Ordering::SeqCst);
    let (status, challenge) = call(served, Some(token)).await;
    assert_eq!(status, 401, "{why}: {challenge}");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(r#"error="invalid_token""#),
        "{challenge}"
    );
    assert!(
        challenge.contains(&format!(r#"resource_metadata="{METADATA_URL}""#)),
        "{challenge}"
    );
    assert!(challenge.contains(why), "expected {why:?} in {challenge}");
    assert_eq!(
        served.reached.load(Ordering::SeqCst),
        before,
        "{why}: reached MCP"
    );
}

#[tokio::test]
async fn metadata_and_the_challenge_without_a_token() {
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let served = serve(resource_options(&issuer)).await;
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let r = reqwest::get(format!("http://{}{path}", served.addr))
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let doc: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
        assert_eq!(doc["resource"], RESOURCE);
        assert_eq!(doc["authorization_servers"], json!([issuer.url]));
        assert_eq!(doc["scopes_supported"], json!(["mcp:tools"]));
    }
    let (status, challenge) = call(&served, None).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge,
        format!(r#"Bearer resource_metadata="{METADATA_URL}", scope="mcp:tools""#)
    );
    assert_eq!(served.reached.load(Ordering::SeqCst), 0);

    let (status, _) = call(&served, Some(&key.sign(&issuer.claims("mcp:tools")))).await;
    assert_eq!(status, 200);
    assert_eq!(served.reached.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn forged_and_misdirected_tokens_are_refused() {
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let served = serve(resource_options(&issuer)).await;
    let good = issuer.claims("mcp:tools");
    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c
    };

    let expired = with("exp", json!(now() - 3600));
    refused(&served, &key.sign(&expired), "has expired").await;
    let early = with("nbf", json!(now() + 3600));
    refused(&served, &key.sign(&early), "not valid yet").await;
    // A malformed `nbf` must not count as an absent one.
    let odd_nbf = with("nbf", json!("99999999999"));
    refused(&served, &key.sign(&odd_nbf), "nbf").await;
    let other_issuer = with("iss", json!("https://evil.example"));
    refused(&served, &key.sign(&other_issuer), "another issuer").await;
    // A token the same issuer made for another resource, replayed here.
    let other_resource = with("aud", json!("https://other.test/mcp"));
    refused(&served, &key.sign(&other_resource), "another resource").await;
    let no_aud = {
        let mut c = good.clone();
        c.as_object_mut().unwrap().remove("aud");
        c
    };
    refused(&served, &key.sign(&no_aud), "aud").await;

    // `alg: none`, no signature.
    let b64 = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT", "kid": "k1"})),
        b64(&good)
    );
    refused(&served, &none, "algorithm").await;

    // HS256 with the issuer's public key as the HMAC secret, in every form an attacker might
    // guess the server would use.
    let (x, y) = key.public_point();
    let sec1: Vec<u8> = [vec![4u8], x.clone(), y.clone()].concat();
    for secret in [sec1, key.jwk().to_string().into_bytes(), [x, y].concat()] {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        let forged =
            jsonwebtoken::encode(&header, &good, &EncodingKey::from_secret(&secret)).unwrap();
        refused(&served, &forged, "HS256").await;
    }

    // Signed by a key the issuer does not have, under the issuer's kid.
    let impostor = Key {
        kid: "k1".into(),
        ..Key::new("x")
    };
    refused(&served, &impostor.sign(&good), "signature does not verify").await;
    // Not a JWT, and no introspection configured.
    refused(&served, "opaque-token", "not a JWT").await;

    assert_eq!(served.reached.load(Ordering::SeqCst), 0);
    let (status, _) = call(&served, Some(&key.sign(&good))).await;
    assert_eq!(status, 200);
    assert_eq!(served.reached.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_missing_scope_is_403_with_the_scope_to_ask_for() {
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let served = serve(resource_options(&issuer)).await;
    let (status, challenge) = call(&served, Some(&key.sign(&issuer.claims("openid")))).await;
    assert_eq!(status, 403, "{challenge}");
    assert!(
        challenge.contains(r#"error="insufficient_scope""#),
        "{challenge}"
    );
    assert!(challenge.contains(r#"scope="mcp:tools""#), "{challenge}");
    assert!(challenge.contains(METADATA_URL), "{challenge}");
    assert_eq!(served.reached.load(Ordering::SeqCst), 0);
    // `scp` as a list counts too.
    let mut claims = issuer.claims("");
    claims.as_object_mut().unwrap().remove("scope");
    claims["scp"] = json!(["mcp:tools"]);
    assert_eq!(call(&served, Some(&key.sign(&claims))).await.0, 200);
}

#[tokio::test]
async fn an_unknown_kid_refetches_once_then_is_refused() {
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let mut options = resource_options(&issuer);
    options.jwks_refetch_interval = Duration::from_secs(3600);
    let served = serve(options).await;
    assert_eq!(
        call(&served, Some(&key.sign(&issuer.claims("mcp:tools"))))
            .await
            .0,
        200
    );
    assert_eq!(issuer.fetches(), 1);

    let stranger = Key::new("k-unknown");
    refused(
        &served,
        &stranger.sign(&issuer.claims("mcp:tools")),
        "k-unknown",
    )
    .await;
    assert_eq!(issuer.fetches(), 2, "an unknown kid fetches the JWKS again");
    let another = Key::new("k-unknown-2");
    refused(
        &served,
        &another.sign(&issuer.claims("mcp:tools")),
        "k-unknown-2",
    )
    .await;
    refused(
        &served,
        &another.sign(&issuer.claims("mcp:tools")),
        "k-unknown-2",
    )
    .await;
    assert_eq!(issuer.fetches(), 2, "not again within the interval");
    // The known key still works without a fetch.
    assert_eq!(
        call(&served, Some(&key.sign(&issuer.claims("mcp:tools"))))
            .await
            .0,
        200
    );
    assert_eq!(issuer.fetches(), 2);
}

#[tokio::test]
async fn keys_held_are_used_while_the_jwks_is_down() {
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let mut options = resource_options(&issuer);
    options.jwks_refetch_interval = Duration::ZERO;
    let served = serve(options).await;
    let token = key.sign(&issuer.claims("mcp:tools"));
    assert_eq!(call(&served, Some(&token)).await.0, 200);

    issuer.state.lock().unwrap().jwks_down = true;
    assert_eq!(
        call(&served, Some(&token)).await.0,
        200,
        "cached keys still verify"
    );
    let fresh = Key::new("k2");
    refused(
        &served,
        &fresh.sign(&issuer.claims("mcp:tools")),
        "signing keys could not be fetched (",
    )
    .await;
    assert_eq!(
        call(&served, Some(&token)).await.0,
        200,
        "a failed refetch keeps the keys"
    );

    // A server that never got the keys says so.
    let cold = serve(resource_options(&issuer)).await;
    refused(&cold, &token, "signing keys could not be fetched (").await;
    assert_eq!(served.reached.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn key_rotation_accepts_the_new_key_and_the_old_until_expiry() {
    let old = Key::new("2026-01");
    let issuer = Issuer::start(&[&old]).await;
    let mut options = resource_options(&issuer);
    options.jwks_refetch_interval = Duration::ZERO;
    let served = serve(options).await;
    let old_token = old.sign(&issuer.claims("mcp:tools"));
    assert_eq!(call(&served, Some(&old_token)).await.0, 200);

    // The issuer publishes a new key beside the old one and signs with the new one.
    let new = Key::new("2026-02");
    issuer.state.lock().unwrap().keys = vec![new.jwk(), old.jwk()];
    let new_token = new.sign(&issuer.claims("mcp:tools"));
    assert_eq!(call(&served, Some(&new_token)).await.0, 200);
    assert_eq!(call(&served, Some(&old_token)).await.0, 200);
    // An old-key token past its expiry is refused like any other.
    let mut stale = issuer.claims("mcp:tools");
    stale["exp"] = json!(now() - 600);
    refused(&served, &old.sign(&stale), "has expired").await;

    // Once the issuer drops the old key, a refetch forgets it.
    issuer.state.lock().unwrap().keys = vec![new.jwk()];
    let unknown = Key::new("2026-03");
    refused(
        &served,
        &unknown.sign(&issuer.claims("mcp:tools")),
        "2026-03",
    )
    .await;
    refused(&served, &old_token, "2026-01").await;
    assert_eq!(call(&served, Some(&new_token)).await.0, 200);
}

#[tokio::test]
async fn opaque_tokens_are_introspected_and_answers_kept() {
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    {
        let mut s = issuer.state.lock().unwrap();
        s.opaque.insert(
            "opaque-good".into(),
            json!({"active": true, "sub": "bob", "client_id": "cli", "scope": "mcp:tools",
                   "aud": RESOURCE, "iss": issuer.url, "exp": now() + 3600}),
        );
        s.opaque.insert(
            "opaque-elsewhere".into(),
            json!({"active": true, "sub": "bob", "scope": "mcp:tools",
                   "aud": "https://other.test/mcp", "exp": now() + 3600}),
        );
        s.opaque.insert(
            "opaque-narrow".into(),
            json!({"active": true, "sub": "bob", "scope": "openid", "aud": RESOURCE}),
        );
    }
    let mut options = resource_options(&issuer);
    options.introspection = Some(IntrospectionOptions::new("rs", "rs-secret"));
    let served = serve(options).await;

    assert_eq!(call(&served, Some("opaque-good")).await.0, 200);
    assert_eq!(call(&served, Some("opaque-good")).await.0, 200);
    let introspections = issuer.state.lock().unwrap().introspections;
    assert_eq!(
        introspections, 1,
        "the second use is answered from the cache"
    );

    refused(&served, "opaque-revoked", "not active").await;
    refused(&served, "opaque-elsewhere", "another resource").await;
    let (status, challenge) = call(&served, Some("opaque-narrow")).await;
    assert_eq!(status, 403, "{challenge}");
    assert_eq!(served.reached.load(Ordering::SeqCst), 2);

    // Wrong credentials at the introspection endpoint: refused, clearly.
    let mut options = resource_options(&issuer);
    options.introspection = Some(IntrospectionOptions::new("rs", "wrong"));
    let misconfigured = serve(options).await;
    refused(&misconfigured, "opaque-good", "could not be introspected").await;
}

#[tokio::test]
async fn a_static_token_and_an_issuer_are_not_both_accepted() {
    let mut options = HttpServerOptions::default();
    options.token = Some("s3cret".into());
    options.resource = Some(ResourceOptions::new("https://as.example", RESOURCE));
    let on_connection: OnConnection = Arc::new(|_| {});
    let err = HttpServer::bind("127.0.0.1:0".parse().unwrap(), options, on_connection)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            HttpServerError::Resource(ResourceError::WithStaticToken)
        ),
        "{err}"
    );
    // Off loopback, an issuer stands in for the token.
    let mut options = HttpServerOptions::default();
    options.resource = Some(ResourceOptions::new("http://as.example", RESOURCE));
    let err = HttpServer::bind("0.0.0.0:0".parse().unwrap(), options, Arc::new(|_| {}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, HttpServerError::Resource(ResourceError::Url { .. })),
        "an http issuer off loopback is refused: {err}"
    );
}

#[tokio::test]
async fn several_issuers_each_checked_by_its_own_keys_and_audiences() {
    let (key_a, key_b) = (Key::new("k-a"), Key::new("k-b"));
    let a = Issuer::start(&[&key_a]).await;
    let b = Issuer::start(&[&key_b]).await;
    let stranger = Issuer::start(&[&key_a]).await;
    {
        let mut s = b.state.lock().unwrap();
        s.opaque.insert(
            "opaque-of-b".into(),
            json!({"active": true, "sub": "bea", "scope": "mcp:tools",
                   "aud": "urn:b-aud", "iss": b.url, "exp": now() + 3600}),
        );
    }
    a.state.lock().unwrap().opaque.insert(
        "opaque-of-a-elsewhere".into(),
        json!({"active": true, "sub": "al", "scope": "mcp:tools",
               "aud": "https://other.test/mcp", "exp": now() + 3600}),
    );
    let mut options = resource_options(&a);
    options.introspection = Some(IntrospectionOptions::new("rs", "rs-secret"));
    let mut more = IssuerOptions::new(b.url.clone());
    more.audiences = vec!["urn:b-aud".into()];
    more.introspection = Some(IntrospectionOptions::new("rs", "rs-secret"));
    options.issuers = vec![more];
    let served = serve(options.clone()).await;

    // Each issuer's own tokens, each with the audience configured for it.
    assert_eq!(
        call(&served, Some(&key_a.sign(&a.claims("mcp:tools"))))
            .await
            .0,
        200
    );
    let mut claims_b = b.claims("mcp:tools");
    claims_b["aud"] = json!("urn:b-aud");
    assert_eq!(call(&served, Some(&key_b.sign(&claims_b))).await.0, 200);
    // B's audience is not A's: an A token naming it is for another resource.
    let mut a_to_b_aud = a.claims("mcp:tools");
    a_to_b_aud["aud"] = json!("urn:b-aud");
    refused(&served, &key_a.sign(&a_to_b_aud), "another resource").await;
    // An issuer not configured, signing with A's very key: refused for its `iss`.
    refused(
        &served,
        &key_a.sign(&stranger.claims("mcp:tools")),
        "another issuer",
    )
    .await;
    // A's key claiming to be B: checked with B's keys, where A's kid is not.
    let fetches_of_a = a.fetches();
    refused(&served, &key_a.sign(&claims_b), "k-a").await;
    assert_eq!(
        a.fetches(),
        fetches_of_a,
        "A's keys are not asked about B's token"
    );

    // Opaque: A (first) does not know it, B does.
    let before = (
        a.state.lock().unwrap().introspections,
        b.state.lock().unwrap().introspections,
    );
    assert_eq!(call(&served, Some("opaque-of-b")).await.0, 200);
    assert_eq!(a.state.lock().unwrap().introspections, before.0 + 1);
    assert_eq!(b.state.lock().unwrap().introspections, before.1 + 1);
    // Active at A for another resource: refused there, B is not asked.
    refused(&served, "opaque-of-a-elsewhere", "another resource").await;
    assert_eq!(b.state.lock().unwrap().introspections, before.1 + 1);
    refused(&served, "opaque-unknown", "not active").await;
    assert_eq!(served.reached.load(Ordering::SeqCst), 3);

    // The same issuer twice is a configuration error.
    options.issuers.push(IssuerOptions::new(a.url.clone()));
    let mut http = HttpServerOptions::default();
    http.resource = Some(options);
    let err = HttpServer::bind("127.0.0.1:0".parse().unwrap(), http, Arc::new(|_| {}))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            HttpServerError::Resource(ResourceError::DuplicateIssuer(_))
        ),
        "{err}"
    );
}
