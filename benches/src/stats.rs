//! Summaries of timing samples shared by the tables: median, mean and p99 of a set of
//! latencies, the median of per-round figures, and the points of a latency CDF for plots.

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
