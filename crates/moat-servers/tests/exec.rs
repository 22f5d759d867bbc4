//! The exec server, driven in-process by a real moat client: commands run and report, a
//! command cannot escape its sandbox (files outside its paths, writes outside, the network),
//! floods are cut, timeouts and cancellation kill the run, shells are refused.
//!
//! The sandbox helper is this workspace's `moat-sandbox-init`, built on first use (a no-op
//! when it is fresh). Where user namespaces are refused, the sandbox falls back to Landlock
//! and seccomp alone; the attacks must fail either way. A test that needs a kernel feature
//! this machine lacks prints why and returns, as in moat-sandbox's own tests.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use moat::transport::{Connection, Limits};
use moat::types::CallToolResult;
use moat::{Client, RequestOptions};
use moat_sandbox::{Profile, Sandbox};
use moat_servers::exec::{ExecOptions, TOOL, server};
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::sync::mpsc;

/// The sandbox helper binary, built once per test process.
fn helper() -> &'static Path {
    static HELPER: OnceLock<PathBuf> = OnceLock::new();
    HELPER.get_or_init(|| {
        // This test is <target>/<profile>/deps/exec-<hash>; binaries sit in <target>/<profile>.
        let exe = std::env::current_exe().expect("test executable path");
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target profile directory");
        let target = dir.parent().expect("target directory");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "moat-sandbox",
            "--bin",
            "moat-sandbox-init",
        ])
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml"))
        .env("CARGO_TARGET_DIR", target);
        match dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => {}
            Some(profile) => {
                cmd.args(["--profile", profile]);
            }
        }
        let status = cmd.status().expect("cargo runs");
        assert!(status.success(), "building moat-sandbox-init failed");
        let path = dir.join("moat-sandbox-init");
        assert!(path.exists(), "{} missing after the build", path.display());
        path
    })
}

/// A scratch tree: `ro/` (read-only in the profile), `rw/` (read-write, with `sub/`),
/// `home/` (outside the profile, holding a secret).
struct Scratch {
    root: tempfile::TempDir,
}

const SECRET: &str = "TOP-SECRET-7f3a";

impl Scratch {
    fn new() -> Scratch {
        let root = tempfile::tempdir().expect("temp dir");
        for d in ["ro", "rw/sub", "home"] {
            std::fs::create_dir_all(root.path().join(d)).expect("mkdir");
        }
        std::fs::write(root.path().join("ro/data"), "public data\n").expect("write");
        std::fs::write(root.path().join("home/secret"), SECRET).expect("write");
        // Run by root, commands run as uid 65534: without the namespaces (no id-mapped write
        // path) they reach and write only what that uid may, so the tree is open to it; the
        // sandbox alone must keep them out of `home/` and `ro/`.
        use std::os::unix::fs::PermissionsExt;
        for (d, mode) in [("", 0o755), ("rw", 0o777), ("rw/sub", 0o777)] {
            std::fs::set_permissions(root.path().join(d), std::fs::Permissions::from_mode(mode))
                .expect("chmod");
        }
        Scratch { root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    fn s(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }

    fn options(&self) -> ExecOptions {
        self.options_with(true)
    }

    /// With `namespaces` false, the sandbox as it is where user namespaces are refused:
    /// Landlock and seccomp alone, the host's process tree and network namespace.
    fn options_with(&self, namespaces: bool) -> ExecOptions {
        let mut options = ExecOptions::default();
        options.helper = Some(helper().to_path_buf());
        options.profile = Profile {
            ro: vec![self.path("ro")],
            rw: vec![self.path("rw")],
            namespaces,
            ..Profile::default()
        };
        options
    }
}

async fn connect(options: ExecOptions) -> Client {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    let server_side = Connection::from_lines(BufReader::new(ar), aw, Limits::default());
    let client_side = Connection::from_lines(BufReader::new(br), bw, Limits::default());
    server(options).expect("exec server").start(server_side);
    Client::builder()
        .connect(client_side)
        .await
        .expect("client connects")
}

async fn call(client: &Client, args: Value) -> CallToolResult {
    client.call_tool(TOOL, args).await.expect("tools/call")
}

/// The structured result of a call that ran.
fn ran(result: &CallToolResult) -> &Value {
    assert!(!result.is_error(), "the call failed: {result:?}");
    result
        .structured_content
        .as_ref()
        .expect("structuredContent")
}

fn error_text(result: &CallToolResult) -> String {
    assert!(result.is_error(), "expected an isError result: {result:?}");
    serde_json::to_string(&result.content).unwrap_or_default()
}

/// A kernel feature or tool a test needs is missing: said on stderr (the test then does
/// less, or returns), or, under CI (`CI` set), a failure: CI must run every case.
fn missing(why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("CI is set, so this test must run in full, but {why}");
    }
    eprintln!("SKIPPED: {why}");
}

/// Whether the filesystem is confined here (namespaces or Landlock).
fn paths_confined() -> bool {
    let confined = Sandbox::with_helper(helper()).namespaces_work()
        || moat_sandbox::check().landlock_abi.is_some();
    if !confined {
        missing("neither namespaces nor Landlock on this machine");
    }
    confined
}

/// Processes whose command line is exactly `argv`.
fn processes(argv: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        (cmdline == want).then_some(pid)
    })
    .collect()
}

async fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_command_runs_and_its_result_says_how_it_ended() {
    let scratch = Scratch::new();
    let client = connect(scratch.options()).await;

    let tools = client.list_all_tools().await.expect("tools/list");
    let tool = tools.iter().find(|t| t.name == TOOL).expect("run_command");
    let hints = tool.annotations.as_ref().expect("annotations");
    assert_eq!(hints.read_only_hint, Some(false));
    assert_eq!(hints.destructive_hint, Some(true));
    assert_eq!(
        hints.open_world_hint,
        Some(false),
        "net none: a closed world"
    );
    assert!(tool.title.is_some());
    let output = tool.output_schema.as_ref().expect("outputSchema");
    for field in [
        "exit_code",
        "signal",
        "timed_out",
        "limit_hit",
        "stdout",
        "stderr",
        "truncated",
        "wall_ms",
    ] {
        assert!(
            output["properties"].get(field).is_some(),
            "{field}: {output}"
        );
    }
    assert_eq!(tool.input_schema["properties"]["argv"]["minItems"], 1);

    let result = call(&client, json!({ "argv": ["/bin/echo", "hi"] })).await;
    let r = ran(&result);
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["stdout"], "hi\n");
    assert_eq!(r["signal"], Value::Null);
    assert_eq!(r["timed_out"], false);
    assert_eq!(r["limit_hit"], Value::Null);
    assert_eq!(r["truncated"], false);
    assert!(r["wall_ms"].is_u64());
    assert!(!result.content.is_empty(), "text content too");

    let r = call(&client, json!({ "argv": ["ls", "-la", "/etc"] })).await;
    let r = ran(&r);
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(
        r["stdout"].as_str().is_some_and(|s| s.contains("passwd")),
        "{r}"
    );

    // A failing command is a result, not an error: its status and stderr say why.
    let r = call(&client, json!({ "argv": ["ls", "/no/such/dir"] })).await;
    let r = ran(&r);
    assert_ne!(r["exit_code"], 0);
    assert!(r["stderr"].as_str().is_some_and(|s| !s.is_empty()), "{r}");

    // The working directory: by default the read-write path, or one inside the paths.
    let real = |rel: &str| {
        std::fs::canonicalize(scratch.path(rel))
            .expect("canonical")
            .display()
            .to_string()
    };
    let r = call(&client, json!({ "argv": ["pwd"] })).await;
    assert_eq!(ran(&r)["stdout"], format!("{}\n", real("rw")));
    let r = call(&client, json!({ "argv": ["pwd"], "cwd": "sub" })).await;
    assert_eq!(ran(&r)["stdout"], format!("{}\n", real("rw/sub")));
    let r = call(
        &client,
        json!({ "argv": ["cat", "data"], "cwd": scratch.s("ro") }),
    )
    .await;
    assert_eq!(ran(&r)["stdout"], "public data\n");

    // Refused before running, with what to do instead.
    for bad in [
        json!({ "argv": ["pwd"], "cwd": scratch.s("home") }),
        json!({ "argv": ["pwd"], "cwd": "../home" }),
        json!({ "argv": ["pwd"], "cwd": "/etc" }),
    ] {
        let text = error_text(&call(&client, bad).await);
        assert!(text.contains("not a directory inside"), "{text}");
    }
    let text = error_text(&call(&client, json!({ "argv": [] })).await);
    assert!(text.contains("argv"), "{text}");
    let text =
        error_text(&call(&client, json!({ "argv": ["true"], "timeout_secs": 100000 })).await);
    assert!(text.contains("at most"), "{text}");
    let text = error_text(&call(&client, json!({ "argv": ["true"], "stdin": "x" })).await);
    assert!(
        text.contains("stdin"),
        "unknown arguments are refused: {text}"
    );
    // A program that cannot be started.
    let text = error_text(&call(&client, json!({ "argv": ["/no/such/program"] })).await);
    assert!(text.contains("could not be run"), "{text}");
}

