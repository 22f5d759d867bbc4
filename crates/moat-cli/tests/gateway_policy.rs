//! Black-box tests of the gateway's policy and consent as a user meets them: `moat call
//! TOOL -- moat gateway --config X` in front of moat's own `fs` server, deleting a file.
//!
//! - a deny rule works whether it names the tool as clients see it (`files__delete_file`) or
//!   as its server does (`server = "files", tool = "delete_file"`): the file survives;
//! - `moat gateway --check` reports globs that select nothing, with the closest names;
//! - a refused `ask` says how to allow the tool, and doing what it says works;
//!   `[consent] mode = "deny"` says so;
//! - terminal consent: under `moat call … -- moat gateway` in a terminal (the gateway in a
//!   background process group) the terminal is not offered and the call ends; a gateway in
//!   the foreground of its terminal asks there and the call completes. Never a hang: every
//!   run is bounded.
//!
//! Terminals are pseudo-terminals the tests allocate (`posix_openpt`).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod support;
use support::{Leftovers, Lines, Run, Running, detach, kill_tree};

/// Deadline of one command: far above what any of them needs, and what turns a hang into
/// a failure.
const TIMEOUT: Duration = Duration::from_secs(60);

fn moat_bin() -> &'static str {
    env!("CARGO_BIN_EXE_moat")
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A directory with `root/victim.txt` and a moat.toml serving `root` as server `files`
/// (moat's fs server) followed by `policy`.
struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    config: PathBuf,
}

impl Setup {
    fn new(policy: &str) -> Setup {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("victim.txt"), "keep me\n").unwrap();
        let config = dir.path().join("moat.toml");
        let setup = Setup {
            _dir: dir,
            root,
            config,
        };
        setup.write(policy);
        setup
    }

    fn write(&self, policy: &str) {
        let text = format!(
            "state_dir = {}\n\n[servers.files]\ncommand = {}\nargs = [\"serve\", \"fs\", \"--root\", {}]\n\
             sandbox = false\n\n{policy}\n",
            toml_str(&self.config.with_file_name("state").to_string_lossy()),
            toml_str(moat_bin()),
            toml_str(&self.root.to_string_lossy()),
        );
        std::fs::write(&self.config, text).unwrap();
    }

    fn victim(&self) -> PathBuf {
        self.root.join("victim.txt")
    }

    fn config(&self) -> &str {
        self.config.to_str().unwrap()
    }

    /// `moat call --json files__delete_file {"path":"victim.txt"} -- moat gateway …`
    fn call_argv(&self) -> Vec<String> {
        [
            moat_bin(),
            "call",
            "--json",
            "files__delete_file",
            "--args",
            r#"{"path":"victim.txt"}"#,
            "--",
            moat_bin(),
            "gateway",
            "--ephemeral",
            "--config",
            self.config(),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    }

    /// The call, in a session of its own without a terminal.
    fn call(&self) -> Run {
        run_detached(&self.call_argv())
    }
}

/// Runs `argv` in a new session (no controlling terminal), stdin closed, bounded by
/// [`TIMEOUT`].
fn run_detached(argv: &[String]) -> Run {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null());
    detach(&mut cmd);
    wait_bounded(cmd, argv)
}

/// Spawns `cmd` (its stdout and stderr piped) and waits for it at most [`TIMEOUT`],
/// killing its process tree and failing the test past that.
fn wait_bounded(cmd: Command, argv: &[String]) -> Run {
    Running::start(cmd, argv).finish(TIMEOUT, Duration::from_secs(10), Leftovers::Kill)
}

