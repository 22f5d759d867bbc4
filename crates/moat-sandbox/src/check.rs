//! `moat sandbox --check`: which layers this machine supports.

use serde::{Deserialize, Serialize};

use crate::cgroup::Cgroup;

/// What this machine supports, as probed now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Support {
    /// The kernel's Landlock ABI, if Landlock is enabled.
    pub landlock_abi: Option<u32>,
    /// Whether the kernel has seccomp filtering.
    pub seccomp: bool,
    /// Whether the helper could enter new user, mount, PID, IPC, UTS and network namespaces
    /// and build the mount tree there (only known by [`crate::Sandbox::check`], which runs the helper; `None` here).
    pub namespaces: Option<bool>,
    /// Whether a network allow-list can be enforced (it needs the namespaces; only known by
    /// [`crate::Sandbox::check`]; `None` here).
    pub net_allow: Option<bool>,
    /// Whether a cgroup with `pids.max` could be created for a run.
    pub cgroup_pids: bool,
    /// Whether a cgroup with a memory limit could be created for a run.
    pub cgroup_memory: bool,
    /// Whether this process runs as root (`RLIMIT_NPROC` does not bind root).
    pub root: bool,
    /// The uid and gid a command of the default profile runs as: under a root supervisor
    /// [`crate::NOBODY`] (a profile's `uid`/`gid` change it, `run_as_root` keeps root),
    /// else this process's own.
    pub run_as: (u32, u32),
    /// Layers moat-sandbox does not build yet.
    pub not_built: Vec<String>,
}

/// Probes the running kernel.
pub fn check() -> Support {
    let seccomp = std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Seccomp:")))
        .unwrap_or(false);
    let cg = Cgroup::create(Some(1024), Some(1 << 30));
    Support {
        landlock_abi: crate::landlock_layer::kernel_abi(),
        namespaces: None,
        net_allow: None,
        seccomp,
        cgroup_pids: cg.has_pids(),
        cgroup_memory: cg.has_memory(),
        root: rustix::process::getuid().is_root(),
        run_as: crate::Profile::default()
            .run_as(rustix::process::getuid().as_raw())
            .unwrap_or((
                rustix::process::getuid().as_raw(),
                rustix::process::getgid().as_raw(),
            )),
        not_built: Vec::new(),
    }
}
