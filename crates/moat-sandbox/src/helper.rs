//! The helper side. A binary that calls [`helper_main`] first thing in `main` becomes, when
//! started as `<helper> __sandbox-init zygote`, the zygote (see `zygote.rs`): a
//! single-threaded process that forks one child per run. That child, fresh from `fork` (or
//! from `clone` straight into new namespaces, as PID 1: see `namespaces.rs`), confines
//! itself in order and execs the command.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::profile::Profile;
use crate::zygote::Prepared;

/// The first argument that makes a binary act as the sandbox helper.
pub const HELPER_ARG: &str = "__sandbox-init";

/// The exit status of a run whose setup failed (the reason goes to the supervisor as a
/// [`crate::zygote::SETUP_ERROR`] report).
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

/// If this process was started as the sandbox helper (first argument [`HELPER_ARG`]),
/// serves as the zygote and never returns. Otherwise returns at once.
///
/// Call it first thing in `main`, before any thread (an async runtime, a logger) is started.
pub fn helper_main() {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(HELPER_ARG)) {
        return;
    }
    if crate::zygote::is_zygote_arg(args.next().as_deref()) {
        crate::zygote::serve(!crate::zygote::is_no_spare_arg(args.next().as_deref()))
    }
    eprintln!("moat-sandbox-init: started by moat-sandbox only");
    std::process::exit(SETUP_FAILED)
}

/// The descriptors a run's first process was handed (numbers in the zygote).
pub(crate) struct RunFds {
    pub stdin: RawFd,
    pub stdout: RawFd,
    pub stderr: RawFd,
    /// The run socket: setup errors and PID 1's status report go there.
    pub report: RawFd,
    /// The supervisor's working directory (`O_PATH`).
    pub cwd: RawFd,
    /// With namespaces and a cgroup or ids to drop to: one byte once the zygote has written
    /// PID 1's id maps (when it drops ids), then one once it has moved PID 1 into the cgroup
    /// (when there is one).
    pub sync: Option<RawFd>,
    /// Detached, id-mapped copies of write paths (index in the profile's `rw`, descriptor),
    /// made by the zygote (see `mounts.rs`).
    pub trees: Vec<(usize, RawFd)>,
}

/// Where the run keeps its report socket and cgroup sync pipe (close-on-exec both).
pub(crate) const REPORT_FD: RawFd = 3;
pub(crate) const SYNC_FD: RawFd = 4;
/// Where the run keeps the write paths' id-mapped trees: 5, 6, … (close-on-exec).
pub(crate) const TREE_FD: RawFd = 5;

/// The run's first process, just forked (or cloned) from the zygote: keep only the run's
/// descriptors, then confine and exec (or, in new namespaces, become PID 1). Never returns.
pub(crate) fn run_child(prepared: &Prepared, plan: &Plan, fds: RunFds) -> ! {
    let trees = match take_descriptors(&fds) {
        Ok(t) => t,
        Err(e) => {
            // The report descriptor may be anything now; try the original number.
            crate::zygote::report(fds.report, &setup_error(&e));
            // SAFETY: leaving a forked child without running the zygote's exit handlers.
            unsafe { libc::_exit(SETUP_FAILED) }
        }
    };
    let err = start(prepared, plan, &trees);
    fail(&err)
}

/// A spare PID 1 that got its run (it has its session, parent-death signal, mapped ids and
/// mount namespace already): keep only the run's descriptors, then do what PID 1 does.
pub(crate) fn run_spare(prepared: &Prepared, plan: &Plan, fds: RunFds) -> ! {
    match take_descriptors(&fds) {
        Ok(trees) => crate::namespaces::init(prepared, plan, &trees),
        Err(e) => {
            crate::zygote::report(fds.report, &setup_error(&e));
            // SAFETY: leaving a forked child without running the zygote's exit handlers.
            unsafe { libc::_exit(SETUP_FAILED) }
        }
    }
}

/// Reports a setup error and leaves the process.
pub(crate) fn fail(msg: &str) -> ! {
    crate::zygote::report(REPORT_FD, &setup_error(msg));
    // SAFETY: leaving a forked child without running the zygote's exit handlers.
    unsafe { libc::_exit(SETUP_FAILED) }
}

fn setup_error(msg: &str) -> Vec<u8> {
    [&[crate::zygote::SETUP_ERROR][..], msg.as_bytes()].concat()
}

