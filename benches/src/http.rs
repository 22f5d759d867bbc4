//! The Streamable HTTP workloads of the `moat-bench http` table: a load generator on hyper's
//! HTTP/1 client (one keep-alive connection per simulated client, nothing shared between
//! clients), the server processes it talks to, and the measurements (sequential latency,
//! calls per second at N concurrent clients).
//!
//! Every request is a `tools/call` of `echo` (or `echo_progress`, which sends one progress
//! notification first, so the answer has to stream) with `{"message":"hello"}`, in one of
//! the shapes of [`Mode`].

use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;

/// The handshake-era revision the session workloads speak.
pub const SESSION_VERSION: &str = "2025-11-25";
/// The sessionless revision.
pub const MODERN_VERSION: &str = "2026-07-28";

/// A server process for the HTTP rows; killed on drop.
pub struct ServerProcess {
    child: Child,
    // Kept open so the server never writes into a closed pipe.
    _stdout: std::io::BufReader<ChildStdout>,
    /// Where it listens.
    pub addr: SocketAddr,
}

/// CPU time used so far by every live thread of process `pid` (user and system, from
/// `/proc/PID/task/*/schedstat`, in nanoseconds); `None` off Linux.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(task) = task else { continue };
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        total += stat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(Duration::from_nanos(total))
}

impl ServerProcess {
    /// The process id, for [`cpu_time`].
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Start `argv` and wait for its `listening on http://ADDR/...` line on stdout.
    pub fn spawn(argv: &[&str]) -> ServerProcess {
        Self::start(argv, Stdio::inherit())
    }

    /// [`spawn`](Self::spawn), with the server's stderr discarded (the TypeScript SDK logs
    /// every session it opens and closes there).
    pub fn spawn_quiet(argv: &[&str]) -> ServerProcess {
        Self::start(argv, Stdio::null())
    }

    fn start(argv: &[&str], stderr: Stdio) -> ServerProcess {
        use std::io::BufRead;
        let mut child = Command::new(argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {argv:?}: {e}"));
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .expect("read the listening line");
        let addr = line
            .trim()
            .strip_prefix("listening on http://")
            .and_then(|rest| rest.split('/').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("{argv:?} printed {line:?}, not its address"));
        // Some servers announce their address before they accept (the Python peer prints
        // it once bound, then starts its event loop): wait until a connection gets through.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "{argv:?} never accepted on {addr}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        ServerProcess {
            child,
            _stdout: stdout,
            addr,
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shape of each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A plain POST of the same body, no MCP headers (the floor).
    Raw,
    /// Handshake era: `initialize` + `notifications/initialized` once per client, then calls
    /// with `Mcp-Session-Id` and `MCP-Protocol-Version: 2025-11-25`.
    Session,
    /// 2026-07-28: no session; each request carries `_meta` (protocol version, client
    /// capabilities, client info) and the `MCP-Protocol-Version`, `Mcp-Method` and
    /// `Mcp-Name` headers.
    Modern,
    /// 2025-11-25 requests with no session at all (rmcp's `legacy_session_mode = false`).
    Sessionless,
}

/// How the answer is expected to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// One `application/json` body.
    Json,
    /// A `text/event-stream` body that ends after the answer.
    Sse,
}

impl Answer {
    /// For tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Json => "JSON",
            Answer::Sse => "SSE",
        }
    }
}

/// One workload against one server.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The server.
    pub addr: SocketAddr,
    /// Request shape.
    pub mode: Mode,
    /// Ask for progress and call `echo_progress` (one notification precedes the answer).
    pub progress: bool,
    /// What the answers must be.
    pub expect: Answer,
}

/// An error of the load generator: the row is broken, not slow.
pub type Error = String;

fn err(context: &str) -> impl Fn(hyper::Error) -> Error + '_ {
    move |e| format!("{context}: {e}")
}

/// One simulated client: its own TCP connection (keep-alive), and in the handshake era its
/// own session.
pub struct HttpClient {
    send: SendRequest<Full<Bytes>>,
    headers: HeaderMap,
    workload: Workload,
    session: Option<HeaderValue>,
    next_id: u64,
}

const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

