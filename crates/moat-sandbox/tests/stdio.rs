//! Streaming runs ([`Sandbox::spawn_stdio`]): the command's stdin, stdout and stderr are the
//! supervising process's own. Each test starts a copy of this test binary as the
//! supervising process (its 0 and 1 are pipes to the test), so that the test can talk to
//! the sandboxed command line by line, as a client talks to an MCP server on stdio.
//!
//! Checked: lines go through one at a time (an echo is read back before the next line is
//! written), the run ends when its stdin closes and its status comes back, confinement
//! still holds, the timeout still applies, an output cap is refused, and killing the
//! supervising process kills the run (nothing is left holding its stdout).

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moat_sandbox::{LimitHit, Outcome, Profile, Sandbox, Termination};
use moat_test_support::Lines;

fn sandbox() -> Sandbox {
    Sandbox::with_helper(env!("CARGO_BIN_EXE_moat-sandbox-init"))
}

/// Set in the environment of this test binary when it plays the supervising process: the
/// profile and command, as JSON.
const SUPERVISOR: &str = "MOAT_SANDBOX_STDIO_SUPERVISOR";
/// Where the supervising copy finds the pipes that become its stdin and stdout (the test
/// harness prints on its own stdout before any test runs).
const CHILD_STDIN: i32 = 3;
const CHILD_STDOUT: i32 = 4;

/// A profile for a long-lived program: no timeout, no output cap.
fn streaming(namespaces: bool) -> Profile {
    let mut p = Profile {
        namespaces,
        ..Profile::default()
    };
    p.limits.timeout = None;
    p.limits.output_bytes = None;
    p
}

/// In the supervising copy: take the pipes as stdin and stdout, run the command streaming,
/// print the outcome as the last line on stderr, and leave with the command's status.
fn supervise_if_asked() {
    let Ok(spec) = std::env::var(SUPERVISOR) else {
        return;
    };
    let (profile, argv): (Profile, Vec<String>) = serde_json::from_str(&spec).unwrap();
    // SAFETY: moving descriptors this process was started with.
    unsafe {
        assert!(libc::dup2(CHILD_STDIN, 0) == 0 && libc::dup2(CHILD_STDOUT, 1) == 1);
        libc::close(CHILD_STDIN);
        libc::close(CHILD_STDOUT);
    }
    let result = sandbox().spawn_stdio(&profile, &argv);
    let code = match &result {
        Ok(o) => match o.termination {
            Termination::Exited(c) => c,
            Termination::Signaled(s) => 128 + s,
            _ => 1,
        },
        Err(_) => 99,
    };
    let result = result.map_err(|e| e.to_string());
    eprintln!("OUTCOME {}", serde_json::to_string(&result).unwrap());
    // SAFETY: leaving without the test harness printing anything more.
    unsafe { libc::_exit(code) }
}

/// The supervising process, as the test sees it.
struct Supervisor {
    child: Child,
    /// The command's stdin, and the lines of its stdout (read by a thread, so that a read
    /// can time out).
    io: Lines,
}

impl Supervisor {
    /// Starts this binary's test `test` as the supervising process of `argv` in `profile`.
    fn start(test: &str, profile: &Profile, argv: &[&str]) -> Supervisor {
        let (in_r, in_w) = pipe();
        let (out_r, out_w) = pipe();
        let spec = serde_json::to_string(&(profile, argv)).unwrap();
        let (r, w) = (in_r.as_raw_fd(), out_w.as_raw_fd());
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
            .env(SUPERVISOR, spec)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Out of the way first, in case the numbers overlap.
                let hr = libc::fcntl(r, libc::F_DUPFD, 10);
                let hw = libc::fcntl(w, libc::F_DUPFD, 10);
                if hr < 0
                    || hw < 0
                    || libc::dup2(hr, CHILD_STDIN) < 0
                    || libc::dup2(hw, CHILD_STDOUT) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(hr);
                libc::close(hw);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        // Only the supervising process holds these ends now: end of file can come.
        drop((in_r, out_w, cmd));
        let io = Lines::new(std::fs::File::from(in_w), std::fs::File::from(out_r));
        Supervisor { child, io }
    }

    fn send(&mut self, line: &str) {
        self.io.send(line.as_bytes());
    }

    /// The next line of the command's stdout, within a few seconds.
    fn line(&self) -> String {
        self.io
            .line(Duration::from_secs(20), "a line from the sandboxed command")
    }

    /// Waits for the stdout to end (every holder of its writing end gone); the lines
    /// still read.
    fn rest(&self, within: Duration) -> Vec<String> {
        self.io.rest(within)
    }

    /// Waits for the supervising process: its exit code, the outcome it printed, and its
    /// stderr before that (the command's).
    fn finish(mut self) -> (i32, Result<Outcome, String>, String) {
        self.io.close();
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = self.child.wait().unwrap();
        let (before, outcome) = err
            .rsplit_once("OUTCOME ")
            .unwrap_or_else(|| panic!("no outcome printed: {err}"));
        let outcome = serde_json::from_str(outcome.trim()).unwrap();
        (status.code().unwrap_or(-1), outcome, before.to_string())
    }
}

fn pipe() -> (OwnedFd, OwnedFd) {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap()
}

