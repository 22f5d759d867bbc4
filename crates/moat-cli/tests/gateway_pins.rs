//! Launch pins through `moat gateway`: a project's `.vscode/mcp.json` whose server command
//! is swapped while the gateway runs (a `git pull`, a tool that writes files) does not run
//! the new command — a marker file it would create never appears, its tools go, the client
//! is told why — until `moat pins approve server:NAME`; then it does. A server added to the
//! file while the gateway runs is held the same way.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use moat::{Client, ProtocolVersion, VersionPreference};

mod support;
use support::{Leftovers, Run, run};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");
const TIMEOUT: Duration = Duration::from_secs(60);
const PIPE_GRACE: Duration = Duration::from_secs(10);

/// A workspace with `.vscode/mcp.json`, and a moat.toml that imports it.
struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    toml: PathBuf,
    vscode: PathBuf,
}

impl Workspace {
    fn new() -> Workspace {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join("ws/.vscode")).expect("mkdir");
        let toml = root.join("moat.toml");
        let vscode = root.join("ws/.vscode/mcp.json");
        let ws = Workspace {
            _dir: dir,
            root,
            toml,
            vscode,
        };
        ws.write_toml(&["shell"]);
        ws
    }

    /// Writes moat.toml. The adjustments are the user's own: no sandbox for `unconfined`
    /// (their marker is written anywhere), no tool search, calls allowed.
    fn write_toml(&self, unconfined: &[&str]) {
        let mut text = format!(
            "state_dir = {:?}\nimport = {:?}\n\n",
            self.root.join("state").display().to_string(),
            self.vscode.display().to_string(),
        );
        for name in unconfined {
            text.push_str(&format!("[servers.{name}]\nsandbox = false\n\n"));
        }
        text.push_str("[tool_search]\nmode = \"off\"\n\n[policy]\ndefault = \"allow\"\n");
        let tmp = self.toml.with_extension("toml.tmp");
        std::fs::write(&tmp, text).expect("write moat.toml");
        std::fs::rename(&tmp, &self.toml).expect("rename moat.toml");
    }

    fn marker(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Writes mcp.json: each server touches its marker, then serves `everything`.
    fn write_servers(&self, servers: &[(&str, &str)]) {
        let entries: Vec<String> = servers
            .iter()
            .map(|(name, marker)| {
                let script = format!(
                    "touch {} && exec {} serve everything",
                    self.marker(marker).display(),
                    MOAT
                );
                format!(
                    "    {name:?}: {{\"type\": \"stdio\", \"command\": \"/bin/sh\", \"args\": [\"-c\", {script:?}]}}"
                )
            })
            .collect();
        let text = format!("{{\n  \"servers\": {{\n{}\n  }}\n}}\n", entries.join(",\n"));
        // Written aside and renamed over, as editors and git do: never seen half-written.
        let tmp = self.vscode.with_extension("json.tmp");
        std::fs::write(&tmp, text).expect("write mcp.json");
        std::fs::rename(&tmp, &self.vscode).expect("rename mcp.json");
    }

    fn moat(&self, args: &[&str]) -> Run {
        let mut argv: Vec<String> = vec![MOAT.to_owned()];
        argv.extend(args.iter().map(|s| (*s).to_owned()));
        argv.extend(["--config".to_owned(), self.toml.display().to_string()]);
        run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail)
    }
}

/// Polls until `check` holds for the tool list, or fails after a deadline.
async fn wait_for(client: &Client, what: &str, check: impl Fn(&BTreeSet<String>) -> bool) {
    support::wait_for_tools(client, what, Duration::from_secs(20), check).await;
}

fn wait_for_file(path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first log message about the held server `shell`.
async fn held_message(
    notifications: &mut tokio::sync::broadcast::Receiver<moat::ServerNotification>,
) -> String {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match notifications.recv().await {
                Ok(n) if n.method == "notifications/message" => {
                    let text = n.params.map(|p| p["data"].to_string()).unwrap_or_default();
                    if text.contains("server shell") {
                        return text;
                    }
                }
                Ok(_) => {}
                Err(e) => panic!("notifications ended: {e}"),
            }
        }
    })
    .await
    .expect("a log message about the held server")
}

