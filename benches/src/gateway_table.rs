//! `moat-bench gateway`: what `moat gateway` costs a client, in one run.
//!
//! Latency and throughput: a trivial `tools/call` (everything's `test_simple_text`) from
//! moat's client over stdio, straight to `moat serve everything` and through
//! `moat gateway` to it (with `sandbox = false`; with the default sandbox; and, to show what
//! the audit costs, with `sandbox = false` and `[audit] enabled = false`; and, to show what
//! busy polling saves, with `--busy-poll 0`), with the
//! line-echo floor beside them. Otherwise the gateway runs as it
//! is deployed: policy `default = "allow"`, pins, the audit store (SQLite, in a temporary
//! state directory). Rounds interleave the rows (order reversed every other round); each
//! round takes N sequential calls per row, then batches of 64 calls in flight. Latency is
//! pooled over the rounds; "added" is the median of the rounds' differences against the
//! direct row, so both sides of a difference were measured seconds apart. CPU time and
//! context switches are those of the gateway process (of the server, for the direct row).
//!
//! Memory: the resident set of the gateway process alone (children excluded:
//! `/proc/PID/status` of its pid) with 10 downstream `moat serve everything`, sandbox off
//! and on, after listing the tools and a few hundred calls spread over the servers.
//!
//! The `moat` binary is built (`cargo build -p moat-cli`, same profile and target
//! directory) unless `MOAT_BIN` names one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use moat::Client;
use moat_bench::http::cpu_time;
use moat_bench::{Binaries, Floor, moat_side};
use serde_json::{Value, json};

/// The tool every call makes: trivial, no arguments.
const TOOL: &str = "test_simple_text";

/// The options of `moat-bench gateway`.
#[derive(clap::Args)]
#[command(
    after_help = "Rows (for --only): floor, direct, gateway, gateway-sandbox, \
    gateway-no-audit, gateway-no-busy-poll, gateway-rate, gateway-postgres, \
    gateway-postgres-rate, gateway-metrics, gateway-traces, memory.\n\
    MOAT_BENCH_STORE_URL=postgres://… runs the gateway-postgres rows (skipped without it).\n\
    MOAT_BIN=PATH uses that moat binary instead of building one (cargo build -p moat-cli)."
)]
pub struct Args {
    /// Print the figures as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Sequential calls per row and round (the latency samples).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = crate::positive)]
    calls: usize,
    /// Calls per row before measuring.
    #[arg(long, value_name = "N", default_value_t = 200)]
    warmup: usize,
    /// Rounds; rows are interleaved in each (order reversed every other round).
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = crate::positive)]
    rounds: usize,
    /// Calls in flight in the pipelined batches.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = crate::positive)]
    inflight: usize,
    /// Pipelined batches per row and round.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = crate::positive)]
    batches: usize,
    /// Downstream servers behind the gateway for the memory rows.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = crate::positive)]
    servers: usize,
    /// Calls spread over the servers before memory is read.
    #[arg(long = "mem-calls", value_name = "N", default_value_t = 300)]
    mem_calls: usize,
    /// Leave out the rows and the memory figures with the sandbox on.
    #[arg(long = "no-sandbox", action = clap::ArgAction::SetFalse)]
    sandbox: bool,
    /// Only these rows (comma-separated or repeated): for profiling.
    #[arg(long, value_name = "ROW[,ROW...]", value_delimiter = ',')]
    only: Vec<String>,
}

type Settings = Args;

impl Settings {
    fn wants(&self, part: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == part)
    }
}

// ---------------------------------------------------------------------------------------
// The moat binary and the gateway's configuration

/// `moat-bench-server` beside this executable, built first (`cargo run --bin moat-bench`
/// builds only the table's own binary).
pub(crate) fn bench_server_binary() -> PathBuf {
    build_sibling("moat-bench", "moat-bench-server")
}

