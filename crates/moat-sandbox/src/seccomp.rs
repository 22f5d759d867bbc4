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
//! proxy shim listens): no `AF_INET6`, `AF_NETLINK`, `AF_PACKET`, `AF_VSOCK`…. A call made
//! for another architecture (`int 0x80` on x86-64) kills the process; on x86-64 every x32
//! system call (number with bit 30 set) is denied.
//!
//! The filter is one classic BPF program per socket policy, written here rather than by a
//! generic compiler: after the architecture check, a binary search over the handful of
//! numbers that are not simply allowed, so every other call is allowed after about seven
//! comparisons. That matters at load time more than at run time: the kernel JIT-compiles
//! the program and, to build its per-call cache, runs it once for every system call
//! number of every architecture, with interrupts off; a long linear list made loading it
//! cost about a quarter of a millisecond per run. The programs are built once, in the
//! zygote (`Filters::compile`), and only loaded per run.

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

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;
const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u32;

/// Calls answered `EPERM` whatever their arguments.
const DENIED: &[libc::c_long] = &[
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

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: u32 = 0xC000_00F3;

/// x32 system calls are x86-64 numbers with this bit set.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(not(target_arch = "x86_64"))]
const X32_SYSCALL_BIT: Option<u32> = None;

// `struct seccomp_data`: nr (u32), arch (u32), instruction pointer (u64), args (6 × u64).
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low 32 bits of argument `i` (the targets here are little-endian).
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}
#[cfg(not(target_endian = "little"))]
compile_error!("the seccomp filter reads the low half of arguments at little-endian offsets");

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

/// Where a jump goes, resolved to a relative offset at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum To {
    Next,
    Allow,
    Eperm,
    Enosys,
    Kill,
    Ioctl,
    Clone,
    Socket,
    /// An instruction index.
    At(usize),
}

struct Insn {
    code: u16,
    k: u32,
    jt: To,
    jf: To,
}

/// What happens to a call whose number is not simply allowed.
#[derive(Debug, Clone, Copy)]
enum Special {
    Deny,
    Enosys,
    Ioctl,
    Clone,
    Socket,
}

/// The whole program for one socket policy.
fn program(sockets: Sockets) -> Result<Vec<libc::sock_filter>, String> {
    let nr = |n: libc::c_long| u32::try_from(n).map_err(|_| format!("seccomp: call {n}"));
    let mut special: Vec<(u32, Special)> = Vec::new();
    for &n in DENIED {
        special.push((nr(n)?, Special::Deny));
    }
    special.push((nr(libc::SYS_clone3)?, Special::Enosys));
    special.push((nr(libc::SYS_ioctl)?, Special::Ioctl));
    special.push((nr(libc::SYS_clone)?, Special::Clone));
    if sockets != Sockets::Any {
        special.push((nr(libc::SYS_socket)?, Special::Socket));
    }
    special.sort_by_key(|&(n, _)| n);
    special.dedup_by_key(|&mut (n, _)| n);

    let stmt = |code, k| Insn {
        code,
        k,
        jt: To::Next,
        jf: To::Next,
    };
    let jump = |code, k, jt, jf| Insn { code, k, jt, jf };
    let mut p = vec![
        stmt(LD_W_ABS, ARCH),
        jump(JEQ, AUDIT_ARCH, To::Next, To::Kill),
        stmt(LD_W_ABS, NR),
    ];
    if let Some(bit) = X32_SYSCALL_BIT {
        p.push(jump(JSET, bit, To::Eperm, To::Next));
    }
    search(&mut p, &special);
    // The argument checks, each ending in a verdict.
    let blocks = p.len();
    p.push(stmt(LD_W_ABS, arg_low(1))); // ioctl request
    p.push(jump(JEQ, TIOCSTI, To::Eperm, To::Next));
    p.push(jump(JEQ, TIOCLINUX, To::Eperm, To::Allow));
    let clone_at = p.len();
    p.push(stmt(LD_W_ABS, arg_low(0))); // clone flags
    p.push(jump(JSET, NAMESPACE_FLAGS, To::Eperm, To::Allow));
    let socket_at = p.len();
    p.push(stmt(LD_W_ABS, arg_low(0))); // socket family
    match sockets {
        Sockets::Unix => p.push(jump(JEQ, libc::AF_UNIX as u32, To::Allow, To::Eperm)),
        Sockets::UnixAndInet => {
            p.push(jump(JEQ, libc::AF_UNIX as u32, To::Allow, To::Next));
            p.push(jump(JEQ, libc::AF_INET as u32, To::Allow, To::Eperm));
        }
        Sockets::Any => p.push(stmt(RET, RET_ALLOW)),
    }
    let returns = p.len();
    for k in [RET_ALLOW, RET_EPERM, RET_ENOSYS, RET_KILL] {
        p.push(stmt(RET, k));
    }
    let target = |to: To, i: usize| -> usize {
        match to {
            To::Next => i + 1,
            To::At(a) => a,
            To::Ioctl => blocks,
            To::Clone => clone_at,
            To::Socket => socket_at,
            To::Allow => returns,
            To::Eperm => returns + 1,
            To::Enosys => returns + 2,
            To::Kill => returns + 3,
        }
    };
    let offset = |to: To, i: usize| -> Result<u8, String> {
        target(to, i)
            .checked_sub(i + 1)
            .and_then(|d| u8::try_from(d).ok())
            .ok_or_else(|| "seccomp: jump out of range".to_string())
    };
    p.iter()
        .enumerate()
        .map(|(i, insn)| {
            let is_jump = insn.code & 0x07 == libc::BPF_JMP as u16;
            Ok(libc::sock_filter {
                code: insn.code,
                jt: if is_jump { offset(insn.jt, i)? } else { 0 },
                jf: if is_jump { offset(insn.jf, i)? } else { 0 },
                k: insn.k,
            })
        })
        .collect()
}

