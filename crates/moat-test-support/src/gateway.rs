//! `moat gateway --config X --http 127.0.0.1:0` started for a test: in a session of its
//! own, its stderr collected for failure messages, ready once it has said where it serves
//! (and, if asked, what it lists). Dropping it ends it the way it ends cleanly (SIGINT: it
//! stops its servers), then kills whatever is left of it and of the servers it ran, so a
//! hung server never outlives the test.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::procs::{descendants, kill_group, kill_pid};
use crate::run::{detach, truncate};

/// The line the gateway prints once it listens.
const SERVING: &str = "moat gateway: serving on http://";
/// How long the gateway gets to stop on SIGINT when dropped.
const STOP_WITHIN: Duration = Duration::from_secs(5);

/// When [`HttpGateway::start`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// Once the gateway has printed its address.
    Serving,
    /// Once it has also said how many tools it lists (its servers are up: a client that
    /// connects sooner is offered less).
    Listed,
}

/// A running `moat gateway --http`.
pub struct HttpGateway {
    child: Child,
    /// `http://ADDR/mcp`.
    pub url: String,
    /// `ADDR` (host and port).
    pub authority: String,
    log: Arc<Mutex<String>>,
}

impl HttpGateway {
    /// Starts `moat gateway --config CONFIG --http 127.0.0.1:0` (`moat` is the binary's
    /// path) with `envs` added; fails the test if it is not [`Ready`] within `within`.
    pub fn start(
        moat: &str,
        config: &Path,
        envs: &[(&str, &str)],
        ready: Ready,
        within: Duration,
    ) -> HttpGateway {
        let mut cmd = Command::new(moat);
        cmd.args(["gateway", "--config"])
            .arg(config)
            .args(["--http", "127.0.0.1:0"])
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        detach(&mut cmd);
        let mut child = cmd.spawn().expect("spawn moat gateway --http");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        {
            let pipe = child.stderr.take().expect("stderr piped");
            let log = log.clone();
            thread::spawn(move || {
                let mut address = None;
                let mut tx = Some(tx);
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    {
                        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                        log.push_str(&line);
                        log.push('\n');
                    }
                    if line.starts_with(SERVING) {
                        address = Some(line);
                        if ready == Ready::Listed {
                            continue;
                        }
                    } else if !(ready == Ready::Listed && line.contains(" tools listed")) {
                        continue;
                    }
                    if let Some(address) = address.take()
                        && let Some(tx) = tx.take()
                    {
                        let _ = tx.send(address);
                    }
                }
            });
        }
        let mut gateway = HttpGateway {
            child,
            url: String::new(),
            authority: String::new(),
            log,
        };
        let line = rx.recv_timeout(within).unwrap_or_else(|e| {
            panic!(
                "moat gateway did not print `{SERVING}ADDR/mcp`{} ({e}); exit status: {:?}\n\
                 --- stderr ---\n{}",
                if ready == Ready::Listed {
                    ", then its catalog"
                } else {
                    ""
                },
                gateway.child.try_wait().ok().flatten(),
                gateway.log()
            )
        });
        let authority = line
            .split_once("http://")
            .and_then(|(_, rest)| rest.split_once("/mcp"))
            .map(|(a, _)| a.to_owned())
            .unwrap_or_else(|| panic!("no http://ADDR/mcp in {line:?}"));
        assert!(
            !authority.ends_with(":0"),
            "the gateway must print the port it bound: {line:?}"
        );
        gateway.url = format!("http://{authority}/mcp");
        gateway.authority = authority;
        gateway
    }

    /// The gateway's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the gateway wrote to stderr so far (at most 12,000 bytes).
    pub fn log(&self) -> String {
        truncate(&self.log.lock().map(|s| s.clone()).unwrap_or_default())
    }

    /// Sends `signal` to the gateway and waits up to `within` for it to exit; whether it
    /// did.
    pub fn stop(&mut self, signal: i32, within: Duration) -> bool {
        kill_pid(self.child.id(), signal);
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return true;
            }
            thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for HttpGateway {
    fn drop(&mut self) {
        let pid = self.child.id();
        // Taken first: once the gateway is gone its servers are no longer its children.
        let below = descendants(pid);
        self.stop(libc::SIGINT, STOP_WITHIN);
        kill_group(pid);
        let _ = self.child.kill();
        let _ = self.child.wait();
        for p in below.iter().rev() {
            kill_group(p.pid);
            kill_pid(p.pid, libc::SIGKILL);
        }
    }
}
