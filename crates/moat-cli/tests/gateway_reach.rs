//! Black-box tests of the reach of a command server written in moat.toml: with no `sandbox`
//! table, its sandbox gives it what its command line names (the program's installation,
//! the files it runs, the folders it is given) and nothing else — never `/`, never the
//! home directory, the folder of the moat.toml only read-only.
//!
//! Real peers: npm's `@modelcontextprotocol/server-filesystem` and
//! `interop/py_mutable_server.py` behind the gateway, the official Python SDK client
//! (`interop/py_client.py`) in front. They live in `interop/` (installed by `.ci/run`);
//! missing peers skip a test, except under CI.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

mod support;
use support::{Leftovers, Run, run};

const TIMEOUT: Duration = Duration::from_secs(90);
const PIPE_GRACE: Duration = Duration::from_secs(10);
const FILESYSTEM_JS: &str = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js";
const VENV_PYTHON: &str = ".venv/bin/python";

fn peers() -> Option<PathBuf> {
    support::interop_dir(&[
        FILESYSTEM_JS,
        VENV_PYTHON,
        "py_client.py",
        "py_mutable_server.py",
    ])
}

fn path(dir: &Path, rel: &str) -> String {
    dir.join(rel).to_string_lossy().into_owned()
}

/// The Python SDK client, with `args`, in front of `moat gateway --config CONFIG`, all with
/// `HOME` set to `home`.
fn py_client(peers: &Path, home: &Path, args: &[String], config: &Path) -> Run {
    let mut argv: Vec<String> = vec![
        "env".into(),
        format!("HOME={}", home.display()),
        path(peers, VENV_PYTHON),
        path(peers, "py_client.py"),
        "--timeout".into(),
        "60".into(),
    ];
    argv.extend(args.iter().cloned());
    argv.extend([
        "--".to_owned(),
        env!("CARGO_BIN_EXE_moat").to_owned(),
        "gateway".to_owned(),
        "--config".to_owned(),
        config.to_string_lossy().into_owned(),
    ]);
    run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail)
}

/// `--call NAME ARGUMENTS`
fn call(name: &str, arguments: Value) -> [String; 3] {
    ["--call".into(), name.into(), arguments.to_string()]
}

/// Call `i` of the client's output: whether it failed, and its text.
fn outcome(out: &Value, i: usize) -> (bool, String) {
    let result = &out["calls"][i]["result"];
    let failed = out["calls"][i].get("error").is_some() || result["isError"] == true;
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    (failed, text.to_owned())
}

/// A home directory (its real path) with the moat.toml in `~/.config/moat` (`body` after
/// `state_dir`, with every call allowed and tool search off); the file's path.
fn home_with_config(home: &Path, body: &str) -> PathBuf {
    let conf = home.join(".config/moat");
    std::fs::create_dir_all(&conf).unwrap();
    let config = conf.join("moat.toml");
    let text = format!(
        "state_dir = {:?}\n\n{body}\n[policy]\ndefault = \"allow\"\n\n[tool_search]\nmode = \"off\"\n",
        home.join("state").to_string_lossy()
    );
    std::fs::write(&config, text).unwrap();
    config
}

/// The attack: a filesystem server told to serve `/`, the home directory, a folder in it and
/// the moat.toml's own folder allows every path itself, but its sandbox gives it only the
/// folder read-write and the moat.toml's folder read-only: a file elsewhere in the home
/// cannot be read, and the moat.toml cannot be rewritten to free the server.
#[test]
fn a_moat_toml_server_reads_only_what_its_command_line_names() {
    let Some(peers) = peers() else { return };
    let guard = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(guard.path()).unwrap();
    let desktop = home.join("Desktop");
    std::fs::create_dir_all(&desktop).unwrap();
    std::fs::write(desktop.join("hello.txt"), "hello from the desktop\n").unwrap();
    let secret = home.join("secret.txt");
    std::fs::write(&secret, "the launch codes\n").unwrap();
    let conf = home.join(".config/moat");
    // No `sandbox` table: all it gets is what its command line names.
    let config = home_with_config(
        &home,
        &format!(
            "[servers.files]\ncommand = \"node\"\nargs = [{:?}, \"/\", \"${{HOME}}\", \"${{HOME}}/Desktop\", {:?}]\n",
            path(&peers, FILESYSTEM_JS),
            conf.to_string_lossy()
        ),
    );
    let written = std::fs::read_to_string(&config).unwrap();
    let mut args = vec!["--tolerate-errors".to_owned()];
    args.extend(call(
        "files__read_text_file",
        json!({ "path": desktop.join("hello.txt") }),
    ));
    args.extend(call("files__read_text_file", json!({ "path": secret })));
    args.extend(call(
        "files__write_file",
        json!({ "path": config, "content": "[servers.files]\nsandbox = false\n" }),
    ));
    args.extend(call(
        "files__write_file",
        json!({ "path": desktop.join("note.txt"), "content": "written" }),
    ));
    let run = py_client(&peers, &home, &args, &config);
    let out = run.json(0);
    let shown = run.describe();
    assert_eq!(
        outcome(&out, 0),
        (false, "hello from the desktop\n".to_owned()),
        "the folder it was given is readable: {shown}"
    );
    assert!(outcome(&out, 1).0, "the secret read must fail: {shown}");
    assert!(
        !run.stdout.contains("launch codes"),
        "the secret reached the client: {shown}"
    );
    assert!(outcome(&out, 2).0, "the moat.toml write must fail: {shown}");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        written,
        "the moat.toml was rewritten: {shown}"
    );
    assert!(!outcome(&out, 3).0, "the folder is writable: {shown}");
    assert_eq!(
        std::fs::read_to_string(desktop.join("note.txt")).unwrap(),
        "written"
    );
}

/// A virtualenv's Python running a script, written in moat.toml with no `sandbox` table,
/// starts and answers: the venv, the interpreter it links to and the script's folder are
/// readable without being listed by hand.
#[test]
fn a_moat_toml_virtualenv_server_runs_without_listing_its_paths() {
    let Some(peers) = peers() else { return };
    let guard = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(guard.path()).unwrap();
    let tools = json!([{"name": "echo", "description": "Echoes its input."}]).to_string();
    let config = home_with_config(
        &home,
        &format!(
            "[servers.py]\ncommand = {:?}\nargs = [{:?}]\nenv = {{ MOAT_TEST_TOOLS = {:?} }}\n",
            path(&peers, VENV_PYTHON),
            path(&peers, "py_mutable_server.py"),
            tools
        ),
    );
    let run = py_client(&peers, &home, &[], &config);
    let out = run.json(0);
    assert_eq!(out["tools"], json!(["py__echo"]), "{}", run.describe());
}
