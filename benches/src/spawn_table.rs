//! `moat-bench spawn`: a sandboxed command as a user meets it, against bubblewrap starting
//! the same command, measured side by side.
//!
//! Rows, for `/bin/true` and `ls /etc` (output captured through pipes in every row):
//!
//! * `bwrap`: `bwrap --ro-bind / / --unshare-all --dev /dev --proc /proc CMD`, a process
//!   started and waited for (the anchor);
//! * `moat sandbox`: `moat sandbox -- CMD`, a process started and waited for: the binary's
//!   start-up, its sandbox helper, the namespaces, Landlock, seccomp and rlimits of the
//!   default profile;
//! * `moat serve exec`: one `tools/call` of `run_command` with `{"argv": CMD}` on a running
//!   `moat serve exec`, from writing the request line to reading the answer's line (the
//!   JSON-RPC round trip over its stdio included; the server's sandbox helper warm).
//!
//! Rounds are interleaved (each round runs every row once, in an order shuffled per round),
//! so that load on a shared machine falls on every row alike; the table gives median, mean,
//! p90 and minimum, and the ratios to bubblewrap's median and p90. Every run is checked (exit
//! status 0, and for `ls /etc` a known entry in the output), so a broken row fails rather
//! than looking fast. Without `bwrap` installed its row and the ratios say `n/a`.
//!
//! ```text
//! cargo run --release -p moat-bench -- spawn [--rounds N] [--json]
//! MOAT_BIN=target/release/moat cargo run --release -p moat-bench -- spawn   # a given moat
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The options of `moat-bench spawn`.
#[derive(clap::Args)]
#[command(
    after_help = "Rows: `moat sandbox -- CMD` and `run_command` through `moat serve exec`, \
    against `bwrap` starting CMD, for /bin/true and ls /etc, rounds interleaved.\n\
    MOAT_BIN=PATH measures that moat binary (default: built beside this one)."
)]
pub struct Args {
    /// Print the figures as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Rounds; each runs every row once, in an order shuffled per round.
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = crate::positive)]
    rounds: usize,
}

type Settings = Args;

/// The commands measured.
const COMMANDS: [&[&str]; 2] = [&["/bin/true"], &["ls", "/etc"]];

/// The rows, in the table's order.
const BWRAP: &str = "bwrap";
const SANDBOX: &str = "moat sandbox";
const EXEC: &str = "moat serve exec (run_command)";

/// Whether a run's output is what the command prints.
fn output_ok(argv: &[&str], stdout: &[u8]) -> bool {
    match argv {
        ["ls", ..] => stdout.split(|&b| b == b'\n').any(|l| l == b"passwd"),
        _ => stdout.is_empty(),
    }
}

fn bwrap_available() -> bool {
    Command::new("bwrap")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn run_bwrap(argv: &[&str]) -> bool {
    Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--unshare-all",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
        ])
        .args(argv)
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success() && output_ok(argv, &o.stdout))
}

fn run_sandbox(moat: &Path, argv: &[&str]) -> bool {
    Command::new(moat)
        .args(["sandbox", "--"])
        .args(argv)
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success() && output_ok(argv, &o.stdout))
}

/// A running `moat serve exec`, spoken to with blocking line I/O (no client library: the
/// round trip is the server's and the pipes', nothing of a client's runtime).
struct ExecServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
}

impl ExecServer {
    fn start(moat: &Path) -> ExecServer {
        let mut child = Command::new(moat)
            .args(["serve", "exec"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {} serve exec: {e}", moat.display()));
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut server = ExecServer {
            child,
            stdin,
            stdout,
            next_id: 1,
            line: String::new(),
        };
        let init = server.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "moat-bench", "version": "0"},
            }),
        );
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).expect("json");
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .expect("write to moat serve exec");
        self.stdin.flush().expect("flush");
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            self.line.clear();
            let n = self
                .stdout
                .read_line(&mut self.line)
                .expect("read from moat serve exec");
            assert!(n > 0, "moat serve exec ended");
            let message: Value = serde_json::from_str(&self.line).expect("a JSON-RPC line");
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
        }
    }

    fn run_command(&mut self, argv: &[&str]) -> bool {
        let answer = self.request(
            "tools/call",
            json!({"name": "run_command", "arguments": {"argv": argv}}),
        );
        let result = &answer["result"]["structuredContent"];
        result["exit_code"] == json!(0)
            && output_ok(argv, result["stdout"].as_str().unwrap_or("-").as_bytes())
    }
}

impl Drop for ExecServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One row's summary, in ms.
#[derive(Clone, Copy)]
struct Summary {
    median: f64,
    mean: f64,
    p90: f64,
    min: f64,
}

fn summary(mut t: Vec<Duration>) -> Option<Summary> {
    if t.is_empty() {
        return None;
    }
    t.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mean = t.iter().map(|d| ms(*d)).sum::<f64>() / t.len() as f64;
    Some(Summary {
        median: ms(t[t.len() / 2]),
        mean,
        p90: ms(t[(t.len() * 9 / 10).min(t.len() - 1)]),
        min: ms(t[0]),
    })
}

