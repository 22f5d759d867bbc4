//! The root and every file operation beneath it, done on file descriptors.
//!
//! A path from a client never reaches a path-based system call. It is split into
//! components (`..` refused outright, absolute paths accepted only when they are spelled
//! under the canonical root), then opened from the root's directory descriptor with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: the kernel resolves it atomically and
//! refuses any step — a symlink, a `..` inside a link's target — that would leave the root.
//! Symlinks that stay inside the root are followed when reading and when crossing a
//! directory; the last component of anything that changes the tree (write, move, delete) is
//! never followed: it is acted on relative to its parent's descriptor with `O_NOFOLLOW`,
//! `renameat` or `unlinkat`, so a link there is replaced or removed, never written through.
//!
//! Where `openat2` is missing (`ENOSYS`, or refused by a seccomp filter), [`Root`] walks the
//! path itself one component at a time with `openat(O_NOFOLLOW)`, reading each symlink and
//! resolving its target against a stack of directory descriptors, with the same rules:
//! absolute targets and `..` above the root are refused. One race it cannot close, as
//! `openat2` does: a directory already opened being renamed out of the root mid-walk. That
//! needs write access outside the root, which the sandbox the server runs in denies.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

use super::{FsError, OpError};

/// How many symlinks one resolution may cross (the kernel's own limit).
const MAX_LINKS: usize = 40;
/// How deep a recursive delete may go before giving up (bounds the recursion).
const MAX_DEPTH: usize = 256;
/// How often `openat2` is retried when it answers `EAGAIN` (a rename raced the lookup).
const RETRIES: usize = 64;

/// What a directory entry is. `lstat` semantics: a symlink is reported as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (not followed).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl Kind {
    fn of(ft: FileType) -> Option<Kind> {
        Some(match ft {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Directory,
            FileType::Symlink => Kind::Symlink,
            FileType::Unknown => return None,
            _ => Kind::Other,
        })
    }
}

/// The facts of a `stat`, in portable types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meta {
    pub kind: Kind,
    pub size: u64,
    pub mode: u32,
    pub mtime: i64,
    pub mtime_nsec: i64,
    pub ino: u64,
    pub dev: u64,
    pub ctime: i64,
    pub ctime_nsec: i64,
}

// The field types of `struct stat` differ between architectures; the casts are the
// portable way to read them.
#[allow(clippy::unnecessary_cast)]
fn meta(st: &rfs::Stat) -> Meta {
    Meta {
        kind: Kind::of(FileType::from_raw_mode(st.st_mode as _)).unwrap_or(Kind::Other),
        size: st.st_size.max(0) as u64,
        mode: (st.st_mode as u32) & 0o7777,
        mtime: st.st_mtime as i64,
        mtime_nsec: st.st_mtime_nsec as i64,
        ino: st.st_ino as u64,
        dev: st.st_dev as u64,
        ctime: st.st_ctime as i64,
        ctime_nsec: st.st_ctime_nsec as i64,
    }
}

/// A path below the root, as components (no `.`, no `..`, no empty names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RelPath {
    comps: Vec<OsString>,
}

impl RelPath {
    /// The root itself.
    pub fn root() -> RelPath {
        RelPath { comps: Vec::new() }
    }

    pub fn is_root(&self) -> bool {
        self.comps.is_empty()
    }

    /// The path as clients see it: `a/b`, or `.` for the root.
    pub fn display(&self) -> String {
        if self.comps.is_empty() {
            return ".".to_owned();
        }
        let joined = self.joined();
        joined.to_string_lossy().into_owned()
    }

    fn joined(&self) -> OsString {
        let mut out = Vec::new();
        for (i, c) in self.comps.iter().enumerate() {
            if i > 0 {
                out.push(b'/');
            }
            out.extend_from_slice(c.as_bytes());
        }
        OsString::from_vec(out)
    }
}

/// The outcome of a read: bytes from the requested range, and the file's size.
pub(crate) struct ReadOut {
    pub bytes: Vec<u8>,
    pub size: u64,
}

