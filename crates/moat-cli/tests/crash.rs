//! A server that dies does not take its client down with it: killing a server in the middle
//! of a call fails that call with a clear error, later calls fail too, and no zombie process
//! is left behind. A "server" that exits on its own during the handshake makes `connect`
//! fail instead of hanging.
//!
//! The bounds here only tell "handled" from "hung" ([`HUNG`]); how fast each case is
//! handled is measured by `moat-bench crash` (docs/benchmarks.md).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moat::protocol::ErrorObject;
use moat::types::CreateMessageResult;
use moat::{Client, Error, ProtocolVersion, VersionPreference};
use serde_json::json;
use tokio::sync::Notify;

/// Longer than any of these cases takes when it is handled (milliseconds, see
/// `moat-bench crash`): past it, the client hung.
const HUNG: Duration = Duration::from_secs(30);
/// How long a dead server may stay unreaped before it counts as a zombie left behind.
const REAPED_WITHIN: Duration = Duration::from_secs(10);

/// Whether `pid` is gone or at least not a zombie (reaped). Polls for up to `within`.
async fn reaped(pid: u32, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        let state = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return Ok(()), // gone: reaped
            // The state is the field after the parenthesized command name.
            Ok(stat) => stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or("?")
                .to_owned(),
        };
        if state != "Z" && state != "X" && Instant::now() > deadline {
            return Err(format!("process {pid} is still running (state {state})"));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "process {pid} is a zombie (state {state}): nobody reaped it"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn kill_group(pid: u32) {
    let status = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL -{pid}: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_server_mid_call_fails_the_call() {
    // The call stays pending for as long as we like: test_sampling waits for our answer
    // to its sampling request, and we never give one.
    let asked = Arc::new(Notify::new());
    let signal = asked.clone();
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .on_sampling(move |_params| {
            signal.notify_one();
            std::future::pending::<Result<CreateMessageResult, ErrorObject>>()
        })
        .connect_command([env!("CARGO_BIN_EXE_moat"), "serve", "everything"])
        .await
        .expect("connect to moat serve everything");
    let pid = client
        .child()
        .and_then(|c| c.id())
        .expect("the server's pid");
    let client = Arc::new(client);

    let caller = client.clone();
    let call = tokio::spawn(async move {
        caller
            .call_tool("test_sampling", json!({"prompt": "never answered"}))
            .await
    });
    tokio::time::timeout(Duration::from_secs(10), asked.notified())
        .await
        .expect("the server should ask us to sample while the call is pending");
    assert!(!call.is_finished(), "the call should still be pending");

    kill_group(pid);
    let killed = Instant::now();
    let outcome = tokio::time::timeout(HUNG, call)
        .await
        .expect("the pending call must fail when the server dies, not hang")
        .expect("the call task panicked");
    let took = killed.elapsed();
    match outcome {
        Err(Error::Closed(why)) => {
            let text = why.to_lowercase();
            assert!(
                text.contains("exited") || text.contains("signal") || text.contains("killed"),
                "the error should say the server process ended, got: {why}"
            );
            eprintln!("pending call failed after {took:?}: connection closed: {why}");
        }
        other => panic!("expected Err(Error::Closed(..)), got {other:?}"),
    }

    // Later calls fail too.
    let later = tokio::time::timeout(HUNG, client.ping())
        .await
        .expect("a call after the crash must fail, not hang");
    assert!(
        matches!(later, Err(Error::Closed(_))),
        "a call after the crash: {later:?}"
    );
    let later = tokio::time::timeout(HUNG, client.list_tools(None))
        .await
        .expect("a call after the crash must fail, not hang");
    assert!(
        matches!(later, Err(Error::Closed(_))),
        "a call after the crash: {later:?}"
    );

    // Reaped, not a zombie.
    if let Err(e) = reaped(pid, REAPED_WITHIN).await {
        panic!("{e}");
    }
    let status = client.child().and_then(|c| c.exit_status());
    assert!(
        status.is_some_and(|s| !s.success()),
        "the exit status should be known and a failure: {status:?}"
    );
}

/// A scratch file path unique to this test run.
fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("moat-crash-{}-{name}", std::process::id()))
}

/// A "server" that writes its pid, reads one line, and exits with status 1.
async fn connect_to_quitter(
    preference: VersionPreference,
    pid_file: &std::path::Path,
) -> (Result<Client, Error>, Duration) {
    let script = format!("echo $$ >> '{}'; read line; exit 1", pid_file.display());
    let start = Instant::now();
    let result = tokio::time::timeout(
        HUNG,
        Client::builder()
            .protocol(preference)
            .connect_command(["sh", "-c", &script]),
    )
    .await
    .expect("connect must fail when the server exits, not hang");
    (result, start.elapsed())
}

async fn check_quitter(preference: VersionPreference, name: &str) {
    let pid_file = scratch(name);
    let _ = std::fs::remove_file(&pid_file);
    let (result, took) = connect_to_quitter(preference, &pid_file).await;
    match result {
        Err(Error::Closed(why)) => {
            assert!(
                why.contains("exit status: 1") || why.contains("exited"),
                "{name}: the error should say the server exited, got: {why}"
            );
            eprintln!("{name}: connect failed after {took:?}: connection closed: {why}");
        }
        Err(other) => panic!("{name}: expected Error::Closed, got {other}"),
        Ok(client) => panic!("{name}: connected to a server that exited: {client:?}"),
    }
    let pids = std::fs::read_to_string(&pid_file).unwrap_or_default();
    let _ = std::fs::remove_file(&pid_file);
    assert!(!pids.trim().is_empty(), "{name}: the server never started");
    for pid in pids.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
        if let Err(e) = reaped(pid, REAPED_WITHIN).await {
            panic!("{name}: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_during_the_handshake_fails_connect() {
    check_quitter(
        VersionPreference::Exact(ProtocolVersion::V2025_11_25),
        "exact",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_during_discovery_fails_auto_connect() {
    // Auto: `server/discover` first; the server exits, is relaunched for `initialize`, and
    // exits again. Two launches, each ending at once.
    check_quitter(VersionPreference::Auto, "auto").await;
}
