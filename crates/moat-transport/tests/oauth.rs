//! The OAuth client against an in-test MCP resource server and authorization server (hyper,
//! on loopback), each scripted like the conformance suite's mocks and recording every
//! request. A small loop plays the HTTP transport: prepare → POST → on_response → retry.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use moat_transport::http::oauth::{
    AuthError, ClientCredentials, EcKey, HeadlessUserAgent, IdentityAssertion, LoopbackUserAgent,
    OAuthClient, OAuthConfig, PreRegisteredClient, Secret, UserAgent, Verdict,
};
use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{Signature, VerifyingKey};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio::net::TcpListener;
use url::Url;

// ---------------------------------------------------------------------------
// A recording HTTP server.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Req {
    method: String,
    path: String,
    query: HashMap<String, String>,
    headers: HeaderMap,
    body: String,
}

impl Req {
    fn form(&self) -> HashMap<String, String> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .into_owned()
            .collect()
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

fn json_resp(status: u16, body: Value) -> Resp {
    Resp {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.to_string(),
    }
}

fn not_found() -> Resp {
    json_resp(404, json!({"error": "not_found"}))
}

type Handler = Arc<dyn Fn(&Req) -> Resp + Send + Sync>;

/// Everything every server saw, in order, tagged with the server's name.
type Log = Arc<Mutex<Vec<(&'static str, Req)>>>;

async fn bind() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://localhost:{}", l.local_addr().unwrap().port());
    (l, base)
}

fn serve(listener: TcpListener, name: &'static str, log: Log, handler: Handler) {
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
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
                            method: parts.method.to_string(),
                            path: parts.uri.path().to_owned(),
                            query,
                            headers: parts.headers,
                            body: String::from_utf8_lossy(&body).into_owned(),
                        };
                        log.lock().unwrap().push((name, r.clone()));
                        let out = handler(&r);
                        let mut resp = hyper::Response::builder().status(out.status);
                        for (k, v) in out.headers {
                            resp = resp.header(k, v);
                        }
                        Ok::<_, Infallible>(resp.body(Full::new(Bytes::from(out.body))).unwrap())
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
// The authorization server.
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Iss {
    Correct,
    Omit,
    Wrong,
    TrailingSlash,
}

#[derive(Clone)]
struct AsCfg {
    /// Route prefix of the endpoints, also the issuer's path.
    prefix: String,
    /// Absolute path the metadata is served at (None: no metadata, default endpoints).
    metadata_path: Option<String>,
    issuer_override: Option<String>,
    scopes_supported: Option<Vec<String>>,
    auth_methods: Vec<String>,
    registration: bool,
    /// What DCR answers: (client id, secret, token_endpoint_auth_method).
    dcr: (String, Option<String>, Option<String>),
    cimd: Option<bool>,
    iss_supported: Option<bool>,
    iss: Iss,
    pkce: Option<Vec<String>>,
    grant_types: Vec<String>,
    refresh: bool,
    /// Accepted client: (id, secret) for Basic/post checks.
    client: Option<(String, String)>,
    /// Public key for private_key_jwt / jwt-bearer assertions.
    assertion_key: Option<VerifyingKey>,
    dpop: bool,
    dpop_nonce: bool,
    /// Fail every grant with this OAuth error.
    fail_with: Option<String>,
}

impl Default for AsCfg {
    fn default() -> Self {
        AsCfg {
            prefix: String::new(),
            metadata_path: Some("/.well-known/oauth-authorization-server".into()),
            issuer_override: None,
            scopes_supported: None,
            auth_methods: vec!["none".into()],
            registration: true,
            dcr: ("dcr-client".into(), Some("dcr-secret".into()), None),
            cimd: None,
            iss_supported: Some(true),
            iss: Iss::Correct,
            pkce: Some(vec!["S256".into()]),
            grant_types: vec!["authorization_code".into(), "refresh_token".into()],
            refresh: false,
            client: None,
            assertion_key: None,
            dpop: false,
            dpop_nonce: false,
            fail_with: None,
        }
    }
}

/// Tokens the authorization servers issued: token → (scopes, DPoP thumbprint).
type Tokens = Arc<Mutex<HashMap<String, (Vec<String>, Option<String>)>>>;

#[derive(Default)]
struct AsState {
    challenge: Option<String>,
    scopes: Vec<String>,
    counter: u32,
}

fn b64json(part: &str) -> Option<Value> {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).ok()?).ok()
}

/// Verify an ES256 JWS; with `key: None` the embedded `jwk` is used (DPoP).
fn verify_jwt(jwt: &str, key: Option<&VerifyingKey>) -> Option<(Value, Value)> {
    let parts: Vec<&str> = jwt.split('.').collect();
    if parts.len() != 3 {
        return None;
    }
    let header = b64json(parts[0])?;
    let claims = b64json(parts[1])?;
    let embedded;
    let key = match key {
        Some(k) => k,
        None => {
            embedded = jwk_key(&header["jwk"])?;
            &embedded
        }
    };
    let sig = Signature::from_slice(&URL_SAFE_NO_PAD.decode(parts[2]).ok()?).ok()?;
    key.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
        .ok()?;
    (header["alg"] == "ES256").then_some((header, claims))
}

fn jwk_key(jwk: &Value) -> Option<VerifyingKey> {
    let x = URL_SAFE_NO_PAD.decode(jwk["x"].as_str()?).ok()?;
    let y = URL_SAFE_NO_PAD.decode(jwk["y"].as_str()?).ok()?;
    let point = p256::EncodedPoint::from_affine_coordinates(
        p256::FieldBytes::from_slice(&x),
        p256::FieldBytes::from_slice(&y),
        false,
    );
    VerifyingKey::from_encoded_point(&point).ok()
}

