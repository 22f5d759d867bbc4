//! Audit records as an aligned table for people (`moat audit` without `--json`).
//!
//! The user is the record's subject (the token's user over HTTP with `[auth]`, the OS user
//! over stdio), `-` when nobody vouched for the caller. Times are shown in UTC, ISO 8601 to the second (`2025-06-01T12:34:56Z`): unambiguous, and no
//! time-zone database needed. Every cell is text a downstream server may have chosen (tool
//! names, error messages), so control characters are replaced before they reach a terminal.

use super::record::AuditRecord;
use super::verdict::Decision;

const HEADERS: [&str; 9] = [
    "TIME", "USER", "DECISION", "TOOL", "RULE", "CONSENT", "OUTCOME", "DURATION", "BYTES",
];
/// Columns aligned to the right (numbers).
const RIGHT: [bool; 9] = [false, false, false, false, false, false, false, true, true];
/// The column coloured by decision.
const DECISION_COLUMN: usize = 2;
const MAX_ERROR_CHARS: usize = 120;

/// Renders `records` as a table with a header line, one line per record, and an `ERROR` column
/// when any record has an error. `color` colours the decision with ANSI escapes (allow green,
/// ask yellow, deny red, error magenta). With no records, only the header line.
pub fn format_table(records: &[AuditRecord], color: bool) -> String {
    let rows: Vec<[String; 9]> = records.iter().map(cells).collect();
    let mut widths = HEADERS.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let with_errors = records.iter().any(|r| r.error.is_some());
    let mut out = String::new();
    let header = HEADERS.map(String::from);
    push_line(
        &mut out,
        &header,
        &widths,
        None,
        with_errors.then_some("ERROR"),
    );
    for (row, record) in rows.iter().zip(records) {
        let paint = color.then(|| decision_color(record.decision_kind()));
        let error = record.error.as_deref().map(|e| truncate(&clean(e)));
        push_line(
            &mut out,
            row,
            &widths,
            paint,
            with_errors.then_some(error.as_deref().unwrap_or("")),
        );
    }
    out
}

