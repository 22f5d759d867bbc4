//! `--state-key-file`: the keys sealing 2026-07-28 `requestState`, shared by the instances
//! behind a load balancer so that any of them takes a client's retry. One secret per line
//! (at least 32 characters; `openssl rand -base64 32` makes one): the first seals and
//! opens, the others only open — after a rotation, keep the old key on the second line
//! for 15 minutes, the lifetime of a state sealed with it. Blank lines and `#` comments
//! are skipped.

use std::path::Path;

use anyhow::{Context, anyhow, bail};
use moat::StateKey;

/// The current key and the retired ones, from `path`.
pub fn read(path: &Path) -> anyhow::Result<(StateKey, Vec<StateKey>)> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the state keys in {}", path.display()))?;
    parse(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
}

fn parse(text: &str) -> anyhow::Result<(StateKey, Vec<StateKey>)> {
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(key) = StateKey::from_secret(line) else {
            bail!(
                "line {}: a key needs at least 32 characters (make one with `openssl rand -base64 32`)",
                n + 1
            );
        };
        keys.push(key);
    }
    let mut keys = keys.into_iter();
    let current = keys
        .next()
        .ok_or_else(|| anyhow!("no key in the file (one secret per line, the current first)"))?;
    Ok((current, keys.collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_key_seals_and_short_or_missing_keys_are_refused() {
        let text = "# rotated 2026-12-01\nnew-secret-new-secret-new-secret-42\n\nold-secret-old-secret-old-secret-42\n";
        let (_, retired) = parse(text).expect("two keys");
        assert_eq!(retired.len(), 1);
        let err = parse("# only a comment\n").unwrap_err().to_string();
        assert!(err.contains("no key"), "{err}");
        let err = parse("ok-secret-ok-secret-ok-secret-ok-42\ntoo short\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
    }
}
