//! What a server offers: its tools, resources, templates and prompts, the completion
//! handler and the fallback for unknown tools. Changed through a
//! [`Batch`](super::Batch), read by each connection's dispatch.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::Arc;

use moat_protocol::ErrorObject;
use moat_protocol::types::{CallToolResult, CompleteRequestParams, Completion};
use serde_json::value::RawValue;

use super::prompts::PromptEntry;
use super::resources::{ResourceEntry, TemplateEntry};
use super::tools::ToolEntry;
use crate::handler::{BoxFuture, RequestContext};

/// Answers `tools/call` for a name no registered tool has.
pub(super) type UnknownToolFn = Arc<
    dyn Fn(
            RequestContext,
            String,
            Option<Box<RawValue>>,
        ) -> BoxFuture<Result<CallToolResult, ErrorObject>>
        + Send
        + Sync,
>;

/// Answers `completion/complete`.
pub(super) type CompletionFn = Arc<
    dyn Fn(RequestContext, CompleteRequestParams) -> BoxFuture<Result<Completion, ErrorObject>>
        + Send
        + Sync,
>;

/// Everything registered, in the order the lists show it.
#[derive(Default)]
pub(crate) struct Registry {
    pub(super) tools: Vec<ToolEntry>,
    /// Each tool's place in `tools`, by name.
    pub(super) tool_index: HashMap<String, usize>,
    pub(super) resources: Vec<ResourceEntry>,
    pub(super) templates: Vec<TemplateEntry>,
    pub(super) prompts: Vec<PromptEntry>,
    pub(super) completion: Option<CompletionFn>,
    pub(super) unknown_tool: Option<UnknownToolFn>,
    /// Which tools `tools/list` shows to the request asking.
    pub(super) tool_filter: Option<ToolFilter>,
}

/// Whether the request asking may see a tool in the list (see
/// [`Batch::tool_filter`](super::Batch::tool_filter)).
pub(super) type ToolFilter =
    Arc<dyn Fn(&RequestContext, &moat_protocol::types::Tool) -> bool + Send + Sync>;

/// A handler's error as the JSON-RPC error to answer with: an [`ErrorObject`] as it is
/// (a gateway passing on its server's), anything else as an internal error.
pub(crate) fn as_error_object<E: Display + 'static>(e: &E) -> ErrorObject {
    let any: &dyn std::any::Any = e;
    match any.downcast_ref::<ErrorObject>() {
        Some(error) => error.clone(),
        None => ErrorObject::internal(e.to_string()),
    }
}
