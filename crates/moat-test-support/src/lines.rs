//! A raw JSON-lines driver for a process's stdio: lines written to its stdin, and its
//! stdout read line by line on a thread, so that every read can time out instead of
//! hanging the test. The suites that check bytes on the wire (bad input, wire schemas,
//! `moat sandbox --stdio`) build their conversations on it.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The stdin and the stdout lines of a process.
pub struct Lines {
    stdin: Option<Box<dyn Write + Send>>,
    lines: Receiver<String>,
}

impl Lines {
    /// Drives `stdin` and reads `stdout` (on a thread, line by line).
    pub fn new(stdin: impl Write + Send + 'static, stdout: impl Read + Send + 'static) -> Lines {
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines {
            stdin: Some(Box::new(stdin)),
            lines,
        }
    }

    /// Spawns `cmd` with stdin and stdout piped (stderr as the caller set it): the child,
    /// and its stdio as [`Lines`].
    pub fn spawn(cmd: &mut Command) -> (Child, Lines) {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let stdin = child.stdin.take().expect("stdin piped");
        let stdout = child.stdout.take().expect("stdout piped");
        (child, Lines::new(stdin, stdout))
    }

    /// Writes `bytes` and a newline, and flushes.
    pub fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to the process");
        stdin.write_all(b"\n").expect("write to the process");
        stdin.flush().expect("flush to the process");
    }

    /// Writes `msg` as one line.
    pub fn send_json(&mut self, msg: &Value) {
        self.send(msg.to_string().as_bytes());
    }

    /// The next line, if one comes within `within`.
    pub fn recv(&self, within: Duration) -> Result<String, RecvTimeoutError> {
        self.lines.recv_timeout(within)
    }

    /// The next line; fails the test if none comes within `within`.
    pub fn line(&self, within: Duration, what: &str) -> String {
        match self.recv(within) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("{what}: no line within {within:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("{what}: stdout closed"),
        }
    }

    /// The lines until stdout ends, which must be within `within`.
    pub fn rest(&self, within: Duration) -> Vec<String> {
        let until = Instant::now() + within;
        let mut rest = Vec::new();
        loop {
            match self.recv(until.saturating_duration_since(Instant::now())) {
                Ok(line) => rest.push(line),
                Err(RecvTimeoutError::Disconnected) => return rest,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("stdout still open after {within:?} (read: {rest:?})")
                }
            }
        }
    }

    /// Closes stdin (the end of input, for the process).
    pub fn close(&mut self) {
        self.stdin = None;
    }

    /// Whether stdin is still open.
    pub fn is_open(&self) -> bool {
        self.stdin.is_some()
    }
}

/// Waits up to `within` for `child` to exit; past that kills it and returns `None`.
pub fn wait_exit(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}
