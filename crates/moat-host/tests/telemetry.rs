//! The gateway's telemetry end to end, in one process: a downstream MCP server over HTTP,
//! the gateway in front of it over HTTP, a client calling through it.
//!
//! - metrics: after calls that are allowed, denied, refused for lack of consent, that fail
//!   at the tool and that time out, `/metrics` is scraped and parsed strictly (the
//!   Prometheus text format), and the counters and histograms match the calls made;
//! - traces: an OTLP/HTTP collector, and in a second test an OTLP/gRPC collector
//!   (`opentelemetry-proto`'s tonic service), decode what the exporter sends, and see, for one call whose `_meta.traceparent` the client
//!   set, the gateway's span as the child of that parent, its policy and downstream
//!   spans as its children, and the downstream server's own span as the child of the
//!   downstream span, all in the client's trace; the server received a `traceparent` of
//!   that trace in its `_meta`.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use moat::transport::http::server::HttpServerOptions;
use moat::{
    Client, HttpOptions, NoArgs, ProtocolVersion, RequestContext, RequestOptions, Server,
    VersionPreference,
};
use moat_host::config::telemetry::{OtlpProtocol, TelemetryConfig};
use moat_host::{Config, Host, HostOptions};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Map, Value, json};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::prelude::*;

/// The client's trace: what it sends in `_meta.traceparent`.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
/// The trace of a client that sends `traceparent` as an HTTP header.
const HEADER_TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";

/// The downstream server: tools that answer, fail, hang, and one that reports the trace
/// context it received (and makes a span of its own in that trace).
fn downstream() -> Server {
    Server::new("down", "1")
        .resource("doc://readme", "Readme", || async {
            Ok::<_, String>("hello")
        })
        .tool("ok", "Answers", |_: NoArgs| async {
            Ok::<_, String>("fine")
        })
        .tool("forbidden", "Denied by policy", |_: NoArgs| async {
            Ok::<_, String>("should not run")
        })
        .tool("asky", "Needs consent", |_: NoArgs| async {
            Ok::<_, String>("should not run")
        })
        .tool("broken", "A tool error", |_: NoArgs| async {
            Err::<String, _>("it broke".to_owned())
        })
        .tool("slow", "Outlasts the call timeout", |_: NoArgs| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok::<_, String>("late")
        })
        .tool_with_context(
            "traced",
            "Reports the traceparent it received",
            |ctx: RequestContext, _: NoArgs| async move {
                let Some(trace) = ctx.trace_context() else {
                    return Ok::<_, String>("none".to_owned());
                };
                // The server's own span, a child of the context it received.
                let mut meta = Map::new();
                meta.insert(
                    "traceparent".into(),
                    Value::String(trace.traceparent.clone()),
                );
                let span =
                    tracing::info_span!(target: moat_host::telemetry::TARGET, "server handler");
                span.set_parent(moat_host::telemetry::propagation::extract(&meta))
                    .unwrap();
                drop(span);
                Ok(trace.traceparent)
            },
        )
}

async fn serve(server: Server) -> String {
    let http = server
        .bind_http("127.0.0.1:0".parse().unwrap(), HttpServerOptions::default())
        .await
        .unwrap();
    let url = format!("http://{}/mcp", http.local_addr().unwrap());
    tokio::spawn(http.run());
    url
}

/// The gateway in front of a fresh downstream server, and a client connected to it.
async fn gateway(telemetry: &str, version: VersionPreference) -> (Host, Client, String) {
    let down = serve(downstream()).await;
    let toml = format!(
        r#"
        [servers.down]
        url = "{down}"
        call_timeout = "300ms"

        [policy]
        default = "allow"
        [[policy.rules]]
        decision = "deny"
        tool = "forbidden"
        [[policy.rules]]
        decision = "ask"
        tool = "asky"

        [consent]
        mode = "deny"

        {telemetry}
        "#
    );
    let config = Config::from_toml_str(&toml, None).unwrap();
    let host = Host::start(config, HostOptions::default().ephemeral(true))
        .await
        .unwrap();
    host.ready().await;
    assert_eq!(host.servers_down(), Vec::<String>::new());
    let upstream = serve(host.server().clone()).await;
    let client = Client::builder()
        .protocol(version)
        .connect_url(&upstream, HttpOptions::default())
        .await
        .unwrap();
    (host, client, upstream)
}

async fn call(client: &Client, tool: &str) -> (bool, String) {
    match client.call_tool(tool, json!({})).await {
        Ok(result) => (
            result.is_error == Some(true),
            result.content[0].as_text().unwrap_or_default().to_owned(),
        ),
        Err(e) => (true, e.to_string()),
    }
}

