//! `moat-bench http`: Streamable HTTP on loopback, moat's server against rmcp's doing the
//! same work, in one run, with a raw hyper floor. For each row: single-client latency
//! (sequential calls, median and p99) and calls per second at 1 and at N concurrent
//! clients (default 64), each client on its own keep-alive connection (and, in the
//! handshake era, its own session). Rounds interleave the rows (moat next to its rmcp
//! counterpart, order reversed every other round); latency samples are pooled over the
//! rounds, throughput is the median round, and each ratio against rmcp is the median of
//! the rounds' ratios.
//!
//! With `--peers` (always in `moat-bench all`), rows for the TypeScript and the Python SDK's
//! servers (`interop/ts_bench_server.mjs`, `interop/py_bench_server.py`) join in, when they
//! are installed; `all` calls [`run`] and prints the rows itself.

use std::time::Duration;

use moat_bench::Binaries;
use moat_bench::cores::{Split, describe, pin_this_thread};
use moat_bench::http::{self, Answer, Mode, ServerProcess, Workload};
use moat_bench::peers::Peers;
use moat_bench::stats::median;
use serde_json::{Value, json};

pub struct Settings {
    pub json: bool,
    pub calls: usize,
    pub warmup: usize,
    pub rounds: usize,
    pub window: Duration,
    pub clients: usize,
    pub only: Vec<String>,
    /// Add the TypeScript and Python rows (when installed).
    pub peers: bool,
    /// Run the servers on half of the cores and the load generator on the other half.
    pub split_cores: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            json: false,
            calls: 1000,
            warmup: 100,
            rounds: 5,
            window: Duration::from_millis(400),
            clients: 64,
            only: Vec::new(),
            peers: false,
            split_cores: false,
        }
    }
}

/// The options of `moat-bench http`.
#[derive(clap::Args)]
#[command(
    after_help = "Rows (for --only): moat and rmcp in the handshake era (sessions) and in \
    2026-07-28 (stateless), JSON and SSE answers, beside a raw hyper floor; the row ids are \
    listed under the table. Example: moat-bench http --only moat-2026-json,rmcp-2026-json"
)]
pub struct Args {
    /// Print the figures as JSON (with latency deciles) instead of a table.
    #[arg(long)]
    json: bool,
    /// Sequential calls per row and round (the single-client latency samples).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    calls: usize,
    /// Calls per row before measuring.
    #[arg(long, value_name = "N", default_value_t = 100)]
    warmup: usize,
    /// Rounds; rows are interleaved in each and throughput is the median round.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = crate::positive)]
    rounds: usize,
    /// How long each throughput measurement runs, in milliseconds.
    #[arg(long = "window-ms", value_name = "N", default_value_t = 400)]
    window_ms: u64,
    /// Concurrent clients of the throughput rows, each on its own keep-alive connection.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = crate::positive)]
    clients: usize,
    /// Only these rows (ids, comma-separated or repeated): for profiling.
    #[arg(long, value_name = "ROW[,ROW...]", value_delimiter = ',')]
    only: Vec<String>,
    /// Add the TypeScript and Python SDK servers' rows, when installed (see
    /// `bash .ci/run --install-only`).
    #[arg(long)]
    peers: bool,
    /// Run the servers on the upper half of the cores and the load generator on the rest
    /// (on two cores: one each). Without it both share every core, and on a small machine
    /// the generator's own CPU per call squeezes every throughput ratio toward 1.
    #[arg(long)]
    split_cores: bool,
}

impl From<Args> for Settings {
    fn from(a: Args) -> Settings {
        Settings {
            json: a.json,
            calls: a.calls,
            warmup: a.warmup,
            rounds: a.rounds,
            window: Duration::from_millis(a.window_ms),
            clients: a.clients,
            only: a.only,
            peers: a.peers,
            split_cores: a.split_cores,
        }
    }
}

/// A server process (one per kind, shared by the rows that use it).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Srv {
    Floor,
    Moat,
    Rmcp,
    RmcpJson,
    RmcpStateless,
    /// The TypeScript SDK: sessions, SSE answers (its default).
    Ts,
    /// The TypeScript SDK with `enableJsonResponse`.
    TsJson,
    /// The Python SDK: sessions, SSE answers (its default).
    Py,
    /// The Python SDK with `json_response`.
    PyJson,
}

