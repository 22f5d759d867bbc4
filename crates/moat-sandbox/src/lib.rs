//! Run a command confined on Linux, with no daemon and no root: no MCP knowledge here.
//!
//! A [`Profile`] (plain serde data) says what the command may see and use: read-only and
//! read-write paths, network `none`, `host` or an allow-list of [`HostPattern`]s,
//! environment variables passed by name, and limits (wall-clock timeout, CPU time, memory,
//! processes, open files, output bytes).
//!
//! [`Sandbox::spawn`] runs the command to its end and captures its output (capped);
//! [`Sandbox::spawn_stdio`] instead hands it the caller's own stdin, stdout and stderr, so
//! that a long-lived program (an MCP server on stdio) is spoken to as it runs. Either runs
//! the command through a helper: a binary that calls [`helper_main`] first thing in `main`
//! (the `moat` binary by default, through its hidden `__sandbox-init` subcommand; or this
//! crate's `moat-sandbox-init`). The helper is exec'd once per supervising process (or, by
//! [`Sandbox::start_here`], forked from a single-threaded caller that runs a command or two),
//! as a single-threaded *zygote* that forks every run (see `zygote.rs`): a run costs a `fork`,
//! or a `clone` straight into its new namespaces, not an `exec` of the helper, and the
//! seccomp programs are built once. The zygote keeps one PID 1 ready in fresh user, PID,
//! network, IPC and UTS namespaces (a *spare*: making a network namespace is most of a
//! run's setup), so a run with namespaces usually only makes its mount namespace when it
//! starts ([`SPARE_ENV`] turns that off). Everything a run needs crosses explicitly: its
//! plan as JSON, and stdin, the output pipes (or the caller's own 0, 1, 2), a report
//! socket and the working directory by `SCM_RIGHTS`. The zygote ends, killing what still
//! runs, when the supervising process goes away; every run dies with the zygote.
//!
//! A run confines itself in this order: a new session, the parent-death signal, only its
//! own descriptors, a cgroup (where one can be created) → user, mount, PID, IPC, UTS (and
//! network) namespaces, where the kernel allows, as PID 1 of them, with a new root
//! (`pivot_root`, old root detached) holding only read-only binds of the system and read
//! paths, read-write binds of the write paths, a fresh size-capped tmpfs `/tmp`, a fresh
//! `/proc` and a minimal `/dev`; then, in the command's process, Landlock on top, as
//! defence in depth (filesystem, TCP, scoping; best effort by ABI) → every capability
//! dropped → `no_new_privs` → seccomp (a deny-list answering `EPERM`) → rlimits → `exec`.
//! Where user namespaces are refused, the rest still applies (paths are then confined by
//! Landlock alone) and the [`Outcome`] says so. The profile can turn the namespaces,
//! Landlock and seccomp off one by one ([`Profile::namespaces`], [`Profile::landlock`],
//! [`Profile::seccomp`]; all on by default), to measure each layer or to find which one a
//! program trips over; the [`Outcome`] then says the layer was turned off. The rest (session,
//! parent-death signal, descriptors, capabilities, `no_new_privs`, rlimits) always applies,
//! and a cgroup is made only when a `pids` or memory limit asks for one. The caller's thread supervises (one `poll`
//! loop, no threads): timeout, output cap (none when streaming), and the [`Outcome`].
//!
//! A root supervisor's commands never run as root: they run as uid and gid [`NOBODY`]
//! (65534), or [`Profile::uid`]/[`Profile::gid`], unless [`Profile::run_as_root`] keeps
//! root. The zygote writes each run's id maps from outside, PID 1 builds the mount tree and
//! then drops to those ids for good, and write paths arrive id-mapped, so that what the
//! command creates there belongs to each path's owner (see `namespaces.rs`, `mounts.rs`).
//! The paths of [`Profile::mask`] ([`MASKED`] by default: `/etc/shadow`, sudoers, SSH host
//! keys…) are covered by empty read-only files in the mount tree.
//!
//! With a network allow-list ([`Net::Allow`]) the command gets its own network namespace
//! with only loopback, where its PID 1 forwards `127.0.0.1:3128` (what `HTTP_PROXY`,
//! `HTTPS_PROXY` and `ALL_PROXY` name) to a Unix socket bind-mounted read-only at
//! `/run/moat/proxy.sock`; outside, the supervisor's proxy (HTTP `CONNECT`, plain HTTP,
//! SOCKS5) lets through only what the list names, resolves names itself, refuses non-public
//! addresses unless listed, and records every connection in the [`Outcome`]. Without user
//! namespaces such a profile is refused. See docs/sandbox.md.
//!
//! [`check`] says which layers this machine supports.

mod cgroup;
mod check;
mod child;
mod confine;
mod error;
mod helper;
mod landlock_layer;
mod mounts;
mod namespaces;
mod net;
mod outcome;
mod profile;
mod proxy;
mod relay;
mod report;
mod run;
mod seccomp;
mod shim;
mod spawn;
mod zygote;

pub use check::{Support, check};
pub use error::Error;
pub use helper::helper_main;
pub use net::{DEFAULT_PORTS, HostPattern, PatternError};
pub use outcome::{
    Connection, Enforcement, LimitHit, Outcome, PidsEnforcement, ProxyProtocol, Termination,
    Verdict,
};
pub use profile::{Limits, MASKED, NOBODY, Net, Profile};
pub use proxy::{Resolve, SystemResolver};
pub use report::Report;
pub use run::HELPER_ARG;
pub use spawn::{RunControl, Sandbox};
pub use zygote::SPARE_ENV;

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
