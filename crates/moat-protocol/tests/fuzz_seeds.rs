//! The `session` fuzz target's checks, run on every committed seed under
//! `fuzz/seeds/session/`: a smoke check of the sans-IO session that needs no cargo-fuzz,
//! no nightly flags and no instrumentation, so `cargo test` (and CI) runs it.
//!
//! The checks are the fuzz target's own (`fuzz/fuzz_targets/session_check.rs`, included
//! by both), so a seed that breaks one here would crash the fuzzer too, and the other way
//! round for any crash committed as a seed.

use std::path::{Path, PathBuf};

include!("../../../fuzz/fuzz_targets/session_check.rs");

fn seeds() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/session");
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    seeds.sort();
    seeds
}

#[test]
fn every_session_seed_passes_the_fuzz_targets_checks() {
    let seeds = seeds();
    // An empty or misplaced seed directory would make this test pass while checking nothing.
    assert!(seeds.len() >= 20, "only {} seeds found", seeds.len());
    let mut failed = Vec::new();
    for seed in &seeds {
        let data = std::fs::read(seed).unwrap_or_else(|e| panic!("{}: {e}", seed.display()));
        if std::panic::catch_unwind(|| check_session_input(&data)).is_err() {
            failed.push(seed.display().to_string());
        }
    }
    assert!(failed.is_empty(), "seeds that break a check: {failed:#?}");
}

#[test]
fn every_mode_byte_is_covered_by_a_seed() {
    // Each of the ten role/stage/single-request setups the digits `0`..`9` name gets
    // at least one seed, so none of the session's starting states goes unchecked.
    let firsts: std::collections::BTreeSet<u8> = seeds()
        .iter()
        .filter_map(|seed| std::fs::read(seed).ok()?.first().copied())
        .collect();
    for digit in b'0'..=b'9' {
        assert!(
            firsts.contains(&digit),
            "no seed starts with {}",
            digit as char
        );
    }
}
