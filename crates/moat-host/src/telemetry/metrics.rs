//! The gateway's Prometheus metrics: one registry, the families the call path, consent
//! and supervision update, and the gauges read from the gateway when scraped.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::audit::AuditRecord;

/// Latency buckets in seconds: a local tool answers in well under a millisecond, a
/// remote one or a person asked for consent in seconds to minutes.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];
/// Consent waits are a person's: seconds, not milliseconds.
const CONSENT_BUCKETS: [f64; 8] = [0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0];

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

fn consent_wait() -> Histogram {
    Histogram::new(CONSENT_BUCKETS)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    server: String,
    tool: String,
    decision: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    server: String,
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    server: String,
    limit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConsentLabels {
    answer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    server: String,
    state: String,
}

/// What the gateway is, read when the metrics are scraped rather than kept up to date
/// on every change.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// Each supervised server and whether it is up (else starting or restarting).
    pub(crate) servers: Vec<(String, bool)>,
    /// Servers held until their launch is approved.
    pub(crate) held_servers: usize,
    /// Tools held back (changed since approval, or poisoned).
    pub(crate) held_tools: usize,
    /// Client sessions open.
    pub(crate) sessions: usize,
}

/// Every metric of the gateway, registered once.
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_seconds: HistogramFamily<ToolLabels>,
    downstream_seconds: HistogramFamily<ToolLabels>,
    consent_requests: Family<ConsentLabels, Counter>,
    consent_wait_seconds: Histogram,
    server_starts: Family<ServerLabels, Counter>,
    server_start_failures: Family<ServerLabels, Counter>,
    server_restarts: Family<ServerLabels, Counter>,
    sandbox_spawns: Family<ServerLabels, Counter>,
    sandbox_limit_hits: Family<LimitLabels, Counter>,
    /// Where sandboxed servers' reports go; made on the first sandboxed start.
    reports: std::sync::OnceLock<super::report_dir::ReportDir>,
    server_state: Family<StateLabels, Gauge>,
    servers_held: Gauge,
    pins_held: Gauge,
    sessions: Gauge,
    http_responses: Family<StatusLabels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("moat");
        // The families are handles: the registry and the struct share them.
        let m = Metrics {
            calls: Family::default(),
            call_seconds: Family::new_with_constructor(latency),
            downstream_seconds: Family::new_with_constructor(latency),
            consent_requests: Family::default(),
            consent_wait_seconds: consent_wait(),
            server_starts: Family::default(),
            server_start_failures: Family::default(),
            server_restarts: Family::default(),
            sandbox_spawns: Family::default(),
            sandbox_limit_hits: Family::default(),
            reports: std::sync::OnceLock::new(),
            server_state: Family::default(),
            servers_held: Gauge::default(),
            pins_held: Gauge::default(),
            sessions: Gauge::default(),
            http_responses: Family::default(),
            registry: Registry::default(),
        };
        registry.register(
            "tool_calls",
            "tools/call requests by server, tool, policy decision and outcome",
            m.calls.clone(),
        );
        registry.register_with_unit(
            "tool_call_duration",
            "Time from a tools/call's arrival to its answer, consent included",
            Unit::Seconds,
            m.call_seconds.clone(),
        );
        registry.register_with_unit(
            "downstream_call_duration",
            "Time a downstream server took to answer a forwarded tools/call",
            Unit::Seconds,
            m.downstream_seconds.clone(),
        );
        registry.register(
            "consent_requests",
            "Consent questions put to a person, by answer (approved, denied, unasked)",
            m.consent_requests.clone(),
        );
        registry.register_with_unit(
            "consent_wait",
            "Time a call waited for a consent answer",
            Unit::Seconds,
            m.consent_wait_seconds.clone(),
        );
        registry.register(
            "server_starts",
            "Downstream servers that came up (first start or restart)",
            m.server_starts.clone(),
        );
        registry.register(
            "server_start_failures",
            "Attempts to start a downstream server that failed",
            m.server_start_failures.clone(),
        );
        registry.register(
            "server_restarts",
            "Downstream servers that went away while up and are being restarted",
            m.server_restarts.clone(),
        );
        registry.register(
            "sandbox_spawns",
            "Downstream servers started inside a sandbox",
            m.sandbox_spawns.clone(),
        );
        registry.register(
            "sandbox_limit_hits",
            "Sandboxed servers that ran into a limit of their sandbox, by limit (cpu, memory, pids, timeout, output)",
            m.sandbox_limit_hits.clone(),
        );
        registry.register(
            "server_state",
            "1 for the state each supervised server is in (up, restarting)",
            m.server_state.clone(),
        );
        registry.register(
            "servers_held",
            "Servers not started until their changed launch is approved",
            m.servers_held.clone(),
        );
        registry.register(
            "pins_held",
            "Tools held back because their definition changed since approval",
            m.pins_held.clone(),
        );
        registry.register(
            "sessions",
            "Client sessions open (stdio, and HTTP sessions of the handshake era; 2026-07-28 clients have none)",
            m.sessions.clone(),
        );
        registry.register(
            "http_responses",
            "Responses of the gateway's HTTP server (MCP endpoint, probes) by status code",
            m.http_responses.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The HTTP server answered with `code`.
    pub(crate) fn http_response(&self, code: u16) {
        self.http_responses
            .get_or_create(&StatusLabels {
                code: code.to_string(),
            })
            .inc();
    }

    /// A call ended: what its audit record says.
    pub(crate) fn call(&self, record: &AuditRecord, took: Duration) {
        let server = record.server.clone();
        let tool = if record.tool.is_empty() {
            record.exposed_name.clone()
        } else {
            record.tool.clone()
        };
        self.calls
            .get_or_create(&CallLabels {
                server: server.clone(),
                tool: tool.clone(),
                decision: record.decision.clone(),
                outcome: record.outcome.clone(),
            })
            .inc();
        self.call_seconds
            .get_or_create(&ToolLabels { server, tool })
            .observe(took.as_secs_f64());
    }

    /// A forwarded call was answered by its server (or failed there) after `took`.
    pub(crate) fn downstream(&self, server: &str, tool: &str, took: Duration) {
        self.downstream_seconds
            .get_or_create(&ToolLabels {
                server: server.to_owned(),
                tool: tool.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// A consent question ended with `answer` after `waited`.
    pub(crate) fn consent(&self, answer: &str, waited: Duration) {
        self.consent_requests
            .get_or_create(&ConsentLabels {
                answer: answer.to_owned(),
            })
            .inc();
        self.consent_wait_seconds.observe(waited.as_secs_f64());
    }

    /// A server came up; `sandboxed`: inside a sandbox.
    pub(crate) fn server_started(&self, server: &str, sandboxed: bool) {
        let labels = ServerLabels {
            server: server.to_owned(),
        };
        self.server_starts.get_or_create(&labels).inc();
        if sandboxed {
            self.sandbox_spawns.get_or_create(&labels).inc();
        }
    }

    /// A sandboxed server ran into `limit` (a [`moat_sandbox::LimitHit`]'s name).
    pub(crate) fn sandbox_limit_hit(&self, server: &str, limit: &str) {
        self.sandbox_limit_hits
            .get_or_create(&LimitLabels {
                server: server.to_owned(),
                limit: limit.to_owned(),
            })
            .inc();
    }

    /// The directory of the sandbox reports (made on first use).
    pub(crate) fn reports(&self) -> &super::report_dir::ReportDir {
        self.reports.get_or_init(super::report_dir::ReportDir::new)
    }

    /// An attempt to start a server failed.
    pub(crate) fn server_start_failed(&self, server: &str) {
        self.server_start_failures
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .inc();
    }

    /// A server that was up went away and is being restarted.
    pub(crate) fn server_restarting(&self, server: &str) {
        self.server_restarts
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .inc();
    }

    /// The metrics in the Prometheus text format, the gauges set from `now`.
    pub(crate) fn render(&self, now: &Snapshot) -> String {
        // Servers that left the configuration leave the gauge with them.
        self.server_state.clear();
        for (server, up) in &now.servers {
            let state = if *up { "up" } else { "restarting" };
            self.server_state
                .get_or_create(&StateLabels {
                    server: server.clone(),
                    state: state.to_owned(),
                })
                .set(1);
        }
        self.servers_held.set(gauge(now.held_servers));
        self.pins_held.set(gauge(now.held_tools));
        self.sessions.set(gauge(now.sessions));
        let mut out = String::new();
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            tracing::warn!(error = %e, "metrics not encoded");
        }
        out
    }
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
