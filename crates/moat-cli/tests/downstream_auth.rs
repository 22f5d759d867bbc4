//! Credentials to servers behind the gateway (`[servers.NAME.auth]`), against a real
//! authorization server: oidc-provider (`interop/oidc_issuer.mjs`) with the RFC 8693 token
//! exchange grant, two users, the gateway's resource and the downstream server's.
//!
//! The downstream server is an SDK server in this process, a resource server for its own
//! URL, that records every token its tool is called with. Through one `moat gateway --http`:
//! - `exchange`: alice's and bob's calls reach it with tokens of their own users, made for
//!   it (audience checked by the downstream), exchanged once per user and then reused;
//!   neither caller's own token ever reaches it, and no token of alice's reaches a call of
//!   bob's; the gateway's own token (client credentials) lists the tools and is never the
//!   one a call carries;
//! - `exchange` over stdio, where there is no caller token: the call fails saying so;
//! - `static`: the downstream takes only the configured secret, which the call carries in
//!   place of the caller's token, and which no answer shows;
//! - `oauth`: each user's first call sends them to authorize (URL-mode elicitation in
//!   2025-11-25, an input request in 2026-07-28), the redirect comes back to the gateway's
//!   callback, and the call completes with a token of that user's for the downstream; the
//!   next call needs no authorization; tokens are kept apart per user, sealed at rest;
//! - `oauth` with access tokens that live seconds and refresh tokens rotated on each use:
//!   the user's calls go on with refreshed tokens and no new authorization, across a
//!   gateway restart too (the rotated refresh token is the one stored), and no refresh
//!   token is ever presented twice.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moat::transport::http::server::{HttpServerOptions, ResourceOptions};
use moat::{Client, HttpOptions, NoArgs, RequestContext};
use serde_json::{Value, json};

mod support;
use support::{HttpGateway, MOAT, Ready};

/// The gateway's resource (its tokens' audience).
const GATEWAY: &str = "http://127.0.0.1/mcp";

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// oidc-provider, this checkout's script run beside the installed peers' node_modules.
struct Issuer {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Issuer {
    fn start(downstream: &str) -> Option<Issuer> {
        Issuer::start_with(&[downstream])
    }

    /// With the script's further arguments after the gateway's resource.
    fn start_with(args: &[&str]) -> Option<Issuer> {
        Issuer::start_env(args, &[])
    }

    /// With further arguments and environment variables.
    fn start_env(args: &[&str], env: &[(&str, &str)]) -> Option<Issuer> {
        let peers = support::peers(&["node_modules/oidc-provider"])?;
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(peers.path("node_modules"), dir.path().join("node_modules"))
            .unwrap();
        let script = dir.path().join("oidc_issuer.mjs");
        std::fs::copy(support::script("oidc_issuer.mjs"), &script).unwrap();
        let mut child = Command::new("node")
            .arg(&script)
            .arg(GATEWAY)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start node");
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let url = serde_json::from_str::<Value>(&line)
            .unwrap_or_else(|e| panic!("issuer's first line {line:?}: {e}"))["issuer"]
            .as_str()
            .unwrap()
            .to_owned();
        Some(Issuer {
            child,
            url,
            _dir: dir,
        })
    }

    /// `user`'s access token for the gateway (client-a, the script's user grant).
    async fn user_token(&self, user: &str) -> String {
        let r = reqwest::Client::new()
            .post(format!("{}/token", self.url))
            .form(&[
                ("grant_type", "urn:moat:test:user"),
                ("username", user),
                ("client_id", "client-a"),
                ("client_secret", "secret-a"),
                ("resource", GATEWAY),
                ("scope", "mcp:tools"),
            ])
            .send()
            .await
            .unwrap();
        let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
        v["access_token"].as_str().expect("a token").to_owned()
    }

    /// Every token request the issuer answered or refused.
    async fn grants(&self) -> Vec<Value> {
        let r = reqwest::get(format!("{}/_test/grants", self.url))
            .await
            .unwrap();
        serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
    }

