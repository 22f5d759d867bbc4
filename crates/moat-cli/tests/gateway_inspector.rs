//! The MCP Inspector's CLI (`@modelcontextprotocol/inspector`, pinned in
//! `interop/package.json`) in front of `moat gateway` over stdio, with a downstream server
//! that takes 6 s to start: the Inspector lists the server's tools and its call is
//! answered, each on the first attempt.
//!
//! The Inspector runs under `node` straight from its package's `bin` entry (no `npx`: no
//! network), with its catalog file in the test's temporary directory. It lives in
//! `interop/` (or `$MOAT_INTEROP_DIR`), installed by `.ci/run`; when it is missing the test
//! is skipped, except under CI (`CI` set), where it fails.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use serde_json::Value;

mod support;
use support::{Leftovers, Run, run, shell_quote};

/// Deadline of one Inspector run (the server alone takes 6 s to start).
const TIMEOUT: Duration = Duration::from_secs(60);
const PIPE_GRACE: Duration = Duration::from_secs(10);
const INSPECTOR_PACKAGE: &str = "node_modules/@modelcontextprotocol/inspector/package.json";

fn moat_bin() -> &'static str {
    env!("CARGO_BIN_EXE_moat")
}

/// The Inspector's launcher script (its package's `bin` entry `mcp-inspector`), or `None`
/// when the test is skipped.
fn inspector() -> Option<PathBuf> {
    let dir = support::interop_dir(&[INSPECTOR_PACKAGE])?;
    let manifest = dir.join(INSPECTOR_PACKAGE);
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("read {}: {e}", manifest.display()));
    let package: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", manifest.display()));
    let bin = package["bin"]["mcp-inspector"]
        .as_str()
        .unwrap_or_else(|| panic!("no bin.mcp-inspector in {}", manifest.display()));
    let script = manifest.parent().expect("package directory").join(bin);
    assert!(
        script.is_file(),
        "{} names {bin}, which is missing: reinstall the interop peers (`bash .ci/run --install-only`)",
        manifest.display()
    );
    Some(script)
}

/// A moat.toml in a fresh temporary directory: one server, `slow`, that is
/// `moat serve everything` after 6 s of sleep.
fn slow_config() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("moat-inspector-")
        .tempdir()
        .expect("temp dir");
    let dir_path = std::fs::canonicalize(dir.path()).expect("canonical temp dir");
    let config = format!(
        "state_dir = {state:?}\n\n\
         [servers.slow]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\nsandbox = false\n\n\
         [policy]\ndefault = \"allow\"\n\n[tool_search]\nmode = \"off\"\n",
        state = dir_path.join("state").to_string_lossy(),
        script = format!("sleep 6; exec {} serve everything", shell_quote(moat_bin())),
    );
    let file = dir_path.join("moat.toml");
    std::fs::write(&file, config).expect("write moat.toml");
    (dir, file)
}

/// `node INSPECTOR --cli ARGS -- moat gateway --config CONFIG`, the Inspector's catalog
/// kept in the configuration's directory. The gateway goes after `--`: its `--config`
/// would otherwise be taken for the Inspector's own.
fn inspect(inspector: &Path, config: &Path, args: &[&str]) -> Run {
    let catalog = config.with_file_name("inspector-catalog.json");
    let mut argv: Vec<String> = vec![
        "env".into(),
        format!("MCP_CATALOG_PATH={}", catalog.to_string_lossy()),
        "node".into(),
        inspector.to_string_lossy().into_owned(),
        "--cli".into(),
    ];
    argv.extend(args.iter().map(|s| (*s).to_owned()));
    argv.extend([
        "--".to_owned(),
        moat_bin().to_owned(),
        "gateway".to_owned(),
        "--config".to_owned(),
        config.to_string_lossy().into_owned(),
    ]);
    run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail)
}

#[test]
fn inspector_cli_lists_and_calls_a_server_that_starts_slowly() {
    let Some(inspector) = inspector() else { return };
    // Two gateways, each with its own slow server and state, at once.
    let list = {
        let inspector = inspector.clone();
        thread::spawn(move || {
            let (dir, config) = slow_config();
            let run = inspect(&inspector, &config, &["--method", "tools/list"]);
            drop(dir);
            run
        })
    };
    let call = thread::spawn(move || {
        let (dir, config) = slow_config();
        let run = inspect(
            &inspector,
            &config,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "slow__greet",
                "--tool-arg",
                "name=x",
            ],
        );
        drop(dir);
        run
    });

    let run = list.join().expect("tools/list thread");
    let out = run.json(0);
    let names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools array\n{}", run.describe()))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"slow__greet"),
        "slow__greet not listed: {names:?}\n{}",
        run.describe()
    );

    let run = call.join().expect("tools/call thread");
    let out = run.json(0);
    assert!(
        out["isError"] != true && out["content"][0]["text"] == "Hello, x!",
        "the call was not answered: {out}\n{}",
        run.describe()
    );
}
