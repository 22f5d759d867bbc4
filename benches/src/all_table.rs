//! `moat-bench all`: every comparison in one run, moat against rmcp, the TypeScript SDK and
//! the Python SDK, with a progress display on stderr and the tables (or `--json`) on
//! stdout at the end, and with `--plots DIR` the SVG plots.
//!
//! Parts, in order:
//! 1. stdio: per stack, sequential `tools/call` latency (one client) and calls/s with 1,
//!    64 and 1000 calls in flight, next to the line-echo floor (two pipe hops, no MCP);
//! 2. catalog: `tools/list` of a 100-tool catalog and `resources/read` of a 1 MiB text
//!    resource, sequential;
//! 3. Streamable HTTP: the `http` table's rows plus the peers' (see `http_table`);
//! 4. memory: peak RSS of each server idle after `initialize` on stdio, and of each HTTP
//!    server after 1,000 sessions were opened and left open.
//!
//! Parts 1 and 2 go in rounds: each round visits every stack (order reversed every other
//! round) so a change in the machine's load lands on all of them alike. Latency samples are
//! pooled over the rounds; calls/s is the median round. moat's client drives moat's, the
//! TypeScript and the Python servers; rmcp's client drives rmcp's (each SDK as its users
//! run it, so the TS and Python rows measure those SDKs' servers).

use std::sync::Arc;
use std::time::{Duration, Instant};

use moat_bench::memory::{self, Rss, SessionsRss};
use moat_bench::peers::{INSTALL_HINT, Peers};
use moat_bench::progress::Progress;
use moat_bench::stats::{self, Latency, median};
use moat_bench::stdio::{ClientKind, StdioClient};
use moat_bench::svg::{Axis, Chart, Series};
use moat_bench::{BLOB_BYTES, Binaries, CATALOG_TOOLS, Floor};
use serde_json::{Value, json};

use super::http_table;

/// The options of `moat-bench all`.
#[derive(clap::Args)]
#[command(after_help = "\
Runs, in order (a few minutes with the defaults):
  stdio    tools/call of `echo` over pipes: latency of sequential calls, and calls/s with
           1, 64 and 1000 calls in flight; the line-echo floor beside the stacks
  catalog  tools/list of 100 tools, resources/read of a 1 MiB text resource
  http     Streamable HTTP: sessions and stateless 2026-07-28, JSON and SSE answers,
           1 and 64 clients (the rows of `moat-bench http`, plus the TS and Python SDKs)
  memory   peak RSS of each server idle after initialize (stdio), and of each HTTP server
           holding 1000 open sessions

The TypeScript and Python rows need the interop peers; without them those rows are skipped.
Install them with `bash .ci/run --install-only`, or pass --install-peers.

More rounds for steadier figures: --rounds 7 --calls 3000 (about three times as long).")]
pub struct Args {
    /// First run `bash .ci/run --install-only` (npm and pip into interop/; needs node >= 20,
    /// npm and python3; a no-op when already installed).
    #[arg(long = "install-peers")]
    install: bool,
    /// Print JSON (every figure, plus latency deciles) instead of tables.
    #[arg(long)]
    json: bool,
    /// Write SVG plots there (stdio latency CDF, stdio calls/s against calls in flight, HTTP
    /// latency CDF, HTTP calls/s against clients).
    #[arg(long, value_name = "DIR")]
    plots: Option<String>,
    /// Rounds of the stdio and catalog parts, and of the HTTP part.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = crate::positive)]
    rounds: usize,
    /// Sequential stdio calls per stack and round.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = crate::positive)]
    calls: usize,
    /// Calls per pipelined batch.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = crate::positive)]
    pipelined: usize,
    /// Calls in flight for the pipelined batches.
    #[arg(long, value_name = "A,B,..", value_delimiter = ',', default_values_t = [1, 64, 1000])]
    inflight: Vec<usize>,
    /// tools/list calls per stack and round.
    #[arg(long = "list-calls", value_name = "N", default_value_t = 100, value_parser = crate::positive)]
    list_calls: usize,
    /// 1 MiB reads per stack and round.
    #[arg(long = "blob-reads", value_name = "N", default_value_t = 10, value_parser = crate::positive)]
    blob_reads: usize,
    /// Sequential HTTP calls per row and round.
    #[arg(long = "http-calls", value_name = "N", default_value_t = 300, value_parser = crate::positive)]
    http_calls: usize,
    /// HTTP throughput window, in milliseconds.
    #[arg(long = "window-ms", value_name = "N", default_value_t = 300, value_parser = crate::positive)]
    window_ms: usize,
    /// Concurrent HTTP clients.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = crate::positive)]
    clients: usize,
    /// HTTP sessions opened for the memory part.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    sessions: usize,
    /// Leave parts out: stdio, catalog, http, memory.
    #[arg(long, value_name = "PART,..", value_delimiter = ',')]
    skip: Vec<String>,
    /// Only these stacks in stdio, catalog and memory: floor, moat, rmcp, ts, py.
    #[arg(long, value_name = "STACK,..", value_delimiter = ',')]
    only: Vec<String>,
}

