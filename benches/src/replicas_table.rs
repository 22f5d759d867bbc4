//! `moat-bench replicas`: `moat gateway --http` with 1, 2 and 3 replicas behind HAProxy
//! (round-robin, no stickiness), all sharing one PostgreSQL store, in one run.
//!
//! Three replicas are started once (`moat gateway --http`, one `[servers.docs]` =
//! `moat serve everything` each, `sandbox = false`, the same `--state-key-file`, the store of
//! `MOAT_BENCH_STORE_URL`), and three HAProxy processes in front of the first one, two and
//! three of them (docs/deploy.md's configuration). Each row is a URL and an era:
//!
//! - `direct-1`: the first replica's own URL, no balancer (what HAProxy itself costs);
//! - `replicas-N`: HAProxy's URL, balancing over N replicas.
//!
//! In each, moat's client calls everything's `test_simple_text` (trivial, no arguments) as
//! a handshake-era session (2025-11-25) and as 2026-07-28 requests. The balancer sends each
//! request to the next replica, so a session's requests reach the replica holding it only
//! one time in N: the others forward it there (one more HTTP hop), while a 2026-07-28
//! request is served wherever it lands.
//!
//! Rounds interleave the rows (order reversed every other round); in each round a row makes
//! N sequential calls on one client (latency, pooled over the rounds), then `--clients`
//! clients (each its own session, or its own stateless client) call in a loop for a window
//! (calls/s: the median round). "added" is the median over the rounds of (row − `direct-1`
//! in the same era), so both sides of a difference were measured seconds apart. CPU is that
//! of every replica, its downstream server and the row's HAProxy during the window, per
//! call (PostgreSQL's own is not counted). HAProxy's statistics socket says how the row's
//! requests were spread over the replicas.
//!
//! Needs `MOAT_BENCH_STORE_URL` (as the `gateway-postgres` rows) and HAProxy; says why and
//! measures nothing without them. The `moat` binary is built (`cargo build -p moat-cli`,
//! same profile) unless `MOAT_BIN` names one.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use moat::{Client, HttpOptions, ProtocolVersion, VersionPreference};
use moat_bench::http::cpu_time;
use moat_bench::progress::Progress;
use moat_bench::stats::{self, median};
use moat_test_support::listening::{Listening, mcp_authority};
use moat_test_support::raw_http::get_status;
use serde_json::{Value, json};

use crate::gateway_table::{Scratch, moat_binary, quoted};

/// The options of `moat-bench replicas`.
#[derive(clap::Args)]
#[command(
    after_help = "Rows (for --only): direct-1, replicas-1, replicas-2, replicas-3; each \
    measured as a 2025-11-25 session and as 2026-07-28 requests.\n\
    MOAT_BENCH_STORE_URL=postgres://… names the store the replicas share (required).\n\
    HAProxy must be installed (/usr/sbin/haproxy or /usr/bin/haproxy).\n\
    MOAT_BIN=PATH uses that moat binary instead of building one (cargo build -p moat-cli)."
)]
pub struct Args {
    /// Print the figures as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Sequential calls per row and round (the latency samples).
    #[arg(long, value_name = "N", default_value_t = 400, value_parser = crate::positive)]
    calls: usize,
    /// Calls per row before measuring.
    #[arg(long, value_name = "N", default_value_t = 100)]
    warmup: usize,
    /// Rounds; rows are interleaved in each (order reversed every other round).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = crate::positive)]
    rounds: usize,
    /// How long each throughput window runs, in milliseconds.
    #[arg(long = "window-ms", value_name = "N", default_value_t = 1000, value_parser = crate::positive)]
    window_ms: usize,
    /// Concurrent clients of the throughput windows (each its own session in the handshake
    /// era).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = crate::positive)]
    clients: usize,
    /// Only these rows (comma-separated or repeated); `direct-1` is the baseline of "added".
    #[arg(long, value_name = "ROW[,ROW...]", value_delimiter = ',')]
    only: Vec<String>,
}

