//! What the black-box suites share: the drivers of `moat-test-support` (commands run with
//! a deadline, JSON-lines stdio, process trees, the interop peers, the HTTP gateway), and
//! the parts that need this crate's `moat` binary or the SDK. Each suite includes it with
//! `mod support;` and uses the parts it needs.

#![allow(dead_code, unused_imports)]

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use moat_test_support::lines::wait_exit;
pub use moat_test_support::procs::{Proc, processes};
pub use moat_test_support::*;

/// The `moat` binary under test.
pub const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// `moat serve everything` on piped stdio, stderr discarded, driven line by line.
pub fn serve_everything() -> (Child, Lines) {
    Lines::spawn(
        Command::new(MOAT)
            .args(["serve", "everything"])
            .stderr(Stdio::null()),
    )
}

/// The names of the tools `client` lists (every page).
pub async fn tool_names(client: &moat::Client) -> BTreeSet<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name)
        .collect()
}

/// Polls `client`'s tool list until `check` holds for it; fails after `within`.
pub async fn wait_for_tools(
    client: &moat::Client,
    what: &str,
    within: Duration,
    check: impl Fn(&BTreeSet<String>) -> bool,
) {
    let deadline = Instant::now() + within;
    loop {
        let names = tool_names(client).await;
        if check(&names) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; tools: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