fn push_line(
    out: &mut String,
    cells: &[String; 9],
    widths: &[usize; 9],
    paint: Option<&str>,
    last: Option<&str>,
) {
    let mut line = String::new();
    for (i, cell) in cells.iter().enumerate() {
        if i > 0 {
            line.push_str("  ");
        }
        let pad = " ".repeat(widths[i].saturating_sub(cell.chars().count()));
        // Padding is computed on the plain text so escapes don't shift the columns.
        let text = match (i, paint) {
            (DECISION_COLUMN, Some(code)) => format!("\x1b[{code}m{cell}\x1b[0m"),
            _ => cell.clone(),
        };
        if RIGHT[i] {
            line.push_str(&pad);
            line.push_str(&text);
        } else {
            line.push_str(&text);
            line.push_str(&pad);
        }
    }
    if let Some(last) = last {
        line.push_str("  ");
        line.push_str(last);
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

fn cells(r: &AuditRecord) -> [String; 9] {
    [
        utc_iso(r.time_ms),
        r.subject.as_deref().map_or_else(|| "-".into(), clean),
        clean(&r.decision),
        clean(&r.exposed_name),
        clean(&r.rule),
        r.consent.as_deref().map_or_else(|| "-".into(), clean),
        clean(&r.outcome),
        human_duration(r.duration_us),
        human_bytes(r.result_bytes),
    ]
}

fn decision_color(decision: Option<Decision>) -> &'static str {
    match decision {
        Some(Decision::Allow) => "32",
        Some(Decision::Ask) => "33",
        Some(Decision::Deny) => "31",
        _ => "35",
    }
}

fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn truncate(s: &str) -> String {
    if s.chars().count() <= MAX_ERROR_CHARS {
        return s.to_string();
    }
    let mut t: String = s.chars().take(MAX_ERROR_CHARS - 1).collect();
    t.push('…');
    t
}

fn human_duration(us: u64) -> String {
    match us {
        0..1_000 => format!("{us}µs"),
        1_000..1_000_000 => format!("{:.1}ms", us as f64 / 1e3),
        _ => format!("{:.2}s", us as f64 / 1e6),
    }
}

fn human_bytes(b: u64) -> String {
    match b {
        0..1024 => format!("{b} B"),
        1024..1_048_576 => format!("{:.1} KiB", b as f64 / 1024.0),
        _ => format!("{:.1} MiB", b as f64 / 1_048_576.0),
    }
}

/// `time_ms` as `YYYY-MM-DDTHH:MM:SSZ` in UTC (whole seconds). A time no clock writes
/// (outside about the years -9999 to 9999: a damaged store) shows as its milliseconds.
fn utc_iso(time_ms: i64) -> String {
    match jiff::Timestamp::from_second(time_ms.div_euclid(1000)) {
        Ok(time) => time.to_string(),
        Err(_) => format!("{time_ms} ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(decision: &str, tool: &str, error: Option<&str>) -> AuditRecord {
        AuditRecord {
            time_ms: 1_700_000_000_123,
            decision: decision.into(),
            exposed_name: tool.into(),
            rule: "default".into(),
            outcome: "ok".into(),
            duration_us: 1_500,
            result_bytes: 2048,
            error: error.map(String::from),
            ..AuditRecord::default()
        }
    }

    #[test]
    fn dates() {
        assert_eq!(utc_iso(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_iso(1_700_000_000_123), "2023-11-14T22:13:20Z");
        assert_eq!(utc_iso(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc_iso(-1), "1969-12-31T23:59:59Z");
        assert_eq!(utc_iso(221_845_392_000_999), "9000-01-01T00:00:00Z");
        assert_eq!(utc_iso(i64::MAX), format!("{} ms", i64::MAX));
    }

    #[test]
    fn units() {
        assert_eq!(human_duration(999), "999µs");
        assert_eq!(human_duration(1_500), "1.5ms");
        assert_eq!(human_duration(2_500_000), "2.50s");
        assert_eq!(human_bytes(10), "10 B");
        assert_eq!(human_bytes(2048), "2.0 KiB");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }

    #[test]
    fn aligned_and_plain() {
        let table = format_table(
            &[
                record("allow", "fs__read", None),
                record("deny", "exec__run_long_name", None),
            ],
            false,
        );
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("TIME"));
        assert!(!lines[0].contains("ERROR"));
        let col = |l: &str| l.find("default").unwrap();
        assert_eq!(col(lines[1]), col(lines[2]));
        assert_eq!(lines[0].find("RULE").unwrap(), col(lines[1]));
        assert!(!table.contains('\x1b'));
        assert!(lines[1].ends_with("1.5ms  2.0 KiB"));
        let user = lines[0].find("USER").unwrap();
        assert_eq!(&lines[1][user..user + 2], "- ", "nobody vouched: {table}");
        let mut alice = record("allow", "fs__read", None);
        alice.subject = Some("alice".into());
        let table = format_table(&[alice], false);
        assert!(
            table.lines().nth(1).unwrap().contains("Z  alice  allow"),
            "{table}"
        );
    }

    #[test]
    fn color_and_errors_and_escapes() {
        let table = format_table(
            &[
                record("deny", "evil\x1b[2J", Some("boom\nline")),
                record("allow", "ok", None),
            ],
            true,
        );
        assert!(table.contains("\x1b[31mdeny\x1b[0m"));
        assert!(table.contains("\x1b[32mallow\x1b[0m"));
        assert!(table.contains("evil?[2J"));
        assert!(table.contains("boom?line"));
        assert!(table.lines().next().unwrap().ends_with("ERROR"));
        assert_eq!(table.matches('\x1b').count(), 4);
        assert_eq!(format_table(&[], false).lines().count(), 1);
    }
}
