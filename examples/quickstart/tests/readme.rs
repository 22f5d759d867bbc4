//! README's quick start is this crate: its code block is `src/main.rs` exactly, and its
//! `cargo add` lines name exactly this crate's dependencies. The crate builds with the
//! workspace, so the README example compiles for a new user or CI fails.

use std::collections::BTreeSet;

const README: &str = include_str!("../../../README.md");
const MAIN: &str = include_str!("../src/main.rs");
const MANIFEST: &str = include_str!("../Cargo.toml");

/// The body of the README code block that follows `heading`, fenced as `lang`.
fn block_after(heading: &str, lang: &str) -> String {
    let start = README
        .find(heading)
        .unwrap_or_else(|| panic!("README has no {heading:?}"));
    let rest = &README[start..];
    let fence = format!("```{lang}\n");
    let open = rest
        .find(&fence)
        .unwrap_or_else(|| panic!("no ```{lang} block after {heading:?}"))
        + fence.len();
    let close = rest[open..].find("```\n").expect("the block ends") + open;
    rest[open..close].to_owned()
}

#[test]
fn the_readme_quick_start_is_this_crate() {
    let code = block_after("## Write a server in 30 seconds", "rust");
    assert_eq!(
        code, MAIN,
        "README's quick start and examples/quickstart/src/main.rs differ: change both"
    );
}

#[test]
fn the_readme_says_to_add_exactly_these_dependencies() {
    let shell = block_after("## Write a server in 30 seconds", "sh");
    let mut named = BTreeSet::new();
    for line in shell.lines().filter(|l| l.starts_with("cargo add ")) {
        let mut words = line.split_whitespace().skip(2);
        while let Some(word) = words.next() {
            if word == "--features" {
                words.next();
            } else if !word.starts_with('-') {
                named.insert(word.to_owned());
            }
        }
    }
    let manifest: BTreeSet<String> = MANIFEST
        .split("[dependencies]")
        .nth(1)
        .expect("a [dependencies] table")
        .lines()
        .filter_map(|l| l.split_once(" = ").map(|(name, _)| name.trim().to_owned()))
        .collect();
    assert_eq!(named, manifest, "README's `cargo add` lines:\n{shell}");
    assert!(shell.contains("tokio/macros") && shell.contains("tokio/rt-multi-thread"));
    assert!(shell.contains("serde --features derive"));
}
