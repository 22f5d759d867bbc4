//! Black-box tests of what `moat gateway` passes between several clients and one server:
//! a server's questions (sampling, elicitation) reach the client whose call caused them
//! and never another, even when two clients' calls overlap; a task one session started is
//! invisible to every other, and the ids clients see are the gateway's own; roots reach a
//! server cut to what its sandbox can reach; a reload that restarts a server costs a
//! client at most one `list_changed`, and none when nothing it sees changed; a gateway's
//! end is its servers' end (SIGINT or SIGTERM, and a gateway killed outright leaves servers
//! that exit when their input ends).
//!
//! Real processes: `moat gateway` (over HTTP, so that several clients share it and its
//! servers, or over stdio), `moat serve everything` (a 2026-07-28 server, so its
//! questions come back inside each call's own answer), the TypeScript reference server
//! (`@modelcontextprotocol/server-everything`, a handshake-era server whose questions say
//! nothing of the call they serve), the Python SDK's `MCPServer`
//! (`interop/py_roots_server.py`, `interop/py_mutable_server.py`) and a handshake-era
//! server in plain Python (`interop/py_asking_server.py`); in front, moat's own
//! `moat::Client` and the official Python SDK client (`interop/py_client.py`). The
//! scripts are this checkout's; node, the venv and the TypeScript server are the installed
//! peers (`interop/` or `$MOAT_INTEROP_DIR`, installed by `.ci/run`). Missing peers skip a
//! test, except under CI (`CI` set), where they fail it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use moat::client::{HttpOptions, ToolCall};
use moat::protocol::ErrorObject;
use moat::types::{CallToolResult, CreateMessageResult, ElicitResult};
use moat::{Client, ProtocolVersion, RequestOptions, VersionPreference};
use serde_json::{Value, json};

mod support;
use support::{HttpGateway, Leftovers, Ready, Run, alive, children, kill_group, run, script};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");
const EVERYTHING_JS: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";
const VENV_PYTHON: &str = ".venv/bin/python";
/// How long the HTTP gateway has to print its address and then its catalog.
const GATEWAY_START: Duration = Duration::from_secs(30);
/// Deadline of one Python client run (each well under it).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const PIPE_GRACE: Duration = Duration::from_secs(10);
/// How long each client's handler waits before it answers: long enough that the calls of
/// the clients of a test are all in flight at once.
const ANSWER_DELAY: Duration = Duration::from_secs(1);
/// Deadline of one request of a `moat::Client` (none takes more than a few seconds).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a reload may take to show (the watcher, then a Python server's start).
const RELOAD_WITHIN: Duration = Duration::from_secs(15);
/// How long notifications are counted after a reload's edit, at least.
const COUNT_FOR: Duration = Duration::from_secs(5);

/// The installed peers' directory, if `needs` (paths in it) are there.
fn peers(needs: &[&str]) -> Option<PathBuf> {
    support::interop_dir(needs)
}

fn path(dir: &Path, rel: &str) -> String {
    dir.join(rel).to_string_lossy().into_owned()
}

/// A temporary directory by its real path (roots and sandbox paths are compared as text).
fn real_tempdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let real = std::fs::canonicalize(dir.path()).expect("canonical temp dir");
    (dir, real)
}

/// Writes `dir/moat.toml`: the state directory in `dir`, `servers`, every call allowed,
/// tool search off. Returns its path.
fn write_config(dir: &Path, servers: &str) -> PathBuf {
    let text = format!(
        "state_dir = {state:?}\n\n{servers}\n[policy]\ndefault = \"allow\"\n\n[tool_search]\nmode = \"off\"\n",
        state = dir.join("state").to_string_lossy(),
    );
    let file = dir.join("moat.toml");
    std::fs::write(&file, text).expect("write moat.toml");
    file
}

/// `[servers.NAME]` running `moat serve everything` unsandboxed, its tools under their own
/// names (`prefix = ""`).
fn moat_everything(name: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = {MOAT:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\nprefix = \"\"\n\n"
    )
}

/// On drop (a test that fails half-way), ends the servers the stdio gateway `pid` runs:
/// ending the gateway does not end them (see `a_gateway_stopped_with_sigterm_stops_its_servers`).
/// Declared after the client, so that it is dropped first, while the gateway still runs.
struct ServersOf(u32);

impl Drop for ServersOf {
    fn drop(&mut self) {
        kill_leftovers(&children(self.0));
    }
}

