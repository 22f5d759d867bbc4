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
    /// Send traces over OTLP to this base URL (e.g. `"http://127.0.0.1:4318"`, where
    /// `/v1/traces` is appended, or with gRPC `"http://127.0.0.1:4317"`).
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` are used when
    /// this is not set.
    pub otlp_endpoint: Option<String>,
    /// How traces are sent; default `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, then
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`, then HTTP/protobuf.
    pub otlp_protocol: Option<OtlpProtocol>,
    /// The `service.name` of the gateway's spans; default `OTEL_SERVICE_NAME`, else
    /// `moat-gateway`.
    pub service_name: Option<String>,
}

/// An OTLP transport, named as `OTEL_EXPORTER_OTLP_PROTOCOL` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub enum OtlpProtocol {
    /// `http/protobuf`: protobuf bodies POSTed to `/v1/traces`.
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// `grpc`: the OTLP gRPC service.
    #[serde(rename = "grpc")]
    Grpc,
}

impl OtlpProtocol {
    /// The protocol `OTEL_EXPORTER_OTLP_PROTOCOL` names (`None`: one not supported).
    pub fn from_name(name: &str) -> Option<OtlpProtocol> {
        match name {
            "http/protobuf" => Some(OtlpProtocol::HttpProtobuf),
            "grpc" => Some(OtlpProtocol::Grpc),
            _ => None,
        }
    }
}
