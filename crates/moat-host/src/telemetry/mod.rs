//! What the gateway tells an operator about itself: Prometheus metrics ([`metrics`],
//! served by [`endpoint`]), OpenTelemetry traces of every call ([`spans`], exported by
//! [`otlp`]) with W3C trace context carried in `_meta` ([`propagation`]).
//!
//! Both are off unless configured (`[telemetry]`, [`crate::config::telemetry`]): with no
//! metrics address nothing is counted, and with no trace subscriber the spans of the call
//! path are disabled call sites that build nothing.

pub mod endpoint;
pub(crate) mod metrics;
pub mod otlp;
pub mod propagation;
pub(crate) mod spans;

pub use endpoint::MetricsEndpoint;
pub use otlp::{OtlpError, OtlpGuard};

/// The `tracing` target of every span the gateway makes for telemetry: a subscriber
/// filters on it to export spans without turning on the gateway's other logs.
pub const TARGET: &str = "moat::telemetry";
