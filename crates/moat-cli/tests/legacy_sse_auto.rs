//! `moat tools URL` with the default `--transport auto`, black-box: against moat's own
//! `moat serve everything --http`, the SSE URL (`/sse`) reaches the legacy 2024-11-05
//! HTTP+SSE pair and the MCP endpoint (`/mcp`) Streamable HTTP, with the same tools; against
//! the TypeScript reference server (`@modelcontextprotocol/server-everything`) the same holds
//! for its `sse` and `streamableHttp` modes.
//!
//! The reference server is found as in the other interop suites (`$MOAT_INTEROP_DIR`, else
//! `interop/`); when it is missing those tests print `SKIPPED: ...` and pass, except under
//! CI (`CI` set), where they fail.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

mod support;
use support::{Leftovers, Listening};

/// Deadline for one `moat tools` run.
const TIMEOUT: Duration = Duration::from_secs(60);
/// How long the output pipes may stay open after `moat tools` exited.
const PIPE_GRACE: Duration = Duration::from_secs(10);
/// How long a server may take to say it is listening.
const SERVER_START: Duration = Duration::from_secs(20);

const EVERYTHING_JS: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// A server in its own process group, killed (the whole group) when dropped.
struct Running {
    _server: Listening,
    /// `http://127.0.0.1:PORT`
    base: String,
}

/// Starts `cmd` in its own process group and reads its stderr until `port_of` finds the
/// port in a line (the rest of stderr is drained, so the server never blocks on it).
fn start(mut cmd: Command, port_of: impl Fn(&str) -> Option<u16> + Send + 'static) -> Running {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let (server, port) = Listening::start(cmd, port_of, SERVER_START);
    Running {
        _server: server,
        base: format!("http://127.0.0.1:{port}"),
    }
}

/// `moat serve everything --http 127.0.0.1:0`, whose stderr says
/// `moat: serving moat-everything on http://127.0.0.1:PORT/mcp (...)`.
fn moat_server() -> Running {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_moat"));
    cmd.args(["serve", "everything", "--http", "127.0.0.1:0"]);
    start(cmd, |line| {
        line.strip_prefix("moat: serving ")?
            .split_once("http://127.0.0.1:")?
            .1
            .split_once("/mcp")?
            .0
            .parse()
            .ok()
    })
}

/// The TypeScript reference server in `mode` (`sse` or `streamableHttp`), or `None` (test
/// skipped) when it is not installed.
fn reference_server(mode: &str) -> Option<Running> {
    let dir = support::interop_dir(&[EVERYTHING_JS])?;
    // It takes its port from PORT; ask the kernel for a free one.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut cmd = Command::new("node");
    cmd.arg(dir.join(EVERYTHING_JS))
        .arg(mode)
        .env("PORT", port.to_string());
    let needle = format!("on port {port}");
    Some(start(cmd, move |line| {
        line.trim_end().ends_with(&needle).then_some(port)
    }))
}

/// What `moat -v tools --json URL` (auto transport, auto revision) found: whether it
/// settled on the legacy transport (it says so at `-v`) and the names of the tools listed.
fn tools(url: &str) -> (bool, BTreeSet<String>) {
    let argv: Vec<String> = [env!("CARGO_BIN_EXE_moat"), "-v", "tools", "--json", url]
        .map(String::from)
        .to_vec();
    let run = support::run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Kill);
    let out = run.json(0);
    let names: BTreeSet<String> = out["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools\n{}", run.describe()))
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    assert!(!names.is_empty(), "no tools listed\n{}", run.describe());
    let legacy = run
        .stderr
        .contains("the server speaks the legacy HTTP+SSE transport");
    (legacy, names)
}

#[test]
fn auto_lists_tools_from_moat_at_sse_and_at_mcp() {
    let server = moat_server();
    let (legacy, at_sse) = tools(&format!("{}/sse", server.base));
    assert!(legacy, "/sse is served over the legacy HTTP+SSE transport");
    let (legacy, at_mcp) = tools(&format!("{}/mcp", server.base));
    assert!(!legacy, "/mcp is served over Streamable HTTP");
    assert!(at_sse.contains("test_simple_text"), "{at_sse:?}");
    assert_eq!(at_sse, at_mcp, "the same server behind both transports");
}

#[test]
fn auto_lists_tools_from_the_reference_server_in_both_modes() {
    let Some(sse) = reference_server("sse") else {
        return;
    };
    let (legacy, names) = tools(&format!("{}/sse", sse.base));
    assert!(legacy, "the sse mode is the legacy HTTP+SSE transport");
    assert!(names.contains("echo"), "{names:?}");
    drop(sse);

    let Some(streamable) = reference_server("streamableHttp") else {
        return;
    };
    let (legacy, names) = tools(&format!("{}/mcp", streamable.base));
    assert!(!legacy, "the streamableHttp mode is Streamable HTTP");
    assert!(names.contains("echo"), "{names:?}");
}
