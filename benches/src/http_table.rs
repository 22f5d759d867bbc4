//! `moat-bench http`: Streamable HTTP on loopback, moat's server against rmcp's doing the
//! same work, in one run, with a raw hyper floor. For each row: single-client latency
//! (sequential calls, median and p99) and calls per second at 1 and at N concurrent
//! clients (default 64), each client on its own keep-alive connection (and, in the
//! handshake era, its own session). Rounds interleave the rows (moat next to its rmcp
//! counterpart, order reversed every other round); latency samples are pooled over the
//! rounds, throughput is the median round, and each ratio against rmcp is the median of
//! the rounds' ratios.

use std::time::Duration;

use moat_bench::Binaries;
use moat_bench::http::{self, Answer, Mode, ServerProcess, Workload};
use serde_json::{Value, json};

struct Settings {
    json: bool,
    calls: usize,
    warmup: usize,
    rounds: usize,
    window: Duration,
    clients: usize,
    only: Vec<String>,
}

fn settings() -> Settings {
    let mut s = Settings {
        json: false,
        calls: 1000,
        warmup: 100,
        rounds: 5,
        window: Duration::from_millis(400),
        clients: 64,
        only: Vec::new(),
    };
    let mut args = std::env::args().skip(2);
    while let Some(arg) = args.next() {
        let mut number = || -> usize {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{arg} needs a number"))
        };
        match arg.as_str() {
            "--json" => s.json = true,
            "--calls" => s.calls = number(),
            "--warmup" => s.warmup = number(),
            "--rounds" => s.rounds = number().max(1),
            "--window-ms" => s.window = Duration::from_millis(number() as u64),
            "--clients" => s.clients = number().max(1),
            "--only" => s.only.extend(
                args.next()
                    .expect("--only needs row ids")
                    .split(',')
                    .map(str::to_owned),
            ),
            "-h" | "--help" => {
                println!(
                    "moat-bench http [--json] [--calls N (sequential calls per round, default 1000)] \
                     [--warmup N (default 100)] [--rounds N (default 5)] [--window-ms N (throughput window, default 400)] \
                     [--clients N (concurrent clients, default 64)] [--only ROW[,ROW…] (row ids, for profiling)]"
                );
                std::process::exit(0);
            }
            other => panic!("unknown argument {other}"),
        }
    }
    s
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Srv {
    Floor,
    Moat,
    Rmcp,
    RmcpJson,
    RmcpStateless,
}

struct Spec {
    id: &'static str,
    srv: Srv,
    mode: Mode,
    progress: bool,
    expect: Answer,
    /// The rmcp row doing the same work, for the ratios.
    vs: Option<&'static str>,
    note: &'static str,
}

const SPECS: &[Spec] = &[
    Spec {
        id: "floor",
        srv: Srv::Floor,
        mode: Mode::Raw,
        progress: false,
        expect: Answer::Json,
        vs: None,
        note: "hyper HTTP/1 server answering a fixed JSON body (no MCP)",
    },
    Spec {
        id: "moat-session-json",
        srv: Srv::Moat,
        mode: Mode::Session,
        progress: false,
        expect: Answer::Json,
        vs: Some("rmcp-session-sse"),
        note: "session (2025-11-25); a plain answer goes out as JSON",
    },
    Spec {
        id: "rmcp-session-sse",
        srv: Srv::Rmcp,
        mode: Mode::Session,
        progress: false,
        expect: Answer::Sse,
        vs: None,
        note: "session (2025-11-25); rmcp streams every answer in a session",
    },
    Spec {
        id: "moat-session-sse",
        srv: Srv::Moat,
        mode: Mode::Session,
        progress: true,
        expect: Answer::Sse,
        vs: Some("rmcp-session-sse-progress"),
        note: "session; echo_progress: progress notification + answer, SSE",
    },
    Spec {
        id: "rmcp-session-sse-progress",
        srv: Srv::Rmcp,
        mode: Mode::Session,
        progress: true,
        expect: Answer::Sse,
        vs: None,
        note: "session; echo_progress: progress notification + answer, SSE",
    },
    Spec {
        id: "moat-2026-json",
        srv: Srv::Moat,
        mode: Mode::Modern,
        progress: false,
        expect: Answer::Json,
        vs: Some("rmcp-2026-json"),
        note: "stateless 2026-07-28; plain answer, JSON",
    },
    Spec {
        id: "rmcp-2026-json",
        srv: Srv::RmcpJson,
        mode: Mode::Modern,
        progress: false,
        expect: Answer::Json,
        vs: None,
        note: "stateless 2026-07-28; json_response = true, JSON",
    },
    Spec {
        id: "moat-2026-sse",
        srv: Srv::Moat,
        mode: Mode::Modern,
        progress: true,
        expect: Answer::Sse,
        vs: Some("rmcp-2026-sse-progress"),
        note: "stateless 2026-07-28; echo_progress, SSE",
    },
    Spec {
        id: "rmcp-2026-sse-progress",
        srv: Srv::Rmcp,
        mode: Mode::Modern,
        progress: true,
        expect: Answer::Sse,
        vs: None,
        note: "stateless 2026-07-28; echo_progress, SSE",
    },
    Spec {
        id: "rmcp-2026-sse",
        srv: Srv::Rmcp,
        mode: Mode::Modern,
        progress: false,
        expect: Answer::Sse,
        vs: None,
        note: "stateless 2026-07-28; rmcp's default (json_response = false) streams a plain answer",
    },
    Spec {
        id: "rmcp-stateless-2025-json",
        srv: Srv::RmcpStateless,
        mode: Mode::Sessionless,
        progress: false,
        expect: Answer::Json,
        vs: None,
        note: "rmcp legacy_session_mode = false + json_response: 2025-11-25 requests, no session (moat has no such mode)",
    },
];

#[derive(Default)]
struct Measured {
    samples: Vec<Duration>,
    /// Median latency of each round, µs.
    round_median_us: Vec<f64>,
    one: Vec<f64>,
    many: Vec<f64>,
    /// Server CPU µs per call at N clients, per round.
    cpu: Vec<f64>,
    /// The load generator's CPU µs per call at N clients, per round.
    gen_cpu: Vec<f64>,
    error: Option<String>,
}

struct Stats {
    median_us: f64,
    mean_us: f64,
    p99_us: f64,
    deciles: Vec<f64>,
    one: f64,
    many: f64,
    cpu: Option<f64>,
    gen_cpu: Option<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
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

pub fn main() {
    let s = settings();
    let bins = Binaries::beside_current_exe();
    let specs: Vec<&Spec> = SPECS
        .iter()
        .filter(|sp| s.only.is_empty() || s.only.iter().any(|o| o == sp.id))
        .collect();
    let needs = |srv: Srv| specs.iter().any(|sp| sp.srv == srv);
    let start = |srv: Srv, argv: &[&str]| needs(srv).then(|| ServerProcess::spawn(argv));
    let floor = start(Srv::Floor, &[&bins.http_floor, "127.0.0.1:0"]);
    let moat = start(Srv::Moat, &[&bins.moat_server, "--http", "127.0.0.1:0"]);
    let rmcp = start(Srv::Rmcp, &[&bins.rmcp_server, "--http", "127.0.0.1:0"]);
    let rmcp_json = start(
        Srv::RmcpJson,
        &[
            &bins.rmcp_server,
            "--http",
            "127.0.0.1:0",
            "--json-response",
        ],
    );
    let rmcp_stateless = start(
        Srv::RmcpStateless,
        &[
            &bins.rmcp_server,
            "--http",
            "127.0.0.1:0",
            "--stateless",
            "--json-response",
        ],
    );
    let process = |srv: Srv| {
        match srv {
            Srv::Floor => &floor,
            Srv::Moat => &moat,
            Srv::Rmcp => &rmcp,
            Srv::RmcpJson => &rmcp_json,
            Srv::RmcpStateless => &rmcp_stateless,
        }
        .as_ref()
        .expect("server started")
    };

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

    let all: Vec<(&Spec, Option<Stats>, &Measured)> = specs
        .iter()
        .zip(&measured)
        .map(|(sp, m)| (*sp, stats(m), m))
        .collect();
    let find = |id: &str| {
        all.iter()
            .find(|(sp, st, _)| sp.id == id && st.is_some())
            .map(|(_, _, m)| *m)
    };
    // (latency ÷ rmcp's, × rmcp at 1 client, × rmcp at N clients, server CPU per call ÷
    // rmcp's): each the median of the
    // rounds' ratios, so that both sides of a ratio were measured minutes apart at most
    // and a change in the machine's load between rounds cancels out.
    let ratios = |sp: &Spec, _: &Stats| {
        let m = find(sp.id)?;
        let r = find(sp.vs?)?;
        let per_round =
            |a: &[f64], b: &[f64]| median(a.iter().zip(b).map(|(a, b)| a / b).collect());
        Some((
            per_round(&m.round_median_us, &r.round_median_us),
            per_round(&m.one, &r.one),
            per_round(&m.many, &r.many),
            (m.cpu.len() == r.cpu.len() && !m.cpu.is_empty()).then(|| per_round(&m.cpu, &r.cpu)),
        ))
    };

    if s.json {
        let rows: Vec<Value> = all
            .iter()
            .map(|(sp, st, m)| {
                let Some(st) = st else {
                    return json!({ "id": sp.id, "note": sp.note, "error": m.error });
                };
                let r = ratios(sp, st);
                json!({
                    "id": sp.id, "note": sp.note, "answer": sp.expect.as_str(),
                    "median_us": st.median_us, "mean_us": st.mean_us, "p99_us": st.p99_us,
                    "deciles_us": st.deciles,
                    "calls_per_s_1": st.one, "calls_per_s_n": st.many,
                    "vs": sp.vs,
                    "latency_vs_rmcp": r.map(|r| r.0),
                    "throughput_1_vs_rmcp": r.map(|r| r.1),
                    "throughput_n_vs_rmcp": r.map(|r| r.2),
                    "server_cpu_us_per_call_n": st.cpu,
                    "server_cpu_vs_rmcp": r.and_then(|r| r.3),
                    "load_generator_cpu_us_per_call_n": st.gen_cpu,
                })
            })
            .collect();
        let out = json!({
            "settings": {
                "sequential_calls_per_round": s.calls, "rounds": s.rounds,
                "window_ms": s.window.as_millis() as u64, "clients": s.clients,
            },
            "http": rows,
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("json"));
        return;
    }

    println!(
        "Streamable HTTP on loopback: tools/call of `echo` ({} rounds; per round {} sequential calls, \
         then calls/s over {} ms at 1 and at {} clients; latency pooled, calls/s and server CPU \
         median round, ratios median of the rounds' ratios).\n",
        s.rounds,
        s.calls,
        s.window.as_millis(),
        s.clients
    );
    let n = s.clients;
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
    for (sp, st, m) in &all {
        let Some(st) = st else {
            println!(
                "| {} | error: {} |",
                sp.id,
                m.error.as_deref().unwrap_or("no data")
            );
            continue;
        };
        let r = ratios(sp, st);
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
            f(r.map(|r| r.0)),
            f(r.map(|r| r.1)),
            f(r.map(|r| r.2)),
            f(r.and_then(|r| r.3)),
            sp.vs.unwrap_or("")
        );
    }
    println!();
    for (sp, st, _) in &all {
        let (Some(st), Some(vs)) = (st, sp.vs) else {
            continue;
        };
        let Some(r) = ratios(sp, st) else { continue };
        println!(
            "{}: throughput >= 2x {vs} at {} clients: {:.2}x -> {}; median latency < 100 µs: {:.1} -> {}",
            sp.id,
            s.clients,
            r.2,
            if r.2 >= 2.0 { "MET" } else { "NOT MET" },
            st.median_us,
            if st.median_us < 100.0 {
                "MET"
            } else {
                "NOT MET"
            },
        );
    }
    println!("\nrows: ");
    for sp in &specs {
        println!("  {:<25} {}", sp.id, sp.note);
    }
}