fn thumbprint(jwk: &Value) -> String {
    let canonical = format!(
        r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
        jwk["x"].as_str().unwrap_or(""),
        jwk["y"].as_str().unwrap_or("")
    );
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

fn basic_creds(req: &Req) -> Option<(String, String)> {
    let h = req.header("authorization")?;
    let raw = STANDARD.decode(h.strip_prefix("Basic ")?).ok()?;
    let s = String::from_utf8(raw).ok()?;
    let (id, secret) = s.split_once(':')?;
    let dec = |x: &str| {
        url::form_urlencoded::parse(format!("v={x}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    Some((dec(id), dec(secret)))
}

fn as_handler(base: String, cfg: AsCfg, tokens: Tokens) -> Handler {
    let state = Arc::new(Mutex::new(AsState::default()));
    let issuer = cfg
        .issuer_override
        .clone()
        .unwrap_or_else(|| format!("{base}{}", cfg.prefix));
    let p = cfg.prefix.clone();
    Arc::new(move |req: &Req| {
        let mut st = state.lock().unwrap();
        let path = req.path.as_str();
        if req.method == "GET" && cfg.metadata_path.as_deref() == Some(path) {
            let mut m = json!({
                "issuer": issuer,
                "authorization_endpoint": format!("{base}{p}/authorize"),
                "token_endpoint": format!("{base}{p}/token"),
                "response_types_supported": ["code"],
                "grant_types_supported": cfg.grant_types,
                "token_endpoint_auth_methods_supported": cfg.auth_methods,
            });
            if cfg.registration {
                m["registration_endpoint"] = json!(format!("{base}{p}/register"));
            }
            if let Some(pk) = &cfg.pkce {
                m["code_challenge_methods_supported"] = json!(pk);
            }
            if let Some(i) = cfg.iss_supported {
                m["authorization_response_iss_parameter_supported"] = json!(i);
            }
            if let Some(s) = &cfg.scopes_supported {
                m["scopes_supported"] = json!(s);
            }
            if let Some(c) = cfg.cimd {
                m["client_id_metadata_document_supported"] = json!(c);
            }
            if cfg.dpop {
                m["dpop_signing_alg_values_supported"] = json!(["ES256"]);
            }
            return json_resp(200, m);
        }
        if req.method == "GET" && path == format!("{p}/authorize") {
            st.challenge = req.query.get("code_challenge").cloned();
            st.scopes = req
                .query
                .get("scope")
                .map(|s| s.split(' ').map(str::to_owned).collect())
                .unwrap_or_default();
            let mut to = Url::parse(&req.query["redirect_uri"]).unwrap();
            to.query_pairs_mut().append_pair("code", "the-code");
            if let Some(s) = req.query.get("state") {
                to.query_pairs_mut().append_pair("state", s);
            }
            match cfg.iss {
                Iss::Correct => {
                    to.query_pairs_mut().append_pair("iss", &issuer);
                }
                Iss::Wrong => {
                    to.query_pairs_mut()
                        .append_pair("iss", "https://evil.example.com");
                }
                Iss::TrailingSlash => {
                    to.query_pairs_mut()
                        .append_pair("iss", &format!("{issuer}/"));
                }
                Iss::Omit => {}
            }
            return Resp {
                status: 302,
                headers: vec![("location".into(), to.to_string())],
                body: String::new(),
            };
        }
        if req.method == "POST" && path == format!("{p}/register") && cfg.registration {
            let (id, secret, method) = cfg.dcr.clone();
            let mut r = json!({"client_id": id, "redirect_uris": req.json()["redirect_uris"]});
            if let Some(s) = secret {
                r["client_secret"] = json!(s);
            }
            if let Some(m) = method {
                r["token_endpoint_auth_method"] = json!(m);
            }
            return json_resp(201, r);
        }
        if req.method == "POST" && path == format!("{p}/token") {
            let form = req.form();
            if let Some(e) = &cfg.fail_with {
                return json_resp(400, json!({"error": e}));
            }
            // Client authentication, when the server knows its client.
            if let Some((id, secret)) = &cfg.client {
                let ok = basic_creds(req) == Some((id.clone(), secret.clone()))
                    || (form.get("client_id") == Some(id)
                        && form.get("client_secret") == Some(secret));
                if !ok {
                    return json_resp(401, json!({"error": "invalid_client"}));
                }
            }
            if form.contains_key("client_assertion_type") {
                let key = cfg.assertion_key.as_ref().unwrap();
                let ok = form
                    .get("client_assertion")
                    .and_then(|a| verify_jwt(a, Some(key)))
                    .is_some_and(|(_, c)| {
                        c["iss"] == c["sub"]
                            && c["aud"] == json!(issuer)
                            && c["exp"].is_u64()
                            && c["jti"].is_string()
                    });
                if !ok {
                    return json_resp(401, json!({"error": "invalid_client"}));
                }
            }
            // DPoP proof at the token endpoint.
            let mut jkt = None;
            if cfg.dpop
                && let Some(proof) = req.header("dpop")
            {
                let Some((h, c)) = verify_jwt(&proof, None) else {
                    return json_resp(400, json!({"error": "invalid_dpop_proof"}));
                };
                if h["typ"] != "dpop+jwt"
                    || c["htm"] != "POST"
                    || c["htu"] != json!(format!("{base}{p}/token"))
                {
                    return json_resp(400, json!({"error": "invalid_dpop_proof"}));
                }
                if cfg.dpop_nonce && c["nonce"] != "as-nonce" {
                    return Resp {
                        status: 400,
                        headers: vec![
                            ("content-type".into(), "application/json".into()),
                            ("dpop-nonce".into(), "as-nonce".into()),
                        ],
                        body: json!({"error": "use_dpop_nonce"}).to_string(),
                    };
                }
                jkt = Some(thumbprint(&h["jwk"]));
            }
            let grant = form.get("grant_type").cloned().unwrap_or_default();
            let scopes = match grant.as_str() {
                "authorization_code" => {
                    let verifier = form.get("code_verifier").cloned().unwrap_or_default();
                    let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
                    if st.challenge.as_deref() != Some(computed.as_str())
                        || form.get("code").map(String::as_str) != Some("the-code")
                    {
                        return json_resp(400, json!({"error": "invalid_grant"}));
                    }
                    st.scopes.clone()
                }
                "refresh_token" => {
                    if form.get("refresh_token").map(String::as_str) != Some("the-refresh") {
                        return json_resp(400, json!({"error": "invalid_grant"}));
                    }
                    st.scopes.clone()
                }
                "urn:ietf:params:oauth:grant-type:jwt-bearer" => {
                    let ok = form
                        .get("assertion")
                        .is_some_and(|a| match &cfg.assertion_key {
                            Some(k) => verify_jwt(a, Some(k)).is_some(),
                            None => a == "valid-assertion",
                        });
                    if !ok {
                        return json_resp(400, json!({"error": "invalid_grant"}));
                    }
                    form.get("scope")
                        .map(|s| s.split(' ').map(str::to_owned).collect())
                        .unwrap_or_default()
                }
                "client_credentials" => form
                    .get("scope")
                    .map(|s| s.split(' ').map(str::to_owned).collect())
                    .unwrap_or_default(),
                _ => return json_resp(400, json!({"error": "unsupported_grant_type"})),
            };
            st.counter += 1;
            let token = format!(
                "tok-{}-{}",
                base.rsplit(':').next().unwrap_or(""),
                st.counter
            );
            tokens
                .lock()
                .unwrap()
                .insert(token.clone(), (scopes.clone(), jkt.clone()));
            let mut r = json!({
                "access_token": token,
                "token_type": if jkt.is_some() { "DPoP" } else { "Bearer" },
                "expires_in": 3600,
            });
            if !scopes.is_empty() {
                r["scope"] = json!(scopes.join(" "));
            }
            if cfg.refresh {
                r["refresh_token"] = json!("the-refresh");
            }
            return json_resp(200, r);
        }
        not_found()
    })
}

// ---------------------------------------------------------------------------
// The MCP server (resource server).
// ---------------------------------------------------------------------------

#[derive(Clone)]
struct RsCfg {
    /// Where the PRM is served (None: nowhere).
    prm_path: Option<String>,
    prm_in_header: bool,
    prm_resource: Option<String>,
    prm_scopes: Option<Vec<String>>,
    /// Scopes named in the 401 challenge.
    challenge_scope: Option<String>,
    /// Scopes required for tools/list and for tools/call.
    list_scopes: Vec<String>,
    call_scopes: Vec<String>,
    /// Every request with a token gets 403 insufficient_scope.
    always_403: bool,
    dpop: bool,
    dpop_nonce: bool,
}

impl Default for RsCfg {
    fn default() -> Self {
        RsCfg {
            prm_path: Some("/.well-known/oauth-protected-resource/mcp".into()),
            prm_in_header: true,
            prm_resource: None,
            prm_scopes: None,
            challenge_scope: None,
            list_scopes: vec![],
            call_scopes: vec![],
            always_403: false,
            dpop: false,
            dpop_nonce: false,
        }
    }
}

struct RsShared {
    /// The authorization server the PRM names (changeable for migration).
    as_issuer: Mutex<String>,
    /// Tokens no longer accepted.
    revoked: Mutex<Vec<String>>,
    /// The jtis of the DPoP proofs seen.
    jtis: Mutex<Vec<String>>,
}

fn rs_handler(
    base: String,
    cfg: RsCfg,
    tokens: Tokens,
    shared: Arc<RsShared>,
    fallback: Option<Handler>,
) -> Handler {
    Arc::new(move |req: &Req| {
        let prm_url = cfg.prm_path.as_ref().map(|p| format!("{base}{p}"));
        if req.method == "GET" && cfg.prm_path.as_deref() == Some(req.path.as_str()) {
            let resource = cfg.prm_resource.clone().unwrap_or_else(|| {
                if req.path == "/.well-known/oauth-protected-resource" {
                    base.clone()
                } else {
                    format!("{base}/mcp")
                }
            });
            let mut prm = json!({
                "resource": resource,
                "authorization_servers": [shared.as_issuer.lock().unwrap().clone()],
            });
            if let Some(s) = &cfg.prm_scopes {
                prm["scopes_supported"] = json!(s);
            }
            return json_resp(200, prm);
        }
        if req.method == "POST" && req.path == "/mcp" {
            let scheme = if cfg.dpop { "DPoP" } else { "Bearer" };
            let challenge = |status: u16, error: &str, scope: Option<&str>| {
                let mut v = format!("{scheme} error=\"{error}\"");
                if let Some(s) = scope {
                    v.push_str(&format!(", scope=\"{s}\""));
                }
                if cfg.prm_in_header
                    && let Some(u) = &prm_url
                {
                    v.push_str(&format!(", resource_metadata=\"{u}\""));
                }
                Resp {
                    status,
                    headers: vec![("www-authenticate".into(), v)],
                    body: json!({"error": error}).to_string(),
                }
            };
            let auth = req.header("authorization").unwrap_or_default();
            let token = auth
                .split_once(' ')
                .map(|(_, t)| t.to_owned())
                .unwrap_or_default();
            let known = tokens.lock().unwrap().get(&token).cloned();
            let Some((scopes, jkt)) =
                known.filter(|_| !shared.revoked.lock().unwrap().contains(&token))
            else {
                return challenge(401, "invalid_token", cfg.challenge_scope.as_deref());
            };
            if let Some(jkt) = jkt {
                // A DPoP-bound token: scheme, proof, binding, freshness.
                let proof = req.header("dpop").unwrap_or_default();
                let Some((h, c)) = verify_jwt(&proof, None) else {
                    return challenge(401, "invalid_dpop_proof", None);
                };
                let ath = URL_SAFE_NO_PAD.encode(Sha256::digest(token.as_bytes()));
                if !auth.starts_with("DPoP ")
                    || thumbprint(&h["jwk"]) != jkt
                    || c["htm"] != "POST"
                    || c["htu"] != json!(format!("{base}/mcp"))
                    || c["ath"] != json!(ath)
                {
                    return challenge(401, "invalid_dpop_proof", None);
                }
                let jti = c["jti"].as_str().unwrap_or("").to_owned();
                let mut jtis = shared.jtis.lock().unwrap();
                if jtis.contains(&jti) {
                    return challenge(401, "invalid_dpop_proof", None);
                }
                jtis.push(jti);
                if cfg.dpop_nonce && c["nonce"] != "rs-nonce" {
                    let mut r = challenge(401, "use_dpop_nonce", None);
                    r.headers.push(("dpop-nonce".into(), "rs-nonce".into()));
                    return r;
                }
            }
            let method = req.json()["method"].as_str().unwrap_or("").to_owned();
            let needed = if method == "tools/call" {
                &cfg.call_scopes
            } else {
                &cfg.list_scopes
            };
            if cfg.always_403 || !needed.iter().all(|s| scopes.contains(s)) {
                let s = needed.join(" ");
                return challenge(403, "insufficient_scope", Some(&s));
            }
            return json_resp(200, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        }
        match &fallback {
            Some(h) => h(req),
            None => not_found(),
        }
    })
}

// ---------------------------------------------------------------------------
// A world: one MCP server, one or two authorization servers.
// ---------------------------------------------------------------------------

struct World {
    rs: String,
    as_bases: Vec<String>,
    log: Log,
    tokens: Tokens,
    shared: Arc<RsShared>,
}

impl World {
    /// An MCP server and one authorization server on separate origins.
    async fn new(rs: RsCfg, aus: AsCfg) -> World {
        World::with(rs, vec![aus], false).await
    }

    async fn with(rs_cfg: RsCfg, as_cfgs: Vec<AsCfg>, as_on_rs: bool) -> World {
        let log: Log = Arc::default();
        let tokens: Tokens = Arc::default();
        let (rs_listener, rs) = bind().await;
        let mut as_bases = Vec::new();
        let mut fallback = None;
        for (i, cfg) in as_cfgs.into_iter().enumerate() {
            if as_on_rs {
                fallback = Some(as_handler(rs.clone(), cfg, tokens.clone()));
                as_bases.push(rs.clone());
                continue;
            }
            let (l, base) = bind().await;
            let name = if i == 0 { "as" } else { "as2" };
            let issuer = cfg.issuer_override.clone();
            let prefix = cfg.prefix.clone();
            serve(
                l,
                name,
                log.clone(),
                as_handler(base.clone(), cfg, tokens.clone()),
            );
            let _ = issuer;
            as_bases.push(format!("{base}{prefix}"));
        }
        let shared = Arc::new(RsShared {
            as_issuer: Mutex::new(as_bases[0].clone()),
            revoked: Mutex::default(),
            jtis: Mutex::default(),
        });
        serve(
            rs_listener,
            "rs",
            log.clone(),
            rs_handler(rs.clone(), rs_cfg, tokens.clone(), shared.clone(), fallback),
        );
        World {
            rs,
            as_bases,
            log,
            tokens,
            shared,
        }
    }

    fn mcp(&self) -> Url {
        Url::parse(&format!("{}/mcp", self.rs)).unwrap()
    }

    fn client(&self, config: OAuthConfig) -> OAuthClient {
        OAuthClient::new(self.mcp(), config.timeout(Duration::from_secs(5))).unwrap()
    }

    fn requests(&self, server: &str, path: &str) -> Vec<Req> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(s, r)| *s == server && r.path == path)
            .map(|(_, r)| r.clone())
            .collect()
    }

    fn paths(&self, server: &str) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(s, _)| *s == server)
            .map(|(_, r)| format!("{} {}", r.method, r.path))
            .collect()
    }
}

fn headless() -> OAuthConfig {
    OAuthConfig::authorization_code(HeadlessUserAgent::default())
}

/// The transport's loop: prepare, send, judge, retry (bounded).
async fn call(oauth: &OAuthClient, url: &Url, method: &str) -> Result<u16, AuthError> {
    let http = reqwest::Client::new();
    for _ in 0..6 {
        let auth = oauth.prepare(&Method::POST, url).await?;
        let resp = http
            .post(url.clone())
            .headers(auth.headers().clone())
            .header("content-type", "application/json")
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}).to_string())
            .send()
            .await
            .unwrap();
        let (status, headers) = (resp.status(), resp.headers().clone());
        match oauth.on_response(&auth, status, &headers).await? {
            Verdict::Retry => continue,
            _ => return Ok(status.as_u16()),
        }
    }
    panic!("the retry loop did not end");
}