/// `MOAT_BIN`, else the `moat` binary next to this one, built first with the same profile
/// (Cargo passes its target directory on through the environment).
pub(crate) fn moat_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("MOAT_BIN") {
        // Absolute: it is written into the gateway's configuration.
        return std::fs::canonicalize(&path).unwrap_or_else(|e| panic!("MOAT_BIN {path:?}: {e}"));
    }
    eprintln!("building moat (cargo build -p moat-cli; set MOAT_BIN to skip)");
    build_sibling("moat-cli", "moat")
}

/// Builds `bin` of `package` with this executable's profile and returns its path beside
/// this executable.
fn build_sibling(package: &str, bin: &str) -> PathBuf {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args([
        "build",
        "--quiet",
        "-p",
        package,
        "--bin",
        bin,
        "--manifest-path",
        manifest,
    ]);
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    let status = build.status().expect("run cargo build");
    assert!(
        status.success(),
        "cargo build -p {package} --bin {bin} failed"
    );
    let exe = std::env::current_exe().expect("current exe");
    let path = exe.parent().expect("exe dir").join(bin);
    assert!(path.exists(), "no {bin} binary at {}", path.display());
    path
}

/// Says on stderr how much of `crates/moat-cli/hot-symbols.txt` the binary has: the memory
/// rows depend on the release link placing those functions together, and a list older than
/// the build (another toolchain, a version bump) quietly loses that. Needs `nm`.
fn check_hot_symbols(moat: &Path) {
    let list = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crates/moat-cli/hot-symbols.txt"
    );
    let Ok(text) = std::fs::read_to_string(list) else {
        return;
    };
    let listed: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let Ok(out) = Command::new("nm").arg("--defined-only").arg(moat).output() else {
        eprintln!("hot-symbols.txt: not checked (no `nm`)");
        return;
    };
    let defined: std::collections::HashSet<&str> = std::str::from_utf8(&out.stdout)
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let found = listed.iter().filter(|n| defined.contains(*n)).count();
    eprintln!(
        "hot-symbols.txt: {found} of {} functions are in {}",
        listed.len(),
        moat.display()
    );
    if found * 10 < listed.len() * 9 {
        eprintln!(
            "warning: the list is stale for this build (a debug build, another toolchain or \
             versions, or moat built together with other packages, which changes the \
             dependencies' features: build it with `cargo build --release -p moat-cli`): \
             memory will read high; else run `python3 scripts/hot-symbols.py`"
        );
    }
}

/// A temporary directory for configurations and state, removed on drop.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    /// `$TMPDIR/moat-bench-TABLE-PID`, empty.
    pub(crate) fn new(table: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("moat-bench-{table}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A TOML basic string (JSON's escapes are TOML's for what paths contain).
pub(crate) fn quoted(path: &Path) -> String {
    serde_json::to_string(&path.to_string_lossy()).expect("quote")
}

/// How the gateway is set up for a row.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Setup {
    sandbox: bool,
    audit: bool,
    /// `--busy-poll` left at its default (else 0: the gateway sleeps as soon as it is idle).
    busy_poll: bool,
    /// State in the PostgreSQL store of `MOAT_BENCH_STORE_URL` (else SQLite files).
    store: bool,
    /// A rate limit on the tool, too high to refuse: what counting a call costs.
    rate: bool,
    /// Telemetry on: `Metrics` serves /metrics (the counters and histograms kept), `Traces`
    /// exports a span per call over OTLP (to a port nothing listens on: the spans are
    /// made and batched, and the batch's export fails once per batch period).
    telemetry: Telemetry,
}

/// Which telemetry a row turns on (off in every other row, as by default).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Telemetry {
    Off,
    Metrics,
    Traces,
}

/// The variable naming the PostgreSQL store of the `gateway-postgres*` rows (skipped
/// without it).
const STORE_URL_VAR: &str = "MOAT_BENCH_STORE_URL";