// Metrics

/// One sample: its metric name and labels.
type Key = (String, BTreeMap<String, String>);

/// The Prometheus text format, parsed strictly: every line a `# HELP`, a `# TYPE` or a
/// sample of a family whose type was declared, every value a number.
fn parse_prometheus(text: &str) -> HashMap<Key, f64> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            assert!(rest.split_once(' ').is_some(), "HELP without text: {line}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE line");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "unknown type: {line}"
            );
            types.insert(name.to_owned(), kind.to_owned());
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment: {line}");
        assert!(!line.is_empty(), "empty line in the exposition");
        let (series, value) = line.rsplit_once(' ').expect("sample without value");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value: {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}').expect("}"))),
            None => (series, BTreeMap::new()),
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name: {line}"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(
            types.contains_key(family),
            "sample of an undeclared family: {line}"
        );
        assert!(
            samples.insert((name.to_owned(), labels), value).is_none(),
            "duplicate sample: {line}"
        );
    }
    samples
}

fn parse_labels(mut text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    while !text.is_empty() {
        let (name, rest) = text.split_once("=\"").expect("label=\"");
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().expect("unterminated label value") {
                (_, '\\') => match chars.next().expect("escape").1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.insert(name.to_owned(), value);
        text = rest[end + 1..]
            .strip_prefix(',')
            .unwrap_or(&rest[end + 1..]);
    }
    labels
}

fn sample(samples: &HashMap<Key, f64>, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    samples.get(&(name.to_owned(), labels)).copied()
}

fn calls(samples: &HashMap<Key, f64>, tool: &str, decision: &str, outcome: &str) -> f64 {
    sample(
        samples,
        "moat_tool_calls_total",
        &[
            ("decision", decision),
            ("outcome", outcome),
            ("server", "down"),
            ("tool", tool),
        ],
    )
    .unwrap_or(0.0)
}

/// The buckets of one histogram series, in `le` order, and its count.
fn buckets(samples: &HashMap<Key, f64>, name: &str, tool: &str) -> (Vec<(f64, f64)>, f64) {
    let mut out: Vec<(f64, f64)> = samples
        .iter()
        .filter(|((n, l), _)| {
            n == &format!("{name}_bucket")
                && l.get("tool").map(String::as_str) == Some(tool)
                && l.get("server").map(String::as_str) == Some("down")
        })
        .map(|((_, l), v)| {
            let le = match l["le"].as_str() {
                "+Inf" => f64::INFINITY,
                le => le.parse().unwrap(),
            };
            (le, *v)
        })
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    let count = sample(
        samples,
        &format!("{name}_count"),
        &[("server", "down"), ("tool", tool)],
    )
    .unwrap_or(0.0);
    (out, count)
}

async fn scrape(addr: SocketAddr) -> String {
    let response = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    response.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_the_calls_made() {
    let (host, client, _) = gateway(
        "[telemetry]\nmetrics = \"127.0.0.1:0\"",
        // A handshake-era client, so that there is a session to count.
        VersionPreference::Exact(ProtocolVersion::V2025_11_25),
    )
    .await;
    let endpoint = host
        .serve_metrics("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();

    assert_eq!(call(&client, "down__ok").await, (false, "fine".into()));
    assert_eq!(call(&client, "down__ok").await, (false, "fine".into()));
    assert!(call(&client, "down__forbidden").await.0);
    assert!(call(&client, "down__asky").await.0);
    assert!(call(&client, "down__broken").await.0);
    let (failed, message) = call(&client, "down__slow").await;
    assert!(failed && message.contains("did not answer"), "{message}");

    let text = scrape(endpoint.local_addr()).await;
    let samples = parse_prometheus(&text);
    assert_eq!(calls(&samples, "ok", "allow", "ok"), 2.0, "{text}");
    assert_eq!(
        calls(&samples, "forbidden", "deny", "refused"),
        1.0,
        "{text}"
    );
    assert_eq!(calls(&samples, "asky", "ask", "refused"), 1.0, "{text}");
    assert_eq!(
        calls(&samples, "broken", "allow", "tool_error"),
        1.0,
        "{text}"
    );
    assert_eq!(calls(&samples, "slow", "allow", "failed"), 1.0, "{text}");
    let total: f64 = samples
        .iter()
        .filter(|((n, _), _)| n == "moat_tool_calls_total")
        .map(|(_, v)| v)
        .sum();
    assert_eq!(total, 6.0, "{text}");

    // End to end: every call; downstream: only the calls that reached the server.
    for (name, tool, count) in [
        ("moat_tool_call_duration_seconds", "ok", 2.0),
        ("moat_tool_call_duration_seconds", "forbidden", 1.0),
        ("moat_downstream_call_duration_seconds", "ok", 2.0),
        ("moat_downstream_call_duration_seconds", "slow", 1.0),
        ("moat_downstream_call_duration_seconds", "forbidden", 0.0),
    ] {
        let (series, n) = buckets(&samples, name, tool);
        assert_eq!(n, count, "{name} {tool}: {text}");
        if count == 0.0 {
            assert!(series.is_empty());
            continue;
        }
        assert_eq!(series.last().unwrap(), &(f64::INFINITY, count), "{name}");
        assert!(
            series.windows(2).all(|w| w[0].1 <= w[1].1),
            "{name}: buckets not cumulative"
        );
    }
    // The slow call waited the 300 ms deadline: it is not in the buckets below that.
    let (slow, _) = buckets(&samples, "moat_downstream_call_duration_seconds", "slow");
    assert!(
        slow.iter()
            .filter(|(le, _)| *le < 0.25)
            .all(|(_, v)| *v == 0.0),
        "{text}"
    );

    assert_eq!(
        sample(
            &samples,
            "moat_consent_requests_total",
            &[("answer", "unasked")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&samples, "moat_consent_wait_seconds_count", &[]),
        Some(1.0)
    );
    assert_eq!(
        sample(&samples, "moat_server_starts_total", &[("server", "down")]),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &samples,
            "moat_server_state",
            &[("server", "down"), ("state", "up")]
        ),
        Some(1.0)
    );
    assert_eq!(sample(&samples, "moat_pins_held", &[]), Some(0.0));
    assert_eq!(sample(&samples, "moat_servers_held", &[]), Some(0.0));
    assert!(
        sample(&samples, "moat_sessions", &[]).unwrap() >= 1.0,
        "{text}"
    );

    let missing = reqwest::get(format!("http://{}/nope", endpoint.local_addr()))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    client.close().await;
    host.shutdown().await;
}

// Traces

/// Spans the test collector received.
type Received = Arc<Mutex<Vec<Span>>>;

/// An OTLP/HTTP collector: `POST /v1/traces` with an `ExportTraceServiceRequest`.
async fn collector() -> (String, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let spans = received.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let spans = spans.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let spans = spans.clone();
                    async move {
                        assert_eq!(req.uri().path(), "/v1/traces");
                        assert_eq!(req.headers()["content-type"], "application/x-protobuf");
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        keep(&spans, ExportTraceServiceRequest::decode(body).unwrap());
                        let answer = ExportTraceServiceResponse::default().encode_to_vec();
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(answer))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    (url, received)
}

/// The spans of one export, each resource checked for the service name.
fn keep(spans: &Received, export: ExportTraceServiceRequest) {
    let mut got = spans.lock().unwrap();
    for resource in export.resource_spans {
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|a| a.key == "service.name")
            .and_then(|a| a.value.as_ref()?.value.clone());
        assert_eq!(service, Some(AnyValue::StringValue("moat-test".into())));
        for scope in resource.scope_spans {
            got.extend(scope.spans);
        }
    }
}

/// An OTLP/gRPC collector: the `TraceService` of the OTLP protos, served by tonic.
struct GrpcCollector(Received);

#[tonic::async_trait]
impl TraceService for GrpcCollector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        keep(&self.0, request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

async fn grpc_collector() -> (String, Received) {
    let incoming =
        tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("http://{}", incoming.local_addr().unwrap());
    let received: Received = Arc::default();
    let service = TraceServiceServer::new(GrpcCollector(received.clone()));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming),
    );
    (url, received)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attr(span: &Span, key: &str) -> Option<AnyValue> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.clone())
}