fn scope_of(r: &Req) -> Option<String> {
    r.query.get("scope").cloned()
}

// ---------------------------------------------------------------------------
// Discovery.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn default_flow_header_prm_dcr_pkce_resource() {
    let w = World::new(RsCfg::default(), AsCfg::default()).await;
    let oauth = w.client(headless());
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    // The path-based PRM came from the header; the root one was never asked for.
    assert_eq!(
        w.requests("rs", "/.well-known/oauth-protected-resource/mcp")
            .len(),
        1
    );
    assert!(
        w.requests("rs", "/.well-known/oauth-protected-resource")
            .is_empty()
    );
    // DCR with application_type and the native redirect.
    let reg = &w.requests("as", "/register")[0];
    let body = reg.json();
    assert_eq!(body["application_type"], "native");
    assert_eq!(
        body["redirect_uris"],
        json!(["http://localhost:3000/callback"])
    );
    assert_eq!(
        body["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );
    // PKCE S256, state, resource exactly as the PRM published it, in both requests.
    let authz = &w.requests("as", "/authorize")[0];
    assert_eq!(authz.query["code_challenge_method"], "S256");
    assert_eq!(authz.query["client_id"], "dcr-client");
    assert!(authz.query["state"].len() >= 16);
    assert_eq!(authz.query["resource"], format!("{}/mcp", w.rs));
    assert_eq!(scope_of(authz), None);
    let token = w.requests("as", "/token")[0].form();
    assert_eq!(token["resource"], format!("{}/mcp", w.rs));
    assert_eq!(token["grant_type"], "authorization_code");
    // The AS only supports `none`: client_id in the body, the DCR secret nowhere.
    assert_eq!(token["client_id"], "dcr-client");
    assert!(!token.contains_key("client_secret"));
    assert!(
        w.requests("as", "/token")[0]
            .header("authorization")
            .is_none()
    );
    // The token is reused: no second authorization.
    assert_eq!(call(&oauth, &w.mcp(), "tools/call").await.unwrap(), 200);
    assert_eq!(w.requests("as", "/authorize").len(), 1);
    assert!(oauth.has_token());
}

#[tokio::test]
async fn prm_path_based_without_header_and_openid_configuration() {
    let rs = RsCfg {
        prm_in_header: false,
        ..RsCfg::default()
    };
    let aus = AsCfg {
        metadata_path: Some("/.well-known/openid-configuration".into()),
        ..AsCfg::default()
    };
    let w = World::new(rs, aus).await;
    let oauth = w.client(headless());
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    assert_eq!(
        w.paths("as")[..2],
        [
            "GET /.well-known/oauth-authorization-server",
            "GET /.well-known/openid-configuration"
        ]
    );
}

#[tokio::test]
async fn root_prm_and_issuer_with_path_never_tries_root_metadata() {
    let rs = RsCfg {
        prm_path: Some("/.well-known/oauth-protected-resource".into()),
        prm_in_header: false,
        ..RsCfg::default()
    };
    let aus = AsCfg {
        prefix: "/tenant1".into(),
        metadata_path: Some("/.well-known/oauth-authorization-server/tenant1".into()),
        ..AsCfg::default()
    };
    let w = World::new(rs, aus).await;
    let oauth = w.client(headless());
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    let rs_paths = w.paths("rs");
    assert!(rs_paths.contains(&"GET /.well-known/oauth-protected-resource/mcp".to_owned()));
    assert!(rs_paths.contains(&"GET /.well-known/oauth-protected-resource".to_owned()));
    assert!(
        !w.paths("as")
            .contains(&"GET /.well-known/oauth-authorization-server".to_owned())
    );
    // The root PRM's resource is the origin: that is what we send.
    assert_eq!(
        w.requests("as", "/tenant1/authorize")[0].query["resource"],
        w.rs
    );
}

#[tokio::test]
async fn custom_prm_location_and_openid_path_appended() {
    let rs = RsCfg {
        prm_path: Some("/custom/metadata/location.json".into()),
        ..RsCfg::default()
    };
    let aus = AsCfg {
        prefix: "/tenant1".into(),
        metadata_path: Some("/tenant1/.well-known/openid-configuration".into()),
        ..AsCfg::default()
    };
    let w = World::new(rs, aus).await;
    let oauth = w.client(headless());
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    assert_eq!(
        w.paths("as")[..3],
        [
            "GET /.well-known/oauth-authorization-server/tenant1",
            "GET /.well-known/openid-configuration/tenant1",
            "GET /tenant1/.well-known/openid-configuration",
        ]
    );
    assert!(
        w.paths("rs")
            .iter()
            .all(|p| !p.contains("oauth-protected-resource"))
    );
}

#[tokio::test]
async fn legacy_no_prm_metadata_at_server_root_with_other_issuer() {
    // 2025-03-26: no PRM; metadata at the MCP server's root names `<base>/oauth` as issuer
    // and endpoints under /oauth. The issuer check is skipped here only.
    let rs = RsCfg {
        prm_path: None,
        ..RsCfg::default()
    };
    let mut aus = AsCfg {
        prefix: "/oauth".into(),
        iss_supported: None,
        iss: Iss::Omit,
        ..AsCfg::default()
    };
    aus.issuer_override = None;
    let w = World::with(rs, vec![aus], true).await;
    let oauth = w.client(headless());
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    assert_eq!(w.requests("rs", "/oauth/register").len(), 1);
    let authz = &w.requests("rs", "/oauth/authorize")[0];
    assert_eq!(authz.query["resource"], format!("{}/mcp", w.rs));
    assert_eq!(w.requests("rs", "/oauth/token").len(), 1);
}

#[tokio::test]
async fn legacy_default_endpoints_without_any_metadata() {
    let rs = RsCfg {
        prm_path: None,
        ..RsCfg::default()
    };
    let aus = AsCfg {
        metadata_path: None,
        iss: Iss::Omit,
        ..AsCfg::default()
    };
    let w = World::with(rs, vec![aus], true).await;
    let oauth = w.client(headless());
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    for p in ["/register", "/authorize", "/token"] {
        assert_eq!(w.requests("rs", p).len(), 1, "{p}");
    }
}

// ---------------------------------------------------------------------------
// Refusals.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn resource_mismatch_is_refused_before_any_authorization() {
    let rs = RsCfg {
        prm_resource: Some("https://evil.example.com/mcp".into()),
        ..RsCfg::default()
    };
    let w = World::new(rs, AsCfg::default()).await;
    let oauth = w.client(headless());
    let err = call(&oauth, &w.mcp(), "tools/list").await.unwrap_err();
    assert!(matches!(err, AuthError::ResourceMismatch { .. }), "{err}");
    assert_eq!(
        w.requests("rs", "/.well-known/oauth-protected-resource/mcp")
            .len(),
        1
    );
    assert!(w.paths("as").is_empty(), "{:?}", w.paths("as"));
}

