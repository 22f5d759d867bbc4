//! End-to-end round trips over real pipes to real child processes: `tools/call` of a trivial
//! `echo` tool, client -> server -> client.
//!
//! - `floor`: a line-echo program, one line written and one read (two pipe hops, nothing else);
//! - `moat`: moat's client -> moat's server; `rmcp`: rmcp's client -> rmcp's server (and
//!   `rmcp (stdio_pipes)`: the same on rmcp's non-blocking pipe transport);
//! - `moat->rmcp`, `rmcp->moat`: the mixed pairs;
//! - `ts`: the TypeScript reference server (`server-everything`), through moat's client,
//!   when the interop peers are installed.
//!
//! `roundtrip/*` times sequential calls (one at a time); `pipelined/*` times rounds of
//! [`INFLIGHT`] calls in flight at once and reports calls per second.

use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use moat_bench::{Floor, moat_side, rmcp_side, ts_server_path};

const LINE_ECHO: &str = env!("CARGO_BIN_EXE_line-echo");
const MOAT_SERVER: &str = env!("CARGO_BIN_EXE_moat-bench-server");
const RMCP_SERVER: &str = env!("CARGO_BIN_EXE_rmcp-bench-server");

/// Calls in flight at once in the pipelined benches.
const INFLIGHT: usize = 1000;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().expect("runtime")
}

/// One client connected to its server, for the whole run.
struct Clients {
    moat: moat::Client,
    rmcp: rmcp_side::RmcpClient,
    rmcp_pipes: rmcp_side::RmcpClient,
    moat_rmcp: moat::Client,
    rmcp_moat: rmcp_side::RmcpClient,
    ts: Option<moat::Client>,
}

fn connect_all(rt: &tokio::runtime::Runtime) -> Clients {
    rt.block_on(async {
        let ts = match ts_server_path() {
            Some(path) => Some(moat_side::connect(&["node", path.as_str(), "stdio"]).await),
            None => {
                eprintln!("TypeScript reference server not installed; `ts` skipped");
                None
            }
        };
        Clients {
            moat: moat_side::connect(&[MOAT_SERVER]).await,
            rmcp: rmcp_side::connect(&[RMCP_SERVER]).await,
            rmcp_pipes: rmcp_side::connect(&[RMCP_SERVER, "--pipes"]).await,
            moat_rmcp: moat_side::connect(&[RMCP_SERVER]).await,
            rmcp_moat: rmcp_side::connect(&[MOAT_SERVER]).await,
            ts,
        }
    })
}

/// Sequential calls: criterion divides the time by the number of calls.
macro_rules! sequential {
    ($g:expr, $rt:expr, $name:expr, $side:ident, $client:expr) => {
        $g.bench_function($name, |b| {
            b.iter_custom(|iters| {
                $rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        $side::call($client).await;
                    }
                    start.elapsed()
                })
            })
        })
    };
}

/// Rounds of `INFLIGHT` calls in flight at once.
macro_rules! pipelined {
    ($g:expr, $rt:expr, $name:expr, $side:ident, $client:expr) => {
        $g.bench_function($name, |b| {
            b.iter_custom(|iters| {
                $rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += $side::pipelined($client, INFLIGHT).await;
                    }
                    total
                })
            })
        })
    };
}

fn configure(g: &mut BenchmarkGroup<'_, WallTime>, secs: u64, samples: usize) {
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(secs));
    g.sample_size(samples);
}

fn bench(c: &mut Criterion) {
    let rt = runtime();
    let clients = connect_all(&rt);
    let mut floor = Floor::spawn(LINE_ECHO);

    let mut g = c.benchmark_group("roundtrip");
    configure(&mut g, 3, 30);
    g.bench_function("floor", |b| b.iter(|| floor.round_trip()));
    sequential!(g, rt, "moat", moat_side, &clients.moat);
    sequential!(g, rt, "rmcp", rmcp_side, &clients.rmcp);
    sequential!(g, rt, "rmcp (stdio_pipes)", rmcp_side, &clients.rmcp_pipes);
    sequential!(g, rt, "moat->rmcp", moat_side, &clients.moat_rmcp);
    sequential!(g, rt, "rmcp->moat", rmcp_side, &clients.rmcp_moat);
    if let Some(ts) = &clients.ts {
        sequential!(g, rt, "ts (moat client)", moat_side, ts);
    }
    g.finish();

    let mut g = c.benchmark_group("pipelined");
    configure(&mut g, 4, 10);
    g.throughput(Throughput::Elements(INFLIGHT as u64));
    g.bench_function("floor", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| floor.pipelined(INFLIGHT)).sum())
    });
    pipelined!(g, rt, "moat", moat_side, &clients.moat);
    pipelined!(g, rt, "rmcp", rmcp_side, &clients.rmcp);
    pipelined!(g, rt, "rmcp (stdio_pipes)", rmcp_side, &clients.rmcp_pipes);
    pipelined!(g, rt, "moat->rmcp", moat_side, &clients.moat_rmcp);
    pipelined!(g, rt, "rmcp->moat", rmcp_side, &clients.rmcp_moat);
    if let Some(ts) = &clients.ts {
        pipelined!(g, rt, "ts (moat client)", moat_side, ts);
    }
    g.finish();
    drop(clients);
}

criterion_group!(benches, bench);
criterion_main!(benches);
