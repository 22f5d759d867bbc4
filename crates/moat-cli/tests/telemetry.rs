//! The gateway binary's telemetry wiring, black-box: `moat gateway` with `[telemetry]
//! metrics`, `MOAT_LOG_FORMAT=json` and `OTEL_EXPORTER_OTLP_ENDPOINT`, in front of `moat
//! serve everything`. After one call (with a `traceparent` in `_meta`) its `/metrics`
//! counts it, its stderr is JSON lines, and when it stops, a collector in the test has
//! received the call's span over OTLP/HTTP in the client's trace. And the same from a
//! Python SDK client (the interop peers): its `_meta.traceparent` is the parent of the
//! gateway's span. Over gRPC too (`OTEL_EXPORTER_OTLP_PROTOCOL=grpc`, a tonic OTLP
//! collector in the test), and a protocol moat does not speak refuses to start.

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
            // The traces' own variable wins over the general one.
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
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

/// Whether process `pid` has the OpenTelemetry SDK's batch export thread (its name,
/// `OpenTelemetry.Traces.BatchProcessor`, cut to the kernel's 15 bytes).
fn has_exporter_thread(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .any(|name| name.starts_with("OpenTelemetry"))
}

/// Whether `moat sandbox --check` says yes to each of `layers` (`cgroup pids`, …).
fn sandbox_has(layers: &[&str]) -> bool {
    let out = std::process::Command::new(MOAT)
        .args(["sandbox", "--check"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    layers.iter().all(|layer| {
        text.lines().any(|l| {
            l.strip_prefix(layer)
                .and_then(|rest| rest.strip_prefix(':'))
                .is_some_and(|v| v.trim_start().starts_with("yes"))
        })
    })
}

/// Servers that attack their sandbox's limits (CPU time; where a cgroup can be made,
/// processes and memory), each killed or stopped by it before it answers `initialize`
/// (each start fails and is tried again); one that is up until its wall-clock limit ends
/// it (and is restarted); and one that just exits: `/metrics` counts each limit hit under
/// its limit, and the plain exit under none.
#[test]
fn sandbox_limit_hits_are_counted_by_limit() {
    let pids = sandbox_has(&["cgroup pids"]);
    // The memory hog fills the sandbox's own `/tmp` (a tmpfs, whose pages the cgroup is
    // charged for): it needs the namespaces as well as a memory cgroup.
    let memory = sandbox_has(&["cgroup memory", "namespaces"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("moat.toml");
    let bin = std::path::Path::new(MOAT).parent().unwrap();
    let mut toml = format!(
        r#"
        # Up, then killed at its wall-clock limit: a limit hit of a server that was up.
        [servers.ev]
        command = {moat}
        args = ["serve", "everything"]
        [servers.ev.sandbox]
        ro = [{bin}]
        limits = {{ timeout_ms = 1500 }}
        "#,
        moat = serde_json::to_string(MOAT).unwrap(),
        bin = serde_json::to_string(bin).unwrap(),
    );
    toml.push_str(
        r#"
        [servers.hog]
        command = "/bin/sh"
        args = ["-c", "while :; do :; done"]
        [servers.hog.sandbox]
        limits = { cpu_seconds = 1 }

        [servers.quits]
        command = "/bin/sh"
        args = ["-c", "exit 3"]
        [servers.quits.sandbox]
        limits = { cpu_seconds = 1 }
        "#,
    );
    if pids {
        // A fork bomb that gives up: forks until `pids.max` refuses, then exits.
        toml.push_str(
            r#"
            [servers.forks]
            command = "/bin/sh"
            args = ["-c", "for i in $(seq 64); do sleep 30 & done; exit 1"]
            [servers.forks.sandbox]
            limits = { pids = 8 }
            "#,
        );
    }
    if memory {
        toml.push_str(
            r#"
            [servers.fills]
            command = "/bin/sh"
            args = ["-c", "head -c 100000000 /dev/zero > /tmp/fill; exit 1"]
            [servers.fills.sandbox]
            limits = { memory_bytes = 33554432 }
            "#,
        );
    }
    toml.push_str(
        r#"
        [policy]
        default = "allow"

        [telemetry]
        metrics = "127.0.0.1:0"
        "#,
    );
    std::fs::write(&config, toml).unwrap();
    let gateway = HttpGateway::start(
        MOAT,
        &config,
        &[("MOAT_LOG", "warn")],
        Ready::Serving,
        Duration::from_secs(60),
    );
    let log = gateway.log();
    let metrics_url = log
        .lines()
        .find_map(|l| l.strip_prefix("moat gateway: metrics on "))
        .unwrap_or_else(|| panic!("no metrics address in {log}"))
        .to_owned();
    // Traces are off here (unless this test's own environment turns them on): no
    // exporter thread (the gRPC test sees one when they are on).
    let traces_on = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
    assert!(traces_on || !has_exporter_thread(gateway.pid()));
    let hits = |text: &str, server: &str, limit: &str| -> u64 {
        let series =
            format!(r#"moat_sandbox_limit_hits_total{{server="{server}",limit="{limit}"}} "#);
        text.lines()
            .find_map(|l| l.strip_prefix(&series))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let failures = |text: &str, server: &str| -> u64 {
        let series = format!(r#"moat_server_start_failures_total{{server="{server}"}} "#);
        text.lines()
            .find_map(|l| l.strip_prefix(&series))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let scrape = || {
        runtime.block_on(async {
            reqwest::get(&metrics_url)
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = scrape();
        let done = hits(&text, "hog", "cpu") >= 1
            && hits(&text, "ev", "timeout") >= 1
            && failures(&text, "quits") >= 2
            && (!pids || hits(&text, "forks", "pids") >= 1)
            && (!memory || hits(&text, "fills", "memory") >= 1);
        if done {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "limit hits not counted: {text}\n{}",
            gateway.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // Only the limits that were hit, under the servers that hit them.
    for line in text
        .lines()
        .filter(|l| l.starts_with("moat_sandbox_limit_hits_total{"))
    {
        assert!(
            line.starts_with(r#"moat_sandbox_limit_hits_total{server="hog",limit="cpu"}"#)
                || line
                    .starts_with(r#"moat_sandbox_limit_hits_total{server="ev",limit="timeout"}"#)
                || line
                    .starts_with(r#"moat_sandbox_limit_hits_total{server="forks",limit="pids"}"#)
                || line
                    .starts_with(r#"moat_sandbox_limit_hits_total{server="fills",limit="memory"}"#),
            "{line}\n{text}"
        );
    }
    assert!(hits(&text, "quits", "cpu") == 0, "{text}");
    // `ev` was up in its sandbox before the limit ended it, and is being restarted.
    for series in [
        r#"moat_sandbox_spawns_total{server="ev"} "#,
        r#"moat_server_restarts_total{server="ev"} "#,
    ] {
        assert!(
            text.lines()
                .find_map(|l| l.strip_prefix(series))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n >= 1),
            "{series}: {text}"
        );
    }
    if !pids {
        eprintln!("no cgroup with pids.max here: the pids limit hit was not tested");
    }
    if !memory {
        eprintln!("no memory cgroup or no namespaces here: the memory limit hit was not tested");
    }
}

/// An OTLP/gRPC collector: the OTLP protos' `TraceService`, served by tonic; keeps the
/// spans with their resource's `service.name`.
struct GrpcCollector(Arc<Mutex<Vec<(String, opentelemetry_proto::tonic::trace::v1::Span)>>>);

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService
    for GrpcCollector
{
    async fn export(
        &self,
        request: tonic::Request<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest,
        >,
    ) -> Result<
        tonic::Response<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse,
        >,
        tonic::Status,
    > {
        use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
        let mut got = self.0.lock().unwrap();
        for resource in request.into_inner().resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
                    AnyValue::StringValue(s) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for scope in resource.scope_spans {
                got.extend(scope.spans.into_iter().map(|s| (service.clone(), s)));
            }
        }
        Ok(tonic::Response::new(Default::default()))
    }
}

#[test]
fn gateway_exports_traces_over_grpc_when_the_variables_say_so() {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;
    let collector = tokio::runtime::Runtime::new().unwrap();
    let received = Arc::new(Mutex::new(Vec::new()));
    let endpoint = collector.block_on(async {
        let incoming =
            tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let url = format!("http://{}", incoming.local_addr().unwrap());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(GrpcCollector(received.clone())))
                .serve_with_incoming(incoming),
        );
        url
    });
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
    let mut gateway = HttpGateway::start(
        MOAT,
        &config,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_SERVICE_NAME", "moat-cli-grpc"),
        ],
        Ready::Listed,
        Duration::from_secs(60),
    );
    assert!(has_exporter_thread(gateway.pid()));
    let trace_id = "6e0c63257de34c926f9efcd03899a8f2";
    let parent_id = "a3ce929d0e0e4736";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = Client::builder()
            .connect_url(&gateway.url, HttpOptions::default())
            .await
            .unwrap();
        let mut meta = Map::new();
        meta.insert(
            "traceparent".into(),
            json!(format!("00-{trace_id}-{parent_id}-01")),
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
    });
    // Stopping sends the spans still buffered.
    assert!(gateway.stop(libc::SIGINT, Duration::from_secs(10)));
    let deadline = Instant::now() + Duration::from_secs(10);
    let (service, span) = loop {
        if let Some(found) = received.lock().unwrap().iter().find(|(_, s)| {
            s.name == "tools/call ev__test_simple_text" && s.trace_id == unhex(trace_id)
        }) {
            break found.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no span of the call over gRPC: {:?}\n{}",
            received.lock().unwrap(),
            gateway.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(service, "moat-cli-grpc");
    assert_eq!(span.parent_span_id, unhex(parent_id));
    // The forwarded call's span, its child, came along.
    assert!(
        received
            .lock()
            .unwrap()
            .iter()
            .any(|(_, s)| s.name == "tools/call test_simple_text"
                && s.parent_span_id == span.span_id),
        "{:?}",
        received.lock().unwrap()
    );
}

#[test]
fn a_protocol_moat_does_not_speak_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("moat.toml");
    std::fs::write(&config, "[policy]\ndefault = \"allow\"\n").unwrap();
    let output = std::process::Command::new(MOAT)
        .args(["gateway", "--config"])
        .arg(&config)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL=http/json")
            && stderr.contains("grpc or http/protobuf"),
        "{stderr}"
    );
}
