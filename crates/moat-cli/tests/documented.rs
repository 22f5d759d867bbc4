//! Every option of every `moat` command is documented: each `--name` that some `--help`
//! lists appears in README.md or docs/. A new flag without a word in the docs fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn help(args: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run moat --help");
    assert!(
        out.status.success(),
        "moat {} --help failed",
        args.join(" ")
    );
    String::from_utf8(out.stdout).expect("UTF-8 help")
}

/// The subcommands a help text lists under "Commands:".
fn subcommands(text: &str) -> Vec<String> {
    let Some(start) = text.find("\nCommands:\n") else {
        return Vec::new();
    };
    text[start + "\nCommands:\n".len()..]
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// The long options a help text lists (`  -v, --verbose`, `      --json`).
fn long_options(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = match l.strip_prefix('-') {
                Some(rest) if !rest.starts_with('-') => rest.split_once(", ")?.1,
                _ => l,
            };
            let name = l.strip_prefix("--")?;
            let end = name
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(name.len());
            Some(name[..end].to_owned())
        })
        .filter(|name| !name.is_empty())
        .collect()
}

fn walk(args: Vec<String>, found: &mut BTreeMap<String, BTreeSet<String>>) {
    let text = help(&args);
    for option in long_options(&text) {
        found
            .entry(option)
            .or_default()
            .insert(format!("moat {}", args.join(" ")).trim_end().to_owned());
    }
    for sub in subcommands(&text) {
        let mut next = args.clone();
        next.push(sub);
        walk(next, found);
    }
}

fn docs_text() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut text = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let mut dirs: Vec<PathBuf> = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read docs/") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                text.push_str(&std::fs::read_to_string(&path).expect("a doc"));
            }
        }
    }
    text
}

#[test]
fn every_option_of_every_command_is_in_the_docs() {
    let mut found = BTreeMap::new();
    walk(Vec::new(), &mut found);
    assert!(
        found.contains_key("json"),
        "the help parser found no --json"
    );
    let docs = docs_text();
    let missing: Vec<String> = found
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "help" | "version"))
        .filter(|(name, _)| !docs.contains(&format!("--{name}")))
        .map(|(name, commands)| {
            let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
            format!("--{name} (of {})", commands.join(", "))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "options no page of README.md or docs/ mentions:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn the_help_parser_reads_clap_layouts() {
    let text = "Usage: moat x\n\nCommands:\n  one  First\n       more\n  help  Help\n\nOptions:\n  -v, --verbose...  Log\n      --json  JSON\n      --since <DURATION>  When\n";
    assert_eq!(subcommands(text), ["one"]);
    assert_eq!(long_options(text), ["verbose", "json", "since"]);
}
