//! Tools as typed async functions: arguments decoded from the request exactly once into the
//! handler's own type, results converted with [`ToolOutput`].

use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;

use moat_protocol::ErrorObject;
use moat_protocol::types::{CallToolResult, ContentBlock, Tool};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use super::options::TaskStart;
use crate::handler::{BoxFuture, RequestContext};
use crate::schema;

/// What a tool handler may return. Implemented for text-like values, content blocks,
/// a full [`CallToolResult`], and [`Json`] for structured output.
pub trait ToolOutput: Send + 'static {
    /// The `outputSchema` this output type implies, if any.
    fn output_schema() -> Option<Value> {
        None
    }
    /// Convert into the result sent to the client.
    fn into_call_result(self) -> CallToolResult;
}

impl ToolOutput for CallToolResult {
    fn into_call_result(self) -> CallToolResult {
        self
    }
}

impl ToolOutput for String {
    fn into_call_result(self) -> CallToolResult {
        CallToolResult::text(self)
    }
}

impl ToolOutput for &'static str {
    fn into_call_result(self) -> CallToolResult {
        CallToolResult::text(self)
    }
}

impl ToolOutput for ContentBlock {
    fn into_call_result(self) -> CallToolResult {
        CallToolResult::new(vec![self])
    }
}

impl ToolOutput for Vec<ContentBlock> {
    fn into_call_result(self) -> CallToolResult {
        CallToolResult::new(self)
    }
}

impl ToolOutput for () {
    fn into_call_result(self) -> CallToolResult {
        CallToolResult::new(Vec::new())
    }
}

macro_rules! display_output {
    ($($t:ty),*) => {$(
        impl ToolOutput for $t {
            fn into_call_result(self) -> CallToolResult {
                CallToolResult::text(self.to_string())
            }
        }
    )*};
}
display_output!(
    i8, i16, i32, i64, i128, u8, u16, u32, u64, u128, isize, usize, f32, f64, bool, char
);

/// Structured output: the value goes into `structuredContent` (and, as JSON text, into
/// `content` for clients that predate structured output); its type gives the tool an
/// `outputSchema`. A value that is not a JSON object is wrapped as `{"result": value}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Json<T>(pub T);

impl<T: Serialize + JsonSchema + Send + 'static> ToolOutput for Json<T> {
    fn output_schema() -> Option<Value> {
        Some(schema::output_schema::<T>())
    }

    fn into_call_result(self) -> CallToolResult {
        match serde_json::to_value(&self.0) {
            Ok(value) => {
                let value = if schema::wraps_output::<T>() {
                    serde_json::json!({ "result": value })
                } else {
                    value
                };
                CallToolResult::structured(value)
            }
            Err(e) => CallToolResult::error(format!("could not encode the tool's output: {e}")),
        }
    }
}

/// A registered tool's body: decode arguments, run, convert. An error is the JSON-RPC
/// error the request is answered with (a handler returning an [`ErrorObject`]); every
/// other failure is a result with `isError`.
pub(crate) type ToolFn = Arc<
    dyn Fn(RequestContext, Option<Box<RawValue>>) -> BoxFuture<Result<CallToolResult, ErrorObject>>
        + Send
        + Sync,
>;

/// A registered tool: its definition and body, and when a call becomes a task (for a
/// tool whose definition declares task support).
#[derive(Clone)]
pub(crate) struct ToolEntry {
    /// Shared: a gateway keeps the same definition for its own bookkeeping.
    pub(crate) def: Arc<Tool>,
    pub(crate) call: ToolFn,
    pub(crate) start: TaskStart,
    /// Scopes a caller's access token must grant to call it (see
    /// [`Batch::tool_scopes`](super::Batch::tool_scopes)).
    pub(crate) scopes: Arc<[String]>,
}

/// Decode `arguments` (absent → `{}`) into `A`. An argument sent as `null` means the same
/// as one left out: schemas list optional arguments as not required (never as nullable),
/// and clients and models send `null` for them anyway, also for arguments with a default.
fn decode_args<A: DeserializeOwned>(
    name: &str,
    args: Option<&RawValue>,
) -> Result<A, CallToolResult> {
    let text = args.map_or("{}", RawValue::get);
    let text = if text == "null" { "{}" } else { text };
    let error = match serde_json::from_str(text) {
        Ok(args) => return Ok(args),
        Err(e) => e,
    };
    // Only on failure (the common case pays nothing): drop the `null` members, try again.
    if let Ok(serde_json::Value::Object(mut members)) = serde_json::from_str(text) {
        let before = members.len();
        members.retain(|_, v| !v.is_null());
        if members.len() != before
            && let Ok(args) = serde_json::from_value(serde_json::Value::Object(members))
        {
            return Ok(args);
        }
    }
    Err(CallToolResult::error(format!(
        "Invalid arguments for tool {name}: {error}"
    )))
}

pub(crate) fn make_entry<A, O, F, Fut>(mut def: Arc<Tool>, f: F) -> ToolEntry
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    O: ToolReturn,
    F: Fn(RequestContext, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = O> + Send + 'static,
{
    // Filled in only where missing, so a complete shared definition is not copied.
    if def.input_schema.is_null() {
        Arc::make_mut(&mut def).input_schema = schema::input_schema::<A>();
    }
    if def.output_schema.is_none()
        && let Some(output) = <O::Output as ToolOutput>::output_schema()
    {
        Arc::make_mut(&mut def).output_schema = Some(output);
    }
    let name: Arc<str> = Arc::from(def.name.as_str());
    let f = Arc::new(f);
    let call: ToolFn = Arc::new(move |ctx, args| {
        let args = decode_args::<A>(&name, args.as_deref());
        let f = f.clone();
        Box::pin(async move {
            match args {
                Ok(args) => match f(ctx, args).await.into_result() {
                    Ok(out) => Ok(out.into_call_result()),
                    // A handler that fails with a JSON-RPC error means that error (a
                    // gateway passing on its server's); any other error is the tool's.
                    Err(e) => {
                        let any: &dyn std::any::Any = &e;
                        match any.downcast_ref::<ErrorObject>() {
                            Some(error) => Err(error.clone()),
                            None => Ok(CallToolResult::error(e.to_string())),
                        }
                    }
                },
                Err(result) => Ok(result),
            }
        })
    });
    ToolEntry {
        def,
        call,
        start: TaskStart::default(),
        scopes: Arc::from([]),
    }
}

/// What a tool handler returns: any [`ToolOutput`], or a `Result` of one.
pub trait ToolReturn: Send + 'static {
    /// The output on success.
    type Output: ToolOutput;
    /// The error on failure ([`Infallible`] for a handler that returns its output itself).
    type Error: Display + Send + 'static;
    /// The output, or the error.
    fn into_result(self) -> Result<Self::Output, Self::Error>;
}

impl<T: ToolOutput> ToolReturn for T {
    type Output = T;
    type Error = Infallible;
    fn into_result(self) -> Result<T, Infallible> {
        Ok(self)
    }
}

impl<T: ToolOutput, E: Display + Send + 'static> ToolReturn for Result<T, E> {
    type Output = T;
    type Error = E;
    fn into_result(self) -> Result<T, E> {
        self
    }
}
