//! The confinement a command's own process applies to itself, last thing before `exec`:
//! Landlock, capabilities, `no_new_privs`, seccomp, rlimits; and dropping to the run's ids
//! for good (PID 1 does that too, see `namespaces.rs`).

use std::os::unix::process::CommandExt;

use crate::profile::Profile;
use crate::run::{Plan, Prepared};

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