/// One entry met by [`Root::walk`].
pub(crate) struct Entry {
    /// Its path from the root, `/`-separated.
    pub path: String,
    pub name: OsString,
    pub kind: Kind,
    /// For regular files.
    pub size: Option<u64>,
}

/// What [`Root::walk`] visits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WalkOptions {
    /// Descend into subdirectories (never through symlinks).
    pub recursive: bool,
    /// Include names starting with `.` (and descend into such directories).
    pub hidden: bool,
    /// Stop after looking at this many entries.
    pub max_visits: usize,
}

/// The root directory, held open.
#[derive(Debug)]
pub(crate) struct Root {
    dir: OwnedFd,
    path: PathBuf,
    /// Whether the kernel resolves for us (`openat2`); else the component walk.
    openat2: bool,
}

impl Root {
    /// Open `path` (which must be a directory) as the root.
    pub fn open(path: &Path) -> Result<Root, FsError> {
        let canonical = path.canonicalize().map_err(|source| FsError::Root {
            path: path.to_owned(),
            source,
        })?;
        let dir = rfs::open(
            &canonical,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::NOTDIR => FsError::NotADirectory(canonical.clone()),
            e => FsError::Root {
                path: canonical.clone(),
                source: e.into(),
            },
        })?;
        // Probe once: a kernel before 5.6, or a seccomp filter that refuses the call, makes
        // us walk instead.
        let openat2 = match rfs::openat2(
            &dir,
            ".",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(_) => true,
            Err(e) => {
                tracing::info!(error = %e, "openat2 unavailable; resolving paths component by component");
                false
            }
        };
        Ok(Root {
            dir,
            path: canonical,
            openat2,
        })
    }

    /// Use the component walk even where `openat2` exists (for tests of the fallback).
    #[cfg(test)]
    pub fn without_openat2(mut self) -> Root {
        self.openat2 = false;
        self
    }

    /// The canonical path of the root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Parse a client's path: relative to the root, or absolute and spelled under it.
    pub fn relative(&self, input: &str) -> Result<RelPath, OpError> {
        self.relative_os(OsStr::new(input), input)
    }

    /// As [`relative`](Self::relative), for a path that may not be UTF-8 (from a URI).
    pub fn relative_os(&self, input: &OsStr, shown: &str) -> Result<RelPath, OpError> {
        if input.as_bytes().contains(&0) {
            return Err(OpError::Invalid(format!(
                "`{shown}` contains a NUL byte; give a plain path"
            )));
        }
        let path = Path::new(input);
        let rest = if path.is_absolute() {
            // Lexically, by components: `/root/../x` keeps its `..` and is refused below.
            path.strip_prefix(&self.path)
                .map_err(|_| OpError::Outside {
                    path: shown.to_owned(),
                    root: self.path.clone(),
                })?
        } else {
            path
        };
        let mut comps = Vec::new();
        for c in rest.components() {
            match c {
                Component::Normal(name) => comps.push(name.to_owned()),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(OpError::DotDot {
                        path: shown.to_owned(),
                    });
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(OpError::Outside {
                        path: shown.to_owned(),
                        root: self.path.clone(),
                    });
                }
            }
        }
        Ok(RelPath { comps })
    }

    /// The absolute path of `rel` (for URIs and messages; never opened by path).
    pub fn absolute(&self, rel: &RelPath) -> PathBuf {
        let mut p = self.path.clone();
        for c in &rel.comps {
            p.push(c);
        }
        p
    }

    // -----------------------------------------------------------------------------------
    // Resolution

    /// Open `comps` beneath the root with `flags`, following symlinks that stay inside
    /// (the last component too, unless `flags` has `NOFOLLOW`).
    fn open_beneath(&self, comps: &[OsString], flags: OFlags) -> Result<OwnedFd, Errno> {
        let flags = flags | OFlags::CLOEXEC;
        if !self.openat2 {
            return self.walk_open(comps, flags);
        }
        let joined = if comps.is_empty() {
            OsString::from(".")
        } else {
            RelPath {
                comps: comps.to_vec(),
            }
            .joined()
        };
        let mut tries = 0;
        loop {
            match rfs::openat2(
                &self.dir,
                joined.as_os_str(),
                flags,
                Mode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            ) {
                // The kernel answers EAGAIN when a rename elsewhere might have let the
                // lookup escape; trying again is what it asks for.
                Err(Errno::AGAIN) if tries < RETRIES => tries += 1,
                other => return other,
            }
        }
    }

    /// The fallback resolver: one `openat(O_NOFOLLOW)` per component, symlinks read and
    /// resolved by hand against a stack of the directories walked so far.
    fn walk_open(&self, comps: &[OsString], flags: OFlags) -> Result<OwnedFd, Errno> {
        let follow_last = !flags.contains(OFlags::NOFOLLOW);
        let mut stack: Vec<OwnedFd> = Vec::new();
        let mut queue: VecDeque<OsString> = comps.iter().cloned().collect();
        let mut links = 0;
        while let Some(name) = queue.pop_front() {
            let bytes = name.as_bytes();
            if bytes.is_empty() || bytes == b"." {
                continue;
            }
            if bytes == b".." {
                // Above the root is out, exactly as RESOLVE_BENEATH has it.
                if stack.pop().is_none() {
                    return Err(Errno::XDEV);
                }
                continue;
            }
            let cur = stack.last().map_or(self.dir.as_fd(), |d| d.as_fd());
            let last = queue.is_empty();
            let opened = if last {
                rfs::openat(cur, &name, flags | OFlags::NOFOLLOW, Mode::empty())
            } else {
                rfs::openat(
                    cur,
                    &name,
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            };
            let is_link = match &opened {
                // O_PATH|O_NOFOLLOW opens a link itself; look at what we got.
                Ok(fd) if last && flags.contains(OFlags::PATH) => {
                    rfs::fstat(fd).map(|st| meta(&st).kind == Kind::Symlink)?
                }
                Ok(_) => false,
                Err(Errno::LOOP) => true,
                // O_DIRECTORY|O_NOFOLLOW on a link answers ENOTDIR, before ELOOP.
                Err(Errno::NOTDIR) => is_symlink_at(cur, &name),
                Err(_) => false,
            };
            if is_link && (follow_last || !last) {
                links += 1;
                if links > MAX_LINKS {
                    return Err(Errno::LOOP);
                }
                let target = rfs::readlinkat(cur, &name, Vec::new())?;
                let target = target.as_bytes();
                if target.first() == Some(&b'/') {
                    return Err(Errno::XDEV);
                }
                for part in target.split(|&b| b == b'/').rev() {
                    queue.push_front(OsString::from_vec(part.to_vec()));
                }
                continue;
            }
            if is_link {
                return Err(Errno::LOOP);
            }
            let fd = opened?;
            if last {
                return Ok(fd);
            }
            stack.push(fd);
        }
        // The path ended on `.` or `..` (inside a link's target), or was empty: open the
        // directory we stand in.
        let cur = stack.last().map_or(self.dir.as_fd(), |d| d.as_fd());
        rfs::openat(cur, ".", flags, Mode::empty())
    }

    /// The parent directory of `rel`, opened, and `rel`'s last component.
    fn parent<'a>(
        &self,
        rel: &'a RelPath,
        shown: &str,
        what: &'static str,
    ) -> Result<(OwnedFd, &'a OsStr), OpError> {
        let Some((name, dirs)) = rel.comps.split_last() else {
            return Err(OpError::RootItself {
                path: shown.to_owned(),
                what,
            });
        };
        let dir = self
            .open_beneath(dirs, OFlags::PATH | OFlags::DIRECTORY)
            .map_err(|e| OpError::from_errno(e, shown))?;
        Ok((dir, name.as_os_str()))
    }

    /// The parent of `rel`, creating missing directories (each new one opened with
    /// `O_NOFOLLOW`, so a link raced into its place is not followed).
    fn parent_creating<'a>(
        &self,
        rel: &'a RelPath,
        shown: &str,
        what: &'static str,
    ) -> Result<(OwnedFd, &'a OsStr), OpError> {
        let Some((name, dirs)) = rel.comps.split_last() else {
            return Err(OpError::RootItself {
                path: shown.to_owned(),
                what,
            });
        };
        let err = |e| OpError::from_errno(e, shown);
        let mut have = dirs.len();
        let mut dir = loop {
            match self.open_beneath(&dirs[..have], OFlags::PATH | OFlags::DIRECTORY) {
                Ok(fd) => break fd,
                Err(Errno::NOENT) if have > 0 => have -= 1,
                Err(e) => return Err(err(e)),
            }
        };
        for c in &dirs[have..] {
            match rfs::mkdirat(&dir, c, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(err(e)),
            }
            dir = rfs::openat(
                &dir,
                c,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(err)?;
        }
        Ok((dir, name.as_os_str()))
    }

    // -----------------------------------------------------------------------------------
    // Operations

    /// Open a regular file for reading (symlinks inside the root followed).
    pub fn open_file(&self, rel: &RelPath, shown: &str) -> Result<(File, Meta), OpError> {
        // NONBLOCK: opening a FIFO must not hang the server; it is refused just below.
        let fd = self
            .open_beneath(
                &rel.comps,
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
            )
            .map_err(|e| OpError::from_errno(e, shown))?;
        let m = rfs::fstat(&fd)
            .map(|st| meta(&st))
            .map_err(|e| OpError::from_errno(e, shown))?;
        match m.kind {
            Kind::File => Ok((File::from(fd), m)),
            Kind::Directory => Err(OpError::IsDir {
                path: shown.to_owned(),
            }),
            _ => Err(OpError::NotRegular {
                path: shown.to_owned(),
            }),
        }
    }

    /// Read up to `len` bytes from `offset`.
    pub fn read(
        &self,
        rel: &RelPath,
        shown: &str,
        offset: u64,
        len: u64,
    ) -> Result<ReadOut, OpError> {
        let (file, m) = self.open_file(rel, shown)?;
        let want = len.min(m.size.saturating_sub(offset));
        let mut bytes = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
        let mut at = offset;
        let mut buf = vec![0u8; 64 * 1024];
        // Read to the requested length or EOF, whichever comes first: the size from fstat
        // may be stale by the time we read.
        while (bytes.len() as u64) < len {
            let room = (len - bytes.len() as u64).min(buf.len() as u64) as usize;
            let n = file
                .read_at(&mut buf[..room], at)
                .map_err(|e| OpError::io(shown, e))?;
            if n == 0 {
                break;
            }
            bytes.extend_from_slice(&buf[..n]);
            at += n as u64;
        }
        // A file that grew since the fstat is as long as what we read of it.
        let size = if bytes.is_empty() {
            m.size
        } else {
            m.size.max(at)
        };
        Ok(ReadOut { size, bytes })
    }

    /// `lstat` of `rel`, and the link's target if it is a symlink.
    pub fn stat(&self, rel: &RelPath, shown: &str) -> Result<(Meta, Option<String>), OpError> {
        let err = |e| OpError::from_errno(e, shown);
        if rel.is_root() {
            return Ok((
                rfs::fstat(&self.dir).map(|st| meta(&st)).map_err(err)?,
                None,
            ));
        }
        let (dir, name) = self.parent(rel, shown, "examined")?;
        let m = rfs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map(|st| meta(&st))
            .map_err(err)?;
        let target = if m.kind == Kind::Symlink {
            rfs::readlinkat(&dir, name, Vec::new())
                .ok()
                .map(|t| t.to_string_lossy().into_owned())
        } else {
            None
        };
        Ok((m, target))
    }

    /// A fingerprint of the file at `rel` (links inside the root followed), or `None` if
    /// it cannot be opened: what the watcher compares.
    pub fn fingerprint(&self, rel: &RelPath) -> Option<Meta> {
        let fd = self.open_beneath(&rel.comps, OFlags::PATH).ok()?;
        rfs::fstat(&fd).ok().map(|st| meta(&st))
    }

    /// Write `content` to `rel`; returns whether the file was created.
    pub fn write(
        &self,
        rel: &RelPath,
        shown: &str,
        content: &[u8],
        create_dirs: bool,
        overwrite: bool,
    ) -> Result<bool, OpError> {
        let (dir, name) = if create_dirs {
            self.parent_creating(rel, shown, "written")?
        } else {
            self.parent(rel, shown, "written").map_err(|e| match e {
                OpError::NotFound { path } => OpError::NoParent { path },
                e => e,
            })?
        };
        let err = |e| OpError::from_errno(e, shown);
        // NOFOLLOW: a symlink as the last component is refused (ELOOP), never written
        // through; NONBLOCK: a FIFO does not hang us (refused below). Not O_TRUNC: nothing
        // is cut before we know it is a regular file.
        let base = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
        let mode = Mode::from_raw_mode(0o644);
        let (fd, created) = match rfs::openat(
            &dir,
            name,
            base | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            mode,
        ) {
            Ok(fd) => (fd, true),
            Err(Errno::EXIST) if overwrite => {
                let fd =
                    rfs::openat(&dir, name, base | OFlags::CLOEXEC, Mode::empty()).map_err(err)?;
                (fd, false)
            }
            Err(e) => return Err(err(e)),
        };
        let m = rfs::fstat(&fd).map(|st| meta(&st)).map_err(err)?;
        if m.kind != Kind::File {
            return Err(OpError::NotRegular {
                path: shown.to_owned(),
            });
        }
        // Back to blocking writes on a regular file.
        rfs::fcntl_setfl(&fd, OFlags::empty()).map_err(err)?;
        let mut file = File::from(fd);
        file.set_len(0).map_err(|e| OpError::io(shown, e))?;
        file.write_all(content).map_err(|e| OpError::io(shown, e))?;
        Ok(created)
    }

    /// Rename `from` to `to` (both beneath the root; neither last component followed).
    pub fn rename(
        &self,
        from: &RelPath,
        from_shown: &str,
        to: &RelPath,
        to_shown: &str,
        overwrite: bool,
        create_dirs: bool,
    ) -> Result<(), OpError> {
        let (src_dir, src_name) = self.parent(from, from_shown, "moved")?;
        // The source must exist before anything is created for the destination.
        rfs::statat(&src_dir, src_name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| OpError::from_errno(e, from_shown))?;
        let (dst_dir, dst_name) = if create_dirs {
            self.parent_creating(to, to_shown, "replaced")?
        } else {
            self.parent(to, to_shown, "replaced").map_err(|e| match e {
                OpError::NotFound { path } => OpError::NoParent { path },
                e => e,
            })?
        };
        let flags = if overwrite {
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        rfs::renameat_with(&src_dir, src_name, &dst_dir, dst_name, flags).map_err(|e| match e {
            Errno::EXIST | Errno::NOTEMPTY => OpError::Exists {
                path: to_shown.to_owned(),
            },
            Errno::XDEV => OpError::Invalid(format!(
                "`{from_shown}` and `{to_shown}` are on different filesystems; copy with \
                 read_file and write_file, then delete_file the original"
            )),
            Errno::INVAL => OpError::Invalid(format!(
                "cannot move `{from_shown}` to `{to_shown}` (into itself?)"
            )),
            Errno::NOENT => OpError::NotFound {
                path: from_shown.to_owned(),
            },
            e => OpError::from_errno(e, from_shown),
        })
    }

    /// Delete `rel`: a file or link (the link itself), or a directory tree when
    /// `recursive`. Returns how many entries were removed.
    pub fn remove(&self, rel: &RelPath, shown: &str, recursive: bool) -> Result<u64, OpError> {
        let (dir, name) = self.parent(rel, shown, "deleted")?;
        let err = |e| OpError::from_errno(e, shown);
        let m = rfs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map(|st| meta(&st))
            .map_err(err)?;
        if m.kind == Kind::Directory {
            if !recursive {
                return Err(OpError::Invalid(format!(
                    "`{shown}` is a directory; pass recursive=true to delete it and everything in it"
                )));
            }
            return remove_tree(dir.as_fd(), name, 0).map_err(err);
        }
        rfs::unlinkat(&dir, name, AtFlags::empty()).map_err(err)?;
        Ok(1)
    }

    /// Visit the entries under directory `start` breadth-first, sorted by name within each
    /// directory, never entering symlinks. `visit` gets the entry's directory and the entry,
    /// and returns `false` to stop. Returns whether the walk finished (not stopped or capped).
    pub fn walk(
        &self,
        start: &RelPath,
        shown: &str,
        options: WalkOptions,
        mut visit: impl FnMut(BorrowedFd<'_>, &Entry) -> bool,
    ) -> Result<bool, OpError> {
        let first = self
            .open_beneath(&start.comps, OFlags::RDONLY | OFlags::DIRECTORY)
            .map_err(|e| match e {
                Errno::NOTDIR => OpError::NotDir {
                    path: shown.to_owned(),
                },
                e => OpError::from_errno(e, shown),
            })?;
        let prefix = if start.is_root() {
            String::new()
        } else {
            format!("{}/", start.display())
        };
        let mut queue = VecDeque::from([(first, prefix)]);
        let mut visits = 0usize;
        while let Some((dir, prefix)) = queue.pop_front() {
            let Ok(reader) = rfs::Dir::read_from(&dir) else {
                continue;
            };
            let mut names: Vec<(OsString, FileType)> = reader
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = OsStr::from_bytes(e.file_name().to_bytes());
                    let skip = name == "."
                        || name == ".."
                        || (!options.hidden && name.as_bytes().first() == Some(&b'.'));
                    (!skip).then(|| (name.to_owned(), e.file_type()))
                })
                // Bounds memory on a huge directory; the walk stops at this count anyway.
                .take(options.max_visits.saturating_add(1))
                .collect();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, ft) in names {
                visits += 1;
                if visits > options.max_visits {
                    return Ok(false);
                }
                let st = rfs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW)
                    .ok()
                    .map(|st| meta(&st));
                let kind = st
                    .map(|m| m.kind)
                    .or_else(|| Kind::of(ft))
                    .unwrap_or(Kind::Other);
                let entry = Entry {
                    path: format!("{prefix}{}", name.to_string_lossy()),
                    size: st.filter(|m| m.kind == Kind::File).map(|m| m.size),
                    name,
                    kind,
                };
                if !visit(dir.as_fd(), &entry) {
                    return Ok(false);
                }
                if options.recursive && kind == Kind::Directory {
                    // NOFOLLOW: a directory swapped for a link after the stat is not entered.
                    if let Ok(sub) = rfs::openat(
                        &dir,
                        &entry.name,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    ) {
                        queue.push_back((sub, format!("{}/", entry.path)));
                    }
                }
            }
        }
        Ok(true)
    }
}