/// A moat.toml with `servers` × `moat serve everything` named s0, s1, …, every call
/// allowed, pins on and the audit on unless `setup` says otherwise, state under
/// `dir/state-LABEL`. Tool search is off: the rows measure the plain call path (350 tools
/// would switch `auto` on, and with it a model in memory).
fn write_config(dir: &Path, label: &str, moat: &Path, servers: usize, setup: Setup) -> PathBuf {
    let mut toml = format!(
        "state_dir = {}\n\n[policy]\ndefault = \"allow\"\n\n[tool_search]\nmode = \"off\"\n",
        quoted(&dir.join(format!("state-{label}")))
    );
    if !setup.audit {
        toml.push_str("\n[audit]\nenabled = false\n");
    }
    if setup.rate {
        toml.push_str(&format!(
            "\n[[policy.rate_limits]]\ntool = {}\nper_second = 1000000\n",
            quoted(Path::new(TOOL))
        ));
    }
    match setup.telemetry {
        Telemetry::Off => {}
        Telemetry::Metrics => toml.push_str("\n[telemetry]\nmetrics = \"127.0.0.1:0\"\n"),
        Telemetry::Traces => {
            toml.push_str("\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:9\"\n");
        }
    }
    if setup.store {
        let url = std::env::var(STORE_URL_VAR).expect("the row is skipped without the store");
        toml.push_str(&format!(
            "\n[store]\nurl = {}\n",
            serde_json::to_string(&url).expect("quote")
        ));
    }
    // The sandbox starts from a fresh /tmp (where target directories often are): the
    // binary's directory is bound read-only in place of the default (the config's dir).
    let bin_dir = moat.parent().expect("moat's directory");
    for i in 0..servers {
        toml.push_str(&format!(
            "\n[servers.s{i}]\ncommand = {}\nargs = [\"serve\", \"everything\"]\n",
            quoted(moat)
        ));
        if setup.sandbox {
            toml.push_str(&format!("sandbox = {{ ro = [{}] }}\n", quoted(bin_dir)));
        } else {
            toml.push_str("sandbox = false\n");
        }
    }
    let path = dir.join(format!("{label}.toml"));
    std::fs::write(&path, toml).expect("write config");
    path
}

// ---------------------------------------------------------------------------------------
// /proc

/// `VmRSS`, `VmHWM`, `RssAnon`, `RssFile` and `Pss` of one process, in kB (the process
/// alone). File pages (the binary's code) are shared with every other moat process, the
/// downstream servers included: `Pss` splits them among their users.
#[derive(Clone, Copy, Default)]
struct Memory {
    rss_kb: u64,
    pss_kb: u64,
    hwm_kb: u64,
    anon_kb: u64,
    file_kb: u64,
    threads: u64,
}

fn memory(pid: u32) -> Memory {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let pss_kb = rollup
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Memory {
        rss_kb: field("VmRSS:"),
        pss_kb,
        hwm_kb: field("VmHWM:"),
        anon_kb: field("RssAnon:"),
        file_kb: field("RssFile:"),
        threads: field("Threads:"),
    }
}

/// Every descendant of `pid` (children, their children, …), from `/proc/*/stat`.
fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The command name may hold spaces and parentheses: fields start after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((p, ppid));
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Context switches so far (voluntary and not) of every live thread of `pid`.
fn switches(pid: u32) -> f64 {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        total += status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total as f64
}

fn pid_of(client: &Client) -> u32 {
    client
        .child()
        .and_then(|c| c.id())
        .expect("the client launched its server")
}

// ---------------------------------------------------------------------------------------
// Latency and throughput

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Floor,
    Direct,
    Gateway,
    GatewaySandbox,
    GatewayNoAudit,
    GatewayNoBusyPoll,
    GatewayRate,
    GatewayPostgres,
    GatewayPostgresRate,
    GatewayMetrics,
    GatewayTraces,
}