struct Settings {
    install: bool,
    json: bool,
    plots: Option<String>,
    rounds: usize,
    calls: usize,
    pipelined: usize,
    inflight: Vec<usize>,
    list_calls: usize,
    blob_reads: usize,
    sessions: usize,
    skip: Vec<String>,
    only: Vec<String>,
    http: http_table::Settings,
}

impl Settings {
    fn part(&self, name: &str) -> bool {
        !self.skip.iter().any(|s| s == name)
    }

    fn stack(&self, id: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == id)
    }
}

impl From<Args> for Settings {
    fn from(a: Args) -> Settings {
        Settings {
            install: a.install,
            json: a.json,
            plots: a.plots,
            rounds: a.rounds,
            calls: a.calls,
            pipelined: a.pipelined,
            inflight: a.inflight,
            list_calls: a.list_calls,
            blob_reads: a.blob_reads,
            sessions: a.sessions,
            skip: a.skip,
            only: a.only,
            http: http_table::Settings {
                calls: a.http_calls,
                warmup: 50,
                rounds: a.rounds,
                window: Duration::from_millis(a.window_ms as u64),
                clients: a.clients,
                peers: true,
                ..Default::default()
            },
        }
    }
}

/// A server on stdio and the client that drives it.
struct Stack {
    id: &'static str,
    note: &'static str,
    kind: ClientKind,
    /// The server's command line, without `--catalog`.
    argv: Vec<String>,
}

fn stacks(bins: &Binaries, peers: &Peers, progress: &mut Progress) -> Vec<Stack> {
    let mut v = vec![
        Stack {
            id: "moat",
            note: "moat client -> moat server",
            kind: ClientKind::Moat,
            argv: vec![bins.moat_server.clone()],
        },
        Stack {
            id: "rmcp",
            note: "rmcp client -> rmcp server (its default stdio())",
            kind: ClientKind::Rmcp,
            argv: vec![bins.rmcp_server.clone()],
        },
    ];
    match &peers.ts {
        Some(argv) => v.push(Stack {
            id: "ts",
            note: "moat client -> TypeScript SDK server (node)",
            kind: ClientKind::Moat,
            argv: argv.clone(),
        }),
        None => progress.note(&format!("TypeScript rows skipped: {INSTALL_HINT}")),
    }
    match &peers.py {
        Some(argv) => v.push(Stack {
            id: "py",
            note: "moat client -> Python SDK server (CPython)",
            kind: ClientKind::Moat,
            argv: argv.clone(),
        }),
        None => progress.note(&format!("Python rows skipped: {INSTALL_HINT}")),
    }
    v
}

/// What parts 1 and 2 measured for one stack (or the floor).
#[derive(Default)]
struct Measured {
    samples: Vec<Duration>,
    /// Per in-flight setting (same order as the settings), the duration of each round's batch.
    batches: Vec<Vec<Duration>>,
    list: Vec<Duration>,
    blob: Vec<Duration>,
    error: Option<String>,
}

impl Measured {
    fn calls_per_s(&self, i: usize, per_batch: usize) -> Option<f64> {
        let b = self.batches.get(i).filter(|b| !b.is_empty())?;
        Some(median(
            b.iter()
                .map(|d| per_batch as f64 / d.as_secs_f64())
                .collect(),
        ))
    }
}

