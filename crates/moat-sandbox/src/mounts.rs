//! The mount tree, built by the sandbox's PID 1 in its own mount namespace: a new root on a
//! tmpfs holding only read-only binds of the system paths and of the profile's read paths,
//! read-write binds of its write paths, a fresh size-capped tmpfs `/tmp`, a fresh `/proc`
//! and a minimal `/dev` (`null`, `zero`, `full`, `random`, `urandom`, `tty`, and the
//! `fd`/`stdin`/`stdout`/`stderr` links). Then `pivot_root` into it and detach the old root:
//! nothing else of the host's file system is reachable.
//!
//! Where it is built: on a tmpfs mounted over a directory of the host that no path of the
//! tree comes from or leads to (`/tmp`, else `/mnt`, …; this mount namespace is private,
//! the host sees nothing), binding the host's paths directly; then one `pivot_root` and one
//! detach. Each detach waits for an RCU grace period, which is most of what building the
//! tree costs. When every candidate is taken (a profile path such as `/`), as in
//! bubblewrap: a tmpfs on `/tmp` becomes the root first, so that the old root stays
//! reachable at `/oldroot` while the new one is built at `/newroot`, whatever the profile's
//! paths are; that costs a second `pivot_root` and a second detach.
//!
//! Write paths of a run that does not keep the supervisor's ids (a root supervisor's, see
//! `namespaces.rs`) arrive as detached trees the zygote made (`open_tree`, then
//! `mount_setattr` with an id mapping: the path's owner on disk appears as the run's uid and
//! gid, and what the run creates there belongs on disk to that owner); they are attached
//! where the path is. A write path the zygote could not map (a file system without id-mapped
//! mounts) is bound as any other, and is then writable only as its permissions allow the
//! run's uid.
//!
//! Masked paths ([`Profile::mask`]) are covered last, once every bind is in place: a file by
//! an empty read-only file, a directory by an empty read-only tmpfs.

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::profile::{Profile, SYSTEM_RO};

/// The size cap of the fresh `/tmp`.
pub(crate) const TMP_BYTES: u64 = 256 * 1024 * 1024;

/// The device nodes bind-mounted into the minimal `/dev` (missing ones are skipped).
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

enum Entry {
    Bind {
        src: PathBuf,
        rw: bool,
    },
    /// A system path that is a symbolic link (`/bin` → `usr/bin`): recreated as a link.
    Link(PathBuf),
    /// A write path's id-mapped tree from the zygote (a detached mount), whether the path
    /// is a directory, and the path (bound as it is if the tree cannot be attached).
    Tree {
        fd: RawFd,
        dir: bool,
        src: PathBuf,
    },
    Tmp,
    Proc,
    Dev,
}