/// A 2026-07-28 `tools/list` to a gateway on `toml`, asking for warnings: the log
/// messages that came with the answer.
fn modern_list_messages(toml: &Path) -> Vec<String> {
    use std::io::{BufRead, BufReader, Write};
    let mut child = std::process::Command::new(MOAT)
        .args(["gateway", "--config"])
        .arg(toml)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the gateway starts");
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/logLevel": "warning",
    });
    let request = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta},
    });
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{request}").expect("send tools/list");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut messages = Vec::new();
    loop {
        let line = rx
            .recv_timeout(TIMEOUT)
            .expect("the gateway answers tools/list");
        let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        if v["method"] == "notifications/message" {
            messages.push(v["params"]["data"].to_string());
        } else if v["id"] == 1 {
            assert!(v["result"]["tools"].is_array(), "{line}");
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    messages
}

#[tokio::test(flavor = "multi_thread")]
async fn a_swapped_command_in_an_imported_vscode_file_never_runs_until_approved() {
    let ws = Workspace::new();
    ws.write_servers(&[("shell", "first")]);
    let client = Client::connect_command([
        MOAT,
        "gateway",
        "--config",
        ws.toml.to_str().expect("utf-8 path"),
    ])
    .await
    .expect("the gateway starts");
    let mut notifications = client.notifications();

    // First start: trusted on first use, pinned, running.
    wait_for(&client, "shell's tools", |t| t.contains("shell__greet")).await;
    assert!(ws.marker("first").exists(), "the first command ran");

    // The file changes under the gateway: a new command.
    ws.write_servers(&[("shell", "swapped")]);
    wait_for(&client, "shell's tools to go", |t| {
        !t.iter().any(|n| n.starts_with("shell__"))
    })
    .await;
    // The client is told why and what to run.
    let told = held_message(&mut notifications).await;
    assert!(
        told.contains("moat pins approve server:shell"),
        "the message says what to run: {told}"
    );
    // A call of its tool says the same.
    let refused = client
        .call_tool("shell__greet", serde_json::json!({"name": "x"}))
        .await;
    let text = match refused {
        Ok(result) => format!("{result:?}"),
        Err(e) => e.to_string(),
    };
    assert!(text.contains("server:shell"), "{text}");

    // `moat pins` shows the held server with the difference.
    let pins = ws.moat(&["pins"]);
    assert_eq!(pins.code, Some(0), "{}", pins.describe());
    assert!(
        pins.stdout.contains("server:shell") && pins.stdout.contains("HELD"),
        "{}",
        pins.describe()
    );
    assert!(
        pins.stdout.contains("-") && pins.stdout.contains("swapped"),
        "the diff shows the new command: {}",
        pins.describe()
    );
    // Another gateway on the same state holds it too, and says so in --check.
    let check = ws.moat(&["gateway", "--check"]);
    assert_ne!(check.code, Some(0), "{}", check.describe());
    assert!(
        check.stdout.contains("held server (not started): shell"),
        "{}",
        check.describe()
    );
    // Clients that connect while it is held are told too: a handshake-era client after
    // its `initialized`, a 2026-07-28 client with a `tools/list` that asks for messages.
    let builder =
        Client::builder().protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25));
    let mut later_notes = builder.notifications();
    let later = builder
        .connect_command([
            MOAT,
            "gateway",
            "--config",
            ws.toml.to_str().expect("utf-8 path"),
        ])
        .await
        .expect("a second gateway starts");
    let told = held_message(&mut later_notes).await;
    assert!(told.contains("moat pins approve server:shell"), "{told}");
    later.close().await;
    let told = modern_list_messages(&ws.toml);
    assert!(
        told.iter()
            .any(|m| m.contains("server shell") && m.contains("moat pins approve server:shell")),
        "a 2026-07-28 tools/list asking for warnings hears of the held server: {told:?}"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        !ws.marker("swapped").exists(),
        "the swapped command ran before it was approved"
    );

    // Approved from another process: the running gateway starts it.
    let approve = ws.moat(&["pins", "approve", "server:shell"]);
    assert_eq!(approve.code, Some(0), "{}", approve.describe());
    assert!(approve.stdout.contains("swapped"), "{}", approve.describe());
    wait_for_file(&ws.marker("swapped"), "the approved command to run");
    wait_for(&client, "shell's tools back", |t| {
        t.contains("shell__greet")
    })
    .await;

    // A server added to the file while the gateway runs is held the same way.
    ws.write_servers(&[("shell", "swapped"), ("extra", "extra")]);
    ws.write_toml(&["shell", "extra"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pins = ws.moat(&["pins", "--json"]);
        let held = pins.json(0)["servers"]
            .as_array()
            .expect("servers")
            .iter()
            .any(|s| s["server"] == "extra" && s["hash"].is_null());
        if held {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "extra was not held: {}",
            pins.describe()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        !ws.marker("extra").exists(),
        "an added server ran unapproved"
    );
    assert!(
        !support::tool_names(&client)
            .await
            .iter()
            .any(|n| n.starts_with("extra__"))
    );
    let approve = ws.moat(&["pins", "approve", "server:extra"]);
    assert_eq!(approve.code, Some(0), "{}", approve.describe());
    wait_for_file(&ws.marker("extra"), "the approved server to start");
    wait_for(&client, "extra's tools", |t| t.contains("extra__greet")).await;
    // shell kept running all along.
    assert!(support::tool_names(&client).await.contains("shell__greet"));
    client.close().await;
}

/// The same exec server named `shell` in two workspaces (same command line, each run in its
/// own folder, each describing that folder in its tool), one state directory: neither
/// holds the other's tool back, and `moat pins` tells the two apart.
#[test]
fn two_configurations_reusing_a_server_name_do_not_hold_each_others_tools() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    let configs: Vec<PathBuf> = ["one", "two"]
        .iter()
        .map(|name| {
            let ws = dir.path().join(name);
            std::fs::create_dir_all(&ws).expect("mkdir");
            let path = ws.join("moat.toml");
            let text = format!(
                "state_dir = {:?}\n\n[servers.shell]\ncommand = {MOAT:?}\n\
                 args = [\"serve\", \"exec\", \"--rw\", \".\"]\ncwd = \".\"\nsandbox = false\n\n\
                 [policy]\ndefault = \"allow\"\n",
                state.display().to_string()
            );
            std::fs::write(&path, text).expect("write moat.toml");
            path
        })
        .collect();
    let moat = |args: &[&str], config: &Path| {
        let mut argv: Vec<String> = vec![MOAT.to_owned()];
        argv.extend(args.iter().map(|s| (*s).to_owned()));
        argv.extend(["--config".to_owned(), config.display().to_string()]);
        run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail)
    };
    for config in configs.iter().chain(configs.iter()) {
        let check = moat(&["gateway", "--check", "--json"], config);
        let out = check.json(0);
        assert_eq!(
            out["tools"],
            serde_json::json!(["shell__run_command"]),
            "{}",
            check.describe()
        );
        assert_eq!(out["held"], serde_json::json!([]), "{}", check.describe());
    }
    // Two pins under one name, each shown with its identity and the flag that chooses it.
    let pins = moat(&["pins"], &configs[0]);
    assert_eq!(pins.code, Some(0), "{}", pins.describe());
    let lines: Vec<&str> = pins
        .stdout
        .lines()
        .filter(|l| l.starts_with("shell__run_command"))
        .collect();
    assert_eq!(lines.len(), 2, "{}", pins.describe());
    for (line, name) in lines.iter().zip(["one", "two"]) {
        assert!(
            line.contains(&format!("/{name}/")),
            "{line}\n{}",
            pins.describe()
        );
    }
    // With --config, a name means that configuration's server.
    let listed = moat(&["pins", "--json"], &configs[0]).json(0);
    assert_eq!(
        listed["tools"].as_array().map(Vec::len),
        Some(2),
        "{listed:#}"
    );
    let reset = moat(&["pins", "reset", "shell__run_command"], &configs[1]);
    assert_eq!(reset.code, Some(0), "{}", reset.describe());
    let left = moat(&["pins", "--json"], &configs[0]).json(0);
    let left = left["tools"].as_array().expect("tools").clone();
    assert_eq!(left.len(), 1, "{left:#?}");
    assert!(
        left[0]["identity"]
            .as_str()
            .is_some_and(|i| i.contains("/one/")),
        "{left:#?}"
    );
}
