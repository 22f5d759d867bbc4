//! What the binary says about itself: shell completion scripts (bash, zsh, fish) that the
//! shells accept and that name the subcommands, manual pages for the whole command tree, and
//! `--version` with the commit it was built from (or the crate's version alone outside a
//! git checkout).

use std::path::Path;
use std::process::{Command, Output};

#[path = "../build/version.rs"]
#[allow(dead_code)]
mod version;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// Subcommands every generated artefact must name.
const SUBCOMMANDS: &[&str] = &[
    "serve", "tools", "call", "gateway", "audit", "pins", "sandbox",
];

fn moat(args: &[&str]) -> Output {
    let out = Command::new(MOAT).args(args).output().expect("run moat");
    assert!(
        out.status.success(),
        "moat {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(args: &[&str]) -> String {
    String::from_utf8(moat(args).stdout).expect("UTF-8 output")
}

#[test]
fn bash_completion_parses_and_names_the_subcommands() {
    let script = stdout(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("moat.bash");
    std::fs::write(&file, &script).unwrap();
    let check = Command::new("bash")
        .arg("-n")
        .arg(&file)
        .output()
        .expect("run bash");
    assert!(
        check.status.success(),
        "bash -n rejects the script: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        script.contains("complete -F _moat"),
        "no completion registered for moat"
    );
    for name in SUBCOMMANDS {
        // Bash's script has a case arm per subcommand, naming its completion state.
        assert!(
            script.contains(&format!("moat,{name})"))
                && script.contains(&format!("moat__subcmd__{name}")),
            "bash script lacks {name}"
        );
    }
    // Nested subcommands and their options.
    assert!(script.contains("moat__subcmd__pins__subcmd__approve"));
    assert!(script.contains("--config"));
}

#[test]
fn sourcing_the_bash_completion_completes_subcommands() {
    // Run the completion function as bash would on `moat ga<TAB>`.
    let script = stdout(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("moat.bash");
    std::fs::write(&file, &script).unwrap();
    let probe = format!(
        "source {}; COMP_WORDS=(moat ga); COMP_CWORD=1; COMP_LINE='moat ga'; COMP_POINT=7; \
         _moat moat ga moat; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(probe)
        .output()
        .expect("run bash");
    let words = String::from_utf8_lossy(&out.stdout);
    assert!(
        words.lines().any(|w| w == "gateway"),
        "`moat ga<TAB>` does not offer gateway: {words:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn zsh_completion_names_the_subcommands() {
    let script = stdout(&["completions", "zsh"]);
    assert!(
        script.starts_with("#compdef moat"),
        "not a zsh completion function"
    );
    for name in SUBCOMMANDS {
        assert!(
            script.contains(&format!("'{name}:")),
            "zsh script lacks {name}"
        );
    }
    // The options of a subcommand, with their help.
    assert!(script.contains("--config"));
}

#[test]
fn fish_completion_names_the_subcommands() {
    let script = stdout(&["completions", "fish"]);
    for name in SUBCOMMANDS {
        assert!(
            script.contains(&format!("-a \"{name}\"")),
            "fish script lacks {name}"
        );
    }
    // Top-level words are offered only where no subcommand is given yet.
    assert!(script.contains("complete -c moat -n \"__fish_moat_needs_command\" -f -a \"gateway\""));
}

#[test]
fn elvish_and_powershell_completions_are_generated() {
    assert!(stdout(&["completions", "elvish"]).contains("edit:completion:arg-completer[moat]"));
    assert!(stdout(&["completions", "powershell"]).contains("Register-ArgumentCompleter"));
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let out = Command::new(MOAT)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn man_on_stdout_holds_every_page() {
    let pages = stdout(&["man"]);
    assert!(pages.contains(".TH moat 1"), "no page for moat");
    assert!(pages.contains(".SH NAME"));
    assert!(pages.contains(".SH SYNOPSIS"));
    assert!(pages.contains(".SH SUBCOMMANDS"));
    for name in SUBCOMMANDS {
        // The top page points at each subcommand's page, and that page follows.
        assert!(
            pages.contains(&format!("moat\\-{name}(1)")),
            "moat(1) lacks {name}"
        );
        assert!(
            pages.contains(&format!(".TH moat-{name} 1")),
            "no page for {name}"
        );
    }
    assert!(
        pages.contains(".TH moat-pins-approve 1"),
        "nested subcommands have pages"
    );
    assert!(
        !pages.contains(".TH moat-help"),
        "help is not a command of its own"
    );
}

#[test]
fn man_dir_writes_one_page_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("man1");
    let listed = stdout(&["man", "--dir", target.to_str().unwrap()]);
    let mut written: Vec<String> = std::fs::read_dir(&target)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    written.sort();
    assert_eq!(
        listed.lines().count(),
        written.len(),
        "each written page is listed"
    );
    assert!(written.contains(&"moat.1".to_owned()));
    for name in SUBCOMMANDS {
        let page = format!("moat-{name}.1");
        assert!(written.contains(&page), "no {page} in {written:?}");
        let text = std::fs::read_to_string(target.join(&page)).unwrap();
        assert!(
            text.contains(".SH NAME") && text.contains(".SH SYNOPSIS"),
            "{page}"
        );
    }
    assert!(written.contains(&"moat-audit-verify.1".to_owned()));
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let printed = stdout(&["--version"]);
    let printed = printed.trim_end();
    let crate_version = env!("CARGO_PKG_VERSION");
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    match version::checkout(manifest_dir) {
        Some(checkout) => {
            assert_eq!(
                printed,
                format!(
                    "moat {crate_version} ({} {})",
                    checkout.commit, checkout.date
                )
            );
            let head = Command::new("git")
                .args(["rev-parse", "HEAD"])
                .current_dir(manifest_dir)
                .output()
                .unwrap();
            let head = String::from_utf8(head.stdout).unwrap();
            assert!(
                head.starts_with(&checkout.commit),
                "{} is not HEAD {head}",
                checkout.commit
            );
            assert!(checkout.date.as_bytes().iter().enumerate().all(
                |(i, b)| if i == 4 || i == 7 {
                    *b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            ));
        }
        // Built from a package: nothing but the crate's version.
        None => assert_eq!(printed, format!("moat {crate_version}")),
    }
    // Subcommands print the same (propagated).
    assert_eq!(
        stdout(&["pins", "--version"]).trim_end(),
        printed.replacen("moat", "moat-pins", 1)
    );
}

#[test]
fn outside_a_checkout_the_version_is_the_crates_alone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Cargo.toml"), "[package]\n").unwrap();
    assert!(version::checkout(dir.path()).is_none());
    assert_eq!(version::describe("1.2.3", None), "1.2.3");
}

#[test]
fn an_untracked_copy_inside_a_checkout_is_not_one() {
    // `cargo package` verifies an unpacked copy under target/package/, inside the
    // repository but not tracked by it: that build must not claim the repository's commit.
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(repo)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("Cargo.toml"), "[package]\n").unwrap();
    git(&["add", "Cargo.toml"]);
    git(&["commit", "-q", "-m", "one"]);
    let copy = repo.join("target/package/moat-cli-0.1.0");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::write(copy.join("Cargo.toml"), "[package]\n").unwrap();
    assert!(version::checkout(&copy).is_none());
    let tracked = version::checkout(repo).expect("a tracked crate is in a checkout");
    let described = version::describe("1.2.3", Some(&tracked));
    assert!(
        described.starts_with(&format!("1.2.3 ({} ", tracked.commit)),
        "{described}"
    );
    assert!(!tracked.watch.is_empty(), "HEAD is watched");
}