const ALL_SRV: &[Srv] = &[
    Srv::Floor,
    Srv::Moat,
    Srv::Rmcp,
    Srv::RmcpJson,
    Srv::RmcpStateless,
    Srv::Ts,
    Srv::TsJson,
    Srv::Py,
    Srv::PyJson,
];

impl Srv {
    fn is_peer(self) -> bool {
        matches!(self, Srv::Ts | Srv::TsJson | Srv::Py | Srv::PyJson)
    }

    /// Its command line, or `None` when it is a peer that is not installed.
    fn argv(self, bins: &Binaries, peers: &Peers) -> Option<Vec<String>> {
        let own = |bin: &str, extra: &[&str]| {
            let mut v = vec![
                bin.to_owned(),
                "--http".to_owned(),
                "127.0.0.1:0".to_owned(),
            ];
            v.extend(extra.iter().map(|s| s.to_string()));
            v
        };
        let peer = |base: &Option<Vec<String>>, extra: &[&str]| {
            base.as_ref().map(|b| {
                let mut v = b.clone();
                v.extend(
                    ["--http", "127.0.0.1:0"]
                        .iter()
                        .chain(extra)
                        .map(|s| s.to_string()),
                );
                v
            })
        };
        match self {
            Srv::Floor => Some(vec![bins.http_floor.clone(), "127.0.0.1:0".to_owned()]),
            Srv::Moat => Some(own(&bins.moat_server, &[])),
            Srv::Rmcp => Some(own(&bins.rmcp_server, &[])),
            Srv::RmcpJson => Some(own(&bins.rmcp_server, &["--json-response"])),
            Srv::RmcpStateless => Some(own(&bins.rmcp_server, &["--stateless", "--json-response"])),
            Srv::Ts => peer(&peers.ts, &[]),
            Srv::TsJson => peer(&peers.ts, &["--json-response"]),
            Srv::Py => peer(&peers.py, &[]),
            Srv::PyJson => peer(&peers.py, &["--json-response"]),
        }
    }
}

impl Spec {
    /// How the answers come back: "JSON" or "SSE".
    pub fn answer(&self) -> &'static str {
        self.expect.as_str()
    }
}

pub struct Spec {
    pub id: &'static str,
    srv: Srv,
    mode: Mode,
    progress: bool,
    expect: Answer,
    /// The rmcp row doing the same work, for the ratios.
    pub vs: Option<&'static str>,
    /// The TypeScript row doing the same work.
    pub vs_ts: Option<&'static str>,
    /// The Python row doing the same work.
    pub vs_py: Option<&'static str>,
    pub note: &'static str,
}

