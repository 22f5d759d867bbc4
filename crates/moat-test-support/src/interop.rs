//! Where the interop peers are installed: the TypeScript and Python SDKs, their clients
//! and servers (`interop/`, filled by `bash .ci/run --install-only`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The directory of the interop peers (`interop/` at the repository root, or
/// `$MOAT_INTEROP_DIR`), if each of `needs` (paths in it) is there and `node` runs.
/// Otherwise `None`, and the test passes with a notice, except under CI (`CI` set), where
/// a missing peer is a failure.
pub fn interop_dir(needs: &[&str]) -> Option<PathBuf> {
    let dir = match std::env::var_os("MOAT_INTEROP_DIR").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop"),
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let mut missing: Vec<String> = needs
        .iter()
        .map(|rel| dir.join(rel))
        .filter(|path| !path.exists())
        .map(|path| path.display().to_string())
        .collect();
    let node_ok = Command::new("node")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !node_ok {
        missing.push("`node` on PATH".into());
    }
    if missing.is_empty() {
        return Some(dir);
    }
    let msg = format!(
        "interop peers are not installed (missing: {}); run `bash .ci/run` \
         (or `bash .ci/run --install-only`) from the repository root",
        missing.join(", ")
    );
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}
