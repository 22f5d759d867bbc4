//! Traces out over OTLP/HTTP (protobuf): a `tracing` layer that turns the gateway's
//! telemetry spans ([`super::TARGET`]) into OpenTelemetry spans and exports them in
//! batches from a thread of its own. Nothing of it exists unless an endpoint is
//! configured (`[telemetry] otlp_endpoint`, or `OTEL_EXPORTER_OTLP_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use crate::config::telemetry::TelemetryConfig;

/// The service name when neither the configuration nor `OTEL_SERVICE_NAME` gives one.
const DEFAULT_SERVICE: &str = "moat-gateway";

/// Why traces cannot be exported as configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// The exporter could not be built (a bad endpoint URL, usually).
    #[error("OTLP exporter: {0}")]
    Exporter(String),
    /// A protocol other than HTTP/protobuf was asked for.
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0}: moat exports traces over http/protobuf only (unset it, or set it to http/protobuf)"
    )]
    Protocol(String),
}

/// Keeps the exporter running; dropping it sends what is still buffered and stops the
/// exporter's thread.
#[derive(Debug)]
pub struct OtlpGuard {
    provider: SdkTracerProvider,
}

impl OtlpGuard {
    /// Sends every span ended so far (blocks until the collector answered or timed out).
    pub fn flush(&self) {
        if let Err(e) = self.provider.force_flush() {
            tracing::debug!(error = %e, "spans not flushed");
        }
    }
}

impl Drop for OtlpGuard {
    fn drop(&mut self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!(error = %e, "span exporter did not shut down cleanly");
        }
    }
}

/// Whether traces are to be exported: an endpoint in the configuration or in the
/// standard variables.
pub fn enabled(config: &TelemetryConfig) -> bool {
    config.otlp_endpoint.is_some()
        || env_set("OTEL_EXPORTER_OTLP_ENDPOINT")
        || env_set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
}

fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

/// The layer that exports the gateway's spans, and the guard that keeps it running;
/// `None` when traces are off ([`enabled`]). The layer sees only the telemetry spans.
#[allow(clippy::type_complexity)]
pub fn layer<S>(
    config: &TelemetryConfig,
) -> Result<Option<(Box<dyn Layer<S> + Send + Sync>, OtlpGuard)>, OtlpError>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    if !enabled(config) {
        return Ok(None);
    }
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_default();
    if !protocol.is_empty() && protocol != "http/protobuf" {
        return Err(OtlpError::Protocol(protocol));
    }
    let mut exporter = SpanExporter::builder().with_http();
    if let Some(base) = &config.otlp_endpoint {
        exporter = exporter.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
    }
    let exporter = exporter
        .build()
        .map_err(|e| OtlpError::Exporter(e.to_string()))?;
    let service = config
        .service_name
        .clone()
        .or_else(|| {
            std::env::var("OTEL_SERVICE_NAME")
                .ok()
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_SERVICE.to_owned());
    let resource = Resource::builder().with_service_name(service).build();
    let provider = SdkTracerProvider::builder()
        .with_resource(resource)
        .with_batch_exporter(exporter)
        .build();
    let tracer = provider.tracer("moat");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(Targets::new().with_target(super::TARGET, tracing::Level::INFO));
    Ok(Some((Box::new(layer), OtlpGuard { provider })))
}
