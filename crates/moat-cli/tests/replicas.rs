//! Three `moat gateway --http` replicas behind HAProxy (docs/deploy.md's configuration),
//! under a mixed load while one replica is killed with SIGKILL and another is drained with
//! SIGTERM and started again (a rolling restart):
//! - 2026-07-28 clients go round-robin to any replica, and a call that asks the user for
//!   input is retried on whichever replica the balancer picks (the replicas share
//!   `--state-key-file`);
//! - handshake-era sessions too go round-robin, with no stickiness: a replica forwards a
//!   request to the replica holding its session, and takes the session over when that
//!   replica is gone, so no client has to start its session over (a call in flight on the
//!   killed replica fails with an error its client sees);
//! - every call completes or fails with an error its client sees; none hangs; and a client
//!   that starts after the restarts is served;
//! - with the replicas sharing a PostgreSQL store (`[store] url`), every completed call is in
//!   the one audit trail, once — each call carries a tag of its own, stored with its
//!   arguments, so a missing or doubled record is named — but for those the killed replica
//!   answered in its last moments, whose records were still being batched; and the trail's
//!   hash chain verifies;
//! - a session subscribed to a resource keeps getting its updates after the restarts;
//! - a client of the killed replica that had lost its connection mid-call resumes the call's
//!   stream through the balancer: it gets the progress it had not seen, each step once and
//!   in order (written to the store by the dead replica), then the call's error.
//!
//! HAProxy comes from Debian's packages and PostgreSQL is started by `.ci/run`
//! (`MOAT_TEST_POSTGRES_URL`); without them the test fails under CI (`CI` set) and is
//! skipped elsewhere, saying why.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use moat::{Client, HttpOptions, ProtocolVersion, VersionPreference};
use moat_test_support::interop::{self, VENV_PYTHON};
use moat_test_support::listening::{Listening, mcp_authority};
use moat_test_support::raw_http::{get_status as probe, modern_request};
use serde_json::{Value, json};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");
const WITHIN: Duration = Duration::from_secs(60);
/// Calls the Python SDK's client makes in its one session (about 0.3 s each).
const PY_CALLS: usize = 40;
/// How long one call may take before it counts as hung.
const CALL_BOUND: Duration = Duration::from_secs(30);
/// The TypeScript reference server: its long-running operation reports numbered progress.
const EVERYTHING_JS: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";

fn haproxy() -> Option<PathBuf> {
    let found = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "haproxy is not installed (.ci/run installs it: apt-get install haproxy)"
        );
        eprintln!("skipped: haproxy is not installed (apt-get install haproxy)");
    }
    found
}

fn postgres() -> Option<String> {
    let url = std::env::var("MOAT_TEST_POSTGRES_URL").ok();
    if url.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "MOAT_TEST_POSTGRES_URL is not set (.ci/run starts PostgreSQL and sets it)"
        );
        eprintln!("skipped: MOAT_TEST_POSTGRES_URL is not set (a PostgreSQL the replicas share)");
    }
    url
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

struct Replica {
    server: Listening,
    port: u16,
}

