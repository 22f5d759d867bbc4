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
//!   place of the caller's token, and which no answer shows.

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
        let peers = support::peers(&["node_modules/oidc-provider"])?;
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(peers.path("node_modules"), dir.path().join("node_modules"))
            .unwrap();
        let script = dir.path().join("oidc_issuer.mjs");
        std::fs::copy(support::script("oidc_issuer.mjs"), &script).unwrap();
        let mut child = Command::new("node")
            .arg(&script)
            .args([GATEWAY, downstream])
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

/// The downstream server at `port`: `whoami` answers the subject and records the call.
async fn downstream(port: u16, options: HttpServerOptions) -> Seen {
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let server = moat::Server::new("down", "1.0").tool_with_context(
        "whoami",
        "Who is calling",
        move |ctx: RequestContext, _: NoArgs| {
            let record = record.clone();
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
    seen
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
    let servers = format!(
        "[servers.st]\nurl = {url}\n\n[servers.st.auth]\nmode = \"static\"\nvalue_file = {file}\n",
        url = toml_str(&url),
        file = toml_str(&secret_file.to_string_lossy()),
    );
    let config = gateway_config(dir.path(), &servers, &issuer.url);
    let gateway = HttpGateway::start(MOAT, &config, &[], Ready::Listed, Duration::from_secs(60));
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
    client.close().await;
}
