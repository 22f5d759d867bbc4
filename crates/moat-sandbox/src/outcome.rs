//! What happened: how the command ended, which limit was hit, and what was enforced.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Termination {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
}

/// A limit the command ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LimitHit {
    /// The wall-clock timeout: the sandbox killed it.
    Timeout,
    /// The output cap: the sandbox killed it and truncated the output.
    Output,
    /// CPU time (`RLIMIT_CPU`: `SIGXCPU`, then `SIGKILL`).
    Cpu,
    /// The cgroup memory limit was reached (only detectable with a cgroup; with `RLIMIT_AS`
    /// alone, allocations just fail).
    Memory,
    /// The cgroup `pids.max` was reached: some `fork` failed.
    Pids,
}

/// How the process-count limit was enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PidsEnforcement {
    /// No limit was asked for.
    NotRequested,
    /// A cgroup's `pids.max`.
    Cgroup,
    /// `RLIMIT_NPROC` only: counts all the user's processes, ignored by the kernel for root.
    Rlimit,
}

/// Which layers were enforced for this run, and what could not be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Enforcement {
    /// The kernel's Landlock ABI version, if Landlock is available.
    pub landlock_abi: Option<u32>,
    /// Whether the command ran in new user, mount, PID, IPC, UTS (and, with the network
    /// `none`, network) namespaces, in the mount tree: a new root with only the profile's
    /// paths, a fresh `/tmp` and `/proc`, and a minimal `/dev`.
    pub namespaces: bool,
    /// Whether the seccomp deny-list was installed.
    pub seccomp: bool,
    /// How the process-count limit was applied.
    pub pids: PidsEnforcement,
    /// Whether a cgroup memory limit was applied (besides `RLIMIT_AS`).
    pub memory_cgroup: bool,
    /// Protections the profile asked for that this kernel could not give, in words.
    pub not_enforced: Vec<String>,
}

/// The result of a sandboxed run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Outcome {
    /// How it ended.
    pub termination: Termination,
    /// The limit it ran into, if any.
    pub limit_hit: Option<LimitHit>,
    /// Its standard output (up to the output cap).
    pub stdout: Vec<u8>,
    /// Its standard error (up to the output cap).
    pub stderr: Vec<u8>,
    /// Whether output was cut at the cap.
    pub truncated: bool,
    /// Wall time from spawn to exit.
    pub wall_time: Duration,
    /// What was enforced.
    pub enforcement: Enforcement,
}

impl Outcome {
    /// Whether the command exited with status 0.
    pub fn success(&self) -> bool {
        self.termination == Termination::Exited(0)
    }
}
