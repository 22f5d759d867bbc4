//! Policy: which tools are visible and callable, decided deny → ask → allow.

use serde::Deserialize;

/// The `[policy]` table of the configuration.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PolicyConfig {}