/// Ends what is left of the servers `pids` (each leads a process group of its own).
fn kill_leftovers(pids: &BTreeSet<u32>) {
    for &pid in pids {
        if alive(pid) {
            kill_group(pid);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The HTTP gateway
// ---------------------------------------------------------------------------------------

/// `moat gateway --config X --http 127.0.0.1:0` (see [`HttpGateway`]), started once it has
/// said where it serves and what it lists (its servers are up: a client that connects
/// sooner is offered less, see
/// `a_client_that_connects_while_servers_start_is_offered_what_they_offer`).
fn http_gateway(config: &Path) -> HttpGateway {
    HttpGateway::start(MOAT, config, &[], Ready::Listed, GATEWAY_START)
}

// ---------------------------------------------------------------------------------------
// Clients that answer with a text of their own
// ---------------------------------------------------------------------------------------

/// One question a client was asked: which client, the question (its params as JSON), and
/// when its handler ran, from the question's arrival to its answer.
#[derive(Debug, Clone)]
struct Span {
    client: String,
    question: String,
    asked: Instant,
    answered: Instant,
}

/// What client `tag` answers to a sampling request.
fn sampled_text(tag: &str) -> String {
    format!("completion written by client {tag}")
}

/// The user name client `tag` gives in an elicitation form.
fn elicited_name(tag: &str) -> String {
    format!("user-of-client-{tag}")
}

/// A client of the gateway at `url` in revision `rev` that samples and elicits, answering
/// each question after [`ANSWER_DELAY`] with texts unique to `tag`, and noting when it
/// did in `spans`.
async fn answering_client(
    url: &str,
    rev: ProtocolVersion,
    tag: &str,
    spans: Arc<Mutex<Vec<Span>>>,
) -> Client {
    let sampling = {
        let (tag, spans) = (tag.to_owned(), spans.clone());
        move |params| {
            let (tag, spans) = (tag.clone(), spans.clone());
            let question = serde_json::to_string(&params).expect("params encode");
            async move {
                let asked = Instant::now();
                tokio::time::sleep(ANSWER_DELAY).await;
                let result: CreateMessageResult = serde_json::from_value(json!({
                    "role": "assistant",
                    "content": { "type": "text", "text": sampled_text(&tag) },
                    "model": format!("model-{tag}"),
                }))
                .expect("a sampling result");
                spans.lock().unwrap().push(Span {
                    client: tag,
                    question,
                    asked,
                    answered: Instant::now(),
                });
                Ok::<_, ErrorObject>(result)
            }
        }
    };
    let elicitation = {
        let (tag, spans) = (tag.to_owned(), spans);
        move |params| {
            let (tag, spans) = (tag.clone(), spans.clone());
            let question = serde_json::to_string(&params).expect("params encode");
            async move {
                let asked = Instant::now();
                tokio::time::sleep(ANSWER_DELAY).await;
                let result: ElicitResult = serde_json::from_value(json!({
                    "action": "accept",
                    "content": {
                        "username": elicited_name(&tag),
                        "email": format!("{tag}@example.com"),
                    },
                }))
                .expect("an elicitation result");
                spans.lock().unwrap().push(Span {
                    client: tag,
                    question,
                    asked,
                    answered: Instant::now(),
                });
                Ok::<_, ErrorObject>(result)
            }
        }
    };
    let client = Client::builder()
        .protocol(VersionPreference::Exact(rev))
        .request_timeout(Some(REQUEST_TIMEOUT))
        .on_sampling(sampling)
        .on_elicitation(elicitation)
        .connect_url(url, HttpOptions::default())
        .await
        .unwrap_or_else(|e| panic!("client {tag} ({rev}) connects to {url}: {e}"));
    assert_eq!(client.protocol_version(), Some(rev), "client {tag}");
    client
}

/// A plain client of the gateway at `url` in revision `rev`.
async fn plain_client(url: &str, rev: ProtocolVersion) -> Client {
    Client::builder()
        .protocol(VersionPreference::Exact(rev))
        .request_timeout(Some(REQUEST_TIMEOUT))
        .connect_url(url, HttpOptions::default())
        .await
        .unwrap_or_else(|e| panic!("a {rev} client connects to {url}: {e}"))
}

/// A call's outcome as one text to search: the result as JSON, or the error.
fn outcome_text(outcome: &moat::Result<CallToolResult>) -> String {
    match outcome {
        Ok(result) => serde_json::to_string(result).expect("a result encodes"),
        Err(e) => format!("error: {e}"),
    }
}

/// The texts of the clients other than `tag` (any of which in `tag`'s result is a leak).
fn others<'a>(tags: &'a [&'a str], tag: &str) -> Vec<&'a str> {
    tags.iter().copied().filter(|t| *t != tag).collect()
}

/// Asserts that no client's text of `others` is in `text`.
fn assert_no_leak(text: &str, tag: &str, others: &[&str], what: &str) {
    for other in others {
        assert!(
            !text.contains(&sampled_text(other)) && !text.contains(&elicited_name(other)),
            "{what} of client {tag} got client {other}'s answer: {text}"
        );
    }
}

/// Asserts that each client was asked only its own calls' questions (each names the client
/// it is for: "… for TAG").
fn assert_asked_only_own(spans: &[Span], tags: &[&str]) {
    for span in spans {
        assert!(
            span.question.contains(&format!("for {}", span.client)),
            "client {} was asked a question that is not its own: {}",
            span.client,
            span.question
        );
        for other in others(tags, &span.client) {
            assert!(
                !span.question.contains(&format!("for {other}")),
                "client {} was asked client {other}'s question: {}",
                span.client,
                span.question
            );
        }
    }
}

/// Asserts that every span overlaps every other: all questions were asked before any was
/// answered, so the calls were all in flight together.
fn assert_overlapped(spans: &[Span], expected: usize) {
    assert_eq!(spans.len(), expected, "questions answered: {spans:?}");
    let last_asked = spans.iter().map(|s| s.asked).max().expect("spans");
    let first_answered = spans.iter().map(|s| s.answered).min().expect("spans");
    assert!(
        last_asked < first_answered,
        "the calls did not overlap: the last question came {:?} after the first answer",
        last_asked - first_answered
    );
}

// ---------------------------------------------------------------------------------------
// 1. Routing, 2026-07-28 downstream: exact
// ---------------------------------------------------------------------------------------

/// Four clients of one HTTP gateway — two handshake-era sessions (2025-11-25) and two
/// 2026-07-28 clients — each with a sampling call and an elicitation call in flight at the
/// same moment, to `moat serve everything` (a 2026-07-28 server: its questions come back
/// in each call's own answer). Every call gets its own client's answer, never another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_calls_of_two_clients_each_get_their_own_answer_from_a_modern_server() {
    let (_guard, dir) = real_tempdir();
    let config = write_config(&dir, &moat_everything("ev"));
    let gateway = http_gateway(&config);

    let clients = [
        ("alpha", ProtocolVersion::V2025_11_25),
        ("bravo", ProtocolVersion::V2025_11_25),
        ("charlie", ProtocolVersion::V2026_07_28),
        ("delta", ProtocolVersion::V2026_07_28),
    ];
    let tags: Vec<&str> = clients.iter().map(|(t, _)| *t).collect();
    let spans = Arc::new(Mutex::new(Vec::new()));
    let mut connected = Vec::new();
    for (tag, rev) in clients {
        let client = answering_client(&gateway.url, rev, tag, spans.clone()).await;
        connected.push((tag, rev, Arc::new(client)));
    }

    let mut calls = Vec::new();
    for (tag, rev, client) in &connected {
        let (tag, rev) = (*tag, *rev);
        let c = client.clone();
        calls.push(tokio::spawn(async move {
            let out = c
                .call_tool(
                    "test_sampling",
                    json!({ "prompt": format!("a question for {tag}") }),
                )
                .await;
            (tag, rev, "sampling", out)
        }));
        let c = client.clone();
        calls.push(tokio::spawn(async move {
            let out = c
                .call_tool(
                    "test_elicitation",
                    json!({ "message": format!("a form for {tag}") }),
                )
                .await;
            (tag, rev, "elicitation", out)
        }));
    }
    for call in calls {
        let (tag, rev, kind, out) = call.await.expect("call task");
        let text = outcome_text(&out);
        let what = format!("the {kind} call ({rev})");
        assert_no_leak(&text, tag, &others(&tags, tag), &what);
        let own = match kind {
            "sampling" => sampled_text(tag),
            _ => elicited_name(tag),
        };
        let result = out.unwrap_or_else(|e| {
            panic!(
                "{what} of client {tag} failed: {e}\n--- gateway ---\n{}",
                gateway.log()
            )
        });
        assert_ne!(result.is_error, Some(true), "{what} of {tag}: {text}");
        assert!(
            text.contains(&own),
            "{what} of client {tag} did not get its client's answer: {text}"
        );
    }
    let spans = spans.lock().unwrap().clone();
    assert_asked_only_own(&spans, &tags);
    assert_overlapped(&spans, 2 * connected.len());
    for (_, _, client) in connected {
        if let Ok(client) = Arc::try_unwrap(client) {
            client.close().await;
        }
    }
}

// ---------------------------------------------------------------------------------------
// 2. Routing, handshake-era stdio downstream: refused when it cannot be exact
// ---------------------------------------------------------------------------------------

/// The outcome of a sampling call to the TypeScript reference server: `Ok(true)` its own
/// client's completion, `Ok(false)` the gateway's refusal to route the question, `Err`
/// anything else (as text).
fn own_or_refused(out: &moat::Result<CallToolResult>, tag: &str) -> Result<bool, String> {
    let text = outcome_text(out);
    let mine = sampled_text(tag);
    match out {
        Ok(result) if result.is_error != Some(true) && text.contains(&mine) => Ok(true),
        _ if text.contains("cannot be routed") => Ok(false),
        _ => Err(text),
    }
}

/// The TypeScript reference server (handshake era: a sampling request it sends says nothing
/// of the call it serves) behind an HTTP gateway; four clients, two 2025-11-25 sessions and
/// two 2026-07-28 clients. Calls in flight together: no call ever gets another client's
/// completion; each gets its own or the gateway's "cannot be routed" refusal. The same
/// calls one after another: every one gets its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_calls_to_a_handshake_era_server_never_get_another_clients_answer() {
    let Some(peers) = peers(&[EVERYTHING_JS]) else {
        return;
    };
    let (_guard, dir) = real_tempdir();
    // Its sampling tool is open-world (an untrusted source and a sink): containment would
    // put a session's second call to a person. That is not what this test is about.
    let servers = format!(
        "[servers.ev]\ncommand = \"node\"\nargs = [{js:?}, \"stdio\"]\nsandbox = false\n\n\
         [[policy.labels]]\nserver = \"ev\"\ntool = \"*\"\nuntrusted = false\nsink = false\n\n",
        js = path(&peers, EVERYTHING_JS),
    );
    let config = write_config(&dir, &servers);
    let gateway = http_gateway(&config);

    let clients = [
        ("alpha", ProtocolVersion::V2025_11_25),
        ("bravo", ProtocolVersion::V2025_11_25),
        ("charlie", ProtocolVersion::V2026_07_28),
        ("delta", ProtocolVersion::V2026_07_28),
    ];
    let tags: Vec<&str> = clients.iter().map(|(t, _)| *t).collect();
    let spans = Arc::new(Mutex::new(Vec::new()));
    let mut connected = Vec::new();
    for (tag, rev) in clients {
        let client = answering_client(&gateway.url, rev, tag, spans.clone()).await;
        connected.push((tag, rev, Arc::new(client)));
    }
    let sample = |client: Arc<Client>, tag: &'static str| async move {
        client
            .call_tool(
                "ev__trigger-sampling-request",
                json!({ "prompt": format!("a question for {tag}"), "maxTokens": 20 }),
            )
            .await
    };

    // Together: the two sessions of one revision (the same client name and version, so
    // only the session tells them apart), the two 2026-07-28 clients, then all four.
    let phases: [&[&str]; 3] = [
        &["alpha", "bravo"],
        &["charlie", "delta"],
        &["alpha", "bravo", "charlie", "delta"],
    ];
    for phase in phases {
        spans.lock().unwrap().clear();
        let calls: Vec<_> = connected
            .iter()
            .filter(|(tag, _, _)| phase.contains(tag))
            .map(|(tag, rev, client)| {
                let (tag, rev) = (*tag, *rev);
                let call = sample(client.clone(), tag);
                tokio::spawn(async move { (tag, rev, call.await) })
            })
            .collect();
        let mut refused = 0;
        for call in calls {
            let (tag, rev, out) = call.await.expect("call task");
            let text = outcome_text(&out);
            assert_no_leak(&text, tag, &others(&tags, tag), &format!("a call ({rev})"));
            match own_or_refused(&out, tag) {
                Ok(true) => {}
                Ok(false) => refused += 1,
                Err(text) => panic!(
                    "the overlapping call of client {tag} ({rev}) got neither its own answer \
                     nor a refusal to route: {text}\n--- gateway ---\n{}",
                    gateway.log()
                ),
            }
        }
        assert_asked_only_own(&spans.lock().unwrap(), &tags);
        // A session's question is answered by its own client, or refused before any client
        // sees it. (A 2026-07-28 client is asked in a first round, and its retry's question
        // may then be refused: see
        // `a_handshake_era_servers_tool_runs_once_and_its_question_gets_its_own_answer`.)
        if phase.len() == 2 && phase[0] == "alpha" {
            assert_eq!(
                spans.lock().unwrap().len(),
                phase.len() - refused,
                "{phase:?}: a refused question still reached a client"
            );
        }
        eprintln!(
            "{phase:?}: {refused} of {} overlapping calls refused as unroutable",
            phase.len()
        );
    }

    // One after another: every call's question can be routed, and is.
    for (tag, rev, client) in &connected {
        let out = sample(client.clone(), tag).await;
        let text = outcome_text(&out);
        assert_no_leak(&text, tag, &others(&tags, tag), "a sequential call");
        assert_eq!(
            own_or_refused(&out, tag),
            Ok(true),
            "the sequential call of client {tag} ({rev}) should get its own answer\n\
             --- gateway ---\n{}",
            gateway.log()
        );
    }
    assert_asked_only_own(&spans.lock().unwrap(), &tags);
}

/// A gateway configuration in `dir` with `interop/py_asking_server.py` as server `asker`.
fn asker_config(dir: &Path, peers: &Path) -> String {
    let servers = format!(
        "[servers.asker]\ncommand = {py:?}\nargs = [{srv:?}]\nsandbox = false\n\n",
        py = path(peers, VENV_PYTHON),
        srv = script("py_asking_server.py"),
    );
    write_config(dir, &servers).to_string_lossy().into_owned()
}

/// A tool of a handshake-era server (`interop/py_asking_server.py`: each call numbered,
/// its question "question N") asks the client through the gateway. A 2025-11-25 client
/// answers on the call's stream: the tool runs once, its question answered. A 2026-07-28
/// client answers in a second round (a retry with `inputResponses`), which runs the call
/// again (multi-round-trip requests keep no state between rounds; docs/gateway.md, "Limits,
/// today"): this server then asks a new question, "question 2", which must never get the
/// answer to "question 1" — the client is asked again, and the call ends, answered right or
/// refused, but never with an answer to another question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_era_servers_question_gets_only_the_answer_to_it() {
    let Some(peers) = peers(&[VENV_PYTHON]) else {
        return;
    };
    let (_guard, dir) = real_tempdir();
    let config = asker_config(&dir, &peers);
    let ask = async |rev: ProtocolVersion| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let client = Client::builder()
            .protocol(VersionPreference::Exact(rev))
            .request_timeout(Some(REQUEST_TIMEOUT))
            .on_elicitation(move |params| {
                let message = serde_json::to_value(&params).expect("params encode")["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                log.lock().unwrap().push(message.clone());
                async move {
                    let result: ElicitResult = serde_json::from_value(json!({
                        "action": "accept",
                        "content": { "answer": format!("yes to {message}") },
                    }))
                    .expect("an elicitation result");
                    Ok::<_, ErrorObject>(result)
                }
            })
            .connect_command([MOAT, "gateway", "--config", &config])
            .await
            .unwrap_or_else(|e| panic!("{rev}: the gateway starts: {e}"));
        let out = client.call_tool("asker__ask", json!({})).await;
        client.close().await;
        let seen = seen.lock().unwrap().clone();
        (rev, outcome_text(&out), seen)
    };
    let (legacy, modern) = tokio::join!(
        ask(ProtocolVersion::V2025_11_25),
        ask(ProtocolVersion::V2026_07_28)
    );
    let (rev, text, seen) = legacy;
    assert_eq!(
        seen,
        ["question 1"],
        "{rev}: the questions the client saw ({text})"
    );
    assert!(
        text.contains(
            r#"call 1: question 1 was answered {\"answer\": \"yes to question 1\"} (accept)"#
        ),
        "{rev}: the server's tool should run once, its question answered: {text}"
    );
    let (rev, text, seen) = modern;
    // Each question the server asked was one the client saw, and an answer reached only
    // the question it answers.
    for n in 1..=seen.len() {
        assert_eq!(seen[n - 1], format!("question {n}"), "{rev}: {seen:?}");
    }
    if let Some(at) = text.find(" was answered ") {
        let asked = text[..at].rsplit("question ").next().unwrap_or_default();
        assert!(
            text.contains(&format!(r#"yes to question {asked}\""#)),
            "{rev}: question {asked} got another question's answer: {text}"
        );
    }
}

/// A server may ask for roots at any time (the reference everything server does right
/// after `initialized`), so a `roots/list` that arrives during a call is not necessarily
/// the call's. When the call's client declared no roots, the server gets an error for its
/// request and the call goes on: a call that then fails for its own reasons comes back as
/// the server's result, in both eras, never as the 2026-07-28 "missing capability: roots"
/// (-32021) that would blame the client for a question the call did not ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roots_request_crossing_a_call_of_a_client_without_roots_leaves_the_call_alone() {
    let Some(peers) = peers(&[VENV_PYTHON]) else {
        return;
    };
    let (_guard, dir) = real_tempdir();
    let config = asker_config(&dir, &peers);
    let call = async |rev: ProtocolVersion| {
        let client = Client::builder()
            .protocol(VersionPreference::Exact(rev))
            .request_timeout(Some(REQUEST_TIMEOUT))
            .connect_command([MOAT, "gateway", "--config", &config])
            .await
            .unwrap_or_else(|e| panic!("{rev}: the gateway starts: {e}"));
        let out = client.call_tool("asker__roots_then_fail", json!({})).await;
        client.close().await;
        (rev, out)
    };
    let (legacy, modern) = tokio::join!(
        call(ProtocolVersion::V2025_11_25),
        call(ProtocolVersion::V2026_07_28)
    );
    for (rev, out) in [legacy, modern] {
        let text = outcome_text(&out);
        let result = out.unwrap_or_else(|e| panic!("{rev}: the server's own result, not {e}"));
        assert!(result.is_error(), "{rev}: {text}");
        assert!(
            text.contains("failed; roots/list got:") && text.contains("did not declare roots"),
            "{rev}: the server's request should be refused, saying why: {text}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// 3. Tasks
// ---------------------------------------------------------------------------------------

/// `_meta` that says this 2026-07-28 request's client takes the tasks extension.
fn accepts_tasks_meta() -> serde_json::Map<String, Value> {
    let meta = json!({
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        }
    });
    match meta {
        Value::Object(map) => map,
        _ => unreachable!(),
    }
}

/// A raw request of `client`, with `meta`; its result or error as text.
async fn raw(
    client: &Client,
    method: &str,
    params: Value,
    meta: Option<&serde_json::Map<String, Value>>,
) -> Result<Value, String> {
    let mut options = RequestOptions::default().timeout(Duration::from_secs(5));
    if let Some(meta) = meta {
        options = options.meta(meta.clone());
    }
    client
        .peer()
        .request_with::<_, Value>(method, &params, options)
        .await
        .map_err(|e| e.to_string())
}

/// Every `taskId` value in `text` (lines of JSON-RPC messages).
fn task_ids_in(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for line in text.lines() {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        collect_task_ids(&value, &mut ids);
    }
    ids
}

fn collect_task_ids(value: &Value, ids: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                if key == "taskId"
                    && let Some(id) = v.as_str()
                {
                    ids.insert(id.to_owned());
                }
                collect_task_ids(v, ids);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_task_ids(v, ids)),
        _ => {}
    }
}

/// A task client A (a 2025-11-25 session over HTTP) starts through the gateway: another
/// session (B) can neither get, wait for, cancel nor list it, and nor can a 2026-07-28
/// client (C); A still gets its result. A 2026-07-28 client's two concurrent tasks get
/// distinct ids, and every id a client sees is the gateway's own, none the downstream
/// server's (`moat serve everything`, its stdout copied to a file by `tee`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_belongs_to_the_session_that_started_it_and_its_id_is_the_gateways() {
    let (_guard, dir) = real_tempdir();
    let wire = dir.join("downstream.jsonl");
    let servers = format!(
        "[servers.ev]\ncommand = \"sh\"\nargs = [\"-c\", \"\\\"$0\\\" serve everything | tee -a \\\"$1\\\"\", {MOAT:?}, {wire:?}]\nsandbox = false\nprefix = \"\"\n\n",
        wire = wire.to_string_lossy(),
    );
    let config = write_config(&dir, &servers);
    let gateway = http_gateway(&config);
    let url = gateway.url.clone();

    let a = plain_client(&url, ProtocolVersion::V2025_11_25).await;
    let b = plain_client(&url, ProtocolVersion::V2025_11_25).await;
    let c = plain_client(&url, ProtocolVersion::V2026_07_28).await;
    assert!(
        a.server_capabilities().tasks.is_some(),
        "the gateway offers tasks to a 2025-11-25 client: {:?}\n--- gateway ---\n{}",
        a.server_capabilities(),
        gateway.log()
    );

    // A's task.
    let task_a = match a
        .call_tool_accepting_task(
            "slow_compute",
            json!({ "seconds": 3, "label": "task-of-alpha" }),
            RequestOptions::default(),
        )
        .await
        .expect("A calls slow_compute")
    {
        ToolCall::Task(task) => task,
        other => panic!("slow_compute for 3 s should become a task: {other:?}"),
    };
    let id_a = task_a.id().to_owned();
    let get = json!({ "taskId": id_a });

    // A itself may look at it (so the refusals below are about whose it is).
    let own = raw(&a, "tasks/get", get.clone(), None).await;
    assert!(own.is_ok(), "A's tasks/get on its own task: {own:?}");
    let listed = raw(&a, "tasks/list", json!({}), None)
        .await
        .expect("A's tasks/list");
    assert!(
        listed.to_string().contains(&id_a),
        "A lists its task: {listed}"
    );

    // B, another session, and C, a 2026-07-28 client, may not.
    let meta = accepts_tasks_meta();
    let (b_get, b_result, b_cancel, b_list, c_get, c_cancel) = tokio::join!(
        raw(&b, "tasks/get", get.clone(), None),
        raw(&b, "tasks/result", get.clone(), None),
        raw(&b, "tasks/cancel", get.clone(), None),
        raw(&b, "tasks/list", json!({}), None),
        raw(&c, "tasks/get", get.clone(), Some(&meta)),
        raw(&c, "tasks/cancel", get.clone(), Some(&meta)),
    );
    for (what, out) in [
        ("B's tasks/get", &b_get),
        ("B's tasks/result", &b_result),
        ("B's tasks/cancel", &b_cancel),
        ("C's tasks/get", &c_get),
        ("C's tasks/cancel", &c_cancel),
    ] {
        let Err(error) = out else {
            panic!("{what} on A's task {id_a} was answered: {out:?}");
        };
        // Refused as a task it does not know (not a method it lacks, nor a wait).
        assert!(
            error.contains("-32602") && error.contains(&id_a),
            "{what} on A's task should be refused as unknown: {error}"
        );
    }
    let b_list = b_list.expect("B's own tasks/list works");
    assert!(
        !b_list.to_string().contains(&id_a),
        "B's tasks/list shows A's task: {b_list}"
    );

    // A's task went on undisturbed.
    let result = tokio::time::timeout(Duration::from_secs(15), task_a.finish())
        .await
        .expect("A's task ends")
        .unwrap_or_else(|e| panic!("A's task failed: {e}\n--- gateway ---\n{}", gateway.log()));
    let text = serde_json::to_string(&result).expect("encode");
    assert_ne!(result.is_error, Some(true), "{text}");
    assert!(
        text.contains("task-of-alpha") && text.contains("completed after 3 seconds"),
        "A's result: {text}"
    );

    // 2026-07-28: two tasks of one client at once.
    let options = || RequestOptions::default();
    let (one, two) = tokio::join!(
        c.call_tool_accepting_task(
            "slow_compute",
            json!({ "seconds": 2, "label": "modern-one" }),
            options()
        ),
        c.call_tool_accepting_task(
            "slow_compute",
            json!({ "seconds": 2, "label": "modern-two" }),
            options()
        ),
    );
    let (one, two) = match (one, two) {
        (Ok(ToolCall::Task(one)), Ok(ToolCall::Task(two))) => (one, two),
        other => panic!(
            "both 2026-07-28 calls should become tasks: {other:?}\n--- gateway ---\n{}",
            gateway.log()
        ),
    };
    let (id_one, id_two) = (one.id().to_owned(), two.id().to_owned());
    assert_ne!(id_one, id_two, "two tasks got one id");
    // A 2026-07-28 task is no session's: a 2025-11-25 session does not see it either.
    let get_one = json!({ "taskId": id_one });
    let (b_get, b_cancel) = tokio::join!(
        raw(&b, "tasks/get", get_one.clone(), None),
        raw(&b, "tasks/cancel", get_one.clone(), None),
    );
    for (what, out) in [("B's tasks/get", b_get), ("B's tasks/cancel", b_cancel)] {
        assert!(
            out.as_ref().is_err_and(|e| e.contains(&id_one)),
            "{what} on a 2026-07-28 task: {out:?}"
        );
    }
    let (r_one, r_two) = tokio::join!(one.finish(), two.finish());
    for (label, out) in [("modern-one", r_one), ("modern-two", r_two)] {
        let text = outcome_text(&out);
        assert!(
            out.is_ok() && text.contains(label),
            "the {label} task's result: {text}"
        );
    }

    // The downstream's own ids: what it answered the gateway, never what a client saw.
    let downstream = task_ids_in(&std::fs::read_to_string(&wire).unwrap_or_default());
    assert!(
        downstream.len() >= 3,
        "the downstream server made each call a task of its own: {downstream:?}"
    );
    for id in [&id_a, &id_one, &id_two] {
        assert!(
            !downstream.contains(id),
            "a client was shown the downstream server's task id {id}"
        );
    }
    for client in [a, b, c] {
        client.close().await;
    }
}

