//! Prompts: typed arguments (derived from the handler's argument type) and outputs.

use std::convert::Infallible;
use std::fmt::Display;
use std::sync::Arc;

use moat_protocol::ErrorObject;
use moat_protocol::types::{GetPromptResult, Prompt, PromptArgument, PromptMessage};
use serde_json::Value;

use crate::handler::{BoxFuture, RequestContext};

/// What a prompt handler may return.
pub trait PromptOutput: Send + 'static {
    /// Convert into the `prompts/get` result.
    fn into_prompt_result(self) -> GetPromptResult;
}

impl PromptOutput for GetPromptResult {
    fn into_prompt_result(self) -> GetPromptResult {
        self
    }
}

impl PromptOutput for Vec<PromptMessage> {
    fn into_prompt_result(self) -> GetPromptResult {
        GetPromptResult::new(self)
    }
}

impl PromptOutput for PromptMessage {
    fn into_prompt_result(self) -> GetPromptResult {
        GetPromptResult::new(vec![self])
    }
}

impl PromptOutput for String {
    fn into_prompt_result(self) -> GetPromptResult {
        GetPromptResult::new(vec![PromptMessage::user_text(self)])
    }
}

impl PromptOutput for &'static str {
    fn into_prompt_result(self) -> GetPromptResult {
        self.to_owned().into_prompt_result()
    }
}

pub(crate) type PromptFn = Arc<
    dyn Fn(RequestContext, Value) -> BoxFuture<Result<GetPromptResult, ErrorObject>> + Send + Sync,
>;

#[derive(Clone)]
pub(crate) struct PromptEntry {
    pub(crate) def: Prompt,
    pub(crate) get: PromptFn,
}

/// The prompt arguments an argument type's schema describes: one per property, required
/// as the schema says, with the property's description.
pub(crate) fn arguments_from_schema(schema: &Value) -> Vec<PromptArgument> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, prop)| {
            let mut arg = PromptArgument::new(name.clone());
            arg.description = prop
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned);
            arg.required = Some(required.contains(&name.as_str()));
            arg
        })
        .collect()
}

/// What a prompt handler returns: any [`PromptOutput`], or a `Result` of one.
pub trait PromptReturn: Send + 'static {
    /// The output on success.
    type Output: PromptOutput;
    /// The error on failure ([`Infallible`] for a handler that returns its output itself).
    type Error: Display + Send + 'static;
    /// The output, or the error.
    fn into_result(self) -> Result<Self::Output, Self::Error>;
}

impl<T: PromptOutput> PromptReturn for T {
    type Output = T;
    type Error = Infallible;
    fn into_result(self) -> Result<T, Infallible> {
        Ok(self)
    }
}

impl<T: PromptOutput, E: Display + Send + 'static> PromptReturn for Result<T, E> {
    type Output = T;
    type Error = E;
    fn into_result(self) -> Result<T, E> {
        self
    }
}