struct Memory {
    id: &'static str,
    idle: Result<Rss, String>,
    sessions: Option<Result<SessionsRss, String>>,
}

pub fn main(args: Args) {
    let s = Settings::from(args);
    let bins = Binaries::beside_current_exe();
    if s.install
        && let Err(e) = moat_bench::peers::install()
    {
        eprintln!("installing the peers failed ({e}); their rows will be skipped");
    }
    let peers = Peers::find();
    // Count the steps first, for the bar.
    let mut progress = Progress::new(0);
    let stacks: Vec<Stack> = stacks(&bins, &peers, &mut progress)
        .into_iter()
        .filter(|st| s.stack(st.id))
        .collect();
    let floor_on = s.stack("floor");
    let per_round = stacks.len() * (usize::from(s.part("stdio")) + usize::from(s.part("catalog")))
        + usize::from(floor_on && s.part("stdio"));
    let http_steps = if s.part("http") {
        http_table::steps(&s.http, &bins, &peers)
    } else {
        0
    };
    let memory_steps = if s.part("memory") {
        stacks.len() * 2 + usize::from(floor_on)
    } else {
        0
    };
    let mut progress = Progress::new(1 + per_round * s.rounds + http_steps + memory_steps);

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    progress.step("starting the servers");
    let clients: Vec<Result<Arc<StdioClient>, String>> = if s.part("stdio") || s.part("catalog") {
        stacks
            .iter()
            .map(|st| {
                let mut argv = st.argv.clone();
                argv.push("--catalog".to_owned());
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                // A peer that fails to start panics in `connect`: its rows say so, and
                // the run goes on.
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    Arc::new(rt.block_on(StdioClient::connect(st.kind, &argv)))
                }))
                .map_err(|_| format!("{}: could not connect", st.id))
            })
            .collect()
    } else {
        Vec::new()
    };
    let described: Vec<String> = clients
        .iter()
        .map(|c| c.as_ref().map_or_else(|e| e.clone(), |c| c.describe()))
        .collect();
    let mut measured: Vec<Measured> = stacks
        .iter()
        .enumerate()
        .map(|(i, _)| Measured {
            batches: vec![Vec::new(); s.inflight.len()],
            error: clients.get(i).and_then(|c| c.as_ref().err().cloned()),
            ..Default::default()
        })
        .collect();
    let mut floor_m = Measured {
        batches: vec![Vec::new(); s.inflight.len()],
        ..Default::default()
    };
    let mut floor = (floor_on && s.part("stdio")).then(|| Floor::spawn(&bins.line_echo));
    if let Some(f) = &mut floor {
        for _ in 0..200 {
            f.round_trip();
        }
    }

    for round in 0..s.rounds {
        let tag = format!("round {}/{}", round + 1, s.rounds);
        if let Some(f) = &mut floor {
            progress.step(&format!("stdio: floor ({tag})"));
            for _ in 0..s.calls {
                let t = Instant::now();
                f.round_trip();
                floor_m.samples.push(t.elapsed());
            }
            for (i, k) in s.inflight.iter().enumerate() {
                floor_m.batches[i].push(f.window(*k, s.pipelined.max(*k)));
            }
        }
        let mut order: Vec<usize> = (0..stacks.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let id = stacks[i].id;
            let m = &mut measured[i];
            let Some(Ok(client)) = clients.get(i) else {
                continue;
            };
            if s.part("stdio") {
                progress.step(&format!("stdio: {id} ({tag})"));
                if m.error.is_none() {
                    let (client, calls, inflight, n) =
                        (client.clone(), s.calls, s.inflight.clone(), s.pipelined);
                    let done = rt.block_on(rt.spawn(async move {
                        for _ in 0..50 {
                            client.call().await;
                        }
                        let mut samples = Vec::with_capacity(calls);
                        for _ in 0..calls {
                            let t = Instant::now();
                            client.call().await;
                            samples.push(t.elapsed());
                        }
                        let mut batches = Vec::new();
                        for k in inflight {
                            batches.push(client.pipelined(k, n.max(k)).await);
                        }
                        (samples, batches)
                    }));
                    match done {
                        Ok((samples, batches)) => {
                            m.samples.extend(samples);
                            for (all, b) in m.batches.iter_mut().zip(batches) {
                                all.push(b);
                            }
                        }
                        Err(e) => m.error = Some(format!("stdio: {e}")),
                    }
                }
            }
            if s.part("catalog") {
                progress.step(&format!("catalog: {id} ({tag})"));
                if m.error.is_none() {
                    let (client, lists, reads) = (client.clone(), s.list_calls, s.blob_reads);
                    let done = rt.block_on(rt.spawn(async move {
                        client.list_tools().await;
                        client.read_blob().await;
                        let mut list = Vec::with_capacity(lists);
                        for _ in 0..lists {
                            let t = Instant::now();
                            client.list_tools().await;
                            list.push(t.elapsed());
                        }
                        let mut blob = Vec::with_capacity(reads);
                        for _ in 0..reads {
                            let t = Instant::now();
                            client.read_blob().await;
                            blob.push(t.elapsed());
                        }
                        (list, blob)
                    }));
                    match done {
                        Ok((list, blob)) => {
                            m.list.extend(list);
                            m.blob.extend(blob);
                        }
                        Err(e) => m.error = Some(format!("catalog: {e}")),
                    }
                }
            }
        }
    }
    drop(floor);
    // The stdio servers exit when their clients go.
    drop(clients);

    let http = s.part("http").then(|| {
        let report = http_table::run(&s.http, &bins, &peers, &mut |what| progress.step(what));
        for id in &report.skipped {
            progress.note(&format!("{id}: skipped ({INSTALL_HINT})"));
        }
        report
    });

    let mut mem: Vec<Memory> = Vec::new();
    if s.part("memory") {
        if floor_on {
            progress.step("memory: floor idle");
            mem.push(Memory {
                id: "floor",
                idle: memory::idle_stdio(&[&bins.line_echo]),
                sessions: None,
            });
        }
        for st in &stacks {
            progress.step(&format!("memory: {} idle", st.id));
            let argv: Vec<&str> = st.argv.iter().map(String::as_str).collect();
            let idle = memory::idle_stdio(&argv);
            progress.step(&format!(
                "memory: {} with {} HTTP sessions",
                st.id, s.sessions
            ));
            let mut http_argv = argv.clone();
            http_argv.extend(["--http", "127.0.0.1:0"]);
            let sessions = rt.block_on(memory::http_sessions(&http_argv, s.sessions));
            if let Err(e) = &sessions {
                progress.note(&format!("{}: sessions: {e}", st.id));
            }
            mem.push(Memory {
                id: st.id,
                idle,
                sessions: Some(sessions),
            });
        }
    }
    progress.finish();

    let out = Output {
        s: &s,
        stacks: &stacks,
        described: &described,
        measured: &measured,
        floor: floor_on.then_some(&floor_m),
        http: http.as_ref(),
        mem: &mem,
    };
    if let Some(dir) = &s.plots {
        out.plots(dir);
    }
    if s.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&out.json()).expect("json")
        );
    } else {
        out.print();
    }
}

