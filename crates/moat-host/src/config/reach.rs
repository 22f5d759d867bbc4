//! What a command server's command line names, for its sandbox.
//!
//! A Claude Desktop, Cursor or VS Code file was written for a client that runs its servers
//! with the user's full rights; it says nothing about what a server may touch, and a
//! `[servers.NAME]` table in moat.toml should not have to spell out where a virtualenv's
//! Python or an `npx` package lives. What both do say is on the command line: the program,
//! the script it runs, and the folders it is to work on. So a command server's default
//! profile (imported, or written in moat.toml) also gets, before the user's own `sandbox`
//! table (whose `ro` and `rw` add to these):
//!
//! - **the program's installation**, read-only: the program found on `PATH` (symlinks
//!   followed, and the link's own place too: a virtualenv's `bin/python` links to the
//!   interpreter it was made from), as the directory above its `bin/`, or its own directory;
//! - **each file the arguments name**, read-only, with the package it belongs to: the
//!   outermost `node_modules` above it, else its directory;
//! - **each directory the arguments name**, read-write: the folders a filesystem or git
//!   server is told to work on are what the user meant it to change.
//!
//! Arguments count when they are absolute paths, or `--flag=/path`, that exist when the
//! configuration is loaded; every check is made on the real path (symbolic links resolved).
//! Never added, to either list: `/` and the top-level directories (`/home`, `/tmp`, `/var`…),
//! the system directories (`/usr`, `/etc`…, read-only in every profile), the kernel's and the
//! session's (`/proc`, `/sys`, `/dev`, `/run`: sockets to other services live there), and the
//! home directory or anything above it — a program or script that sits directly in one of
//! those gets just its own file. Never read-write, only read-only: a directory holding a
//! configuration file the gateway loaded (the moat.toml, the files it imports, the JSON
//! file itself: a server could otherwise rewrite what it is allowed, and the gateway
//! reloads on change). Nothing is opened up for the network. Anything more (an `npx`
//! cache, a database file to write) goes in the server's `sandbox` table.

use std::path::{Path, PathBuf};

use moat_sandbox::Profile;

use super::server::{SandboxSetting, ServerConfig, ServerTransport};
use super::source::Lookup;

/// Where a server's command line may not widen its sandbox (see the module docs).
pub(crate) struct Limits {
    /// The user's home directory, symbolic links resolved.
    home: Option<PathBuf>,
    /// Files a server must not be able to change: the configuration it was loaded from.
    protected: Vec<PathBuf>,
}

impl Limits {
    pub(crate) fn new(home: Option<&Path>, protected: &[&Path]) -> Self {
        Limits {
            home: home.and_then(|h| h.canonicalize().ok()),
            protected: protected
                .iter()
                .filter_map(|p| p.canonicalize().ok())
                .collect(),
        }
    }

    /// Whether `path` (real) may be given to a server at all.
    fn allows(&self, path: &Path) -> bool {
        const KERNEL_AND_SESSION: &[&str] = &["/proc", "/sys", "/dev", "/run", "/var/run"];
        let depth = path.components().count(); // `/` counts as one
        depth > 2
            && !Profile::is_system_path(path)
            && !KERNEL_AND_SESSION.iter().any(|k| path.starts_with(k))
            && !self
                .home
                .as_ref()
                .is_some_and(|home| home.starts_with(path))
    }

    /// Whether `dir` (real) may be given read-write.
    fn allows_writing(&self, dir: &Path) -> bool {
        self.allows(dir) && !self.holds_protected(dir)
    }

    /// Whether `dir` holds a file a server must not change.
    fn holds_protected(&self, dir: &Path) -> bool {
        self.protected.iter().any(|p| p.starts_with(dir))
    }
}

