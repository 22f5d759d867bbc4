//! The gateway binary's telemetry wiring, black-box: `moat gateway` with `[telemetry]
//! metrics`, `MOAT_LOG_FORMAT=json` and `OTEL_EXPORTER_OTLP_ENDPOINT`, in front of `moat
//! serve everything`. After one call (with a `traceparent` in `_meta`) its `/metrics`
//! counts it, its stderr is JSON lines, and when it stops, a collector in the test has
//! received the call's span over OTLP/HTTP in the client's trace. And the same from a
//! Python SDK client (the interop peers): its `_meta.traceparent` is the parent of the
//! gateway's span.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use moat::{Client, HttpOptions, RequestOptions};
use serde_json::{Map, Value, json};

mod support;
use support::{HttpGateway, MOAT, Ready, interop_dir};

const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";

/// What the collector received: each request's path and body.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A minimal OTLP/HTTP receiver: reads requests (by `Content-Length`), answers 200.
fn collector() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let sink = received.clone();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let sink = sink.clone();
            std::thread::spawn(move || serve_collector(tcp, &sink));
        }
    });
    (url, received)
}

fn serve_collector(tcp: TcpStream, sink: &Received) {
    let mut writer = tcp.try_clone().unwrap();
    let mut reader = BufReader::new(tcp);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line
            .split(' ')
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        sink.lock().unwrap().push((path, body));
        writer
            .write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
            )
            .unwrap();
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn gateway_serves_metrics_exports_traces_and_logs_json() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("moat.toml");
    std::fs::write(
        &config,
        format!(
            r#"
            [servers.ev]
            command = {moat}
            args = ["serve", "everything"]
            sandbox = false

            [policy]
            default = "allow"

            [telemetry]
            metrics = "127.0.0.1:0"
            "#,
            moat = serde_json::to_string(MOAT).unwrap()
        ),
    )
    .unwrap();
    let (endpoint, received) = collector();
    let mut gateway = HttpGateway::start(
        MOAT,
        &config,
        &[
            ("MOAT_LOG_FORMAT", "json"),
            ("MOAT_LOG", "info"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SERVICE_NAME", "moat-cli-test"),
        ],
        Ready::Listed,
        Duration::from_secs(60),
    );
    let log = gateway.log();
    let metrics_url = log
        .lines()
        .find_map(|l| l.strip_prefix("moat gateway: metrics on "))
        .unwrap_or_else(|| panic!("no metrics address in {log}"))
        .to_owned();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let text = runtime.block_on(async {
        let client = Client::builder()
            .connect_url(&gateway.url, HttpOptions::default())
            .await
            .unwrap();
        let mut meta = Map::new();
        meta.insert(
            "traceparent".into(),
            json!(format!("00-{TRACE_ID}-b7ad6b7169203331-01")),
        );
        let result = client
            .call_tool_with(
                "ev__test_simple_text",
                json!({}),
                RequestOptions::default().meta(meta),
            )
            .await
            .unwrap();
        assert_ne!(result.is_error, Some(true));
        client.close().await;
        // A request for a session that does not exist: a 404 to count.
        let stale = reqwest::Client::new()
            .get(&gateway.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", "no-such-session")
            .send()
            .await
            .unwrap();
        assert_eq!(stale.status().as_u16(), 404);
        reqwest::get(&metrics_url)
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    assert!(
        text.lines().any(|l| l
            == r#"moat_tool_calls_total{server="ev",tool="test_simple_text",decision="allow",outcome="ok"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"moat_server_state{server="ev",state="up"} 1"#),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l == r#"moat_http_responses_total{code="404"} 1"#),
        "{text}"
    );
    let ok: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(r#"moat_http_responses_total{code="200"} "#))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no 200s counted: {text}"));
    assert!(ok >= 2, "initialize and the call at least: {text}");

    // Stopping sends the spans still buffered.
    assert!(gateway.stop(libc::SIGINT, Duration::from_secs(10)));
    let deadline = Instant::now() + Duration::from_secs(10);
    let name = b"tools/call ev__test_simple_text";
    let trace = unhex(TRACE_ID);
    let exported = loop {
        let got = received.lock().unwrap().clone();
        if let Some(export) = got
            .iter()
            .find(|(_, body)| contains(body, name) && contains(body, &trace))
        {
            break export.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no span of the call exported: {got:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(exported.0, "/v1/traces");
    assert!(
        contains(&exported.1, b"moat-cli-test"),
        "service.name missing"
    );

    // Logs: every line that is not the gateway's own summary is a JSON object.
    let log = gateway.log();
    let events: Vec<Value> = log
        .lines()
        .filter(|l| !l.starts_with("moat gateway: "))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["fields"]["message"] == "server up" && e["level"] == "INFO"),
        "{log}"
    );
}

/// A Python SDK client that calls one tool with a `traceparent` in `_meta` through the
/// gateway it launches (argv after the script), passing its environment on.
const PY_TRACED_CALL: &str = r#"
import json, os, sys
import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

async def main():
    server = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:], env=dict(os.environ))
    async with Client(server) as client:
        result = await client.call_tool("ev__test_simple_text", {}, meta={"traceparent": sys.argv[1]})
        print(json.dumps(result.model_dump(by_alias=True, exclude_none=True, mode="json")))

anyio.run(main)
"#;

#[test]
fn a_python_sdk_clients_traceparent_is_the_parent_of_the_gateways_span() {
    const VENV_PYTHON: &str = ".venv/bin/python";
    let Some(peers) = interop_dir(&[VENV_PYTHON]) else {
        return;
    };
    let trace_id = "5b8aa5a2d2c872e8321cf37308d69df2";
    let parent_id = "051581bf3cb55c13";
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("moat.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.ev]\ncommand = {}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n[policy]\ndefault = \"allow\"\n",
            serde_json::to_string(MOAT).unwrap()
        ),
    )
    .unwrap();
    let script = dir.path().join("traced_call.py");
    std::fs::write(&script, PY_TRACED_CALL).unwrap();
    let (endpoint, received) = collector();
    let output = std::process::Command::new(peers.join(VENV_PYTHON))
        .arg(&script)
        .arg(format!("00-{trace_id}-{parent_id}-01"))
        .args([MOAT, "gateway", "--config"])
        .arg(&config)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_ne!(result["isError"], json!(true), "{result}");

    // The gateway flushes its spans when its client closes it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let name = b"tools/call ev__test_simple_text";
    let (trace, parent) = (unhex(trace_id), unhex(parent_id));
    loop {
        let got = received.lock().unwrap().clone();
        if got.iter().any(|(path, body)| {
            path == "/v1/traces"
                && contains(body, name)
                && contains(body, &trace)
                && contains(body, &parent)
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no span under the client's: {got:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
