//! The `[tool_search]` table: when the gateway lists meta-tools instead of its catalog
//! ([`crate::search`] does the searching).

use std::path::PathBuf;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

/// `[tool_search]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolSearchConfig {
    /// `auto` (on when the catalog is larger than `max_tools` or `max_tokens`), `on`, `off`.
    pub mode: SearchMode,
    /// `auto` turns search on above this many listed tools.
    pub max_tools: usize,
    /// `auto` turns search on above this many tokens of tool definitions.
    pub max_tokens: usize,
    /// Tools listed directly even in search mode (globs on `server__tool`).
    pub always: Vec<String>,
    /// A directory with the embedding model (`config.json`, `tokenizer.json`,
    /// `model.safetensors`); default: `$MOAT_MODEL_DIR`, then the standard caches.
    pub model: Option<PathBuf>,
    /// Results of a search when the model does not ask for a number.
    pub limit: usize,
}

impl Default for ToolSearchConfig {
    fn default() -> Self {
        ToolSearchConfig {
            mode: SearchMode::Auto,
            max_tools: 40,
            max_tokens: 10_000,
            always: Vec::new(),
            model: None,
            limit: 8,
        }
    }
}

/// Whether the gateway lists meta-tools instead of its catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SearchMode {
    /// On when the catalog is larger than the configured bounds (decided at start and on reload).
    #[default]
    Auto,
    On,
    Off,
}

impl ToolSearchConfig {
    /// The `always` globs, compiled; a bad glob is reported by the configuration loader.
    pub(crate) fn always_set(&self) -> Result<GlobSet, globset::Error> {
        let mut builder = GlobSetBuilder::new();
        for pattern in &self.always {
            builder.add(Glob::new(pattern)?);
        }
        builder.build()
    }
}
