//! A server started for a test: its stderr collected (for failure messages, and drained so
//! the server never blocks on it), ready once a line of it says where it listens. Dropping
//! it kills its process group.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::procs::{kill_group, kill_pid};
use crate::run::truncate;

/// A running server.
pub struct Listening {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Listening {
    /// Spawns `cmd` (stdin closed, stdout discarded, stderr read) and waits up to `within`
    /// for the first stderr line `ready` maps to `Some`; returns the server and that value.
    /// Fails the test if the server exits first or says nothing in time. `cmd` chooses its
    /// own process group or session (see [`crate::run::detach`]).
    pub fn start<T: Send + 'static>(
        mut cmd: Command,
        mut ready: impl FnMut(&str) -> Option<T> + Send + 'static,
        within: Duration,
    ) -> (Listening, T) {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        {
            let pipe = child.stderr.take().expect("stderr piped");
            let log = log.clone();
            thread::spawn(move || {
                let mut tx = Some(tx);
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    {
                        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                        log.push_str(&line);
                        log.push('\n');
                    }
                    if let Some(value) = ready(&line)
                        && let Some(tx) = tx.take()
                    {
                        let _ = tx.send(value);
                    }
                }
                // EOF: dropping `tx` tells the waiter the server is gone.
            });
        }
        let mut server = Listening { child, log };
        let value = rx.recv_timeout(within).unwrap_or_else(|e| {
            panic!(
                "{cmd:?} did not say it was ready within {within:?} ({e}); exit status: {:?}\n\
                 --- stderr ---\n{}",
                server.child.try_wait().ok().flatten(),
                server.log()
            )
        });
        (server, value)
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server wrote to stderr so far (at most 12,000 bytes).
    pub fn log(&self) -> String {
        truncate(&self.log.lock().map(|s| s.clone()).unwrap_or_default())
    }

    /// Fails the test if the server has exited.
    pub fn assert_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "the server exited while serving ({status})\n--- stderr ---\n{}",
                self.log()
            );
        }
    }

    /// Sends `signal` to the server and waits up to `within` for it to exit; whether it did.
    pub fn stop(&mut self, signal: i32, within: Duration) -> bool {
        self.stop_status(signal, within).is_some()
    }

    /// Sends `signal` to the server and waits up to `within` for it to exit; how it did.
    pub fn stop_status(
        &mut self,
        signal: i32,
        within: Duration,
    ) -> Option<std::process::ExitStatus> {
        kill_pid(self.child.id(), signal);
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `HOST:PORT` of the first `http://HOST:PORT/mcp` in `line`, if the port is not 0.
pub fn mcp_authority(line: &str) -> Option<String> {
    let authority = line.split_once("http://")?.1.split_once("/mcp")?.0;
    let port: u16 = authority.rsplit_once(':')?.1.parse().ok()?;
    (port != 0).then(|| authority.to_owned())
}
