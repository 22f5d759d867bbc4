//! Black-box tests of `moat gateway` as an invisible intermediary: what a server asks of
//! the client (sampling, elicitation) reaches the client of the call, in every revision;
//! the catalog comes out in one order whatever order the servers start in; a server
//! that restarts costs a client at most one `list_changed`; a client that connects while
//! a slow server starts still gets its tools and calls.
//!
//! Real peers: the TypeScript reference server (`@modelcontextprotocol/server-everything`)
//! and `interop/py_mutable_server.py` behind the gateway, the official Python SDK client
//! (`interop/py_client.py`) and moat's own `moat call` in front. They live in `interop/`
//! (installed by `.ci/run`); missing peers skip a test, except under CI.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

mod support;
use support::{Leftovers, Run, run};

const TIMEOUT: Duration = Duration::from_secs(90);
const PIPE_GRACE: Duration = Duration::from_secs(10);
const EVERYTHING_JS: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";
const VENV_PYTHON: &str = ".venv/bin/python";

fn moat_bin() -> &'static str {
    env!("CARGO_BIN_EXE_moat")
}

fn peers() -> Option<PathBuf> {
    support::interop_dir(&[
        EVERYTHING_JS,
        VENV_PYTHON,
        "py_client.py",
        "py_mutable_server.py",
        "py_sampling_server.py",
        "ts_client.mjs",
        "node_modules/@modelcontextprotocol/sdk",
        "node_modules/@modelcontextprotocol/client",
    ])
}

fn path(dir: &Path, rel: &str) -> String {
    dir.join(rel).to_string_lossy().into_owned()
}

/// A moat.toml in `dir`: the TypeScript reference server as `ev` (unsandboxed: the
/// sandbox is not what these tests are about), then `extra`.
fn write_config(dir: &Path, peers: &Path, extra: &str) -> PathBuf {
    let config = format!(
        "state_dir = {state:?}\n\n[servers.ev]\ncommand = \"node\"\nargs = [{js:?}, \"stdio\"]\nsandbox = false\n\n{extra}\n",
        state = dir.join("state").to_string_lossy(),
        js = path(peers, EVERYTHING_JS),
    );
    let file = dir.join("moat.toml");
    std::fs::write(&file, config).expect("write moat.toml");
    file
}

/// The Python SDK client, with `args`, in front of `moat gateway --config CONFIG`.
fn py_client(peers: &Path, args: &[&str], config: &Path) -> Run {
    let mut argv: Vec<String> = vec![path(peers, VENV_PYTHON), path(peers, "py_client.py")];
    argv.extend(args.iter().map(|s| s.to_string()));
    argv.extend([
        "--".to_owned(),
        moat_bin().to_owned(),
        "gateway".to_owned(),
        "--config".to_owned(),
        config.to_string_lossy().into_owned(),
    ]);
    run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail)
}

/// The TypeScript SDK client (`v1`, the handshake era; `v2`, 2026-07-28), with `args`, in
/// front of `moat gateway --config CONFIG`.
fn ts_client(peers: &Path, sdk: &str, args: &[&str], config: &Path) -> Run {
    let mut argv: Vec<String> = vec![
        "node".to_owned(),
        path(peers, "ts_client.mjs"),
        "--sdk".to_owned(),
        sdk.to_owned(),
    ];
    argv.extend(args.iter().map(|s| s.to_string()));
    argv.extend([
        "--".to_owned(),
        moat_bin().to_owned(),
        "gateway".to_owned(),
        "--config".to_owned(),
        config.to_string_lossy().into_owned(),
    ]);
    run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail)
}

fn call_text(out: &Value, index: usize) -> String {
    out["calls"][index]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn audit(config_dir: &Path) -> Vec<Value> {
    let argv: Vec<String> = vec![
        moat_bin().into(),
        "audit".into(),
        "--json".into(),
        "--config".into(),
        config_dir.join("moat.toml").to_string_lossy().into_owned(),
    ];
    let out = run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail).json(0);
    out.as_array().cloned().unwrap_or_default()
}

#[test]
fn sampling_reaches_the_client_of_the_call_in_every_era() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), &peers, "[policy]\ndefault = \"allow\"\n");
    let handles: Vec<_> = ["2024-11-05", "2025-11-25", "2026-07-28"]
        .into_iter()
        .map(|rev| {
            let peers = peers.clone();
            let config = config.clone();
            thread::spawn(move || {
                let out = py_client(
                    &peers,
                    &[
                        "--protocol",
                        rev,
                        "--sample",
                        &format!("sampled for {rev}"),
                        "--call",
                        "ev__trigger-sampling-request",
                        r#"{"prompt": "say hi", "maxTokens": 20}"#,
                    ],
                    &config,
                );
                (rev, out)
            })
        })
        .collect();
    for handle in handles {
        let (rev, run) = handle.join().expect("client thread");
        let out = run.json(0);
        assert_eq!(out["protocolVersion"], rev, "{}", run.describe());
        let text = call_text(&out, 0);
        assert!(
            text.contains(&format!("sampled for {rev}")),
            "{rev}: the server did not get the client's completion: {text}\n{}",
            run.describe()
        );
        let samplings = out["samplings"].as_array().expect("samplings");
        assert_eq!(samplings.len(), 1, "{rev}: {samplings:?}");
        assert!(
            samplings[0].to_string().contains("say hi"),
            "{rev}: the client did not see the server's prompt: {samplings:?}"
        );
    }
    let records = audit(dir.path());
    let sampling: Vec<&Value> = records.iter().filter(|r| r["kind"] == "sampling").collect();
    assert_eq!(
        sampling.len(),
        3,
        "one sampling record per call: {records:?}"
    );
    assert!(
        sampling
            .iter()
            .all(|r| r["server"] == "ev" && r["outcome"] == "ok")
    );
}