#[tokio::test]
async fn a_command_cannot_read_or_write_outside_its_paths() {
    if !paths_confined() {
        return;
    }
    for namespaces in [true, false] {
        cannot_read_or_write_outside(namespaces).await;
    }
}

async fn cannot_read_or_write_outside(namespaces: bool) {
    if !namespaces && moat_sandbox::check().landlock_abi.is_none() {
        missing("(without namespaces) no Landlock on this machine");
        return;
    }
    let scratch = Scratch::new();
    let client = connect(scratch.options_with(namespaces)).await;

    // Reading a secret outside the profile's paths.
    let r = call(
        &client,
        json!({ "argv": ["cat", scratch.s("home/secret")] }),
    )
    .await;
    let r = ran(&r);
    assert_ne!(r["exit_code"], 0, "{r}");
    assert!(!r["stdout"].as_str().unwrap_or("").contains(SECRET), "{r}");
    // Nor by walking out of a permitted directory.
    let r = call(
        &client,
        json!({ "argv": ["cat", "../home/secret"], "cwd": scratch.s("rw") }),
    )
    .await;
    assert!(!ran(&r)["stdout"].as_str().unwrap_or("").contains(SECRET));

    // Writing outside, and into the read-only path.
    for target in [scratch.s("home/planted"), scratch.s("ro/planted")] {
        let r = call(&client, json!({ "argv": ["touch", target] })).await;
        assert_ne!(ran(&r)["exit_code"], 0, "{target}");
        assert!(!Path::new(&target).exists(), "{target} was written");
    }
    let r = call(
        &client,
        json!({ "argv": ["cp", scratch.s("ro/data"), scratch.s("home/copy")] }),
    )
    .await;
    assert_ne!(ran(&r)["exit_code"], 0);
    assert!(!scratch.path("home/copy").exists());

    // The positive control: the read-write path is writable, so the refusals above are the
    // sandbox's, not a broken command line.
    let r = call(&client, json!({ "argv": ["touch", scratch.s("rw/made")] })).await;
    assert_eq!(ran(&r)["exit_code"], 0, "{:?}", ran(&r));
    assert!(scratch.path("rw/made").exists());
}

