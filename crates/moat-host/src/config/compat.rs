//! The `[compat]` table: how the gateway shapes what it passes on, for clients that hand
//! tool definitions to a model provider as they are.

use serde::Deserialize;

/// `[compat]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompatConfig {
    /// `schemas`: the tool schemas the gateway's clients see.
    pub schemas: SchemaMode,
}

/// Which tool schemas the gateway's clients see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SchemaMode {
    /// `"as-is"`: each server's schemas as it gives them.
    #[default]
    AsIs,
    /// `"portable"`: rewritten into the form Gemini, OpenAI and Anthropic all accept
    /// (`moat::schema::portable`). Pins still hash the server's own definition, and
    /// arguments are still checked against its own schema.
    Portable,
}
