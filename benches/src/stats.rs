//! Summaries of timing samples shared by the tables: median, mean and p99 of a set of
//! latencies, the median of per-round figures, the spread of a few slow events (reloads,
//! crashes), and the points of a latency CDF for plots.

use std::time::Duration;

/// Latency of one sequential call, in µs.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    /// Middle sample.
    pub median_us: f64,
    /// Arithmetic mean.
    pub mean_us: f64,
    /// 99th percentile (the sample below which 99% fall).
    pub p99_us: f64,
}

/// Microseconds of `d`.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Summarize `samples` (sorted in place). `None` when there are none.
pub fn latency(samples: &mut [Duration]) -> Option<Latency> {
    if samples.is_empty() {
        return None;
    }
    samples.sort();
    let mean = samples.iter().map(|d| us(*d)).sum::<f64>() / samples.len() as f64;
    Some(Latency {
        median_us: us(samples[samples.len() / 2]),
        mean_us: mean,
        p99_us: us(samples[samples.len() * 99 / 100]),
    })
}

/// The median of `v` (the upper one of an even count); NaN when empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// At most `points` points `(µs, fraction of samples at or below)` of the empirical CDF of
/// `sorted` (ascending), evenly spaced in rank: enough for a plot, small enough for a file.
pub fn cdf(sorted: &[Duration], points: usize) -> Vec<(f64, f64)> {
    let n = sorted.len();
    if n == 0 {
        return Vec::new();
    }
    let points = points.clamp(2, n.max(2));
    (0..points)
        .map(|k| {
            let i = (k * (n - 1)) / (points - 1);
            (us(sorted[i]), (i + 1) as f64 / n as f64)
        })
        .collect()
}

/// The spread of a few samples of a slow event (a reload, a crash noticed), in ms.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    /// Middle sample.
    pub median_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// Fastest sample.
    pub min_ms: f64,
    /// Slowest sample.
    pub max_ms: f64,
}

/// Summarize `samples` (sorted in place). `None` when there are none.
pub fn spread(samples: &mut [Duration]) -> Option<Spread> {
    if samples.is_empty() {
        return None;
    }
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let n = samples.len();
    Some(Spread {
        median_ms: ms(samples[n / 2]),
        p90_ms: ms(samples[(n * 9 / 10).min(n - 1)]),
        min_ms: ms(samples[0]),
        max_ms: ms(samples[n - 1]),
    })
}

/// One row of a table of slow events: what was measured, and each round's sample.
pub struct SpreadRow {
    /// Short id (for `--json` and the docs).
    pub id: &'static str,
    /// What one sample is, from when to when.
    pub note: &'static str,
    /// One sample per round.
    pub samples: Vec<Duration>,
}

/// The rows as a Markdown table: rounds, median, p90, min and max in ms.
pub fn print_spread_table(rows: &mut [SpreadRow]) {
    println!(
        "| {:<18} | {:>6} | {:>10} | {:>8} | {:>8} | {:>8} | what",
        "row", "rounds", "median ms", "p90 ms", "min ms", "max ms"
    );
    println!(
        "|{:-<20}|{:-<8}|{:-<12}|{:-<10}|{:-<10}|{:-<10}|---",
        "", "", "", "", "", ""
    );
    for row in rows {
        let n = row.samples.len();
        match spread(&mut row.samples) {
            Some(s) => println!(
                "| {:<18} | {:>6} | {:>10.2} | {:>8.2} | {:>8.2} | {:>8.2} | {}",
                row.id, n, s.median_ms, s.p90_ms, s.min_ms, s.max_ms, row.note
            ),
            None => println!(
                "| {:<18} | {:>6} | {:>10} | {:>8} | {:>8} | {:>8} | {}",
                row.id, 0, "-", "-", "-", "-", row.note
            ),
        }
    }
}

/// The rows as JSON: per row its id, note, rounds, the spread in ms and every sample.
pub fn spread_json(rows: &mut [SpreadRow]) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = rows
        .iter_mut()
        .map(|row| {
            let s = spread(&mut row.samples);
            serde_json::json!({
                "id": row.id,
                "note": row.note,
                "rounds": row.samples.len(),
                "median_ms": s.map(|s| s.median_ms),
                "p90_ms": s.map(|s| s.p90_ms),
                "min_ms": s.map(|s| s.min_ms),
                "max_ms": s.map(|s| s.max_ms),
                "samples_ms": row.samples.iter().map(|d| d.as_secs_f64() * 1e3).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::Value::Array(rows)
}

/// Prints a table of slow events (or, with `json`, the rows under `key` with the settings):
/// `heading` says what was measured; `moat` is the binary measured.
pub fn report_spread(
    json: bool,
    key: &str,
    heading: &str,
    moat: &std::path::Path,
    rounds: usize,
    rows: &mut [SpreadRow],
) {
    if json {
        let mut out = serde_json::json!({
            "settings": { "rounds": rounds, "moat": moat.display().to_string() },
        });
        out[key] = spread_json(rows);
        println!("{}", serde_json::to_string_pretty(&out).expect("json"));
        return;
    }
    println!("{heading} ({rounds} rounds; moat {}).\n", moat.display());
    print_spread_table(rows);
}
