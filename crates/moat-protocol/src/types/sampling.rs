//! Sampling: the server asks the client's model for a completion (`sampling/createMessage`).

use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::serde_util::opt_f64_compact;
use super::{
    AudioContent, ImageContent, Role, TaskMetadata, TextContent, Tool, ToolResultContent,
    ToolUseContent,
};
use crate::{JsonObject, Meta};

/// A content block of a sampling message, tagged by `"type"`. Tool use and tool results are
/// 2025-11-25+.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SamplingMessageContentBlock {
    /// `"text"`.
    Text(TextContent),
    /// `"image"`.
    Image(ImageContent),
    /// `"audio"` (2025-03-26+).
    Audio(AudioContent),
    /// `"tool_use"` (2025-11-25+).
    ToolUse(ToolUseContent),
    /// `"tool_result"` (2025-11-25+).
    ToolResult(ToolResultContent),
}

impl SamplingMessageContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        SamplingMessageContentBlock::Text(TextContent::new(text))
    }

    /// The text, if this is a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            SamplingMessageContentBlock::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

/// The content of a sampling message or result: one block, or (2025-11-25+) an array.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum SamplingContent {
    /// A single block (every revision).
    Single(SamplingMessageContentBlock),
    /// Several blocks (2025-11-25+).
    Multiple(Vec<SamplingMessageContentBlock>),
}

impl SamplingContent {
    /// The blocks, whichever form they came in.
    pub fn blocks(&self) -> &[SamplingMessageContentBlock] {
        match self {
            SamplingContent::Single(b) => std::slice::from_ref(b),
            SamplingContent::Multiple(v) => v,
        }
    }
}

impl From<SamplingMessageContentBlock> for SamplingContent {
    fn from(b: SamplingMessageContentBlock) -> Self {
        SamplingContent::Single(b)
    }
}

impl From<Vec<SamplingMessageContentBlock>> for SamplingContent {
    fn from(v: Vec<SamplingMessageContentBlock>) -> Self {
        SamplingContent::Multiple(v)
    }
}

impl<'de> Deserialize<'de> for SamplingContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ContentVisitor;
        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = SamplingContent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content block or an array of content blocks")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SamplingContent, A::Error> {
                SamplingMessageContentBlock::deserialize(MapAccessDeserializer::new(map))
                    .map(SamplingContent::Single)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<SamplingContent, A::Error> {
                Vec::deserialize(SeqAccessDeserializer::new(seq)).map(SamplingContent::Multiple)
            }
        }
        d.deserialize_any(ContentVisitor)
    }
}

/// A message of the conversation to sample from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingMessage {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: SamplingContent,
    /// Metadata (2025-11-25+).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl SamplingMessage {
    /// A text message from the user.
    pub fn user_text(text: impl Into<String>) -> Self {
        SamplingMessage {
            role: Role::User,
            content: SamplingMessageContentBlock::text(text).into(),
            meta: None,
        }
    }

    /// A text message from the assistant.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        SamplingMessage {
            role: Role::Assistant,
            content: SamplingMessageContentBlock::text(text).into(),
            meta: None,
        }
    }
}

/// A hint for model selection: a (sub)string of a model name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelHint {
    /// E.g. `"claude-3-5-sonnet"` or `"sonnet"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The server's preferences for model selection. Priorities are in 0..=1.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPreferences {
    /// Model name hints, in order of preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<Vec<ModelHint>>,
    /// How much cost matters.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_f64_compact"
    )]
    pub cost_priority: Option<f64>,
    /// How much speed matters.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_f64_compact"
    )]
    pub speed_priority: Option<f64>,
    /// How much capability matters.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_f64_compact"
    )]
    pub intelligence_priority: Option<f64>,
}

/// Which MCP servers' context to include in the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum IncludeContext {
    /// None.
    None,
    /// The requesting server's.
    ThisServer,
    /// All connected servers'.
    AllServers,
}

/// How the model may use the offered tools (2025-11-25+).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ToolChoiceMode {
    /// The model decides.
    Auto,
    /// The model must call at least one tool.
    Required,
    /// The model must not call tools.
    None,
}

/// Tool selection for sampling (2025-11-25+).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolChoice {
    /// The mode; `auto` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ToolChoiceMode>,
}

/// Params of `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageRequestParams {
    /// The conversation.
    pub messages: Vec<SamplingMessage>,
    /// Model selection preferences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_preferences: Option<ModelPreferences>,
    /// System prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Which servers' context to include.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_context: Option<IncludeContext>,
    /// Sampling temperature.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_f64_compact"
    )]
    pub temperature: Option<f64>,
    /// Maximum number of tokens to sample.
    pub max_tokens: u64,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Provider-specific metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
    /// Tools the model may use (2025-11-25+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// How the model may use them (2025-11-25+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// 2025-11-25: run as a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskMetadata>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Result of `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageResult {
    /// Normally `assistant`.
    pub role: Role,
    /// The sampled content.
    pub content: SamplingContent,
    /// The model that produced it.
    pub model: String,
    /// Why sampling stopped: `endTurn`, `stopSequence`, `maxTokens`, `toolUse`, or other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl CreateMessageResult {
    /// The first text block of the sampled content, if there is one.
    pub fn text(&self) -> Option<&str> {
        self.content.blocks().iter().find_map(|b| b.as_text())
    }
}