    async fn exchanges(&self) -> Vec<Value> {
        let r = reqwest::get(format!("{}/_test/exchanges", self.url))
            .await
            .unwrap();
        serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
    }
}

/// What the downstream's tool was called with: the caller's subject and token.
type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>)>>>;

/// A free loopback port (the downstream's URL is its resource, which the issuer must know
/// before the downstream can name the issuer).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The revisions of a downstream server with sessions only (no 2026-07-28, where each
/// request is a connection of its own): one user connection is then one session.
fn handshake_only() -> moat::protocol::version::SupportedVersions {
    use moat::ProtocolVersion::*;
    moat::protocol::version::SupportedVersions::new(vec![V2025_06_18, V2025_11_25])
}

/// The downstream sessions the calls came on (the downstream peer's id), in call order.
type Sessions = Arc<Mutex<Vec<u64>>>;

/// The downstream server at `port`: `whoami` answers the subject and records the call.
async fn downstream(port: u16, options: HttpServerOptions) -> Seen {
    downstream_sessions(port, options).await.0
}

/// As [`downstream`], with the session each call came on.
async fn downstream_sessions(port: u16, options: HttpServerOptions) -> (Seen, Sessions) {
    let seen: Seen = Arc::default();
    let sessions: Sessions = Arc::default();
    let (record, record_session) = (seen.clone(), sessions.clone());
    let handshake = !options.versions.has_modern();
    let server = moat::Server::new("down", "1.0");
    // The HTTP server's revisions are the SDK server's too.
    let server = if handshake {
        server.versions(options.versions.clone())
    } else {
        server
    };
    let server = server.tool_with_context(
        "whoami",
        "Who is calling",
        move |ctx: RequestContext, _: NoArgs| {
            let record = record.clone();
            record_session.lock().unwrap().push(ctx.peer().id());
            async move {
                let identity = ctx.identity();
                let subject = identity.and_then(|i| i.subject.clone());
                let token = identity
                    .and_then(|i| i.access_token.as_ref())
                    .map(|t| t.expose().to_owned());
                record.lock().unwrap().push((subject.clone(), token));
                Ok::<_, String>(subject.unwrap_or_else(|| "nobody".into()))
            }
        },
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let http = server.bind_http(addr, options).await.expect("bind");
    tokio::spawn(http.run());
    (seen, sessions)
}

fn gateway_config(dir: &std::path::Path, servers: &str, issuer: &str) -> std::path::PathBuf {
    let config = dir.join("moat.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = {state}\n\n{servers}\n[auth]\nissuer = {issuer}\nresource = {gw}\n\n\
             [policy]\ndefault = \"allow\"\n",
            state = toml_str(&dir.join("state").to_string_lossy()),
            issuer = toml_str(issuer),
            gw = toml_str(GATEWAY),
        ),
    )
    .unwrap();
    config
}

