//! The `embedded` example (moat-host as a library inside an application) run as a user
//! would, against the SDK's calculator example: the app sees the allowed tools through the
//! host, and the call the policy denies is refused. `cargo test --workspace` builds both
//! examples first; alone, run `cargo build -p moat -p moat-host --examples` before.

use std::path::PathBuf;
use std::time::Duration;

use moat_test_support::run::{Leftovers, run};

fn example(name: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let path: PathBuf = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("a target directory")
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "the example {name} is not built at {}: run `cargo build -p moat -p moat-host --examples` first",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

#[test]
fn the_embedded_gateway_lists_allowed_tools_and_refuses_denied_calls() {
    let argv = vec![example("embedded"), example("calculator")];
    let out = run(
        &argv,
        Duration::from_secs(60),
        Duration::from_secs(5),
        Leftovers::Fail,
    );
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert!(
        out.stdout
            .contains("tools through the host: calc__add, calc__divide\n"),
        "{}",
        out.describe()
    );
    assert!(
        out.stdout.contains("calc__add: ok: 13\n"),
        "{}",
        out.describe()
    );
    assert!(
        out.stdout
            .contains("calc__multiply: refused: moat's policy denies this call"),
        "{}",
        out.describe()
    );
}

#[test]
fn the_embedded_gateway_says_what_is_wrong_with_a_server_that_cannot_start() {
    let argv = vec![example("embedded"), "/nonexistent/server".into()];
    let out = run(
        &argv,
        Duration::from_secs(60),
        Duration::from_secs(5),
        Leftovers::Fail,
    );
    assert_eq!(out.code, Some(2), "{}", out.describe());
    assert!(
        out.stderr.contains("the server calc did not start"),
        "{}",
        out.describe()
    );
}
