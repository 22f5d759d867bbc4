//! The web console in a real browser: `moat gateway --http … --console 127.0.0.1:0` in front
//! of interop/py_mutable_server.py (a `greet` tool that policy asks about, a `note` tool),
//! headless Chromium (Debian's `chromium`) driven by playwright-core
//! (interop/console_test.mjs), and an MCP client here.
//!
//! - with no browser on the console, a call that needs consent is refused at once, saying so;
//! - the one-time login URL logs the browser in (an `HttpOnly`, `SameSite=Strict` cookie)
//!   and is spent;
//! - a client's call of `greet` appears on the page; Approve once → the call completes;
//!   the next one, Deny → refused;
//! - `note` changes its description and is held; approved from the page, it is listed again;
//! - the audit search finds both `greet` calls, filters them, and shows a record's detail;
//! - plain HTTP requests without the cookie, with a wrong Origin or Host, or without the
//!   CSRF token are refused.
//!
//! Screenshots land in target/console-screenshots/ (CI keeps them). Without Chromium or
//! playwright-core the test passes with a notice, except under CI, where it fails.

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

/// How long one browser step may take: far above what it needs, and what turns a hang into
/// a failure.
const STEP: Duration = Duration::from_secs(90);

const CHROMIUM: &str = "/usr/bin/chromium";

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Chromium and playwright-core, or why the test cannot run (a failure under CI).
fn browser(p: &Peers) -> Option<String> {
    let chromium = std::env::var("MOAT_CHROMIUM").unwrap_or_else(|_| CHROMIUM.to_owned());
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop");
    let playwright = [p.dir.clone(), interop]
        .iter()
        .any(|d| d.join("node_modules/playwright-core/package.json").exists());
    let mut missing = Vec::new();
    if !Path::new(&chromium).exists() {
        missing.push(format!("{chromium} (apt-get install chromium)"));
    }
    if !playwright {
        missing.push("playwright-core in interop/node_modules (npm install in interop/)".into());
    }
    if missing.is_empty() {
        return Some(chromium);
    }
    let msg = format!(
        "the console's browser test needs {}; `bash .ci/run --install-only` installs both",
        missing.join(" and ")
    );
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}

fn config(p: &Peers, state: &Path, note: &str) -> String {
    let tools = json!([
        {"name": "greet", "description": "Greets someone."},
        {"name": "note", "description": note},
    ]);
    format!(
        "state_dir = {}\n\n[servers.mutable]\ncommand = {}\nargs = [{}]\n\
         env = {{ MOAT_TEST_TOOLS = {} }}\nsandbox = false\n\n\
         [policy]\ndefault = \"allow\"\n\n[[policy.rules]]\nname = \"greet-asks\"\n\
         decision = \"ask\"\nserver = \"mutable\"\ntool = \"greet\"\n\n\
         [consent]\ntimeout = \"90s\"\n",
        toml_str(&state.to_string_lossy()),
        toml_str(&p.python()),
        toml_str(&p.path("py_mutable_server.py")),
        toml_str(&tools.to_string()),
    )
}

fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("console-screenshots")
}

/// The browser script, its stdin (where the test says a step may go on), and the steps
/// it reports.
struct Browser {
    child: Child,
    stdin: ChildStdin,
    steps: mpsc::Receiver<String>,
}