#[test]
fn the_typescript_sdk_client_answers_sampling_and_elicitation_through_the_gateway() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    // The reference server's tools are open-world (untrusted content): after one, the next
    // would need consent (containment). Not what this test is about.
    let config = write_config(
        dir.path(),
        &peers,
        "[policy]\ndefault = \"allow\"\n\n[[policy.labels]]\nserver = \"ev\"\nuntrusted = false\n",
    );
    // v1 speaks the handshake era, v2 2026-07-28.
    for (sdk, rev) in [("v1", "2025-11-25"), ("v2", "2026-07-28")] {
        let run = ts_client(
            &peers,
            sdk,
            &[
                "--sample",
                "ts sampled",
                "--elicit-accept",
                r#"{"name": "ts user"}"#,
                "--call",
                "ev__trigger-sampling-request",
                r#"{"prompt": "say hi"}"#,
                "--call",
                "ev__trigger-elicitation-request",
                "{}",
            ],
            &config,
        );
        let out = run.json(0);
        assert_eq!(out["protocolVersion"], rev, "{}", run.describe());
        assert!(
            call_text(&out, 0).contains("ts sampled"),
            "{sdk}: {}",
            run.describe()
        );
        let elicited = out["calls"][1]["result"].to_string();
        assert!(elicited.contains("ts user"), "{sdk}: {elicited}");
        assert_eq!(out["samplings"].as_array().map(Vec::len), Some(1));
        assert_eq!(out["elicitations"].as_array().map(Vec::len), Some(1));
    }
}

/// A server the policy denies sampling is not offered it; one that asks anyway gets an
/// error, the client is never asked, and the refusal is in the audit trail.
#[test]
fn sampling_a_server_asks_for_against_the_policy_is_refused_and_audited() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let extra = format!(
        "[servers.py]\ncommand = {py:?}\nargs = [{srv:?}]\nsandbox = false\nprotocol = \"2025-11-25\"\n\n\
         [policy]\ndefault = \"allow\"\n\n[[policy.requests]]\nserver = \"py\"\nsampling = \"deny\"\n",
        py = path(&peers, VENV_PYTHON),
        srv = path(&peers, "py_sampling_server.py"),
    );
    let config = write_config(dir.path(), &peers, &extra);
    let run = py_client(
        &peers,
        &[
            "--sample",
            "never sent",
            "--call",
            "py__ask_llm",
            r#"{"prompt": "hi"}"#,
        ],
        &config,
    );
    let out = run.json(0);
    let text = call_text(&out, 0);
    assert!(
        text.starts_with("refused:") && text.contains("policy"),
        "the server should hear that the policy refused: {text}\n{}",
        run.describe()
    );
    assert_eq!(out["samplings"].as_array().map(Vec::len), Some(0));
    let records = audit(dir.path());
    let denied: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "sampling" && r["decision"] == "deny")
        .collect();
    assert_eq!(denied.len(), 1, "{records:?}");
    assert_eq!(denied[0]["server"], "py");
    assert_eq!(denied[0]["outcome"], "refused");
}

#[test]
fn elicitation_reaches_the_client_of_the_call() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), &peers, "[policy]\ndefault = \"allow\"\n");
    for rev in ["2025-11-25", "2026-07-28"] {
        let run = py_client(
            &peers,
            &[
                "--protocol",
                rev,
                "--elicit-decline",
                "--call",
                "ev__trigger-elicitation-request",
                "{}",
            ],
            &config,
        );
        let out = run.json(0);
        let asked = out["elicitations"].as_array().expect("elicitations");
        assert_eq!(asked.len(), 1, "{rev}: {}", run.describe());
        let text = call_text(&out, 0);
        assert!(
            text.to_lowercase().contains("decline"),
            "{rev}: the server did not get the client's answer: {text}"
        );
    }
}

#[test]
fn sampling_the_policy_puts_to_a_person_is_refused_without_one_and_audited() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(
        dir.path(),
        &peers,
        "[policy]\ndefault = \"allow\"\n\n[[policy.requests]]\nserver = \"ev\"\nsampling = \"ask\"\n\n[consent]\nmode = \"deny\"\n",
    );
    let run = py_client(
        &peers,
        &[
            "--sample",
            "never sent",
            "--call",
            "ev__trigger-sampling-request",
            r#"{"prompt": "say hi"}"#,
        ],
        &config,
    );
    let out = run.json(0);
    assert_eq!(
        out["samplings"].as_array().map(Vec::len),
        Some(0),
        "the client must not be asked: {}",
        run.describe()
    );
    let result = &out["calls"][0]["result"];
    let error = out["calls"][0]["error"].to_string() + &result.to_string();
    assert!(
        error.contains("consent"),
        "the server should see why: {error}"
    );
    let records = audit(dir.path());
    let refused: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "sampling" && r["outcome"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1, "{records:?}");
    assert_eq!(refused[0]["decision"], "ask");
}

