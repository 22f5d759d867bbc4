//! Plain SVG line charts for `moat-bench all --plots DIR`: a latency CDF per stack, and
//! throughput against concurrency. Written by hand (it is a few dozen lines of text) so the
//! benches pull in no plotting library; axes can be logarithmic, which latency spread over
//! decades and throughput over 1–1000 in flight need.

use std::fmt::Write;

/// One line of a chart: its legend label and its points `(x, y)`.
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Points, in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// An axis: its title and whether it is logarithmic (base 10).
pub struct Axis {
    /// Title, units included.
    pub title: String,
    /// Log scale (every value must then be > 0).
    pub log: bool,
}

/// A chart: title, axes, lines; `markers` draws a dot at each point (for few points).
pub struct Chart {
    /// Heading above the plot.
    pub title: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// The lines.
    pub series: Vec<Series>,
    /// Dots on the points.
    pub markers: bool,
}

// Distinguishable colours (and readable in grey) for up to eight lines.
const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];
const W: f64 = 760.0;
const H: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;

/// Maps data values to pixels along one axis.
struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Scale {
    fn new(values: impl Iterator<Item = f64>, log: bool) -> Scale {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = (1.0, 10.0);
        }
        if log {
            // Whole decades, so the ticks land on the edges.
            lo = 10f64.powf(lo.log10().floor());
            hi = 10f64.powf(hi.log10().ceil().max(lo.log10() + 1.0));
        } else {
            lo = lo.min(0.0);
            if hi <= lo {
                hi = lo + 1.0;
            }
        }
        Scale { lo, hi, log }
    }

    /// Position of `v` from 0 (low end) to 1 (high end).
    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    /// Tick values: 1, 2, 5 per decade on a log axis (only powers of ten when there are
    /// many decades), five even steps on a linear one.
    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (
                self.lo.log10().round() as i32,
                self.hi.log10().round() as i32,
            );
            let steps: &[f64] = if b - a > 3 { &[1.0] } else { &[1.0, 2.0, 5.0] };
            (a..=b)
                .flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e)))
                .filter(|v| *v <= self.hi * 1.0001)
                .collect()
        } else {
            (0..=4)
                .map(|i| self.lo + (self.hi - self.lo) * i as f64 / 4.0)
                .collect()
        }
    }
}

/// A tick label: no trailing zeros, thousands as `k`, millions as `M`.
fn label(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Chart {
    /// The chart as an SVG document.
    pub fn render(&self) -> String {
        let all = || self.series.iter().flat_map(|s| s.points.iter());
        let xs = Scale::new(all().map(|p| p.0), self.x.log);
        let ys = Scale::new(all().map(|p| p.1), self.y.log);
        let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
        let px = |v: f64| LEFT + xs.frac(v) * pw;
        let py = |v: f64| TOP + (1.0 - ys.frac(v)) * ph;
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(svg, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            LEFT + pw / 2.0,
            escape(&self.title)
        );
        for t in xs.ticks() {
            let x = px(t);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#e4e4e4"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + ph,
                TOP + ph + 16.0,
                label(t)
            );
        }
        for t in ys.ticks() {
            let y = py(t);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                y + 4.0,
                label(t)
            );
        }
        let _ = writeln!(
            svg,
            r#"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            H - 18.0,
            escape(&self.x.title)
        );
        let _ = writeln!(
            svg,
            r#"<text transform="translate(20 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            TOP + ph / 2.0,
            escape(&self.y.title)
        );
        for (i, s) in self.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<String> = s
                .points
                .iter()
                .filter(|(x, y)| (!self.x.log || *x > 0.0) && (!self.y.log || *y > 0.0))
                .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
                .collect();
            let _ = writeln!(
                svg,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
                points.join(" ")
            );
            if self.markers {
                for p in &points {
                    let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                    let _ = writeln!(svg, r#"<circle cx="{x}" cy="{y}" r="3.5" fill="{color}"/>"#);
                }
            }
            let ly = TOP + 14.0 + i as f64 * 20.0;
            let lx = LEFT + pw + 14.0;
            let _ = writeln!(
                svg,
                r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{:.1}">{}</text>"#,
                lx + 22.0,
                lx + 28.0,
                ly + 4.0,
                escape(&s.label)
            );
        }
        svg.push_str("</svg>\n");
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_log_axes_and_legend() {
        let chart = Chart {
            title: "t <1>".into(),
            x: Axis {
                title: "in flight".into(),
                log: true,
            },
            y: Axis {
                title: "calls/s".into(),
                log: true,
            },
            series: vec![Series {
                label: "moat".into(),
                points: vec![(1.0, 5000.0), (64.0, 60000.0), (1000.0, 80000.0)],
            }],
            markers: true,
        };
        let svg = chart.render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("t &lt;1&gt;") && svg.contains(">moat<") && svg.contains(">100k<"));
        assert_eq!(svg.matches("<circle").count(), 3);
    }
}