const SPECS: &[Spec] = &[
    Spec {
        id: "floor",
        srv: Srv::Floor,
        mode: Mode::Raw,
        progress: false,
        expect: Answer::Json,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "hyper HTTP/1 server answering a fixed JSON body (no MCP)",
    },
    Spec {
        id: "moat-session-json",
        srv: Srv::Moat,
        mode: Mode::Session,
        progress: false,
        expect: Answer::Json,
        vs: Some("rmcp-session-sse"),
        vs_ts: Some("ts-session-json"),
        vs_py: Some("py-session-json"),
        note: "session (2025-11-25); a plain answer goes out as JSON",
    },
    Spec {
        id: "rmcp-session-sse",
        srv: Srv::Rmcp,
        mode: Mode::Session,
        progress: false,
        expect: Answer::Sse,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "session (2025-11-25); rmcp streams every answer in a session",
    },
    Spec {
        id: "moat-session-sse",
        srv: Srv::Moat,
        mode: Mode::Session,
        progress: true,
        expect: Answer::Sse,
        vs: Some("rmcp-session-sse-progress"),
        vs_ts: Some("ts-session-sse-progress"),
        vs_py: Some("py-session-sse-progress"),
        note: "session; echo_progress: progress notification + answer, SSE",
    },
    Spec {
        id: "rmcp-session-sse-progress",
        srv: Srv::Rmcp,
        mode: Mode::Session,
        progress: true,
        expect: Answer::Sse,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "session; echo_progress: progress notification + answer, SSE",
    },
    Spec {
        id: "moat-2026-json",
        srv: Srv::Moat,
        mode: Mode::Modern,
        progress: false,
        expect: Answer::Json,
        vs: Some("rmcp-2026-json"),
        vs_ts: None,
        vs_py: Some("py-2026-json"),
        note: "stateless 2026-07-28; plain answer, JSON",
    },
    Spec {
        id: "rmcp-2026-json",
        srv: Srv::RmcpJson,
        mode: Mode::Modern,
        progress: false,
        expect: Answer::Json,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "stateless 2026-07-28; json_response = true, JSON",
    },
    Spec {
        id: "moat-2026-sse",
        srv: Srv::Moat,
        mode: Mode::Modern,
        progress: true,
        expect: Answer::Sse,
        vs: Some("rmcp-2026-sse-progress"),
        vs_ts: None,
        vs_py: Some("py-2026-sse-progress"),
        note: "stateless 2026-07-28; echo_progress, SSE",
    },
    Spec {
        id: "rmcp-2026-sse-progress",
        srv: Srv::Rmcp,
        mode: Mode::Modern,
        progress: true,
        expect: Answer::Sse,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "stateless 2026-07-28; echo_progress, SSE",
    },
    Spec {
        id: "rmcp-2026-sse",
        srv: Srv::Rmcp,
        mode: Mode::Modern,
        progress: false,
        expect: Answer::Sse,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "stateless 2026-07-28; rmcp's default (json_response = false) streams a plain answer",
    },
    Spec {
        id: "rmcp-stateless-2025-json",
        srv: Srv::RmcpStateless,
        mode: Mode::Sessionless,
        progress: false,
        expect: Answer::Json,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "rmcp legacy_session_mode = false + json_response: 2025-11-25 requests, no session (moat has no such mode)",
    },
    Spec {
        id: "ts-session-json",
        srv: Srv::TsJson,
        mode: Mode::Session,
        progress: false,
        expect: Answer::Json,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "TypeScript SDK 1.x, session (2025-11-25); enableJsonResponse, JSON",
    },
    Spec {
        id: "ts-session-sse-progress",
        srv: Srv::Ts,
        mode: Mode::Session,
        progress: true,
        expect: Answer::Sse,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "TypeScript SDK 1.x, session; echo_progress, SSE (its default)",
    },
    Spec {
        id: "py-session-json",
        srv: Srv::PyJson,
        mode: Mode::Session,
        progress: false,
        expect: Answer::Json,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "Python SDK, session (2025-11-25); json_response, JSON",
    },
    Spec {
        id: "py-session-sse-progress",
        srv: Srv::Py,
        mode: Mode::Session,
        progress: true,
        expect: Answer::Sse,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "Python SDK, session; echo_progress, SSE (its default)",
    },
    Spec {
        id: "py-2026-json",
        srv: Srv::PyJson,
        mode: Mode::Modern,
        progress: false,
        expect: Answer::Json,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "Python SDK, stateless 2026-07-28; json_response, JSON",
    },
    Spec {
        id: "py-2026-sse-progress",
        srv: Srv::Py,
        mode: Mode::Modern,
        progress: true,
        expect: Answer::Sse,
        vs: None,
        vs_ts: None,
        vs_py: None,
        note: "Python SDK, stateless 2026-07-28; echo_progress, SSE",
    },
];

#[derive(Default)]
pub struct Measured {
    pub samples: Vec<Duration>,
    /// Median latency of each round, µs.
    round_median_us: Vec<f64>,
    one: Vec<f64>,
    many: Vec<f64>,
    /// Server CPU µs per call at N clients, per round.
    cpu: Vec<f64>,
    /// The load generator's CPU µs per call at N clients, per round.
    gen_cpu: Vec<f64>,
    pub error: Option<String>,
}

pub struct Stats {
    pub median_us: f64,
    pub mean_us: f64,
    pub p99_us: f64,
    deciles: Vec<f64>,
    /// Calls/s with 1 client (median round).
    pub one: f64,
    /// Calls/s with N clients (median round).
    pub many: f64,
    cpu: Option<f64>,
    gen_cpu: Option<f64>,
}