async fn call(gateway: &str, token: &str, tool: &str) -> Value {
    let client = Client::builder()
        .connect_url(gateway, HttpOptions::default().bearer_token(token))
        .await
        .expect("connect to the gateway");
    let result = client.call_tool(tool, json!({})).await.expect("tools/call");
    client.close().await;
    serde_json::to_value(result).unwrap()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_gives_each_user_their_own_token_and_never_forwards_theirs() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let Some(issuer) = Issuer::start(&url) else {
        return;
    };
    let mut options = HttpServerOptions::default();
    options.resource = Some(ResourceOptions::new(&issuer.url, &url));
    let seen = downstream(port, options).await;

    let dir = tempfile::tempdir().unwrap();
    let servers = format!(
        "[servers.down]\nurl = {url}\n\n[servers.down.auth]\nmode = \"exchange\"\nissuer = {iss}\n\
         client_id = \"moat-gateway\"\nclient_secret_env = \"GW_SECRET\"\n",
        url = toml_str(&url),
        iss = toml_str(&issuer.url),
    );
    let config = gateway_config(dir.path(), &servers, &issuer.url);
    let gateway = HttpGateway::start(
        MOAT,
        &config,
        &[("GW_SECRET", "secret-gw")],
        Ready::Listed,
        Duration::from_secs(60),
    );

    let alice = issuer.user_token("alice").await;
    let bob = issuer.user_token("bob").await;
    for (token, user) in [(&alice, "alice"), (&bob, "bob"), (&alice, "alice")] {
        let result = call(&gateway.url, token, "down__whoami").await;
        assert_eq!(text(&result), user, "{result}");
    }

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    let tokens_of = |user: &str| -> Vec<String> {
        seen.iter()
            .filter(|(s, _)| s.as_deref() == Some(user))
            .filter_map(|(_, t)| t.clone())
            .collect()
    };
    let (alices, bobs) = (tokens_of("alice"), tokens_of("bob"));
    assert_eq!((alices.len(), bobs.len()), (2, 1), "{seen:?}");
    for token in alices.iter().chain(&bobs) {
        assert!(
            token != &alice && token != &bob,
            "a caller's own token reached the downstream server"
        );
    }
    assert!(
        !alices.iter().any(|t| bobs.contains(t)),
        "a token of alice's reached a call of bob's"
    );
    // Alice's second call reused her exchanged token.
    assert_eq!(alices[0], alices[1]);
    let exchanges = issuer.exchanges().await;
    let count = |user: &str| exchanges.iter().filter(|e| e["sub"] == user).count();
    assert_eq!((count("alice"), count("bob")), (1, 1), "{exchanges:?}");
    assert!(
        exchanges
            .iter()
            .all(|e| e["client"] == "moat-gateway" && e["resource"] == url.as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_without_a_caller_token_is_a_clear_error() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let Some(issuer) = Issuer::start(&url) else {
        return;
    };
    let mut options = HttpServerOptions::default();
    options.resource = Some(ResourceOptions::new(&issuer.url, &url));
    let seen = downstream(port, options).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("moat.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = {state}\n[servers.down]\nurl = {url}\n[servers.down.auth]\nmode = \"exchange\"\n\
             issuer = {iss}\nclient_id = \"moat-gateway\"\nclient_secret_env = \"GW_SECRET\"\n\
             [policy]\ndefault = \"allow\"\n",
            state = toml_str(&dir.path().join("state").to_string_lossy()),
            url = toml_str(&url),
            iss = toml_str(&issuer.url),
        ),
    )
    .unwrap();
    // Over stdio: the caller is the local OS user, with no token to exchange.
    let child =
        moat::transport::ChildConfig::new(MOAT, ["gateway", "--config", config.to_str().unwrap()])
            .env("GW_SECRET", "secret-gw");
    let client = Client::builder()
        .connect_child(child)
        .await
        .expect("start the gateway");
    let mut result = Value::Null;
    for _ in 0..100 {
        result = serde_json::to_value(
            client
                .call_tool("down__whoami", json!({}))
                .await
                .expect("tools/call"),
        )
        .unwrap();
        if !text(&result).contains("Unknown tool") && !text(&result).contains("no tool") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        text(&result).contains("carries no access token"),
        "{result}"
    );
    assert!(seen.lock().unwrap().is_empty());
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_sends_the_secret_in_place_of_the_callers_token() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let Some(issuer) = Issuer::start("http://127.0.0.1:9/unused") else {
        return;
    };
    const SECRET: &str = "s3cret-static-value";
    let mut options = HttpServerOptions::default();
    options.token = Some(SECRET.into());
    let seen = downstream(port, options).await;
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("secret.txt");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    // `bad` sends a secret the downstream refuses: it never starts, and says why without it.
    const WRONG: &str = "wrong-secret-value";
    let servers = format!(
        "[servers.st]\nurl = {url}\n\n[servers.st.auth]\nmode = \"static\"\nvalue_file = {file}\n\n\
         [servers.bad]\nurl = {url}\n\n[servers.bad.auth]\nmode = \"static\"\nvalue_env = \"BAD_SECRET\"\n",
        url = toml_str(&url),
        file = toml_str(&secret_file.to_string_lossy()),
    );
    let config = gateway_config(dir.path(), &servers, &issuer.url);
    let gateway = HttpGateway::start(
        MOAT,
        &config,
        &[("BAD_SECRET", WRONG)],
        Ready::Listed,
        Duration::from_secs(60),
    );
    let alice = issuer.user_token("alice").await;
    // The downstream takes only the secret: the call getting through is the secret sent.
    let result = call(&gateway.url, &alice, "st__whoami").await;
    assert_eq!(text(&result), "nobody", "{result}");
    assert_eq!(seen.lock().unwrap().len(), 1);
    let client = Client::builder()
        .connect_url(&gateway.url, HttpOptions::default().bearer_token(&alice))
        .await
        .unwrap();
    let listed = serde_json::to_string(&client.list_all_tools().await.unwrap()).unwrap();
    assert!(!listed.contains(SECRET));
    let refused = match client.call_tool("bad__whoami", json!({})).await {
        Ok(r) => serde_json::to_string(&r).unwrap(),
        Err(e) => e.to_string(),
    };
    assert!(refused.contains("bad"), "{refused}");
    client.close().await;
    let log = gateway.log();
    for secret in [SECRET, WRONG] {
        assert!(!refused.contains(secret), "{refused}");
        assert!(
            !log.contains(secret),
            "the gateway's log shows a secret: {log}"
        );
    }
}

/// A browser for the test issuer: follows redirects from `url` by hand (keeping cookies),
/// signs in as `user` at the issuer's test login, and ends at the gateway's callback.
/// The last page's status and text.
async fn browse(url: &str, user: &str) -> (u16, String) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut cookies: Vec<(String, String)> = Vec::new();
    let mut next = reqwest::Url::parse(url).unwrap();
    for _ in 0..12 {
        let mut request = http.get(next.clone());
        if !cookies.is_empty() {
            let jar: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            request = request.header("cookie", jar.join("; "));
        }
        let response = request.send().await.unwrap();
        for c in response.headers().get_all("set-cookie") {
            let pair = c.to_str().unwrap().split(';').next().unwrap_or("");
            if let Some((k, v)) = pair.split_once('=') {
                cookies.retain(|(name, _)| name != k);
                cookies.push((k.to_owned(), v.to_owned()));
            }
        }
        if response.status().is_redirection() {
            let location = response.headers()["location"].to_str().unwrap().to_owned();
            next = next.join(&location).unwrap();
            if next.path().starts_with("/_test/interaction/") {
                next.query_pairs_mut().append_pair("user", user);
            }
            continue;
        }
        let status = response.status().as_u16();
        return (status, response.text().await.unwrap_or_default());
    }
    panic!("too many redirects from {url}");
}

