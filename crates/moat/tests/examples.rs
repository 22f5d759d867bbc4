//! The SDK's examples (`crates/moat/examples/`), run as a user would: each server example
//! is driven by the official Python SDK's client (`interop/py_client.py`), and the client
//! example talks to the calculator. `cargo test` builds the examples before it runs tests;
//! a lone `cargo test --test examples` needs `cargo build -p moat --examples` first.

use std::path::PathBuf;
use std::time::Duration;

use moat_test_support::interop::{Peers, peers};
use moat_test_support::run::{Leftovers, Run, run};
use serde_json::Value;

/// The built example `name` (next to this test binary's directory).
fn example(name: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/examples-HASH → target/<profile>/examples/NAME
    let dir: PathBuf = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("a target directory")
        .join("examples");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "the example {name} is not built at {}: run `cargo build -p moat --examples` first",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

fn python_peers() -> Option<Peers> {
    peers(&[".venv/bin/python", "py_client.py"])
}

/// Run the Python SDK's client with `args` against the example `name`.
fn py_client(peers: &Peers, args: &[&str], name: &str) -> Value {
    let mut argv = peers.py_client();
    argv.extend(args.iter().map(|a| a.to_string()));
    argv.push("--".into());
    argv.push(example(name));
    let out = run(
        &argv,
        Duration::from_secs(60),
        Duration::from_secs(5),
        Leftovers::Fail,
    );
    out.json(0)
}

fn first_text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_calculator_serves_the_python_client_in_both_eras() {
    let Some(peers) = python_peers() else { return };
    for protocol in ["2026-07-28", "2025-11-25"] {
        let out = py_client(
            &peers,
            &[
                "--protocol",
                protocol,
                "--call",
                "add",
                r#"{"a": 1.5, "b": 2}"#,
                "--call",
                "divide",
                r#"{"a": 7, "b": 2}"#,
                "--call",
                "divide",
                r#"{"a": 7, "b": 0}"#,
            ],
            "calculator",
        );
        assert_eq!(out["protocolVersion"], protocol, "{out}");
        let calls = out["calls"].as_array().expect("calls");
        assert_eq!(first_text(&calls[0]["result"]), "3.5", "{out}");
        assert_eq!(
            calls[1]["result"]["structuredContent"],
            serde_json::json!({"quotient": 3, "remainder": 1}),
            "{out}"
        );
        assert_eq!(calls[2]["result"]["isError"], true, "{out}");
        assert!(
            first_text(&calls[2]["result"]).contains("cannot divide by zero"),
            "{out}"
        );
        let divide = out["toolDetails"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == "divide"))
            .expect("divide is listed");
        assert_eq!(
            divide["outputSchema"]["required"],
            serde_json::json!(["quotient", "remainder"]),
            "{out}"
        );
    }
}

#[test]
fn the_resources_example_serves_fixed_templated_and_missing_resources() {
    let Some(peers) = python_peers() else { return };
    let out = py_client(
        &peers,
        &["--read", "config://app", "--read", "note://hello"],
        "resources",
    );
    let reads = out["reads"].as_array().expect("reads");
    assert_eq!(
        reads[0]["result"]["contents"][0]["text"], "debug = false\n",
        "{out}"
    );
    assert!(
        reads[1]["result"]["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("note called hello")),
        "{out}"
    );
    let templates = out["resourceTemplates"].to_string();
    assert!(templates.contains("note://{name}"), "{out}");

    // A note that does not exist is a JSON-RPC error, not an empty read.
    let mut argv = peers.py_client();
    argv.extend(["--read".into(), "note://nope".into(), "--".into()]);
    argv.push(example("resources"));
    let out: Run = run(
        &argv,
        Duration::from_secs(60),
        Duration::from_secs(5),
        Leftovers::Fail,
    );
    assert_eq!(out.code, Some(1), "{}", out.describe());
    assert!(out.stderr.contains("no note called"), "{}", out.describe());
}

#[test]
fn the_ask_example_elicits_samples_and_lists_roots_in_both_eras() {
    let Some(peers) = python_peers() else { return };
    for protocol in ["2026-07-28", "2025-06-18"] {
        let out = py_client(
            &peers,
            &[
                "--protocol",
                protocol,
                "--elicit-decline",
                "--sample",
                "A short summary.",
                "--root",
                "file:///srv/project",
                "--call",
                "deploy",
                r#"{"service": "web"}"#,
                "--call",
                "summarise",
                r#"{"text": "A long text."}"#,
                "--call",
                "where",
                "{}",
            ],
            "ask",
        );
        let calls = out["calls"].as_array().expect("calls");
        assert_eq!(
            first_text(&calls[0]["result"]),
            "web not deployed: the user said no",
            "{protocol}: {out}"
        );
        assert_eq!(
            out["elicitations"].as_array().map(Vec::len),
            Some(1),
            "{out}"
        );
        assert_eq!(
            first_text(&calls[1]["result"]),
            "A short summary.",
            "{protocol}: {out}"
        );
        assert!(
            out["samplings"].to_string().contains("A long text."),
            "{protocol}: {out}"
        );
        assert_eq!(
            first_text(&calls[2]["result"]),
            "file:///srv/project",
            "{protocol}: {out}"
        );
    }
}

#[test]
fn the_http_example_serves_the_python_client_over_streamable_http() {
    let Some(peers) = python_peers() else { return };
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.local_addr().expect("its address").port()
    };
    let addr = format!("127.0.0.1:{port}");
    let mut server = std::process::Command::new(example("http"))
        .arg(&addr)
        .env_remove("MOAT_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the http example");
    // Wait until it listens.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the http example did not listen on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut argv = peers.py_client();
    argv.extend([
        "--call".into(),
        "greet".into(),
        r#"{"name": "Ada"}"#.into(),
        "--url".into(),
        format!("http://{addr}/mcp"),
    ]);
    let out = run(
        &argv,
        Duration::from_secs(60),
        Duration::from_secs(5),
        Leftovers::Fail,
    );
    let _ = server.kill();
    let _ = server.wait();
    let out = out.json(0);
    assert_eq!(out["transport"], "streamable", "{out}");
    assert_eq!(
        first_text(&out["calls"][0]["result"]),
        "Hello, Ada!",
        "{out}"
    );
}

#[test]
fn the_client_example_lists_and_calls_the_calculator() {
    let argv = vec![
        example("client"),
        "--call".into(),
        "multiply".into(),
        r#"{"a": 6, "b": 7}"#.into(),
        "--".into(),
        example("calculator"),
    ];
    let out = run(
        &argv,
        Duration::from_secs(60),
        Duration::from_secs(5),
        Leftovers::Fail,
    );
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert!(
        out.stdout.starts_with("calculator 1.0 (revision "),
        "{}",
        out.describe()
    );
    assert!(
        out.stdout.contains("  divide: Divide two integers"),
        "{}",
        out.describe()
    );
    assert!(
        out.stdout.contains("\"text\": \"42\""),
        "{}",
        out.describe()
    );

    // A tool error is the example's exit code 2, with the error said.
    let argv = vec![
        example("client"),
        "--call".into(),
        "divide".into(),
        r#"{"a": 1, "b": 0}"#.into(),
        "--".into(),
        example("calculator"),
    ];
    let out = run(
        &argv,
        Duration::from_secs(60),
        Duration::from_secs(5),
        Leftovers::Fail,
    );
    assert_eq!(out.code, Some(2), "{}", out.describe());
    assert!(
        out.stderr.contains("divide returned an error"),
        "{}",
        out.describe()
    );
}