/// Widens a sandboxed command server's profile by what its command line names ([`widen`]):
/// the program is looked up on the `PATH` it runs with (its `env`'s, else `lookup`'s), the
/// home directory is `lookup`'s `HOME`, and `protected` are the configuration files it was
/// loaded from. A URL server, or one with `sandbox = false`, is left as it is.
pub(crate) fn widen_server(server: &mut ServerConfig, lookup: Lookup<'_>, protected: &[&Path]) {
    let (
        ServerTransport::Command {
            command, args, env, ..
        },
        SandboxSetting::Profile(profile),
    ) = (&server.transport, &mut server.sandbox)
    else {
        return;
    };
    let path_var = env.get("PATH").cloned().or_else(|| lookup("PATH"));
    let home = lookup("HOME").map(PathBuf::from);
    let limits = Limits::new(home.as_deref(), protected);
    widen(profile, command, args, path_var.as_deref(), &limits);
}

/// Makes read-only each read-write directory of `server`'s profile that holds one of
/// `protected`: for a server widened before the configuration that loaded it was known (an
/// imported one, whose file did not know the moat.toml importing it).
pub(crate) fn protect(server: &mut ServerConfig, protected: &[&Path]) {
    let SandboxSetting::Profile(profile) = &mut server.sandbox else {
        return;
    };
    let limits = Limits::new(None, protected);
    let (held, kept) = std::mem::take(&mut profile.rw)
        .into_iter()
        .partition(|dir: &PathBuf| {
            dir.canonicalize()
                .is_ok_and(|real| limits.holds_protected(&real))
        });
    profile.rw = kept;
    for dir in held {
        add(&mut profile.ro, dir);
    }
}

/// Widens `profile` by what `command` and `args` name (see the module docs). `path_var` is
/// the `PATH` the program is looked up in.
pub(crate) fn widen(
    profile: &mut Profile,
    command: &str,
    args: &[String],
    path_var: Option<&str>,
    limits: &Limits,
) {
    for program in program_paths(command, path_var) {
        let candidates = [
            installation(&program, limits),
            program.parent().map(Path::to_path_buf),
            Some(program.clone()),
        ];
        add_first_allowed(&mut profile.ro, candidates.into_iter().flatten(), limits);
    }
    for arg in args {
        let Some(path) = named_path(arg) else {
            continue;
        };
        let Ok(real) = path.canonicalize() else {
            continue;
        };
        if real.is_dir() {
            if limits.allows_writing(&real) {
                add(&mut profile.rw, real);
            } else if limits.allows(&real) {
                add(&mut profile.ro, real);
            }
        } else {
            let candidates = [
                Some(package_of(&real)),
                real.parent().map(Path::to_path_buf),
                Some(real.clone()),
            ];
            add_first_allowed(&mut profile.ro, candidates.into_iter().flatten(), limits);
        }
    }
}

/// Adds the first of `candidates` (widest first) that `limits` allows.
fn add_first_allowed(
    list: &mut Vec<PathBuf>,
    candidates: impl Iterator<Item = PathBuf>,
    limits: &Limits,
) {
    if let Some(path) = candidates.into_iter().find(|p| limits.allows(p)) {
        add(list, path);
    }
}

/// The path an argument names: itself, or the value of `--flag=VALUE`, when absolute.
fn named_path(arg: &str) -> Option<&Path> {
    let value = match arg.split_once('=') {
        Some((flag, value)) if flag.starts_with('-') => value,
        _ => arg,
    };
    let path = Path::new(value);
    path.is_absolute().then_some(path)
}

/// Where `command` runs from, real paths: the program found (as written, or on `PATH`) and,
/// if that is a symbolic link, where it leads.
fn program_paths(command: &str, path_var: Option<&str>) -> Vec<PathBuf> {
    let found = if command.contains('/') {
        let path = PathBuf::from(command);
        path.is_absolute().then_some(path)
    } else {
        path_var.and_then(|dirs| {
            std::env::split_paths(dirs)
                .filter(|dir| dir.is_absolute())
                .map(|dir| dir.join(command))
                .find(|candidate| candidate.is_file())
        })
    };
    let Some(found) = found else {
        return Vec::new();
    };
    let mut paths = Vec::new();
    // The link itself, in its real directory (a venv's `bin/python`).
    if let (Some(dir), Some(name)) = (found.parent(), found.file_name())
        && let Ok(dir) = dir.canonicalize()
    {
        paths.push(dir.join(name));
    }
    if let Ok(real) = found.canonicalize()
        && !paths.contains(&real)
    {
        paths.push(real);
    }
    paths
}