/// A binary search over `special` (sorted by number) on the call number in the accumulator;
/// every number not listed is allowed.
fn search(p: &mut Vec<Insn>, special: &[(u32, Special)]) {
    let verdict = |s: Special| match s {
        Special::Deny => To::Eperm,
        Special::Enosys => To::Enosys,
        Special::Ioctl => To::Ioctl,
        Special::Clone => To::Clone,
        Special::Socket => To::Socket,
    };
    match special {
        [] => p.push(Insn {
            code: RET,
            k: RET_ALLOW,
            jt: To::Next,
            jf: To::Next,
        }),
        [(n, s)] => p.push(Insn {
            code: JEQ,
            k: *n,
            jt: verdict(*s),
            jf: To::Allow,
        }),
        _ => {
            let mid = special.len() / 2;
            let at = p.len();
            p.push(Insn {
                code: JGE,
                k: special[mid].0,
                jt: To::Next, // patched below
                jf: To::Next,
            });
            search(p, &special[..mid]);
            let right = p.len();
            p[at].jt = To::At(right);
            search(p, &special[mid..]);
        }
    }
}

/// Every filter a run may install, built once (in the zygote, before any run is forked) so
/// that a run only loads one.
pub(crate) struct Filters {
    unix: Vec<libc::sock_filter>,
    unix_and_inet: Vec<libc::sock_filter>,
    any: Vec<libc::sock_filter>,
}

impl Filters {
    /// Builds them all.
    pub(crate) fn compile() -> Result<Filters, String> {
        Ok(Filters {
            unix: program(Sockets::Unix)?,
            unix_and_inet: program(Sockets::UnixAndInet)?,
            any: program(Sockets::Any)?,
        })
    }

    fn get(&self, sockets: Sockets) -> &[libc::sock_filter] {
        match sockets {
            Sockets::Unix => &self.unix,
            Sockets::UnixAndInet => &self.unix_and_inet,
            Sockets::Any => &self.any,
        }
    }