#[tokio::test]
async fn metadata_issuer_mismatch_is_refused() {
    let aus = AsCfg {
        issuer_override: Some("https://attacker.example.com".into()),
        ..AsCfg::default()
    };
    let w = World::new(RsCfg::default(), aus).await;
    let oauth = w.client(headless());
    let err = call(&oauth, &w.mcp(), "tools/list").await.unwrap_err();
    assert!(matches!(err, AuthError::IssuerMismatch { .. }), "{err}");
    assert_eq!(
        w.paths("as"),
        vec!["GET /.well-known/oauth-authorization-server"]
    );
}

#[tokio::test]
async fn iss_parameter_checks() {
    for (iss, supported, ok) in [
        (Iss::Correct, Some(true), true),
        (Iss::Omit, None, true),
        (Iss::Omit, Some(true), false),
        (Iss::Wrong, Some(true), false),
        (Iss::Wrong, None, false),
        (Iss::TrailingSlash, Some(true), false),
    ] {
        let aus = AsCfg {
            iss,
            iss_supported: supported,
            ..AsCfg::default()
        };
        let w = World::new(RsCfg::default(), aus).await;
        let oauth = w.client(headless());
        let r = call(&oauth, &w.mcp(), "tools/list").await;
        assert_eq!(w.requests("as", "/authorize").len(), 1, "{iss:?}");
        if ok {
            assert_eq!(r.unwrap(), 200, "{iss:?} {supported:?}");
        } else {
            assert!(
                matches!(r, Err(AuthError::IssMismatch { .. })),
                "{iss:?} {supported:?}: {r:?}"
            );
            assert!(
                w.requests("as", "/token").is_empty(),
                "{iss:?}: the code was used"
            );
        }
    }
}

