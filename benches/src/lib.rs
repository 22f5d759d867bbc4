//! Shared workloads of moat's benchmarks: the fixtures decoded by `benches/decode.rs`, and
//! the stdio round trips of `benches/roundtrip.rs` and the `moat-bench` table, and the
//! Streamable HTTP load generator of `moat-bench http` ([`http`]; [`cores`] splits the
//! machine between it and the servers), and what `moat-bench all`
//! adds: any SDK's client over stdio ([`stdio`]), the TypeScript and Python peers
//! ([`peers`]), memory ([`memory`]), summaries ([`stats`]), the progress display
//! ([`progress`]) and the plots ([`svg`]).
//!
//! Every workload exists three ways, all in one process and one run: through moat, through
//! rmcp (the SDK to beat), and through a reference (`serde_json::Value` for decoding, a
//! line-echo child process for round trips: two pipe hops and nothing else).

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use moat_protocol::jsonrpc::Message;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

pub use rmcp;

pub mod cores;
pub mod http;
pub mod memory;
pub mod peers;
pub mod progress;
pub mod stats;
pub mod stdio;
pub mod svg;

/// The argument type of the `echo` tool every bench server offers.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// The text to send back.
    pub message: String,
}

/// The tool every round trip calls, and its arguments: `echo` exists with these arguments
/// on moat's and rmcp's bench servers and on the TypeScript reference server.
pub const ECHO_TOOL: &str = "echo";
/// The text the round trips send.
pub const ECHO_MESSAGE: &str = "hello";

/// Fixtures for the decode benchmarks: complete lines, as they come off the wire.
pub mod fixtures {
    use moat_protocol::types::{ListToolsResult, Tool, ToolAnnotations};
    use serde_json::json;

    /// A small `tools/call` request, as a client sends it.
    pub fn call_tool_request() -> String {
        r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}"#
            .to_owned()
    }

    /// Tool number `i` of a realistic catalog: title, description, an object input schema
    /// with three properties, annotations. The bench servers' `--catalog` serves 100 of them.
    pub fn tool(i: usize) -> Tool {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": format!("Path of the file tool {i} works on") },
                "limit": { "type": "integer", "minimum": 0, "description": "Most lines to return" },
                "recursive": { "type": "boolean", "default": false },
            },
            "required": ["path"],
        });
        let mut tool = Tool::new(format!("tool_{i:02}"), schema)
            .with_title(format!("Tool number {i}"))
            .with_description(format!(
                "Tool {i} of the benchmark fixture: reads a file and returns some of its lines, \
                 with enough prose to look like a real description."
            ));
        tool.annotations = Some(ToolAnnotations {
            read_only_hint: Some(true),
            open_world_hint: Some(false),
            ..Default::default()
        });
        tool
    }

    /// A `tools/list` response carrying `n` tools of [`tool`].
    pub fn list_tools_response(n: usize) -> String {
        let tools = (0..n).map(tool).collect();
        let result = ListToolsResult {
            tools,
            ..Default::default()
        };
        let result = serde_json::to_string(&result).expect("encode fixture");
        format!(r#"{{"jsonrpc":"2.0","id":7,"result":{result}}}"#)
    }
}

/// What every bench server serves with `--catalog` (the `tools/list` and `resources/read`
/// rows): [`CATALOG_TOOLS`] tools of [`fixtures::tool`] besides its own, and one text
/// resource of [`BLOB_BYTES`] at [`BLOB_URI`]. The Python and TypeScript bench servers
/// (`interop/py_bench_server.py`, `interop/ts_bench_server.mjs`) build the same.
pub const CATALOG_TOOLS: usize = 100;
/// The URI of the large resource.
pub const BLOB_URI: &str = "bench://blob";
/// Its size: 1 MiB of ASCII letters (nothing to escape in JSON).
pub const BLOB_BYTES: usize = 1 << 20;

/// The large resource's text: `abc…xyzabc…`, [`BLOB_BYTES`] long.
pub fn blob_text() -> String {
    (0..BLOB_BYTES)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect()
}

/// Decoding as each stack does it on receipt. Each function returns what a handler or caller
/// gets to work with, so the optimizer cannot skip the work.
pub mod decode {
    use super::*;

