//! Fuzz the sans-IO session alone: no runtime, no transport, no handler.
//!
//! The input's layout and every check live in `session_check.rs`, shared with the seed
//! test `crates/moat-protocol/tests/fuzz_seeds.rs` that CI runs.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("session_check.rs");

fuzz_target!(|data: &[u8]| check_session_input(data));
