//! The one way moat reads a duration, in the configuration (`call_timeout = "30s"`,
//! `[consent] timeout`, `[gateway] startup_timeout`, …) and on the command line (`moat audit
//! --since 1h30m`, `--timeout`). The grammar is documented in docs/gateway.md
//! ("Durations").
//!
//! A duration is one or more parts, each a number (whole or decimal) and a unit, the units
//! from largest to smallest, each at most once: `w`, `d`, `h`, `m` (`min`, `mins`), `s`
//! (`sec`, `secs`), `ms`. So `90s`, `500ms`, `1.5h`, `1h30m`, `2d12h`; a space may stand
//! between a number and its unit (`5 s`). A bare number is seconds (`7`, `2.5`). Units out
//! of order or repeated (`30m1h`, `1h1h`) are errors rather than guesses.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// A text that is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {input:?}: {reason} (expected e.g. \"30s\", \"500ms\", \"1.5h\", \"1h30m\", or a number of seconds)"
)]
pub struct DurationError {
    /// What was given.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

/// The units, largest first, each with the names it is written as and its length.
const UNITS: &[(&[&str], Duration)] = &[
    (&["w"], Duration::from_secs(604_800)),
    (&["d"], Duration::from_secs(86_400)),
    (&["h"], Duration::from_secs(3_600)),
    (&["m", "min", "mins"], Duration::from_secs(60)),
    (&["s", "sec", "secs"], Duration::from_secs(1)),
    (&["ms"], Duration::from_millis(1)),
];

/// Parses a duration (see the module docs for the grammar).
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let fail = |reason: String| DurationError {
        input: s.to_owned(),
        reason,
    };
    let text = s.trim();
    if text.is_empty() {
        return Err(fail("empty".into()));
    }
    let mut total = 0.0_f64;
    // Index into UNITS after the smallest unit seen so far: later parts must be smaller.
    let mut next_unit = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.')
                .len();
        if number_len == 0 {
            return Err(fail(format!("expected a number at {rest:?}")));
        }
        let number: f64 = rest[..number_len]
            .parse()
            .map_err(|_| fail(format!("{:?} is not a number", &rest[..number_len])))?;
        rest = rest[number_len..].trim_start_matches(' ');
        let unit_len = rest.len() - rest.trim_start_matches(|c: char| c.is_alphabetic()).len();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale = if unit.is_empty() {
            // A bare number is seconds, and only on its own: `1h30` is a typo.
            if next_unit != 0 || !rest.is_empty() {
                return Err(fail(format!("missing unit after {number}")));
            }
            Duration::from_secs(1)
        } else {
            let Some(index) = UNITS.iter().position(|(names, _)| names.contains(&unit)) else {
                return Err(fail(format!("unknown unit {unit:?}")));
            };
            if index < next_unit {
                return Err(fail(format!(
                    "unit {unit:?} repeated or after a smaller unit"
                )));
            }
            next_unit = index + 1;
            UNITS[index].1
        };
        total += number * scale.as_secs_f64();
    }
    Duration::try_from_secs_f64(total).map_err(|_| fail("too large".into()))
}

/// A duration in the configuration: a string in the grammar above, or a TOML number of
/// seconds.
pub(crate) struct DurationValue(pub Duration);

impl<'de> Deserialize<'de> for DurationValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DurationValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"30s\", \"500ms\", \"2m\", or a number of seconds")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(DurationValue(Duration::from_secs(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u64::try_from(v)
                    .map(|v| DurationValue(Duration::from_secs(v)))
                    .map_err(|_| E::custom("a duration cannot be negative"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Duration::try_from_secs_f64(v)
                    .map(DurationValue)
                    .map_err(|_| E::custom(format!("{v} is not a duration in seconds")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                parse_duration(v).map(DurationValue).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> u128 {
        parse_duration(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .as_millis()
    }

    #[test]
    fn accepts_what_the_command_line_took() {
        assert_eq!(ms("90s"), 90_000);
        assert_eq!(ms("15m"), 900_000);
        assert_eq!(ms("1h"), 3_600_000);
        assert_eq!(ms("2d"), 172_800_000);
        assert_eq!(ms("1w"), 604_800_000);
        assert_eq!(ms("1h30m"), 5_400_000);
        assert_eq!(ms("1d2h3m4s"), 93_784_000);
        assert_eq!(ms("0s"), 0);
        assert_eq!(ms(" 5m "), 300_000);
        assert_eq!(ms("007m"), 420_000);
    }

    #[test]
    fn accepts_what_the_configuration_took() {
        assert_eq!(ms("30s"), 30_000);
        assert_eq!(ms("500ms"), 500);
        assert_eq!(ms("1.5s"), 1_500);
        assert_eq!(ms("2m"), 120_000);
        assert_eq!(ms("7"), 7_000);
        assert_eq!(ms("2.5"), 2_500);
        assert_eq!(ms("5 s"), 5_000);
        assert_eq!(ms("3sec"), 3_000);
        assert_eq!(ms("3secs"), 3_000);
        assert_eq!(ms("2min"), 120_000);
        assert_eq!(ms("2mins"), 120_000);
    }

    #[test]
    fn accepts_the_two_together() {
        assert_eq!(ms("1.5h"), 5_400_000);
        assert_eq!(ms("1m30s"), 90_000);
        assert_eq!(ms("1s500ms"), 1_500);
        assert_eq!(ms("90"), 90_000);
    }

    #[test]
    fn rejects() {
        for bad in [
            "",
            "  ",
            "h",
            "soon",
            "5 fortnights",
            "1x",
            "1H",
            "1h 30m",
            "1h30",
            "30m1h",
            "1h1h",
            "500ms1s",
            "-1h",
            "1.2.3s",
            "1hh",
            "99999999999999999999999999999999999999999w",
            "1µs",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert_eq!(err.input, bad);
            assert!(err.to_string().contains("expected e.g."), "{err}");
        }
    }
}