fn start_replica(config: &Path, keys: &Path, port: u16) -> Replica {
    let mut cmd = Command::new(MOAT);
    cmd.args(["gateway", "--http"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(config)
        .arg("--state-key-file")
        .arg(keys)
        .args(["--drain-timeout", "5s"]);
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let (server, _) = Listening::start(
        cmd,
        |line| {
            line.starts_with("moat gateway: serving on")
                .then(|| mcp_authority(line))
                .flatten()
        },
        WITHIN,
    );
    Replica { server, port }
}

/// docs/deploy.md's HAProxy configuration, for these ports.
fn haproxy_config(front: u16, replicas: &[u16]) -> String {
    let mut text = format!(
        "global\n    maxconn 1024\n\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 60s\n    timeout server 60s\n\
         \x20   timeout check 2s\n    retries 3\n    option redispatch\n\n\
         frontend mcp\n    bind 127.0.0.1:{front}\n    default_backend moat\n\n\
         backend moat\n    balance roundrobin\n\
         \x20   option httpchk GET /healthz\n    http-check expect status 200\n\
         \x20   default-server inter 500ms fall 3 rise 1\n"
    );
    for (i, port) in replicas.iter().enumerate() {
        text.push_str(&format!("    server r{i} 127.0.0.1:{port} check\n"));
    }
    text
}

struct Balancer(Child);

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One 2026-07-28 `tools/call` by hand (as any HTTP client would), its JSON answer.
fn modern_call(authority: &str, tool: &str, params: Value) -> Option<Value> {
    let mut params = params;
    params["name"] = json!(tool);
    let reply = modern_request(authority, "tools/call", Some(tool), params, None)?;
    (!reply.json.is_null()).then_some(reply.json)
}

/// An elicitation round through the balancer: ask, then answer (wherever it lands).
fn modern_elicitation(authority: &str, docs: &str) -> Result<(), String> {
    let tool = format!("{docs}__test_elicitation");
    let asked = modern_call(
        authority,
        &tool,
        json!({"arguments": {"message": "Who are you?"}}),
    )
    .ok_or("no answer to the first round")?;
    let result = &asked["result"];
    let key = result["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .ok_or_else(|| format!("no input request: {asked}"))?;
    let done = modern_call(
        authority,
        &tool,
        json!({
            "arguments": {"message": "Who are you?"},
            "inputResponses": { key: {"action": "accept", "content": {"username": "ada", "email": "a@example.org"}} },
            "requestState": result["requestState"].clone(),
        }),
    )
    .ok_or("no answer to the retry")?;
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    if text.contains("ada") {
        Ok(())
    } else {
        Err(format!("the retry was not completed: {done}"))
    }
}

#[derive(Default)]
struct Tally {
    ok: AtomicUsize,
    failed: AtomicUsize,
    /// Sessions started over because the old one no longer answered.
    restarted: AtomicUsize,
}

/// A session whose connection was cut mid-call: where its client was in the call's stream.
struct CutOff {
    session: String,
    last_event_id: String,
    /// The progress steps it saw.
    seen: Vec<u64>,
}

/// SSE events (id, data) from a response, in order, to the end of the stream.
struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    async fn next(&mut self) -> Option<(Option<String>, Option<Value>)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut data) = (None, None);
                for line in event.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    }
                    if let Some(v) = line.strip_prefix("data:") {
                        data = serde_json::from_str(v.trim()).ok();
                    }
                }
                return Some((id, data));
            }
            let chunk = tokio::time::timeout(WITHIN, self.response.chunk())
                .await
                .expect("an event in time")
                .ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

fn handshake_post(url: &str, session: Option<&str>, body: Value) -> reqwest::RequestBuilder {
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_string());
    if let Some(s) = session {
        r = r.header("mcp-session-id", s);
    }
    r
}

/// A 2025-11-25 session opened straight on the replica at `direct`: it starts the reference
/// server's long-running operation (a progress step every 0.2 s), reads three steps, and
/// drops the connection, as a client whose network failed would.
async fn cut_off_mid_call(direct: String) -> CutOff {
    let url = format!("http://{direct}/mcp");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "cut-off", "version": "1"}}});
    let r = handshake_post(&url, None, init)
        .send()
        .await
        .expect("initialize");
    let session = r.headers()["mcp-session-id"]
        .to_str()
        .expect("a session id")
        .to_owned();
    drop(r);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = handshake_post(&url, Some(&session), note)
        .send()
        .await
        .expect("initialized");
    assert_eq!(r.status(), 202);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "ts__trigger-long-running-operation",
        "arguments": {"duration": 20, "steps": 100},
        "_meta": {"progressToken": "cut"}}});
    let response = handshake_post(&url, Some(&session), call)
        .send()
        .await
        .expect("the call");
    let mut events = SseReader {
        response,
        buffer: String::new(),
    };
    let (mut seen, mut last_event_id) = (Vec::new(), None);
    while seen.len() < 3 {
        let (id, data) = events.next().await.expect("the call's stream");
        last_event_id = id.or(last_event_id);
        if let Some(step) = data.and_then(|d| d["params"]["progress"].as_u64()) {
            seen.push(step);
        }
    }
    CutOff {
        session,
        last_event_id: last_event_id.expect("the events have ids"),
        seen,
    }
}