impl HttpClient {
    /// Connect, and in the handshake era open a session.
    pub async fn connect(workload: &Workload) -> Result<HttpClient, Error> {
        let tcp = tokio::net::TcpStream::connect(workload.addr)
            .await
            .map_err(|e| format!("connect {}: {e}", workload.addr))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let (send, conn) = hyper::client::conn::http1::handshake::<_, Full<Bytes>>(
            hyper_util::rt::TokioIo::new(tcp),
        )
        .await
        .map_err(err("HTTP handshake"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut headers = HeaderMap::new();
        headers.insert(
            header::HOST,
            HeaderValue::from_str(&workload.addr.to_string()).expect("host"),
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let mut client = HttpClient {
            send,
            headers,
            workload: workload.clone(),
            session: None,
            next_id: 1,
        };
        if workload.mode == Mode::Session {
            client.initialize().await?;
        }
        match workload.mode {
            Mode::Raw => {}
            Mode::Session | Mode::Sessionless => {
                client.headers.insert(
                    MCP_PROTOCOL_VERSION,
                    HeaderValue::from_static(SESSION_VERSION),
                );
            }
            Mode::Modern => {
                let h = &mut client.headers;
                h.insert(
                    MCP_PROTOCOL_VERSION,
                    HeaderValue::from_static(MODERN_VERSION),
                );
                h.insert(MCP_METHOD, HeaderValue::from_static("tools/call"));
                h.insert(MCP_NAME, HeaderValue::from_static(tool(workload.progress)));
            }
        }
        if let Some(id) = &client.session {
            client.headers.insert(MCP_SESSION_ID, id.clone());
        }
        Ok(client)
    }

    async fn post(&mut self, body: String) -> Result<(http::response::Parts, Bytes), Error> {
        let mut req = Request::new(Full::new(Bytes::from(body)));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = http::Uri::from_static("/mcp");
        *req.headers_mut() = self.headers.clone();
        self.send.ready().await.map_err(err("connection"))?;
        let resp = self.send.send_request(req).await.map_err(err("request"))?;
        let (parts, body) = resp.into_parts();
        let bytes = body
            .collect()
            .await
            .map_err(err("response body"))?
            .to_bytes();
        Ok((parts, bytes))
    }

    async fn initialize(&mut self) -> Result<(), Error> {
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{SESSION_VERSION}","capabilities":{{}},"clientInfo":{{"name":"moat-bench","version":"{}"}}}}}}"#,
            env!("CARGO_PKG_VERSION")
        );
        let (parts, body) = self.post(init).await?;
        if parts.status != StatusCode::OK {
            return Err(format!(
                "initialize: {} {}",
                parts.status,
                String::from_utf8_lossy(&body)
            ));
        }
        let id = parts
            .headers
            .get(&MCP_SESSION_ID)
            .ok_or("initialize: no Mcp-Session-Id")?
            .clone();
        self.headers.insert(MCP_SESSION_ID, id.clone());
        self.headers.insert(
            MCP_PROTOCOL_VERSION,
            HeaderValue::from_static(SESSION_VERSION),
        );
        self.session = Some(id);
        let (parts, body) = self
            .post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned())
            .await?;
        if parts.status != StatusCode::ACCEPTED {
            return Err(format!(
                "notifications/initialized: {} {}",
                parts.status,
                String::from_utf8_lossy(&body)
            ));
        }
        Ok(())
    }

    /// The body of call number `id`.
    fn body(&self, id: u64) -> String {
        let name = tool(self.workload.progress);
        let progress = if self.workload.progress {
            format!(r#""progressToken":{id}"#)
        } else {
            String::new()
        };
        let meta = match self.workload.mode {
            Mode::Modern => format!(
                r#","_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN_VERSION}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"moat-bench","version":"{}"}}{}{progress}}}"#,
                env!("CARGO_PKG_VERSION"),
                if progress.is_empty() { "" } else { "," },
            ),
            _ if !progress.is_empty() => format!(r#","_meta":{{{progress}}}"#),
            _ => String::new(),
        };
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{"message":"{}"}}{meta}}}}}"#,
            crate::ECHO_MESSAGE
        )
    }

    /// One `tools/call`, checked: status 200, the expected content type, a result carrying
    /// the message (and the progress notification before it, when asked for).
    pub async fn call(&mut self) -> Result<(), Error> {
        let id = self.next_id;
        self.next_id += 1;
        let (parts, body) = self.post(self.body(id)).await?;
        let text = std::str::from_utf8(&body).map_err(|e| e.to_string())?;
        if parts.status != StatusCode::OK {
            return Err(format!("tools/call: {} {text}", parts.status));
        }
        let content_type = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let sse = content_type.starts_with("text/event-stream");
        let expected = match self.workload.expect {
            Answer::Json => content_type.starts_with("application/json"),
            Answer::Sse => sse,
        };
        if !expected {
            return Err(format!(
                "tools/call: expected {} but got {content_type:?}: {text}",
                self.workload.expect.as_str()
            ));
        }
        if self.workload.mode == Mode::Raw {
            return Ok(());
        }
        let answered = text.contains(r#""result""#)
            && text.contains(crate::ECHO_MESSAGE)
            && !text.contains(r#""isError":true"#);
        let progressed = !self.workload.progress || text.contains("notifications/progress");
        if !answered || !progressed {
            return Err(format!("tools/call: unexpected answer {text}"));
        }
        Ok(())
    }

    /// End the session, if any (DELETE).
    pub async fn close(mut self) {
        if self.session.is_none() {
            return;
        }
        let mut req = Request::new(Full::new(Bytes::new()));
        *req.method_mut() = Method::DELETE;
        *req.uri_mut() = http::Uri::from_static("/mcp");
        *req.headers_mut() = self.headers.clone();
        req.headers_mut().remove(header::CONTENT_TYPE);
        if self.send.ready().await.is_ok()
            && let Ok(resp) = self.send.send_request(req).await
        {
            let _ = resp.into_body().collect().await;
        }
    }
}

fn tool(progress: bool) -> &'static str {
    if progress { "echo_progress" } else { "echo" }
}