fn text(value: &str) -> Option<AnyValue> {
    Some(AnyValue::StringValue(value.to_owned()))
}

// Each trace test runs everything (gateway, downstream server, client, collector) on
// one thread, its own tracing subscriber the default there: the two tests can run at
// once, each exporting its own spans only.

#[tokio::test(flavor = "current_thread")]
async fn a_call_is_one_trace_from_the_client_to_the_server() {
    let (endpoint, received) = collector().await;
    one_trace(OtlpProtocol::HttpProtobuf, endpoint, received).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_call_is_one_trace_from_the_client_to_the_server_over_grpc() {
    let (endpoint, received) = grpc_collector().await;
    one_trace(OtlpProtocol::Grpc, endpoint, received).await;
}

async fn one_trace(protocol: OtlpProtocol, endpoint: String, received: Received) {
    let mut config = TelemetryConfig::default();
    config.otlp_endpoint = Some(endpoint);
    config.otlp_protocol = Some(protocol);
    config.service_name = Some("moat-test".into());
    let (layer, guard) = moat_host::telemetry::otlp::layer(&config).unwrap().unwrap();
    let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let (host, client, url) = gateway("", VersionPreference::default()).await;
    let mut meta = Map::new();
    meta.insert(
        "traceparent".into(),
        json!(format!("00-{TRACE_ID}-{PARENT_ID}-01")),
    );
    let result = client
        .call_tool_with(
            "down__traced",
            json!({}),
            RequestOptions::default().meta(meta),
        )
        .await
        .unwrap();
    let seen = result.content[0].as_text().unwrap().to_owned();
    let read = client.read_resource("doc://readme").await.unwrap();
    assert_eq!(read.contents.len(), 1);
    // A client that sends its trace context in HTTP headers instead of `_meta`.
    let by_header = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "down__traced")
        .header(
            "traceparent",
            format!("00-{HEADER_TRACE_ID}-{PARENT_ID}-01"),
        )
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "down__traced", "arguments": {}, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "curl", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {}}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert!(by_header.status().is_success(), "{by_header:?}");
    let by_header = by_header.text().await.unwrap();
    assert!(by_header.contains(HEADER_TRACE_ID), "{by_header}");
    client.close().await;
    host.shutdown().await;
    // Off this thread: the collector answers on it.
    tokio::task::spawn_blocking(move || {
        guard.flush();
        drop(guard);
    })
    .await
    .unwrap();

    // The server got the client's trace, with the gateway's downstream span as parent.
    let parts: Vec<&str> = seen.split('-').collect();
    assert_eq!(parts.len(), 4, "{seen}");
    assert_eq!(parts[1], TRACE_ID, "{seen}");
    assert_ne!(
        parts[2], PARENT_ID,
        "the gateway passed the client's span on: {seen}"
    );

    let spans: Vec<Span> = received
        .lock()
        .unwrap()
        .iter()
        .filter(|s| hex(&s.trace_id) == TRACE_ID)
        .cloned()
        .collect();
    let named = |name: &str| -> &Span {
        spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
            panic!(
                "no span {name} among {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })
    };
    let call = named("tools/call down__traced");
    assert_eq!(hex(&call.parent_span_id), PARENT_ID);
    assert_eq!(attr(call, "mcp.method.name"), text("tools/call"));
    assert_eq!(attr(call, "gen_ai.tool.name"), text("down__traced"));
    assert_eq!(attr(call, "gen_ai.operation.name"), text("execute_tool"));
    assert_eq!(attr(call, "moat.server"), text("down"));
    assert_eq!(attr(call, "moat.tool"), text("traced"));
    assert_eq!(attr(call, "moat.policy.decision"), text("allow"));
    assert_eq!(attr(call, "moat.policy.rule"), text("default"));
    assert_eq!(attr(call, "moat.outcome"), text("ok"));
    assert!(attr(call, "mcp.session.id").is_some());
    assert!(attr(call, "mcp.protocol.version").is_some());
    assert!(
        matches!(attr(call, "moat.result.size"), Some(AnyValue::IntValue(n)) if n > 0),
        "{:?}",
        attr(call, "moat.result.size")
    );
    // Server kind (2) for the gateway's span, client kind (3) for the call it forwards.
    assert_eq!(call.kind, 2);

    let policy = named("moat.policy");
    assert_eq!(policy.parent_span_id, call.span_id);
    let forwarded = named("tools/call traced");
    assert_eq!(forwarded.parent_span_id, call.span_id);
    assert_eq!(forwarded.kind, 3);
    assert_eq!(
        hex(&forwarded.span_id),
        parts[2],
        "the server's parent is the forwarded span"
    );
    let handler = named("server handler");
    assert_eq!(handler.parent_span_id, forwarded.span_id);

    // The call whose trace context came in headers is in that trace, under that parent.
    let header_call = received
        .lock()
        .unwrap()
        .iter()
        .find(|s| hex(&s.trace_id) == HEADER_TRACE_ID && s.name == "tools/call down__traced")
        .cloned()
        .expect("the gateway's span of the call traced by headers");
    assert_eq!(hex(&header_call.parent_span_id), PARENT_ID);

    // Other forwarded requests have a span too (a trace of their own: their `_meta` is
    // not read).
    let all = received.lock().unwrap();
    let read = all
        .iter()
        .find(|s| s.name == "resources/read doc://readme")
        .expect("a span for resources/read");
    assert_eq!(attr(read, "mcp.method.name"), text("resources/read"));
    assert_eq!(attr(read, "moat.server"), text("down"));
}
