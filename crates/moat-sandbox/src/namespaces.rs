//! The namespace layer, before anything else confines the run: the zygote clones the run's
//! first process straight into new user, mount, PID, IPC and UTS namespaces (and network,
//! when the network is `none` or an allow-list), where it is PID 1: it maps the ids, builds
//! a new root holding only the profile's paths, a fresh `/tmp`, `/proc` and a minimal
//! `/dev` (see `mounts.rs`), runs the command as its child and reports its exit status.
//!
//! With an allow-list, PID 1 also brings the loopback up, listens on `127.0.0.1:3128` before
//! the command starts, and once it has started the command drops every capability, sets
//! `no_new_privs` and installs the seccomp list (Unix sockets only) before forwarding that
//! port to the proxy's socket in a thread of its own (see `shim.rs`): the one process that
//! handles the command's bytes inside holds no privilege, even in the namespace.
//!
//! Process tree: supervisor → zygote (outside, one for many runs) → PID 1 (inside, reaps,
//! reports the command's status on the run socket) → the command (confined, then exec'd).
//! When PID 1 exits, the kernel kills everything left in the namespace.
//!
//! Landlock is applied on top of the mount tree, as defence in depth.
//!
//! Ids. An unprivileged supervisor's run maps its own uid and gid (only those) and runs as
//! them. A root supervisor's run never keeps root (unless the profile says `run_as_root`):
//! PID 1 cannot map another uid than its own into its namespace, so the zygote, root in the
//! parent namespace, writes the maps of the run's namespace itself — uid 0 (for PID 1's
//! setup only: binding the profile's paths with root's permissions, making the tree) and the
//! run's uid and gid (65534 by default) — and tells PID 1 on the sync pipe. Once the tree is
//! built, the loopback up and the shim listening, PID 1 clears its supplementary groups and
//! sets its real, effective and saved ids to the run's ([`crate::confine::drop_ids`]); the
//! kernel then clears its capabilities, and the command, forked after, is that uid inside
//! and outside. From then on no process of the run is uid 0 on the host, and the host's
//! file permissions apply to it as to any process of that uid.

use std::os::fd::{BorrowedFd, RawFd};

use crate::confine::{confine_and_exec, drop_capabilities, drop_ids};
use crate::run::{Plan, Prepared, REPORT_FD, STATUS, SYNC_FD, fail, report};

/// Writes, from the zygote (root in the parent namespace), the id maps of `pid`'s new user
/// namespace: with `run_as`, root (for PID 1's setup) and the run's ids, `setgroups`
/// allowed (PID 1 clears its groups); without, root alone and `setgroups` denied, as a run
/// that maps itself.
pub(crate) fn write_maps(pid: i32, run_as: Option<(u32, u32)>) -> Result<(), String> {
    let (setgroups, uids, gids) = match run_as {
        Some((u, g)) => (
            "allow",
            format!("0 0 1\n{u} {u} 1\n"),
            format!("0 0 1\n{g} {g} 1\n"),
        ),
        None => ("deny", "0 0 1\n".to_string(), "0 0 1\n".to_string()),
    };
    for (file, text) in [
        ("setgroups", setgroups),
        ("uid_map", &uids),
        ("gid_map", &gids),
    ] {
        let path = format!("/proc/{pid}/{file}");
        std::fs::write(&path, text).map_err(|e| format!("writing {path}: {e}"))?;
    }
    Ok(())
}

/// Waits for the zygote's next byte on the sync pipe (ids mapped, or cgroup joined).
fn wait_for_zygote(what: &str) {
    let mut b = [0u8; 1];
    // SAFETY: SYNC_FD is the sync pipe's read end, open until exec or exit.
    let sync = unsafe { BorrowedFd::borrow_raw(SYNC_FD) };
    if !matches!(rustix::io::read(sync, &mut b), Ok(1)) {
        fail(what);
    }
}

/// Maps the zygote's user and group ids (only those) into the new user namespace, with
/// `setgroups` denied.
pub(crate) fn map_ids(prepared: &Prepared) -> Result<(), String> {
    for (file, text) in [
        ("/proc/self/setgroups", "deny".to_string()),
        ("/proc/self/uid_map", format!("{0} {0} 1", prepared.uid)),
        ("/proc/self/gid_map", format!("{0} {0} 1", prepared.gid)),
    ] {
        std::fs::write(file, text).map_err(|e| format!("writing {file}: {e}"))?;
    }
    Ok(())
}

