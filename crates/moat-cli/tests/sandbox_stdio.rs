//! `moat sandbox --stdio`: the command's stdin and stdout are moat's own, live, as when the
//! gateway launches a downstream MCP server as `moat sandbox --stdio --profile '<json>' --
//! CMD`. Lines round-trip one at a time, only the command's output reaches stdout, its
//! exit status comes back, a real MCP client talks to a sandboxed `moat serve everything`,
//! an output cap is refused, and killing `moat sandbox` kills the command.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use moat_test_support::Lines;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// `moat sandbox --stdio --profile PROFILE -- ARGV`, its stdout read line by line by a
/// thread (so that a read can time out).
struct Sandboxed {
    child: Child,
    io: Lines,
}

impl Sandboxed {
    fn start(profile: &str, argv: &[&str]) -> Sandboxed {
        let (child, io) = Lines::spawn(
            Command::new(MOAT)
                .args(["sandbox", "--stdio", "--profile", profile, "--"])
                .args(argv)
                .stderr(Stdio::piped()),
        );
        Sandboxed { child, io }
    }

    fn send(&mut self, line: &str) {
        self.io.send(line.as_bytes());
    }

    fn line(&self) -> String {
        self.io
            .line(Duration::from_secs(20), "a line from the sandboxed command")
    }

    /// The lines until stdout ends, which must be within `within`.
    fn rest(&self, within: Duration) -> Vec<String> {
        self.io.rest(within)
    }

    /// Closes stdin, waits: the exit code and stderr.
    fn finish(mut self) -> (i32, String) {
        self.io.close();
        let mut err = String::new();
        let mut stderr = self.child.stderr.take().unwrap();
        stderr.read_to_string(&mut err).unwrap();
        let status = self.child.wait().unwrap();
        (status.code().unwrap_or(-1), err)
    }
}

#[test]
fn lines_round_trip_live_and_the_exit_status_passes_through() {
    let script = r#"while read l; do echo "got $l"; done; echo bye >&2; exit 4"#;
    let mut s = Sandboxed::start(r#"{"env":["PATH"]}"#, &["sh", "-c", script]);
    for i in 0..5 {
        s.send(&format!("line {i}"));
        // Read back before the next line is written: nothing is held until the end.
        assert_eq!(s.line(), format!("got line {i}"));
        std::thread::sleep(Duration::from_millis(50));
    }
    s.io.close();
    // Nothing but the command's output on stdout.
    assert!(s.rest(Duration::from_secs(10)).is_empty());
    let (code, stderr) = s.finish();
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(stderr, "bye\n");
}

#[test]
fn a_real_mcp_client_talks_to_a_sandboxed_server() {
    let dir = Path::new(MOAT).parent().unwrap().to_str().unwrap();
    let profile = serde_json::json!({ "ro": [dir] }).to_string();
    let out = Command::new(MOAT)
        .args([
            "tools",
            "--json",
            "--",
            MOAT,
            "sandbox",
            "--stdio",
            "--profile",
        ])
        .arg(&profile)
        .args(["--", MOAT, "serve", "everything"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["serverInfo"]["name"], "moat-everything", "{listed}");
    assert!(
        listed["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "test_simple_text")),
        "{listed}"
    );
}

#[test]
fn an_output_cap_is_refused_when_streaming() {
    let s = Sandboxed::start(r#"{"limits":{"output_bytes":1000}}"#, &["true"]);
    assert!(s.rest(Duration::from_secs(20)).is_empty());
    let (code, stderr) = s.finish();
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("output_bytes"), "{stderr}");
}

#[test]
fn killing_moat_sandbox_kills_the_command() {
    let mut s = Sandboxed::start("{}", &["sh", "-c", "echo up; cat"]);
    assert_eq!(s.line(), "up");
    s.send("still here");
    assert_eq!(s.line(), "still here");
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    // stdin is still open on this side: stdout ends only because nothing holding it (sh,
    // cat, the sandbox's processes) is left.
    assert!(s.rest(Duration::from_secs(10)).is_empty());
}