struct Measured {
    command: String,
    rows: Vec<(&'static str, Option<Summary>)>,
}

impl Measured {
    fn get(&self, row: &str) -> Option<Summary> {
        self.rows
            .iter()
            .find(|(n, _)| *n == row)
            .and_then(|(_, s)| *s)
    }

    /// (median ratio, p90 ratio) of `row` to bubblewrap.
    fn ratio(&self, row: &str) -> Option<(f64, f64)> {
        let (r, b) = (self.get(row)?, self.get(BWRAP)?);
        Some((r.median / b.median, r.p90 / b.p90))
    }
}

fn measure(s: &Settings, moat: &Path, bwrap: bool) -> Vec<Measured> {
    let mut exec = ExecServer::start(moat);
    let mut out = Vec::new();
    for argv in COMMANDS {
        let rows: Vec<&'static str> = [BWRAP, SANDBOX, EXEC]
            .into_iter()
            .filter(|r| bwrap || *r != BWRAP)
            .collect();
        let mut run = |row: &str| -> bool {
            match row {
                BWRAP => run_bwrap(argv),
                SANDBOX => run_sandbox(moat, argv),
                _ => exec.run_command(argv),
            }
        };
        // Warm up (the exec server's helper starts on its first call), and fail early.
        for row in &rows {
            for _ in 0..3 {
                assert!(run(row), "{row}: {argv:?} failed");
            }
        }
        let mut times = vec![Vec::with_capacity(s.rounds); rows.len()];
        let mut order: Vec<usize> = (0..rows.len()).collect();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..s.rounds {
            // Fisher-Yates with xorshift: a fixed but varied order per round.
            for k in (1..order.len()).rev() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                order.swap(k, (seed % (k as u64 + 1)) as usize);
            }
            for &i in &order {
                let start = Instant::now();
                let ok = run(rows[i]);
                times[i].push(start.elapsed());
                assert!(ok, "{}: {argv:?} failed", rows[i]);
            }
        }
        let mut summaries: Vec<(&'static str, Option<Summary>)> = rows
            .iter()
            .copied()
            .zip(times.into_iter().map(summary))
            .collect();
        if !bwrap {
            summaries.insert(0, (BWRAP, None));
        }
        out.push(Measured {
            command: argv.join(" "),
            rows: summaries,
        });
    }
    out
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn main(s: Args) {
    let moat = moat_binary();
    let bwrap = bwrap_available();
    if !bwrap {
        eprintln!(
            "bwrap not installed (apt-get install bubblewrap): its row and the ratios are n/a"
        );
    }
    let uid = real_uid();
    let before = load();
    let measured = measure(&s, &moat, bwrap);
    let after = load();
    if s.json {
        let rows: Vec<Value> = measured
            .iter()
            .flat_map(|m| {
                m.rows.iter().map(move |(row, sum)| {
                    json!({
                        "command": m.command,
                        "row": row,
                        "median_ms": sum.map(|s| s.median),
                        "mean_ms": sum.map(|s| s.mean),
                        "p90_ms": sum.map(|s| s.p90),
                        "min_ms": sum.map(|s| s.min),
                        "ratio_to_bwrap_median": m.ratio(row).map(|r| r.0),
                        "ratio_to_bwrap_p90": m.ratio(row).map(|r| r.1),
                    })
                })
            })
            .collect();
        let doc = json!({
            "rounds": s.rounds,
            "uid": uid,
            "load_before": before,
            "load_after": after,
            "moat": moat,
            "rows": rows,
        });
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
        return;
    }
    println!(
        "{} rounds, interleaved (order shuffled per round); as uid {uid}; load {before} -> {after}",
        s.rounds
    );
    println!("moat: {}", moat.display());
    println!();
    println!("| command | row | median ms | mean | p90 | min | ÷ bwrap (median) | ÷ bwrap (p90) |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let na = || "n/a".to_string();
    for m in &measured {
        for (row, sum) in &m.rows {
            let f = |v: Option<f64>| v.map_or_else(na, |v| format!("{v:.2}"));
            let ratio = m.ratio(row);
            println!(
                "| `{}` | {row} | {} | {} | {} | {} | {} | {} |",
                m.command,
                f(sum.map(|s| s.median)),
                f(sum.map(|s| s.mean)),
                f(sum.map(|s| s.p90)),
                f(sum.map(|s| s.min)),
                if *row == BWRAP && sum.is_some() {
                    "1".into()
                } else {
                    f(ratio.map(|r| r.0))
                },
                if *row == BWRAP && sum.is_some() {
                    "1".into()
                } else {
                    f(ratio.map(|r| r.1))
                },
            );
        }
    }
    println!();
    println!("Targets: moat sandbox ≤ 1.0× bwrap; moat serve exec ≤ 0.5× bwrap (medians).");
}

/// The real uid this runs as (the sandbox's rules differ for root).
fn real_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

/// `MOAT_BIN`, else the `moat` binary next to this one (built first, as the gateway table
/// does).
fn moat_binary() -> PathBuf {
    crate::gateway_table::moat_binary()
}