/// The directory a program is installed in: the one above its `bin/`, unless that is
/// directly in the home directory (`~/.local`, `~/.cargo` hold more than programs:
/// keyrings, registry tokens); else none (its own directory is tried next).
fn installation(program: &Path, limits: &Limits) -> Option<PathBuf> {
    let dir = program.parent()?;
    if dir.file_name()? != "bin" {
        return None;
    }
    let prefix = dir.parent()?;
    if limits
        .home
        .as_deref()
        .is_some_and(|home| prefix.parent() == Some(home))
    {
        return None;
    }
    Some(prefix.to_path_buf())
}

/// The package a file belongs to: the outermost `node_modules` above it (its dependencies
/// are installed beside it there), else its directory.
fn package_of(file: &Path) -> PathBuf {
    file.ancestors()
        .filter(|dir| dir.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .or_else(|| file.parent())
        .unwrap_or(file)
        .to_path_buf()
}

/// Adds `path` unless it, or a directory above it, is there already.
fn add(list: &mut Vec<PathBuf>, path: PathBuf) {
    if list.iter().any(|have| path.starts_with(have)) {
        return;
    }
    list.retain(|have| !have.starts_with(&path));
    list.push(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> Profile {
        Profile {
            ro: vec![PathBuf::from("/configs")],
            ..Profile::default()
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A scratch directory, real path (tests compare with canonical paths).
    fn scratch() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        (dir, real)
    }

    fn file(path: &Path) -> &Path {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
        path
    }

    fn no_limits() -> Limits {
        Limits::new(None, &[])
    }

    #[test]
    fn a_node_server_gets_its_packages_and_its_folder() {
        let (_t, root) = scratch();
        let script = root.join("app/node_modules/@scope/server/dist/index.js");
        file(&script);
        let folder = root.join("Desktop");
        std::fs::create_dir(&folder).unwrap();
        let mut p = profile();
        let args = strings(&[script.to_str().unwrap(), folder.to_str().unwrap()]);
        widen(&mut p, "/usr/bin/env", &args, None, &no_limits());
        assert!(p.ro.contains(&root.join("app/node_modules")), "{:?}", p.ro);
        assert!(
            !p.ro.iter().any(|d| d.starts_with("/usr")),
            "system paths are there already: {:?}",
            p.ro
        );
        assert_eq!(p.rw, vec![folder]);
    }

    #[test]
    fn flags_with_paths_count_and_missing_or_relative_paths_do_not() {
        let (_t, root) = scratch();
        let repo = root.join("repo");
        std::fs::create_dir(&repo).unwrap();
        let mut p = profile();
        let args = strings(&[
            &format!("--repository={}", repo.display()),
            "relative/dir",
            "/does/not/exist",
            "--verbose",
        ]);
        widen(&mut p, "server", &args, None, &no_limits());
        assert_eq!(p.rw, vec![repo]);
        assert_eq!(p.ro, vec![PathBuf::from("/configs")]);
    }

    #[test]
    fn a_program_on_path_brings_its_installation() {
        let (_t, root) = scratch();
        let bin = root.join("tools/node22/bin");
        file(&bin.join("node"));
        let mut p = profile();
        let path_var = format!("/nonexistent:{}", bin.display());
        widen(&mut p, "node", &[], Some(&path_var), &no_limits());
        assert!(p.ro.contains(&root.join("tools/node22")), "{:?}", p.ro);
    }

    #[test]
    fn a_link_brings_both_ends() {
        let (_t, root) = scratch();
        let real = root.join("python/3.11/bin/python3.11");
        file(&real);
        let venv_bin = root.join("project/.venv/bin");
        std::fs::create_dir_all(&venv_bin).unwrap();
        std::os::unix::fs::symlink(&real, venv_bin.join("python")).unwrap();
        let mut p = profile();
        let command = venv_bin.join("python");
        widen(&mut p, command.to_str().unwrap(), &[], None, &no_limits());
        assert!(p.ro.contains(&root.join("project/.venv")), "{:?}", p.ro);
        assert!(p.ro.contains(&root.join("python/3.11")), "{:?}", p.ro);
    }

    #[test]
    fn never_the_home_directory_or_above_it() {
        let (_t, home) = scratch();
        let limits = Limits::new(Some(&home), &[]);
        let mut p = profile();
        // ~/bin/tool: the home is above bin/, so just ~/bin.
        let bin = home.join("bin");
        file(&bin.join("tool"));
        widen(&mut p, "tool", &[], Some(bin.to_str().unwrap()), &limits);
        // ~/.cargo/bin/server: ~/.cargo holds a registry token, so just its bin/.
        let cargo_bin = home.join(".cargo/bin");
        file(&cargo_bin.join("server"));
        widen(
            &mut p,
            "server",
            &[],
            Some(cargo_bin.to_str().unwrap()),
            &limits,
        );
        // A script and a program directly in the home: just those files.
        let script = home.join("server.py");
        file(&script);
        let program = home.join("server");
        file(&program);
        let args = strings(&[script.to_str().unwrap(), home.to_str().unwrap()]);
        widen(&mut p, program.to_str().unwrap(), &args, None, &limits);
        assert!(p.ro.contains(&bin), "{:?}", p.ro);
        assert!(p.ro.contains(&cargo_bin), "{:?}", p.ro);
        assert!(p.ro.contains(&script), "{:?}", p.ro);
        assert!(p.ro.contains(&program), "{:?}", p.ro);
        assert!(!p.ro.iter().any(|d| home.starts_with(d)), "{:?}", p.ro);
        assert!(!p.ro.contains(&home.join(".cargo")), "{:?}", p.ro);
        assert!(
            p.rw.is_empty(),
            "the home must never be writable: {:?}",
            p.rw
        );
    }

    #[test]
    fn a_home_reached_through_a_link_is_still_the_home() {
        let (_t, root) = scratch();
        let real_home = root.join("real-home");
        file(&real_home.join("bin/tool"));
        let link = root.join("home-link");
        std::os::unix::fs::symlink(&real_home, &link).unwrap();
        let limits = Limits::new(Some(&link), &[]);
        let mut p = profile();
        let path_var = link.join("bin").display().to_string();
        let args = strings(&[link.to_str().unwrap()]);
        widen(&mut p, "tool", &args, Some(&path_var), &limits);
        assert_eq!(p.ro, vec![PathBuf::from("/configs"), real_home.join("bin")]);
        assert!(p.rw.is_empty(), "{:?}", p.rw);
    }

    #[test]
    fn never_the_root_the_top_level_the_system_or_the_kernel() {
        let mut p = profile();
        let args = strings(&[
            "/",
            "/etc",
            "/usr/bin/env",
            "/proc",
            "/proc/self/root",
            "/sys",
            "/dev",
            "/run",
            "/tmp",
            "/var",
            "/home",
        ]);
        widen(&mut p, "/usr/bin/env", &args, None, &no_limits());
        assert_eq!(p.ro, vec![PathBuf::from("/configs")]);
        assert!(p.rw.is_empty(), "{:?}", p.rw);
    }

    #[test]
    fn never_writable_where_the_configuration_lives() {
        let (_t, root) = scratch();
        let config = root.join("ws/.vscode/mcp.json");
        file(&config);
        let limits = Limits::new(None, &[&config]);
        let mut p = profile();
        let sub = root.join("ws/src");
        std::fs::create_dir_all(&sub).unwrap();
        let args = strings(&[
            root.join("ws").to_str().unwrap(),
            root.join("ws/.vscode").to_str().unwrap(),
            sub.to_str().unwrap(),
        ]);
        widen(&mut p, "server", &args, None, &limits);
        assert_eq!(p.rw, vec![sub]);
        assert!(
            p.ro.contains(&root.join("ws")),
            "readable still: {:?}",
            p.ro
        );
    }

    #[test]
    fn a_path_already_covered_is_not_added_twice() {
        let mut list = vec![PathBuf::from("/a")];
        add(&mut list, PathBuf::from("/a/b"));
        add(&mut list, PathBuf::from("/c/d"));
        add(&mut list, PathBuf::from("/c"));
        assert_eq!(list, vec![PathBuf::from("/a"), PathBuf::from("/c")]);
    }
}
