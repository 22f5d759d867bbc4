//! `moat-bench crash`: how fast a client learns that its server died, end to end against
//! the real `moat` binary. The tests in `crates/moat-cli/tests/crash.rs` and `gateway.rs`
//! check that each case is handled (an error, not a hang); this table says how fast.
//!
//! Rows, each measured once per round on a fresh server:
//!
//! * `mid-call`: moat's client calls everything's `test_sampling` on `moat serve everything`
//!   and never answers the sampling request, so the call stays pending; the server's
//!   process group gets SIGKILL; from the `kill` syscall to the call's `Err(Closed)`;
//! * `later-calls`: then a `ping` and a `tools/list` on the same client, both refused;
//! * `handshake-exit`: `connect` (2025-11-25 exactly) to a "server" (`sh`) that reads one
//!   line and exits 1; from the start of `connect` to its error (the shell's start included);
//! * `discovery-exit`: the same with version negotiation (`server/discover` first, then a
//!   relaunch for `initialize`: two launches);
//! * `gateway-mid-call`: moat's client → `moat gateway` (stdio, `sandbox = false`) →
//!   `moat serve everything`; a 40 s `slow_compute` is sent, and half a second later the
//!   downstream server (the gateway's child) gets SIGKILL; from the syscall to the client's
//!   error result (the gateway's own crash test in `gateway.rs` does the same).
//!
//! ```text
//! cargo run --release -p moat-bench -- crash [--rounds N] [--json]
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use moat::protocol::ErrorObject;
use moat::types::CreateMessageResult;
use moat::{Client, Error, ProtocolVersion, VersionPreference};
use moat_bench::stats::{SpreadRow, report_spread};
use moat_test_support::children;
use rustix::process::{Pid, Signal};
use serde_json::json;
use tokio::sync::Notify;

use crate::EventArgs;
use crate::gateway_table::{Scratch, quoted};

/// What `moat-bench crash --help` says after the options.
pub(crate) const ROWS: &str = "Rows: mid-call, later-calls, handshake-exit, discovery-exit, \
    gateway-mid-call (see docs/benchmarks.md).\n\
    MOAT_BIN=PATH measures that moat binary (default: built beside this one).";

/// Longest any one case may take before the run is declared hung.
const HUNG: Duration = Duration::from_secs(30);
/// How long the gateway row waits after sending its call before the kill.
const CALL_UNDER_WAY: Duration = Duration::from_millis(500);

pub fn main(args: EventArgs) {
    let moat = crate::gateway_table::moat_binary();
    let scratch = Scratch::new("crash");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut rows = vec![
        SpreadRow {
            id: "mid-call",
            note: "SIGKILL to the server's group -> the pending call's error",
            samples: Vec::new(),
        },
        SpreadRow {
            id: "later-calls",
            note: "ping + tools/list after the crash, both refused",
            samples: Vec::new(),
        },
        SpreadRow {
            id: "handshake-exit",
            note: "connect (2025-11-25) to a server that exits -> error",
            samples: Vec::new(),
        },
        SpreadRow {
            id: "discovery-exit",
            note: "connect (negotiated: discover, then initialize) to a server that exits -> error",
            samples: Vec::new(),
        },
        SpreadRow {
            id: "gateway-mid-call",
            note: "SIGKILL to the gateway's server -> the client's error result",
            samples: Vec::new(),
        },
    ];
    let config = gateway_config(&moat, &scratch.0);
    for round in 0..args.rounds {
        eprint!("\rround {}/{}", round + 1, args.rounds);
        rt.block_on(async {
            let (mid, later) = direct_mid_call(&moat).await;
            rows[0].samples.push(mid);
            rows[1].samples.push(later);
            rows[2]
                .samples
                .push(quitter(VersionPreference::Exact(ProtocolVersion::V2025_11_25)).await);
            rows[3].samples.push(quitter(VersionPreference::Auto).await);
            rows[4].samples.push(gateway_mid_call(&moat, &config).await);
        });
    }
    eprintln!();
    report_spread(
        args.json,
        "crash",
        "How fast a client learns that its server died",
        &moat,
        args.rounds,
        &mut rows,
    );
}

/// A client whose sampling handler never answers, and a notice when it is asked.
async fn pending_sampler(argv: &[&str]) -> (Client, Arc<Notify>) {
    let asked = Arc::new(Notify::new());
    let signal = asked.clone();
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .on_sampling(move |_params| {
            signal.notify_one();
            std::future::pending::<Result<CreateMessageResult, ErrorObject>>()
        })
        .connect_command(argv)
        .await
        .unwrap_or_else(|e| panic!("connect to {argv:?}: {e}"));
    (client, asked)
}