fn stats(m: &Measured) -> Option<Stats> {
    if m.error.is_some() || m.samples.is_empty() || m.one.is_empty() || m.many.is_empty() {
        return None;
    }
    let mut s = m.samples.clone();
    s.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    Some(Stats {
        median_us: us(s[s.len() / 2]),
        mean_us: s.iter().map(|d| us(*d)).sum::<f64>() / s.len() as f64,
        p99_us: us(s[s.len() * 99 / 100]),
        deciles: (1..10).map(|i| us(s[s.len() * i / 10])).collect(),
        one: median(m.one.clone()),
        many: median(m.many.clone()),
        cpu: (!m.cpu.is_empty()).then(|| median(m.cpu.clone())),
        gen_cpu: (!m.gen_cpu.is_empty()).then(|| median(m.gen_cpu.clone())),
    })
}

/// One row's outcome.
pub struct Row {
    pub spec: &'static Spec,
    pub stats: Option<Stats>,
    pub measured: Measured,
}

/// Everything one run measured.
pub struct Report {
    pub rows: Vec<Row>,
    /// Rows left out because their peer is not installed.
    pub skipped: Vec<&'static str>,
    pub clients: usize,
    calls: usize,
    rounds: usize,
    window: Duration,
    /// The cores' split between the servers and the load generator, when asked for.
    split: Option<Split>,
}

/// Ratios of a row against another measured in the same rounds: (latency ÷, × at 1
/// client, × at N clients, server CPU per call ÷). Each is the median of the rounds'
/// ratios, so that both sides of a ratio were measured minutes apart at most and a change
/// in the machine's load between rounds cancels out.
#[derive(Clone, Copy)]
pub struct Ratios {
    pub latency: f64,
    pub one: f64,
    pub many: f64,
    pub cpu: Option<f64>,
}

impl Report {
    fn measured(&self, id: &str) -> Option<&Measured> {
        self.rows
            .iter()
            .find(|r| r.spec.id == id && r.stats.is_some())
            .map(|r| &r.measured)
    }

    /// Row `id` against row `other`, if both were measured.
    pub fn ratios(&self, id: &str, other: Option<&str>) -> Option<Ratios> {
        let m = self.measured(id)?;
        let r = self.measured(other?)?;
        let per_round =
            |a: &[f64], b: &[f64]| median(a.iter().zip(b).map(|(a, b)| a / b).collect());
        Some(Ratios {
            latency: per_round(&m.round_median_us, &r.round_median_us),
            one: per_round(&m.one, &r.one),
            many: per_round(&m.many, &r.many),
            cpu: (m.cpu.len() == r.cpu.len() && !m.cpu.is_empty())
                .then(|| per_round(&m.cpu, &r.cpu)),
        })
    }
}

/// The rows `s` selects, and those of them that cannot run (a peer not installed).
fn selected(
    s: &Settings,
    bins: &Binaries,
    peers: &Peers,
) -> (Vec<&'static Spec>, Vec<&'static str>) {
    let mut run = Vec::new();
    let mut skipped = Vec::new();
    for sp in SPECS {
        if !s.only.is_empty() && !s.only.iter().any(|o| o == sp.id) {
            continue;
        }
        if sp.srv.is_peer() && !s.peers {
            continue;
        }
        if sp.srv.argv(bins, peers).is_some() {
            run.push(sp);
        } else {
            skipped.push(sp.id);
        }
    }
    (run, skipped)
}

/// How many steps [`run`] reports to `progress`: one per row and round.
pub fn steps(s: &Settings, bins: &Binaries, peers: &Peers) -> usize {
    selected(s, bins, peers).0.len() * s.rounds
}

