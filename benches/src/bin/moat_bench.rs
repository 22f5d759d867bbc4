//! `moat-bench`: every workload of the criterion benches, in one run, printed as one table
//! with the ratios against the anchors measured in that same run (the line-echo floor, rmcp,
//! the TypeScript reference server). `--json` prints the same numbers as JSON.
//!
//! ```text
//! cargo run --release -p moat-bench --bin moat-bench -- [--json] [--calls N] [--inflight N] [--rounds N]
//! cargo run --release -p moat-bench --bin moat-bench -- http [--json] [--calls N] [--rounds N] [--window-ms N] [--clients N] [--only ROW]
//! cargo run --release -p moat-bench --bin moat-bench -- gateway [--json] [--calls N] [--rounds N] [--only ROW] (see --help)
//! cargo run --release -p moat-bench --bin moat-bench -- all [--json] [--plots DIR] [--rounds N] (see --help)
//! cargo run --release -p moat-bench --bin moat-bench -- spawn [--json] [--rounds N]
//! cargo run --release -p moat-bench --bin moat-bench -- reload [--json] [--rounds N]
//! cargo run --release -p moat-bench --bin moat-bench -- crash [--json] [--rounds N]
//! cargo run --release -p moat-bench --bin moat-bench -- replicas [--json] [--calls N] [--rounds N] [--clients N] (see --help)
//! ```
//!
//! `all` runs every comparison in one go — moat, rmcp, the TypeScript and the Python SDK —
//! with a progress display, and prints one set of tables (see `all_table`).
//! `http` (or `--http`) prints the Streamable HTTP table instead (see `http_table`);
//! `gateway` the cost of `moat gateway` in front of a server (see `gateway_table`);
//! `spawn` a sandboxed command started by `moat sandbox` and by `moat serve exec` against
//! bubblewrap (see `spawn_table`); `reload` how long a running gateway takes to act on an
//! edited configuration or a pin approval (see `reload_table`); `crash` how fast a client
//! learns that its server died (see `crash_table`); `replicas` `moat gateway --http` with 1,
//! 2 and 3 replicas behind HAProxy sharing a PostgreSQL store (see `replicas_table`).
//!
//! The arguments are parsed by clap: each table declares its own in an `Args` struct, whose
//! doc comments are the `--help` text.

use std::hint::black_box;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use moat_bench::{Binaries, Floor, decode, fixtures, moat_side, rmcp_side, ts_server_path};
use serde_json::{Value, json};

/// Benchmarks of moat against rmcp, the TypeScript and Python SDKs and raw floors.
///
/// Without a subcommand: the stdio round-trip table (moat, rmcp and the TypeScript server
/// next to a line-echo child that does no MCP at all), then decode timings. Build with
/// `--release`: a debug build measures the debug build.
#[derive(Parser)]
#[command(
    name = "moat-bench",
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  \
        cargo run --release -p moat-bench -- all                 # everything, ~2.5 min\n  \
        cargo run --release -p moat-bench -- http --json         # the HTTP table as JSON\n  \
        cargo run --release -p moat-bench -- gateway --only direct,gateway\n  \
        cargo run --release -p moat-bench -- --only moat --calls 2000   # one row, for profiling\n\n\
        Each table documents itself: `moat-bench <TABLE> --help`. Method and recorded figures: \
        docs/benchmarks.md."
)]
struct Cli {
    #[command(subcommand)]
    table: Option<Table>,
    #[command(flatten)]
    stdio: Settings,
}

/// The tables besides the default one.
#[derive(Subcommand)]
enum Table {
    /// Every comparison in one run: moat against rmcp, the TypeScript and the Python SDK
    /// (stdio, catalog, Streamable HTTP, memory), with a progress display.
    All(all_table::Args),
    /// Streamable HTTP on loopback: moat's server against rmcp's, with a raw hyper floor.
    Http(http_table::Args),
    /// What `moat gateway` costs a client: latency, throughput and memory, against a
    /// direct connection.
    Gateway(gateway_table::Args),
    /// A sandboxed command started by `moat sandbox` and by `moat serve exec`, against
    /// bubblewrap.
    Spawn(spawn_table::Args),
    /// How long a running gateway takes to act on an edited configuration and on a
    /// `moat pins approve` made from another process.
    #[command(after_help = reload_table::ROWS)]
    Reload(EventArgs),
    /// How fast a client learns that its server died: mid-call, on later calls, during the
    /// handshake, and through a gateway.
    #[command(after_help = crash_table::ROWS)]
    Crash(EventArgs),
    /// `moat gateway --http` with 1, 2 and 3 replicas behind HAProxy (round-robin, no
    /// stickiness) sharing a PostgreSQL store: sessions, whose requests are forwarded to
    /// the replica holding them, and 2026-07-28 requests, served where they land.
    Replicas(replicas_table::Args),
}