/// What a client is offered does not depend on when it connects: a client of a stdio
/// gateway connects as the gateway starts, before its servers are up (here one that takes
/// a second to start, `moat serve everything`, which has resources, prompts and tools that
/// may run as tasks). Its `tools/list` waits for the server and shows tools with
/// `execution.taskSupport`; the capabilities it was offered must say so too — else a
/// 2025-11-25 client may not use those tasks, and a client never lists the resources and
/// prompts at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_connects_while_servers_start_is_offered_what_they_offer() {
    let (_guard, dir) = real_tempdir();
    let servers = format!(
        "[servers.ev]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep 1; exec \\\"$0\\\" serve everything\", {MOAT:?}]\nsandbox = false\nprefix = \"\"\n\n"
    );
    let config = write_config(&dir, &servers);
    let config = config.to_string_lossy().into_owned();
    let argv = [MOAT, "gateway", "--config", &config];
    let (legacy, modern) = tokio::join!(
        Client::builder()
            .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
            .request_timeout(Some(REQUEST_TIMEOUT))
            .connect_command(argv),
        Client::builder()
            .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
            .request_timeout(Some(REQUEST_TIMEOUT))
            .connect_command(argv),
    );
    let (legacy, modern) = (
        legacy.expect("a 2025-11-25 client connects"),
        modern.expect("a 2026-07-28 client connects"),
    );
    // What each was listed and offered; the gateways are closed before any assertion.
    let mut seen = Vec::new();
    for client in [legacy, modern] {
        let rev = client.protocol_version();
        let tools = client.list_all_tools().await.expect("tools/list");
        let listed = tools.iter().any(|t| t.name == "slow_compute");
        let caps = client.server_capabilities().clone();
        client.close().await;
        seen.push((rev, listed, caps));
    }
    for (rev, listed, caps) in &seen {
        assert!(listed, "{rev:?}: the server's tools are listed");
        assert!(
            caps.resources.is_some(),
            "{rev:?}: resources not offered: {caps:?}"
        );
        assert!(
            caps.prompts.is_some(),
            "{rev:?}: prompts not offered: {caps:?}"
        );
    }
    let caps = &seen[0].2;
    assert!(
        caps.tasks.as_ref().is_some_and(|t| t.requests.is_some()),
        "2025-11-25: tools with taskSupport are listed, but tasks are not offered: {caps:?}"
    );
    let caps = &seen[1].2;
    assert!(
        caps.extensions
            .as_ref()
            .is_some_and(|e| e.contains_key("io.modelcontextprotocol/tasks")),
        "2026-07-28: the tasks extension is not offered: {caps:?}"
    );
}

