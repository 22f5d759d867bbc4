//! Signing in to the web console through an OpenID Connect provider (`[console.oidc]`),
//! against a real one: oidc-provider (`interop/oidc_issuer.mjs`, with its console client),
//! in headless Chromium driven by playwright-core (`interop/console_oidc_test.mjs`), with
//! `moat gateway --http … --console` in front of interop/py_mutable_server.py (policy asks
//! about `greet`) and an MCP client here.
//!
//! - a callback with a `state` the browser was not given is refused, no session;
//! - bob (group dev) signs in at the provider but is not on the allow-list: refused;
//! - alice (group ops, allowed) signs in: the page says so, the session cookie is
//!   `HttpOnly`, `SameSite=Strict`; she approves a client's call, which completes, and the
//!   audit trail says she approved it;
//! - the same callback replayed (a spent code and state) is refused;
//! - a configuration reload whose allow-list drops her group closes her session;
//! - the provider down when the console redeems the code: a clear page, no session;
//! - the one-time login link keeps working beside it.
//!
//! Without Chromium, playwright-core or oidc-provider the test passes with a notice, except
//! under CI, where it fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use moat::{Client, HttpOptions};
use serde_json::{Value, json};

mod support;
use support::{HttpGateway, MOAT, Peers, Ready, kill_tree, peers, script};