#[tokio::test]
async fn a_command_cannot_reach_the_network_with_net_none() {
    if !Path::new("/usr/bin/curl").exists() {
        missing("no /usr/bin/curl");
        return;
    }
    let scratch = Scratch::new();
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    listener.set_nonblocking(true).expect("nonblocking");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    // Without namespaces the command shares the host's loopback: only seccomp and Landlock
    // stand between it and the listener.
    for namespaces in [true, false] {
        let client = connect(scratch.options_with(namespaces)).await;
        let r = call(
            &client,
            json!({ "argv": ["/usr/bin/curl", "-sS", "--max-time", "3", url] }),
        )
        .await;
        let r = ran(&r);
        assert_ne!(r["exit_code"], 0, "namespaces {namespaces}: {r}");
        // Whatever curl says, the listener must not have been reached.
        match listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("namespaces {namespaces}: the command connected out: {other:?}"),
        }
    }
}

#[tokio::test]
async fn an_output_flood_is_cut_and_marked() {
    let scratch = Scratch::new();
    let mut options = scratch.options();
    options.output_cap = 64 * 1024;
    let client = connect(options).await;

    let start = Instant::now();
    let r = call(&client, json!({ "argv": ["yes"] })).await;
    let r = ran(&r);
    assert_eq!(r["truncated"], true, "{}", r["limit_hit"]);
    assert_eq!(r["limit_hit"], "output");
    assert_eq!(r["timed_out"], false);
    assert_eq!(r["exit_code"], Value::Null, "killed, not exited");
    let kept = r["stdout"].as_str().map_or(0, str::len) + r["stderr"].as_str().map_or(0, str::len);
    assert!(kept <= 64 * 1024, "{kept} bytes kept");
    assert!(kept > 0);

    let r = call(
        &client,
        json!({ "argv": ["head", "-c", "50000000", "/dev/zero"] }),
    )
    .await;
    let r = ran(&r);
    assert_eq!(r["truncated"], true);
    assert_eq!(r["limit_hit"], "output");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "the floods were cut at the cap, not run out: {:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn a_timeout_kills_the_command_quickly_and_says_so() {
    let scratch = Scratch::new();
    let client = connect(scratch.options()).await;
    let start = Instant::now();
    let r = call(
        &client,
        json!({ "argv": ["sleep", "30"], "timeout_secs": 1 }),
    )
    .await;
    let r = ran(&r);
    let took = start.elapsed();
    assert_eq!(r["timed_out"], true, "{r}");
    assert_eq!(r["limit_hit"], "timeout");
    assert_eq!(r["exit_code"], Value::Null);
    assert_eq!(r["signal"], 9);
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(r["wall_ms"].as_u64().is_some_and(|ms| ms >= 900), "{r}");
}

#[tokio::test]
async fn cancelling_a_call_kills_its_process_group() {
    // Without namespaces no PID namespace takes the run's processes down with it: the
    // process group must be killed.
    for namespaces in [true, false] {
        cancelling_kills(namespaces).await;
    }
}

async fn cancelling_kills(namespaces: bool) {
    let scratch = Scratch::new();
    let mut options = scratch.options_with(namespaces);
    options.allow_shell = true;
    let client = std::sync::Arc::new(connect(options).await);
    // A marker no other process has: the run's shell and its `sleep` child (the process
    // group, not only the first process, must die).
    let marker = format!(
        "{}.{}{}",
        900 + std::process::id() % 97,
        std::process::id(),
        u8::from(namespaces)
    );
    let script = format!("sleep {marker} & sleep {marker}; wait");
    let (tx, mut progress) = mpsc::unbounded_channel();
    let c = client.clone();
    let call = tokio::spawn(async move {
        c.call_tool_with(
            TOOL,
            json!({ "argv": ["sh", "-c", script], "timeout_secs": 60 }),
            RequestOptions::default().progress(tx),
        )
        .await
    });
    let sleep_argv = ["sleep", marker.as_str()];
    wait_for("the sleeps to start", Duration::from_secs(10), || {
        processes(&sleep_argv).len() == 2
    })
    .await;
    // Progress arrives while it runs, with the output so far.
    let first = tokio::time::timeout(Duration::from_secs(5), progress.recv())
        .await
        .expect("a progress notification within 5 s")
        .expect("progress");
    assert!(
        first
            .message
            .as_deref()
            .is_some_and(|m| m.contains("bytes of output")),
        "{first:?}"
    );
    assert_eq!(first.total, Some(60.0));

    // Dropping the call sends notifications/cancelled.
    call.abort();
    let _ = call.await;
    wait_for("the sleeps to die", Duration::from_secs(5), || {
        processes(&sleep_argv).is_empty()
    })
    .await;

    // The server is still there, and so is its sandbox.
    let r = client
        .call_tool(TOOL, json!({ "argv": ["/bin/echo", "after"] }))
        .await
        .expect("tools/call");
    assert_eq!(ran(&r)["stdout"], "after\n");
}

