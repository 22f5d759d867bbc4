//! Memory of a server process: its peak resident set (`VmHWM` in `/proc/PID/status`) and
//! its current one (`VmRSS`), idle after `initialize` on stdio, and on Streamable HTTP
//! after many sessions were opened and left open. Linux only (elsewhere, `None`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::http::{self, ServerProcess};

/// Resident memory of a process, in KiB.
#[derive(Debug, Clone, Copy)]
pub struct Rss {
    /// Peak resident set size (`VmHWM`).
    pub peak_kib: u64,
    /// Resident set size now (`VmRSS`).
    pub now_kib: u64,
}

/// Read `VmHWM` and `VmRSS` of process `pid`.
pub fn rss(pid: u32) -> Option<Rss> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some(Rss {
        peak_kib: field("VmHWM:")?,
        now_kib: field("VmRSS:")?,
    })
}

/// How long a server gets to settle (lazy start-up work, its allocator returning memory)
/// before it is measured.
const SETTLE: Duration = Duration::from_millis(300);

/// Start `argv` as a stdio server, go through `initialize` and
/// `notifications/initialized` by hand (the same bytes for every stack), let it settle,
/// and read its memory. The process is killed afterwards.
pub fn idle_stdio(argv: &[&str]) -> Result<Rss, String> {
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn {argv:?}: {e}"))?;
    let result = (|| {
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{}","capabilities":{{}},"clientInfo":{{"name":"moat-bench","version":"{}"}}}}}}"#,
            http::SESSION_VERSION,
            env!("CARGO_PKG_VERSION")
        );
        writeln!(stdin, "{init}").map_err(|e| e.to_string())?;
        stdin.flush().map_err(|e| e.to_string())?;
        let mut line = String::new();
        loop {
            line.clear();
            if stdout.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err("server closed stdout before answering initialize".to_owned());
            }
            // The answer (or, from the floor, the request echoed back).
            if line.contains(r#""id":1"#) {
                break;
            }
        }
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .map_err(|e| e.to_string())?;
        stdin.flush().map_err(|e| e.to_string())?;
        std::thread::sleep(SETTLE);
        let rss = rss(child.id()).ok_or("no /proc status")?;
        drop(stdin);
        Ok(rss)
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// Memory of a Streamable HTTP server: after start, and after `sessions` sessions were
/// opened (`initialize` and `notifications/initialized` each, never closed).
#[derive(Debug, Clone, Copy)]
pub struct SessionsRss {
    /// Before any session.
    pub started: Rss,
    /// With all the sessions open.
    pub loaded: Rss,
}

/// Start the HTTP server `argv`, read its memory, open `sessions` sessions, read it again.
pub async fn http_sessions(argv: &[&str], sessions: usize) -> Result<SessionsRss, String> {
    let server = ServerProcess::spawn_quiet(argv);
    tokio::time::sleep(SETTLE).await;
    let started = rss(server.pid()).ok_or("no /proc status")?;
    http::open_sessions(server.addr, sessions).await?;
    tokio::time::sleep(SETTLE).await;
    let loaded = rss(server.pid()).ok_or("no /proc status")?;
    Ok(SessionsRss { started, loaded })
}
