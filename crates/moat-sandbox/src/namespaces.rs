//! The namespace layer, run by the helper before anything else confines it: new user,
//! mount, PID, IPC and UTS namespaces (and network, when the network is `none` or an
//! allow-list), a new root holding only the profile's paths, a fresh `/tmp`, `/proc` and a
//! minimal `/dev` (see `mounts.rs`), and a small init as PID 1 that runs the command as its
//! child and hands its exit status back.
//!
//! With an allow-list, PID 1 also brings the loopback up, listens on `127.0.0.1:3128` before
//! the command starts, and once it has started the command drops every capability, sets
//! `no_new_privs` and installs the seccomp list (Unix sockets only) before forwarding that
//! port to the proxy's socket in a thread of its own (see `shim.rs`): the one process that
//! handles the command's bytes inside holds no privilege, even in the namespace.
//!
//! Process tree: supervisor → helper (outside, waits, mirrors the status) → PID 1 (inside,
//! reaps, reports the command's status over a pipe) → the command (confined, then exec'd).
//! When PID 1 exits, the kernel kills everything left in the namespace.
//!
//! Landlock is applied on top of the mount tree, as defence in depth.

use std::io::Read;
use std::os::fd::OwnedFd;

use crate::helper::Plan;

/// Enters the namespaces and runs the command in them. Returns only on failure (in the
/// helper); the children never return.
pub(crate) fn run(plan: &Plan, confine_and_exec: fn(&Plan) -> String) -> String {
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if plan.profile.net.is_isolated() {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: unshare takes flags only; the helper is single-threaded.
    if unsafe { libc::unshare(flags) } != 0 {
        return format!("unshare: {}", std::io::Error::last_os_error());
    }
    for (file, text) in [
        ("/proc/self/setgroups", "deny".to_string()),
        ("/proc/self/uid_map", format!("{uid} {uid} 1")),
        ("/proc/self/gid_map", format!("{gid} {gid} 1")),
    ] {
        if let Err(e) = std::fs::write(file, text) {
            return format!("writing {file}: {e}");
        }
    }
    let (reader, writer) = match rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC) {
        Ok(p) => p,
        Err(e) => return format!("pipe: {e}"),
    };
    // SAFETY: the helper is single-threaded, so the child may do anything after fork.
    let pid1 = unsafe { libc::fork() };
    if pid1 < 0 {
        return format!("fork: {}", std::io::Error::last_os_error());
    }
    if pid1 == 0 {
        drop(reader);
        init(plan, writer, confine_and_exec)
    }
    drop(writer);
    // The helper, outside: wait for PID 1, then end the way the command ended.
    let mut status = 0;
    // SAFETY: waits for our own child.
    while unsafe { libc::waitpid(pid1, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    let mut report = [0u8; 8];
    let mut file = std::fs::File::from(reader);
    if file.read_exact(&mut report).is_err() {
        // PID 1 died without a report (killed from outside).
        if libc::WIFSIGNALED(status) {
            mirror_signal(libc::WTERMSIG(status));
        }
        std::process::exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            crate::helper::SETUP_FAILED
        });
    }
    let (kind, value) = report.split_at(4);
    let kind = i32::from_ne_bytes(kind.try_into().unwrap_or_default());
    let value = i32::from_ne_bytes(value.try_into().unwrap_or_default());
    if kind == 1 {
        mirror_signal(value);
    }
    std::process::exit(value)
}

/// Ends this process with `sig`, as the command did (no core file).
fn mirror_signal(sig: i32) -> ! {
    let _ = rustix::process::setrlimit(
        rustix::process::Resource::Core,
        rustix::process::Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    );
    // SAFETY: resetting a disposition and signalling ourselves.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::kill(libc::getpid(), sig);
    }
    std::process::exit(128 + sig)
}

/// PID 1: set up the mount namespace, run the command, report its status.
fn init(plan: &Plan, report: OwnedFd, confine_and_exec: fn(&Plan) -> String) -> ! {
    let fail = |msg: String| init_fail(&report, &msg);
    if let Err(e) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        fail(format!("parent-death signal: {e}"));
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
            fail(format!(
                "private mounts: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    // The new root: only the profile's paths, a fresh /tmp, /proc and a minimal /dev.
    if let Err(e) = crate::mounts::build(&plan.profile, plan.proxy_dir.as_deref()) {
        fail(format!("mount tree: {e}"));
    }
    let _ = rustix::system::sethostname(b"moat-sandbox");
    // With an allow-list: loopback up and the shim listening before the command starts.
    let shim = match &plan.proxy_dir {
        Some(_) if !plan.probe => {
            if let Err(e) = crate::shim::loopback_up() {
                fail(format!("network allow-list: {e}"));
            }
            match crate::shim::listen() {
                Ok(l) => Some(l),
                Err(e) => fail(format!("network allow-list: {e}")),
            }
        }
        _ => None,
    };
    if plan.probe {
        write_report(&report, 0, 0);
        // SAFETY: as above.
        unsafe { libc::_exit(0) }
    }
    // SAFETY: this process is single-threaded too.
    let child = unsafe { libc::fork() };
    if child < 0 {
        fail(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if child == 0 {
        drop(report);
        drop(shim);
        let err = confine_and_exec(plan);
        eprintln!("{}{err}", crate::helper::SETUP_MARKER);
        // SAFETY: as above.
        unsafe { libc::_exit(crate::helper::SETUP_FAILED) }
    }
    if let Some(listener) = shim {
        // From here on PID 1 reads what the command sends: no privilege left, then a thread
        // (PID 1 never forks again, so threads are safe now).
        let hardened = crate::helper::drop_capabilities()
            .and_then(|()| {
                rustix::thread::set_no_new_privs(true).map_err(|e| format!("no_new_privs: {e}"))
            })
            .and_then(|()| crate::seccomp::apply(crate::seccomp::Sockets::Unix));
        if let Err(e) = hardened {
            fail(format!("PID 1: {e}"));
        }
        if let Err(e) = std::thread::Builder::new()
            .name("moat-sandbox-shim".into())
            .spawn(move || crate::shim::serve(listener))
        {
            fail(format!("PID 1: starting the proxy shim: {e}"));
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
            write_report(&report, 0, crate::helper::SETUP_FAILED);
            // SAFETY: as above.
            unsafe { libc::_exit(crate::helper::SETUP_FAILED) }
        }
        if pid == child {
            if libc::WIFSIGNALED(status) {
                write_report(&report, 1, libc::WTERMSIG(status));
            } else {
                write_report(&report, 0, libc::WEXITSTATUS(status));
            }
            // SAFETY: as above.
            unsafe { libc::_exit(0) }
        }
    }
}

fn init_fail(report: &OwnedFd, msg: &str) -> ! {
    eprintln!("{}{msg}", crate::helper::SETUP_MARKER);
    write_report(report, 0, crate::helper::SETUP_FAILED);
    // SAFETY: leaving the forked child without running the helper's exit handlers.
    unsafe { libc::_exit(crate::helper::SETUP_FAILED) }
}

fn write_report(fd: &OwnedFd, kind: i32, value: i32) {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&kind.to_ne_bytes());
    bytes[4..].copy_from_slice(&value.to_ne_bytes());
    let _ = rustix::io::write(fd, &bytes);
}