/// `n` sequential calls on one client after `warmup` untimed ones; the time of each. The
/// calls run in a task of the runtime (as [`throughput`]'s do), not on `block_on`'s thread,
/// which would add a hop between threads to each call.
pub async fn latency(workload: &Workload, warmup: usize, n: usize) -> Result<Vec<Duration>, Error> {
    let workload = workload.clone();
    tokio::spawn(async move { latency_task(&workload, warmup, n).await })
        .await
        .map_err(|e| e.to_string())?
}

async fn latency_task(
    workload: &Workload,
    warmup: usize,
    n: usize,
) -> Result<Vec<Duration>, Error> {
    let mut client = HttpClient::connect(workload).await?;
    for _ in 0..warmup {
        client.call().await?;
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        client.call().await?;
        samples.push(t.elapsed());
    }
    client.close().await;
    Ok(samples)
}

/// Calls per second with `clients` concurrent clients (each its own connection and
/// session, each with one call in flight at a time), over `window`. Clients connect and
/// warm up before the clock starts; calls still in flight at the end of the window are
/// counted, and the clock stops when the last one is answered.
pub async fn throughput(
    workload: &Workload,
    clients: usize,
    window: Duration,
) -> Result<f64, Error> {
    Ok(throughput_cpu(workload, clients, window, None).await?.0)
}

/// [`throughput`], also measuring the CPU time the server process `server` spends per call
/// over the window, and this process (the load generator), in µs per call (every thread,
/// user and system).
pub async fn throughput_cpu(
    workload: &Workload,
    clients: usize,
    window: Duration,
    server: Option<u32>,
) -> Result<(f64, Option<f64>, Option<f64>), Error> {
    let mut connected = Vec::with_capacity(clients);
    for _ in 0..clients {
        let mut c = HttpClient::connect(workload).await?;
        for _ in 0..5 {
            c.call().await?;
        }
        connected.push(c);
    }
    let (go_tx, go_rx) = tokio::sync::watch::channel(None::<Instant>);
    let tasks: Vec<_> = connected
        .into_iter()
        .map(|mut c| {
            let mut go = go_rx.clone();
            tokio::spawn(async move {
                let deadline = loop {
                    if let Some(d) = *go.borrow_and_update() {
                        break d;
                    }
                    if go.changed().await.is_err() {
                        return Err("start signal lost".to_owned());
                    }
                };
                let mut n = 0u64;
                while Instant::now() < deadline {
                    c.call().await?;
                    n += 1;
                }
                Ok::<_, Error>((n, c))
            })
        })
        .collect();
    let cpu_before = server.and_then(cpu_time);
    let own_before = cpu_time(std::process::id());
    let start = Instant::now();
    let _ = go_tx.send(Some(start + window));
    let mut total = 0u64;
    let mut done = Vec::with_capacity(clients);
    for t in tasks {
        let (n, c) = t.await.map_err(|e| e.to_string())??;
        total += n;
        done.push(c);
    }
    let elapsed = start.elapsed();
    let per_call = |after: Option<Duration>, before: Option<Duration>| {
        after
            .zip(before)
            .map(|(a, b)| a.saturating_sub(b).as_secs_f64() * 1e6 / total.max(1) as f64)
    };
    let cpu = per_call(server.and_then(cpu_time), cpu_before);
    let own = per_call(cpu_time(std::process::id()), own_before);
    for c in done {
        c.close().await;
    }
    Ok((total as f64 / elapsed.as_secs_f64(), cpu, own))
}

/// Open `n` sessions on the server at `addr` (`initialize`, then
/// `notifications/initialized`, each checked) one after another over one connection, and
/// leave them open: for the memory a server holds per session.
pub async fn open_sessions(addr: SocketAddr, n: usize) -> Result<(), Error> {
    let workload = Workload {
        addr,
        mode: Mode::Raw,
        progress: false,
        expect: Answer::Json,
    };
    let mut client = HttpClient::connect(&workload).await?;
    for _ in 0..n {
        // A request without a session id, so each `initialize` opens a new one.
        client.headers.remove(MCP_SESSION_ID);
        client.headers.remove(MCP_PROTOCOL_VERSION);
        client.initialize().await?;
    }
    Ok(())
}
