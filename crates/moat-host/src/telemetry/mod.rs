//! What the gateway tells an operator about itself: Prometheus metrics (`metrics`,
//! served by `endpoint`; sandbox limit hits read from the sandbox's reports, `sandbox`),
//! OpenTelemetry traces of every call (`spans`, exported by
//! `otlp`) with W3C trace context carried in `_meta` (`propagation`).
//!
//! Both are off unless configured (`[telemetry]`, [`crate::config::telemetry`]): with no
//! metrics address nothing is counted, and with no trace subscriber the spans of the call
//! path are disabled call sites that build nothing.

pub mod endpoint;
pub(crate) mod metrics;
pub mod otlp;
pub mod propagation;
pub(crate) mod report_dir;
pub(crate) mod sandbox;
pub(crate) mod spans;

pub use endpoint::MetricsEndpoint;
pub use otlp::{OtlpError, OtlpGuard};

/// The `tracing` target of every span the gateway makes for telemetry: a subscriber
/// filters on it to export spans without turning on the gateway's other logs.
pub const TARGET: &str = "moat::telemetry";

/// A call ended: its metrics counted and its span given what its audit record says.
pub(crate) fn call_ended(
    metrics: Option<&metrics::Metrics>,
    span: &tracing::Span,
    record: &crate::audit::AuditRecord,
    took: std::time::Duration,
) {
    spans::ended(span, record);
    if let Some(metrics) = metrics {
        metrics.call(record, took);
    }
}

/// A consent question was answered (or could not be asked) after `waited`.
pub(crate) fn consent_answered(
    metrics: Option<&metrics::Metrics>,
    span: &tracing::Span,
    answer: &crate::consent::Answer,
    waited: std::time::Duration,
) {
    span.record("moat.consent", answer.how.as_str());
    if let Some(metrics) = metrics {
        let label = if answer.choice.approves() {
            "approved"
        } else if answer.unasked.is_some() {
            "unasked"
        } else {
            "denied"
        };
        metrics.consent(label, waited);
    }
}

/// A server came up (inside a sandbox when its configuration gives it a profile).
pub(crate) fn server_up(metrics: Option<&metrics::Metrics>, cfg: &crate::config::ServerConfig) {
    if let Some(metrics) = metrics {
        metrics.server_started(&cfg.name, cfg.profile().is_some());
    }
}

/// An attempt to start `server` failed.
pub(crate) fn server_start_failed(metrics: Option<&metrics::Metrics>, server: &str) {
    if let Some(metrics) = metrics {
        metrics.server_start_failed(server);
    }
}

/// `server` went away while up; the supervisor restarts it.
pub(crate) fn server_restarting(metrics: Option<&metrics::Metrics>, server: &str) {
    if let Some(metrics) = metrics {
        metrics.server_restarting(server);
    }
}
