//! What the supervisor, the zygote and a run's processes agree on: the helper's command
//! line, the [`Plan`] a run is sent, what the zygote prepared once ([`Prepared`]), the
//! descriptor numbers inside a run, and the messages on a run socket. Below every side of a
//! run, so that each of them (`zygote.rs`, `child.rs`, `namespaces.rs`, `confine.rs`,
//! `spawn.rs`) takes these terms from here and none from another.

use std::ffi::{OsStr, OsString};
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::path::PathBuf;

use rustix::net::SendFlags;
use serde::{Deserialize, Serialize};

use crate::profile::Profile;
use crate::seccomp::Filters;

/// The first argument that makes a binary act as the sandbox helper.
pub const HELPER_ARG: &str = "__sandbox-init";

/// The second argument that makes the helper a zygote (its stdin is the control socket).
pub(crate) const ZYGOTE_ARG: &str = "zygote";

/// The zygote's third argument when it must not keep a spare PID 1 (see
/// [`crate::SPARE_ENV`]).
pub(crate) const NO_SPARE_ARG: &str = "--no-spare";

/// Whether `arg` (the helper's second argument) asks for the zygote.
pub(crate) fn is_zygote_arg(arg: Option<&OsStr>) -> bool {
    arg == Some(OsStr::new(ZYGOTE_ARG))
}

/// Whether `arg` (the helper's third argument) turns the spare off.
pub(crate) fn is_no_spare_arg(arg: Option<&OsStr>) -> bool {
    arg == Some(OsStr::new(NO_SPARE_ARG))
}

/// The exit status of a run whose setup failed (the reason goes to the supervisor as a
/// [`SETUP_ERROR`] report).
pub(crate) const SETUP_FAILED: i32 = 125;

/// Everything a run needs, sent to the zygote as JSON.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Plan {
    pub profile: Profile,
    pub argv: Vec<String>,
    /// The command's whole environment.
    pub env: Vec<(OsString, OsString)>,
    /// `cgroup.procs` files to join.
    pub cgroup_procs: Vec<PathBuf>,
    /// Enter new namespaces (the supervisor checked that the kernel allows it).
    pub namespaces: bool,
    /// Only check that the namespaces and the mount tree can be set up, then exit 0.
    pub probe: bool,
    /// Whether a cgroup's `pids.max` limits the run: then no `RLIMIT_NPROC`, which counts
    /// every process of the uid (other runs as the same uid included).
    #[serde(default)]
    pub cgroup_pids: bool,
    /// With a network allow-list: the directory (outside) holding the proxy's socket, to
    /// bind read-only at `/run/moat` in the new root.
    #[serde(default)]
    pub proxy_dir: Option<PathBuf>,
    /// The uid and gid the command runs as, when the supervisor is root and the profile
    /// does not keep root (see `namespaces.rs` for how a run gets there).
    #[serde(default)]
    pub run_as: Option<(u32, u32)>,
}

/// What every run inherits from the zygote, prepared once.
pub(crate) struct Prepared {
    /// The ids to map into a new user namespace (the zygote's, outside).
    pub uid: u32,
    pub gid: u32,
    /// The zygote's pid (a run without namespaces checks its parent against it).
    pub pid: i32,
    /// A pidfd of the zygote, readable once it has exited (PID 1 of a run cannot use
    /// `getppid`, its parent being outside its PID namespace). `None` before Linux 5.3.
    pub pidfd: Option<OwnedFd>,
    pub filters: Filters,
    pub landlock_abi: Option<u32>,
}

/// Where the run keeps its report socket and cgroup sync pipe (close-on-exec both).
pub(crate) const REPORT_FD: RawFd = 3;
pub(crate) const SYNC_FD: RawFd = 4;
/// Where the run keeps the write paths' id-mapped trees: 5, 6, … (close-on-exec).
pub(crate) const TREE_FD: RawFd = 5;

/// Supervisor → zygote, on a run socket: kill the run (its process group, its first process).
pub(crate) const KILL: u8 = b'K';
/// Run → supervisor: setup failed, the command did not run (a message follows).
pub(crate) const SETUP_ERROR: u8 = b'E';
/// PID 1 → supervisor: how the command ended (`kind` 0 exited / 1 signalled, `value`).
pub(crate) const STATUS: u8 = b'S';
/// Zygote → supervisor: the run's first process was reaped (its raw wait status follows).
/// Always the last message of a run.
pub(crate) const EXITED: u8 = b'X';

/// Writes a report message on a run's report descriptor (in a run's processes).
pub(crate) fn report(fd: RawFd, msg: &[u8]) {
    // SAFETY: `fd` stays open for the call; a message on a SOCK_SEQPACKET socket.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let _ = rustix::net::send(fd, msg, SendFlags::NOSIGNAL);
}

/// A [`SETUP_ERROR`] report saying `msg`.
pub(crate) fn setup_error(msg: &str) -> Vec<u8> {
    [&[SETUP_ERROR][..], msg.as_bytes()].concat()
}

/// Reports a setup error on [`REPORT_FD`] and leaves the process (a run's, after it has
/// taken its descriptors).
pub(crate) fn fail(msg: &str) -> ! {
    report(REPORT_FD, &setup_error(msg));
    // SAFETY: leaving a forked child without running the zygote's exit handlers.
    unsafe { libc::_exit(SETUP_FAILED) }
}
