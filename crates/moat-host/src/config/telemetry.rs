//! The `[telemetry]` table: where the gateway's metrics are served and where its traces
//! go ([`crate::telemetry`] does both). Everything is off unless set here, by a gateway
//! flag, or (for traces) by the standard `OTEL_EXPORTER_OTLP_*` variables.

use std::net::SocketAddr;

use serde::Deserialize;

/// `[telemetry]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct TelemetryConfig {
    /// Serve Prometheus metrics at `http://ADDR/metrics` (e.g. `"127.0.0.1:9464"`).
    pub metrics: Option<SocketAddr>,
    /// Send traces over OTLP/HTTP (protobuf) to this base URL (e.g.
    /// `"http://127.0.0.1:4318"`; `/v1/traces` is appended). `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// and `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` are used when this is not set.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of the gateway's spans; default `OTEL_SERVICE_NAME`, else
    /// `moat-gateway`.
    pub service_name: Option<String>,
}
