//! Durations as people type them on the command line (`moat audit --since 1h30m`).

use std::time::Duration;

/// A `--since` value that is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (expected e.g. 90s, 15m, 1h, 2d, 1h30m)")]
pub struct DurationError {
    /// What was given.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

/// The units, largest first; a duration names each at most once, in this order.
const UNITS: &[(char, u64)] = &[
    ('w', 604_800),
    ('d', 86_400),
    ('h', 3_600),
    ('m', 60),
    ('s', 1),
];

/// Parses `90s`, `15m`, `1h`, `2d`, `1w` and combinations such as `1h30m` or `2d12h`.
///
/// Each part is a whole number and a unit (`w`, `d`, `h`, `m`, `s`); units go from largest to
/// smallest and appear at most once, so a typo such as `30m1h` is an error rather than a guess.
/// Surrounding whitespace is ignored; a bare number is an error (seconds or minutes?).
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let fail = |reason: String| DurationError {
        input: s.to_string(),
        reason,
    };
    let text = s.trim();
    if text.is_empty() {
        return Err(fail("empty".into()));
    }
    let mut total: u64 = 0;
    // Index into UNITS of the smallest unit seen so far: later parts must be smaller.
    let mut next_unit = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(fail(format!("expected a number at {rest:?}")));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| fail("number too large".into()))?;
        rest = &rest[digits..];
        let Some(unit) = rest.chars().next() else {
            return Err(fail(format!("missing unit after {number}")));
        };
        let Some(index) = UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(fail(format!("unknown unit {unit:?}")));
        };
        if index < next_unit {
            return Err(fail(format!(
                "unit {unit:?} repeated or after a smaller unit"
            )));
        }
        next_unit = index + 1;
        rest = &rest[unit.len_utf8()..];
        total = number
            .checked_mul(UNITS[index].1)
            .and_then(|secs| total.checked_add(secs))
            .ok_or_else(|| fail("too large".into()))?;
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: &str) -> u64 {
        parse_duration(s).unwrap().as_secs()
    }

    #[test]
    fn accepts() {
        assert_eq!(secs("90s"), 90);
        assert_eq!(secs("15m"), 900);
        assert_eq!(secs("1h"), 3600);
        assert_eq!(secs("2d"), 172_800);
        assert_eq!(secs("1w"), 604_800);
        assert_eq!(secs("1h30m"), 5400);
        assert_eq!(secs("1d2h3m4s"), 93_784);
        assert_eq!(secs("0s"), 0);
        assert_eq!(secs(" 5m "), 300);
        assert_eq!(secs("007m"), 420);
    }

    #[test]
    fn rejects() {
        for bad in [
            "",
            "  ",
            "90",
            "h",
            "1x",
            "1H",
            "1h 30m",
            "30m1h",
            "1h1h",
            "-1h",
            "1.5h",
            "1hh",
            "99999999999999999999s",
            "40000000000000w",
            "1µs",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert_eq!(err.input, bad);
            assert!(err.to_string().contains("expected e.g."), "{err}");
        }
    }
}