/// Measure every selected row, calling `progress` before each row of each round.
pub fn run(s: &Settings, bins: &Binaries, peers: &Peers, progress: &mut dyn FnMut(&str)) -> Report {
    let (specs, skipped) = selected(s, bins, peers);
    let split = if s.split_cores {
        let split = Split::of_this_process()
            .unwrap_or_else(|e| panic!("--split-cores: cannot read this process's cores: {e}"))
            .unwrap_or_else(|| {
                panic!("--split-cores needs at least two cores; this process has one")
            });
        // The servers inherit the cores of the thread that starts them.
        pin_this_thread(&split.server);
        Some(split)
    } else {
        None
    };
    let processes: Vec<(Srv, ServerProcess)> = ALL_SRV
        .iter()
        .filter(|srv| specs.iter().any(|sp| sp.srv == **srv))
        .filter_map(|srv| {
            let argv = srv.argv(bins, peers)?;
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            let process = if srv.is_peer() {
                ServerProcess::spawn_quiet(&argv)
            } else {
                ServerProcess::spawn(&argv)
            };
            Some((*srv, process))
        })
        .collect();
    let process = |srv: Srv| {
        processes
            .iter()
            .find(|(s, _)| *s == srv)
            .map(|(_, p)| p)
            .expect("server started")
    };

    if let Some(split) = &split {
        // The generator's runtime starts its workers on the cores left to it.
        pin_this_thread(&split.generator);
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut measured: Vec<Measured> = specs.iter().map(|_| Measured::default()).collect();
    for round in 0..s.rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..specs.len()).collect()
        } else {
            (0..specs.len()).rev().collect()
        };
        for i in order {
            let sp = specs[i];
            progress(&format!(
                "http: {} (round {}/{})",
                sp.id,
                round + 1,
                s.rounds
            ));
            let m = &mut measured[i];
            if m.error.is_some() {
                continue;
            }
            let w = Workload {
                addr: process(sp.srv).addr,
                mode: sp.mode,
                progress: sp.progress,
                expect: sp.expect,
            };
            let pid = process(sp.srv).pid();
            let result = rt.block_on(async {
                let samples = http::latency(&w, s.warmup, s.calls).await?;
                let one = http::throughput(&w, 1, s.window).await?;
                let many = http::throughput_cpu(&w, s.clients, s.window, Some(pid)).await?;
                Ok::<_, http::Error>((samples, one, many))
            });
            match result {
                Ok((mut samples, one, (many, cpu, gen_cpu))) => {
                    samples.sort();
                    m.round_median_us
                        .push(samples[samples.len() / 2].as_secs_f64() * 1e6);
                    m.samples.extend(samples);
                    m.one.push(one);
                    m.many.push(many);
                    m.cpu.extend(cpu);
                    m.gen_cpu.extend(gen_cpu);
                }
                Err(e) => {
                    eprintln!("{}: {e}", sp.id);
                    m.error = Some(e);
                }
            }
        }
    }
    let rows = specs
        .into_iter()
        .zip(measured)
        .map(|(spec, measured)| Row {
            spec,
            stats: stats(&measured),
            measured,
        })
        .collect();
    Report {
        rows,
        skipped,
        clients: s.clients,
        calls: s.calls,
        rounds: s.rounds,
        window: s.window,
        split,
    }
}

/// The rows as JSON.
pub fn to_json(report: &Report) -> Value {
    let rows: Vec<Value> = report
        .rows
        .iter()
        .map(|row| {
            let sp = row.spec;
            let Some(st) = &row.stats else {
                return json!({ "id": sp.id, "note": sp.note, "error": row.measured.error });
            };
            let r = report.ratios(sp.id, sp.vs);
            let ts = report.ratios(sp.id, sp.vs_ts);
            let py = report.ratios(sp.id, sp.vs_py);
            json!({
                "id": sp.id, "note": sp.note, "answer": sp.expect.as_str(),
                "median_us": st.median_us, "mean_us": st.mean_us, "p99_us": st.p99_us,
                "deciles_us": st.deciles,
                "calls_per_s_1": st.one, "calls_per_s_n": st.many,
                "vs": sp.vs,
                "latency_vs_rmcp": r.map(|r| r.latency),
                "throughput_1_vs_rmcp": r.map(|r| r.one),
                "throughput_n_vs_rmcp": r.map(|r| r.many),
                "server_cpu_us_per_call_n": st.cpu,
                "server_cpu_vs_rmcp": r.and_then(|r| r.cpu),
                "load_generator_cpu_us_per_call_n": st.gen_cpu,
                "vs_ts": sp.vs_ts,
                "throughput_n_vs_ts": ts.map(|r| r.many),
                "vs_py": sp.vs_py,
                "throughput_n_vs_py": py.map(|r| r.many),
            })
        })
        .collect();
    json!({
        "settings": {
            "sequential_calls_per_round": report.calls, "rounds": report.rounds,
            "window_ms": report.window.as_millis() as u64, "clients": report.clients,
            "server_cores": report.split.as_ref().map(|s| &s.server),
            "generator_cores": report.split.as_ref().map(|s| &s.generator),
        },
        "rows": rows,
        "skipped": report.skipped,
    })
}

