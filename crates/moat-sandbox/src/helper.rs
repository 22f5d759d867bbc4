//! The helper side: a freshly exec'd, single-threaded process that confines itself in order
//! and then execs the command. Started by [`crate::Sandbox::spawn`] as
//! `<helper> __sandbox-init <plan as JSON>`.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::profile::Profile;

/// The first argument that makes a binary act as the sandbox helper.
pub const HELPER_ARG: &str = "__sandbox-init";

/// The exit status of a helper that could not set up the sandbox; its stderr then starts
/// with [`SETUP_MARKER`].
pub(crate) const SETUP_FAILED: i32 = 125;
pub(crate) const SETUP_MARKER: &str = "moat-sandbox-init: ";

/// Everything the helper needs, passed as one JSON argument.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Plan {
    pub profile: Profile,
    pub argv: Vec<String>,
    /// The supervising process: if it is already gone, do not run.
    pub parent: i32,
    /// `cgroup.procs` files to join.
    pub cgroup_procs: Vec<PathBuf>,
    /// Enter new namespaces (the supervisor checked that the kernel allows it).
    pub namespaces: bool,
    /// Only check that the namespaces can be set up, then exit 0.
    pub probe: bool,
    /// With a network allow-list: the directory (outside) holding the proxy's socket, to
    /// bind read-only at `/run/moat` in the new root.
    #[serde(default)]
    pub proxy_dir: Option<PathBuf>,
}

/// If this process was started as the sandbox helper (first argument [`HELPER_ARG`]),
/// confines itself and execs the command: it never returns then. Otherwise returns at once.
///
/// Call it first thing in `main`, before any thread (an async runtime, a logger) is started.
pub fn helper_main() {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(HELPER_ARG)) {
        return;
    }
    let plan = match args.next().map(|a| a.into_string()) {
        Some(Ok(json)) => match serde_json::from_str::<Plan>(&json) {
            Ok(plan) => plan,
            Err(e) => fail(&format!("bad plan: {e}")),
        },
        _ => fail("missing plan"),
    };
    let err = run(&plan);
    fail(&err)
}

fn fail(msg: &str) -> ! {
    eprintln!("{SETUP_MARKER}{msg}");
    std::process::exit(SETUP_FAILED)
}

/// Confines and execs; returns only the reason it could not.
fn run(plan: &Plan) -> String {
    use rustix::process::{Pid, Signal};

    if plan.argv.is_empty() {
        return "no command".into();
    }
    // A new session (and process group) the supervisor can kill as a whole.
    if let Err(e) = rustix::process::setsid() {
        return format!("setsid: {e}");
    }
    // Die with the supervisor, and do not start if it is already gone.
    if let Err(e) = rustix::process::set_parent_process_death_signal(Some(Signal::KILL)) {
        return format!("parent-death signal: {e}");
    }
    if rustix::process::getppid() != Pid::from_raw(plan.parent) {
        return "the supervising process is gone".into();
    }
    // Only stdin, stdout and stderr cross the exec.
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags on descriptors.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc != 0 {
        return format!("close_range: {}", std::io::Error::last_os_error());
    }
    let me = std::process::id().to_string();
    for procs in &plan.cgroup_procs {
        if let Err(e) = std::fs::write(procs, &me) {
            return format!("joining cgroup {}: {e}", procs.display());
        }
    }
    if plan.namespaces {
        return crate::namespaces::run(plan, confine_and_exec);
    }
    if plan.probe {
        return "probe without namespaces".into();
    }
    confine_and_exec(plan)
}

/// Landlock, capabilities, `no_new_privs`, seccomp, rlimits, then exec. Returns only the
/// reason it could not.
fn confine_and_exec(plan: &Plan) -> String {
    let Some((program, rest)) = plan.argv.split_first() else {
        return "no command".into();
    };
    let p = &plan.profile;
    if crate::landlock_layer::kernel_abi().is_some()
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
    if let Err(e) = crate::seccomp::apply(crate::seccomp::Sockets::for_net(&p.net)) {
        return e;
    }
    if let Err(e) = set_rlimits(p) {
        return e;
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest);
    if let Some(cwd) = &p.cwd {
        cmd.current_dir(cwd);
    }
    let e = cmd.exec();
    format!("exec {program}: {e}")
}

/// Drops every capability (root included): bounding set, ambient set, then effective,
/// permitted and inheritable. With `no_new_privs`, `exec` cannot give them back.
pub(crate) fn drop_capabilities() -> Result<(), String> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    for cap in 0..64 {
        // SAFETY: PR_CAPBSET_DROP takes integers only. It fails past the last capability
        // (EINVAL) and without CAP_SETPCAP (EPERM: then there is nothing to drop).
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
    }
    let _ = rustix::thread::clear_ambient_capability_set();
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, none).map_err(|e| format!("dropping capabilities: {e}"))
}

fn set_rlimits(p: &Profile) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let l = &p.limits;
    for (name, resource, value) in [
        ("cpu", Resource::Cpu, l.cpu_seconds),
        ("memory", Resource::As, l.memory_bytes),
        ("pids", Resource::Nproc, l.pids),
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
