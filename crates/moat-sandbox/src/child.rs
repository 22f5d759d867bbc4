//! A run's first process, fresh from the zygote's `fork` (or from `clone` straight into new
//! namespaces, as PID 1: see `namespaces.rs`; or a spare PID 1 handed its run): it keeps
//! only the run's descriptors, then confines itself in order and execs the command.

use std::os::fd::RawFd;

use crate::run::{
    Plan, Prepared, REPORT_FD, SETUP_FAILED, SYNC_FD, TREE_FD, fail, report, setup_error,
};
use crate::{confine, namespaces};

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

/// The run's first process, just forked (or cloned) from the zygote: keep only the run's
/// descriptors, then confine and exec (or, in new namespaces, become PID 1). Never returns.
pub(crate) fn run_child(prepared: &Prepared, plan: &Plan, fds: RunFds) -> ! {
    let trees = match take_descriptors(&fds) {
        Ok(t) => t,
        Err(e) => {
            // The report descriptor may be anything now; try the original number.
            report(fds.report, &setup_error(&e));
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
        Ok(trees) => namespaces::init(prepared, plan, &trees),
        Err(e) => {
            report(fds.report, &setup_error(&e));
            // SAFETY: leaving a forked child without running the zygote's exit handlers.
            unsafe { libc::_exit(SETUP_FAILED) }
        }
    }
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
            && let Err(e) = namespaces::map_ids(prepared)
        {
            return e;
        }
        namespaces::init(prepared, plan, trees)
    }
    let me = std::process::id().to_string();
    for procs in &plan.cgroup_procs {
        if let Err(e) = std::fs::write(procs, &me) {
            return format!("joining cgroup {}: {e}", procs.display());
        }
    }
    // Root's work (the cgroup) done: on as the run's own ids.
    if let Some((uid, gid)) = plan.run_as
        && let Err(e) = confine::drop_ids(uid, gid)
    {
        return e;
    }
    if plan.probe {
        return "probe without namespaces".into();
    }
    confine::confine_and_exec(prepared, plan)
}