// ---------------------------------------------------------------------------------------
// 4. Roots
// ---------------------------------------------------------------------------------------

/// The Python SDK client offering `roots`, calling `roots__list_roots` through
/// `moat gateway --config CONFIG` (stdio) in revision `rev`; the text it got back.
fn roots_seen(peers: &Path, config: &Path, rev: &str, roots: &[String]) -> (String, Run) {
    let mut argv: Vec<String> = vec![
        path(peers, VENV_PYTHON),
        script("py_client.py"),
        "--timeout".into(),
        "25".into(),
        "--protocol".into(),
        rev.into(),
    ];
    for root in roots {
        argv.extend(["--root".into(), root.clone()]);
    }
    argv.extend([
        "--call".into(),
        "roots__list_roots".into(),
        "{}".into(),
        "--".into(),
        MOAT.into(),
        "gateway".into(),
        "--config".into(),
        config.to_string_lossy().into_owned(),
    ]);
    let run = run(&argv, CLIENT_TIMEOUT, PIPE_GRACE, Leftovers::Fail);
    let out = run.json(0);
    assert_eq!(out["protocolVersion"], rev, "{}", run.describe());
    let result = &out["calls"][0]["result"];
    assert_ne!(result["isError"], true, "{}", run.describe());
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (text, run)
}

