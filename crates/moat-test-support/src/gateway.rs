//! `moat gateway --config X --http 127.0.0.1:0` started for a test: in a session of its
//! own, its stderr collected for failure messages, ready once it has said where it serves
//! (and, if asked, what it lists). Dropping it ends it the way it ends cleanly (SIGINT: it
//! stops its servers), then kills whatever is left of it and of the servers it ran, so a
//! hung server never outlives the test.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::listening::{Listening, mcp_authority};
use crate::procs::{descendants, kill_group, kill_pid};
use crate::run::detach;

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
    server: Listening,
    /// `http://ADDR/mcp`.
    pub url: String,
    /// `ADDR` (host and port).
    pub authority: String,
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
            .envs(envs.iter().copied());
        detach(&mut cmd);
        let mut address = None;
        let (server, line) = Listening::start(
            cmd,
            move |line| {
                if line.starts_with(SERVING) {
                    address = Some(line.to_owned());
                    if ready == Ready::Serving {
                        return address.take();
                    }
                } else if ready == Ready::Listed && line.contains(" tools listed") {
                    return address.take();
                }
                None
            },
            within,
        );
        let authority = mcp_authority(&line)
            .unwrap_or_else(|| panic!("no http://ADDR/mcp with the port bound in {line:?}"));
        HttpGateway {
            server,
            url: format!("http://{authority}/mcp"),
            authority,
        }
    }

    /// The gateway's pid.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// What the gateway wrote to stderr so far (at most 12,000 bytes).
    pub fn log(&self) -> String {
        self.server.log()
    }

    /// Sends `signal` to the gateway and waits up to `within` for it to exit; whether it
    /// did.
    pub fn stop(&mut self, signal: i32, within: Duration) -> bool {
        self.server.stop(signal, within)
    }
}

impl Drop for HttpGateway {
    fn drop(&mut self) {
        let pid = self.pid();
        // Taken first: once the gateway is gone its servers are no longer its children.
        let below = descendants(pid);
        self.stop(libc::SIGINT, STOP_WITHIN);
        kill_group(pid);
        for p in below.iter().rev() {
            kill_group(p.pid);
            kill_pid(p.pid, libc::SIGKILL);
        }
        // `server` is dropped next: the gateway killed and reaped.
    }
}