    /// `tools/call` params as moat's server reads them: the name borrowed, the arguments
    /// left raw for the tool to decode into its own type.
    #[derive(Deserialize)]
    struct CallParams<'a> {
        #[serde(borrow)]
        name: Cow<'a, str>,
        #[serde(borrow, default)]
        arguments: Option<&'a RawValue>,
    }

    /// moat: borrowed envelope, then params, then the tool's typed arguments (once).
    pub fn moat_call(line: &str) -> EchoArgs {
        let Ok(Message::Request(req)) = Message::parse(line) else {
            panic!("not a request")
        };
        assert_eq!(req.method, "tools/call");
        let params: CallParams<'_> =
            serde_json::from_str(req.params.expect("params").get()).expect("params");
        assert_eq!(params.name, ECHO_TOOL);
        let args = params.arguments.map_or("{}", RawValue::get);
        serde_json::from_str(args).expect("arguments")
    }

    /// moat: borrowed envelope, then the result into `ListToolsResult`.
    pub fn moat_list(line: &str) -> moat_protocol::types::ListToolsResult {
        let Ok(Message::Response(resp)) = Message::parse(line) else {
            panic!("not a response")
        };
        serde_json::from_str(resp.result.get()).expect("result")
    }

    /// rmcp: its server's message type, then the arguments into the tool's type (as its
    /// `Parameters<T>` extractor does).
    pub fn rmcp_call(line: &str) -> EchoArgs {
        use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
        let msg: ClientJsonRpcMessage = serde_json::from_str(line).expect("rmcp message");
        let JsonRpcMessage::Request(req) = msg else {
            panic!("not a request")
        };
        let ClientRequest::CallToolRequest(call) = req.request else {
            panic!("not tools/call")
        };
        assert_eq!(call.params.name, ECHO_TOOL);
        let args = call.params.arguments.unwrap_or_default();
        serde_json::from_value(Value::Object(args)).expect("arguments")
    }

    /// rmcp: its client's message type, which yields a typed `ListToolsResult`.
    pub fn rmcp_list(line: &str) -> rmcp::model::ListToolsResult {
        use rmcp::model::{JsonRpcMessage, ServerJsonRpcMessage, ServerResult};
        let msg: ServerJsonRpcMessage = serde_json::from_str(line).expect("rmcp message");
        let JsonRpcMessage::Response(resp) = msg else {
            panic!("not a response")
        };
        let ServerResult::ListToolsResult(result) = resp.result else {
            panic!("not a tools/list result")
        };
        result
    }

    /// Reference: the whole line into a `serde_json::Value` (no typing at all).
    pub fn value(line: &str) -> Value {
        serde_json::from_str(line).expect("json")
    }
}

/// Paths of this package's binaries. Benches get them from Cargo (`CARGO_BIN_EXE_*`); the
/// `moat-bench` binary finds them next to itself.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The line-echo floor.
    pub line_echo: String,
    /// moat's bench server.
    pub moat_server: String,
    /// rmcp's bench server.
    pub rmcp_server: String,
    /// The HTTP floor (hyper answering a fixed body).
    pub http_floor: String,
}

impl Binaries {
    /// The binaries sitting next to the running executable (for `moat-bench`).
    pub fn beside_current_exe() -> Binaries {
        let exe = std::env::current_exe().expect("current exe");
        let dir = exe.parent().expect("exe dir").to_owned();
        let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
        Binaries {
            line_echo: path("line-echo"),
            moat_server: path("moat-bench-server"),
            rmcp_server: path("rmcp-bench-server"),
            http_floor: path("http-floor"),
        }
    }
}

/// Where the TypeScript reference server lives, if the interop peers are installed.
pub fn ts_server_path() -> Option<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    );
    let node_ok = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (node_ok && std::path::Path::new(path).exists()).then(|| path.to_owned())
}

/// The floor: a child process that echoes lines, driven with blocking std I/O.
pub struct Floor {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
    buf: String,
}

impl Floor {
    /// Launch the line-echo program.
    pub fn spawn(line_echo: &str) -> Floor {
        let mut child = Command::new(line_echo)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn line-echo");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        // The same size of line as a small tools/call.
        let mut line = fixtures::call_tool_request();
        line.push('\n');
        Floor {
            child,
            stdin,
            stdout,
            line,
            buf: String::new(),
        }
    }

    /// One line there and back.
    pub fn round_trip(&mut self) -> usize {
        self.stdin.write_all(self.line.as_bytes()).expect("write");
        self.stdin.flush().expect("flush");
        self.buf.clear();
        self.stdout.read_line(&mut self.buf).expect("read")
    }

    /// `n` lines written back to back while the answers are read: the pipes' own throughput.
    pub fn pipelined(&mut self, n: usize) -> Duration {
        let start = Instant::now();
        let mut stdin = self.stdin.try_clone_writer();
        let line = self.line.clone();
        let writer = std::thread::spawn(move || {
            for _ in 0..n {
                stdin.write_all(line.as_bytes()).expect("write");
            }
            stdin.flush().expect("flush");
        });
        for _ in 0..n {
            self.buf.clear();
            self.stdout.read_line(&mut self.buf).expect("read");
        }
        writer.join().expect("writer");
        start.elapsed()
    }

    /// `total` lines with `inflight` of them outstanding at any time (a line goes out as
    /// each comes back), on this thread: the first `inflight` lines must fit in the pipes'
    /// buffers, so larger windows (and `inflight >= total`) use [`Floor::pipelined`].
    pub fn window(&mut self, inflight: usize, total: usize) -> Duration {
        if inflight >= total || inflight > 256 {
            return self.pipelined(total);
        }
        let start = Instant::now();
        let mut sent = 0;
        while sent < inflight.max(1) {
            self.stdin.write_all(self.line.as_bytes()).expect("write");
            sent += 1;
        }
        self.stdin.flush().expect("flush");
        for _ in 0..total {
            self.buf.clear();
            self.stdout.read_line(&mut self.buf).expect("read");
            if sent < total {
                self.stdin.write_all(self.line.as_bytes()).expect("write");
                self.stdin.flush().expect("flush");
                sent += 1;
            }
        }
        start.elapsed()
    }
}