const STEP: Duration = Duration::from_secs(90);
const CHROMIUM: &str = "/usr/bin/chromium";

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn under_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// Chromium and playwright-core, or why the test cannot run (a failure under CI).
fn browser(p: &Peers) -> Option<String> {
    let chromium = std::env::var("MOAT_CHROMIUM").unwrap_or_else(|_| CHROMIUM.to_owned());
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop");
    let playwright = [p.dir.clone(), interop]
        .iter()
        .any(|d| d.join("node_modules/playwright-core/package.json").exists());
    if Path::new(&chromium).exists() && playwright {
        return Some(chromium);
    }
    let msg = "the console's sign-in test needs chromium and playwright-core; \
               `bash .ci/run --install-only` installs both";
    assert!(!under_ci(), "{msg}");
    eprintln!("SKIPPED: {msg}");
    None
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// oidc-provider with the console's client, this checkout's script run beside the
/// installed peers' node_modules.
struct Issuer {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Issuer {
    fn start(p: &Peers, callback: &str) -> Issuer {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(p.path("node_modules"), dir.path().join("node_modules"))
            .unwrap();
        let script_path = dir.path().join("oidc_issuer.mjs");
        std::fs::copy(script("oidc_issuer.mjs"), &script_path).unwrap();
        let mut child = Command::new("node")
            .arg(&script_path)
            .arg("http://127.0.0.1/mcp")
            .env("MOAT_TEST_CONSOLE_CALLBACK", callback)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start node");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let url = serde_json::from_str::<Value>(&line)
            .unwrap_or_else(|e| panic!("issuer's first line {line:?}: {e}"))["issuer"]
            .as_str()
            .unwrap()
            .to_owned();
        Issuer {
            child,
            url,
            _dir: dir,
        }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("console-screenshots")
}

struct Browser {
    child: Child,
    stdin: ChildStdin,
    steps: mpsc::Receiver<String>,
}

impl Browser {
    fn start(p: &Peers, chromium: &str, console: &str) -> Browser {
        let mut child = Command::new("node")
            .arg(script("console_oidc_test.mjs"))
            .arg(console)
            .arg(screenshots())
            .env("MOAT_INTEROP_DIR", &p.dir)
            .env("MOAT_CHROMIUM", chromium)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run node interop/console_oidc_test.mjs");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, steps) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Browser {
            child,
            stdin,
            steps,
        }
    }

    fn step(&mut self, step: &str, gateway: &HttpGateway) {
        match self.steps.recv_timeout(STEP) {
            Ok(line) if line == step => {}
            other => panic!(
                "the browser did not report {step:?}: {other:?} (its stderr is above; screenshots in {})\n\
                 --- gateway stderr ---\n{}",
                screenshots().display(),
                gateway.log()
            ),
        }
    }

    fn go_on(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write to the browser script");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        kill_tree(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A GET to `authority`: the status and the `Set-Cookie` headers.
fn get(authority: &str, path: &str) -> (u16, String) {
    let mut tcp = TcpStream::connect(authority).expect("connect to the console");
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = tcp.read_to_string(&mut response);
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {response:?}"));
    (status, response)
}

#[test]
fn the_console_signs_in_through_the_identity_provider() {
    let Some(p) = peers(&[
        "py_mutable_server.py",
        support::interop::VENV_PYTHON,
        "node_modules/oidc-provider",
    ]) else {
        assert!(!under_ci(), "the interop peers are missing");
        return;
    };
    let Some(chromium) = browser(&p) else { return };
    let port = free_port();
    let console = format!("127.0.0.1:{port}");
    let mut issuer = Issuer::start(&p, &format!("http://{console}/oidc/callback"));

    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("moat.toml");
    let tools = json!([{"name": "greet", "description": "Greets someone."}]);
    let config = |groups: &str| {
        format!(
            "state_dir = {state}\n\n[servers.mutable]\ncommand = {python}\nargs = [{server}]\n\
         env = {{ MOAT_TEST_TOOLS = {tools} }}\nsandbox = false\n\n\
         [policy]\ndefault = \"allow\"\n\n[[policy.rules]]\nname = \"greet-asks\"\n\
         decision = \"ask\"\nserver = \"mutable\"\ntool = \"greet\"\n\n\
         [consent]\ntimeout = \"90s\"\n\n\
         [console.oidc]\nissuer = {issuer}\nclient_id = \"moat-console\"\n\
         client_secret_env = \"CONSOLE_OIDC_SECRET\"\nname = \"Test IdP\"\n\
         scopes = [\"groups\"]\ngroups = [{groups}]\n",
            state = toml_str(&dir.path().join("state").to_string_lossy()),
            python = toml_str(&p.python()),
            server = toml_str(&p.path("py_mutable_server.py")),
            tools = toml_str(&tools.to_string()),
            issuer = toml_str(&issuer.url),
            groups = toml_str(groups),
        )
    };
    std::fs::write(&config_path, config("ops")).unwrap();
    let gateway = HttpGateway::start(
        MOAT,
        &config_path,
        &[
            ("MOAT_CONSOLE", console.as_str()),
            ("CONSOLE_OIDC_SECRET", "secret-console"),
        ],
        Ready::Listed,
        Duration::from_secs(60),
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = runtime.block_on(async {
        Client::builder()
            .connect_url(&gateway.url, HttpOptions::default())
            .await
            .expect("connect to the gateway")
    });

    let mut browser = Browser::start(&p, &chromium, &format!("http://{console}/"));
    browser.step("forged-state-refused", &gateway);
    browser.step("not-allowed-refused", &gateway);
    browser.step("logged-in", &gateway);
    let call = runtime.spawn(async move {
        let result = client
            .call_tool("mutable__greet", json!({"text": "from alice's console"}))
            .await
            .expect("tools/call");
        serde_json::to_value(result).unwrap()
    });
    browser.step("approved", &gateway);
    let result = runtime.block_on(call).unwrap();
    assert!(
        result["isError"] != json!(true),
        "approved, yet: {result:#}"
    );
    assert_eq!(
        support::json::text_of(&result["content"]),
        "greet: from alice's console"
    );
    browser.step("replay-refused", &gateway);
    browser.step("session-live", &gateway);
    // The gateway reloads a changed file on its own.
    std::fs::write(&config_path, config("admins")).unwrap();
    browser.go_on("reloaded");
    browser.step("session-closed", &gateway);
    browser.step("provider-answered", &gateway);
    issuer.stop();
    browser.go_on("provider-down");
    browser.step("provider-down-refused", &gateway);
    let status = browser.child.wait().unwrap();
    assert!(status.success(), "the browser script failed: {status}");

    // The one-time link works beside the provider.
    let log = gateway.log();
    let login = log
        .lines()
        .find_map(|l| {
            l.split_once("log in (once) with ")
                .map(|(_, url)| url.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no console login URL in {log}"));
    assert!(
        log.contains("console sign-in also with Test IdP"),
        "the gateway names the provider on start: {log}"
    );
    let login_path = login.split_once(&console).unwrap().1;
    let (status, response) = get(&console, login_path);
    assert_eq!(status, 303, "{response}");
    assert!(
        response.contains("moat_console=") && response.contains("SameSite=Strict"),
        "{response}"
    );

    // The audit trail names who approved.
    let audit = Command::new(MOAT)
        .args(["audit", "--json", "--config"])
        .arg(&config_path)
        .env("CONSOLE_OIDC_SECRET", "secret-console")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&audit.stdout);
    assert!(
        text.contains("approved once in the web console by alice"),
        "moat audit: {text}\n{}",
        String::from_utf8_lossy(&audit.stderr)
    );
}
