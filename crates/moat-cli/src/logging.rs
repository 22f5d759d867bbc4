//! Where the `tracing` subscriber is set up: logs on stderr (text or JSON lines) and, once
//! a command asks for it, the OpenTelemetry layer that exports the gateway's spans.
//!
//! The subscriber is installed before any command runs, but whether traces are exported
//! is known only once the gateway has read its configuration: the trace layer and its
//! filter are reloadable, and the filter lets nothing through until [`export_traces`]
//! installs the layer. Until then (and when traces stay off) the gateway's telemetry spans
//! are disabled call sites, as if the layer did not exist.

use std::sync::OnceLock;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

use crate::cli::LogFormat;

type TraceLayer = Option<Box<dyn Layer<Registry> + Send + Sync>>;

struct Handles {
    layer: reload::Handle<TraceLayer, Registry>,
    filter: reload::Handle<Targets, Registry>,
}

static TRACES: OnceLock<Handles> = OnceLock::new();

/// Installs the subscriber: logs at the level `-v` asks for (`MOAT_LOG` overrides), on
/// stderr (on stdio, stdout is the wire), as text or JSON lines.
pub fn init(verbose: u8, format: LogFormat) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_env("MOAT_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let logs = match format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
    };
    let (layer, layer_handle) = reload::Layer::new(None);
    // Nothing passes until traces are exported: no span is built for a layer that is not there.
    let (trace_filter, filter_handle) = reload::Layer::new(Targets::new());
    let installed = tracing_subscriber::registry()
        .with(layer.with_filter(trace_filter))
        .with(logs.with_filter(filter))
        .try_init();
    if installed.is_ok() {
        let _ = TRACES.set(Handles {
            layer: layer_handle,
            filter: filter_handle,
        });
    }
}

/// Exports the gateway's spans as `config` says (or the `OTEL_EXPORTER_OTLP_*` variables);
/// `None` when traces are off. Keep the guard for as long as spans should be sent.
pub fn export_traces(
    config: &moat_host::config::telemetry::TelemetryConfig,
) -> anyhow::Result<Option<moat_host::telemetry::OtlpGuard>> {
    let Some(handles) = TRACES.get() else {
        return Ok(None);
    };
    let Some((layer, guard)) = moat_host::telemetry::otlp::layer::<Registry>(config)? else {
        return Ok(None);
    };
    handles.layer.reload(Some(layer))?;
    handles
        .filter
        .reload(Targets::new().with_target(moat_host::telemetry::TARGET, tracing::Level::INFO))?;
    Ok(Some(guard))
}