/// Moves the run's descriptors to 0, 1, 2, [`REPORT_FD`] (and [`SYNC_FD`], and the trees
/// from [`TREE_FD`] on), closes every other one (the zygote's control socket, other runs'
/// sockets), and enters the supervisor's working directory. Returns the trees' new numbers.
fn take_descriptors(fds: &RunFds) -> Result<Vec<(usize, RawFd)>, String> {
    let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    let mut wanted = vec![fds.stdin, fds.stdout, fds.stderr, fds.report, fds.cwd];
    wanted.push(fds.sync.unwrap_or(fds.report));
    wanted.extend(fds.trees.iter().map(|&(_, fd)| fd));
    // First out of the way of the targets (0..=5), all close-on-exec.
    let mut high = Vec::with_capacity(wanted.len());
    for fd in wanted {
        // SAFETY: duplicating a descriptor this process holds.
        let h = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 16) };
        if h < 0 {
            return Err(err("F_DUPFD_CLOEXEC"));
        }
        high.push(h);
    }
    for (target, &h) in (0..).zip(&high[..3]) {
        // SAFETY: dup2 onto stdio (clears close-on-exec there).
        if unsafe { libc::dup2(h, target) } < 0 {
            return Err(err("dup2"));
        }
    }
    // SAFETY: dup3 with O_CLOEXEC: the report socket never crosses the exec.
    if unsafe { libc::dup3(high[3], REPORT_FD, libc::O_CLOEXEC) } < 0 {
        return Err(err("dup3"));
    }
    let mut last = REPORT_FD;
    if fds.sync.is_some() {
        // SAFETY: as above.
        if unsafe { libc::dup3(high[5], SYNC_FD, libc::O_CLOEXEC) } < 0 {
            return Err(err("dup3"));
        }
        last = SYNC_FD;
    }
    if fds.sync.is_none() && !fds.trees.is_empty() {
        // SAFETY: closing what the zygote may have left at SYNC_FD (the run's own are above).
        unsafe { libc::close(SYNC_FD) };
    }
    let mut trees = Vec::with_capacity(fds.trees.len());
    for (k, &(index, _)) in fds.trees.iter().enumerate() {
        let target = TREE_FD + k as RawFd;
        // SAFETY: as above.
        if unsafe { libc::dup3(high[6 + k], target, libc::O_CLOEXEC) } < 0 {
            return Err(err("dup3"));
        }
        trees.push((index, target));
        last = target;
    }
    // SAFETY: fchdir on the supervisor's directory, still open at `high[4]`.
    let cwd_ok = unsafe { libc::fchdir(high[4]) } == 0;
    // SAFETY: closing everything above the run's descriptors (the copies above included).
    if unsafe { libc::syscall(libc::SYS_close_range, (last + 1) as u32, u32::MAX, 0u32) } != 0 {
        return Err(err("close_range"));
    }
    if !cwd_ok {
        let _ = std::env::set_current_dir("/");
    }
    Ok(trees)
}

/// A new session, then namespaces (as PID 1) or straight to the confinement (the
/// parent-death signal is set already). Returns only the reason it could not.
fn start(prepared: &Prepared, plan: &Plan, trees: &[(usize, RawFd)]) -> String {
    if plan.argv.is_empty() {
        return "no command".into();
    }
    // A new session (and process group) the zygote can kill as a whole.
    if let Err(e) = rustix::process::setsid() {
        return format!("setsid: {e}");
    }
    if plan.namespaces {
        // With ids to drop to, the zygote writes the maps (see `namespaces.rs`).
        if plan.run_as.is_none()
            && let Err(e) = crate::namespaces::map_ids(prepared)
        {
            return e;
        }
        crate::namespaces::init(prepared, plan, trees)
    }
    let me = std::process::id().to_string();
    for procs in &plan.cgroup_procs {
        if let Err(e) = std::fs::write(procs, &me) {
            return format!("joining cgroup {}: {e}", procs.display());
        }
    }
    // Root's work (the cgroup) done: on as the run's own ids.
    if let Some((uid, gid)) = plan.run_as
        && let Err(e) = drop_ids(uid, gid)
    {
        return e;
    }
    if plan.probe {
        return "probe without namespaces".into();
    }
    confine_and_exec(prepared, plan)
}

