//! The TypeScript and Python peers of `moat-bench all`: their bench servers
//! (`interop/ts_bench_server.mjs` on the TypeScript SDK, `interop/py_bench_server.py` on the
//! Python SDK), found where `bash .ci/run --install-only` installs the SDKs. A peer that is
//! not installed is `None`, and its rows are skipped with [`INSTALL_HINT`].

use std::path::Path;
use std::process::{Command, Stdio};

/// What to run when a peer is missing.
pub const INSTALL_HINT: &str =
    "install the TypeScript and Python SDKs with `bash .ci/run --install-only`";

/// The interop directory of this checkout.
const INTEROP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../interop");

/// The command line that starts each peer's bench server (add `--catalog`, `--http ADDR`,
/// … after it).
#[derive(Debug, Clone, Default)]
pub struct Peers {
    /// `node …/ts_bench_server.mjs`, if node and the TypeScript SDK are installed.
    pub ts: Option<Vec<String>>,
    /// `…/.venv/bin/python …/py_bench_server.py`, if the virtualenv holds the Python SDK.
    pub py: Option<Vec<String>>,
}

/// Run `bash .ci/run --install-only` (npm and pip installs into `interop/`, skipped when
/// already done), with its output on stderr; an error says what failed.
pub fn install() -> Result<(), String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../.ci/run");
    let status = Command::new("bash")
        .args([script, "--install-only"])
        .stdin(Stdio::null())
        // Its progress goes where ours does, never into the table on stdout.
        .stdout(std::io::stderr())
        .status()
        .map_err(|e| format!("bash {script} --install-only: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("bash {script} --install-only: {status}"))
    }
}

impl Peers {
    /// Look for both peers.
    pub fn find() -> Peers {
        Peers { ts: ts(), py: py() }
    }
}

fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn ts() -> Option<Vec<String>> {
    let script = format!("{INTEROP}/ts_bench_server.mjs");
    let sdk = format!("{INTEROP}/node_modules/@modelcontextprotocol/sdk/package.json");
    (Path::new(&sdk).exists() && Path::new(&script).exists() && runs("node", &["--version"]))
        .then(|| vec!["node".to_owned(), script])
}

fn py() -> Option<Vec<String>> {
    let python = format!("{INTEROP}/.venv/bin/python");
    let script = format!("{INTEROP}/py_bench_server.py");
    // Importing the SDK proves the virtualenv is complete, not just created.
    (Path::new(&script).exists() && runs(&python, &["-c", "import mcp.server.mcpserver"]))
        .then(|| vec![python, script])
}