#[tokio::test]
async fn no_pkce_support_is_refused() {
    let aus = AsCfg {
        pkce: None,
        ..AsCfg::default()
    };
    let w = World::new(RsCfg::default(), aus).await;
    let err = call(&w.client(headless()), &w.mcp(), "tools/list")
        .await
        .unwrap_err();
    assert!(matches!(err, AuthError::PkceUnsupported(_)), "{err}");
    assert!(w.requests("as", "/authorize").is_empty());
}

#[tokio::test]
async fn tokens_never_go_to_another_origin() {
    let w = World::new(RsCfg::default(), AsCfg::default()).await;
    let oauth = w.client(headless());
    call(&oauth, &w.mcp(), "tools/list").await.unwrap();
    let same = oauth.prepare(&Method::POST, &w.mcp()).await.unwrap();
    assert!(same.headers().contains_key("authorization"));
    let other = Url::parse(&format!("{}/mcp", w.as_bases[0])).unwrap();
    let auth = oauth.prepare(&Method::POST, &other).await.unwrap();
    assert!(auth.headers().is_empty());
    // And a 401 from there does not start an authorization.
    let mut h = HeaderMap::new();
    h.insert("www-authenticate", "Bearer".parse().unwrap());
    let v = oauth
        .on_response(&auth, StatusCode::UNAUTHORIZED, &h)
        .await
        .unwrap();
    assert_eq!(v, Verdict::Proceed);
}

#[tokio::test]
async fn insecure_authorization_server_is_refused() {
    // The PRM names a plain-http, non-loopback AS: nothing is sent there.
    let w = World::new(RsCfg::default(), AsCfg::default()).await;
    *w.shared.as_issuer.lock().unwrap() = "http://as.example.com".into();
    let err = call(&w.client(headless()), &w.mcp(), "tools/list")
        .await
        .unwrap_err();
    assert!(matches!(err, AuthError::InsecureUrl(_)), "{err}");
}