/// Resume `cut`'s stream through the balancer: the steps it gets, and the message that
/// ends the call.
async fn resume(front: &str, cut: &CutOff) -> (Vec<u64>, Value) {
    let response = reqwest::Client::new()
        .get(format!("http://{front}/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &cut.session)
        .header("last-event-id", &cut.last_event_id)
        .send()
        .await
        .expect("the resume");
    assert_eq!(response.status(), 200, "the resume is served");
    let mut events = SseReader {
        response,
        buffer: String::new(),
    };
    let mut steps = Vec::new();
    loop {
        let (_, data) = events.next().await.expect("the stream goes on to the end");
        let Some(data) = data else { continue };
        if data["id"] == 2 {
            return (steps, data);
        }
        if let Some(step) = data["params"]["progress"].as_u64() {
            steps.push(step);
        }
    }
}

async fn session_client(url: String, version: ProtocolVersion) -> moat::Result<Client> {
    Client::builder()
        .protocol(VersionPreference::Exact(version))
        .connect_url(&url, HttpOptions::default())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_behind_haproxy_survive_a_kill_and_a_rolling_restart() {
    let Some(haproxy) = haproxy() else { return };
    let Some(store) = postgres() else { return };
    let Some(peers) = interop::peers(&[VENV_PYTHON, "py_client.py", EVERYTHING_JS]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("moat.toml");
    // The shared trail also holds other tests' calls: this run's server has a name of its own.
    let docs = format!("docs{}", std::process::id());
    std::fs::write(
        &config,
        format!(
            "state_dir = {:?}\n[store]\nurl = {store:?}\n[audit]\nsign = true\nfull_arguments = true\n\
             [policy]\ndefault = \"allow\"\n\
             [servers.{docs}]\ncommand = {MOAT:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n\
             [servers.ts]\ncommand = \"node\"\nargs = [{js:?}, \"stdio\"]\nsandbox = false\n",
            dir.path().join("state"),
            js = peers.path(EVERYTHING_JS),
        ),
    )
    .expect("write moat.toml");
    let keys = dir.path().join("state-keys");
    std::fs::write(&keys, "replica-secret-replica-secret-replica-secret\n").expect("keys");

    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut replicas: Vec<Option<Replica>> = ports
        .iter()
        .map(|&p| Some(start_replica(&config, &keys, p)))
        .collect();
    let front = free_port();
    let lb_config = dir.path().join("haproxy.cfg");
    std::fs::write(&lb_config, haproxy_config(front, &ports)).expect("haproxy.cfg");
    let _lb = Balancer(
        Command::new(&haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&lb_config)
            .stdout(Stdio::null())
            .spawn()
            .expect("start haproxy"),
    );
    let authority = format!("127.0.0.1:{front}");
    let url = format!("http://{authority}/mcp");
    let deadline = Instant::now() + WITHIN;
    while probe(&authority, "/healthz") != Some(200) {
        assert!(
            Instant::now() < deadline,
            "the balancer never found a ready replica"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // The Python SDK's client: one session for the whole run, through every restart.
    let python = peers.py_client();
    let mut py = Command::new(&python[0]);
    py.args(&python[1..])
        .args([
            "--url",
            &url,
            "--protocol",
            "2025-11-25",
            "--tolerate-errors",
        ])
        .args(["--elicit", "approve once", "--timeout", "120"]);
    for i in 0..PY_CALLS {
        if i % 5 == 4 {
            py.args(["--call", &format!("{docs}__test_elicitation"), "{}"]);
        } else {
            py.args([
                "--call",
                &format!("{docs}__test_tool_with_progress"),
                &format!(r#"{{"duration": 0.2, "steps": 2, "call": "py{i}"}}"#),
            ]);
        }
    }
    let py = py
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Python SDK client");
    let py = tokio::task::spawn_blocking(move || py.wait_with_output());

    // A session subscribed to a resource that changes every 3 s: its updates must keep
    // coming after the replicas holding sessions were killed and restarted.
    let subscriber = session_client(url.clone(), ProtocolVersion::V2025_11_25)
        .await
        .expect("the subscriber's session");
    let updates = Arc::new(std::sync::Mutex::new(Vec::<Instant>::new()));
    {
        let mut notes = subscriber.notifications();
        let updates = updates.clone();
        tokio::spawn(async move {
            while let Ok(n) = notes.recv().await {
                if n.method == "notifications/resources/updated" {
                    updates
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(Instant::now());
                }
            }
        });
    }
    subscriber
        .subscribe("test://watched-resource")
        .await
        .expect("subscribe");

    let stop = Arc::new(AtomicBool::new(false));
    let modern = Arc::new(Tally::default());
    let sessions = Arc::new(Tally::default());
    // Each session call carries a tag of its own ("call": "s7"), stored with its audit
    // record; the calls that completed, by tag, with when their client saw the answer.
    let next_tag = Arc::new(AtomicUsize::new(0));
    let completed_calls = Arc::new(std::sync::Mutex::new(Vec::<(String, i64)>::new()));
    let mut load = Vec::new();
    for _ in 0..2 {
        let (stop, modern, authority, docs) = (
            stop.clone(),
            modern.clone(),
            authority.clone(),
            docs.clone(),
        );
        load.push(tokio::task::spawn_blocking(move || {
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let outcome = modern_elicitation(&authority, &docs);
                assert!(started.elapsed() < CALL_BOUND * 2, "a call hung");
                match outcome {
                    Ok(()) => modern.ok.fetch_add(1, Ordering::Relaxed),
                    Err(_) => modern.failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    for version in [ProtocolVersion::V2025_06_18, ProtocolVersion::V2025_11_25] {
        let (stop, sessions, url) = (stop.clone(), sessions.clone(), url.clone());
        let (next_tag, completed_calls) = (next_tag.clone(), completed_calls.clone());
        let tool = format!("{docs}__test_tool_with_progress");
        load.push(tokio::spawn(async move {
            let mut first = true;
            while !stop.load(Ordering::Relaxed) {
                // Only a client whose session no longer answers at all starts a new one.
                let Ok(Ok(client)) =
                    tokio::time::timeout(CALL_BOUND, session_client(url.clone(), version)).await
                else {
                    sessions.failed.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                if !first {
                    sessions.restarted.fetch_add(1, Ordering::Relaxed);
                }
                first = false;
                let mut failed_in_a_row = 0;
                while !stop.load(Ordering::Relaxed) && failed_in_a_row < 3 {
                    let tag = format!("s{}", next_tag.fetch_add(1, Ordering::Relaxed));
                    let call =
                        client.call_tool(&tool, json!({"duration": 0.2, "steps": 2, "call": tag}));
                    match tokio::time::timeout(CALL_BOUND, call).await {
                        Ok(Ok(r)) if r.is_error != Some(true) => {
                            completed_calls
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push((tag, unix_ms(SystemTime::now())));
                            sessions.ok.fetch_add(1, Ordering::Relaxed);
                            failed_in_a_row = 0;
                        }
                        Ok(outcome) => {
                            eprintln!("a session call failed: {outcome:?}");
                            sessions.failed.fetch_add(1, Ordering::Relaxed);
                            failed_in_a_row += 1;
                        }
                        Err(_) => panic!("a session's call hung"),
                    }
                }
            }
        }));
    }

    // A client of the replica about to die loses its connection mid-call.
    let cut_off = tokio::spawn(cut_off_mid_call(format!("127.0.0.1:{}", ports[0])));
    tokio::time::sleep(Duration::from_secs(4)).await;
    let cut_off = cut_off.await.expect("the cut-off client");
    // One replica dies outright.
    let killed_at = unix_ms(SystemTime::now());
    if let Some(mut r) = replicas[0].take() {
        assert!(r.server.stop(libc::SIGKILL, WITHIN), "SIGKILL");
    }
    // Its client resumes through the balancer: the steps it missed, once each, then the
    // call's error (the call died with the replica).
    let (missed, end) = resume(&authority, &cut_off).await;
    eprintln!(
        "resumed on another replica after steps {:?}: steps {missed:?}, then {end}",
        cut_off.seen
    );
    let all: Vec<u64> = cut_off.seen.iter().chain(&missed).copied().collect();
    let expected: Vec<u64> = (1..=all.len() as u64).collect();
    assert_eq!(all, expected, "no gap and no duplicate");
    assert!(
        !missed.is_empty(),
        "the steps made after the cut were replayed"
    );
    assert!(
        end["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("stopped before answering")),
        "{end}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Another is drained and started again on its port (a rolling restart).
    if let Some(mut r) = replicas[1].take() {
        let status = r
            .server
            .stop_status(libc::SIGTERM, WITHIN)
            .expect("drained");
        assert!(status.success(), "{status:?}\n{}", r.server.log());
        replicas[1] = Some(start_replica(&config, &keys, r.port));
    }
    let restarted = Instant::now();
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.expect("a load task panicked");
    }
    let py = tokio::time::timeout(WITHIN * 2, py)
        .await
        .expect("the Python client finished")
        .expect("joined")
        .expect("ran");
    let progress_calls = (0..PY_CALLS).filter(|i| i % 5 != 4).count();
    // The Python SDK's client ends its whole session when the connection of a request in
    // flight breaks (here: HAProxy's to the killed replica, mid-answer); its calls are then
    // unknown, counted as failed. Any other failure fails the test.
    let (py_progress_ok, py_progress_failed) = if py.status.success() {
        let py: Value = serde_json::from_slice(&py.stdout).expect("the Python client's JSON");
        let py_calls = py["calls"].as_array().expect("calls");
        assert_eq!(py_calls.len(), PY_CALLS, "one session made every call");
        let progress = |c: &&Value| {
            c["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("test_tool_with_progress"))
        };
        let ok_calls: Vec<&Value> = py_calls
            .iter()
            .filter(progress)
            .filter(|c| c.get("error").is_none() && c["result"]["isError"] != true)
            .collect();
        let ok = ok_calls.len();
        completed_calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(ok_calls.iter().map(|c| {
                let tag = c["arguments"]["call"].as_str().expect("the call's tag");
                let ended = c["endedAtMs"].as_i64().expect("endedAtMs");
                (tag.to_owned(), ended)
            }));
        let failed: Vec<&Value> = py_calls.iter().filter_map(|c| c.get("error")).collect();
        eprintln!(
            "Python SDK session: {} calls, {} failed: {failed:?}",
            py_calls.len(),
            failed.len()
        );
        assert!(
            failed.len() <= 2,
            "{} of the Python client's calls failed",
            failed.len()
        );
        (ok, progress_calls - ok)
    } else {
        let stderr = String::from_utf8_lossy(&py.stderr);
        assert!(
            ["Server disconnected", "RemoteProtocolError", "ReadError"]
                .iter()
                .any(|m| stderr.contains(m)),
            "the Python client failed other than by losing its connection: {stderr}"
        );
        eprintln!("Python SDK session: its connection broke with the killed replica: {stderr}");
        for r in replicas.iter().flatten() {
            let log = r.server.log();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            eprintln!(
                "--- replica on port {} (last lines, newest first):\n{}",
                r.port,
                tail.join("\n")
            );
        }
        (0, progress_calls)
    };

    let (m_ok, m_failed) = (
        modern.ok.load(Ordering::Relaxed),
        modern.failed.load(Ordering::Relaxed),
    );
    let (s_ok, s_failed, s_restarted) = (
        sessions.ok.load(Ordering::Relaxed),
        sessions.failed.load(Ordering::Relaxed),
        sessions.restarted.load(Ordering::Relaxed),
    );
    eprintln!(
        "2026-07-28 elicitation rounds: {m_ok} completed, {m_failed} failed; \
         session calls: {s_ok} completed, {s_failed} failed; sessions started over: \
         {s_restarted}"
    );
    // No stickiness, yet no session started over: the replicas took over the sessions of
    // the killed and the restarted one. What failed was in flight on those two.
    assert_eq!(s_restarted, 0, "sessions had to start over");
    assert!(s_failed <= 4, "{s_failed} session calls failed");
    assert!(m_ok >= 10, "too few 2026-07-28 rounds completed: {m_ok}");
    assert!(s_ok >= 10, "too few session calls completed: {s_ok}");
    // Failures are only those in flight on the killed or drained replica.
    assert!(m_failed <= 6, "{m_failed} 2026-07-28 rounds failed");

    // The subscription outlived the restarts, on whichever replica holds its session now.
    let updated_since = |t: Instant| {
        updates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|u| *u > t)
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while !updated_since(restarted) {
        assert!(
            Instant::now() < deadline,
            "no resource update reached the subscriber after the restarts ({} before)",
            updates.lock().unwrap_or_else(|e| e.into_inner()).len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    subscriber.close().await;

    // After the restarts a new client is served, in either era.
    modern_elicitation(&authority, &docs).expect("a round after the restarts");
    let client = session_client(url.clone(), ProtocolVersion::V2025_11_25)
        .await
        .expect("a session after the restarts");
    let r = client
        .call_tool(&format!("{docs}__test_simple_text"), json!({}))
        .await
        .expect("a call after the restarts");
    assert_ne!(r.is_error, Some(true), "{r:?}");

    client.close().await;
    // Stopped, not killed: each replica's audit writer sends what it still holds.
    for r in replicas.iter_mut().flatten() {
        let status = r
            .server
            .stop_status(libc::SIGTERM, WITHIN)
            .expect("stopped");
        assert!(status.success(), "{status:?}\n{}", r.server.log());
    }

    // One trail for the three replicas: each completed session call once (a call whose
    // answer was lost with its replica may be there too), and the chain intact.
    let audit = |args: &[&str]| {
        let out = Command::new(MOAT)
            .args(["audit"])
            .args(args)
            .args(["--store", &store])
            .output()
            .expect("moat audit");
        assert!(out.status.success(), "{out:?}");
        out.stdout
    };
    let tool = format!("{docs}__test_tool_with_progress");
    let records: Vec<Value> =
        serde_json::from_slice(&audit(&["--tool", &tool, "--limit", "100000", "--json"]))
            .expect("audit JSON");
    let completed = records.iter().filter(|r| r["outcome"] == "ok").count();
    let (all_ok, all_failed) = (s_ok + py_progress_ok, s_failed + py_progress_failed);
    eprintln!(
        "audited as completed: {completed}; the clients saw {all_ok} complete, {all_failed} fail"
    );
    // Each call's tag is in its stored arguments: a call is audited as completed at most
    // once, and only calls the clients made are (one whose client saw it fail may be: its
    // answer was lost with a replica).
    let mut audited: HashMap<String, usize> = HashMap::new();
    for r in records.iter().filter(|r| r["outcome"] == "ok") {
        let tag = r["arguments"]["call"]
            .as_str()
            .unwrap_or_else(|| panic!("an audited call without its tag: {r}"));
        *audited.entry(tag.to_owned()).or_default() += 1;
    }
    let made = next_tag.load(Ordering::Relaxed);
    let twice: Vec<_> = audited.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "audited as completed more than once: {twice:?}"
    );
    let unknown: Vec<&String> = audited
        .keys()
        .filter(|t| {
            let session_call = t
                .strip_prefix('s')
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| n < made);
            let python_call = t
                .strip_prefix("py")
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| n < PY_CALLS);
            !(session_call || python_call)
        })
        .collect();
    assert!(unknown.is_empty(), "audited calls nobody made: {unknown:?}");
    // Records are batched off the call path: the replica killed with SIGKILL takes the
    // records of the calls it answered in its last moments with it (docs/deploy.md, "Known
    // limits"): the batch it was gathering and the one it was committing, which on a loaded
    // machine waits for the other replicas' commits. A completed call missing from the trail
    // must have ended around the kill; any other is a record lost for another reason.
    let completed_calls = completed_calls.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(
        completed_calls.len(),
        all_ok,
        "every completed call has its tag"
    );
    let missing: Vec<(&String, i64)> = completed_calls
        .iter()
        .filter(|(tag, _)| !audited.contains_key(tag))
        .map(|(tag, ended)| (tag, ended - killed_at))
        .collect();
    eprintln!("completed calls not in the trail (ms from the kill to their end): {missing:?}");
    const AROUND_THE_KILL: std::ops::RangeInclusive<i64> = -2_000..=1_000;
    assert!(
        missing
            .iter()
            .all(|(_, since_kill)| AROUND_THE_KILL.contains(since_kill)),
        "a completed call is missing from the trail, not one the killed replica answered \
         in its last moments: {missing:?}"
    );
    // The chain verifies, with the heads the replicas signed (sharing one state directory,
    // they share one key).
    let report: Value = serde_json::from_slice(&audit(&["verify", "--json"])).expect("verify JSON");
    assert!(
        report["checkpoints"].as_u64().is_some_and(|n| n >= 2),
        "the heads were signed (the first batch, and at each stop): {report}"
    );
}

/// Unix time in milliseconds.
fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