/// `interop/py_roots_server.py` (a Python SDK server whose tool asks for the client's roots)
/// behind the gateway, `sandbox` its sandbox setting.
fn roots_config(dir: &Path, peers: &Path, sandbox: &str) -> PathBuf {
    let servers = format!(
        "[servers.roots]\ncommand = {py:?}\nargs = [{srv:?}]\nsandbox = {sandbox}\n\n",
        py = path(peers, VENV_PYTHON),
        srv = script("py_roots_server.py"),
    );
    write_config(dir, &servers)
}

/// Unconfined, a server gets every root the client offers, in its order, in both eras
/// (a request of its own in 2025-11-25, an input request of the call's answer in
/// 2026-07-28).
#[test]
fn an_unconfined_server_gets_all_the_clients_roots() {
    let Some(peers) = peers(&[VENV_PYTHON]) else {
        return;
    };
    let (_guard, dir) = real_tempdir();
    let config = roots_config(&dir, &peers, "false");
    let roots = [
        format!("file://{}", dir.join("project-one").display()),
        "file:///srv/elsewhere/project-two".to_owned(),
    ];
    let handles: Vec<_> = ["2025-11-25", "2026-07-28"]
        .into_iter()
        .map(|rev| {
            let (peers, config, roots) = (peers.clone(), config.clone(), roots.clone());
            thread::spawn(move || (rev, roots_seen(&peers, &config, rev, &roots)))
        })
        .collect();
    for handle in handles {
        let (rev, (text, run)) = handle.join().expect("client thread");
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            roots.iter().map(String::as_str).collect::<Vec<_>>(),
            "{rev}: the server should get both roots\n{}",
            run.describe()
        );
    }
}

