//! The Landlock layer: filesystem rules for the profile's paths, TCP denial when the network
//! is `none` (with an allow-list: TCP connect to the shim's port only, no bind), and scoping (no signals or abstract Unix sockets out of the sandbox), each as
//! far as the kernel's ABI allows.

use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

use crate::profile::{Net, Profile, SYSTEM_RO, SYSTEM_RW};

/// The newest ABI whose rights this layer asks for (filesystem, TCP, scoping).
const TARGET: ABI = ABI::V6;

/// The kernel's Landlock ABI version, or `None` if Landlock is not available.
pub(crate) fn kernel_abi() -> Option<u32> {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only returns
    // a number; it reads no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    u32::try_from(v).ok().filter(|&v| v > 0)
}

/// Restricts the calling thread (and what it execs) to the profile.
/// With `fresh_proc` (the namespaces and the mount tree, with its own `/proc` and `/tmp`),
/// all of `/proc` is readable and the fresh `/tmp` writable; otherwise only the process's
/// own `/proc/self` is readable, and the host's `/tmp` is not reachable.
pub(crate) fn apply(profile: &Profile, fresh_proc: bool) -> Result<(), String> {
    let err = |e: landlock::RulesetError| format!("landlock: {e}");
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(err)?
        .scope(Scope::from_all(TARGET))
        .map_err(err)?;
    if profile.net.is_isolated() {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET))
            .map_err(err)?;
    }
    let mut created = ruleset.create().map_err(err)?;
    if let Net::Allow(_) = profile.net {
        created = created
            .add_rule(NetPort::new(crate::shim::PORT, AccessNet::ConnectTcp))
            .map_err(err)?;
    }
    let read = AccessFs::from_read(TARGET);
    let all = AccessFs::from_all(TARGET);
    let mut add = |path: &Path, access, required: bool| -> Result<(), String> {
        match PathFd::new(path) {
            Ok(fd) => {
                RulesetCreatedAttr::add_rule(&mut created, PathBeneath::new(fd, access))
                    .map_err(|e| format!("landlock: {}: {e}", path.display()))?;
                Ok(())
            }
            Err(e) if required => Err(format!("landlock: {}: {e}", path.display())),
            Err(_) => Ok(()),
        }
    };
    if profile.system_ro {
        for p in SYSTEM_RO {
            add(Path::new(p), read, false)?;
        }
        add(
            Path::new(if fresh_proc { "/proc" } else { "/proc/self" }),
            read,
            false,
        )?;
        for p in SYSTEM_RW {
            add(Path::new(p), all, false)?;
        }
    }
    if fresh_proc {
        // The mount tree's own tmpfs, not the host's /tmp.
        add(Path::new("/tmp"), all, false)?;
    }
    for p in &profile.ro {
        add(p, read, true)?;
    }
    for p in &profile.rw {
        add(p, all, true)?;
    }
    created.restrict_self().map_err(err)?;
    Ok(())
}