/// A kernel feature or tool a test needs is missing: said on stderr (the test then does
/// less, or returns), or, under CI (`CI` set), a failure: CI must run every case.
fn missing(why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("CI is set, so this test must run in full, but {why}");
    }
    eprintln!("SKIPPED: {why}");
}

fn namespace_modes() -> Vec<bool> {
    if sandbox().namespaces_work() {
        vec![true, false]
    } else {
        missing("(namespaces) this kernel refuses user namespaces; fallback only");
        vec![false]
    }
}

#[test]
fn lines_stream_through_one_at_a_time_and_the_run_ends_with_stdin() {
    supervise_if_asked();
    for namespaces in namespace_modes() {
        let script = r#"while read l; do echo "got $l"; echo "err $l" >&2; done; exit 3"#;
        let mut s = Supervisor::start(
            "lines_stream_through_one_at_a_time_and_the_run_ends_with_stdin",
            &streaming(namespaces),
            &["sh", "-c", script],
        );
        for i in 0..5 {
            s.send(&format!("line {i}"));
            // Each echo comes back while stdin is still open: nothing waits for the end.
            assert_eq!(s.line(), format!("got line {i}"), "namespaces {namespaces}");
            std::thread::sleep(Duration::from_millis(50));
        }
        s.io.close();
        assert!(s.rest(Duration::from_secs(10)).is_empty());
        let (code, outcome, stderr) = s.finish();
        let o = outcome.unwrap();
        assert_eq!(code, 3, "{o:?} {stderr}");
        assert_eq!(o.termination, Termination::Exited(3));
        assert_eq!(o.limit_hit, None);
        assert!(o.stdout.is_empty() && o.stderr.is_empty() && !o.truncated);
        assert_eq!(o.enforcement.namespaces, namespaces);
        let expected: String = (0..5).map(|i| format!("err line {i}\n")).collect();
        assert_eq!(stderr, expected);
    }
}

#[test]
fn reading_outside_the_read_paths_still_fails_while_streaming() {
    supervise_if_asked();
    if moat_sandbox::check().landlock_abi.is_none() && !sandbox().namespaces_work() {
        missing("(attack) neither Landlock nor namespaces here");
        return;
    }
    let home = std::env::temp_dir().join(format!("moat-stdio-test-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let secret = home.join("secret");
    std::fs::write(&secret, "TOP-SECRET\n").unwrap();
    for namespaces in namespace_modes() {
        let script = r#"while read f; do cat "$f"; echo "status $?"; done"#;
        let mut s = Supervisor::start(
            "reading_outside_the_read_paths_still_fails_while_streaming",
            &streaming(namespaces),
            &["sh", "-c", script],
        );
        s.send(&secret.display().to_string());
        let line = s.line();
        assert!(!line.contains("TOP-SECRET"), "{line}");
        assert!(line.starts_with("status ") && line != "status 0", "{line}");
        s.io.close();
        let (code, _, stderr) = s.finish();
        assert_eq!(code, 0, "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn the_timeout_still_applies_and_an_output_cap_is_refused() {
    supervise_if_asked();
    let mut p = streaming(true);
    // Long enough for a loaded machine to start the command and print its line first.
    p.limits.timeout = Some(Duration::from_secs(3));
    let s = Supervisor::start(
        "the_timeout_still_applies_and_an_output_cap_is_refused",
        &p,
        &["sh", "-c", "echo up; exec sleep 30"],
    );
    assert_eq!(s.line(), "up");
    let started = Instant::now();
    let (_, outcome, _) = s.finish();
    let o = outcome.unwrap();
    assert_eq!(o.limit_hit, Some(LimitHit::Timeout), "{o:?}");
    assert!(started.elapsed() < Duration::from_secs(15));

    let err = sandbox()
        .spawn_stdio(&Profile::default(), &["true".to_string()])
        .expect_err("an output cap cannot apply");
    assert!(
        matches!(&err, moat_sandbox::Error::InvalidLimit(m) if m.contains("output_bytes")),
        "{err}"
    );
}

/// Processes whose command line is exactly `argv`.
fn processes(argv: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let path: PathBuf = entry.path();
        if std::fs::read(path.join("cmdline")).is_ok_and(|c| c == want) {
            let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                == Some("Z");
            if !zombie {
                found.push(pid);
            }
        }
    }
    found
}

#[test]
fn killing_the_supervisor_kills_the_streaming_run() {
    supervise_if_asked();
    for (i, namespaces) in namespace_modes().into_iter().enumerate() {
        // A command line no other process has ($0 of the script).
        let marker = format!("moat-stdio-kill-{}-{i}", std::process::id());
        let argv = ["sh", "-c", "echo up; cat; echo never", &marker];
        let mut s = Supervisor::start(
            "killing_the_supervisor_kills_the_streaming_run",
            &streaming(namespaces),
            &argv,
        );
        s.send("hello");
        assert_eq!(s.line(), "up");
        assert_eq!(s.line(), "hello");
        assert_eq!(processes(&argv).len(), 1, "namespaces {namespaces}");
        s.child.kill().unwrap();
        s.child.wait().unwrap();
        // The test still holds stdin open: the run ends only because it was killed. Its
        // stdout ending means no process is left holding it (sh, cat, PID 1, the zygote).
        assert!(s.rest(Duration::from_secs(10)).is_empty());
        let until = Instant::now() + Duration::from_secs(5);
        while !processes(&argv).is_empty() {
            assert!(Instant::now() < until, "the run outlived its supervisor");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