/// PID 1 of new user, mount, PID, IPC, UTS (and network) namespaces, ids mapped: build the
/// mount tree, run the command as a child, reap, report the command's status. Never
/// returns.
pub(crate) fn init(prepared: &Prepared, plan: &Plan, trees: &[(usize, RawFd)]) -> ! {
    if plan.run_as.is_some() {
        wait_for_zygote("the sandbox's ids could not be mapped");
    }
    // SAFETY: a plain mount call with a NUL-terminated literal.
    unsafe {
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            fail(&format!(
                "private mounts: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    // The new root: only the profile's paths, a fresh /tmp, /proc and a minimal /dev.
    if let Err(e) = crate::mounts::build(&plan.profile, plan.proxy_dir.as_deref(), trees) {
        fail(&format!("mount tree: {e}"));
    }
    let _ = rustix::system::sethostname(b"moat-sandbox");
    // With an allow-list: loopback up and the shim listening before the command starts.
    let shim = match &plan.proxy_dir {
        Some(_) if !plan.probe => {
            if let Err(e) = crate::shim::loopback_up() {
                fail(&format!("network allow-list: {e}"));
            }
            match crate::shim::listen() {
                Ok(l) => Some(l),
                Err(e) => fail(&format!("network allow-list: {e}")),
            }
        }
        _ => None,
    };
    // Root's work done: the rest of the run, PID 1 included, is the run's uid.
    if let Some((uid, gid)) = plan.run_as
        && let Err(e) = drop_ids(uid, gid)
    {
        fail(&e);
    }
    if plan.probe {
        report_status(0, 0);
        // SAFETY: leaving the forked child without running the zygote's exit handlers.
        unsafe { libc::_exit(0) }
    }
    if !plan.cgroup_procs.is_empty() {
        // Wait until the zygote has moved this process into the cgroup: the command must
        // start inside it.
        wait_for_zygote("the cgroup could not be joined");
    }
    if plan.run_as.is_some() || !plan.cgroup_procs.is_empty() {
        // SAFETY: closing our own descriptor (the sync pipe; without one, SYNC_FD may be
        // anything opened since, such as the shim's listener).
        unsafe { libc::close(SYNC_FD) };
    }
    for &(_, fd) in trees {
        // SAFETY: likewise; the trees are mounted by now.
        unsafe { libc::close(fd) };
    }
    // SAFETY: this process is single-threaded.
    let child = unsafe { libc::fork() };
    if child < 0 {
        fail(&format!("fork: {}", std::io::Error::last_os_error()));
    }
    if child == 0 {
        drop(shim);
        let err = confine_and_exec(prepared, plan);
        fail(&err)
    }
    // PID 1 writes nothing: once the command (and whatever it started) is done with the
    // output pipes, the supervisor sees them end, without waiting for this process.
    for fd in 0..=2 {
        // SAFETY: closing our own stdio descriptors.
        unsafe { libc::close(fd) };
    }
    if let Some(listener) = shim {
        // From here on PID 1 reads what the command sends: no privilege left, then a thread
        // (PID 1 never forks again, so threads are safe now).
        let hardened = drop_capabilities()
            .and_then(|()| {
                rustix::thread::set_no_new_privs(true).map_err(|e| format!("no_new_privs: {e}"))
            })
            .and_then(|()| prepared.filters.apply(crate::seccomp::Sockets::Unix));
        if let Err(e) = hardened {
            fail(&format!("PID 1: {e}"));
        }
        if let Err(e) = std::thread::Builder::new()
            .name("moat-sandbox-shim".into())
            .spawn(move || crate::shim::serve(listener))
        {
            fail(&format!("PID 1: starting the proxy shim: {e}"));
        }
    }
    // Reap everything; report when the command itself ends.
    loop {
        let mut status = 0;
        // SAFETY: waits for any child of ours.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            fail("PID 1: lost the command");
        }
        if pid == child {
            if libc::WIFSIGNALED(status) {
                report_status(1, libc::WTERMSIG(status));
            } else {
                report_status(0, libc::WEXITSTATUS(status));
            }
            // SAFETY: as above.
            unsafe { libc::_exit(0) }
        }
    }
}

/// Tells the supervisor how the command ended (`kind` 0: exit status, 1: signal).
fn report_status(kind: i32, value: i32) {
    let mut msg = [0u8; 9];
    msg[0] = STATUS;
    msg[1..5].copy_from_slice(&kind.to_ne_bytes());
    msg[5..].copy_from_slice(&value.to_ne_bytes());
    report(REPORT_FD, &msg);
}