    /// Installs the filter for `sockets` on the calling thread (`no_new_privs` must be set).
    pub(crate) fn apply(&self, sockets: Sockets) -> Result<(), String> {
        let prog = self.get(sockets);
        let fprog = libc::sock_fprog {
            len: u16::try_from(prog.len()).map_err(|_| "seccomp: program too long")?,
            filter: prog.as_ptr().cast_mut(),
        };
        // SAFETY: seccomp(SECCOMP_SET_MODE_FILTER) reads the program `fprog` points to,
        // which outlives the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &fprog as *const libc::sock_fprog,
            )
        };
        if rc != 0 {
            return Err(format!("seccomp: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The programs, run by a small classic-BPF interpreter for every call number and the
    //! arguments that matter, against what the list above says; and against the filters
    //! `seccompiler` built from the same list before (the clone3 filter and the deny-list,
    //! combined the way the kernel combines two filters).

    use std::collections::BTreeMap;

    use super::*;

    /// Runs a classic BPF program on a `seccomp_data`.
    fn run(prog: &[libc::sock_filter], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let mut acc = 0u32;
        let mut pc = 0usize;
        for _ in 0..10_000 {
            let i = prog[pc];
            let (class, op) = (i.code & 0x07, i.code & 0xf0);
            match class {
                0x00 => {
                    assert_eq!(i.code, LD_W_ABS);
                    let k = i.k as usize;
                    acc = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                    pc += 1;
                }
                0x04 => {
                    assert_eq!(op, libc::BPF_AND as u16);
                    acc &= i.k;
                    pc += 1;
                }
                0x05 => {
                    let taken = match op {
                        0x00 => {
                            pc += 1 + i.k as usize;
                            continue;
                        }
                        0x10 => acc == i.k,
                        0x20 => acc > i.k,
                        0x30 => acc >= i.k,
                        0x40 => acc & i.k != 0,
                        _ => panic!("jump {op:#x}"),
                    };
                    pc += 1 + usize::from(if taken { i.jt } else { i.jf });
                }
                0x06 => return i.k,
                _ => panic!("class {class:#x}"),
            }
        }
        panic!("no verdict");
    }

    /// The kernel's verdict for two filters: the one with the lower action wins.
    fn combine(a: u32, b: u32) -> u32 {
        let action = |v: u32| (v & libc::SECCOMP_RET_ACTION_FULL) as i32;
        if action(a) <= action(b) { a } else { b }
    }

    fn old(sockets: Sockets) -> (Vec<libc::sock_filter>, Vec<libc::sock_filter>) {
        use seccompiler::{
            SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
            SeccompRule, TargetArch,
        };
        let arch = TargetArch::try_from(std::env::consts::ARCH).unwrap();
        let cond = |arg, op, v| SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, v).unwrap();
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
            DENIED.iter().map(|&n| (n, Vec::new())).collect();
        rules.insert(
            libc::SYS_ioctl,
            [TIOCSTI, TIOCLINUX]
                .iter()
                .map(|&r| SeccompRule::new(vec![cond(1, SeccompCmpOp::Eq, u64::from(r))]).unwrap())
                .collect(),
        );
        let flags = [
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWNS,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWNET,
            libc::CLONE_NEWIPC,
            libc::CLONE_NEWUTS,
            libc::CLONE_NEWCGROUP,
        ];
        rules.insert(
            libc::SYS_clone,
            flags
                .iter()
                .map(|&f| {
                    let f = f as u64;
                    SeccompRule::new(vec![cond(0, SeccompCmpOp::MaskedEq(f), f)]).unwrap()
                })
                .collect(),
        );
        let allowed: &[libc::c_int] = match sockets {
            Sockets::Unix => &[libc::AF_UNIX],
            Sockets::UnixAndInet => &[libc::AF_UNIX, libc::AF_INET],
            Sockets::Any => &[],
        };
        if !allowed.is_empty() {
            let conds = allowed
                .iter()
                .map(|&f| cond(0, SeccompCmpOp::Ne, f as u64))
                .collect();
            rules.insert(libc::SYS_socket, vec![SeccompRule::new(conds).unwrap()]);
        }
        let deny = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )
        .unwrap();
        let clone3 = SeccompFilter::new(
            [(libc::SYS_clone3, Vec::new())].into(),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::ENOSYS as u32),
            arch,
        )
        .unwrap();
        let bpf = |f: SeccompFilter| -> Vec<libc::sock_filter> {
            let p: seccompiler::BpfProgram = f.try_into().unwrap();
            p.iter()
                .map(|i| libc::sock_filter {
                    code: i.code,
                    jt: i.jt,
                    jf: i.jf,
                    k: i.k,
                })
                .collect()
        };
        (bpf(deny), bpf(clone3))
    }

    /// Argument sets that exercise every check.
    fn argument_sets() -> Vec<[u64; 6]> {
        let mut sets = vec![[0; 6]];
        for v in [
            u64::from(TIOCSTI),
            u64::from(TIOCLINUX),
            0x1_0000_0000 | u64::from(TIOCSTI),
            0x5413,
            libc::SIGCHLD as u64,
            (libc::CLONE_VM | libc::CLONE_THREAD) as u64,
            libc::AF_UNIX as u64,
            libc::AF_INET as u64,
            libc::AF_INET6 as u64,
            libc::AF_NETLINK as u64,
            libc::AF_PACKET as u64,
            0x1_0000_0000 | libc::AF_UNIX as u64,
        ] {
            sets.push([v, v, 0, 0, 0, 0]);
        }
        for f in [
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWNS,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWNET,
            libc::CLONE_NEWIPC,
            libc::CLONE_NEWUTS,
            libc::CLONE_NEWCGROUP,
        ] {
            sets.push([(f | libc::SIGCHLD) as u64, 0, 0, 0, 0, 0]);
        }
        sets
    }

    #[test]
    fn the_programs_say_what_the_list_says() {
        for sockets in [Sockets::Unix, Sockets::UnixAndInet, Sockets::Any] {
            let p = program(sockets).unwrap();
            assert!(p.len() < 160, "{} instructions", p.len());
            let v = |nr: libc::c_long, args: [u64; 6]| run(&p, nr as u32, AUDIT_ARCH, args);
            for &n in DENIED {
                assert_eq!(v(n, [0; 6]), RET_EPERM, "{n}");
            }
            assert_eq!(v(libc::SYS_clone3, [0; 6]), RET_ENOSYS);
            for ok in [
                libc::SYS_read,
                libc::SYS_write,
                libc::SYS_execve,
                libc::SYS_exit_group,
            ] {
                assert_eq!(v(ok, [0; 6]), RET_ALLOW, "{ok}");
            }
            let ioctl = |r: u64| v(libc::SYS_ioctl, [0, r, 0, 0, 0, 0]);
            assert_eq!(ioctl(u64::from(TIOCSTI)), RET_EPERM);
            assert_eq!(ioctl(0xdead_0000_0000 | u64::from(TIOCSTI)), RET_EPERM);
            assert_eq!(ioctl(u64::from(TIOCLINUX)), RET_EPERM);
            assert_eq!(ioctl(0x5413), RET_ALLOW);
            let clone = |f: i32| v(libc::SYS_clone, [f as u64, 0, 0, 0, 0, 0]);
            assert_eq!(clone(libc::SIGCHLD), RET_ALLOW);
            assert_eq!(clone(libc::CLONE_NEWUSER | libc::SIGCHLD), RET_EPERM);
            assert_eq!(clone(libc::CLONE_NEWCGROUP), RET_EPERM);
            let socket = |f: i32| v(libc::SYS_socket, [f as u64, 0, 0, 0, 0, 0]);
            assert_eq!(socket(libc::AF_UNIX), RET_ALLOW);
            let inet = if sockets == Sockets::Unix {
                RET_EPERM
            } else {
                RET_ALLOW
            };
            assert_eq!(socket(libc::AF_INET), inet);
            let other = if sockets == Sockets::Any {
                RET_ALLOW
            } else {
                RET_EPERM
            };
            for f in [
                libc::AF_INET6,
                libc::AF_NETLINK,
                libc::AF_PACKET,
                libc::AF_VSOCK,
            ] {
                assert_eq!(socket(f), other, "{f}");
            }
            // Another architecture is killed.
            assert_eq!(run(&p, 0, 0x4000_0003, [0; 6]), RET_KILL);
            if let Some(bit) = X32_SYSCALL_BIT {
                assert_eq!(run(&p, bit, AUDIT_ARCH, [0; 6]), RET_EPERM);
                assert_eq!(run(&p, bit | 101, AUDIT_ARCH, [0; 6]), RET_EPERM);
            }
        }
    }

    #[test]
    fn the_programs_agree_with_the_filters_seccompiler_built() {
        for sockets in [Sockets::Unix, Sockets::UnixAndInet, Sockets::Any] {
            let new = program(sockets).unwrap();
            let (deny, clone3) = old(sockets);
            for nr in 0..1024u32 {
                for args in argument_sets() {
                    let was = combine(
                        run(&deny, nr, AUDIT_ARCH, args),
                        run(&clone3, nr, AUDIT_ARCH, args),
                    );
                    assert_eq!(
                        run(&new, nr, AUDIT_ARCH, args),
                        was,
                        "{sockets:?} {nr} {args:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn filters_load_in_a_child() {
        let filters = Filters::compile().unwrap();
        // SAFETY: the child only makes system calls and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                let ok = filters.apply(Sockets::Unix).is_ok();
                let denied = libc::syscall(libc::SYS_unshare, 0) == -1
                    && *libc::__errno_location() == libc::EPERM;
                let inet = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) == -1
                    && *libc::__errno_location() == libc::EPERM;
                let unix = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) >= 0;
                libc::_exit(if ok && denied && inet && unix { 0 } else { 1 });
            }
        }
        let mut status = 0;
        // SAFETY: waits for our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
}