impl Kind {
    fn setup(self) -> Option<Setup> {
        match self {
            Kind::Floor | Kind::Direct => None,
            Kind::Gateway => Some(GATEWAY),
            Kind::GatewaySandbox => Some(Setup {
                sandbox: true,
                ..GATEWAY
            }),
            Kind::GatewayNoAudit => Some(Setup {
                audit: false,
                ..GATEWAY
            }),
            Kind::GatewayNoBusyPoll => Some(Setup {
                busy_poll: false,
                ..GATEWAY
            }),
            Kind::GatewayRate => Some(Setup {
                rate: true,
                ..GATEWAY
            }),
            Kind::GatewayPostgres => Some(Setup {
                store: true,
                ..GATEWAY
            }),
            Kind::GatewayPostgresRate => Some(Setup {
                store: true,
                rate: true,
                ..GATEWAY
            }),
            Kind::GatewayMetrics => Some(Setup {
                telemetry: Telemetry::Metrics,
                ..GATEWAY
            }),
            Kind::GatewayTraces => Some(Setup {
                telemetry: Telemetry::Traces,
                ..GATEWAY
            }),
        }
    }
}

/// The `gateway` row's setup, which the telemetry rows vary.
const GATEWAY: Setup = Setup {
    sandbox: false,
    audit: true,
    busy_poll: true,
    store: false,
    rate: false,
    telemetry: Telemetry::Off,
};

struct Row {
    id: &'static str,
    kind: Kind,
    note: &'static str,
}

const ROWS: &[Row] = &[
    Row {
        id: "floor",
        kind: Kind::Floor,
        note: "line-echo child, blocking std I/O: two pipe hops and nothing else",
    },
    Row {
        id: "direct",
        kind: Kind::Direct,
        note: "moat client -> moat serve everything",
    },
    Row {
        id: "gateway",
        kind: Kind::Gateway,
        note: "moat client -> moat gateway (sandbox = false) -> moat serve everything",
    },
    Row {
        id: "gateway-sandbox",
        kind: Kind::GatewaySandbox,
        note: "moat client -> moat gateway (default sandbox) -> moat serve everything",
    },
    Row {
        id: "gateway-no-audit",
        kind: Kind::GatewayNoAudit,
        note: "as `gateway`, with [audit] enabled = false (what the audit costs)",
    },
    Row {
        id: "gateway-no-busy-poll",
        kind: Kind::GatewayNoBusyPoll,
        note: "as `gateway`, with --busy-poll 0 (sleeps as soon as it is idle)",
    },
    Row {
        id: "gateway-rate",
        kind: Kind::GatewayRate,
        note: "as `gateway`, with a rate limit on the tool (buckets in memory)",
    },
    Row {
        id: "gateway-postgres",
        kind: Kind::GatewayPostgres,
        note: "as `gateway`, state in PostgreSQL (MOAT_BENCH_STORE_URL): audit batched there",
    },
    Row {
        id: "gateway-postgres-rate",
        kind: Kind::GatewayPostgresRate,
        note: "as `gateway-rate`, buckets in PostgreSQL: one round trip per call",
    },
    Row {
        id: "gateway-metrics",
        kind: Kind::GatewayMetrics,
        note: "as `gateway`, with [telemetry] metrics on (what counting costs)",
    },
    Row {
        id: "gateway-traces",
        kind: Kind::GatewayTraces,
        note: "as `gateway`, with a span per call exported over OTLP (what tracing costs)",
    },
];

/// What a row talks to.
// A handful per run: the size of a variant does not matter.
#[allow(clippy::large_enum_variant)]
enum Target {
    Floor(Floor),
    Mcp {
        client: Client,
        tool: String,
        pid: u32,
    },
}

#[derive(Default)]
struct Measured {
    samples: Vec<Duration>,
    round_median_us: Vec<f64>,
    round_p99_us: Vec<f64>,
    /// Calls/s of each round (its median batch).
    round_cps: Vec<f64>,
    /// CPU of the measured process (the gateway, or the server for `direct`) per call.
    seq_cpu_us: Vec<f64>,
    pipe_cpu_us: Vec<f64>,
    /// Its context switches per call, sequential.
    seq_switches: Vec<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile_us(sorted: &[Duration], p: usize) -> f64 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)].as_secs_f64() * 1e6
}