/// A client of the gateway as the holder of `token`, speaking `protocol`, that answers a
/// URL-mode elicitation by signing in as `user` in its "browser" (counted in `asked`).
async fn browsing_client(
    gateway: &str,
    token: &str,
    protocol: moat::VersionPreference,
    user: &'static str,
    asked: Arc<Mutex<Vec<String>>>,
) -> Client {
    use moat::types::{
        ClientCapabilities, ElicitRequestParams, ElicitResult, ElicitationCapability, InputRequest,
        InputResponse,
    };
    let capabilities = ClientCapabilities {
        elicitation: Some(ElicitationCapability {
            url: Some(Default::default()),
            form: Some(Default::default()),
            ..Default::default()
        }),
        ..Default::default()
    };
    Client::builder()
        .protocol(protocol)
        .capabilities(capabilities)
        .on_input(move |request| {
            let asked = asked.clone();
            async move {
                match request {
                    InputRequest::Elicit(ElicitRequestParams::Url(p)) => {
                        asked.lock().unwrap().push(p.url.clone());
                        let (status, page) = browse(&p.url, user).await;
                        assert_eq!(status, 200, "{page}");
                        assert!(page.contains("authorization received"), "{page}");
                        Ok(InputResponse::Elicit(ElicitResult::accept(
                            Default::default(),
                        )))
                    }
                    _ => Ok(InputResponse::Elicit(ElicitResult::decline())),
                }
            }
        })
        .connect_url(gateway, HttpOptions::default().bearer_token(token))
        .await
        .expect("connect to the gateway")
}