// ---------------------------------------------------------------------------
// Client identity and token endpoint authentication.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn token_endpoint_auth_methods() {
    for method in ["client_secret_basic", "client_secret_post", "none"] {
        let secret = (method != "none").then(|| "s3cret with space".to_owned());
        let aus = AsCfg {
            auth_methods: vec![method.into()],
            dcr: ("cid".into(), secret.clone(), Some(method.into())),
            client: secret.clone().map(|s| ("cid".into(), s)),
            ..AsCfg::default()
        };
        let w = World::new(RsCfg::default(), aus).await;
        assert_eq!(
            call(&w.client(headless()), &w.mcp(), "tools/list")
                .await
                .unwrap(),
            200,
            "{method}"
        );
        let reg = w.requests("as", "/register")[0].json();
        assert_eq!(reg["token_endpoint_auth_method"], method);
        let t = &w.requests("as", "/token")[0];
        let form = t.form();
        match method {
            "client_secret_basic" => {
                assert_eq!(
                    basic_creds(t),
                    Some(("cid".into(), "s3cret with space".into()))
                );
                assert!(!form.contains_key("client_secret"));
            }
            "client_secret_post" => {
                assert!(t.header("authorization").is_none());
                assert_eq!(form["client_secret"], "s3cret with space");
            }
            _ => {
                assert!(t.header("authorization").is_none());
                assert!(!form.contains_key("client_secret"));
                assert_eq!(form["client_id"], "cid");
            }
        }
    }
}

#[tokio::test]
async fn pre_registered_client_skips_registration() {
    let aus = AsCfg {
        registration: false,
        auth_methods: vec!["client_secret_basic".into()],
        client: Some((
            "pre-registered-client".into(),
            "pre-registered-secret".into(),
        )),
        ..AsCfg::default()
    };
    let w = World::new(RsCfg::default(), aus).await;
    let cfg = headless().pre_registered(PreRegisteredClient::new(
        "pre-registered-client",
        Some(Secret::new("pre-registered-secret")),
    ));
    assert_eq!(
        call(&w.client(cfg), &w.mcp(), "tools/list").await.unwrap(),
        200
    );
    assert!(w.requests("as", "/register").is_empty());
    // Bound to another issuer: not offered, and without DCR there is no identity.
    let cfg = headless().pre_registered(
        PreRegisteredClient::new(
            "pre-registered-client",
            Some(Secret::new("pre-registered-secret")),
        )
        .for_issuer("https://other.example"),
    );
    let err = call(&w.client(cfg), &w.mcp(), "tools/list")
        .await
        .unwrap_err();
    assert!(matches!(err, AuthError::NoClientIdentity(_)), "{err}");
}

#[tokio::test]
async fn client_id_metadata_document_and_offline_access() {
    let rs = RsCfg {
        prm_scopes: Some(vec!["mcp:basic".into()]),
        ..RsCfg::default()
    };
    let aus = AsCfg {
        cimd: Some(true),
        scopes_supported: Some(vec!["mcp:basic".into(), "offline_access".into()]),
        ..AsCfg::default()
    };
    let w = World::new(rs, aus).await;
    let cfg = headless().client_metadata_url("https://conformance-test.local/client-metadata.json");
    assert_eq!(
        call(&w.client(cfg), &w.mcp(), "tools/list").await.unwrap(),
        200
    );
    assert!(w.requests("as", "/register").is_empty());
    let a = &w.requests("as", "/authorize")[0];
    assert_eq!(
        a.query["client_id"],
        "https://conformance-test.local/client-metadata.json"
    );
    assert_eq!(scope_of(a).as_deref(), Some("mcp:basic offline_access"));
}

#[tokio::test]
async fn registrations_are_per_issuer_and_the_server_may_migrate() {
    let rs = RsCfg {
        challenge_scope: Some("mcp:basic".into()),
        ..RsCfg::default()
    };
    let as1 = AsCfg {
        dcr: ("as1-client".into(), Some("as1-secret".into()), None),
        ..AsCfg::default()
    };
    let as2 = AsCfg {
        dcr: ("as2-client".into(), Some("as2-secret".into()), None),
        ..AsCfg::default()
    };
    let w = World::with(rs, vec![as1, as2], false).await;
    let oauth = w.client(headless());
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    // The server moves to AS2 and forgets the old tokens.
    *w.shared.as_issuer.lock().unwrap() = w.as_bases[1].clone();
    let old: Vec<String> = w.tokens.lock().unwrap().keys().cloned().collect();
    w.shared.revoked.lock().unwrap().extend(old);
    assert_eq!(call(&oauth, &w.mcp(), "tools/call").await.unwrap(), 200);
    assert_eq!(w.requests("as2", "/register").len(), 1);
    let a2 = &w.requests("as2", "/authorize")[0];
    assert_eq!(a2.query["client_id"], "as2-client");
    assert_eq!(scope_of(a2).as_deref(), Some("mcp:basic"));
    let t2 = w.requests("as2", "/token")[0].form();
    assert_eq!(t2["client_id"], "as2-client");
    for r in w.log.lock().unwrap().iter().filter(|(s, _)| *s == "as2") {
        assert!(!r.1.body.contains("as1-"), "AS1 credentials reached AS2");
        assert!(!r.1.query.values().any(|v| v.contains("as1-")));
    }
}

// ---------------------------------------------------------------------------
// Scopes and step-up.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn scope_selection_order() {
    // 1. The challenge's scope wins.
    let rs = RsCfg {
        challenge_scope: Some("mcp:basic".into()),
        prm_scopes: Some(vec!["a".into(), "b".into()]),
        list_scopes: vec!["mcp:basic".into()],
        ..RsCfg::default()
    };
    let w = World::new(rs, AsCfg::default()).await;
    assert_eq!(
        call(&w.client(headless()), &w.mcp(), "tools/list")
            .await
            .unwrap(),
        200
    );
    assert_eq!(
        scope_of(&w.requests("as", "/authorize")[0]).as_deref(),
        Some("mcp:basic")
    );
    // 2. Else all of the PRM's scopes_supported.
    let rs = RsCfg {
        prm_scopes: Some(vec![
            "mcp:basic".into(),
            "mcp:read".into(),
            "mcp:write".into(),
        ]),
        ..RsCfg::default()
    };
    let w = World::new(rs, AsCfg::default()).await;
    call(&w.client(headless()), &w.mcp(), "tools/list")
        .await
        .unwrap();
    assert_eq!(
        scope_of(&w.requests("as", "/authorize")[0]).as_deref(),
        Some("mcp:basic mcp:read mcp:write")
    );
    // 3. Else no scope at all; and offline_access is not asked for when the AS does not
    //    list it, whatever the PRM says.
    let w = World::new(RsCfg::default(), AsCfg::default()).await;
    call(&w.client(headless()), &w.mcp(), "tools/list")
        .await
        .unwrap();
    assert_eq!(scope_of(&w.requests("as", "/authorize")[0]), None);
    let rs = RsCfg {
        prm_scopes: Some(vec!["mcp:basic".into(), "mcp:read".into()]),
        ..RsCfg::default()
    };
    let aus = AsCfg {
        scopes_supported: Some(vec!["mcp:basic".into(), "mcp:read".into()]),
        ..AsCfg::default()
    };
    let w = World::new(rs, aus).await;
    call(&w.client(headless()), &w.mcp(), "tools/list")
        .await
        .unwrap();
    assert_eq!(
        scope_of(&w.requests("as", "/authorize")[0]).as_deref(),
        Some("mcp:basic mcp:read")
    );
}

