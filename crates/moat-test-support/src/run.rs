//! Running a command with a deadline, in a process group (or a session) of its own, and
//! capturing what it printed, so that a failure shows the command line, the exit code and
//! both streams, and a command that hangs is killed with everything it started.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::procs::kill_tree;

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

/// Puts the child in a new session: no controlling terminal, its own process group.
pub fn detach(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches nothing of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
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

/// What [`Running::finish`] does when the command has exited but its output pipes stay
/// open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leftovers {
    /// Fail: a descendant (an MCP server it spawned) outlived it.
    Fail,
    /// Kill the process tree and go on with what was written.
    Kill,
}

/// A command started with its stdout and stderr captured, for tests that act on it while
/// it runs; [`Running::finish`] waits for it.
pub struct Running {
    child: Child,
    cmdline: String,
    rx: mpsc::Receiver<(bool, String)>,
}

impl Running {
    /// Spawns `cmd` (set up by the caller: arguments, environment, stdin, session) with
    /// stdout and stderr piped; `argv` is its command line, for messages.
    pub fn start(mut cmd: Command, argv: &[String]) -> Running {
        let cmdline = command_line(argv);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {cmdline}: {e}"));
        let (tx, rx) = mpsc::channel();
        spawn_reader(child.stdout.take().expect("stdout piped"), tx.clone(), true);
        spawn_reader(child.stderr.take().expect("stderr piped"), tx, false);
        Running { child, cmdline, rx }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the exit; past `timeout` kills the process tree and fails the test. Once
    /// the command has exited, its pipes get `pipe_grace` to close (see [`Leftovers`]).
    pub fn finish(mut self, timeout: Duration, pipe_grace: Duration, leftovers: Leftovers) -> Run {
        let pid = self.child.id();
        let started = Instant::now();
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if started.elapsed() < timeout => thread::sleep(Duration::from_millis(20)),
                Ok(None) => {
                    kill_tree(pid);
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
                Err(e) => panic!("waiting for {}: {e}", self.cmdline),
            }
        };
        let (stdout, stderr, leaked) = collect_output(&self.rx, pipe_grace, || kill_tree(pid));
        let run = Run {
            cmdline: self.cmdline,
            code: status.and_then(|s| s.code()),
            stdout,
            stderr,
        };
        if status.is_none() {
            panic!(
                "timed out after {}s; killed its process tree\n{}",
                timeout.as_secs(),
                run.describe()
            );
        }
        if leaked && leftovers == Leftovers::Fail {
            panic!(
                "the process exited but its stdout/stderr stayed open for {}s: a descendant \
                 (the gateway, or a server it spawned?) outlived it; killed its process tree\n{}",
                pipe_grace.as_secs(),
                run.describe()
            );
        }
        run
    }
}

/// Runs `argv` with stdin closed in its own process group, capturing stdout and stderr
/// (see [`Running::finish`] for `timeout`, `pipe_grace` and `leftovers`).
pub fn run(argv: &[String], timeout: Duration, pipe_grace: Duration, leftovers: Leftovers) -> Run {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null());
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    Running::start(cmd, argv).finish(timeout, pipe_grace, leftovers)
}