/// The options of the default table (stdio round trips and decoding).
#[derive(clap::Args)]
struct Settings {
    /// Print the figures as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Sequential calls per stack (the latency samples).
    #[arg(long, value_name = "N", default_value_t = 3000, value_parser = positive)]
    calls: usize,
    /// Calls in flight in each pipelined round (the throughput rows).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = positive)]
    inflight: usize,
    /// Pipelined rounds per stack; calls/s is the median round.
    #[arg(long, value_name = "N", default_value_t = 7, value_parser = positive)]
    rounds: usize,
    /// Only this round-trip row (floor, moat, rmcp, rmcp-pipes, moat->rmcp, rmcp->moat,
    /// ts), and no decode timings: for profiling.
    #[arg(long, value_name = "ROW")]
    only: Option<String>,
}

/// The options of the tables of slow events (`reload`, `crash`), rounds of a few seconds.
#[derive(clap::Args)]
pub(crate) struct EventArgs {
    /// Print the figures as JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Rounds: each measures every row once, on fresh processes where the row says so.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = positive)]
    pub(crate) rounds: usize,
}

/// A count of at least one (rounds, calls, clients): zero would measure nothing.
pub(crate) fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a whole number: {e}")),
    }
}

/// The arguments, with the older `--http`, `--gateway`, `--spawn` and `--all` spellings of
/// the subcommands accepted as the first argument.
fn cli() -> Cli {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(first) = args.get_mut(1)
        && let Some(name) = first.to_str().and_then(|a| a.strip_prefix("--"))
        && matches!(name, "http" | "gateway" | "spawn" | "all")
    {
        *first = name.into();
    }
    Cli::parse_from(args)
}

/// Latency of one sequential round trip: median and mean, in µs.
#[derive(Clone, Copy)]
struct Latency {
    median_us: f64,
    mean_us: f64,
    p99_us: f64,
}

fn latency(mut samples: Vec<Duration>) -> Latency {
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = samples.iter().map(|d| us(*d)).sum::<f64>() / samples.len() as f64;
    Latency {
        median_us: us(samples[samples.len() / 2]),
        mean_us: mean,
        p99_us: us(samples[samples.len() * 99 / 100]),
    }
}

/// Median of the rounds' calls per second.
fn throughput(n: usize, mut rounds: Vec<Duration>) -> f64 {
    rounds.sort();
    n as f64 / rounds[rounds.len() / 2].as_secs_f64()
}

/// Nanoseconds per call of `f`, the median of several timed batches.
fn time_ns<T>(mut f: impl FnMut() -> T) -> f64 {
    for _ in 0..2000 {
        black_box(f());
    }
    let mut batches = Vec::new();
    for _ in 0..15 {
        let n = 2000;
        let start = Instant::now();
        for _ in 0..n {
            black_box(f());
        }
        batches.push(start.elapsed().as_secs_f64() * 1e9 / n as f64);
    }
    batches.sort_by(f64::total_cmp);
    batches[batches.len() / 2]
}

struct Row {
    name: String,
    note: String,
    latency: Option<Latency>,
    calls_per_s: Option<f64>,
}