fn cpu_us(pid: u32) -> f64 {
    cpu_time(pid).map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
}

async fn connect(moat: &Path, kind: Kind, scratch: &Path) -> Target {
    if kind == Kind::Floor {
        return Target::Floor(Floor::spawn(&Binaries::beside_current_exe().line_echo));
    }
    let moat_s = moat.to_str().expect("utf-8 path");
    let (argv, tool) = match kind.setup() {
        None => (
            vec![moat_s.to_owned(), "serve".into(), "everything".into()],
            TOOL.to_owned(),
        ),
        Some(setup) => {
            let label = format!(
                "lat-{}-{}-{}-{}-{}",
                setup.sandbox, setup.audit, setup.busy_poll, setup.store, setup.rate
            );
            let config = write_config(scratch, &label, moat, 1, setup);
            let mut argv = vec![
                moat_s.to_owned(),
                "gateway".into(),
                "--config".into(),
                config.to_string_lossy().into_owned(),
            ];
            if !setup.busy_poll {
                argv.extend(["--busy-poll".into(), "0".into()]);
            }
            (argv, format!("s0__{TOOL}"))
        }
    };
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let client = moat_side::launch(&argv).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(
        tools.iter().any(|t| t.name == tool),
        "{tool} is not listed: {:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    let pid = pid_of(&client);
    Target::Mcp { client, tool, pid }
}

async fn warm(target: &mut Target, n: usize) {
    match target {
        Target::Floor(floor) => {
            for _ in 0..n {
                floor.round_trip();
            }
        }
        Target::Mcp { client, tool, .. } => {
            for _ in 0..n {
                moat_side::call_tool(client, tool, json!({})).await;
            }
        }
    }
}

/// One round of one row: `calls` sequential, then `batches` × `inflight` in flight.
async fn round(target: &mut Target, s: &Settings, m: &mut Measured) {
    let mut samples = Vec::with_capacity(s.calls);
    let mut batches = Vec::with_capacity(s.batches);
    match target {
        Target::Floor(floor) => {
            for _ in 0..s.calls {
                let t = Instant::now();
                floor.round_trip();
                samples.push(t.elapsed());
            }
            // No pipelined rounds: at 64 lines, starting the floor's writer thread is the cost.
        }
        Target::Mcp { client, tool, pid } => {
            let args = json!({});
            let cpu0 = cpu_us(*pid);
            let sw0 = switches(*pid);
            for _ in 0..s.calls {
                let t = Instant::now();
                moat_side::call_tool(client, tool, args.clone()).await;
                samples.push(t.elapsed());
            }
            let cpu1 = cpu_us(*pid);
            m.seq_switches.push((switches(*pid) - sw0) / s.calls as f64);
            for _ in 0..s.batches {
                batches.push(moat_side::pipelined_tool(client, s.inflight, tool, &args).await);
            }
            let cpu2 = cpu_us(*pid);
            m.seq_cpu_us.push((cpu1 - cpu0) / s.calls as f64);
            m.pipe_cpu_us
                .push((cpu2 - cpu1) / (s.batches * s.inflight) as f64);
        }
    }
    samples.sort();
    m.round_median_us.push(percentile_us(&samples, 50));
    m.round_p99_us.push(percentile_us(&samples, 99));
    m.samples.extend(samples);
    if !batches.is_empty() {
        let mut sorted = batches.clone();
        sorted.sort();
        m.round_cps
            .push(s.inflight as f64 / sorted[sorted.len() / 2].as_secs_f64());
    }
}

struct LatencyRow {
    id: &'static str,
    note: &'static str,
    median_us: f64,
    mean_us: f64,
    p99_us: f64,
    calls_per_s: Option<f64>,
    /// Medians over the rounds of (this row − direct) and of (this ÷ direct).
    added_median_us: Option<f64>,
    added_p99_us: Option<f64>,
    throughput_vs_direct: Option<f64>,
    seq_cpu_us: Option<f64>,
    pipe_cpu_us: Option<f64>,
    seq_switches: Option<f64>,
}

fn latency_rows(rows: &[&Row], measured: &[Measured]) -> Vec<LatencyRow> {
    let direct = rows
        .iter()
        .position(|r| r.kind == Kind::Direct)
        .map(|i| &measured[i]);
    rows.iter()
        .zip(measured)
        .map(|(row, m)| {
            let mut sorted = m.samples.clone();
            sorted.sort();
            let us = |d: &Duration| d.as_secs_f64() * 1e6;
            let vs_direct = |f: &dyn Fn(&Measured) -> &Vec<f64>, op: fn(f64, f64) -> f64| {
                let d = direct?;
                if row.kind == Kind::Direct || row.kind == Kind::Floor {
                    return None;
                }
                Some(median(
                    f(m).iter().zip(f(d)).map(|(a, b)| op(*a, *b)).collect(),
                ))
            };
            let cpu = |v: &Vec<f64>| (!v.is_empty()).then(|| median(v.clone()));
            LatencyRow {
                id: row.id,
                note: row.note,
                median_us: percentile_us(&sorted, 50),
                mean_us: sorted.iter().map(us).sum::<f64>() / sorted.len() as f64,
                p99_us: percentile_us(&sorted, 99),
                calls_per_s: (!m.round_cps.is_empty()).then(|| median(m.round_cps.clone())),
                added_median_us: vs_direct(&|m| &m.round_median_us, |a, b| a - b),
                added_p99_us: vs_direct(&|m| &m.round_p99_us, |a, b| a - b),
                throughput_vs_direct: vs_direct(&|m| &m.round_cps, |a, b| a / b),
                seq_cpu_us: cpu(&m.seq_cpu_us),
                pipe_cpu_us: cpu(&m.pipe_cpu_us),
                seq_switches: cpu(&m.seq_switches),
            }
        })
        .collect()
}

async fn measure_latency(s: &Settings, moat: &Path, scratch: &Path) -> Vec<LatencyRow> {
    let rows: Vec<&Row> = ROWS
        .iter()
        .filter(|r| s.sandbox || r.kind.setup().is_none_or(|setup| !setup.sandbox))
        .filter(|r| s.wants(r.id))
        .filter(|r| {
            let store = r.kind.setup().is_some_and(|setup| setup.store);
            if store && std::env::var_os(STORE_URL_VAR).is_none() {
                eprintln!("{}: skipped ({STORE_URL_VAR} is not set)", r.id);
                return false;
            }
            true
        })
        .collect();
    let mut targets = Vec::new();
    for row in &rows {
        let mut target = connect(moat, row.kind, scratch).await;
        if let Target::Mcp { pid, .. } = &target {
            eprintln!("{}: pid {pid}", row.id);
        }
        warm(&mut target, s.warmup).await;
        targets.push(target);
    }
    let mut measured: Vec<Measured> = rows.iter().map(|_| Measured::default()).collect();
    for r in 0..s.rounds {
        let order: Vec<usize> = if r % 2 == 0 {
            (0..rows.len()).collect()
        } else {
            (0..rows.len()).rev().collect()
        };
        for i in order {
            round(&mut targets[i], s, &mut measured[i]).await;
        }
    }
    for target in targets {
        if let Target::Mcp { client, .. } = target {
            client.close().await;
        }
    }
    latency_rows(&rows, &measured)
}

// ---------------------------------------------------------------------------------------
// Memory

struct MemoryRow {
    sandbox: bool,
    servers: usize,
    tools: usize,
    calls: usize,
    start_ms: f64,
    at_start: Memory,
    after: Memory,
    children: usize,
    children_rss_kb: u64,
}

async fn measure_memory(s: &Settings, moat: &Path, scratch: &Path, sandbox: bool) -> MemoryRow {
    let label = if sandbox { "mem-sandbox" } else { "mem" };
    let setup = Setup { sandbox, ..GATEWAY };
    let config = write_config(scratch, label, moat, s.servers, setup);
    let moat_s = moat.to_str().expect("utf-8 path");
    let config_s = config.to_str().expect("utf-8 path");
    let started = Instant::now();
    let client = moat_side::launch(&[moat_s, "gateway", "--config", config_s]).await;
    let start_ms = started.elapsed().as_secs_f64() * 1e3;
    let pid = pid_of(&client);
    let at_start = memory(pid);
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<String> = (0..s.servers).map(|i| format!("s{i}__{TOOL}")).collect();
    for name in &names {
        assert!(
            tools.iter().any(|t| &t.name == name),
            "{name} is not listed"
        );
    }
    for i in 0..s.mem_calls {
        moat_side::call_tool(&client, &names[i % names.len()], json!({})).await;
    }
    // And some at once, spread over the servers.
    let args = json!({});
    for _ in 0..4 {
        futures_util::future::join_all(
            (0..s.inflight)
                .map(|i| moat_side::call_tool(&client, &names[i % names.len()], args.clone())),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = memory(pid);
    let children = descendants(pid);
    let children_rss_kb = children.iter().map(|p| memory(*p).rss_kb).sum();
    client.close().await;
    MemoryRow {
        sandbox,
        servers: s.servers,
        tools: tools.len(),
        calls: s.mem_calls + 4 * s.inflight,
        start_ms,
        at_start,
        after,
        children: children.len(),
        children_rss_kb,
    }
}

// ---------------------------------------------------------------------------------------
// Output

const ADDED_TARGET_US: f64 = 50.0;
const RSS_TARGET_KB: u64 = 20 * 1024;

fn met(ok: bool) -> &'static str {
    if ok { "MET" } else { "NOT MET" }
}

pub fn main(s: Args) {
    let moat = moat_binary();
    let scratch = Scratch::new("gateway");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let lat = if ROWS.iter().any(|r| s.wants(r.id)) {
        rt.block_on(measure_latency(&s, &moat, &scratch.0))
    } else {
        Vec::new()
    };
    let mut mem = Vec::new();
    if s.wants("memory") {
        check_hot_symbols(&moat);
        mem.push(rt.block_on(measure_memory(&s, &moat, &scratch.0, false)));
        if s.sandbox {
            mem.push(rt.block_on(measure_memory(&s, &moat, &scratch.0, true)));
        }
    }
    if s.json {
        print_json(&s, &lat, &mem);
    } else {
        print_table(&s, &lat, &mem);
    }
}

fn print_json(s: &Settings, lat: &[LatencyRow], mem: &[MemoryRow]) {
    let lat: Vec<Value> = lat
        .iter()
        .map(|r| {
            json!({
                "id": r.id, "note": r.note,
                "median_us": r.median_us, "mean_us": r.mean_us, "p99_us": r.p99_us,
                "added_median_us": r.added_median_us, "added_p99_us": r.added_p99_us,
                "pipelined_calls_per_s": r.calls_per_s,
                "pipelined_vs_direct": r.throughput_vs_direct,
                "process_cpu_us_per_call_sequential": r.seq_cpu_us,
                "process_cpu_us_per_call_pipelined": r.pipe_cpu_us,
                "process_context_switches_per_call_sequential": r.seq_switches,
            })
        })
        .collect();
    let mem: Vec<Value> = mem
        .iter()
        .map(|m| {
            json!({
                "sandbox": m.sandbox, "servers": m.servers, "tools_listed": m.tools,
                "calls": m.calls, "start_ms": m.start_ms,
                "rss_kb_at_start": m.at_start.rss_kb,
                "rss_kb_after_calls": m.after.rss_kb, "hwm_kb": m.after.hwm_kb,
                "pss_kb_after_calls": m.after.pss_kb,
                "rss_anon_kb": m.after.anon_kb, "rss_file_kb": m.after.file_kb,
                "threads": m.after.threads,
                "descendant_processes": m.children, "descendants_rss_kb": m.children_rss_kb,
            })
        })
        .collect();
    let out = json!({
        "settings": {
            "tool": TOOL, "sequential_calls_per_round": s.calls, "warmup": s.warmup,
            "rounds": s.rounds, "inflight": s.inflight, "batches_per_round": s.batches,
            "memory_servers": s.servers, "memory_calls": s.mem_calls,
        },
        "latency": lat,
        "memory": mem,
    });
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}

fn print_table(s: &Settings, lat: &[LatencyRow], mem: &[MemoryRow]) {
    let f = |x: Option<f64>, p: usize| x.map_or("-".to_owned(), |x| format!("{x:.p$}"));
    if !lat.is_empty() {
        println!(
            "Gateway latency: tools/call of `{TOOL}` over stdio, moat's client; {} rounds of {} sequential \
             calls per row (pooled: median, mean, p99), then {} batches of {} in flight (calls/s: median \
             batch, median round). \"added\": median over rounds of (row − direct). CPU: the gateway \
             process's (the server's for direct) CPU µs per call.\n",
            s.rounds, s.calls, s.batches, s.inflight
        );
        println!(
            "| row | median µs | mean µs | p99 µs | added median µs | added p99 µs | calls/s ({} in flight) | × direct | CPU µs/call seq | CPU µs/call pipelined | switches/call seq |",
            s.inflight
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in lat {
            println!(
                "| {} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
                r.id,
                r.median_us,
                r.mean_us,
                r.p99_us,
                f(r.added_median_us, 1),
                f(r.added_p99_us, 1),
                f(r.calls_per_s, 0),
                f(r.throughput_vs_direct, 2),
                f(r.seq_cpu_us, 1),
                f(r.pipe_cpu_us, 1),
                f(r.seq_switches, 1),
            );
        }
        println!();
    }
    if !mem.is_empty() {
        println!(
            "Gateway memory: the `moat gateway` process alone (/proc/PID/status), {} × moat serve everything, \
             after tools/list and {} calls spread over the servers.\n",
            s.servers,
            mem.first().map_or(0, |m| m.calls)
        );
        println!(
            "| sandbox | servers | tools | start ms | RSS at start MB | RSS after MB | peak (VmHWM) MB | PSS MB | anon MB | file MB | threads | children (RSS MB) |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        let mb = |kb: u64| kb as f64 / 1024.0;
        for m in mem {
            println!(
                "| {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} ({:.1}) |",
                if m.sandbox { "on" } else { "off" },
                m.servers,
                m.tools,
                m.start_ms,
                mb(m.at_start.rss_kb),
                mb(m.after.rss_kb),
                mb(m.after.hwm_kb),
                mb(m.after.pss_kb),
                mb(m.after.anon_kb),
                mb(m.after.file_kb),
                m.after.threads,
                m.children,
                mb(m.children_rss_kb),
            );
        }
        println!();
    }
    for r in lat {
        if let Some(added) = r.added_median_us {
            println!(
                "{}: added median latency < {ADDED_TARGET_US} µs: {added:.1} -> {}",
                r.id,
                met(added < ADDED_TARGET_US)
            );
        }
    }
    for m in mem {
        let peak = m.after.hwm_kb;
        println!(
            "gateway RSS < 20 MB with {} servers, sandbox {}: peak {:.1} MB, after {:.1} MB -> {}",
            m.servers,
            if m.sandbox { "on" } else { "off" },
            peak as f64 / 1024.0,
            m.after.rss_kb as f64 / 1024.0,
            met(peak < RSS_TARGET_KB)
        );
    }
    if !lat.is_empty() {
        println!("\nrows:");
        for r in lat {
            println!("  {:<16} {}", r.id, r.note);
        }
    }
}
