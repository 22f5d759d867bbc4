//! What happened: how the command ended, which limit was hit, and what was enforced.

use std::net::SocketAddr;
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

impl LimitHit {
    /// Its name as serialized (`timeout`, `output`, `cpu`, `memory`, `pids`): for labels
    /// and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitHit::Timeout => "timeout",
            LimitHit::Output => "output",
            LimitHit::Cpu => "cpu",
            LimitHit::Memory => "memory",
            LimitHit::Pids => "pids",
        }
    }
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
    /// The kernel's Landlock ABI version, if Landlock is available (whether or not this run
    /// used it: see `landlock`).
    pub landlock_abi: Option<u32>,
    /// Whether the Landlock ruleset was applied: the profile asked for it and the kernel
    /// has Landlock.
    #[serde(default)]
    pub landlock: bool,
    /// Whether the command ran in new user, mount, PID, IPC, UTS (and, with the network
    /// `none` or an allow-list, network) namespaces, in the mount tree: a new root with only the profile's
    /// paths, a fresh `/tmp` and `/proc`, and a minimal `/dev`.
    pub namespaces: bool,
    /// Whether the seccomp deny-list was installed (the profile can turn it off).
    pub seccomp: bool,
    /// How the process-count limit was applied.
    pub pids: PidsEnforcement,
    /// Whether a cgroup memory limit was applied (besides `RLIMIT_AS`).
    pub memory_cgroup: bool,
    /// Protections the profile asked for that this kernel could not give, in words.
    pub not_enforced: Vec<String>,
    /// The uid the command ran as, on the host (under a root supervisor: the profile's
    /// `uid`, 65534 by default, unless it keeps root).
    #[serde(default)]
    pub uid: u32,
    /// The gid the command ran as, on the host.
    #[serde(default)]
    pub gid: u32,
}

/// Fills in the ids a run gets (`run_as`, else the supervisor's own), and what the
/// profile's id settings and masks could not give.
pub(crate) fn note_ids(
    e: &mut Enforcement,
    profile: &crate::Profile,
    run_as: Option<(u32, u32)>,
    namespaces: bool,
) {
    let own = (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    (e.uid, e.gid) = run_as.unwrap_or(own);
    if own.0 == 0 && profile.run_as_root {
        e.not_enforced.push(
            "run_as_root: the command runs as root (uid 0 on the host, every capability \
             dropped), with root's file permissions on everything the profile shows"
                .into(),
        );
    } else if own.0 != 0 && (profile.uid.is_some() || profile.gid.is_some()) {
        e.not_enforced.push(format!(
            "uid/gid: the supervisor is not root, so the command runs as its uid {} and gid {}",
            own.0, own.1
        ));
    }
    if let Some((uid, _)) = run_as
        && !namespaces
        && !profile.rw.is_empty()
    {
        e.not_enforced.push(format!(
            "write paths: without the namespaces they are not id-mapped: the command (uid \
             {uid}) writes only where that uid's permissions allow, and what it creates \
             belongs to it"
        ));
    }
    if !namespaces && !profile.mask.is_empty() {
        e.not_enforced.push(
            "mask: masked files need the mount tree (the namespaces): they are readable as \
             far as the command's uid may read them"
                .into(),
        );
    }
}

/// How the sandbox asked the network proxy for a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProxyProtocol {
    /// HTTP `CONNECT host:port` (a tunnel: HTTPS, or anything else over TCP).
    Connect,
    /// A plain HTTP request with an absolute URI (`GET http://host/path`).
    Http,
    /// SOCKS5 `CONNECT`.
    Socks5,
    /// Something the proxy could not read as any of these.
    Unknown,
}

/// What the proxy did with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verdict {
    /// The allow-list let it through and the proxy connected (bytes may have flowed).
    Allowed,
    /// The allow-list (or the proxy's rules: non-public addresses, SNI, malformed requests,
    /// too many connections) refused it: HTTP 403/400, SOCKS5 "not allowed by ruleset".
    Refused,
    /// Allowed, but the name did not resolve or no address accepted the connection.
    Failed,
}

/// One connection the sandboxed command asked the network proxy for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Connection {
    /// How it was asked for.
    pub protocol: ProxyProtocol,
    /// The host as asked (a name, or an address; empty if the request could not be read).
    pub host: String,
    /// The port asked for (0 if unknown).
    pub port: u16,
    /// What the proxy did.
    pub verdict: Verdict,
    /// Why it was refused or failed.
    pub reason: Option<String>,
    /// The address the proxy connected to, if it did.
    pub address: Option<SocketAddr>,
    /// Bytes sent to the server (for plain HTTP: the rewritten request).
    pub bytes_sent: u64,
    /// Bytes received from the server and passed to the sandbox.
    pub bytes_received: u64,
}

/// The result of a sandboxed run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Outcome {
    /// How it ended.
    pub termination: Termination,
    /// The limit it ran into, if any.
    pub limit_hit: Option<LimitHit>,
    /// Its standard output (up to the output cap; empty when it was passed through).
    pub stdout: Vec<u8>,
    /// Its standard error (up to the output cap; empty when it was passed through).
    pub stderr: Vec<u8>,
    /// Whether output was cut at the cap.
    pub truncated: bool,
    /// Wall time from spawn to exit.
    pub wall_time: Duration,
    /// What was enforced.
    pub enforcement: Enforcement,
    /// With a network allow-list: every connection asked of the proxy, allowed or not, in
    /// the order they were asked for (up to 10 000; see `connections_omitted`).
    #[serde(default)]
    pub connections: Vec<Connection>,
    /// Connections past the first 10 000, not recorded one by one.
    #[serde(default)]
    pub connections_omitted: u64,
}

impl Outcome {
    /// Whether the command exited with status 0.
    pub fn success(&self) -> bool {
        self.termination == Termination::Exited(0)
    }
}