#[tokio::test]
async fn progress_counts_the_output_as_it_arrives() {
    let scratch = Scratch::new();
    let mut options = scratch.options();
    options.allow_shell = true;
    let client = connect(options).await;
    let (tx, mut progress) = mpsc::unbounded_channel();
    let r = client
        .call_tool_with(
            TOOL,
            json!({ "argv": ["sh", "-c", "head -c 1000 /dev/zero; sleep 1.6"] }),
            RequestOptions::default().progress(tx),
        )
        .await
        .expect("tools/call");
    assert_eq!(ran(&r)["exit_code"], 0);
    let mut seen = Vec::new();
    while let Ok(p) = progress.try_recv() {
        seen.push(p);
    }
    assert!(
        seen.iter().any(|p| p
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("1000 bytes of output so far"))),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_shell_is_refused_unless_allowed() {
    let scratch = Scratch::new();
    let client = connect(scratch.options()).await;
    for argv in [
        json!(["sh", "-c", "echo pwned > /tmp/x"]),
        json!(["/bin/bash", "-c", "id"]),
        json!(["dash", "-ec", "id"]),
        json!(["env", "sh", "-c", "id"]),
        json!(["busybox", "sh", "-c", "id"]),
    ] {
        let text = error_text(&call(&client, json!({ "argv": argv })).await);
        assert!(text.contains("is a shell"), "{argv}: {text}");
    }

    // Allowed by the option: the same kind of argv runs (so the refusal above is the policy).
    let mut options = scratch.options();
    options.allow_shell = true;
    let client = connect(options).await;
    let r = call(&client, json!({ "argv": ["sh", "-c", "echo a | tr a b"] })).await;
    assert_eq!(ran(&r)["stdout"], "b\n");
}

/// The sandbox's `RunControl` on its own: a blocking `spawn_with` returns soon after
/// another thread cancels, with the run killed; a control cancelled beforehand kills the
/// run as it starts; the output is counted as it arrives.
#[test]
fn run_control_stops_a_blocking_run() {
    let sandbox = Sandbox::with_helper(helper());
    let mut profile = Profile::default();
    profile.limits.timeout = Some(Duration::from_secs(30));
    let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    let control = moat_sandbox::RunControl::new().expect("control");
    let theirs = control.clone();
    let start = Instant::now();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        theirs.cancel();
    });
    let outcome = sandbox
        .spawn_with(&profile, &argv(&["sleep", "20"]), &control)
        .expect("runs");
    canceller.join().expect("canceller");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(outcome.termination, moat_sandbox::Termination::Signaled(9));
    assert_eq!(outcome.limit_hit, None, "a cancellation is no limit");

    let start = Instant::now();
    let outcome = sandbox
        .spawn_with(&profile, &argv(&["sleep", "20"]), &control)
        .expect("runs");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(!outcome.success());

    let control = moat_sandbox::RunControl::new().expect("control");
    let outcome = sandbox
        .spawn_with(
            &profile,
            &argv(&["head", "-c", "12345", "/dev/zero"]),
            &control,
        )
        .expect("runs");
    assert!(outcome.success());
    assert_eq!(control.output_bytes(), 12345);
    assert!(!control.is_cancelled());
}
