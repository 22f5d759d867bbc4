//! Traces out over OTLP, HTTP/protobuf or gRPC: a `tracing` layer that turns the
//! gateway's telemetry spans ([`super::TARGET`]) into OpenTelemetry spans and exports
//! them in batches from a thread of its own. Nothing of it exists unless an endpoint is
//! configured (`[telemetry] otlp_endpoint`, or `OTEL_EXPORTER_OTLP_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`): no thread, no runtime, no span built.
//!
//! The SDK's batch processor runs each export to completion on its thread with a plain
//! executor. That suits the blocking HTTP client; the gRPC client (tonic) needs a tokio
//! reactor, so the gRPC exporter carries a current-thread runtime of its own and runs
//! each export on it, on the batch thread: the gateway's runtime never waits for a
//! collector, and a gateway without gRPC traces has no such runtime.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use crate::config::telemetry::{OtlpProtocol, TelemetryConfig};

/// The service name when neither the configuration nor `OTEL_SERVICE_NAME` gives one.
const DEFAULT_SERVICE: &str = "moat-gateway";

/// Why traces cannot be exported as configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// The exporter could not be built (a bad endpoint URL, usually).
    #[error("OTLP exporter: {0}")]
    Exporter(String),
    /// A protocol moat does not speak was asked for in the standard variables.
    #[error(
        "{0}: moat exports traces over grpc or http/protobuf (unset it, or set it to one of those)"
    )]
    Protocol(String),
    /// The gRPC exporter's runtime could not be made.
    #[error("OTLP gRPC exporter's runtime: {0}")]
    Runtime(#[source] std::io::Error),
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
    let service = service_name(config);
    let resource = Resource::builder().with_service_name(service).build();
    let provider = match protocol(config)? {
        OtlpProtocol::Grpc => SdkTracerProvider::builder()
            .with_resource(resource)
            .with_batch_exporter(GrpcExporter::build(config.otlp_endpoint.as_deref())?),
        _ => {
            let mut exporter = SpanExporter::builder().with_http();
            if let Some(base) = &config.otlp_endpoint {
                exporter =
                    exporter.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
            }
            let exporter = exporter
                .build()
                .map_err(|e| OtlpError::Exporter(e.to_string()))?;
            SdkTracerProvider::builder()
                .with_resource(resource)
                .with_batch_exporter(exporter)
        }
    }
    .build();
    let tracer = provider.tracer("moat");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(Targets::new().with_target(super::TARGET, tracing::Level::INFO));
    Ok(Some((Box::new(layer), OtlpGuard { provider })))
}

/// The protocol to export with: the configuration's, else the standard variables' (the
/// traces-specific one first), else HTTP/protobuf, the specification's default.
pub fn protocol(config: &TelemetryConfig) -> Result<OtlpProtocol, OtlpError> {
    if let Some(protocol) = config.otlp_protocol {
        return Ok(protocol);
    }
    for var in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        match std::env::var(var) {
            Ok(name) if !name.is_empty() => {
                return OtlpProtocol::from_name(name.trim())
                    .ok_or_else(|| OtlpError::Protocol(format!("{var}={name}")));
            }
            _ => {}
        }
    }
    Ok(OtlpProtocol::HttpProtobuf)
}

fn service_name(config: &TelemetryConfig) -> String {
    config
        .service_name
        .clone()
        .or_else(|| {
            std::env::var("OTEL_SERVICE_NAME")
                .ok()
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_SERVICE.to_owned())
}

/// The OTLP gRPC exporter and the runtime its client lives on. The SDK calls
/// [`export`](opentelemetry_sdk::trace::SpanExporter::export) from its batch thread,
/// never concurrently and never inside a tokio runtime, so blocking on the exporter's own
/// runtime there is safe; the runtime's tasks (the channel's) run only during an export.
#[derive(Debug)]
struct GrpcExporter {
    inner: SpanExporter,
    /// `None` once dropped (see [`Drop`]).
    runtime: Option<tokio::runtime::Runtime>,
}

impl GrpcExporter {
    fn build(endpoint: Option<&str>) -> Result<GrpcExporter, OtlpError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(OtlpError::Runtime)?;
        // The channel spawns its worker when made: on this runtime, not the caller's.
        let inner = {
            let _on = runtime.enter();
            let mut exporter = SpanExporter::builder().with_tonic();
            if let Some(base) = endpoint {
                exporter = exporter.with_endpoint(base.to_owned());
            }
            exporter.build()
        };
        let inner = match inner {
            Ok(inner) => inner,
            Err(e) => {
                // Dropped here, perhaps on the caller's runtime: without blocking.
                runtime.shutdown_background();
                return Err(OtlpError::Exporter(e.to_string()));
            }
        };
        Ok(GrpcExporter {
            inner,
            runtime: Some(runtime),
        })
    }
}

impl opentelemetry_sdk::trace::SpanExporter for GrpcExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        match &self.runtime {
            Some(runtime) => runtime.block_on(self.inner.export(batch)),
            None => Err(OTelSdkError::AlreadyShutdown),
        }
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl Drop for GrpcExporter {
    fn drop(&mut self) {
        // The batch thread drops the exporter, but an error path may drop it on a
        // runtime's thread, where dropping a runtime (which blocks) would panic.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
