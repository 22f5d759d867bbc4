//! Pinning: tool definitions hashed on first approval, changed definitions held back.

use serde::Deserialize;

/// The `[pins]` table of the configuration.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PinsConfig {}