/// Landlock (unless the profile turns it off), capabilities, `no_new_privs`, seccomp
/// (likewise), rlimits, then exec. Returns only the reason it could not.
pub(crate) fn confine_and_exec(prepared: &Prepared, plan: &Plan) -> String {
    let Some((program, rest)) = plan.argv.split_first() else {
        return "no command".into();
    };
    let p = &plan.profile;
    if p.landlock
        && prepared.landlock_abi.is_some()
        && let Err(e) = crate::landlock_layer::apply(p, plan.namespaces)
    {
        return e;
    }
    if let Err(e) = drop_capabilities() {
        return e;
    }
    if let Err(e) = rustix::thread::set_no_new_privs(true) {
        return format!("no_new_privs: {e}");
    }
    if p.seccomp
        && let Err(e) = prepared
            .filters
            .apply(crate::seccomp::Sockets::for_net(&p.net))
    {
        return e;
    }
    if let Err(e) = set_rlimits(p, plan.cgroup_pids) {
        return e;
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest)
        .env_clear()
        .envs(plan.env.iter().map(|(k, v)| (k, v)));
    if let Some(cwd) = &p.cwd {
        cmd.current_dir(cwd);
    }
    let e = cmd.exec();
    format!("exec {program}: {e}")
}

/// Becomes `uid`/`gid` for good: no supplementary groups, real, effective and saved ids
/// all set (so nothing can switch back), dumpable again (changing ids clears it).
pub(crate) fn drop_ids(uid: u32, gid: u32) -> Result<(), String> {
    let err = |what: &str| {
        format!(
            "running as uid {uid}, gid {gid}: {what}: {}",
            std::io::Error::last_os_error()
        )
    };
    // The bounding set first, while CAP_SETPCAP is there to shrink it.
    for cap in 0..64 {
        // SAFETY: PR_CAPBSET_DROP takes integers only; it fails past the last capability.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            break;
        }
    }
    // SAFETY: plain system calls on this (single-threaded) process's credentials; raw
    // calls, so that no C library machinery for other threads is involved.
    unsafe {
        if libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) != 0 {
            return Err(err("setgroups"));
        }
        if libc::syscall(libc::SYS_setresgid, gid, gid, gid) != 0 {
            return Err(err("setresgid"));
        }
        if libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0 {
            return Err(err("setresuid"));
        }
        libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
    }
    let (r, e) = (rustix::process::getuid(), rustix::process::geteuid());
    if r.as_raw() != uid || e.as_raw() != uid || rustix::process::getegid().as_raw() != gid {
        return Err(format!(
            "running as uid {uid}, gid {gid}: the ids did not change"
        ));
    }
    Ok(())
}

/// Drops every capability (root included): bounding set, ambient set, then effective,
/// permitted and inheritable. With `no_new_privs`, `exec` cannot give them back.
pub(crate) fn drop_capabilities() -> Result<(), String> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    for cap in 0..64 {
        // SAFETY: PR_CAPBSET_DROP takes integers only. It fails past the last capability
        // (EINVAL: the list is done) and without CAP_SETPCAP (EPERM, for every capability:
        // then there is nothing this process could drop or use).
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            break;
        }
    }
    let _ = rustix::thread::clear_ambient_capability_set();
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, none).map_err(|e| format!("dropping capabilities: {e}"))
}

fn set_rlimits(p: &Profile, cgroup_pids: bool) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let l = &p.limits;
    for (name, resource, value) in [
        ("cpu", Resource::Cpu, l.cpu_seconds),
        ("memory", Resource::As, l.memory_bytes),
        ("pids", Resource::Nproc, l.pids.filter(|_| !cgroup_pids)),
        ("open files", Resource::Nofile, l.open_files),
        ("core", Resource::Core, Some(0)),
    ] {
        let Some(value) = value else { continue };
        // CPU: the soft limit sends SIGXCPU, the hard one a second later SIGKILL.
        // Never above the current hard limit (an unprivileged process cannot raise it).
        let ceiling = getrlimit(resource).maximum.unwrap_or(u64::MAX);
        let value = value.min(ceiling);
        let hard = if name == "cpu" {
            value.saturating_add(1).min(ceiling)
        } else {
            value
        };
        setrlimit(
            resource,
            Rlimit {
                current: Some(value),
                maximum: Some(hard),
            },
        )
        .map_err(|e| format!("rlimit {name} = {value}: {e}"))?;
    }
    Ok(())
}