impl Browser {
    fn start(p: &Peers, chromium: &str, login: &str) -> Browser {
        let mut child = Command::new("node")
            .arg(script("console_test.mjs"))
            .arg(login)
            .arg(screenshots())
            .env("MOAT_INTEROP_DIR", &p.dir)
            .env("MOAT_CHROMIUM", chromium)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run node interop/console_test.mjs");
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

    /// Waits for the script's next line, which must start with `step`; returns it.
    fn step(&mut self, step: &str, gateway: &HttpGateway) -> String {
        match self.steps.recv_timeout(STEP) {
            Ok(line) if line.starts_with(step) => line,
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

/// One HTTP/1.1 request to `authority`; the status and the body.
fn http(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut tcp = TcpStream::connect(authority).expect("connect to the console");
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {authority}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    tcp.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = tcp.read_to_string(&mut response);
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn result_text(result: &Value) -> String {
    support::json::text_of(&result["content"])
}

async fn wait_listed(client: &Client, tool: &str, listed: bool) {
    support::wait_for_tools(
        client,
        &format!(
            "{tool} to be {}",
            if listed { "listed" } else { "held back" }
        ),
        Duration::from_secs(60),
        |names| names.contains(tool) == listed,
    )
    .await;
}

#[test]
fn the_console_in_a_browser_approves_denies_pins_and_searches() {
    let Some(p) = peers(&["py_mutable_server.py", support::interop::VENV_PYTHON]) else {
        return;
    };
    let Some(chromium) = browser(&p) else { return };
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("moat.toml");
    let state = dir.path().join("state");
    std::fs::write(&config_path, config(&p, &state, "Takes a note.")).unwrap();
    let gateway = HttpGateway::start(
        MOAT,
        &config_path,
        &[("MOAT_CONSOLE", "127.0.0.1:0")],
        Ready::Listed,
        Duration::from_secs(60),
    );
    let log = gateway.log();
    let login = log
        .lines()
        .find_map(|l| {
            l.split_once("log in (once) with ")
                .map(|(_, url)| url.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no console login URL in {log}"));
    let console = login
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once('/'))
        .map(|(authority, _)| authority.to_owned())
        .unwrap_or_else(|| panic!("not a console URL: {login}"));
    let login_path = login.split_once(&console).unwrap().1.to_owned();

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
    let client = std::sync::Arc::new(client);
    let call = |text: &str| {
        let client = client.clone();
        let args = json!({"text": text});
        runtime.spawn(async move {
            let result = client
                .call_tool("mutable__greet", args)
                .await
                .expect("tools/call");
            serde_json::to_value(result).unwrap()
        })
    };

    // Nobody has the console open yet: it is no channel, and the refusal says so at once.
    let unasked = runtime.block_on(call("nobody")).unwrap();
    assert_eq!(unasked["isError"], json!(true), "{unasked:#}");
    assert!(
        result_text(&unasked).contains("no browser has the gateway's web console open"),
        "{unasked:#}"
    );

    let mut browser = Browser::start(&p, &chromium, &login);
    let session = browser.step("session ", &gateway);
    let mut words = session.split_whitespace().skip(1);
    let (cookie, csrf) = (
        words.next().unwrap().to_owned(),
        words.next().unwrap().to_owned(),
    );
    browser.step("logged-in", &gateway);

    // Approve once: the call completes.
    let first = call("first");
    browser.step("approved", &gateway);
    let first = runtime.block_on(first).unwrap();
    assert!(first["isError"] != json!(true), "approved, yet: {first:#}");
    assert_eq!(result_text(&first), "greet: first");

    // Deny: refused, and the refusal says where.
    let second = call("second");
    browser.step("denied", &gateway);
    let second = runtime.block_on(second).unwrap();
    assert_eq!(second["isError"], json!(true), "denied, yet: {second:#}");
    assert!(
        result_text(&second).contains("denied in the web console"),
        "{second:#}"
    );

    // A changed definition is held; approved on the page, the tool is listed again.
    std::fs::write(&config_path, config(&p, &state, "Takes a note, changed.")).unwrap();
    runtime.block_on(wait_listed(&client, "mutable__note", false));
    browser.go_on("pin-held");
    browser.step("pin-approved", &gateway);
    runtime.block_on(wait_listed(&client, "mutable__note", true));

    browser.go_on("audit");
    browser.step("audit-found", &gateway);
    browser.step("done", &gateway);
    let status = browser.child.wait().unwrap();
    assert!(status.success(), "the browser script failed: {status}");

    // Plain HTTP: what a page of another site, or a request without the session, gets.
    let with_cookie = format!("moat_console={cookie}");
    let own_origin = format!("http://{console}");
    let answer = r#"{"id": 999999, "choice": "deny"}"#;
    let good: Vec<(&str, &str)> = vec![
        ("Cookie", &with_cookie),
        ("Origin", &own_origin),
        ("X-CSRF-Token", &csrf),
        ("Content-Type", "application/json"),
    ];
    // The controls: with everything, the request passes the checks.
    assert_eq!(http(&console, "GET", "/api/pending", &good[..1], "").0, 200);
    let (status, body) = http(&console, "POST", "/api/consent", &good, answer);
    assert_eq!(status, 404, "a complete request reaches the action: {body}");

    let without = |name: &str| -> Vec<(&str, &str)> {
        good.iter().filter(|(k, _)| *k != name).copied().collect()
    };
    let (status, body) = http(&console, "GET", "/api/pending", &[], "");
    assert_eq!(status, 401, "no cookie: {body}");
    let (status, _) = http(&console, "GET", "/", &[], "");
    assert_eq!(status, 401, "no cookie, the page");
    let (status, body) = http(&console, "POST", "/api/consent", &without("Cookie"), answer);
    assert_eq!(status, 401, "an action without the cookie: {body}");
    let (status, body) = http(
        &console,
        "POST",
        "/api/consent",
        &without("X-CSRF-Token"),
        answer,
    );
    assert_eq!(status, 403, "an action without the CSRF token: {body}");
    let mut wrong_csrf = without("X-CSRF-Token");
    wrong_csrf.push(("X-CSRF-Token", "0000"));
    let (status, body) = http(&console, "POST", "/api/consent", &wrong_csrf, answer);
    assert_eq!(status, 403, "an action with a wrong CSRF token: {body}");
    let mut evil = without("Origin");
    evil.push(("Origin", "http://evil.example"));
    let (status, body) = http(&console, "POST", "/api/consent", &evil, answer);
    assert_eq!(status, 403, "an action from another origin: {body}");
    let (status, body) = http(&console, "POST", "/api/consent", &without("Origin"), answer);
    assert_eq!(status, 403, "an action without Origin: {body}");
    let mut rebound = good.clone();
    rebound.push(("Host", "evil.example"));
    let (status, body) = http(&console, "GET", "/api/pending", &rebound, "");
    assert_eq!(status, 403, "a rebound Host: {body}");
    let (status, body) = http(&console, "GET", &login_path, &[], "");
    assert_eq!(status, 403, "the login link works once: {body}");

    // The audit trail has the answers as the page gave them.
    let audit = Command::new(MOAT)
        .args(["audit", "--json", "--config"])
        .arg(&config_path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&audit.stdout);
    assert!(
        text.contains("approved once in the web console")
            && text.contains("denied in the web console"),
        "moat audit: {text}\n{}",
        String::from_utf8_lossy(&audit.stderr)
    );
}
