//! `moat-bench reload`: how long a running `moat gateway` takes to act on a change made
//! outside it, end to end against the real `moat` binary. The tests
//! (`crates/moat-cli/tests/host_reload.rs`, `gateway.rs`) check that a change is picked up;
//! this table says how fast. Both changes are found by polling (the configuration file
//! every 500 ms, acted on once it has held still for one poll; the pin store every 500 ms),
//! so the figures are set by those intervals, not by the work done after.
//!
//! Rows, each measured once per round, with moat's client connected to one gateway over
//! stdio for the whole run and asking for `tools/list` every few milliseconds:
//!
//! * `config`: the configuration is rewritten with a deny rule for `test_simple_text` added
//!   (odd rounds) or removed (even rounds); from the write to the first tool list that
//!   reflects it;
//! * `pin-approval`: the configuration gives the bench server's `echo` a new description,
//!   which the gateway holds back (waited for, not timed); `moat pins approve mut__echo` runs
//!   as another process; from its exit to the first tool list that offers the tool again.
//!
//! ```text
//! cargo run --release -p moat-bench -- reload [--rounds N] [--json]
//! ```

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use moat::Client;
use moat_bench::stats::{SpreadRow, report_spread};

use crate::EventArgs;
use crate::gateway_table::{Scratch, quoted};

/// What `moat-bench reload --help` says after the options.
pub(crate) const ROWS: &str = "Rows: config, pin-approval (see docs/benchmarks.md).\n\
    MOAT_BIN=PATH measures that moat binary (default: built beside this one).";

/// Longest a change may take to show before the run is declared hung.
const HUNG: Duration = Duration::from_secs(30);
/// How often the client asks for the tool list while it waits.
const POLL: Duration = Duration::from_millis(5);

const DENIED: &str = "every__test_simple_text";
const HELD: &str = "mut__echo";

pub fn main(args: EventArgs) {
    let moat = crate::gateway_table::moat_binary();
    let scratch = Scratch::new("reload");
    let config = Config {
        path: scratch.0.join("moat.toml"),
        state: scratch.0.join("state"),
        moat: moat.clone(),
        bench_server: crate::gateway_table::bench_server_binary(),
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut rows = vec![
        SpreadRow {
            id: "config",
            note: "config file written -> tools/list reflects it",
            samples: Vec::new(),
        },
        SpreadRow {
            id: "pin-approval",
            note: "`moat pins approve` exited -> the held tool is listed",
            samples: Vec::new(),
        },
    ];
    rt.block_on(async {
        config.write(false, 0);
        let client = Client::connect_command([
            moat.to_str().expect("utf-8 path"),
            "gateway",
            "--config",
            config.path.to_str().expect("utf-8 path"),
        ])
        .await
        .expect("the gateway starts");
        wait_for(&client, "the first tool list", |t| {
            t.contains(DENIED) && t.contains(HELD)
        })
        .await;
        for round in 1..=args.rounds {
            eprint!("\rround {round}/{}", args.rounds);
            // A deny rule added or removed.
            let deny = round % 2 == 1;
            let written = config.write(deny, round - 1);
            wait_for(&client, "the edited policy", |t| t.contains(DENIED) != deny).await;
            rows[0].samples.push(written.elapsed());

            // A new description: held back, then approved from another process.
            config.write(deny, round);
            wait_for(&client, "the changed tool held back", |t| !t.contains(HELD)).await;
            let approved = config.approve();
            wait_for(&client, "the approved tool", |t| t.contains(HELD)).await;
            rows[1].samples.push(approved.elapsed());
        }
        client.close().await;
    });
    eprintln!();
    report_spread(
        args.json,
        "reload",
        "How long a running gateway takes to act on a change",
        &moat,
        args.rounds,
        &mut rows,
    );
}

/// The gateway's configuration file and what goes into it.
struct Config {
    path: PathBuf,
    state: PathBuf,
    moat: PathBuf,
    bench_server: PathBuf,
}

impl Config {
    /// Writes the configuration (everything, and the bench server with the `version`th
    /// description of `echo`, a deny rule for `test_simple_text` if `deny`); when it was
    /// written.
    fn write(&self, deny: bool, version: usize) -> Instant {
        let mut toml = format!(
            "state_dir = {}\n\n[tool_search]\nmode = \"off\"\n\n[policy]\ndefault = \"allow\"\n",
            quoted(&self.state)
        );
        if deny {
            toml.push_str(
                "\n[[policy.rules]]\nname = \"no-simple-text\"\ndecision = \"deny\"\n\
                 tool = \"test_simple_text\"\n",
            );
        }
        toml.push_str(&format!(
            "\n[servers.every]\ncommand = {}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n",
            quoted(&self.moat)
        ));
        toml.push_str(&format!(
            "\n[servers.mut]\ncommand = {}\nsandbox = false\n\
             env = {{ MOAT_BENCH_DESCRIBE = \"Echo the message back (version {version})\" }}\n",
            quoted(&self.bench_server)
        ));
        // Written beside and renamed over, as editors do: the gateway never reads half a file.
        let next = self.path.with_extension("toml.new");
        std::fs::write(&next, toml).expect("write config");
        std::fs::rename(&next, &self.path).expect("rename config");
        Instant::now()
    }

    /// Runs `moat pins approve` for the held tool; when it exited.
    fn approve(&self) -> Instant {
        let out = Command::new(&self.moat)
            .args(["pins", "approve", HELD, "--config"])
            .arg(&self.path)
            .output()
            .expect("run moat pins approve");
        assert!(
            out.status.success(),
            "moat pins approve {HELD}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        Instant::now()
    }
}

/// Asks for the tool list every [`POLL`] until `done` holds; panics after [`HUNG`].
async fn wait_for(client: &Client, what: &str, done: impl Fn(&BTreeSet<String>) -> bool) {
    let deadline = Instant::now() + HUNG;
    loop {
        let tools: BTreeSet<String> = client
            .list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .map(|t| t.name)
            .collect();
        if done(&tools) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not seen within {HUNG:?}; tools: {tools:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}
