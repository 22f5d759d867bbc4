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

/// The Python interpreter of the peers' virtual environment, relative to their directory.
pub const VENV_PYTHON: &str = ".venv/bin/python";

/// The installed interop peers (see [`peers`]): paths in their directory, and the SDK
/// clients' command lines.
pub struct Peers {
    pub dir: PathBuf,
}

impl Peers {
    /// `rel` in the peers' directory.
    pub fn path(&self, rel: &str) -> String {
        self.dir.join(rel).to_string_lossy().into_owned()
    }

    /// The virtual environment's Python.
    pub fn python(&self) -> String {
        self.path(VENV_PYTHON)
    }

    /// The directory Python lives in for real (the venv's interpreter is a symlink), for
    /// a sandbox's `ro`.
    pub fn python_prefix(&self) -> PathBuf {
        let real = std::fs::canonicalize(self.python()).expect("resolve the venv's python");
        // PREFIX/bin/python3.x
        real.parent()
            .and_then(Path::parent)
            .expect("python has a prefix")
            .to_path_buf()
    }

    /// The Python SDK's client (`py_client.py`).
    pub fn py_client(&self) -> Vec<String> {
        vec![self.python(), self.path("py_client.py")]
    }

    /// The TypeScript SDK 1.x client (`@modelcontextprotocol/sdk`).
    pub fn ts_client(&self) -> Vec<String> {
        vec!["node".into(), self.path("ts_client.mjs")]
    }

    /// The TypeScript SDK 2.x client (`@modelcontextprotocol/client`).
    pub fn ts2_client(&self) -> Vec<String> {
        vec![
            "node".into(),
            self.path("ts_client.mjs"),
            "--sdk".into(),
            "v2".into(),
        ]
    }
}

/// The installed peers, if each of `needs` is there (see [`interop_dir`]).
pub fn peers(needs: &[&str]) -> Option<Peers> {
    interop_dir(needs).map(|dir| Peers { dir })
}

/// A script of this checkout's `interop/` (new scripts are there before they are in an
/// installed `$MOAT_INTEROP_DIR`).
pub fn script(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../interop")
        .join(name);
    std::fs::canonicalize(&path)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}