/// Everything measured, and how to show it.
struct Output<'a> {
    s: &'a Settings,
    stacks: &'a [Stack],
    /// Per stack, the client's account of the connection (revision agreed, server name).
    described: &'a [String],
    measured: &'a [Measured],
    floor: Option<&'a Measured>,
    http: Option<&'a http_table::Report>,
    mem: &'a [Memory],
}

/// One row of the stdio and catalog tables, summarized.
struct StdioRow<'a> {
    id: &'a str,
    note: &'a str,
    m: &'a Measured,
    latency: Option<Latency>,
    list: Option<Latency>,
    blob: Option<Latency>,
}

fn f1(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), |x| format!("{x:.1}"))
}

fn f2(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), |x| format!("{x:.2}"))
}

fn f0(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), |x| format!("{x:.0}"))
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

impl Output<'_> {
    fn rows(&self) -> Vec<StdioRow<'_>> {
        let summarize = |v: &[Duration]| stats::latency(&mut v.to_vec());
        let mut rows = Vec::new();
        if let Some(m) = self.floor {
            rows.push(StdioRow {
                id: "floor",
                note: "line-echo child, blocking std I/O (no MCP)",
                m,
                latency: summarize(&m.samples),
                list: None,
                blob: None,
            });
        }
        for (st, m) in self.stacks.iter().zip(self.measured) {
            rows.push(StdioRow {
                id: st.id,
                note: st.note,
                m,
                latency: summarize(&m.samples),
                list: summarize(&m.list),
                blob: summarize(&m.blob),
            });
        }
        rows
    }

    fn batch(&self, k: usize) -> usize {
        self.s.pipelined.max(k)
    }

    /// Calls/s of row `id` at in-flight index `i`.
    fn cps(&self, rows: &[StdioRow<'_>], id: &str, i: usize) -> Option<f64> {
        let r = rows.iter().find(|r| r.id == id)?;
        r.m.calls_per_s(i, self.batch(self.s.inflight[i]))
    }

    fn median_of(rows: &[StdioRow<'_>], id: &str) -> Option<f64> {
        rows.iter()
            .find(|r| r.id == id)?
            .latency
            .map(|l| l.median_us)
    }

    /// Median above the floor's, divided by rmcp's above the floor.
    fn overhead_ratio(rows: &[StdioRow<'_>], id: &str) -> Option<f64> {
        let floor = Self::median_of(rows, "floor")?;
        let rmcp = Self::median_of(rows, "rmcp")? - floor;
        Some((Self::median_of(rows, id)? - floor) / rmcp)
    }

    fn inflight_index(&self, k: usize) -> Option<usize> {
        self.s.inflight.iter().position(|x| *x == k)
    }

    /// The targets, each as (what, figure, met).
    fn targets(&self) -> Vec<(String, String, Option<bool>)> {
        let rows = self.rows();
        let mut t = Vec::new();
        if let Some(r) = Self::overhead_ratio(&rows, "moat") {
            t.push((
                "stdio round trip: overhead above the floor <= 1/2 of rmcp's".to_owned(),
                format!("{r:.2}"),
                Some(r <= 0.5),
            ));
        }
        for k in [64, 1000] {
            let Some(i) = self.inflight_index(k) else {
                continue;
            };
            let moat = self.cps(&rows, "moat", i);
            for (peer, goal) in [("rmcp", 5.0), ("ts", 2.0)] {
                if let Some(x) = moat.zip(self.cps(&rows, peer, i)).map(|(a, b)| a / b) {
                    t.push((
                        format!("stdio pipelined, {k} in flight: >= {goal}x {peer}"),
                        format!("{x:.2}x"),
                        Some(x >= goal),
                    ));
                }
            }
        }
        if let Some(report) = self.http {
            for row in &report.rows {
                let sp = row.spec;
                for (other, goal) in [(sp.vs, 2.0), (sp.vs_ts, 10.0)] {
                    let Some(r) = report.ratios(sp.id, other) else {
                        continue;
                    };
                    t.push((
                        format!(
                            "HTTP {} clients: {} >= {goal}x {}",
                            report.clients,
                            sp.id,
                            other.unwrap_or("")
                        ),
                        format!("{:.2}x", r.many),
                        Some(r.many >= goal),
                    ));
                }
            }
        }
        if let Some(Memory { idle: Ok(rss), .. }) = self.mem.iter().find(|m| m.id == "moat") {
            t.push((
                "idle moat server peak RSS < 5 MB".to_owned(),
                format!("{:.2} MB", rss.peak_kib as f64 * 1024.0 / 1e6),
                Some(rss.peak_kib as f64 * 1024.0 < 5e6),
            ));
        }
        t
    }

    fn print(&self) {
        let s = self.s;
        let rows = self.rows();
        if s.part("stdio") {
            println!(
                "## stdio: tools/call of `echo`\n\n{} rounds; per round and stack {} sequential calls \
                 (latency pooled), then batches of {} calls kept {} in flight (calls/s: median \
                 round). \"above floor\" = median − the floor's; \"÷ rmcp's\" = that divided by \
                 rmcp's; \"× rmcp\", \"× ts\" = calls/s divided by theirs.\n",
                s.rounds,
                s.calls,
                s.pipelined,
                s.inflight
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(" / ")
            );
            let mut head = vec![
                "stack".to_owned(),
                "median µs".to_owned(),
                "p99 µs".to_owned(),
                "above floor µs".to_owned(),
                "÷ rmcp's".to_owned(),
            ];
            for k in &s.inflight {
                head.push(format!("calls/s, {k} in flight"));
            }
            for k in &s.inflight {
                if *k > 1 {
                    head.push(format!("× rmcp, {k}"));
                    head.push(format!("× ts, {k}"));
                }
            }
            println!("| {} |", head.join(" | "));
            println!("|---|{}", "---:|".repeat(head.len() - 1));
            let floor = Self::median_of(&rows, "floor");
            for r in &rows {
                let Some(l) = r.latency else {
                    println!(
                        "| {} | error: {} |",
                        r.id,
                        r.m.error.as_deref().unwrap_or("no data")
                    );
                    continue;
                };
                let mut cells = vec![
                    r.id.to_owned(),
                    format!("{:.1}", l.median_us),
                    format!("{:.1}", l.p99_us),
                    if r.id == "floor" {
                        "-".to_owned()
                    } else {
                        f1(floor.map(|f| l.median_us - f))
                    },
                    if r.id == "floor" {
                        "-".to_owned()
                    } else {
                        f2(Self::overhead_ratio(&rows, r.id))
                    },
                ];
                for i in 0..s.inflight.len() {
                    cells.push(f0(self.cps(&rows, r.id, i)));
                }
                for (i, k) in s.inflight.iter().enumerate() {
                    if *k > 1 {
                        let mine = self.cps(&rows, r.id, i);
                        for peer in ["rmcp", "ts"] {
                            cells.push(f2(mine.zip(self.cps(&rows, peer, i)).map(|(a, b)| a / b)));
                        }
                    }
                }
                println!("| {} |", cells.join(" | "));
            }
            println!();
        }
        if s.part("catalog") {
            println!(
                "## catalog: tools/list of {} tools, resources/read of {} bytes\n\n\
                 {} rounds of {} lists and {} reads per stack; \"÷ rmcp\" = median ÷ rmcp's.\n",
                CATALOG_TOOLS, BLOB_BYTES, s.rounds, s.list_calls, s.blob_reads
            );
            println!(
                "| stack | tools/list median µs | p99 µs | ÷ rmcp | 1 MiB read median µs | p99 µs | ÷ rmcp |"
            );
            println!("|---|---:|---:|---:|---:|---:|---:|");
            let rmcp = rows.iter().find(|r| r.id == "rmcp");
            for r in rows.iter().filter(|r| r.id != "floor") {
                let (Some(list), Some(blob)) = (r.list, r.blob) else {
                    println!(
                        "| {} | error: {} |",
                        r.id,
                        r.m.error.as_deref().unwrap_or("no data")
                    );
                    continue;
                };
                let lr = rmcp
                    .and_then(|x| x.list)
                    .map(|x| list.median_us / x.median_us);
                let br = rmcp
                    .and_then(|x| x.blob)
                    .map(|x| blob.median_us / x.median_us);
                println!(
                    "| {} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {} |",
                    r.id,
                    list.median_us,
                    list.p99_us,
                    f2(lr),
                    blob.median_us,
                    blob.p99_us,
                    f2(br)
                );
            }
            println!();
        }
        if let Some(report) = self.http {
            let n = report.clients;
            println!(
                "## Streamable HTTP: tools/call of `echo` on loopback\n\n{} rounds; per round and row \
                 {} sequential calls on one connection, then calls/s over {} ms with 1 and {n} \
                 clients (one connection each). Ratios: median of the rounds' ratios at {n} clients.\n",
                s.http.rounds,
                s.http.calls,
                s.http.window.as_millis()
            );
            println!(
                "| row | answer | median µs | p99 µs | calls/s, 1 | calls/s, {n} | × rmcp, {n} | × ts, {n} | × py, {n} |"
            );
            println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
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
                let x = |other| report.ratios(sp.id, other).map(|r| r.many);
                println!(
                    "| {} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {} | {} | {} |",
                    sp.id,
                    sp.answer(),
                    st.median_us,
                    st.p99_us,
                    st.one,
                    st.many,
                    f2(x(sp.vs)),
                    f2(x(sp.vs_ts)),
                    f2(x(sp.vs_py))
                );
            }
            println!();
        }
        if s.part("memory") {
            println!(
                "## memory: peak resident set (VmHWM), MiB\n\n\"idle\": the stdio server after \
                 initialize; \"HTTP\": the HTTP server after start, then with {} sessions opened \
                 and left open (\"now\": VmRSS at that point).\n",
                s.sessions
            );
            println!(
                "| server | idle peak | HTTP started, peak | {0} sessions, peak | {0} sessions, now | KiB per session |",
                s.sessions
            );
            println!("|---|---:|---:|---:|---:|---:|");
            for m in self.mem {
                let idle = match &m.idle {
                    Ok(r) => mib(r.peak_kib),
                    Err(e) => format!("error: {e}"),
                };
                let (a, b, c, d) = match &m.sessions {
                    Some(Ok(x)) => (
                        mib(x.started.peak_kib),
                        mib(x.loaded.peak_kib),
                        mib(x.loaded.now_kib),
                        format!(
                            "{:.1}",
                            x.loaded.now_kib.saturating_sub(x.started.now_kib) as f64
                                / s.sessions.max(1) as f64
                        ),
                    ),
                    Some(Err(e)) => (format!("error: {e}"), "-".into(), "-".into(), "-".into()),
                    None => ("-".into(), "-".into(), "-".into(), "-".into()),
                };
                println!("| {} | {idle} | {a} | {b} | {c} | {d} |", m.id);
            }
            println!();
        }
        println!("## targets\n");
        for (what, figure, met) in self.targets() {
            let verdict = match met {
                Some(true) => "MET",
                Some(false) => "NOT MET",
                None => "-",
            };
            println!("- {what}: {figure} -> {verdict}");
        }
        println!("\nstacks:");
        for r in &rows {
            println!("  {:<6} {}", r.id, r.note);
        }
        for (st, d) in self.stacks.iter().zip(self.described) {
            println!("  {:<6} {d}", st.id);
        }
    }

    fn json(&self) -> Value {
        let s = self.s;
        let rows = self.rows();
        let lat = |l: Option<Latency>| {
            l.map(|l| json!({ "median_us": l.median_us, "mean_us": l.mean_us, "p99_us": l.p99_us }))
        };
        let stdio: Vec<Value> = rows
            .iter()
            .map(|r| {
                let pipelined: Vec<Value> = s
                    .inflight
                    .iter()
                    .enumerate()
                    .map(|(i, k)| {
                        let mine = self.cps(&rows, r.id, i);
                        json!({
                            "inflight": k,
                            "calls_per_s": mine,
                            "vs_rmcp": mine.zip(self.cps(&rows, "rmcp", i)).map(|(a, b)| a / b),
                            "vs_ts": mine.zip(self.cps(&rows, "ts", i)).map(|(a, b)| a / b),
                        })
                    })
                    .collect();
                json!({
                    "stack": r.id, "note": r.note, "error": r.m.error,
                    "round_trip": lat(r.latency),
                    "overhead_vs_rmcp": (r.id != "floor").then(|| Self::overhead_ratio(&rows, r.id)).flatten(),
                    "pipelined": pipelined,
                    "tools_list": lat(r.list),
                    "resource_read_1mib": lat(r.blob),
                })
            })
            .collect();
        let rss = |r: &Rss| json!({ "peak_kib": r.peak_kib, "now_kib": r.now_kib });
        let memory: Vec<Value> = self
            .mem
            .iter()
            .map(|m| {
                json!({
                    "server": m.id,
                    "idle": match &m.idle { Ok(r) => rss(r), Err(e) => json!({ "error": e }) },
                    "http_sessions": match &m.sessions {
                        Some(Ok(x)) => json!({ "sessions": s.sessions, "started": rss(&x.started), "loaded": rss(&x.loaded) }),
                        Some(Err(e)) => json!({ "error": e }),
                        None => Value::Null,
                    },
                })
            })
            .collect();
        let targets: Vec<Value> = self
            .targets()
            .into_iter()
            .map(|(what, figure, met)| json!({ "target": what, "result": figure, "met": met }))
            .collect();
        json!({
            "settings": {
                "rounds": s.rounds, "sequential_calls": s.calls, "pipelined_batch": s.pipelined,
                "inflight": s.inflight, "list_calls": s.list_calls, "blob_reads": s.blob_reads,
                "sessions": s.sessions,
            },
            "stdio": stdio,
            "connections": self.stacks.iter().zip(self.described)
                .map(|(st, d)| json!({ "stack": st.id, "client": d }))
                .collect::<Vec<_>>(),
            "http": self.http.map(http_table::to_json),
            "memory": memory,
            "targets": targets,
        })
    }

    /// Write the SVG plots into `dir`.
    fn plots(&self, dir: &str) {
        let s = self.s;
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {dir}: {e}"));
        let write = |name: &str, chart: Chart| {
            let path = std::path::Path::new(dir).join(name);
            std::fs::write(&path, chart.render())
                .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        };
        let cdf = |v: &[Duration]| {
            let mut v = v.to_vec();
            v.sort();
            stats::cdf(&v, 300)
        };
        let rows = self.rows();
        if s.part("stdio") {
            write(
                "stdio-latency.svg",
                Chart {
                    title: "stdio round trip (tools/call of echo), one client".into(),
                    x: Axis {
                        title: "latency, µs (log)".into(),
                        log: true,
                    },
                    y: Axis {
                        title: "fraction of calls at or below".into(),
                        log: false,
                    },
                    series: rows
                        .iter()
                        .filter(|r| !r.m.samples.is_empty())
                        .map(|r| Series {
                            label: r.id.to_owned(),
                            points: cdf(&r.m.samples),
                        })
                        .collect(),
                    markers: false,
                },
            );
            write(
                "stdio-throughput.svg",
                Chart {
                    title: "stdio tools/call throughput against calls in flight".into(),
                    x: Axis {
                        title: "calls in flight (log)".into(),
                        log: true,
                    },
                    y: Axis {
                        title: "calls/s (log)".into(),
                        log: true,
                    },
                    series: rows
                        .iter()
                        .map(|r| Series {
                            label: r.id.to_owned(),
                            points: s
                                .inflight
                                .iter()
                                .enumerate()
                                .filter_map(|(i, k)| Some((*k as f64, self.cps(&rows, r.id, i)?)))
                                .collect(),
                        })
                        .filter(|x| !x.points.is_empty())
                        .collect(),
                    markers: true,
                },
            );
        }
        if let Some(report) = self.http {
            // The JSON rows side by side (sessions and 2026-07-28), with the floor.
            let shown = |id: &str| {
                id == "floor" || (id.ends_with("-json") && !id.starts_with("rmcp-stateless"))
            };
            let picked: Vec<&http_table::Row> = report
                .rows
                .iter()
                .filter(|r| r.stats.is_some() && shown(r.spec.id))
                .collect();
            write(
                "http-latency.svg",
                Chart {
                    title: "Streamable HTTP round trip (tools/call of echo), one client".into(),
                    x: Axis {
                        title: "latency, µs (log)".into(),
                        log: true,
                    },
                    y: Axis {
                        title: "fraction of calls at or below".into(),
                        log: false,
                    },
                    series: picked
                        .iter()
                        .map(|r| Series {
                            label: r.spec.id.to_owned(),
                            points: cdf(&r.measured.samples),
                        })
                        .collect(),
                    markers: false,
                },
            );
            write(
                "http-throughput.svg",
                Chart {
                    title: "Streamable HTTP throughput against concurrent clients".into(),
                    x: Axis {
                        title: "clients (log)".into(),
                        log: true,
                    },
                    y: Axis {
                        title: "calls/s (log)".into(),
                        log: true,
                    },
                    series: picked
                        .iter()
                        .filter_map(|r| {
                            let st = r.stats.as_ref()?;
                            Some(Series {
                                label: r.spec.id.to_owned(),
                                points: vec![(1.0, st.one), (report.clients as f64, st.many)],
                            })
                        })
                        .collect(),
                    markers: true,
                },
            );
        }
    }
}