trait CloneWriter {
    fn try_clone_writer(&self) -> std::fs::File;
}

impl CloneWriter for ChildStdin {
    fn try_clone_writer(&self) -> std::fs::File {
        use std::os::fd::AsFd;
        std::fs::File::from(self.as_fd().try_clone_to_owned().expect("dup stdin"))
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// moat's client side.
pub mod moat_side {
    use super::*;
    use moat::Client;

    /// Launch `argv` and connect moat's client to it.
    pub async fn connect(argv: &[&str]) -> Client {
        let client = launch(argv).await;
        // Warm the path once before anything is timed.
        call(&client).await;
        client
    }

    /// Launch `argv` and connect moat's client to it, without calling anything (for
    /// servers that have no `echo`).
    pub async fn launch(argv: &[&str]) -> Client {
        Client::builder()
            .request_timeout(Some(Duration::from_secs(120)))
            .connect_command(argv.iter().copied())
            .await
            .expect("moat client: connect")
    }

    /// The revision agreed, for the record.
    pub fn describe(client: &Client) -> String {
        format!(
            "moat client, protocol {:?}, server {}",
            client.protocol_version(),
            client.server_info().name
        )
    }

    /// One `tools/call` of `echo`.
    pub async fn call(client: &Client) {
        call_tool(
            client,
            ECHO_TOOL,
            serde_json::json!({ "message": ECHO_MESSAGE }),
        )
        .await;
    }

    /// One `tools/call` of any tool; panics unless it succeeds.
    pub async fn call_tool(client: &Client, name: &str, arguments: Value) {
        let result = client
            .call_tool(name, arguments)
            .await
            .expect("moat client: tools/call");
        assert_ne!(result.is_error, Some(true), "tool failed: {result:?}");
    }

    /// `n` calls in flight at once; returns the time until the last answer.
    pub async fn pipelined(client: &Client, n: usize) -> Duration {
        let start = Instant::now();
        futures_util::future::join_all((0..n).map(|_| call(client))).await;
        start.elapsed()
    }

    /// `n` calls of `name` in flight at once; returns the time until the last answer.
    pub async fn pipelined_tool(
        client: &Client,
        n: usize,
        name: &str,
        arguments: &Value,
    ) -> Duration {
        let start = Instant::now();
        futures_util::future::join_all((0..n).map(|_| call_tool(client, name, arguments.clone())))
            .await;
        start.elapsed()
    }
}

/// rmcp's client side.
pub mod rmcp_side {
    use super::*;
    use rmcp::model::CallToolRequestParams;
    use rmcp::service::RunningService;
    use rmcp::transport::TokioChildProcess;
    use rmcp::{RoleClient, ServiceExt};

    /// An rmcp client connected to a child process.
    pub type RmcpClient = RunningService<RoleClient, ()>;

    /// Launch `argv` and connect rmcp's client to it over its child-process transport.
    pub async fn connect(argv: &[&str]) -> RmcpClient {
        let mut cmd = tokio::process::Command::new(argv[0]);
        cmd.args(&argv[1..]);
        let transport = TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()
            .expect("rmcp client: spawn")
            .0;
        let client = ().serve(transport).await.expect("rmcp client: connect");
        call(&client).await;
        client
    }

    /// The revision agreed, for the record.
    pub fn describe(client: &RmcpClient) -> String {
        match client.peer_info() {
            Some(info) => format!(
                "rmcp client, protocol {:?}, server {:?}",
                info.protocol_version,
                info.server_info.as_ref().map(|s| s.name.as_str())
            ),
            None => "rmcp client, no server info".to_owned(),
        }
    }

    /// One `tools/call` of `echo`.
    pub async fn call(client: &RmcpClient) {
        let mut args = serde_json::Map::new();
        args.insert("message".to_owned(), Value::from(ECHO_MESSAGE));
        let mut params = CallToolRequestParams::new(ECHO_TOOL);
        params.arguments = Some(args);
        let result = client
            .call_tool(params)
            .await
            .expect("rmcp client: tools/call");
        assert_ne!(result.is_error, Some(true), "tool failed: {result:?}");
    }

    /// `n` calls in flight at once; returns the time until the last answer.
    pub async fn pipelined(client: &RmcpClient, n: usize) -> Duration {
        let start = Instant::now();
        futures_util::future::join_all((0..n).map(|_| call(client))).await;
        start.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decoder_reads_the_fixtures() {
        let call = fixtures::call_tool_request();
        assert_eq!(decode::moat_call(&call).message, ECHO_MESSAGE);
        assert_eq!(decode::rmcp_call(&call).message, ECHO_MESSAGE);
        let list = fixtures::list_tools_response(50);
        assert_eq!(decode::moat_list(&list).tools.len(), 50);
        assert_eq!(decode::rmcp_list(&list).tools.len(), 50);
        assert!(decode::value(&list).is_object());
    }
}
