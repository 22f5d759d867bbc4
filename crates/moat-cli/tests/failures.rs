//! Failures that explain themselves: the client commands (`moat tools`, `call`, `resources`,
//! `read`, `prompts`, `prompt`) never die silently when the server they launched does. They
//! exit 2 with a message naming the server's exit status and its last lines on stderr,
//! every time (writing to the dead server's stdin used to kill moat with SIGPIPE, exit 141,
//! in a race this suite repeats to catch). And when their own stdout is closed early
//! (`moat tools … | head`), they stop printing and end quietly, as Unix filters do.

mod support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::{Leftovers, Run};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// Runs `moat ARGS…` with a deadline, failing if anything it started outlives it.
fn moat(args: &[&str]) -> Run {
    let argv: Vec<String> = std::iter::once(MOAT)
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect();
    support::run(
        &argv,
        Duration::from_secs(30),
        Duration::from_secs(5),
        Leftovers::Fail,
    )
}

/// Asserts the run failed with exit 2 and an error on stderr containing each of `needles`.
fn assert_explained(run: &Run, needles: &[&str]) {
    assert_eq!(
        run.code,
        Some(2),
        "expected exit 2 (a connection failure), not a silent death\n{}",
        run.describe()
    );
    assert!(
        run.stderr.contains("error: "),
        "no error message\n{}",
        run.describe()
    );
    for needle in needles {
        assert!(
            run.stderr.contains(needle),
            "stderr should contain {needle:?}\n{}",
            run.describe()
        );
    }
    assert!(
        !run.stderr.contains("panicked"),
        "moat panicked\n{}",
        run.describe()
    );
}

/// Each client command, with the arguments it needs before `--`.
const COMMANDS: [&[&str]; 6] = [
    &["tools"],
    &["call", "t"],
    &["resources"],
    &["read", "file:///x"],
    &["prompts"],
    &["prompt", "p"],
];

#[test]
fn a_server_that_exits_at_once_is_reported_with_its_status_and_stderr() {
    // Eight rounds of each command: the death by SIGPIPE this guards against came in most
    // runs, not all.
    for round in 0..8 {
        for command in COMMANDS {
            let mut args = command.to_vec();
            args.extend(["--", "sh", "-c", "echo boom >&2; exit 1"]);
            let run = moat(&args);
            assert_explained(&run, &["exit status: 1", "\n  boom"]);
            assert!(
                run.stdout.is_empty(),
                "round {round}: nothing on stdout\n{}",
                run.describe()
            );
        }
    }
}

#[test]
fn the_message_says_how_the_server_ended_and_what_it_said_last() {
    let run = moat(&[
        "tools",
        "--",
        "sh",
        "-c",
        "echo 'loading config' >&2; echo 'fatal: no API key' >&2; exit 7",
    ]);
    assert_explained(&run, &[]);
    assert_eq!(
        run.stderr.trim_end(),
        "error: could not connect to `sh -c 'echo '\\''loading config'\\'' >&2; echo \
         '\\''fatal: no API key'\\'' >&2; exit 7'`: server process \"sh\" exited \
         (exit status: 7); its last stderr lines:\n  loading config\n  fatal: no API key",
        "{}",
        run.describe()
    );

    // A server that says nothing: its exit status alone.
    let run = moat(&["tools", "--", "sh", "-c", "exit 1"]);
    assert_explained(&run, &[]);
    assert_eq!(
        run.stderr.trim_end(),
        "error: could not connect to `sh -c 'exit 1'`: server process \"sh\" exited \
         (exit status: 1)",
        "{}",
        run.describe()
    );
}

#[test]
fn a_gateway_with_a_broken_configuration_shows_its_own_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("broken.toml");
    std::fs::write(&config, "[servers.x]\ncommand = \n").expect("write broken.toml");
    let config = config.to_str().expect("a UTF-8 temporary path");
    for _ in 0..4 {
        let run = moat(&["call", "t", "--", MOAT, "gateway", "--config", config]);
        // The gateway's own file:line:column diagnostic, as it printed it.
        assert_explained(
            &run,
            &[
                "exit status: 1",
                &format!("\n  error: {config}:2:11: "),
                "string values must be quoted",
            ],
        );
    }
}

#[test]
fn a_server_that_dies_after_the_handshake_is_reported_too() {
    // Answers `initialize`, takes `notifications/initialized` and the next request, then
    // says its last words and dies.
    let script = r#"read -r line
id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"resources":{},"prompts":{}},"serverInfo":{"name":"dying","version":"1"}}}\n' "$id"
read -r line
read -r line
echo 'about to fall over' >&2
echo 'fatal: out of cheese at src/main.rs:7:5' >&2
exit 3"#;
    for command in COMMANDS {
        let mut args = command.to_vec();
        args.extend(["--protocol", "2025-11-25", "--", "sh", "-c", script]);
        let run = moat(&args);
        assert_explained(
            &run,
            &[
                "exit status: 3",
                "\n  about to fall over\n  fatal: out of cheese at src/main.rs:7:5",
            ],
        );
    }
}

/// Runs `moat ARGS…` with its stdout already closed by its reader, and returns its exit
/// code and stderr.
fn with_stdout_closed(args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new(MOAT);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().expect("spawn moat");
    // The reader goes away before moat has printed anything: every write is an EPIPE.
    drop(child.stdout.take());
    let mut stderr = child.stderr.take().expect("stderr piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        match child.try_wait().expect("wait for moat") {
            Some(status) => break status,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            None => {
                support::kill_group(child.id());
                let _ = child.wait();
                panic!("moat {args:?} did not end within 30 s");
            }
        }
    };
    let stderr = rx.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| {
        support::kill_group(child.id());
        panic!("moat {args:?}: stderr stayed open after it exited (a leftover server?)")
    });
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            None,
            "moat {args:?} was killed by a signal (SIGPIPE is 13); stderr:\n{stderr}"
        );
    }
    (status.code(), stderr)
}

#[test]
fn a_closed_stdout_ends_the_printing_commands_quietly() {
    let everything = ["--", MOAT, "serve", "everything"];
    let cases: [&[&str]; 5] = [
        &["tools"],
        &["tools", "--json"],
        &["call", "test_simple_text"],
        &["resources"],
        &["prompts", "--json"],
    ];
    for case in cases {
        let mut args = case.to_vec();
        args.extend(everything);
        let (code, stderr) = with_stdout_closed(&args);
        assert_eq!(
            code,
            Some(0),
            "moat {args:?}: a reader that went away is not a failure; stderr:\n{stderr}"
        );
        assert!(
            stderr.trim().is_empty(),
            "moat {args:?} should end without a word; stderr:\n{stderr}"
        );
    }
}

#[test]
fn a_pipeline_into_head_ends_quietly() {
    // The real thing: `head` reads a few bytes and leaves; moat's exit status is 0.
    let script = format!(
        "'{MOAT}' tools -- '{MOAT}' serve everything | head -c 10 >/dev/null; \
         echo \"status ${{PIPESTATUS[0]}}\""
    );
    let argv: Vec<String> = ["bash", "-c", &script].map(str::to_owned).to_vec();
    let run = support::run(
        &argv,
        Duration::from_secs(30),
        Duration::from_secs(5),
        Leftovers::Fail,
    );
    assert_eq!(run.code, Some(0), "{}", run.describe());
    assert_eq!(run.stdout.trim(), "status 0", "{}", run.describe());
    assert!(run.stderr.trim().is_empty(), "{}", run.describe());
}
