//! Model providers behind one trait: each turns the conversation into its wire format,
//! streams the answer back, and assembles a [`Reply`].
//!
//! The wire types are written here by hand, as `serde_json` values, rather than taken from
//! an SDK crate: Anthropic publishes no Rust SDK; the community OpenAI crates cover one API
//! each, bring their own HTTP stacks and retry logic, and lag the Responses API; and the
//! three formats need only the dozen fields a tool loop uses. `scripted` checks every
//! request against the rules the real services enforce.

use futures_util::future::BoxFuture;

use crate::ChatError;
use crate::event::Event;
use crate::message::{Reply, ToolDef, Turn};

pub mod anthropic;
mod http;
pub mod openai_chat;
pub mod openai_responses;

pub use http::Retry;

/// What is sent for one model turn.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The model.
    pub model: &'a str,
    /// The system prompt.
    pub system: Option<&'a str>,
    /// The conversation so far.
    pub turns: &'a [Turn],
    /// The tools the model may call.
    pub tools: &'a [ToolDef],
    /// The most tokens it may write (`None`: the provider's default, where it has one).
    pub max_tokens: Option<u32>,
}

/// A model API.
pub trait Provider: Send + Sync {
    /// Its name in messages (`Anthropic`, `OpenAI`, …).
    fn name(&self) -> &'static str;

    /// Sends one turn and streams the answer: text deltas and retries go to `on_event` as
    /// they arrive.
    fn complete<'a>(
        &'a self,
        request: Request<'a>,
        on_event: &'a (dyn Fn(&Event) + Send + Sync),
    ) -> BoxFuture<'a, Result<Reply, ChatError>>;
}

/// Parses a tool call's accumulated argument text; an empty text is no arguments.
pub(crate) fn parse_arguments(name: &str, text: &str) -> Result<serde_json::Value, ChatError> {
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    serde_json::from_str(text).map_err(|e| {
        ChatError::BadReply(format!(
            "the arguments of the call to {name} are not JSON ({e}): {text}"
        ))
    })
}
