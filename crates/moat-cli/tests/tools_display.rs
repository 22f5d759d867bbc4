//! `moat tools` shows argument types as a person reads them; `--json` prints the raw
//! definitions the server sent.

use std::time::Duration;

use serde_json::Value;

mod support;
use support::{Leftovers, MOAT, run};

const TIMEOUT: Duration = Duration::from_secs(60);
const PIPE_GRACE: Duration = Duration::from_secs(10);

fn tools(args: &[&str], server: &[&str]) -> support::Run {
    let mut argv: Vec<String> = vec![MOAT.into(), "tools".into()];
    argv.extend(args.iter().map(|s| s.to_string()));
    argv.push("--".into());
    argv.push(MOAT.into());
    argv.extend(server.iter().map(|s| s.to_string()));
    run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail)
}

fn line_of<'a>(out: &'a str, tool: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{tool}(")))
        .unwrap_or_else(|| panic!("no line for {tool} in:\n{out}"))
}

#[test]
fn argument_types_read_as_a_person_reads_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().to_string_lossy().into_owned();
    let out = tools(&[], &["serve", "fs", "--root", &root]);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let text = &out.stdout;
    assert!(!text.contains(": any"), "{text}");
    assert!(
        line_of(text, "list_directory")
            .starts_with("list_directory(limit?: integer, path?: string, recursive?: boolean)"),
        "{text}"
    );
    assert!(
        line_of(text, "read_file")
            .starts_with("read_file(length?: integer, offset?: integer, path: string)"),
        "{text}"
    );
    assert!(
        line_of(text, "write_file").contains("encoding?: \"text\" | \"base64\""),
        "{text}"
    );

    let exec = tools(&[], &["serve", "exec"]);
    assert!(
        line_of(&exec.stdout, "run_command").starts_with("run_command(argv: array of string, "),
        "{}",
        exec.describe()
    );

    // A schema as a server gives it ($defs and $ref, not the portable form): followed,
    // and the nested object spelled out.
    let everything = tools(&[], &["serve", "everything"]);
    assert!(
        line_of(&everything.stdout, "json_schema_2020_12_tool").starts_with(
            "json_schema_2020_12_tool(address?: {city?: string, street?: string}, \
             contactMethod?: \"phone\" | \"email\""
        ),
        "{}",
        everything.describe()
    );
}

#[test]
fn json_is_the_raw_definitions() {
    let out = tools(&["--json"], &["serve", "everything"]);
    let value = out.json(0);
    let list = value
        .as_array()
        .or_else(|| value["tools"].as_array())
        .cloned()
        .unwrap_or_else(|| panic!("no tool list in {value}"));
    let raw = list
        .iter()
        .find(|t| t["name"] == "json_schema_2020_12_tool")
        .expect("the 2020-12 tool");
    // Exactly what the server sent: its `$defs` and `$ref` are still there.
    assert_eq!(
        raw["inputSchema"]["properties"]["address"]["$ref"],
        Value::from("#/$defs/address")
    );
    assert!(raw["inputSchema"]["$defs"]["address"].is_object());
}