/// Open the regular file `name` in `dir` for reading, without following a link.
pub(crate) fn open_entry(dir: BorrowedFd<'_>, name: &OsStr) -> Option<File> {
    let fd = rfs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let m = rfs::fstat(&fd).ok().map(|st| meta(&st))?;
    (m.kind == Kind::File).then(|| File::from(fd))
}

/// Read at most `cap` bytes of `file`.
pub(crate) fn read_capped(file: File, cap: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    file.take(cap).read_to_end(&mut out)?;
    Ok(out)
}

fn is_symlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| meta(&st).kind == Kind::Symlink)
}

/// Remove the directory `name` in `parent` and everything in it, without following links.
fn remove_tree(parent: BorrowedFd<'_>, name: &OsStr, depth: usize) -> Result<u64, Errno> {
    if depth > MAX_DEPTH {
        return Err(Errno::LOOP);
    }
    let dir = rfs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let entries: Vec<(OsString, FileType)> = rfs::Dir::read_from(&dir)?
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name().to_bytes();
            n != b"." && n != b".."
        })
        .map(|e| {
            (
                OsStr::from_bytes(e.file_name().to_bytes()).to_owned(),
                e.file_type(),
            )
        })
        .collect();
    let mut removed = 0;
    for (entry, ft) in entries {
        let is_dir = match Kind::of(ft) {
            Some(k) => k == Kind::Directory,
            None => rfs::statat(&dir, &entry, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| meta(&st).kind == Kind::Directory),
        };
        if is_dir {
            removed += remove_tree(dir.as_fd(), &entry, depth + 1)?;
        } else {
            rfs::unlinkat(&dir, &entry, AtFlags::empty())?;
            removed += 1;
        }
    }
    rfs::unlinkat(parent, name, AtFlags::REMOVEDIR)?;
    Ok(removed + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        std::fs::write(tmp.path().join("outside/secret"), "SECRET").unwrap();
        std::fs::write(root.join("sub/deeper/f.txt"), "inside").unwrap();
        symlink("../outside/secret", root.join("rel_out")).unwrap();
        symlink(tmp.path().join("outside/secret"), root.join("abs_out")).unwrap();
        symlink("../outside", root.join("dir_out")).unwrap();
        symlink("sub/deeper/f.txt", root.join("in")).unwrap();
        symlink("../sub/deeper", root.join("sub/up_and_down")).unwrap();
        symlink("..", root.join("sub/dotdot")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        (tmp, root)
    }

    fn read(root: &Root, p: &str) -> Result<Vec<u8>, OpError> {
        let rel = root.relative(p)?;
        root.read(&rel, p, 0, 1 << 20).map(|r| r.bytes)
    }

    fn both(root: &Path) -> [Root; 2] {
        [
            Root::open(root).unwrap(),
            Root::open(root).unwrap().without_openat2(),
        ]
    }

    #[test]
    fn symlinks_inside_are_followed_by_both_resolvers() {
        let (_tmp, root) = setup();
        for r in both(&root) {
            assert_eq!(read(&r, "in").unwrap(), b"inside");
            assert_eq!(read(&r, "sub/up_and_down/f.txt").unwrap(), b"inside");
            assert_eq!(read(&r, "sub/dotdot/in").unwrap(), b"inside");
        }
    }

    #[test]
    fn escapes_are_refused_by_both_resolvers() {
        let (_tmp, root) = setup();
        for r in both(&root) {
            for p in [
                "rel_out",
                "abs_out",
                "dir_out/secret",
                "sub/dotdot/dir_out/secret",
            ] {
                let e = read(&r, p).unwrap_err();
                assert!(matches!(e, OpError::Escape { .. }), "{p}: {e}");
            }
            assert!(matches!(read(&r, "loop"), Err(OpError::Symlink { .. })));
            let rel = r.relative("dir_out/x").unwrap();
            assert!(r.write(&rel, "dir_out/x", b"x", false, true).is_err());
            assert!(r.write(&rel, "dir_out/x", b"x", true, true).is_err());
        }
        assert!(!root.parent().unwrap().join("outside/x").exists());
    }

    #[test]
    fn the_fallback_follows_a_dotdot_link_target_only_while_inside() {
        let (_tmp, root) = setup();
        symlink("../..", root.join("sub/twoup")).unwrap();
        for r in both(&root) {
            let e = read(&r, "sub/twoup/outside/secret").unwrap_err();
            assert!(matches!(e, OpError::Escape { .. }), "{e}");
        }
    }

    #[test]
    fn paths_are_parsed_strictly() {
        let (_tmp, root) = setup();
        let r = Root::open(&root).unwrap();
        assert!(matches!(r.relative("../x"), Err(OpError::DotDot { .. })));
        assert!(matches!(r.relative("a/../b"), Err(OpError::DotDot { .. })));
        assert!(matches!(
            r.relative("/etc/passwd"),
            Err(OpError::Outside { .. })
        ));
        let inside = format!("{}/sub/./deeper/f.txt", r.path().display());
        assert_eq!(r.relative(&inside).unwrap().display(), "sub/deeper/f.txt");
        assert!(r.relative(".").unwrap().is_root());
        assert!(r.relative("").unwrap().is_root());
    }
}