/// Builds the tree and moves into it. Returns why it could not. `proxy_dir` (outside) is
/// bound read-only at `/run/moat` (network allow-list); `trees` are id-mapped write paths
/// (index in `profile.rw`, detached mount).
pub(crate) fn build(
    profile: &Profile,
    proxy_dir: Option<&Path>,
    trees: &[(usize, RawFd)],
) -> Result<(), String> {
    let cwd = std::env::current_dir().ok();
    let (new, host) = match stage(profile, proxy_dir) {
        Some(stage) => {
            // The new root is a tmpfs over `stage`; the host's paths are where they are.
            mount(
                Some(c"tmpfs"),
                stage,
                Some(c"tmpfs"),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(c"mode=0755,size=1m"),
            )?;
            (stage, Path::new("/"))
        }
        None => {
            // A tmpfs on /tmp becomes the root for a moment; the old root is then /oldroot.
            mount(
                Some(c"tmpfs"),
                Path::new("/tmp"),
                Some(c"tmpfs"),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(c"mode=0755,size=64k"),
            )?;
            chdir(Path::new("/tmp"))?;
            for d in ["newroot", "oldroot"] {
                std::fs::create_dir(d).map_err(|e| format!("mkdir /tmp/{d}: {e}"))?;
            }
            pivot_root(c".", c"oldroot")?;
            chdir(Path::new("/"))?;
            let new = Path::new("/newroot");
            mount(
                Some(c"tmpfs"),
                new,
                Some(c"tmpfs"),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(c"mode=0755,size=1m"),
            )?;
            (new, Path::new("/oldroot"))
        }
    };

    for (dest, entry) in entries(profile, proxy_dir, host, trees) {
        let target = new.join(dest.strip_prefix("/").unwrap_or(&dest));
        match entry {
            // Already there when a profile path covers it (`--ro /`).
            Entry::Link(_) if std::fs::symlink_metadata(&target).is_ok() => {}
            Entry::Link(to) => {
                if let Some(parent) = target.parent()
                    && parent != new
                {
                    mkdir_p(parent)?;
                }
                std::os::unix::fs::symlink(&to, &target)
                    .map_err(|e| format!("symlink {}: {e}", dest.display()))?;
            }
            Entry::Bind { src, rw } => bind(&src, &target, rw).map_err(|e| {
                if proxy_dir.is_some() && dest == Path::new(crate::shim::SOCKET_DIR) {
                    format!(
                        "the proxy socket's directory at {}: {e} (does a read-only profile \
                         path cover /run?)",
                        crate::shim::SOCKET_DIR
                    )
                } else {
                    e
                }
            })?,
            Entry::Tree { fd, dir, src } => {
                if dir {
                    mkdir_p(&target)?;
                } else {
                    if let Some(parent) = target.parent() {
                        mkdir_p(parent)?;
                    }
                    if std::fs::symlink_metadata(&target).is_err() {
                        std::fs::File::create(&target)
                            .map_err(|e| format!("creating {}: {e}", target.display()))?;
                    }
                }
                if move_mount(fd, &target).is_err() {
                    bind(&src, &target, true)?;
                }
            }
            Entry::Tmp => {
                mkdir_p(&target)?;
                let data = CString::new(format!("mode=1777,size={TMP_BYTES}"))
                    .map_err(|e| e.to_string())?;
                mount(
                    Some(c"tmpfs"),
                    &target,
                    Some(c"tmpfs"),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    Some(&data),
                )?;
            }
            Entry::Proc => {
                mkdir_p(&target)?;
                mount(
                    Some(c"proc"),
                    &target,
                    Some(c"proc"),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    None,
                )?;
            }
            Entry::Dev => dev(&target, &host.join("dev"))?,
        }
    }
    mask(profile, new, host)?;
    // Nothing can be created in /dev or in the new root itself (profile paths below them
    // are mounted by now).
    mount(
        None,
        &new.join("dev"),
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC,
        None,
    )?;
    mount(
        None,
        new,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
        None,
    )?;
    if host != Path::new("/") {
        // SAFETY: umount2 with a NUL-terminated literal.
        if unsafe { libc::umount2(c"/oldroot".as_ptr(), libc::MNT_DETACH) } != 0 {
            return Err(format!(
                "detaching the old root: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    chdir(new)?;
    pivot_root(c".", c".")?;
    // SAFETY: as above; "." is now the old root (the host's, or the temporary one) stacked
    // over the new one.
    if unsafe { libc::umount2(c".".as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(format!(
            "detaching the old root: {}",
            std::io::Error::last_os_error()
        ));
    }
    chdir(Path::new("/"))?;
    // Stay in the caller's directory when it is inside the tree (else: `/`).
    if let Some(cwd) = cwd {
        let _ = chdir(&cwd);
    }
    Ok(())
}

/// Directories of the host the new root may be built over, in order of preference.
const STAGES: &[&str] = &[
    "/tmp", "/mnt", "/media", "/srv", "/var/tmp", "/home", "/root",
];

/// A directory of the host (not a symbolic link) that no bound path is in or above, so that
/// a tmpfs over it hides nothing the tree takes, and no recursive bind takes the tmpfs.
fn stage(profile: &Profile, proxy_dir: Option<&Path>) -> Option<&'static Path> {
    let proxy = match proxy_dir {
        Some(d) => Some(std::fs::canonicalize(d).ok()?),
        None => None,
    };
    let mut sources: Vec<&Path> = profile
        .ro
        .iter()
        .chain(&profile.rw)
        .map(|p| p.as_path())
        .collect();
    sources.extend(proxy.as_deref());
    if profile.system_ro {
        sources.extend(SYSTEM_RO.iter().map(Path::new));
    }
    sources.push(Path::new("/dev"));
    STAGES.iter().map(Path::new).find(|stage| {
        std::fs::symlink_metadata(stage).is_ok_and(|m| m.is_dir())
            && !sources
                .iter()
                .any(|s| s.starts_with(stage) || stage.starts_with(s))
    })
}

/// What to mount, shallow paths first so deeper ones land on top of them; the sources are
/// the host's paths as seen under `host` (`/`, or `/oldroot`).
fn entries(
    profile: &Profile,
    proxy_dir: Option<&Path>,
    host: &Path,
    trees: &[(usize, RawFd)],
) -> Vec<(PathBuf, Entry)> {
    let old = |p: &Path| host.join(p.strip_prefix("/").unwrap_or(p));
    let mut list: Vec<(PathBuf, Entry)> = vec![
        ("/tmp".into(), Entry::Tmp),
        ("/proc".into(), Entry::Proc),
        ("/dev".into(), Entry::Dev),
    ];
    if profile.system_ro {
        for p in SYSTEM_RO {
            let p = Path::new(p);
            if p.starts_with("/dev") || p.starts_with("/proc") {
                continue;
            }
            let src = old(p);
            match std::fs::symlink_metadata(&src) {
                Ok(m) if m.file_type().is_symlink() => {
                    if let Ok(to) = std::fs::read_link(&src) {
                        list.push((p.into(), Entry::Link(to)));
                    }
                }
                Ok(_) => list.push((p.into(), Entry::Bind { src, rw: false })),
                Err(_) => {}
            }
        }
    }
    for p in &profile.ro {
        list.push((
            p.clone(),
            Entry::Bind {
                src: old(p),
                rw: false,
            },
        ));
    }
    for (i, p) in profile.rw.iter().enumerate() {
        let src = old(p);
        let entry = match trees.iter().find(|(index, _)| *index == i) {
            Some(&(_, fd)) => Entry::Tree {
                fd,
                dir: std::fs::metadata(&src).is_ok_and(|m| m.is_dir()),
                src,
            },
            None => Entry::Bind { src, rw: true },
        };
        list.push((p.clone(), entry));
    }
    if let Some(dir) = proxy_dir {
        list.push((
            crate::shim::SOCKET_DIR.into(),
            Entry::Bind {
                src: old(dir),
                rw: false,
            },
        ));
    }
    list.sort_by_key(|(p, _)| p.components().count());
    list
}

/// Binds `src` on `target` (recursively), then makes it `nosuid`, `nodev` and, unless `rw`,
/// read-only, submounts included.
fn bind(src: &Path, target: &Path, rw: bool) -> Result<(), String> {
    let meta = std::fs::metadata(src).map_err(|e| format!("{}: {e}", src.display()))?;
    if meta.is_dir() {
        mkdir_p(target)?;
    } else {
        if let Some(parent) = target.parent() {
            mkdir_p(parent)?;
        }
        if std::fs::symlink_metadata(target).is_err() {
            std::fs::File::create(target)
                .map_err(|e| format!("creating {}: {e}", target.display()))?;
        }
    }
    mount(
        Some(&cpath(src)?),
        target,
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
    )?;
    let mut set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if !rw {
        set |= MOUNT_ATTR_RDONLY;
    }
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let t = cpath(target)?;
    // SAFETY: mount_setattr reads `attr` (of the size passed) and the NUL-terminated path.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            t.as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::ENOSYS) {
        return Err(format!("mount_setattr {}: {err}", target.display()));
    }
    // Before Linux 5.12: remount the top mount only, keeping the flags the kernel locks.
    let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOSUID | libc::MS_NODEV;
    if !rw {
        flags |= libc::MS_RDONLY;
    }
    let vfs = rustix::fs::statvfs(target).map_err(|e| format!("statvfs: {e}"))?;
    let f = vfs.f_flag;
    for (st, ms) in [
        (rustix::fs::StatVfsMountFlags::NOEXEC, libc::MS_NOEXEC),
        (rustix::fs::StatVfsMountFlags::NOATIME, libc::MS_NOATIME),
        (
            rustix::fs::StatVfsMountFlags::NODIRATIME,
            libc::MS_NODIRATIME,
        ),
        (rustix::fs::StatVfsMountFlags::RELATIME, libc::MS_RELATIME),
        (rustix::fs::StatVfsMountFlags::RDONLY, libc::MS_RDONLY),
    ] {
        if f.contains(st) {
            flags |= ms;
        }
    }
    mount(None, target, None, flags, None)
}

/// Attaches a detached mount (`open_tree`'s) at `target`.
fn move_mount(fd: RawFd, target: &Path) -> Result<(), String> {
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    let t = cpath(target)?;
    // SAFETY: move_mount reads two NUL-terminated paths; `fd` is the tree's descriptor.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd,
            c"".as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if rc != 0 {
        return Err(format!(
            "attaching the write path {}: {}",
            target.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The masked paths as the host has them: `*` in a last component expanded (by listing
/// the directory under `host`), symbolic links followed to where they lead.
fn masked_paths(profile: &Profile, host: &Path) -> Vec<PathBuf> {
    let old = |p: &Path| host.join(p.strip_prefix("/").unwrap_or(p));
    let mut out = Vec::new();
    for m in &profile.mask {
        let p = Path::new(m);
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        let candidates: Vec<PathBuf> = match (p.parent(), name) {
            (Some(parent), Some(name)) if name.contains('*') => {
                match std::fs::read_dir(old(parent)) {
                    Ok(dir) => dir
                        .flatten()
                        .filter(|e| glob(&name, &e.file_name().to_string_lossy()))
                        .map(|e| parent.join(e.file_name()))
                        .collect(),
                    Err(_) => Vec::new(),
                }
            }
            _ => vec![p.to_path_buf()],
        };
        for c in candidates {
            // Where a symbolic link leads, as a host path.
            let real = match std::fs::canonicalize(old(&c)) {
                Ok(r) => match r.strip_prefix(host) {
                    Ok(rel) => Path::new("/").join(rel),
                    Err(_) => continue,
                },
                Err(_) => continue,
            };
            if !out.contains(&real) {
                out.push(real);
            }
        }
    }
    out
}

/// `pattern` (with `*` for any run of characters) matches all of `name`.
fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Covers every masked path present in the new root (at `new`): a file by an empty
/// read-only file, a directory by an empty read-only tmpfs.
fn mask(profile: &Profile, new: &Path, host: &Path) -> Result<(), String> {
    let paths = masked_paths(profile, host);
    if paths.is_empty() {
        return Ok(());
    }
    // The empty file every masked file is bound to, in the fresh /dev (writable until the
    // end of `build`, whatever covers the root); unlinked once bound.
    let empty = new.join("dev/.moat-masked");
    let mut made = false;
    for p in paths {
        let target = new.join(p.strip_prefix("/").unwrap_or(&p));
        let Ok(meta) = std::fs::symlink_metadata(&target) else {
            continue;
        };
        let ro = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        if meta.is_dir() {
            mount(
                Some(c"tmpfs"),
                &target,
                Some(c"tmpfs"),
                ro,
                Some(c"mode=0755,size=4k"),
            )?;
            continue;
        }
        if !made {
            std::fs::File::create(&empty).map_err(|e| format!("masking {}: {e}", p.display()))?;
            made = true;
        }
        mount(Some(&cpath(&empty)?), &target, None, libc::MS_BIND, None)?;
        mount(
            None,
            &target,
            None,
            libc::MS_REMOUNT | libc::MS_BIND | ro,
            None,
        )?;
    }
    if made {
        std::fs::remove_file(&empty).map_err(|e| format!("masking: {e}"))?;
    }
    Ok(())
}

/// A tmpfs with the few device nodes of `host_dev` bound in (made read-only at the end of
/// [`build`]).
fn dev(target: &Path, host_dev: &Path) -> Result<(), String> {
    mkdir_p(target)?;
    mount(
        Some(c"tmpfs"),
        target,
        Some(c"tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some(c"mode=0755,size=64k"),
    )?;
    for d in DEVICES {
        let src = host_dev.join(d);
        if std::fs::metadata(&src).is_err() {
            continue;
        }
        let node = target.join(d);
        std::fs::File::create(&node).map_err(|e| format!("creating /dev/{d}: {e}"))?;
        mount(Some(&cpath(&src)?), &node, None, libc::MS_BIND, None)?;
    }
    for (name, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, target.join(name))
            .map_err(|e| format!("symlink /dev/{name}: {e}"))?;
    }
    Ok(())
}

fn mkdir_p(p: &Path) -> Result<(), String> {
    std::fs::create_dir_all(p).map_err(|e| format!("mkdir {}: {e}", p.display()))
}

fn cpath(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("{}: NUL in path", p.display()))
}

fn chdir(p: &Path) -> Result<(), String> {
    std::env::set_current_dir(p).map_err(|e| format!("chdir {}: {e}", p.display()))
}

fn pivot_root(new: &CStr, old: &CStr) -> Result<(), String> {
    // SAFETY: pivot_root reads two NUL-terminated paths.
    if unsafe { libc::syscall(libc::SYS_pivot_root, new.as_ptr(), old.as_ptr()) } != 0 {
        return Err(format!("pivot_root: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn mount(
    src: Option<&CStr>,
    target: &Path,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> Result<(), String> {
    let t = cpath(target)?;
    let ptr = |c: Option<&CStr>| c.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: every pointer is null or a NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            ptr(src),
            t.as_ptr(),
            ptr(fstype),
            flags,
            ptr(data).cast::<libc::c_void>(),
        )
    };
    if rc != 0 {
        return Err(format!(
            "mount {}: {}",
            target.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob("*_key", "ssh_host_ed25519_key"));
        assert!(!glob("*_key", "ssh_host_ed25519_key.pub"));
        assert!(glob("shadow", "shadow"));
        assert!(!glob("shadow", "shadow-"));
        assert!(glob("a*b*c", "aXXbYYc"));
        assert!(!glob("a*b*c", "aXXcYYb"));
        assert!(glob("*", ""));
        assert!(!glob("ab*ba", "aba"));
    }
}
