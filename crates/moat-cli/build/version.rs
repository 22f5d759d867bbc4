//! The version `moat --version` prints: the crate's version, and in a git checkout the
//! commit it was built from and that commit's date (`moat 0.1.0 (abc1234 2026-12-02)`).
//!
//! Built from a package (`cargo install moat-cli`, or `cargo package`'s verify build under
//! `target/package/`), there is no checkout of this crate: the version is the crate's alone.
//! No dependency: `git` is run if it is there, and anything it cannot answer means "no
//! commit". Shared by the build script and the test of the fallback.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the build knows about the checkout it is built from.
pub struct Checkout {
    /// The abbreviated commit hash (`git rev-parse --short HEAD`).
    pub commit: String,
    /// The commit's date, `YYYY-MM-DD` in UTC.
    pub date: String,
    /// Files whose change means another commit is checked out (HEAD, the branch's ref).
    pub watch: Vec<PathBuf>,
}

/// The version string: `version`, followed by the commit and its date when there is one.
pub fn describe(version: &str, checkout: Option<&Checkout>) -> String {
    match checkout {
        Some(c) => format!("{version} ({} {})", c.commit, c.date),
        None => version.to_owned(),
    }
}

/// The checkout `manifest_dir` belongs to, if its `Cargo.toml` is a file git tracks: an
/// unpacked package inside some other repository (`target/package/…`) is not one.
pub fn checkout(manifest_dir: &Path) -> Option<Checkout> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(manifest_dir)
            .args(args)
            .env("TZ", "UTC")
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8(out.stdout).ok()?;
        Some(text.trim().to_owned())
    };
    git(&["ls-files", "--error-unmatch", "Cargo.toml"])?;
    let commit = git(&["rev-parse", "--short", "HEAD"]).filter(|c| is_hex(c))?;
    let date = git(&["log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%d"])
        .filter(|d| d.len() == 10)?;
    // A commit moves HEAD (detached) or the branch it names (a loose ref, or packed).
    let mut watch = Vec::new();
    let mut paths = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        paths.push(branch);
    }
    for p in paths {
        if let Some(file) = git(&["rev-parse", "--path-format=absolute", "--git-path", &p]) {
            let file = PathBuf::from(file);
            // A path that does not exist would make Cargo run the build script every time.
            if file.exists() {
                watch.push(file);
            }
        }
    }
    Some(Checkout {
        commit,
        date,
        watch,
    })
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}
