//! The conversation, in one shape for every provider: each provider module turns it into
//! its own wire format, so a transcript can be resumed with another provider.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Turn {
    /// What the user typed.
    User {
        /// The text.
        text: String,
    },
    /// What the model answered: text, tool calls, or both.
    Assistant {
        /// The text (may be empty when the model only calls tools).
        #[serde(default)]
        text: String,
        /// The tools it asked to call, in its order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The results of the previous assistant turn's tool calls, one per call.
    Tool {
        /// The results, in the calls' order.
        results: Vec<ToolResult>,
    },
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (answered by the result's `id`).
    pub id: String,
    /// The tool's name as the model saw it.
    pub name: String,
    /// The arguments (a JSON object).
    pub arguments: Value,
}

/// What a tool call returned, as the model will read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call's id.
    pub id: String,
    /// The tool's name as the model saw it.
    pub name: String,
    /// The result as text.
    pub content: String,
    /// Whether the call failed or was refused.
    #[serde(default)]
    pub is_error: bool,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDef {
    /// Its name in the provider's alphabet (`[A-Za-z0-9_-]`, at most 64 characters).
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its arguments' JSON Schema (always `"type": "object"`).
    pub input_schema: Value,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// A finished answer.
    EndTurn,
    /// It wants tool results.
    ToolUse,
    /// It ran out of output tokens.
    MaxTokens,
    /// It refused to answer (Anthropic's `refusal` stop reason, or OpenAI's refusal content).
    Refusal,
    /// Something else the provider named.
    Other(String),
}

/// Tokens the provider counted, when it says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Tokens read.
    pub input_tokens: u64,
    /// Tokens written.
    pub output_tokens: u64,
}

/// One model turn, assembled from the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The text.
    pub text: String,
    /// The tool calls.
    pub tool_calls: Vec<ToolCall>,
    /// Why it stopped.
    pub stop: StopReason,
    /// The model's refusal message, when it refused with one (OpenAI's `refusal` content;
    /// Anthropic refuses by stop reason only, so there it is `None` and `stop` says it).
    pub refusal: Option<String>,
    /// Token counts.
    pub usage: Usage,
}