#[test]
fn a_server_denied_sampling_is_not_offered_it() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(
        dir.path(),
        &peers,
        "[policy]\ndefault = \"allow\"\n\n[[policy.requests]]\nsampling = \"deny\"\n",
    );
    let out = py_client(&peers, &["--sample", "x"], &config).json(0);
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // The reference server offers its sampling tool only to a client that samples.
    assert!(
        !tools.contains(&"ev__trigger-sampling-request"),
        "{tools:?}"
    );
    assert!(tools.contains(&"ev__echo"), "{tools:?}");
}

/// Three servers, listed five times from five gateway starts: byte for byte the same, in
/// configuration order.
#[test]
fn the_catalog_is_the_same_after_every_start() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let tools = |names: &[&str]| {
        let list: Vec<Value> = names
            .iter()
            .map(|n| json!({ "name": n, "description": format!("the {n} tool") }))
            .collect();
        Value::Array(list).to_string()
    };
    let extra = format!(
        "[servers.zeta]\ncommand = {py:?}\nargs = [{srv:?}]\nenv = {{ MOAT_TEST_TOOLS = {z:?} }}\nsandbox = false\n\n\
         [servers.alpha]\ncommand = {moat:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\nprefix = \"\"\n\n\
         [policy]\ndefault = \"allow\"\n\n[tool_search]\nmode = \"off\"\n",
        py = path(&peers, VENV_PYTHON),
        srv = path(&peers, "py_mutable_server.py"),
        z = tools(&["z_two", "z_one"]),
        moat = moat_bin(),
    );
    let config = write_config(dir.path(), &peers, &extra);
    let mut seen: Option<Value> = None;
    for start in 0..5 {
        let run = py_client(&peers, &["--protocol", "2025-11-25"], &config);
        let out = run.json(0);
        let details = out["toolDetails"].clone();
        let names: Vec<&str> = details
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        // Configuration order: ev's tools, then zeta's in its own order, then alpha's
        // under their own names.
        let first_zeta = names.iter().position(|n| n.starts_with("zeta__"));
        let last_ev = names.iter().rposition(|n| n.starts_with("ev__"));
        assert!(last_ev < first_zeta, "{names:?}");
        assert_eq!(
            names[first_zeta.unwrap_or(0)..first_zeta.unwrap_or(0) + 2],
            ["zeta__z_two", "zeta__z_one"]
        );
        assert!(names.contains(&"greet"), "prefix = \"\": {names:?}");
        match &seen {
            None => seen = Some(details),
            Some(first) => assert_eq!(first, &details, "start {start} listed another catalog"),
        }
    }
}

/// A server that takes 6 s to start: clients that connect at once, in every revision,
/// get its tool listed and their call answered on the first attempt.
#[test]
fn a_client_that_connects_while_a_server_starts_waits_for_it() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let extra = format!(
        "[servers.slow]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep 6; exec {moat} serve everything\"]\nsandbox = false\n\n[policy]\ndefault = \"allow\"\n\n[tool_search]\nmode = \"off\"\n",
        moat = moat_bin(),
    );
    let config = write_config(dir.path(), &peers, &extra);
    let config_arg = config.to_string_lossy().into_owned();
    let mut handles = Vec::new();
    for rev in [
        "auto",
        "2024-11-05",
        "2025-03-26",
        "2025-06-18",
        "2025-11-25",
        "2026-07-28",
    ] {
        let config_arg = config_arg.clone();
        handles.push(thread::spawn(move || {
            let argv: Vec<String> = [
                moat_bin(),
                "call",
                "slow__greet",
                "--args",
                r#"{"name": "moat"}"#,
                "--json",
                "--protocol",
                rev,
                "--",
                moat_bin(),
                "gateway",
                "--config",
                &config_arg,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            (
                rev.to_owned(),
                run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail),
            )
        }));
    }
    let py = {
        let peers = peers.clone();
        let config = config.clone();
        thread::spawn(move || {
            py_client(
                &peers,
                &["--call", "slow__greet", r#"{"name": "py"}"#],
                &config,
            )
        })
    };
    for handle in handles {
        let (rev, run) = handle.join().expect("client thread");
        assert_eq!(run.code, Some(0), "{rev}: {}", run.describe());
        assert!(run.stdout.contains("moat"), "{rev}: {}", run.describe());
    }
    let run = py.join().expect("python client");
    let out = run.json(0);
    assert!(
        out["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|n| n == "slow__greet")),
        "{}",
        run.describe()
    );
    assert!(call_text(&out, 0).contains("py"), "{}", run.describe());
}
