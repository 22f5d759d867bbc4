//! Black-box test of `moat gateway`'s health checks: a server that completes the
//! handshake, answers a call and then stops answering without exiting is restarted after
//! two failed checks in a row (`[gateway] health_interval`), and a call after the restart
//! is answered.
//!
//! The hung server is `interop/py_hang_server.py` (the Python SDK's `MCPServer`; each start
//! appends a line to `$MOAT_TEST_STARTS`, and the first start stops reading stdin after
//! its first `tools/call`). The gateway serves HTTP, so it outlives each client: the
//! official Python SDK client (`interop/py_client.py`) makes one call, the test waits for
//! the second start with no call in flight (a call in flight skips the health check), then
//! a second client calls again.
//!
//! The scripts are taken from this checkout's `interop/`; the Python SDK from the
//! installed peers (`interop/.venv`, or `$MOAT_INTEROP_DIR/.venv`), installed by `.ci/run`.
//! Missing peers skip the test, except under CI (`CI` set), where they fail it.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

mod support;
use support::{HttpGateway, Leftovers, Ready, Run, kill_pid, run, script};

/// Deadline of one client run.
const TIMEOUT: Duration = Duration::from_secs(60);
/// How long a client's pipes may stay open after it exited.
const PIPE_GRACE: Duration = Duration::from_secs(10);
/// How long the HTTP gateway has to print its address (it starts every server first).
const GATEWAY_START: Duration = Duration::from_secs(60);
/// How long after the hang the second start may take: about 0.5 s until the server
/// hangs, up to 1 s to the next check, 2 x 2 s of unanswered checks (`call_timeout`
/// bounds each), the hung server's end (stdin closed, then SIGTERM: about 2 s), 250 ms of
/// backoff and the Python SDK's start-up — about 8 s here — with room for a loaded machine.
const RESTART_WITHIN: Duration = Duration::from_secs(20);
const VENV_PYTHON: &str = ".venv/bin/python";

fn moat_bin() -> &'static str {
    env!("CARGO_BIN_EXE_moat")
}

/// The installed peers' directory (for the venv), or `None` when the test is skipped.
fn peers() -> Option<PathBuf> {
    support::interop_dir(&[VENV_PYTHON])
}

/// The lines of the starts file (one per start of the server; none before the first).
fn starts(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The pid a line of the starts file names (`pid PID`).
fn start_pid(line: &str) -> Option<i32> {
    line.strip_prefix("pid ")?.trim().parse().ok()
}

/// Whether `pid` is a running (not yet reaped or zombie) `py_hang_server.py`.
fn is_hang_server(pid: i32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false);
    !zombie && String::from_utf8_lossy(&cmdline).contains("py_hang_server.py")
}

/// `moat gateway --config X --http 127.0.0.1:0` (see [`HttpGateway`]). Dropping it ends
/// it and then every server start still alive, so a hung server never outlives the test.
struct Gateway {
    http: Option<HttpGateway>,
    starts: PathBuf,
}

impl Gateway {
    fn start(config: &Path, starts: &Path) -> Gateway {
        let http = HttpGateway::start(moat_bin(), config, &[], Ready::Serving, GATEWAY_START);
        Gateway {
            http: Some(http),
            starts: starts.to_path_buf(),
        }
    }

    fn url(&self) -> &str {
        self.http.as_ref().map_or("", |h| h.url.as_str())
    }

    fn log(&self) -> String {
        self.http.as_ref().map(HttpGateway::log).unwrap_or_default()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        drop(self.http.take());
        // Servers run in process groups of their own: end any start still alive.
        for pid in starts(&self.starts).iter().filter_map(|l| start_pid(l)) {
            if is_hang_server(pid) {
                kill_pid(pid as u32, libc::SIGKILL);
            }
        }
    }
}

