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
    /// Send traces over OTLP to this base URL: for `http/protobuf` e.g.
    /// `"http://127.0.0.1:4318"` (`/v1/traces` is appended), for `grpc` e.g.
    /// `"http://127.0.0.1:4317"` (used as it is). `OTEL_EXPORTER_OTLP_ENDPOINT` and
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` are used when this is not set.
    pub otlp_endpoint: Option<String>,
    /// How traces are sent; default `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`.
    pub otlp_protocol: Option<OtlpProtocol>,
    /// The `service.name` of the gateway's spans; default `OTEL_SERVICE_NAME`, else
    /// `moat-gateway`.
    pub service_name: Option<String>,
}

/// An OTLP transport (the values of `OTEL_EXPORTER_OTLP_PROTOCOL` that moat speaks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub enum OtlpProtocol {
    /// Protobuf in HTTP POSTs to `/v1/traces` (the collector's port 4318).
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// The OTLP gRPC service (the collector's port 4317).
    #[serde(rename = "grpc")]
    Grpc,
}

impl OtlpProtocol {
    /// The protocol named as `OTEL_EXPORTER_OTLP_PROTOCOL` names it; `None` for one moat
    /// does not speak (`http/json`, or a typo).
    pub fn from_name(name: &str) -> Option<OtlpProtocol> {
        match name {
            "http/protobuf" => Some(OtlpProtocol::HttpProtobuf),
            "grpc" => Some(OtlpProtocol::Grpc),
            _ => None,
        }
    }

    /// The name the configuration and the standard variables give it.
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::HttpProtobuf => "http/protobuf",
            OtlpProtocol::Grpc => "grpc",
        }
    }
}
