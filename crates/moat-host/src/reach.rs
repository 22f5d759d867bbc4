//! What an imported server's command line names, for its sandbox.
//!
//! A Claude Desktop, Cursor or VS Code file was written for a client that runs its servers
//! with the user's full rights; it says nothing about what a server may touch. What it
//! does say is on the command line: the program, the script it runs, and the folders it
//! is to work on. So an imported server's default profile also gets:
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
//! configuration is loaded. Never added: `/` or the system directories (`/usr`, `/etc`…,
//! read-only in every profile), the home directory or anything above it as an
//! installation (a program in `~/bin` gets `~/bin`, not the home), and nothing is opened up
//! for the network. Anything more (an `npx` cache, a database file to write) goes in a
//! moat.toml that imports the file and sets the server's `sandbox` table.

use std::path::{Path, PathBuf};

use moat_sandbox::Profile;

/// Widens `profile` by what `command` and `args` name (see the module docs). `path_var` is
/// the `PATH` the program is looked up in, `home` the user's home directory.
pub(crate) fn widen(
    profile: &mut Profile,
    command: &str,
    args: &[String],
    path_var: Option<&str>,
    home: Option<&Path>,
) {
    for program in program_paths(command, path_var) {
        add(&mut profile.ro, installation(&program, home));
    }
    for arg in args {
        let Some(path) = named_path(arg) else {
            continue;
        };
        let Ok(real) = path.canonicalize() else {
            continue;
        };
        if real.is_dir() {
            if real.parent().is_some() {
                add(&mut profile.rw, real);
            }
        } else {
            add(&mut profile.ro, package_of(&real));
        }
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

/// Where `command` runs from: the path found (as written, or on `PATH`) and, if that is a
/// symbolic link, where it leads.
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
    if let Ok(real) = found.canonicalize() {
        if real != found {
            paths.push(found);
        }
        paths.push(real);
    }
    paths
}

/// The directory a program is installed in: the one above its `bin/`, unless that is the
/// home directory, above it, or directly in it (`~/.local`, `~/.cargo` hold more than
/// programs: keyrings, registry tokens); else its own directory.
fn installation(program: &Path, home: Option<&Path>) -> PathBuf {
    let dir = program.parent().unwrap_or(program);
    if dir.file_name().is_some_and(|n| n == "bin")
        && let Some(prefix) = dir.parent()
        && prefix.parent().is_some()
        && !home.is_some_and(|home| home.starts_with(prefix) || prefix.parent() == Some(home))
    {
        return prefix.to_path_buf();
    }
    dir.to_path_buf()
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

/// Adds `path` unless it, or a directory above it, is there already; `/` and the system
/// directories (read-only in every profile, and never opened for writing) never.
fn add(list: &mut Vec<PathBuf>, path: PathBuf) {
    if path.parent().is_none()
        || Profile::is_system_path(&path)
        || list.iter().any(|have| path.starts_with(have))
    {
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

    #[test]
    fn a_node_server_gets_its_packages_and_its_folder() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let script = root.join("app/node_modules/@scope/server/dist/index.js");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "").unwrap();
        let folder = root.join("Desktop");
        std::fs::create_dir(&folder).unwrap();
        let mut p = profile();
        let args = strings(&[script.to_str().unwrap(), folder.to_str().unwrap()]);
        widen(&mut p, "/usr/bin/env", &args, None, None);
        assert!(p.ro.contains(&root.join("app/node_modules")), "{:?}", p.ro);
        assert_eq!(p.rw, vec![folder]);
    }

    #[test]
    fn flags_with_paths_count_and_missing_or_relative_paths_do_not() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let repo = root.join("repo");
        std::fs::create_dir(&repo).unwrap();
        let mut p = profile();
        let args = strings(&[
            &format!("--repository={}", repo.display()),
            "relative/dir",
            "/does/not/exist",
            "--verbose",
        ]);
        widen(&mut p, "server", &args, None, None);
        assert_eq!(p.rw, vec![repo]);
        assert_eq!(p.ro, vec![PathBuf::from("/configs")]);
    }

    #[test]
    fn a_program_on_path_brings_its_installation() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let bin = root.join("opt/node22/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("node"), "").unwrap();
        let mut p = profile();
        let path_var = format!("/nonexistent:{}", bin.display());
        widen(&mut p, "node", &[], Some(&path_var), None);
        assert!(p.ro.contains(&root.join("opt/node22")), "{:?}", p.ro);
    }

    #[test]
    fn a_link_brings_both_ends() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let real = root.join("python/3.11/bin/python3.11");
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        std::fs::write(&real, "").unwrap();
        let venv_bin = root.join("project/.venv/bin");
        std::fs::create_dir_all(&venv_bin).unwrap();
        std::os::unix::fs::symlink(&real, venv_bin.join("python")).unwrap();
        let mut p = profile();
        let command = venv_bin.join("python");
        widen(&mut p, command.to_str().unwrap(), &[], None, None);
        assert!(p.ro.contains(&root.join("project/.venv")), "{:?}", p.ro);
        assert!(p.ro.contains(&root.join("python/3.11")), "{:?}", p.ro);
    }

    #[test]
    fn never_the_home_directory_or_the_root() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        let bin = home.join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("tool"), "").unwrap();
        let mut p = profile();
        let path_var = bin.display().to_string();
        widen(
            &mut p,
            "tool",
            &strings(&["/", "/etc", "/usr/bin/env"]),
            Some(&path_var),
            Some(&home),
        );
        assert!(p.ro.contains(&bin), "{:?}", p.ro);
        assert!(!p.ro.contains(&home), "{:?}", p.ro);
        assert!(!p.ro.iter().any(|d| d.starts_with("/usr")), "{:?}", p.ro);
        let cargo_bin = home.join(".cargo/bin");
        std::fs::create_dir_all(&cargo_bin).unwrap();
        std::fs::write(cargo_bin.join("server"), "").unwrap();
        let path_var = cargo_bin.display().to_string();
        widen(&mut p, "server", &[], Some(&path_var), Some(&home));
        assert!(p.ro.contains(&cargo_bin), "{:?}", p.ro);
        assert!(!p.ro.contains(&home.join(".cargo")), "{:?}", p.ro);
        assert!(
            p.rw.is_empty(),
            "/ and /etc must never be writable: {:?}",
            p.rw
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