/// Sandboxed with `ro = [DIR_A]`, a server gets only the client's roots inside DIR_A: not
/// one in another directory, nor a sibling whose name starts like DIR_A's, nor one that
/// walks out of DIR_A with `..`.
#[test]
fn a_sandboxed_server_gets_only_the_roots_its_sandbox_reaches() {
    let Some(peers) = peers(&[VENV_PYTHON]) else {
        return;
    };
    let (_guard, dir) = real_tempdir();
    let (_guard_a, dir_a) = real_tempdir();
    let (_guard_b, dir_b) = real_tempdir();
    let config = roots_config(
        &dir,
        &peers,
        &format!("{{ ro = [{:?}] }}", dir_a.to_string_lossy()),
    );
    let inside = format!("file://{}/src", dir_a.display());
    let roots = [
        format!("file://{}", dir_b.display()),
        inside.clone(),
        format!("file://{}-sibling", dir_a.display()),
        format!(
            "file://{}/../{}",
            dir_a.display(),
            dir_b.file_name().expect("a name").to_string_lossy()
        ),
    ];
    let handles: Vec<_> = ["2025-11-25", "2026-07-28"]
        .into_iter()
        .map(|rev| {
            let (peers, config, roots) = (peers.clone(), config.clone(), roots.clone());
            thread::spawn(move || (rev, roots_seen(&peers, &config, rev, &roots)))
        })
        .collect();
    for handle in handles {
        let (rev, (text, run)) = handle.join().expect("client thread");
        assert_eq!(
            text,
            inside,
            "{rev}: only the root inside the sandbox's path should reach the server\n{}",
            run.describe()
        );
    }
}

