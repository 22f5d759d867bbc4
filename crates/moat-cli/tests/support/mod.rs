//! What the black-box suites share: running a command with a deadline, in its own process
//! group, and capturing what it printed, so that a failure shows the command line, the
//! exit code and both streams. Each suite includes it with `mod support;` and uses the
//! parts it needs.

#![allow(dead_code)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A finished command: its command line (quoted for a shell), exit code and output.
pub struct Run {
    pub cmdline: String,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Everything about the run, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "command: {}\nexit code: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.cmdline,
            self.code,
            truncate(&self.stdout),
            truncate(&self.stderr)
        )
    }

    /// Asserts the exit code and parses stdout as one JSON value.
    pub fn json(&self, expected_code: i32) -> Value {
        assert_eq!(
            self.code,
            Some(expected_code),
            "unexpected exit code\n{}",
            self.describe()
        );
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e})\n{}", self.describe()))
    }
}

/// At most 12,000 bytes of `s`, cut at a character boundary, saying how much was left out.
pub fn truncate(s: &str) -> String {
    const MAX: usize = 12000;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n... ({} bytes truncated)", &s[..end], s.len() - end)
}

/// `s` as a shell would need it, so that a failing command line can be pasted and rerun.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@,+%".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The command line of `argv`, quoted for a shell.
pub fn command_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// SIGKILL to the process group `pid` leads.
pub fn kill_group(pid: u32) {
    // SAFETY: a plain syscall on a process group this test started.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

/// Reads `pipe` to its end on a thread and sends what it read, tagged stdout or stderr.
pub fn spawn_reader(
    mut pipe: impl Read + Send + 'static,
    tx: mpsc::Sender<(bool, String)>,
    is_stdout: bool,
) {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        let _ = tx.send((is_stdout, String::from_utf8_lossy(&buf).into_owned()));
    });
}

/// Waits up to `grace` for both pipes of a finished command (as read by [`spawn_reader`])
/// and returns (stdout, stderr, whether they stayed open). Pipes still open then are
/// closed by `kill` (something that outlived the command holds them); what was written
/// is kept.
pub fn collect_output(
    rx: &mpsc::Receiver<(bool, String)>,
    grace: Duration,
    kill: impl FnOnce(),
) -> (String, String, bool) {
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let deadline = Instant::now() + grace;
    let mut open = 2;
    while open > 0 {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((is_stdout, s)) => {
                if is_stdout {
                    stdout = s;
                } else {
                    stderr = s;
                }
                open -= 1;
            }
            Err(_) => {
                kill();
                // The kill closes the pipes; collect what was written.
                while let Ok((is_stdout, s)) = rx.recv_timeout(Duration::from_secs(2)) {
                    if is_stdout {
                        stdout = s;
                    } else {
                        stderr = s;
                    }
                }
                return (stdout, stderr, true);
            }
        }
    }
    (stdout, stderr, false)
}

/// What [`run`] does when the command has exited but its output pipes stay open.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Leftovers {
    /// Fail: a descendant (an MCP server it spawned) outlived it.
    Fail,
    /// Kill the process group and go on with what was written.
    Kill,
}

/// Runs `argv` with stdin closed in its own process group, capturing stdout and stderr.
/// Past `timeout` the group is killed and the test fails; once the command has exited,
/// its pipes get `pipe_grace` to close (see [`Leftovers`]).
pub fn run(argv: &[String], timeout: Duration, pipe_grace: Duration, leftovers: Leftovers) -> Run {
    let cmdline = command_line(argv);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {cmdline}: {e}"));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    spawn_reader(child.stdout.take().expect("stdout piped"), tx.clone(), true);
    spawn_reader(child.stderr.take().expect("stderr piped"), tx, false);

    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < timeout => thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                kill_group(pid);
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Err(e) => panic!("waiting for {cmdline}: {e}"),
        }
    };

    let (stdout, stderr, leaked) = collect_output(&rx, pipe_grace, || kill_group(pid));

    let run = Run {
        cmdline,
        code: status.and_then(|s| s.code()),
        stdout,
        stderr,
    };
    if status.is_none() {
        panic!(
            "timed out after {}s; killed its process group\n{}",
            timeout.as_secs(),
            run.describe()
        );
    }
    if leaked && leftovers == Leftovers::Fail {
        panic!(
            "the process exited but its stdout/stderr stayed open for {}s: a descendant \
             (the spawned MCP server?) outlived it; killed its process group\n{}",
            pipe_grace.as_secs(),
            run.describe()
        );
    }
    run
}

/// `moat serve everything` on piped stdio, stderr discarded, with its stdout lines arriving
/// on the returned channel (read on a thread, so a test can wait with a timeout).
pub fn serve_everything() -> (std::process::Child, mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["serve", "everything"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn moat serve everything");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, lines)
}

/// The names of the tools `client` lists (every page).
pub async fn tool_names(client: &moat::Client) -> std::collections::BTreeSet<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name)
        .collect()
}

/// The directory of the interop peers (`interop/`, or `$MOAT_INTEROP_DIR`), if each of
/// `needs` (paths in it) is there and `node` runs. Otherwise `None`, and the test passes
/// with a notice, except under CI (`CI` set), where a missing peer is a failure.
pub fn interop_dir(needs: &[&str]) -> Option<std::path::PathBuf> {
    let dir = match std::env::var_os("MOAT_INTEROP_DIR").filter(|v| !v.is_empty()) {
        Some(d) => std::path::PathBuf::from(d),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop"),
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let mut missing: Vec<String> = needs
        .iter()
        .map(|rel| dir.join(rel))
        .filter(|path| !path.exists())
        .map(|path| path.display().to_string())
        .collect();
    let node_ok = Command::new("node")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !node_ok {
        missing.push("`node` on PATH".into());
    }
    if missing.is_empty() {
        return Some(dir);
    }
    let msg = format!(
        "interop peers are not installed (missing: {}); run `bash .ci/run` \
         (or `bash .ci/run --install-only`) from the repository root",
        missing.join(", ")
    );
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}