/// The text of a `moat call --json` result, and whether it is an error.
fn result_of(run: &Run) -> (String, bool) {
    let value: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON result ({e})\n{}", run.describe()));
    let text = value["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    (text, value["isError"].as_bool().unwrap_or(false))
}

fn refusal(run: &Run) -> String {
    let (text, is_error) = result_of(run);
    assert!(
        is_error,
        "the call should have been refused\n{}",
        run.describe()
    );
    text
}

// ---------------------------------------------------------------------------
// A rule by either name
// ---------------------------------------------------------------------------

#[test]
fn deny_by_either_name_refuses_the_call_and_the_file_survives() {
    for rule in [
        r#"tool = "files__delete_file""#,
        "server = \"files\"\ntool = \"delete_file\"",
    ] {
        let setup = Setup::new(&format!(
            "[policy]\ndefault = \"allow\"\n\n[[policy.rules]]\nname = \"keep-files\"\n\
             decision = \"deny\"\n{rule}\n"
        ));
        let run = setup.call();
        let message = refusal(&run);
        assert!(
            message.contains("keep-files") && message.contains("denies"),
            "{rule}: the refusal should name the rule: {message}"
        );
        assert!(
            setup.victim().exists(),
            "{rule}: the file was deleted\n{}",
            run.describe()
        );
    }
    // Without the rule the same call deletes the file: the test can tell.
    let setup = Setup::new("[policy]\ndefault = \"allow\"\n");
    let run = setup.call();
    let (text, is_error) = result_of(&run);
    assert!(!is_error, "{text}\n{}", run.describe());
    assert!(!setup.victim().exists(), "{}", run.describe());
}

// ---------------------------------------------------------------------------
// Globs that select nothing
// ---------------------------------------------------------------------------

#[test]
fn check_reports_globs_that_select_nothing_with_the_closest_names() {
    let setup = Setup::new(
        "[policy]\ndefault = \"allow\"\n\n[[policy.rules]]\nname = \"typo\"\ndecision = \"deny\"\n\
         tool = \"files__delete_fil\"\n\n[[policy.rules]]\nname = \"no-server\"\n\
         decision = \"deny\"\nserver = \"file\"\n\n[[policy.rules]]\nname = \"fine\"\n\
         decision = \"ask\"\ntool = \"write_*\"\n",
    );
    let argv: Vec<String> = [
        moat_bin(),
        "gateway",
        "--ephemeral",
        "--check",
        "--json",
        "--config",
        setup.config(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let run = run_detached(&argv);
    assert_eq!(run.code, Some(1), "--check fails\n{}", run.describe());
    let report: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e})\n{}", run.describe()));
    let unmatched = report["unmatched"].as_array().expect("unmatched");
    let find = |item: &str| {
        unmatched
            .iter()
            .find(|u| u["item"] == item)
            .unwrap_or_else(|| panic!("{item} not reported: {report:#}"))
    };
    let typo = find("rule 1 (typo)");
    assert_eq!(typo["field"], "tool");
    assert_eq!(typo["glob"], "files__delete_fil");
    assert_eq!(typo["closest"][0], "files__delete_file", "{typo:#}");
    let server = find("rule 2 (no-server)");
    assert_eq!(server["field"], "server");
    assert_eq!(server["closest"], json!(["files"]));
    assert_eq!(
        unmatched.len(),
        2,
        "rule 3 selects files__write_file: {report:#}"
    );
    // Warned about on stderr as the gateway loads, too.
    assert!(
        run.stderr.contains("files__delete_fil") && run.stderr.contains("does nothing"),
        "{}",
        run.describe()
    );
    // The text report says it in words.
    let without_json: Vec<String> = argv.iter().filter(|a| *a != "--json").cloned().collect();
    let text = run_detached(&without_json);
    assert!(
        text.stdout
            .contains(r#"selects nothing: rule 1 (typo): tool = "files__delete_fil" matches no tool of server files (closest: files__delete_file"#),
        "{}",
        text.describe()
    );
}

// ---------------------------------------------------------------------------
// Refusals that say what to do
// ---------------------------------------------------------------------------

#[test]
fn an_ask_without_a_channel_says_how_to_allow_it_and_that_works() {
    // The default asks: the advice is an allow rule, spelled out.
    let setup = Setup::new("[policy]\ndefault = \"ask\"\n");
    let message = refusal(&setup.call());
    let advised =
        "[[policy.rules]]\ndecision = \"allow\"\nserver = \"files\"\ntool = \"delete_file\"\n";
    assert!(
        message.contains("no consent channel")
            && message.contains("does not support elicitation")
            && message.contains(advised),
        "{message}"
    );
    assert!(setup.victim().exists());
    // Pasted as given.
    setup.write(&format!("[policy]\ndefault = \"ask\"\n\n{advised}"));
    let run = setup.call();
    assert!(
        !result_of(&run).1,
        "the advised rule lets it through\n{}",
        run.describe()
    );
    assert!(!setup.victim().exists());

    // A rule asks: an allow rule would not help (ask wins), and the message says so.
    let asks = "[policy]\ndefault = \"allow\"\n\n[[policy.rules]]\nname = \"destructive-asks\"\n\
                decision = \"ask\"\nannotations = { destructiveHint = true }\n";
    let setup = Setup::new(&format!(
        "{asks}\n[[policy.rules]]\ndecision = \"allow\"\ntool = \"delete_file\"\n"
    ));
    let message = refusal(&setup.call());
    assert!(
        message.contains("rule 1 (destructive-asks)")
            && message.contains("would not help")
            && !message.contains(r#"add this rule"#),
        "{message}"
    );
    assert!(setup.victim().exists());
    // Narrowing the asking rule, as advised, works.
    setup.write(&format!("{asks}server = \"other\"\n"));
    let run = setup.call();
    assert!(!result_of(&run).1, "{}", run.describe());
    assert!(!setup.victim().exists());
}

#[test]
fn consent_mode_deny_says_so() {
    let setup = Setup::new("[policy]\ndefault = \"ask\"\n\n[consent]\nmode = \"deny\"\n");
    let message = refusal(&setup.call());
    assert!(
        message.contains(r#"[consent] mode = "deny""#)
            && !message.contains("elicitation")
            && !message.contains("no consent channel"),
        "{message}"
    );
    assert!(setup.victim().exists());
}

// ---------------------------------------------------------------------------
// Terminal consent
// ---------------------------------------------------------------------------

/// A new pseudo-terminal: (master, slave).
fn open_pty() -> (File, File) {
    // SAFETY: plain libc calls; every descriptor returned is checked and owned once.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        let master = OwnedFd::from_raw_fd(master);
        assert_eq!(libc::grantpt(master.as_raw_fd()), 0, "grantpt");
        assert_eq!(libc::unlockpt(master.as_raw_fd()), 0, "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()),
            0,
            "ptsname_r"
        );
        let slave = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        assert!(
            slave >= 0,
            "open the pty slave: {}",
            std::io::Error::last_os_error()
        );
        (File::from(master), File::from(OwnedFd::from_raw_fd(slave)))
    }
}

/// Makes the child a session leader whose controlling terminal is its stdin (the slave of
/// a pty), so it is in that terminal's foreground.
fn in_terminal_foreground(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Reads the pty's master side on a thread, answering `answer` when it shows the consent
/// question; what the terminal has shown so far is in the returned string.
fn answer_on(master: File, answer: &'static str) -> Arc<Mutex<String>> {
    let shown = Arc::new(Mutex::new(String::new()));
    let seen = shown.clone();
    thread::spawn(move || {
        let mut writer = master.try_clone().expect("dup the pty master");
        let mut reader = master;
        let mut buf = [0u8; 1024];
        let mut answered = false;
        // Ends with EIO once no slave descriptor is open.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut text = seen.lock().unwrap();
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
            if !answered && text.contains("[N]o:") {
                answered = true;
                let _ = writer.write_all(answer.as_bytes());
            }
        }
    });
    shown
}

/// `moat call … -- moat gateway` run in the foreground of a terminal: the gateway (in
/// a process group of its own, in the background) must not ask there — it would be stopped
/// by SIGTTIN and the call would never end. Either it asks and the call completes, or the
/// terminal is not offered and the refusal says why; never a hang.
#[test]
fn terminal_consent_under_moat_call_never_hangs() {
    let setup = Setup::new("[policy]\ndefault = \"ask\"\n");
    let (master, slave) = open_pty();
    let argv = setup.call_argv();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    in_terminal_foreground(&mut cmd);
    let shown = answer_on(master, "o\n");
    let run = wait_bounded(cmd, &argv);
    let shown = shown.lock().unwrap().clone();
    let (text, is_error) = result_of(&run);
    if shown.contains("allow the tool call") {
        assert!(
            !is_error,
            "asked and approved, yet refused: {text}\n{}",
            run.describe()
        );
        assert!(!setup.victim().exists());
    } else {
        assert!(is_error, "{text}");
        assert!(
            text.contains("not in its foreground"),
            "the refusal should say why the terminal was not used: {text}"
        );
        assert!(setup.victim().exists());
    }
}

/// A gateway in the foreground of its terminal asks there, and the answer typed completes
/// the call (the client talks to it over pipes, as an editor would).
#[test]
fn a_gateway_in_the_foreground_asks_on_the_terminal() {
    let setup = Setup::new("[policy]\ndefault = \"ask\"\n");
    let (master, slave) = open_pty();
    let mut cmd = Command::new(moat_bin());
    cmd.args(["gateway", "--ephemeral", "--config", setup.config()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // stdin is the client's pipe: the terminal is acquired through the slave's own
    // descriptor, which exec then closes.
    cmd.stdin(Stdio::piped());
    let slave_fd = slave.as_raw_fd();
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid, ioctl and close are async-signal-safe; `slave_fd` is open in the
        // parent until spawn returns (CLOEXEC closes it at exec in the child).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() == -1 || libc::ioctl(slave_fd, libc::TIOCSCTTY, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let shown = answer_on(master, "o\n");
    // stdin is kept open until the end: with no slave descriptor open anywhere (the gateway
    // holds none until it asks), reading the master fails and closing it hangs the terminal up.
    let (mut child, mut io) = Lines::spawn(&mut cmd);
    let pid = child.id();
    let wait_for = |io: &Lines, id: u64| -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match io.recv(left) {
                Ok(line) => line,
                Err(_) => {
                    kill_tree(pid);
                    panic!(
                        "hung: no answer to request {id} within {}s",
                        TIMEOUT.as_secs()
                    );
                }
            };
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["id"] == id {
                return v;
            }
        }
    };
    io.send_json(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "pty-test", "version": "0"}}}),
    );
    wait_for(&io, 1);
    io.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    io.send_json(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "files__delete_file", "arguments": {"path": "victim.txt"}}}),
    );
    let answer = wait_for(&io, 2);
    io.close();
    let ended = Instant::now();
    while child.try_wait().ok().flatten().is_none() && ended.elapsed() < TIMEOUT {
        thread::sleep(Duration::from_millis(20));
    }
    kill_tree(pid);
    let _ = child.wait();
    let shown = shown.lock().unwrap().clone();
    assert!(
        shown.contains("allow the tool call files__delete_file"),
        "the question should be on the terminal: {shown:?}\n{answer:#}"
    );
    assert!(
        answer.get("result").is_some() && answer["result"]["isError"] != json!(true),
        "approved on the terminal, the call goes through: {answer:#}"
    );
    assert!(!setup.victim().exists(), "approved once: {answer:#}");
}
