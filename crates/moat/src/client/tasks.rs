//! Calling a tool that may run as a task, from the client's side: the call says it accepts
//! a task (the `task` param in 2025-11-25, the tasks extension among the request's
//! capabilities in 2026-07-28), and when the server answers with one, a [`RunningTask`]
//! follows it to its end — `tasks/result` (2025-11-25, which waits), or `tasks/get` polls
//! with the input it asks for given by `tasks/update` (2026-07-28) — and cancels it on the
//! server if it is dropped before then.
//!
//! ```no_run
//! # async fn run(client: moat::Client) -> moat::Result<()> {
//! use moat::client::ToolCall;
//! let answer = match client
//!     .call_tool_accepting_task("build", serde_json::json!({}), moat::RequestOptions::default())
//!     .await?
//! {
//!     ToolCall::Done(result) => result,
//!     ToolCall::Task(task) => task.finish().await?,
//!     _ => return Ok(()), // a kind of answer this version does not know
//! };
//! # let _ = answer; Ok(()) }
//! ```

use std::time::Duration;

use moat_protocol::types::tasks_extension::{
    self as ext, CreateTaskResult as ExtCreateTaskResult, GetTaskResult as ExtGetTaskResult,
    UpdateTaskRequestParams,
};
use moat_protocol::types::{
    CallToolRequestParams, CallToolResult, CreateTaskResult, EmptyResult, GetTaskRequestParams,
    TaskMetadata, TaskStatus, methods,
};
use moat_protocol::version::META_CLIENT_CAPABILITIES;
use moat_protocol::{ErrorObject, JsonObject, ProtocolVersion};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Client, InputAnswerer, decode_raw, remote};
use crate::error::{Error, Result};
use crate::peer::RequestOptions;

/// How often a 2026-07-28 task is polled when the server names no interval, and at most.
const DEFAULT_POLL: Duration = Duration::from_millis(500);
const MAX_POLL: Duration = Duration::from_secs(5);

/// What a call that accepts a task got: the result, or a task to follow.
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolCall<'a> {
    /// The server answered at once.
    Done(CallToolResult),
    /// The server made the call a task; [`RunningTask::finish`] waits for its result.
    Task(RunningTask<'a>),
}

/// A task the server runs for one of our calls. Dropped before its end, it is cancelled on
/// the server (`tasks/cancel`).
#[derive(Debug)]
pub struct RunningTask<'a> {
    client: &'a Client,
    id: String,
    legacy: bool,
    poll: Duration,
    answerer: Option<InputAnswerer>,
    timeout: Option<Duration>,
    /// The call's own `_meta` entries (the capabilities that accept tasks): the task's
    /// requests carry them too.
    meta: Option<JsonObject>,
    done: bool,
}

impl Client {
    /// Call a tool, accepting that the server runs it as a task ([`ToolCall::Task`], which
    /// is followed to its end). Use it for a tool whose `execution.taskSupport` is `optional` or
    /// `required`; for the others it is [`call_tool_with`](Client::call_tool_with).
    pub async fn call_tool_accepting_task(
        &self,
        name: &str,
        arguments: Value,
        mut options: RequestOptions,
    ) -> Result<ToolCall<'_>> {
        let version = self.protocol_version();
        let legacy = version.is_some_and(ProtocolVersion::has_tasks)
            && self
                .server_capabilities()
                .tasks
                .as_ref()
                .and_then(|t| t.requests.as_ref())
                .is_some();
        let modern = version.is_some_and(ProtocolVersion::has_tasks_extension);
        let mut params = CallToolRequestParams::new(name);
        match arguments {
            Value::Object(map) => params.arguments = Some(map),
            Value::Null => {}
            other => {
                return Err(Error::Encode(moat_protocol::jsonrpc::EncodeError::from(
                    <serde_json::Error as serde::ser::Error>::custom(format!(
                        "tool arguments must be a JSON object, not {other}"
                    )),
                )));
            }
        }
        if legacy {
            params.task = Some(TaskMetadata::default());
        }
        if modern {
            accept_extension(self, &mut options);
        }
        let answerer = options.answerer.clone();
        let timeout = options.timeout;
        let meta = options.meta.clone();
        let raw: Box<RawValue> = self
            .with_rounds(methods::TOOLS_CALL, params, options)
            .await?;
        #[derive(serde::Deserialize)]
        struct Peek {
            #[serde(rename = "resultType", default)]
            result_type: Option<String>,
            #[serde(default)]
            task: Option<Value>,
        }
        let peek: Peek = decode_raw(methods::TOOLS_CALL, &raw)?;
        let task = |id: String, poll: Option<u64>, legacy: bool| RunningTask {
            client: self,
            id,
            legacy,
            poll: poll
                .map_or(DEFAULT_POLL, Duration::from_millis)
                .clamp(Duration::from_millis(10), MAX_POLL),
            answerer: answerer.clone(),
            timeout,
            meta: meta.clone(),
            done: false,
        };
        if modern && peek.result_type.as_deref() == Some(ext::RESULT_TYPE_TASK) {
            let created: ExtCreateTaskResult = decode_raw(methods::TOOLS_CALL, &raw)?;
            return Ok(ToolCall::Task(task(
                created.task.task_id,
                created.task.poll_interval_ms,
                false,
            )));
        }
        if legacy && peek.task.as_ref().is_some_and(Value::is_object) {
            let created: CreateTaskResult = decode_raw(methods::TOOLS_CALL, &raw)?;
            return Ok(ToolCall::Task(task(
                created.task.task_id,
                created.task.poll_interval,
                true,
            )));
        }
        Ok(ToolCall::Done(decode_raw(methods::TOOLS_CALL, &raw)?))
    }
}