// ---------------------------------------------------------------------------------------
// 5. Reload: one list_changed, or none
// ---------------------------------------------------------------------------------------

/// The child of `gateway` whose command line contains `needle`.
fn child_running(gateway: u32, needle: &str) -> Option<u32> {
    children(gateway).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
    })
}

/// Every page of `tools/list`, as the gateway wrote them.
async fn raw_tool_pages(client: &Client) -> Vec<String> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let page = client
            .peer()
            .request_raw("tools/list", &params, RequestOptions::default())
            .await
            .expect("tools/list");
        let value: Value = serde_json::from_str(page.get()).expect("a JSON page");
        pages.push(page.get().to_owned());
        match value["nextCursor"].as_str() {
            Some(next) if pages.len() < 100 => cursor = Some(next.to_owned()),
            _ => return pages,
        }
    }
}

/// The exposed tool names, in the order listed.
async fn tool_order(client: &Client) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name)
        .collect()
}

/// `MOAT_TEST_TOOLS` for `names`.
fn tool_specs(names: &[&str]) -> String {
    let list: Vec<Value> = names
        .iter()
        .map(|n| json!({ "name": n, "description": format!("the {n} tool") }))
        .collect();
    Value::Array(list).to_string()
}

/// The moat.toml: `moat serve everything` as `ev`, then `interop/py_mutable_server.py` as
/// `py` with `tools` and `extra_env` in its environment.
fn reload_config(dir: &Path, peers: &Path, tools: &[&str], extra_env: &str) -> String {
    let servers = format!(
        "[servers.ev]\ncommand = {MOAT:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n\n\
         [servers.py]\ncommand = {py:?}\nargs = [{srv:?}]\nenv = {{ MOAT_TEST_TOOLS = {t:?}{extra_env} }}\nsandbox = false\n\n",
        py = path(peers, VENV_PYTHON),
        srv = script("py_mutable_server.py"),
        t = tool_specs(tools),
    );
    format!(
        "state_dir = {state:?}\n\n{servers}\n[policy]\ndefault = \"allow\"\n\n[tool_search]\nmode = \"off\"\n",
        state = dir.join("state").to_string_lossy(),
    )
}

/// Collects the `notifications/tools/list_changed` a client gets, from now on.
fn count_list_changed(client: &Client) -> Arc<Mutex<Vec<Instant>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut rx = client.notifications();
    let out = seen.clone();
    tokio::spawn(async move {
        while let Ok(n) = rx.recv().await {
            if n.method == "notifications/tools/list_changed" {
                out.lock().unwrap().push(Instant::now());
            }
        }
    });
    seen
}