/// A gateway in front of a downstream server whose credentials are `oauth` (client
/// moat-broker at the test issuer, the gateway's callback on a port of its own).
struct OAuthSetup {
    issuer: Issuer,
    gateway: HttpGateway,
    seen: Seen,
    sessions: Sessions,
    dir: tempfile::TempDir,
}

async fn oauth_setup() -> Option<OAuthSetup> {
    oauth_setup_with(&[], "").await
}

/// As [`oauth_setup`], the issuer started with `issuer_env`; with a short access token
/// lifetime there, the downstream allows no clock skew (an expired token is refused).
/// `auth_extra` is added to the server's `[servers.down.auth]`.
async fn oauth_setup_with(issuer_env: &[(&str, &str)], auth_extra: &str) -> Option<OAuthSetup> {
    let (port, callback_port) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{port}/mcp");
    let callback = format!("http://127.0.0.1:{callback_port}/oauth/callback");
    let issuer = Issuer::start_env(&[&url, &callback], issuer_env)?;
    let mut options = HttpServerOptions::default();
    let mut resource = ResourceOptions::new(&issuer.url, &url);
    // What the gateway, as the user's client, asks for (from the challenge).
    resource.scopes = vec!["mcp:tools".into()];
    if !issuer_env.is_empty() {
        resource.skew = Duration::ZERO;
    }
    if !auth_extra.is_empty() {
        options.versions = handshake_only();
    }
    options.resource = Some(resource);
    let (seen, sessions) = downstream_sessions(port, options).await;

    let dir = tempfile::tempdir().unwrap();
    let servers = format!(
        "[servers.down]\nurl = {url}\n\n[servers.down.auth]\nmode = \"oauth\"\ncallback = {cb}\n\
         client_id = \"moat-broker\"\nclient_secret_env = \"BROKER_SECRET\"\n{auth_extra}\n",
        url = toml_str(&url),
        cb = toml_str(&callback),
    );
    let config = gateway_config(dir.path(), &servers, &issuer.url);
    let gateway = HttpGateway::start(
        MOAT,
        &config,
        &[("BROKER_SECRET", "secret-broker")],
        Ready::Listed,
        Duration::from_secs(60),
    );
    Some(OAuthSetup {
        issuer,
        gateway,
        seen,
        sessions,
        dir,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_sends_each_user_to_authorize_once_and_keeps_their_tokens_apart() {
    let Some(OAuthSetup {
        issuer,
        gateway,
        seen,
        dir,
        ..
    }) = oauth_setup().await
    else {
        return;
    };
    let alice = issuer.user_token("alice").await;
    let bob = issuer.user_token("bob").await;

    // Alice speaks 2026-07-28 (the link is an input request, the call retried with the
    // answer); bob 2025-11-25 (an elicitation request in the middle of the call).
    let modern = moat::VersionPreference::Auto;
    let handshake = moat::VersionPreference::Exact(moat::ProtocolVersion::V2025_11_25);
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    for (token, user, protocol, times) in [
        (&alice, "alice", modern, 1),
        (&alice, "alice", modern, 1),
        (&bob, "bob", handshake, 2),
        (&bob, "bob", handshake, 2),
    ] {
        let client = browsing_client(&gateway.url, token, protocol, user, asked.clone()).await;
        let result = client
            .call_tool("down__whoami", json!({}))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "tools/call: {e}; asked {asked:?}; gateway: {}",
                    gateway.log()
                )
            });
        let result = serde_json::to_value(result).unwrap();
        assert_eq!(text(&result), user, "{result}");
        // Sent to authorize on their first call only.
        assert_eq!(asked.lock().unwrap().len(), times, "{user}");
        client.close().await;
    }
    for link in asked.lock().unwrap().iter() {
        assert!(link.starts_with(&issuer.url), "{link}");
        assert!(link.contains("code_challenge_method=S256"), "{link}");
    }

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "{seen:?}");
    let tokens_of = |user: &str| -> Vec<String> {
        seen.iter()
            .filter(|(s, _)| s.as_deref() == Some(user))
            .filter_map(|(_, t)| t.clone())
            .collect()
    };
    let (alices, bobs) = (tokens_of("alice"), tokens_of("bob"));
    assert_eq!((alices.len(), bobs.len()), (2, 2), "{seen:?}");
    for token in alices.iter().chain(&bobs) {
        assert!(
            token != &alice && token != &bob,
            "a caller's token was forwarded"
        );
    }
    assert!(
        !alices.iter().any(|t| bobs.contains(t)),
        "a token of alice's reached a call of bob's"
    );

    // At rest: one sealed record per user, no token in the clear, the key file 0600.
    let store = dir.path().join("state/downstream-tokens");
    let records: Vec<_> = std::fs::read_dir(store.join("tokens"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tok"))
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    for record in &records {
        let data = String::from_utf8_lossy(&std::fs::read(record).unwrap()).into_owned();
        for token in alices.iter().chain(&bobs) {
            assert!(!data.contains(token.as_str()));
        }
    }
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(store.join("key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_refreshes_expired_tokens_and_stores_the_rotated_refresh_token() {
    const TTL: u64 = 4;
    let Some(OAuthSetup {
        issuer,
        mut gateway,
        seen,
        dir,
        ..
    }) = oauth_setup_with(&[("MOAT_TEST_DOWNSTREAM_TTL", "4")], "").await
    else {
        return;
    };
    let alice = issuer.user_token("alice").await;
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let modern = moat::VersionPreference::Auto;
    let call_as_alice = |gateway: String, asked: Arc<Mutex<Vec<String>>>| {
        let alice = alice.clone();
        async move {
            let client = browsing_client(&gateway, &alice, modern, "alice", asked).await;
            let result = client.call_tool("down__whoami", json!({})).await;
            client.close().await;
            result.map(|r| serde_json::to_value(r).unwrap())
        }
    };
    // The first call authorizes; each later one comes after the token it had expired.
    for round in 0..3 {
        if round == 2 {
            // A new gateway process with the same state: only the vault knows alice.
            let config = dir.path().join("moat.toml");
            gateway.stop(libc::SIGTERM, Duration::from_secs(10));
            gateway = HttpGateway::start(
                MOAT,
                &config,
                &[("BROKER_SECRET", "secret-broker")],
                Ready::Listed,
                Duration::from_secs(60),
            );
        }
        if round > 0 {
            tokio::time::sleep(Duration::from_secs(TTL + 1)).await;
        }
        let result = call_as_alice(gateway.url.clone(), asked.clone())
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}; gateway: {}", gateway.log()));
        assert_eq!(text(&result), "alice", "round {round}: {result}");
        assert_eq!(
            asked.lock().unwrap().len(),
            1,
            "round {round}: alice was sent to authorize again; gateway: {}",
            gateway.log()
        );
    }

    // Each call reached the downstream with a token of alice's it took (not expired),
    // a new one each time.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen.iter().all(|(s, _)| s.as_deref() == Some("alice")));
    let tokens: Vec<&String> = seen.iter().filter_map(|(_, t)| t.as_ref()).collect();
    assert_eq!(tokens.len(), 3);
    assert!(
        tokens[0] != tokens[1] && tokens[1] != tokens[2] && tokens[0] != tokens[2],
        "an expired token was sent again"
    );

    // The refresh tokens form one chain: each presented once, each the last one issued.
    let grants = issuer.grants().await;
    let errors: Vec<&Value> = grants.iter().filter(|g| g.get("error").is_some()).collect();
    assert!(errors.is_empty(), "token requests refused: {errors:?}");
    let user_grants: Vec<&Value> = grants
        .iter()
        .filter(|g| g["grant_type"] == "authorization_code" || g["grant_type"] == "refresh_token")
        .collect();
    assert_eq!(
        user_grants[0]["grant_type"], "authorization_code",
        "{grants:?}"
    );
    let refreshes = user_grants.len() - 1;
    assert!(refreshes >= 2, "{grants:?}");
    let mut presented = std::collections::HashSet::new();
    for pair in user_grants.windows(2) {
        let (before, now) = (pair[0], pair[1]);
        assert_eq!(now["grant_type"], "refresh_token", "{grants:?}");
        assert!(
            before["issued"].is_string(),
            "no rotated refresh token: {grants:?}"
        );
        assert_eq!(
            now["presented"], before["issued"],
            "not the latest refresh token"
        );
        assert!(
            presented.insert(now["presented"].as_str().unwrap().to_owned()),
            "a refresh token was presented twice"
        );
    }
    // At rest, sealed: the latest refresh token is not in the clear.
    let latest = user_grants.last().unwrap()["issued"]
        .as_str()
        .unwrap()
        .to_owned();
    let records = dir.path().join("state/downstream-tokens/tokens");
    for entry in std::fs::read_dir(&records).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(!String::from_utf8_lossy(&data).contains(&latest));
    }
}

/// The Python SDK's client (`py_authorize_client.py`, with the SDK's `mode=`) is sent to
/// authorize by URL-mode elicitation, "opens" the link as bob, and its call completes as bob;
/// the report it prints.
async fn python_authorizes(mode: &str) -> Option<Value> {
    let peers = support::peers(&[".venv/bin/python"])?;
    let setup = oauth_setup().await?;
    let bob = setup.issuer.user_token("bob").await;
    let (python, script, gateway, mode) = (
        peers.python(),
        support::script("py_authorize_client.py"),
        setup.gateway.url.clone(),
        mode.to_owned(),
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .args([&script, &gateway, &bob, "down__whoami", "bob", &mode])
            .output()
            .expect("run the Python client")
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}\ngateway: {}",
        String::from_utf8_lossy(&out.stderr),
        setup.gateway.log()
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("the client's JSON");
    let asked = report["elicitations"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{report}");
    assert_eq!(asked[0]["mode"], "url", "{report}");
    assert!(
        asked[0]["url"]
            .as_str()
            .unwrap()
            .starts_with(&setup.issuer.url),
        "{report}"
    );
    // Landed at the gateway's callback, which took the authorization's answer.
    assert_eq!(asked[0]["landed"]["status"], 200, "{report}");
    assert!(
        asked[0]["landed"]["page"]
            .as_str()
            .is_some_and(|p| p.contains("authorization received")),
        "{report}"
    );
    assert_eq!(report["result"]["content"][0]["text"], "bob", "{report}");
    let seen = setup.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0.as_deref(), Some("bob"));
    Some(report)
}

/// The `notifications/elicitation/complete` of a report.
fn completions(report: &Value) -> Vec<Value> {
    report["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["method"] == "notifications/elicitation/complete")
        .cloned()
        .collect()
}

/// In the SDK's own negotiation (2026-07-28 with this gateway) the URL elicitation is an
/// input request of the call, and the retried call's answer is how the client learns the
/// authorization ended: no notification. Were an older SDK to settle on 2025-11-25, the
/// gateway would tell it by exactly one `notifications/elicitation/complete` instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_url_elicitation_with_the_python_sdk_client() {
    let Some(report) = python_authorizes("auto").await else {
        return;
    };
    // The round itself (one URL elicitation, followed to the gateway's callback, the call
    // answered as bob) is checked by `python_authorizes`; here, how it ended.
    let id = report["elicitations"][0]["elicitationId"].clone();
    assert!(id.as_str().is_some_and(|s| !s.is_empty()), "{report}");
    let done = completions(&report);
    match report["protocolVersion"].as_str() {
        Some("2026-07-28") => {
            assert!(done.is_empty(), "{report}");
            // Answered whole by the retried call, not left asking for input.
            assert_eq!(report["result"]["resultType"], "complete", "{report}");
        }
        Some("2025-11-25") => {
            assert_eq!(done.len(), 1, "{report}");
            assert_eq!(done[0]["params"]["elicitationId"], id, "{report}");
        }
        other => panic!("negotiated {other:?}, a version without URL elicitation: {report}"),
    }
    assert_ne!(report["result"]["isError"], true, "{report}");
}

/// Over the 2025-11-25 handshake, once bob is back from authorizing the gateway tells the
/// client with `notifications/elicitation/complete` naming the elicitation it sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_url_elicitation_completes_with_a_notification_in_2025_11_25() {
    let Some(report) = python_authorizes("legacy").await else {
        return;
    };
    assert_eq!(report["protocolVersion"], "2025-11-25", "{report}");
    let id = report["elicitations"][0]["elicitationId"].clone();
    assert!(id.as_str().is_some_and(|s| !s.is_empty()), "{report}");
    let done = completions(&report);
    assert_eq!(done.len(), 1, "{report}");
    assert_eq!(done[0]["params"]["elicitationId"], id, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_closes_a_users_idle_connection() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let Some(issuer) = Issuer::start(&url) else {
        return;
    };
    let mut options = HttpServerOptions::default();
    options.resource = Some(ResourceOptions::new(&issuer.url, &url));
    // Sessions (the handshake era), so that a connection is one downstream session.
    options.versions = handshake_only();
    let (seen, sessions) = downstream_sessions(port, options).await;
    let dir = tempfile::tempdir().unwrap();
    let servers = format!(
        "[servers.down]\nurl = {url}\n\n[servers.down.auth]\nmode = \"exchange\"\nissuer = {iss}\n\
         client_id = \"moat-gateway\"\nclient_secret_env = \"GW_SECRET\"\nidle_timeout = \"1s\"\n",
        url = toml_str(&url),
        iss = toml_str(&issuer.url),
    );
    let config = gateway_config(dir.path(), &servers, &issuer.url);
    let gateway = HttpGateway::start(
        MOAT,
        &config,
        &[("GW_SECRET", "secret-gw")],
        Ready::Listed,
        Duration::from_secs(60),
    );
    let alice = issuer.user_token("alice").await;
    // Two calls in a row share alice's connection; after 1 s unused it is closed, and the
    // next call opens another (with the exchanged token kept: no new exchange).
    for pause in [0, 0, 2500] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let result = call(&gateway.url, &alice, "down__whoami").await;
        assert_eq!(text(&result), "alice", "{result}");
    }
    let sessions = sessions.lock().unwrap().clone();
    assert_eq!(sessions.len(), 3, "{sessions:?}");
    assert_eq!(sessions[0], sessions[1], "a connection in use was closed");
    assert_ne!(sessions[1], sessions[2], "the idle connection was kept");
    assert_eq!(seen.lock().unwrap().len(), 3);
    let exchanges = issuer.exchanges().await;
    assert_eq!(exchanges.len(), 1, "{exchanges:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_closes_a_users_idle_connection_and_reconnects_without_asking() {
    let Some(OAuthSetup {
        issuer,
        gateway,
        sessions,
        ..
    }) = oauth_setup_with(&[], "idle_timeout = \"1s\"").await
    else {
        return;
    };
    let bob = issuer.user_token("bob").await;
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let handshake = moat::VersionPreference::Exact(moat::ProtocolVersion::V2025_11_25);
    for pause in [0, 0, 2500] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let client = browsing_client(&gateway.url, &bob, handshake, "bob", asked.clone()).await;
        let result = client
            .call_tool("down__whoami", json!({}))
            .await
            .unwrap_or_else(|e| panic!("tools/call: {e}; gateway: {}", gateway.log()));
        assert_eq!(text(&serde_json::to_value(result).unwrap()), "bob");
        client.close().await;
    }
    // Asked once: the reconnection used the tokens in the vault.
    assert_eq!(asked.lock().unwrap().len(), 1);
    let sessions = sessions.lock().unwrap().clone();
    assert_eq!(sessions.len(), 3, "{sessions:?}");
    assert_eq!(sessions[0], sessions[1], "a connection in use was closed");
    assert_ne!(sessions[1], sessions[2], "the idle connection was kept");
}