#[tokio::test]
async fn step_up_unites_scopes() {
    let rs = RsCfg {
        challenge_scope: Some("mcp:basic".into()),
        list_scopes: vec!["mcp:basic".into()],
        call_scopes: vec!["mcp:write".into()],
        ..RsCfg::default()
    };
    let w = World::new(rs, AsCfg::default()).await;
    let oauth = w.client(headless());
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    assert_eq!(call(&oauth, &w.mcp(), "tools/call").await.unwrap(), 200);
    let authz = w.requests("as", "/authorize");
    assert_eq!(authz.len(), 2);
    assert_eq!(scope_of(&authz[0]).as_deref(), Some("mcp:basic"));
    assert_eq!(scope_of(&authz[1]).as_deref(), Some("mcp:basic mcp:write"));
    assert_eq!(
        oauth.granted_scopes().unwrap(),
        vec!["mcp:basic", "mcp:write"]
    );
    // Registered once.
    assert_eq!(w.requests("as", "/register").len(), 1);
}

#[tokio::test]
async fn step_up_is_capped_at_three_authorizations() {
    let rs = RsCfg {
        challenge_scope: Some("mcp:admin".into()),
        call_scopes: vec!["mcp:admin".into()],
        list_scopes: vec!["mcp:admin".into()],
        always_403: true,
        ..RsCfg::default()
    };
    let w = World::new(rs, AsCfg::default()).await;
    let oauth = w.client(headless());
    let err = call(&oauth, &w.mcp(), "tools/list").await.unwrap_err();
    assert!(matches!(err, AuthError::TooManyAttempts(3)), "{err}");
    // Further requests do not start new authorizations either.
    let err = call(&oauth, &w.mcp(), "tools/call").await.unwrap_err();
    assert!(matches!(err, AuthError::TooManyAttempts(3)), "{err}");
    assert_eq!(w.requests("as", "/authorize").len(), 3);
}

#[tokio::test]
async fn concurrent_challenges_lead_to_one_authorization() {
    let w = World::new(RsCfg::default(), AsCfg::default()).await;
    let oauth = w.client(headless());
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let oauth = oauth.clone();
        let url = w.mcp();
        tasks.push(tokio::spawn(async move {
            call(&oauth, &url, "tools/list").await
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), 200);
    }
    assert_eq!(w.requests("as", "/authorize").len(), 1);
    assert_eq!(w.requests("as", "/register").len(), 1);
}

#[tokio::test]
async fn a_rejected_token_is_refreshed_not_reauthorized() {
    let aus = AsCfg {
        refresh: true,
        scopes_supported: Some(vec!["mcp:basic".into(), "offline_access".into()]),
        ..AsCfg::default()
    };
    let rs = RsCfg {
        challenge_scope: Some("mcp:basic".into()),
        ..RsCfg::default()
    };
    let w = World::new(rs, aus).await;
    let oauth = w.client(headless());
    call(&oauth, &w.mcp(), "tools/list").await.unwrap();
    let old: Vec<String> = w.tokens.lock().unwrap().keys().cloned().collect();
    w.shared.revoked.lock().unwrap().extend(old);
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    assert_eq!(w.requests("as", "/authorize").len(), 1);
    let grants: Vec<String> = w
        .requests("as", "/token")
        .iter()
        .map(|r| r.form()["grant_type"].clone())
        .collect();
    assert_eq!(grants, vec!["authorization_code", "refresh_token"]);
    let refresh = w.requests("as", "/token")[1].form();
    assert_eq!(refresh["resource"], format!("{}/mcp", w.rs));
}

// ---------------------------------------------------------------------------
// Other grants.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn client_credentials_with_basic_and_with_private_key_jwt() {
    let aus = AsCfg {
        grant_types: vec!["client_credentials".into()],
        auth_methods: vec!["client_secret_basic".into()],
        client: Some(("cc-client".into(), "cc-secret".into())),
        ..AsCfg::default()
    };
    let rs = RsCfg {
        prm_scopes: Some(vec!["mcp:basic".into()]),
        ..RsCfg::default()
    };
    let w = World::new(rs.clone(), aus).await;
    let cfg = OAuthConfig::client_credentials(ClientCredentials::secret("cc-client", "cc-secret"));
    assert_eq!(
        call(&w.client(cfg), &w.mcp(), "tools/list").await.unwrap(),
        200
    );
    let t = &w.requests("as", "/token")[0];
    assert_eq!(t.form()["grant_type"], "client_credentials");
    assert_eq!(t.form()["resource"], format!("{}/mcp", w.rs));
    assert_eq!(t.form()["scope"], "mcp:basic");
    assert!(t.header("authorization").unwrap().starts_with("Basic "));
    assert!(w.requests("as", "/authorize").is_empty() && w.requests("as", "/register").is_empty());

    let key = EcKey::generate();
    let aus = AsCfg {
        grant_types: vec!["client_credentials".into()],
        auth_methods: vec!["private_key_jwt".into()],
        assertion_key: Some(key.verifying_key()),
        ..AsCfg::default()
    };
    let w = World::new(rs, aus).await;
    let cfg = OAuthConfig::client_credentials(ClientCredentials::private_key_jwt("cc-client", key));
    assert_eq!(
        call(&w.client(cfg), &w.mcp(), "tools/list").await.unwrap(),
        200
    );
    let form = w.requests("as", "/token")[0].form();
    assert_eq!(
        form["client_assertion_type"],
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    );
    let claims = b64json(form["client_assertion"].split('.').nth(1).unwrap()).unwrap();
    assert_eq!(claims["iss"], "cc-client");
    assert_eq!(claims["aud"], json!(w.as_bases[0]));
}

