//! A server we launch: a child process speaking MCP on its stdin and stdout.
//!
//! The child runs in its own process group, so signals reach everything it started. Its
//! stderr is forwarded line by line to `tracing`. Shutdown follows the spec: close its stdin,
//! wait; SIGTERM the group, wait; SIGKILL the group. The child is always reaped: a task owns
//! it from spawn to exit, so no zombie outlives it, and dropping the last handle kills the
//! group if it is still running.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::watch;

use crate::connection::{Closer, Connection, Epilogue, Limits};

/// How to launch a server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ChildConfig {
    /// The program to run (looked up on `PATH` if it has no slash).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Environment variables to set.
    pub env: Vec<(OsString, OsString)>,
    /// Start from an empty environment (then only `env`, plus `PATH` and `HOME`, are passed).
    pub clear_env: bool,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// A short name for logs; defaults to the program's file name.
    pub name: String,
    /// Framing limits.
    pub limits: Limits,
    /// How long to wait for an exit after closing stdin, and again after SIGTERM.
    pub grace: Duration,
}

impl ChildConfig {
    /// Run `program` with `args`.
    pub fn new<I, S>(program: impl Into<OsString>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let program = program.into();
        let name = std::path::Path::new(&program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "server".to_owned());
        ChildConfig {
            program,
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            clear_env: false,
            cwd: None,
            name,
            limits: Limits::default(),
            grace: Duration::from_secs(2),
        }
    }

    /// Set an environment variable.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Set the shutdown grace period.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Set the framing limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

struct ChildInner {
    pid: Option<Pid>,
    name: String,
    exit: watch::Receiver<Option<ExitStatus>>,
}

impl ChildInner {
    fn signal_group(&self, signal: Signal) {
        if self.exit.borrow().is_some() {
            return;
        }
        if let Some(pid) = self.pid {
            // The group id is the child's pid: it was made a group leader at spawn.
            let _ = kill_process_group(pid, signal);
        }
    }

    async fn wait_for(&self, limit: Duration) -> Option<ExitStatus> {
        let mut exit = self.exit.clone();
        let waited = tokio::time::timeout(limit, exit.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(status)) => *status,
            _ => *self.exit.borrow(),
        }
    }
}

impl Drop for ChildInner {
    fn drop(&mut self) {
        self.signal_group(Signal::KILL);
    }
}

/// A handle on a launched server process.
#[derive(Clone)]
pub struct ChildProcess {
    inner: Arc<ChildInner>,
    grace: Duration,
}

impl std::fmt::Debug for ChildProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildProcess")
            .field("name", &self.inner.name)
            .field("pid", &self.id())
            .finish()
    }
}

impl ChildProcess {
    /// Launch the server and connect to its stdin/stdout. Must be called inside a tokio runtime.
    pub fn spawn(config: ChildConfig) -> std::io::Result<(Connection, ChildProcess)> {
        let mut cmd = Command::new(&config.program);
        cmd.args(&config.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if config.clear_env {
            cmd.env_clear();
            for key in ["PATH", "HOME"] {
                if let Some(v) = std::env::var_os(key) {
                    cmd.env(key, v);
                }
            }
        }
        cmd.envs(config.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &config.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd.spawn().map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "could not start {:?}: {e}",
                    config.program.to_string_lossy()
                ),
            )
        })?;
        let pid = child.id().and_then(|id| Pid::from_raw(id as i32));
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(std::io::Error::other("child process has no pipes"));
        };

        let (exit_tx, exit_rx) = watch::channel(None);
        let name = config.name.clone();
        tokio::spawn(async move {
            // Owning the child until it exits is what guarantees it is reaped.
            let status = child.wait().await;
            match &status {
                Ok(s) => tracing::debug!(server = %name, status = %s, "server process exited"),
                Err(e) => {
                    tracing::warn!(server = %name, error = %e, "waiting for server process failed")
                }
            }
            let _ = exit_tx.send(status.ok());
        });

        let name = config.name.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "moat::server_stderr", server = %name, "{line}");
            }
        });

        let inner = Arc::new(ChildInner {
            pid,
            name: config.name.clone(),
            exit: exit_rx,
        });
        let handle = ChildProcess {
            inner: inner.clone(),
            grace: config.grace,
        };

        let for_epilogue = inner.clone();
        let epilogue: Epilogue = Box::pin(async move {
            // stdout closed: give the exit status a moment to arrive, then say what happened.
            let status = for_epilogue.wait_for(Duration::from_millis(500)).await;
            Some(match status {
                Some(s) => format!("server process {:?} exited ({s})", for_epilogue.name),
                None => format!("server process {:?} closed its stdout", for_epilogue.name),
            })
        });
        let mut conn = Connection::from_lines_with_epilogue(
            // One per server a gateway runs: 16 KiB still takes in a burst of a hundred
            // small messages per read, and long lines grow past it anyway.
            BufReader::with_capacity(16 * 1024, stdout),
            stdin,
            config.limits,
            Some(epilogue),
        );
        let close_writer = conn.closer.take();
        let for_close = handle.clone();
        let closer: Closer = Box::new(move || {
            Box::pin(async move {
                if let Some(close_writer) = close_writer {
                    close_writer().await;
                }
                for_close.terminate().await;
            })
        });
        conn.closer = Some(closer);
        Ok((conn, handle))
    }

    /// The child's process id, while it is known.
    pub fn id(&self) -> Option<u32> {
        self.inner.pid.map(|p| p.as_raw_nonzero().get() as u32)
    }

    /// The exit status, if it has exited.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        *self.inner.exit.borrow()
    }

    /// Wait for the child to exit.
    pub async fn wait(&self) -> Option<ExitStatus> {
        let mut exit = self.inner.exit.clone();
        exit.wait_for(Option::is_some).await.ok().and_then(|s| *s)
    }

    /// The escalation after stdin is closed: wait, SIGTERM the group, wait, SIGKILL the group,
    /// then wait for the reaper. Returns the exit status.
    pub async fn terminate(&self) -> Option<ExitStatus> {
        if let Some(s) = self.inner.wait_for(self.grace).await {
            return Some(s);
        }
        tracing::debug!(server = %self.inner.name, "server still running after stdin closed; sending SIGTERM");
        self.inner.signal_group(Signal::TERM);
        if let Some(s) = self.inner.wait_for(self.grace).await {
            return Some(s);
        }
        tracing::warn!(server = %self.inner.name, "server ignored SIGTERM; sending SIGKILL");
        self.inner.signal_group(Signal::KILL);
        self.inner.wait_for(Duration::from_secs(5)).await
    }

    /// Kill the process group now.
    pub fn kill(&self) {
        self.inner.signal_group(Signal::KILL);
    }
}
