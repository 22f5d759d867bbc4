//! The audit trail: every tool call, appended to an embedded SQLite store.

use serde::Deserialize;

/// The `[audit]` table of the configuration.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AuditConfig {}