/// The table, as the `http` subcommand prints it.
pub fn print_table(report: &Report) {
    println!(
        "Streamable HTTP on loopback: tools/call of `echo` ({} rounds; per round {} sequential calls, \
         then calls/s over {} ms at 1 and at {} clients; latency pooled, calls/s and server CPU \
         median round, ratios median of the rounds' ratios).\n",
        report.rounds,
        report.calls,
        report.window.as_millis(),
        report.clients
    );
    if let Some(split) = &report.split {
        println!(
            "Cores split: the servers on {}, the load generator on {}.\n",
            describe(&split.server),
            describe(&split.generator)
        );
    }
    let n = report.clients;
    let head = [
        "row".to_owned(),
        "answer".to_owned(),
        "median µs".to_owned(),
        "p99 µs".to_owned(),
        "calls/s 1".to_owned(),
        format!("calls/s {n}"),
        format!("srv CPU µs/call {n}"),
        format!("gen CPU µs/call {n}"),
        "lat ÷ rmcp".to_owned(),
        "× rmcp 1".to_owned(),
        format!("× rmcp {n}"),
        "CPU ÷ rmcp".to_owned(),
        "vs".to_owned(),
    ];
    println!("| {} |", head.join(" | "));
    println!("|---|---|{}---|", "---:|".repeat(head.len() - 3));
    for row in &report.rows {
        let sp = row.spec;
        let Some(st) = &row.stats else {
            println!(
                "| {} | error: {} |",
                sp.id,
                row.measured.error.as_deref().unwrap_or("no data")
            );
            continue;
        };
        let r = report.ratios(sp.id, sp.vs);
        let f = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{x:.2}"));
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
            sp.id,
            sp.expect.as_str(),
            st.median_us,
            st.p99_us,
            st.one,
            st.many,
            st.cpu.map_or("-".to_owned(), |c| format!("{c:.1}")),
            st.gen_cpu.map_or("-".to_owned(), |c| format!("{c:.1}")),
            f(r.map(|r| r.latency)),
            f(r.map(|r| r.one)),
            f(r.map(|r| r.many)),
            f(r.and_then(|r| r.cpu)),
            sp.vs.unwrap_or("")
        );
    }
    println!();
    for row in &report.rows {
        let sp = row.spec;
        let (Some(st), Some(vs)) = (&row.stats, sp.vs) else {
            continue;
        };
        let Some(r) = report.ratios(sp.id, sp.vs) else {
            continue;
        };
        println!(
            "{}: throughput >= 2x {vs} at {} clients: {:.2}x -> {}; median latency < 100 µs: {:.1} -> {}",
            sp.id,
            report.clients,
            r.many,
            if r.many >= 2.0 { "MET" } else { "NOT MET" },
            st.median_us,
            if st.median_us < 100.0 {
                "MET"
            } else {
                "NOT MET"
            },
        );
    }
    println!("\nrows: ");
    for row in &report.rows {
        println!("  {:<25} {}", row.spec.id, row.spec.note);
    }
}

pub fn main(args: Args) {
    let s = Settings::from(args);
    let bins = Binaries::beside_current_exe();
    let peers = if s.peers {
        Peers::find()
    } else {
        Peers::default()
    };
    let report = run(&s, &bins, &peers, &mut |_| {});
    for id in &report.skipped {
        eprintln!("{id}: skipped ({})", moat_bench::peers::INSTALL_HINT);
    }
    if s.json {
        let mut out = to_json(&report);
        // The shape this subcommand has always printed: the rows under "http".
        if let Some(obj) = out.as_object_mut()
            && let Some(rows) = obj.remove("rows")
        {
            obj.insert("http".to_owned(), rows);
        }
        println!("{}", serde_json::to_string_pretty(&out).expect("json"));
        return;
    }
    print_table(&report);
}