#[tokio::test]
async fn jwt_bearer_failures_are_not_retried() {
    let aus = AsCfg {
        grant_types: vec!["urn:ietf:params:oauth:grant-type:jwt-bearer".into()],
        registration: false,
        ..AsCfg::default()
    };
    let w = World::new(RsCfg::default(), aus).await;
    let oauth = w.client(OAuthConfig::jwt_bearer("valid-assertion"));
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    assert_eq!(
        w.requests("as", "/token")[0].form()["assertion"],
        "valid-assertion"
    );

    let aus = AsCfg {
        fail_with: Some("invalid_grant".into()),
        registration: false,
        ..AsCfg::default()
    };
    let w = World::new(RsCfg::default(), aus).await;
    let oauth = w.client(OAuthConfig::jwt_bearer("expired-assertion"));
    let err = call(&oauth, &w.mcp(), "tools/list").await.unwrap_err();
    assert!(
        matches!(&err, AuthError::TokenEndpoint { error, .. } if error == "invalid_grant"),
        "{err}"
    );
    let err = call(&oauth, &w.mcp(), "tools/call").await.unwrap_err();
    assert!(matches!(err, AuthError::GrantFailed(_)), "{err}");
    assert_eq!(w.requests("as", "/token").len(), 1);
}

#[tokio::test]
async fn enterprise_managed_token_exchange_then_jwt_bearer() {
    // The IdP: token exchange of an ID token for an ID-JAG.
    let log: Log = Arc::default();
    let (l, idp) = bind().await;
    serve(
        l,
        "idp",
        log.clone(),
        Arc::new(|req: &Req| {
            let f = req.form();
            let ok = f.get("grant_type").map(String::as_str)
                == Some("urn:ietf:params:oauth:grant-type:token-exchange")
                && f.get("requested_token_type").map(String::as_str)
                    == Some("urn:ietf:params:oauth:token-type:id-jag")
                && f.get("subject_token_type").map(String::as_str)
                    == Some("urn:ietf:params:oauth:token-type:id_token")
                && f.get("subject_token").map(String::as_str) == Some("the-id-token")
                && f.get("client_id").map(String::as_str) == Some("idp-client")
                && f.contains_key("audience")
                && f.contains_key("resource");
            if !ok {
                return json_resp(400, json!({"error": "invalid_request"}));
            }
            json_resp(
                200,
                json!({
                    "access_token": "valid-assertion",
                    "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "token_type": "N_A",
                }),
            )
        }),
    );
    let aus = AsCfg {
        grant_types: vec!["urn:ietf:params:oauth:grant-type:jwt-bearer".into()],
        auth_methods: vec!["client_secret_basic".into()],
        client: Some(("xaa-client".into(), "xaa-secret".into())),
        ..AsCfg::default()
    };
    let w = World::new(RsCfg::default(), aus).await;
    let ia = IdentityAssertion::new(
        Url::parse(&format!("{idp}/token")).unwrap(),
        "idp-client",
        "the-id-token",
        ClientCredentials::secret("xaa-client", "xaa-secret"),
    );
    let oauth = w.client(OAuthConfig::identity_assertion(ia));
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    let exchange = log.lock().unwrap()[0].1.form();
    assert_eq!(exchange["audience"], w.as_bases[0]);
    assert_eq!(exchange["resource"], format!("{}/mcp", w.rs));
    let t = &w.requests("as", "/token")[0];
    assert_eq!(
        t.form()["grant_type"],
        "urn:ietf:params:oauth:grant-type:jwt-bearer"
    );
    assert_eq!(t.form()["assertion"], "valid-assertion");
    assert_eq!(
        basic_creds(t),
        Some(("xaa-client".into(), "xaa-secret".into()))
    );
}

#[tokio::test]
async fn dpop_bound_tokens_with_nonces() {
    let aus = AsCfg {
        dpop: true,
        dpop_nonce: true,
        ..AsCfg::default()
    };
    let rs = RsCfg {
        dpop: true,
        dpop_nonce: true,
        ..RsCfg::default()
    };
    let w = World::new(rs, aus).await;
    let oauth = w.client(headless().dpop(true));
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    assert_eq!(call(&oauth, &w.mcp(), "tools/call").await.unwrap(), 200);
    // The token request was retried once with the AS nonce.
    let tokens = w.requests("as", "/token");
    assert_eq!(tokens.len(), 2);
    let claims = b64json(tokens[1].header("dpop").unwrap().split('.').nth(1).unwrap()).unwrap();
    assert_eq!(claims["nonce"], "as-nonce");
    // Every MCP request with the token used the DPoP scheme and a fresh proof.
    let mcp: Vec<Req> = w
        .requests("rs", "/mcp")
        .into_iter()
        .filter(|r| r.header("authorization").is_some())
        .collect();
    assert!(mcp.len() >= 3);
    assert!(
        mcp.iter()
            .all(|r| r.header("authorization").unwrap().starts_with("DPoP "))
    );
    assert_eq!(w.requests("as", "/authorize").len(), 1);
}

#[tokio::test]
async fn loopback_user_agent_takes_the_browser_redirect() {
    let w = World::new(RsCfg::default(), AsCfg::default()).await;
    // The "browser": follow the authorization server's redirect to our loopback listener,
    // after a stray request with the wrong state that must be ignored.
    let ua = LoopbackUserAgent::new()
        .unwrap()
        .timeout(Duration::from_secs(10))
        .opener(|url: &Url| {
            let url = url.clone();
            tokio::spawn(async move {
                let http = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .unwrap();
                let to = http.get(url).send().await.unwrap().headers()["location"]
                    .to_str()
                    .unwrap()
                    .to_owned();
                let mut stray = Url::parse(&to).unwrap();
                stray.set_query(Some("code=evil&state=wrong"));
                assert_eq!(http.get(stray).send().await.unwrap().status(), 404);
                assert_eq!(http.get(to).send().await.unwrap().status(), 200);
            });
            Ok(())
        });
    let redirect = UserAgent::redirect_uri(&ua).to_string();
    let oauth = w.client(OAuthConfig::authorization_code(ua));
    assert_eq!(call(&oauth, &w.mcp(), "tools/list").await.unwrap(), 200);
    let reg = w.requests("as", "/register")[0].json();
    assert_eq!(reg["redirect_uris"], json!([redirect]));
    assert!(redirect.starts_with("http://127.0.0.1:"));
}