/// Starts `tool` (a `test_sampling`) on `client` and waits until the server asks to sample,
/// so that the call is pending on the server's side.
async fn start_pending_call(
    client: &Arc<Client>,
    asked: &Notify,
    tool: &str,
) -> tokio::task::JoinHandle<moat::Result<moat::types::CallToolResult>> {
    let caller = client.clone();
    let tool = tool.to_owned();
    let call = tokio::spawn(async move {
        caller
            .call_tool(&tool, json!({"prompt": "never answered"}))
            .await
    });
    tokio::time::timeout(HUNG, asked.notified())
        .await
        .expect("the server should ask us to sample while the call is pending");
    call
}

/// The `mid-call` and `later-calls` samples.
async fn direct_mid_call(moat: &Path) -> (Duration, Duration) {
    let moat_s = moat.to_str().expect("utf-8 path");
    let (client, asked) = pending_sampler(&[moat_s, "serve", "everything"]).await;
    let pid = client
        .child()
        .and_then(|c| c.id())
        .expect("the server's pid");
    let client = Arc::new(client);
    let call = start_pending_call(&client, &asked, "test_sampling").await;

    let killed = Instant::now();
    kill(pid, true);
    let outcome = tokio::time::timeout(HUNG, call)
        .await
        .expect("the pending call hung after the server died")
        .expect("the call task panicked");
    let mid = killed.elapsed();
    assert!(
        matches!(outcome, Err(Error::Closed(_))),
        "expected Err(Closed), got {outcome:?}"
    );

    let start = Instant::now();
    let ping = client.ping().await;
    let list = client.list_tools(None).await;
    let later = start.elapsed();
    assert!(
        matches!(ping, Err(Error::Closed(_))) && matches!(list, Err(Error::Closed(_))),
        "calls after the crash: {ping:?}, {list:?}"
    );
    (mid, later)
}

/// One `handshake-exit` or `discovery-exit` sample.
async fn quitter(preference: VersionPreference) -> Duration {
    let start = Instant::now();
    let result = tokio::time::timeout(
        HUNG,
        Client::builder()
            .protocol(preference)
            .connect_command(["sh", "-c", "read line; exit 1"]),
    )
    .await
    .expect("connect hung on a server that exited");
    let took = start.elapsed();
    assert!(
        matches!(result, Err(Error::Closed(_))),
        "expected Err(Closed) from a server that exited: {:?}",
        result.map(|_| ())
    );
    took
}

/// One `gateway-mid-call` sample.
async fn gateway_mid_call(moat: &Path, config: &Path) -> Duration {
    let moat_s = moat.to_str().expect("utf-8 path");
    let config_s = config.to_str().expect("utf-8 path");
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .connect_command([moat_s, "gateway", "--config", config_s])
        .await
        .expect("connect to moat gateway");
    let gateway = client
        .child()
        .and_then(|c| c.id())
        .expect("the gateway's pid");
    let client = Arc::new(client);
    let caller = client.clone();
    let call = tokio::spawn(async move {
        caller
            .call_tool(
                "every__slow_compute",
                json!({"seconds": 40, "label": "doomed"}),
            )
            .await
    });
    let server = *children(gateway)
        .first()
        .expect("the gateway runs its server");
    // Nothing tells when the server has the call: it gets this long (a pipe hop and a
    // parse each way take microseconds), as in the gateway's crash test.
    tokio::time::sleep(CALL_UNDER_WAY).await;
    assert!(!call.is_finished(), "the slow call should still be running");

    let killed = Instant::now();
    kill(server, false);
    let outcome = tokio::time::timeout(HUNG, call)
        .await
        .expect("the slow call hung after the gateway's server died")
        .expect("the call task panicked");
    let took = killed.elapsed();
    match outcome {
        Ok(result) => assert_eq!(
            result.is_error,
            Some(true),
            "the call should fail: {result:?}"
        ),
        Err(e) => panic!("the gateway should answer with an error result, not {e}"),
    }
    if let Ok(client) = Arc::try_unwrap(client) {
        client.close().await;
    }
    took
}

/// SIGKILL to `pid`, or to the process group it leads.
fn kill(pid: u32, group: bool) {
    let pid = Pid::from_raw(pid as i32).expect("a pid");
    let sent = if group {
        rustix::process::kill_process_group(pid, Signal::KILL)
    } else {
        rustix::process::kill_process(pid, Signal::KILL)
    };
    sent.expect("kill");
}

/// One everything server, unsandboxed (the row measures the gateway noticing, not the
/// sandbox's teardown), policy allow, tool search off, audit in a scratch state directory.
fn gateway_config(moat: &Path, dir: &Path) -> PathBuf {
    let toml = format!(
        "state_dir = {}\n\n[tool_search]\nmode = \"off\"\n\n[policy]\ndefault = \"allow\"\n\n\
         [servers.every]\ncommand = {}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n",
        quoted(&dir.join("state")),
        quoted(moat)
    );
    let path = dir.join("crash.toml");
    std::fs::write(&path, toml).expect("write config");
    path
}