/// The Python SDK client, with `args`, against the gateway at `url`.
fn py_client(peers: &Path, url: &str, args: &[&str]) -> Run {
    let mut argv = vec![
        peers.join(VENV_PYTHON).to_string_lossy().into_owned(),
        script("py_client.py"),
        "--timeout".to_owned(),
        "30".to_owned(),
    ];
    argv.extend(args.iter().map(|s| (*s).to_owned()));
    argv.extend(["--url".to_owned(), url.to_owned()]);
    run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail)
}

/// The text of a client's only call, which must have been answered without an error.
fn answered(run: &Run, gateway: &Gateway) -> String {
    let out: Value = run.json(0);
    let call = &out["calls"][0];
    let text = call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        call["result"]["isError"] != true && !text.is_empty(),
        "the call was not answered: {call}\n{}\n--- gateway stderr ---\n{}",
        run.describe(),
        gateway.log()
    );
    text
}

#[test]
fn a_server_that_stops_answering_is_restarted() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::Builder::new()
        .prefix("moat-health-")
        .tempdir()
        .expect("temp dir");
    let dir_path = std::fs::canonicalize(dir.path()).expect("canonical temp dir");
    let starts_file = dir_path.join("starts");
    // `call_timeout` bounds each health check too (at most 10 s otherwise).
    let config = format!(
        "state_dir = {state:?}\n\n\
         [gateway]\nhealth_interval = \"1s\"\n\n\
         [servers.hung]\ncommand = {py:?}\nargs = [{srv:?}]\n\
         env = {{ MOAT_TEST_STARTS = {starts:?}, MOAT_TEST_HANG_STARTS = \"1\" }}\n\
         sandbox = false\ncall_timeout = \"2s\"\n\n\
         [policy]\ndefault = \"allow\"\n\n[tool_search]\nmode = \"off\"\n",
        state = dir_path.join("state").to_string_lossy(),
        py = peers.join(VENV_PYTHON).to_string_lossy(),
        srv = script("py_hang_server.py"),
        starts = starts_file.to_string_lossy(),
    );
    let config_file = dir_path.join("moat.toml");
    std::fs::write(&config_file, config).expect("write moat.toml");

    let gateway = Gateway::start(&config_file, &starts_file);

    // Answered (once the server is up), and then the server stops reading.
    let run = py_client(
        &peers,
        gateway.url(),
        &["--call", "hung__echo", r#"{"text": "before"}"#],
    );
    assert_eq!(answered(&run, &gateway), "start 1: before");
    let hung_at = Instant::now();
    let first = starts(&starts_file);
    assert_eq!(first.len(), 1, "{first:?}\n{}", gateway.log());

    // No call in flight now: the health checks go unanswered and the server is restarted.
    let restarted = loop {
        let lines = starts(&starts_file);
        if lines.len() >= 2 {
            break hung_at.elapsed();
        }
        assert!(
            hung_at.elapsed() < RESTART_WITHIN,
            "the hung server was not restarted within {RESTART_WITHIN:?} (starts: {lines:?})\n\
             --- gateway stderr ---\n{}",
            gateway.log()
        );
        thread::sleep(Duration::from_millis(50));
    };
    eprintln!("restarted {restarted:?} after the server hung");

    // A call now is answered by the new start (waiting for it if it is still starting).
    let run = py_client(
        &peers,
        gateway.url(),
        &["--call", "hung__echo", r#"{"text": "after"}"#],
    );
    let text = answered(&run, &gateway);
    let start: usize = text
        .strip_prefix("start ")
        .and_then(|rest| rest.split_once(": after"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected answer {text:?}"));
    assert!(start >= 2, "answered by the hung start: {text:?}");

    let log = gateway.log();
    assert!(
        log.contains("health check failed") && log.contains("stopped answering"),
        "the gateway should say why it restarted the server:\n{log}"
    );
    // The hung start was ended (and reaped), not left behind.
    let hung_pid = start_pid(&first[0]).expect("a pid in the starts file");
    let deadline = Instant::now() + Duration::from_secs(5);
    while is_hang_server(hung_pid) {
        assert!(
            Instant::now() < deadline,
            "the hung server (pid {hung_pid}) still runs after its restart\n{log}"
        );
        thread::sleep(Duration::from_millis(50));
    }
}
