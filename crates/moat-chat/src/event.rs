//! What happens during a conversation, as it happens: the terminal prints these, `--json`
//! writes each as one JSON line.

use serde::Serialize;
use serde_json::Value;

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A piece of the model's text.
    Text {
        /// The new text.
        delta: String,
    },
    /// The model asked for a tool call.
    ToolCall {
        /// The call's id.
        id: String,
        /// The tool (`server__tool`).
        name: String,
        /// Its arguments.
        arguments: Value,
    },
    /// Consent was asked for a call, and answered.
    Consent {
        /// The question as the gateway put it.
        message: String,
        /// The answer (`approve once`, …, `deny`).
        choice: String,
    },
    /// A tool call finished (or was refused).
    ToolResult {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// `allowed`, `refused` (policy, consent or an unknown tool) or `failed`.
        decision: String,
        /// Whether the model is told it failed.
        is_error: bool,
        /// How long it took.
        ms: f64,
        /// The start of what the model is told.
        text: String,
    },
    /// A server asked the user to open a link (URL-mode elicitation), and was answered.
    UrlElicitation {
        /// The server's message.
        message: String,
        /// The link.
        url: String,
        /// The id its completion will name.
        elicitation_id: Option<String>,
        /// `opened` (in the browser, after a yes), `accepted` (yes, but no browser could be
        /// started: the person opens it), `declined`, `cancelled` (no answer) or `refused`
        /// (not a web link).
        choice: String,
    },
    /// The server says the page a link led to is done (`notifications/elicitation/complete`).
    ElicitationComplete {
        /// The elicitation's id.
        elicitation_id: String,
    },
    /// A server's sampling request was answered by the model.
    Sampled {
        /// What the model wrote for the server.
        text: String,
    },
    /// A request to the provider failed and is retried.
    Retry {
        /// Which attempt failed (1-based).
        attempt: u32,
        /// The status, or 0 for a connection error.
        status: u16,
        /// How long until the next one.
        wait_ms: u64,
    },
    /// Tokens one model turn read and wrote.
    Usage {
        /// Tokens read.
        input_tokens: u64,
        /// Tokens written.
        output_tokens: u64,
        /// Who counted: `provider` (its `usage`), or `o200k_base` when it reported none.
        counted_by: String,
    },
    /// Old tool results were cut to keep the conversation within the context budget.
    Trimmed {
        /// How many results were cut.
        results: usize,
        /// The count of the last request's input tokens (the provider's, else `o200k_base`).
        input_tokens: u64,
    },
    /// The model refused: the prompt's last event instead of an answer. The prompt and the
    /// refused turn are left out of the conversation (as Anthropic asks before going on).
    Refusal {
        /// The model's refusal message (OpenAI's refusal content); with Anthropic, which
        /// refuses by stop reason only, the text it wrote before stopping, if any.
        text: String,
    },
    /// The final answer to the prompt.
    Answer {
        /// Its text.
        text: String,
    },
    /// The user stopped the prompt midway (Ctrl-C); the conversation goes on.
    Cancelled,
    /// The prompt failed.
    Error {
        /// What went wrong and what to do.
        message: String,
    },
}

/// Where events go.
pub type EventSink = std::sync::Arc<dyn Fn(&Event) + Send + Sync>;