/// The variable naming the PostgreSQL store the replicas share: the same as the
/// `gateway-postgres` rows of `moat-bench gateway`.
const STORE_URL_VAR: &str = "MOAT_BENCH_STORE_URL";
/// The tool every call makes: trivial, no arguments.
const TOOL: &str = "test_simple_text";
/// The downstream server's name in moat.toml (its tools are `docs__…`).
const SERVER: &str = "docs";
/// Replicas started; rows use the first 1, 2 or 3.
const REPLICAS: usize = 3;
/// How long a replica or the balancer may take to be ready.
const START_WITHIN: Duration = Duration::from_secs(60);
/// How long one call may take before the run is declared hung.
const CALL_BOUND: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------
// Processes

fn haproxy() -> Option<PathBuf> {
    ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// One `moat gateway --http`; dropping it kills its process group (the gateway and its
/// downstream server).
struct Replica {
    server: Listening,
    authority: String,
}

fn start_replica(moat: &Path, config: &Path, keys: &Path, port: u16) -> Replica {
    let mut cmd = Command::new(moat);
    cmd.args(["gateway", "--http"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(config)
        .arg("--state-key-file")
        .arg(keys);
    {
        // A group of its own, so that dropping it ends the downstream server too.
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let (server, authority) = Listening::start(
        cmd,
        |line| {
            line.starts_with("moat gateway: serving on")
                .then(|| mcp_authority(line))
                .flatten()
        },
        START_WITHIN,
    );
    let deadline = Instant::now() + START_WITHIN;
    while get_status(&authority, "/healthz") != Some(200) {
        assert!(
            Instant::now() < deadline,
            "replica {authority} never answered /healthz with 200\n--- stderr ---\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Replica { server, authority }
}

/// docs/deploy.md's HAProxy configuration for these ports, with a statistics socket (to
/// read how requests were spread) and longer client and server timeouts: the clients and
/// their sessions' standalone streams stay open, idle between rounds, for the whole run.
fn haproxy_config(front: u16, replicas: &[u16], stats: &Path) -> String {
    let mut text = format!(
        "global\n    maxconn 1024\n    stats socket {}\n\n\
         defaults\n    mode http\n    timeout connect 2s\n\
         \x20   timeout client 10m\n    timeout server 10m\n\
         \x20   retries 3\n    option redispatch\n\n\
         frontend mcp\n    bind 127.0.0.1:{front}\n    default_backend moat\n\n\
         backend moat\n    balance roundrobin\n\
         \x20   option httpchk GET /healthz\n    http-check expect status 200\n\
         \x20   default-server inter 500ms fall 2 rise 1\n",
        stats.display()
    );
    for (i, port) in replicas.iter().enumerate() {
        text.push_str(&format!("    server r{i} 127.0.0.1:{port} check\n"));
    }
    text
}

/// One HAProxy; dropping it kills it.
struct Balancer {
    child: Child,
    authority: String,
    stats: PathBuf,
    replicas: usize,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_balancer(haproxy: &Path, dir: &Path, replicas: &[Replica]) -> Balancer {
    let n = replicas.len();
    let ports: Vec<u16> = replicas
        .iter()
        .map(|r| {
            r.authority
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse().ok())
                .expect("a replica's port")
        })
        .collect();
    let front = free_port();
    let stats = dir.join(format!("haproxy-{n}.sock"));
    let config = dir.join(format!("haproxy-{n}.cfg"));
    std::fs::write(&config, haproxy_config(front, &ports, &stats)).expect("write haproxy.cfg");
    let child = Command::new(haproxy)
        .arg("-db")
        .arg("-f")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", haproxy.display()));
    let mut balancer = Balancer {
        child,
        authority: format!("127.0.0.1:{front}"),
        stats,
        replicas: n,
    };
    // Ready when every server of the backend is up (the replicas already are: the first
    // check finds them so).
    let deadline = Instant::now() + START_WITHIN;
    loop {
        if let Ok(Some(status)) = balancer.child.try_wait() {
            panic!(
                "haproxy exited ({status}); its configuration: {}",
                config.display()
            );
        }
        let up = balancer
            .server_stats()
            .is_some_and(|s| s.len() == n && s.iter().all(|(_, up, _)| *up));
        if up && get_status(&balancer.authority, "/healthz") == Some(200) {
            break balancer;
        }
        assert!(
            Instant::now() < deadline,
            "haproxy on {} never had its {n} replicas up",
            balancer.authority
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Balancer {
    /// Per server of the backend: its name, whether it is up, and the requests sent to it
    /// so far (`show stat` on the statistics socket); `None` while the socket is not there.
    fn server_stats(&self) -> Option<Vec<(String, bool, u64)>> {
        let mut sock = UnixStream::connect(&self.stats).ok()?;
        sock.write_all(b"show stat\n").ok()?;
        let mut text = String::new();
        sock.read_to_string(&mut text).ok()?;
        let header = text.lines().next()?.trim_start_matches("# ");
        let col = |name: &str| header.split(',').position(|c| c == name);
        let (px, sv, status, stot) = (col("pxname")?, col("svname")?, col("status")?, col("stot")?);
        let servers = text
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f.len() > stot && f[px] == "moat" && f[sv].starts_with('r'))
            .map(|f| {
                (
                    f[sv].to_owned(),
                    f[status].starts_with("UP"),
                    f[stot].parse().unwrap_or(0),
                )
            })
            .collect();
        Some(servers)
    }

    /// Requests sent to each server so far, in server order.
    fn requests(&self) -> Vec<u64> {
        let mut stats = self.server_stats().unwrap_or_default();
        stats.sort_by(|a, b| a.0.cmp(&b.0));
        stats.into_iter().map(|(_, _, n)| n).collect()
    }
}

// ---------------------------------------------------------------------------------------
// Rows

#[derive(Clone, Copy, PartialEq, Eq)]
enum Era {
    /// A handshake-era session (2025-11-25).
    Session,
    /// 2026-07-28: every request stands alone.
    Stateless,
}

impl Era {
    fn version(self) -> ProtocolVersion {
        match self {
            Era::Session => ProtocolVersion::V2025_11_25,
            Era::Stateless => ProtocolVersion::V2026_07_28,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Era::Session => "session (2025-11-25)",
            Era::Stateless => "stateless (2026-07-28)",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Era::Session => "session",
            Era::Stateless => "stateless",
        }
    }
}

/// What a row's clients connect to.
struct Row {
    id: String,
    era: Era,
    /// Index of the row's balancer (`None`: the first replica directly).
    balancer: Option<usize>,
    url: String,
    /// Replicas behind the URL.
    replicas: usize,
}

impl Row {
    fn note(&self) -> String {
        match (self.balancer, self.era) {
            (None, _) => "moat client -> replica 1 (no HAProxy)".to_owned(),
            (Some(_), Era::Session) if self.replicas > 1 => format!(
                "moat client -> HAProxy -> {} replicas: {} of {} requests forwarded to the \
                 session's replica",
                self.replicas,
                self.replicas - 1,
                self.replicas
            ),
            (Some(_), _) => format!(
                "moat client -> HAProxy -> {} replica{}: served where it lands",
                self.replicas,
                if self.replicas > 1 { "s" } else { "" }
            ),
        }
    }
}

/// A row's clients: one for the latency samples, `--clients` for the throughput windows.
struct Clients {
    one: Client,
    many: Vec<Arc<Client>>,
}

async fn connect(url: &str, era: Era) -> Client {
    let connecting = Client::builder()
        .request_timeout(Some(CALL_BOUND))
        .protocol(VersionPreference::Exact(era.version()))
        .connect_url(url, HttpOptions::default());
    match tokio::time::timeout(CALL_BOUND, connecting).await {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => panic!("connect to {url} ({}): {e}", era.label()),
        Err(_) => panic!(
            "connect to {url} ({}): no answer in {CALL_BOUND:?}",
            era.label()
        ),
    }
}

/// One `tools/call`; panics (saying which) unless it succeeds.
async fn call(client: &Client, tool: &str) {
    let result = client
        .call_tool(tool, json!({}))
        .await
        .unwrap_or_else(|e| panic!("tools/call {tool}: {e}"));
    assert_ne!(result.is_error, Some(true), "tool failed: {result:?}");
}

#[derive(Default)]
struct Measured {
    samples: Vec<Duration>,
    round_median_us: Vec<f64>,
    round_mean_us: Vec<f64>,
    round_cps: Vec<f64>,
    /// CPU µs per call of the replicas, their servers and the row's balancer, per window.
    cpu_us: Vec<f64>,
    /// Requests HAProxy sent to each replica during the row's rounds.
    spread: Vec<u64>,
}

/// The processes whose CPU a window counts: every replica with its descendants, and the
/// row's balancer.
fn pids(replicas: &[Replica], balancer: Option<&Balancer>) -> Vec<u32> {
    let mut pids = Vec::new();
    for r in replicas {
        pids.push(r.server.pid());
        pids.extend(
            moat_test_support::descendants(r.server.pid())
                .iter()
                .map(|p| p.pid),
        );
    }
    if let Some(b) = balancer {
        pids.push(b.child.id());
    }
    pids
}

fn cpu_us(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|p| cpu_time(*p))
        .map(stats::us)
        .sum()
}

/// One round of one row: `calls` sequential calls, then a throughput window.
async fn round(
    s: &Args,
    clients: &Clients,
    tool: &Arc<str>,
    pids: &[u32],
    balancer: Option<&Balancer>,
    m: &mut Measured,
) {
    let before = balancer.map(Balancer::requests);
    let mut samples = Vec::with_capacity(s.calls);
    for _ in 0..s.calls {
        let t = Instant::now();
        call(&clients.one, tool).await;
        samples.push(t.elapsed());
    }
    let window = Duration::from_millis(s.window_ms as u64);
    let cpu0 = cpu_us(pids);
    let start = Instant::now();
    let deadline = start + window;
    let tasks: Vec<_> = clients
        .many
        .iter()
        .map(|client| {
            let (client, tool) = (client.clone(), tool.clone());
            tokio::spawn(async move {
                let mut n = 0usize;
                while Instant::now() < deadline {
                    call(&client, &tool).await;
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.expect("a throughput client failed (see above)");
    }
    let elapsed = start.elapsed();
    let cpu1 = cpu_us(pids);
    m.round_cps.push(total as f64 / elapsed.as_secs_f64());
    m.cpu_us.push((cpu1 - cpu0) / total.max(1) as f64);
    if let (Some(b), Some(before)) = (balancer, before) {
        let after = b.requests();
        m.spread.resize(after.len(), 0);
        for (i, (a, b)) in after
            .iter()
            .zip(before.iter().chain(std::iter::repeat(&0)))
            .enumerate()
        {
            m.spread[i] += a.saturating_sub(*b);
        }
    }
    let mut sorted = samples.clone();
    if let Some(l) = stats::latency(&mut sorted) {
        m.round_median_us.push(l.median_us);
        m.round_mean_us.push(l.mean_us);
    }
    m.samples.extend(samples);
}

/// A row's figures.
struct Figures {
    id: String,
    era: Era,
    note: String,
    median_us: f64,
    mean_us: f64,
    p99_us: f64,
    added_median_us: Option<f64>,
    added_mean_us: Option<f64>,
    calls_per_s: f64,
    vs_direct: Option<f64>,
    cpu_us: f64,
    /// Share of the row's requests each replica got from HAProxy, in %.
    spread: Vec<f64>,
}

fn figures(rows: &[Row], measured: &mut [Measured]) -> Vec<Figures> {
    let direct = |era: Era| {
        rows.iter()
            .position(|r| r.balancer.is_none() && r.era == era)
    };
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let d = direct(row.era).filter(|d| *d != i).map(|d| &measured[d]);
        let m = &measured[i];
        let vs = |f: fn(&Measured) -> &Vec<f64>, op: fn(f64, f64) -> f64| {
            d.map(|d| median(f(m).iter().zip(f(d)).map(|(a, b)| op(*a, *b)).collect()))
        };
        let total: u64 = m.spread.iter().sum();
        let spread = m
            .spread
            .iter()
            .map(|n| 100.0 * *n as f64 / total.max(1) as f64)
            .collect();
        let added_median_us = vs(|m| &m.round_median_us, |a, b| a - b);
        let added_mean_us = vs(|m| &m.round_mean_us, |a, b| a - b);
        let vs_direct = vs(|m| &m.round_cps, |a, b| a / b);
        let mut samples = std::mem::take(&mut measured[i].samples);
        let l = stats::latency(&mut samples).expect("latency samples");
        let m = &measured[i];
        out.push(Figures {
            id: row.id.clone(),
            era: row.era,
            note: row.note(),
            median_us: l.median_us,
            mean_us: l.mean_us,
            p99_us: l.p99_us,
            added_median_us,
            added_mean_us,
            calls_per_s: median(m.round_cps.clone()),
            vs_direct,
            cpu_us: median(m.cpu_us.clone()),
            spread,
        });
    }
    out
}

// ---------------------------------------------------------------------------------------
// The run

pub fn main(s: Args) {
    let Ok(store) = std::env::var(STORE_URL_VAR) else {
        return skip(
            &s,
            &format!(
                "{STORE_URL_VAR} is not set (a PostgreSQL the replicas share, e.g. \
             postgres://user:password@127.0.0.1:5432/db?sslmode=disable)"
            ),
        );
    };
    let Some(haproxy) = haproxy() else {
        return skip(&s, "haproxy is not installed (apt-get install haproxy)");
    };
    let wanted = |id: &str| s.only.is_empty() || s.only.iter().any(|o| o == id);
    let ids: Vec<String> = std::iter::once("direct-1".to_owned())
        .chain((1..=REPLICAS).map(|n| format!("replicas-{n}")))
        .collect();
    if !ids.iter().any(|id| wanted(id)) {
        eprintln!(
            "no row matches --only {:?}; rows: {}",
            s.only,
            ids.join(", ")
        );
        std::process::exit(2);
    }

    let moat = moat_binary();
    let scratch = Scratch::new("replicas");
    let dir = &scratch.0;
    let config = dir.join("moat.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = {}\n\n[store]\nurl = {}\n\n[policy]\ndefault = \"allow\"\n\n\
             [tool_search]\nmode = \"off\"\n\n\
             [servers.{SERVER}]\ncommand = {}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n",
            quoted(&dir.join("state")),
            serde_json::to_string(&store).expect("quote"),
            quoted(&moat),
        ),
    )
    .expect("write moat.toml");
    // Every replica must read the others' 2026-07-28 request state: one key for all.
    let keys = dir.join("state-keys");
    std::fs::write(
        &keys,
        format!(
            "moat-bench-replicas-{}-shared-state-key\n",
            std::process::id()
        ),
    )
    .expect("write the state key file");

    let mut progress = Progress::new(REPLICAS + REPLICAS + s.rounds);
    // Dropped in reverse order of declaration: clients first, then balancers, then replicas.
    let mut replicas = Vec::new();
    for i in 0..REPLICAS {
        progress.step(&format!("starting replica {}", i + 1));
        replicas.push(start_replica(&moat, &config, &keys, free_port()));
    }
    let mut balancers = Vec::new();
    for n in 1..=REPLICAS {
        progress.step(&format!("starting HAProxy over {n} replica(s)"));
        balancers.push(start_balancer(&haproxy, dir, &replicas[..n]));
    }

    let mut rows = Vec::new();
    for era in [Era::Session, Era::Stateless] {
        if wanted("direct-1") {
            rows.push(Row {
                id: "direct-1".to_owned(),
                era,
                balancer: None,
                url: format!("http://{}/mcp", replicas[0].authority),
                replicas: 1,
            });
        }
        for (i, b) in balancers.iter().enumerate() {
            let id = format!("replicas-{}", b.replicas);
            if wanted(&id) {
                rows.push(Row {
                    id,
                    era,
                    balancer: Some(i),
                    url: format!("http://{}/mcp", b.authority),
                    replicas: b.replicas,
                });
            }
        }
    }

    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let tool: Arc<str> = Arc::from(format!("{SERVER}__{TOOL}"));
    let mut measured: Vec<Measured> = rows.iter().map(|_| Measured::default()).collect();
    rt.block_on(async {
        let mut clients = Vec::new();
        for row in &rows {
            let one = connect(&row.url, row.era).await;
            let tools = one.list_all_tools().await.expect("tools/list");
            assert!(
                tools.iter().any(|t| *t.name == *tool),
                "{tool} is not listed by {}",
                row.url
            );
            let mut many = Vec::new();
            for _ in 0..s.clients {
                many.push(Arc::new(connect(&row.url, row.era).await));
            }
            for _ in 0..s.warmup {
                call(&one, &tool).await;
            }
            for client in &many {
                call(client, &tool).await;
            }
            clients.push(Clients { one, many });
        }
        for r in 0..s.rounds {
            progress.step(&format!("round {} of {}", r + 1, s.rounds));
            let order: Vec<usize> = if r % 2 == 0 {
                (0..rows.len()).collect()
            } else {
                (0..rows.len()).rev().collect()
            };
            for i in order {
                let balancer = rows[i].balancer.map(|b| &balancers[b]);
                let pids = pids(&replicas, balancer);
                round(&s, &clients[i], &tool, &pids, balancer, &mut measured[i]).await;
            }
        }
        progress.finish();
        // Sessions ended properly, so that none stays in the shared store's directory.
        for c in clients {
            c.one.close().await;
            for client in c.many {
                if let Ok(client) = Arc::try_unwrap(client) {
                    client.close().await;
                }
            }
        }
    });
    drop(balancers);
    drop(replicas);

    let figures = figures(&rows, &mut measured);
    if s.json {
        print_json(&s, &figures);
    } else {
        print_table(&s, &figures);
    }
}

fn skip(s: &Args, why: &str) {
    eprintln!("moat-bench replicas: skipped: {why}");
    if s.json {
        println!("{}", json!({ "skipped": why }));
    }
}

// ---------------------------------------------------------------------------------------
// Output

fn print_json(s: &Args, figures: &[Figures]) {
    let rows: Vec<Value> = figures
        .iter()
        .map(|f| {
            json!({
                "id": f.id, "era": f.era.key(), "note": f.note,
                "median_us": f.median_us, "mean_us": f.mean_us, "p99_us": f.p99_us,
                "added_median_us": f.added_median_us, "added_mean_us": f.added_mean_us,
                "calls_per_s": f.calls_per_s, "calls_per_s_vs_direct": f.vs_direct,
                "cpu_us_per_call": f.cpu_us,
                "requests_per_replica_percent": f.spread,
            })
        })
        .collect();
    let out = json!({
        "settings": {
            "tool": TOOL, "sequential_calls_per_round": s.calls, "warmup": s.warmup,
            "rounds": s.rounds, "window_ms": s.window_ms, "clients": s.clients,
        },
        "rows": rows,
    });
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}

fn print_table(s: &Args, figures: &[Figures]) {
    let f = |x: Option<f64>, p: usize| x.map_or("-".to_owned(), |x| format!("{x:.p$}"));
    println!(
        "Gateway replicas: tools/call of `{TOOL}` over Streamable HTTP, moat's client; {} rounds \
         of {} sequential calls per row (pooled: median, mean, p99), then {} clients calling \
         for {} ms (calls/s: median round). \"added\": median over rounds of (row − direct-1, \
         same era). CPU: replicas, their servers and the row's HAProxy, µs per call in the \
         window. Spread: % of the row's requests HAProxy sent to each replica.\n",
        s.rounds, s.calls, s.clients, s.window_ms
    );
    println!(
        "| row | era | median µs | mean µs | p99 µs | added median µs | added mean µs | calls/s ({} clients) | × direct-1 | CPU µs/call | spread % |",
        s.clients
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in figures {
        let spread = if r.spread.is_empty() {
            "-".to_owned()
        } else {
            r.spread
                .iter()
                .map(|p| format!("{p:.0}"))
                .collect::<Vec<_>>()
                .join("/")
        };
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {:.0} | {} | {:.1} | {} |",
            r.id,
            r.era.key(),
            r.median_us,
            r.mean_us,
            r.p99_us,
            f(r.added_median_us, 1),
            f(r.added_mean_us, 1),
            r.calls_per_s,
            f(r.vs_direct, 2),
            r.cpu_us,
            spread,
        );
    }
    println!("\nrows:");
    for r in figures {
        println!("  {:<11} {:<23} {}", r.id, r.era.label(), r.note);
    }
}