/// Adds the tasks extension to the capabilities this request carries.
fn accept_extension(client: &Client, options: &mut RequestOptions) {
    let meta = options.meta.get_or_insert_with(JsonObject::new);
    let caps = meta
        .entry(META_CLIENT_CAPABILITIES.to_owned())
        .or_insert_with(|| {
            client
                .peer()
                .modern_capabilities()
                .unwrap_or_else(|| Value::Object(JsonObject::new()))
        });
    if let Value::Object(caps) = caps {
        let extensions = caps
            .entry("extensions")
            .or_insert_with(|| Value::Object(JsonObject::new()));
        if let Value::Object(extensions) = extensions {
            extensions.insert(ext::ID.to_owned(), Value::Object(JsonObject::new()));
        }
    }
}

impl RunningTask<'_> {
    /// The server's id of the task.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Waits for the task's result: what the tool returned, or the JSON-RPC error it failed
    /// with. The input it asks for meanwhile goes to the call's [`InputAnswerer`] (else
    /// the client's handlers).
    pub async fn finish(mut self) -> Result<CallToolResult> {
        let result = if self.legacy {
            self.result_legacy().await
        } else {
            self.result_modern().await
        };
        self.done = true;
        result
    }

    async fn result_legacy(&self) -> Result<CallToolResult> {
        // `tasks/result` waits for the end; what the task asks the client meanwhile
        // arrives as requests of their own, for the call's answerer.
        let _held = self.answerer.as_ref().map(|a| self.client.handler.hold(a));
        let mut options = self.options();
        options.timeout = self.timeout;
        let raw = self
            .client
            .peer()
            .request_raw(methods::TASKS_RESULT, &self.params(), options)
            .await?;
        decode_raw(methods::TASKS_RESULT, &raw)
    }

    async fn result_modern(&self) -> Result<CallToolResult> {
        let deadline = self.timeout.map(|t| tokio::time::Instant::now() + t);
        loop {
            let got: ExtGetTaskResult = self
                .client
                .peer()
                .request_with(methods::TASKS_GET, &self.params(), self.options())
                .await?;
            let task = got.task;
            match task.task.status {
                TaskStatus::Completed => {
                    let result = Value::Object(task.result.unwrap_or_default());
                    return serde_json::from_value(result).map_err(|e| Error::Decode {
                        method: methods::TASKS_GET.to_owned(),
                        detail: e.to_string(),
                    });
                }
                TaskStatus::Failed => {
                    let error = task
                        .error
                        .unwrap_or_else(|| ErrorObject::internal("the task failed"));
                    return Err(remote(methods::TOOLS_CALL, error));
                }
                TaskStatus::Cancelled => {
                    return Err(remote(
                        methods::TOOLS_CALL,
                        ErrorObject::internal("the server cancelled the task"),
                    ));
                }
                TaskStatus::InputRequired if task.input_requests.is_some() => {
                    let asked = task.input_requests.unwrap_or_default();
                    let responses = self.client.fulfil(asked, self.answerer.as_ref()).await?;
                    let update = UpdateTaskRequestParams {
                        task_id: self.id.clone(),
                        input_responses: responses,
                        meta: None,
                    };
                    let _: EmptyResult = self
                        .client
                        .peer()
                        .request_with(ext::TASKS_UPDATE, &update, self.options())
                        .await?;
                    continue;
                }
                _ => {}
            }
            if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                return Err(Error::Timeout {
                    method: methods::TOOLS_CALL.to_owned(),
                    after: self.timeout.unwrap_or_default(),
                });
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// Options for the task's own requests: the call's `_meta`.
    fn options(&self) -> RequestOptions {
        RequestOptions {
            meta: self.meta.clone(),
            ..RequestOptions::default()
        }
    }

    fn params(&self) -> GetTaskRequestParams {
        GetTaskRequestParams {
            task_id: self.id.clone(),
            meta: None,
        }
    }
}

impl Drop for RunningTask<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Abandoned (the caller's own request was cancelled): the server should stop too.
        let peer = self.client.peer().clone();
        let params = self.params();
        let options = self.options();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _: Result<Value> = peer
                    .request_with(methods::TASKS_CANCEL, &params, options)
                    .await;
            });
        }
    }
}
