//! The seccomp deny-list: calls a confined command has no business making answer `EPERM`.
//!
//! Denied always: `ptrace`, `process_vm_readv`/`writev`, `io_uring_*`, `bpf`, the mount
//! family (old and new API), `keyctl`/`add_key`/`request_key`, module loading, `reboot`,
//! `kexec_*`, `userfaultfd`, `perf_event_open`, `open_by_handle_at`, `setns`, `unshare`,
//! `clone` with namespace flags, `pivot_root`, `swapon`/`swapoff`, `acct`; `ioctl` with
//! `TIOCSTI` or `TIOCLINUX` (compared on the low 32 bits, as the kernel does). `clone3`
//! answers `ENOSYS`, so libc falls back to `clone`, whose flags can be inspected. With the
//! network `none`, `socket` for any family but `AF_UNIX` is denied; with an allow-list, any
//! but `AF_UNIX` and `AF_INET` (which then reaches only the namespace's loopback, where the
//! proxy shim listens): no `AF_INET6`, `AF_NETLINK`, `AF_PACKET`, `AF_VSOCK`….
//!
//! Known gap: on x86-64 kernels that enable the x32 ABI, x32 system call numbers are not
//! matched by this list.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::profile::Net;

/// The socket families a filter lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sockets {
    /// `AF_UNIX` only (the network `none`; PID 1 once the shim listens).
    Unix,
    /// `AF_UNIX` and `AF_INET` (an allow-list: the shim on the namespace's loopback).
    UnixAndInet,
    /// Any (the host's network).
    Any,
}

impl Sockets {
    pub(crate) fn for_net(net: &Net) -> Sockets {
        match net {
            Net::Host => Sockets::Any,
            Net::Allow(_) => Sockets::UnixAndInet,
            _ => Sockets::Unix,
        }
    }
}

const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
const NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

fn arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("seccomp: unsupported architecture: {e}"))
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conds).map_err(|e| e.to_string())
}

/// The `EPERM` deny-list filter, letting these socket families through.
fn deny_filter(sockets: Sockets) -> Result<BpfProgram, String> {
    let always: &[libc::c_long] = &[
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_bpf,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_mount_setattr,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_pivot_root,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_reboot,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_userfaultfd,
        libc::SYS_perf_event_open,
        libc::SYS_open_by_handle_at,
        libc::SYS_setns,
        libc::SYS_unshare,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_acct,
    ];
    // `c_long` is `i32` on 32-bit targets.
    #[allow(clippy::useless_conversion)]
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = always
        .iter()
        .map(|&nr| (i64::from(nr), Vec::new()))
        .collect();
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, SeccompCmpOp::Eq, TIOCSTI)?])?,
            rule(vec![cond(1, SeccompCmpOp::Eq, TIOCLINUX)?])?,
        ],
    );
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| {
            let flag = flag as u64;
            rule(vec![cond(0, SeccompCmpOp::MaskedEq(flag), flag)?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    let allowed: &[libc::c_int] = match sockets {
        Sockets::Unix => &[libc::AF_UNIX],
        Sockets::UnixAndInet => &[libc::AF_UNIX, libc::AF_INET],
        Sockets::Any => &[],
    };
    if !allowed.is_empty() {
        // One rule: denied when the family is none of the allowed ones.
        let conds = allowed
            .iter()
            .map(|&family| cond(0, SeccompCmpOp::Ne, family as u64))
            .collect::<Result<Vec<_>, _>>()?;
        rules.insert(libc::SYS_socket, vec![rule(conds)?]);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch()?,
    )
    .map_err(|e| format!("seccomp: {e}"))?;
    filter.try_into().map_err(|e| format!("seccomp: {e}"))
}

/// `clone3` answers `ENOSYS` (its flags live in memory a filter cannot read).
fn clone3_filter() -> Result<BpfProgram, String> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [(libc::SYS_clone3, Vec::new())].into();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch()?,
    )
    .map_err(|e| format!("seccomp: {e}"))?;
    filter.try_into().map_err(|e| format!("seccomp: {e}"))
}

/// Installs both filters on the calling thread (`no_new_privs` must be set).
pub(crate) fn apply(sockets: Sockets) -> Result<(), String> {
    let deny = deny_filter(sockets)?;
    let clone3 = clone3_filter()?;
    seccompiler::apply_filter(&clone3).map_err(|e| format!("seccomp: {e}"))?;
    seccompiler::apply_filter(&deny).map_err(|e| format!("seccomp: {e}"))
}
