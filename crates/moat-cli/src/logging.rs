//! Where the `tracing` subscriber is set up: logs on stderr (text or JSON lines) and, for
//! the gateway, the OpenTelemetry layer that exports its spans.
//!
//! A subscriber cannot take a trace layer later (a reloaded layer hides the span context
//! the layer keeps, so trace context could not be passed on): the gateway's subscriber is
//! installed with the `[telemetry]` of its configuration read beforehand, before it logs
//! anything. Every other command gets its subscriber first thing.

use std::sync::OnceLock;

use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::cli::LogFormat;

/// `-v` and `--log-format`, kept for a subscriber installed later.
static SETTINGS: OnceLock<(u8, LogFormat)> = OnceLock::new();

/// Notes the logging settings; installs the subscriber unless `later` (the gateway's:
/// [`install`] once its configuration is read).
pub fn init(verbose: u8, format: LogFormat, later: bool) {
    let _ = SETTINGS.set((verbose, format));
    if !later {
        let _ = install(None);
    }
}

/// Installs the subscriber: logs at the level `-v` asks for (`MOAT_LOG` overrides), on
/// stderr (on stdio, stdout is the wire), as text or JSON lines; and with `traces`, the
/// layer that exports the gateway's spans as it says (or as the `OTEL_EXPORTER_OTLP_*`
/// variables say). Keep the guard for as long as spans should be sent; `None` when traces
/// are off.
pub fn install(
    traces: Option<&moat_host::config::telemetry::TelemetryConfig>,
) -> anyhow::Result<Option<moat_host::telemetry::OtlpGuard>> {
    let (verbose, format) = SETTINGS.get().copied().unwrap_or((0, LogFormat::Text));
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
    let exporter = match traces {
        Some(config) => moat_host::telemetry::otlp::layer::<Registry>(config)?,
        None => None,
    };
    let (layer, guard) = match exporter {
        Some((layer, guard)) => (Some(layer), Some(guard)),
        None => (None, None),
    };
    // An absent layer is skipped: with traces off, no span is built for it.
    let _ = tracing_subscriber::registry()
        .with(layer)
        .with(logs.with_filter(filter))
        .try_init();
    Ok(guard)
}

/// Sends the spans still buffered and stops the exporter, waiting for the collector off
/// the runtime's thread (a stdio gateway has only that one).
pub async fn finish(traces: Option<moat_host::telemetry::OtlpGuard>) {
    if let Some(traces) = traces {
        let _ = tokio::task::spawn_blocking(move || drop(traces)).await;
    }
}