/// Waits until `check` holds, polling every 100 ms, or fails after [`RELOAD_WITHIN`].
async fn wait_until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + RELOAD_WITHIN;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A stdio gateway with two servers, a client connected. An edit that adds a tool to one
/// server restarts it and costs the client exactly one `list_changed`, after which the new
/// tool is listed in configuration order; an edit that restarts the server with the same
/// tools costs none, and `tools/list` is byte for byte what it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_restarts_a_server_costs_one_list_changed_or_none() {
    let Some(peers) = peers(&[VENV_PYTHON]) else {
        return;
    };
    let (_guard, dir) = real_tempdir();
    let file = dir.join("moat.toml");
    std::fs::write(&file, reload_config(&dir, &peers, &["p_one", "p_two"], "")).expect("write");
    // A handshake-era client: notifications come unasked (a 2026-07-28 one listens for them).
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .request_timeout(Some(REQUEST_TIMEOUT))
        .connect_command([MOAT, "gateway", "--config", &file.to_string_lossy()])
        .await
        .expect("the gateway starts");
    let gateway = client
        .child()
        .and_then(|c| c.id())
        .expect("the gateway's pid");
    let _servers = ServersOf(gateway);
    let before = tool_order(&client).await;
    let py_tools = |names: &[String]| -> Vec<String> {
        names
            .iter()
            .filter(|n| n.starts_with("py__"))
            .cloned()
            .collect()
    };
    assert_eq!(py_tools(&before), ["py__p_one", "py__p_two"], "{before:?}");
    let ev = child_running(gateway, "everything").expect("ev runs");
    let py = child_running(gateway, "py_mutable_server.py").expect("py runs");

    // A tool added: one notification.
    let seen = count_list_changed(&client);
    let edited = Instant::now();
    std::fs::write(
        &file,
        reload_config(&dir, &peers, &["p_one", "p_new", "p_two"], ""),
    )
    .expect("rewrite");
    let after = wait_until("the new tool", async || {
        let names = tool_order(&client).await;
        names.contains(&"py__p_new".to_owned()).then_some(names)
    })
    .await;
    let listed = Instant::now();
    tokio::time::sleep_until(
        (edited + COUNT_FOR)
            .max(listed + Duration::from_secs(2))
            .into(),
    )
    .await;
    let py_after = child_running(gateway, "py_mutable_server.py");
    assert!(
        py_after.is_some_and(|p| p != py),
        "py was restarted: {py} then {py_after:?}"
    );
    assert_eq!(
        child_running(gateway, "everything"),
        Some(ev),
        "ev kept running"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "list_changed notifications after a reload that added one tool"
    );
    assert_eq!(
        py_tools(&after),
        ["py__p_one", "py__p_new", "py__p_two"],
        "the server's order: {after:?}"
    );
    let last_ev = after.iter().rposition(|n| !n.starts_with("py__"));
    let first_py = after.iter().position(|n| n.starts_with("py__"));
    assert!(
        last_ev < first_py,
        "configuration order, ev then py: {after:?}"
    );
    let ev_before: Vec<&String> = before.iter().filter(|n| !n.starts_with("py__")).collect();
    let ev_after: Vec<&String> = after.iter().filter(|n| !n.starts_with("py__")).collect();
    assert_eq!(ev_before, ev_after, "ev's tools did not change");

    // The same tools, restarted: no notification, the same list.
    let pages = raw_tool_pages(&client).await;
    let py = py_after.expect("py runs");
    let seen = count_list_changed(&client);
    let edited = Instant::now();
    std::fs::write(
        &file,
        reload_config(
            &dir,
            &peers,
            &["p_one", "p_new", "p_two"],
            ", UNRELATED_SETTING = \"1\"",
        ),
    )
    .expect("rewrite");
    let restarted = wait_until("py's restart", async || {
        child_running(gateway, "py_mutable_server.py").filter(|p| *p != py)
    })
    .await;
    // Up again: its tools answer.
    let call = wait_until("py's tools after the restart", async || {
        client
            .call_tool("py__p_new", json!({ "text": "again" }))
            .await
            .ok()
            .filter(|r| r.is_error != Some(true))
    })
    .await;
    assert!(outcome_text(&Ok(call)).contains("p_new: again"));
    let up = Instant::now();
    tokio::time::sleep_until((edited + COUNT_FOR).max(up + Duration::from_secs(2)).into()).await;
    assert_eq!(
        child_running(gateway, "py_mutable_server.py"),
        Some(restarted),
        "py restarted once"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        0,
        "list_changed notifications after a restart with the same tools"
    );
    assert_eq!(
        raw_tool_pages(&client).await,
        pages,
        "tools/list after a restart with the same tools"
    );
    client.close().await;
}

// ---------------------------------------------------------------------------------------
// 6. The gateway's end is its servers' end
// ---------------------------------------------------------------------------------------

/// An HTTP gateway running `moat serve everything`, stopped with `signal`: whether, within
/// a few seconds, the gateway and its server have both exited (the server's pid, and
/// what is left, for the message).
fn stop_and_watch(signal: i32) -> (bool, bool, String) {
    let (_guard, dir) = real_tempdir();
    let config = write_config(&dir, &moat_everything("ev"));
    let mut gateway = http_gateway(&config);
    let servers = children(gateway.pid());
    assert_eq!(servers.len(), 1, "one server: {servers:?}");
    let stopped = gateway.stop(signal, Duration::from_secs(10));
    let deadline = Instant::now() + Duration::from_secs(5);
    while servers.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = servers.iter().copied().filter(|&p| alive(p)).collect();
    kill_leftovers(&servers);
    let log = gateway.log();
    (
        stopped,
        left.is_empty(),
        format!("servers left: {left:?}\n--- gateway ---\n{log}"),
    )
}

/// SIGINT (Ctrl-C): the gateway stops its servers, then exits.
#[test]
fn a_gateway_stopped_with_sigint_stops_its_servers() {
    let (stopped, servers_gone, why) = stop_and_watch(libc::SIGINT);
    assert!(stopped, "the gateway did not exit on SIGINT: {why}");
    assert!(servers_gone, "{why}");
}

/// SIGTERM — what `kill`, systemd, Docker and supervisors send — must end the servers
/// too, not leave them running without a parent (each is in a process group of its own, so
/// nothing else reaches them).
#[test]
fn a_gateway_stopped_with_sigterm_stops_its_servers() {
    let (stopped, servers_gone, why) = stop_and_watch(libc::SIGTERM);
    assert!(stopped, "the gateway did not exit on SIGTERM: {why}");
    assert!(servers_gone, "{why}");
}

/// A gateway killed outright (SIGKILL, a crash, the OOM killer) cannot stop its servers:
/// they see their stdin close, and must exit then. `moat serve everything` does not while
/// the gateway's `subscriptions/listen` (2026-07-28) is still open on it.
#[test]
fn the_servers_of_a_killed_gateway_exit_when_their_input_ends() {
    let (stopped, servers_gone, why) = stop_and_watch(libc::SIGKILL);
    assert!(stopped, "{why}");
    assert!(servers_gone, "{why}");
}