fn main() {
    let cli = cli();
    match cli.table {
        Some(Table::Http(args)) => return http_table::main(args),
        Some(Table::Gateway(args)) => return gateway_table::main(args),
        Some(Table::Spawn(args)) => return spawn_table::main(args),
        Some(Table::All(args)) => return all_table::main(args),
        Some(Table::Reload(args)) => return reload_table::main(args),
        Some(Table::Crash(args)) => return crash_table::main(args),
        Some(Table::Replicas(args)) => return replicas_table::main(args),
        None => {}
    }
    let s = cli.stdio;
    let bins = Binaries::beside_current_exe();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut rows: Vec<Row> = Vec::new();

    let wanted = |name: &str| s.only.as_deref().is_none_or(|o| o == name);
    // The floor.
    if wanted("floor") {
        let mut floor = Floor::spawn(&bins.line_echo);
        for _ in 0..200 {
            floor.round_trip();
        }
        let samples = (0..s.calls)
            .map(|_| {
                let t = Instant::now();
                floor.round_trip();
                t.elapsed()
            })
            .collect();
        let rounds = (0..s.rounds).map(|_| floor.pipelined(s.inflight)).collect();
        rows.push(Row {
            name: "floor".into(),
            note: "line-echo child, blocking std I/O".into(),
            latency: Some(latency(samples)),
            calls_per_s: Some(throughput(s.inflight, rounds)),
        });
    }

    macro_rules! measure {
        ($name:expr, $note:expr, $side:ident, $argv:expr) => {
            if wanted($name) {
                let argv: Vec<&str> = $argv;
                let (samples, rounds) = rt.block_on(async {
                    let client = $side::connect(&argv).await;
                    eprintln!("{}: {}", $name, $side::describe(&client));
                    for _ in 0..200 {
                        $side::call(&client).await;
                    }
                    let mut samples = Vec::with_capacity(s.calls);
                    for _ in 0..s.calls {
                        let t = Instant::now();
                        $side::call(&client).await;
                        samples.push(t.elapsed());
                    }
                    $side::pipelined(&client, s.inflight).await;
                    let mut rounds = Vec::new();
                    for _ in 0..s.rounds {
                        rounds.push($side::pipelined(&client, s.inflight).await);
                    }
                    drop(client);
                    (samples, rounds)
                });
                rows.push(Row {
                    name: $name.into(),
                    note: $note.into(),
                    latency: Some(latency(samples)),
                    calls_per_s: Some(throughput(s.inflight, rounds)),
                });
            }
        };
    }

    measure!(
        "moat",
        "moat client -> moat server",
        moat_side,
        vec![bins.moat_server.as_str()]
    );
    measure!(
        "rmcp",
        "rmcp client -> rmcp server",
        rmcp_side,
        vec![bins.rmcp_server.as_str()]
    );
    measure!(
        "rmcp-pipes",
        "rmcp client -> rmcp server on its stdio_pipes() transport",
        rmcp_side,
        vec![bins.rmcp_server.as_str(), "--pipes"]
    );
    measure!(
        "moat->rmcp",
        "moat client -> rmcp server",
        moat_side,
        vec![bins.rmcp_server.as_str()]
    );
    measure!(
        "rmcp->moat",
        "rmcp client -> moat server",
        rmcp_side,
        vec![bins.moat_server.as_str()]
    );
    let ts = ts_server_path();
    match &ts {
        Some(path) => measure!(
            "ts",
            "TypeScript server-everything (node), through moat's client",
            moat_side,
            vec!["node", path.as_str(), "stdio"]
        ),
        None => eprintln!("TypeScript reference server not installed; skipped"),
    }

    if s.only.is_some() {
        return;
    }

    // Decoding.
    let call = fixtures::call_tool_request();
    let list = fixtures::list_tools_response(50);
    let decode_rows = vec![
        (
            "tools/call request (small)",
            time_ns(|| decode::moat_call(black_box(&call))),
            time_ns(|| decode::rmcp_call(black_box(&call))),
            time_ns(|| decode::value(black_box(&call))),
            call.len(),
        ),
        (
            "tools/list result (50 tools)",
            time_ns(|| decode::moat_list(black_box(&list))),
            time_ns(|| decode::rmcp_list(black_box(&list))),
            time_ns(|| decode::value(black_box(&list))),
            list.len(),
        ),
    ];

    let get = |name: &str| rows.iter().find(|r| r.name == name);
    let floor_us = get("floor").and_then(|r| r.latency).map(|l| l.median_us);
    let rmcp_us = get("rmcp").and_then(|r| r.latency).map(|l| l.median_us);
    let rmcp_cps = get("rmcp").and_then(|r| r.calls_per_s);
    let overhead = |us: f64| floor_us.map(|f| us - f);
    let rmcp_overhead = rmcp_us.and_then(overhead);

    if s.json {
        let rt_rows: Vec<Value> = rows
            .iter()
            .map(|r| {
                let l = r.latency.expect("latency");
                let o = overhead(l.median_us);
                json!({
                    "name": r.name, "note": r.note,
                    "median_us": l.median_us, "mean_us": l.mean_us, "p99_us": l.p99_us,
                    "overhead_above_floor_us": o,
                    "overhead_vs_rmcp": o.zip(rmcp_overhead).map(|(a, b)| a / b),
                    "pipelined_calls_per_s": r.calls_per_s,
                    "pipelined_vs_rmcp": r.calls_per_s.zip(rmcp_cps).map(|(a, b)| a / b),
                })
            })
            .collect();
        let dec_rows: Vec<Value> = decode_rows
            .iter()
            .map(|(name, m, r, v, bytes)| {
                json!({
                    "workload": name, "bytes": bytes,
                    "moat_ns": m, "rmcp_ns": r, "serde_json_value_ns": v,
                    "rmcp_over_moat": r / m, "value_over_moat": v / m,
                })
            })
            .collect();
        let out = json!({
            "settings": { "sequential_calls": s.calls, "inflight": s.inflight, "rounds": s.rounds },
            "round_trip": rt_rows,
            "decode": dec_rows,
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("json"));
        return;
    }

    println!(
        "Round trip: tools/call of `echo` over stdio pipes; {} sequential calls (median, mean, p99), \
         then pipelined rounds of {} calls in flight (median of {} rounds).\n",
        s.calls, s.inflight, s.rounds
    );
    println!(
        "| {:<11} | {:>10} | {:>8} | {:>8} | {:>13} | {:>12} | {:>12} | {:>9} | what",
        "stack", "median µs", "mean µs", "p99 µs", "above floor", "÷ rmcp's", "calls/s", "× rmcp",
    );
    println!(
        "|{}|{}|{}|{}|{}|{}|{}|{}|---",
        "-".repeat(13),
        "-".repeat(12),
        "-".repeat(10),
        "-".repeat(10),
        "-".repeat(15),
        "-".repeat(14),
        "-".repeat(14),
        "-".repeat(11)
    );
    for r in &rows {
        let l = r.latency.expect("latency");
        let o = overhead(l.median_us);
        let ratio = o.zip(rmcp_overhead).map(|(a, b)| a / b);
        let cps = r.calls_per_s.unwrap_or(f64::NAN);
        let x = r.calls_per_s.zip(rmcp_cps).map(|(a, b)| a / b);
        println!(
            "| {:<11} | {:>10.1} | {:>8.1} | {:>8.1} | {:>13} | {:>12} | {:>12.0} | {:>9} | {}",
            r.name,
            l.median_us,
            l.mean_us,
            l.p99_us,
            o.map_or("-".into(), |o| format!("{o:.1}")),
            ratio.map_or("-".into(), |x| format!("{x:.2}")),
            cps,
            x.map_or("-".into(), |x| format!("{x:.2}")),
            r.note
        );
    }
    println!("\nDecode (ns per message, median of 15 batches of 2000):\n");
    println!(
        "| {:<30} | {:>7} | {:>10} | {:>10} | {:>12} | {:>12} | {:>12} |",
        "workload", "bytes", "moat ns", "rmcp ns", "Value ns", "rmcp ÷ moat", "Value ÷ moat"
    );
    println!(
        "|{}|{}|{}|{}|{}|{}|{}|",
        "-".repeat(32),
        "-".repeat(9),
        "-".repeat(12),
        "-".repeat(12),
        "-".repeat(14),
        "-".repeat(14),
        "-".repeat(14)
    );
    for (name, m, r, v, bytes) in &decode_rows {
        println!(
            "| {:<30} | {:>7} | {:>10.0} | {:>10.0} | {:>12.0} | {:>12.2} | {:>12.2} |",
            name,
            bytes,
            m,
            r,
            v,
            r / m,
            v / m
        );
    }
    if let (Some(m), Some(r)) = (get("moat"), get("rmcp")) {
        let (ml, rl) = (m.latency.expect("l"), r.latency.expect("l"));
        let ratio = overhead(ml.median_us)
            .zip(overhead(rl.median_us))
            .map(|(a, b)| a / b);
        let x = m.calls_per_s.zip(r.calls_per_s).map(|(a, b)| a / b);
        println!();
        if let Some(ratio) = ratio {
            println!(
                "target 1 (overhead above floor <= 1/2 of rmcp's): {:.2} -> {}",
                ratio,
                if ratio <= 0.5 { "MET" } else { "NOT MET" }
            );
        }
        if let Some(x) = x {
            println!(
                "target 2 (pipelined >= 5x rmcp's): {:.2}x -> {}",
                x,
                if x >= 5.0 { "MET" } else { "NOT MET" }
            );
        }
    }
}

// Outside `src/bin/`, where Cargo would take them for binaries of their own.
#[path = "../all_table.rs"]
mod all_table;
#[path = "../crash_table.rs"]
mod crash_table;
#[path = "../gateway_table.rs"]
mod gateway_table;
#[path = "../http_table.rs"]
mod http_table;
#[path = "../reload_table.rs"]
mod reload_table;
#[path = "../replicas_table.rs"]
mod replicas_table;
#[path = "../spawn_table.rs"]
mod spawn_table;
