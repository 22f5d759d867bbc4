//! Tasks: a tool call answered at once with a handle, its work going on in the background
//! while the client polls.
//!
//! Two wire forms share this machinery:
//!
//! - **2026-07-28, the tasks extension** (SEP-2663, `io.modelcontextprotocol/tasks`). The
//!   client opts in per request (the extension in its `_meta` client capabilities); the
//!   server alone decides to answer `tools/call` with a `CreateTaskResult`
//!   (`resultType: "task"`). The client polls `tasks/get`, which inlines the result, the
//!   JSON-RPC error, or the pending `inputRequests`; answers those with `tasks/update`; and
//!   may `tasks/cancel`. Tasks are not bound to a connection (2026-07-28 has none): the
//!   task id, 122 random bits, is the handle. `notifications/tasks` go to the
//!   `subscriptions/listen` streams that name the task.
//! - **2025-11-25, experimental tasks.** The client asks for a task with the `task` param of
//!   `tools/call` (the server declares `capabilities.tasks` and each tool's
//!   `execution.taskSupport`); `tasks/get`, `tasks/result` (which waits for the end),
//!   `tasks/cancel` and `tasks/list` serve it, and `notifications/tasks/status` tells the
//!   connection of each change. These tasks belong to the connection that created them and
//!   end with it.
//!
//! A tool is made task-capable by its definition's `execution.taskSupport`
//! ([`Tool::with_task_support`](moat_protocol::types::Tool::with_task_support)) or by
//! registering it with [`Server::task_tool`](super::Server::task_tool), which also says when
//! a call becomes a task ([`TaskStart`]). The handler is the same async function as for any
//! tool; run as a task, its [`RequestContext`] changes meaning:
//!
//! - `elicit`, `create_message` and `list_roots` park the task in `input_required` with the
//!   request in `inputRequests` until `tasks/update` answers it (2026-07-28), or are sent to
//!   the client marked with the task (2025-11-25). Requests made together (`join!`) are
//!   pending together, and the client may answer them one at a time.
//! - [`RequestContext::continue_as_task`](crate::RequestContext::continue_as_task) lets a
//!   handler gather input over multi-round-trip results first and then become a task
//!   ([`TaskStart::Manual`]).
//! - [`RequestContext::task`](crate::RequestContext::task) gives the [`TaskHandle`]: the id,
//!   a status message, and [`TaskHandle::fail`] to end the task `failed` with a JSON-RPC
//!   error. A tool error (`isError`) ends it `completed`, as the specification asks; so does
//!   a panic, as `failed` with -32603.
//!
//! `tasks/cancel` ends a task at once (`cancelled`): its handler is dropped. Every task is
//! dropped when its TTL runs out, finished or not; there are at most
//! [`TaskOptions::max_tasks`] at a time (beyond, an optional tool runs synchronously and a
//! required one is refused with -32603).
//!
//! ```no_run
//! use std::time::Duration;
//! use moat::server::{TaskStart, TaskTool};
//! use moat::types::Tool;
//! use moat::{RequestContext, Server, schemars::JsonSchema};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Build { target: String }
//!
//! # async fn run() -> moat::Result<()> {
//! Server::new("builder", "1.0")
//!     .task_tool(
//!         Tool::new("build", serde_json::Value::Null).with_description("Build a target"),
//!         // A task unless it is done within a second.
//!         TaskTool::optional().start(TaskStart::After(Duration::from_secs(1))),
//!         |ctx: RequestContext, Build { target }| async move {
//!             if let Some(task) = ctx.task() {
//!                 task.set_status_message(format!("building {target}"));
//!             }
//!             tokio::time::sleep(Duration::from_secs(30)).await;
//!             Ok::<_, String>(format!("{target} built"))
//!         },
//!     )
//!     .serve_stdio()
//!     .await
//! # }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use moat_protocol::error::{INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY};
use moat_protocol::jsonrpc::decode_params;
use moat_protocol::types::tasks_extension::{
    self as ext, CreateTaskResult as ExtCreateTaskResult, GetTaskResult as ExtGetTaskResult,
};
use moat_protocol::types::{
    CallToolResult, CreateTaskResult, EmptyResult, GetTaskPayloadResult, GetTaskRequestParams,
    GetTaskResult, ListTasksRequestParams, ListTasksResult, META_RELATED_TASK, RelatedTaskMetadata,
    Task, TaskMetadata, TaskStatus, TaskStatusNotificationParams, TaskSupport, methods,
};
use moat_protocol::{ErrorObject, ProtocolVersion, RequestId};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use super::options::{TaskOptions, TaskStart, TaskTool};
pub use crate::task::TaskHandle;

use super::inner::ServerInner;
use super::pagination;
use super::session::Session;
use super::task_store::Owner;
use super::tools::ToolFn;
use crate::handler::{HandlerResult, RequestContext};
use crate::mrtr::{Round, missing_capabilities};
use crate::task::{Launch, TaskEntry};

/// Aborts a spawned handler if the request that owns it goes away first.
struct AbortOnDrop(Option<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.abort();
        }
    }
}

/// The error for a request that needs the tasks extension from a client that did not
/// declare it.
pub(crate) fn missing_extension(what: &str) -> ErrorObject {
    ErrorObject::new(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!(
            "Missing required client capability: {what} needs the {} extension (declare it \
             in io.modelcontextprotocol/clientCapabilities)",
            ext::ID
        ),
    )
    .with_data(serde_json::json!({
        "requiredCapabilities": { "extensions": { ext::ID: {} } }
    }))
}

/// Whether this (2026-07-28) request's client capabilities include the tasks extension.
pub(crate) fn accepts_tasks(ctx: &RequestContext) -> bool {
    ctx.client_capabilities()
        .and_then(|c| c.extensions.as_ref())
        .and_then(|e| e.get(ext::ID))
        .is_some_and(Value::is_object)
}

fn encode<T: serde::Serialize>(value: &T) -> HandlerResult {
    serde_json::value::to_raw_value(value)
        .map_err(|e| ErrorObject::internal(format!("could not encode the result: {e}")))
}

/// What a finished handler's result makes of the task.
fn outcome_of(
    entry: &TaskEntry,
    mut result: CallToolResult,
    version: Option<ProtocolVersion>,
) -> Result<serde_json::Map<String, Value>, ErrorObject> {
    if !entry.is_legacy() && result.is_error() {
        let lacking: Vec<&str> = entry.state().lacking.iter().copied().collect();
        if !lacking.is_empty() {
            return Err(missing_capabilities(&lacking));
        }
    }
    if let Some(v) = version {
        v.downgrade_content(&mut result.content);
    }
    result.result_type = (!entry.is_legacy()).then(|| "complete".to_owned());
    match serde_json::to_value(&result) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ErrorObject::internal("could not encode the task's result")),
    }
}

/// A new task of `server`, whose changes are told to whoever listens from the start.
fn new_task(
    server: &Arc<ServerInner>,
    owner: Owner,
    ttl: Duration,
    options: &TaskOptions,
    cancel: CancellationToken,
) -> Result<Arc<TaskEntry>, ErrorObject> {
    let entry = server.tasks.create(owner.clone(), ttl, options, cancel)?;
    spawn_notifier(server, owner, &entry);
    Ok(entry)
}

/// Run `work` as the task `entry` until it ends, is cancelled or expires; keep the task for
/// its TTL; then forget it.
fn spawn_runner(
    server: &Arc<ServerInner>,
    entry: Arc<TaskEntry>,
    work: JoinHandle<Result<CallToolResult, ErrorObject>>,
    version: Option<ProtocolVersion>,
) {
    let store = Arc::downgrade(&server.tasks);
    tokio::spawn(async move {
        let abort = AbortOnDrop(Some(work.abort_handle()));
        let outcome = tokio::select! {
            biased;
            _ = entry.cancel.cancelled() => None,
            _ = tokio::time::sleep_until(entry.deadline) => Some(Err(ErrorObject::internal(
                "The task expired before it finished",
            ))),
            error = entry.failure() => Some(Err(error)),
            joined = work => match joined {
                Ok(Ok(result)) => Some(outcome_of(&entry, result, version)),
                // The handler failed with a JSON-RPC error: the task fails with it.
                Ok(Err(error)) => Some(Err(error)),
                Err(e) if e.is_panic() => {
                    tracing::warn!(task = %entry.id, "a task's handler panicked");
                    Some(Err(ErrorObject::internal("The task's handler panicked")))
                }
                Err(_) => None,
            },
        };
        drop(abort);
        if let Some(outcome) = outcome {
            entry.finish(outcome);
        }
        entry.cancel.cancel();
        // Kept for polling until its TTL runs out (by the store only: a task the store
        // dropped early, with its connection, is freed at once).
        let deadline = entry.deadline;
        let entry = Arc::downgrade(&entry);
        tokio::time::sleep_until(deadline).await;
        if let (Some(store), Some(entry)) = (store.upgrade(), entry.upgrade()) {
            store.remove(&entry);
        }
    });
}

/// Tell whoever listens of each change of `entry`, until it ends.
fn spawn_notifier(server: &Arc<ServerInner>, owner: Owner, entry: &Arc<TaskEntry>) {
    let server = Arc::downgrade(server);
    let entry_weak = Arc::downgrade(entry);
    let mut changes = entry.changed.subscribe();
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let Some(entry) = entry_weak.upgrade() else {
                return;
            };
            let terminal = entry.state().status.is_terminal();
            match &owner {
                Owner::Session(session) => {
                    if let Some(peer) = session.upgrade().and_then(|s| s.peer().cloned()) {
                        let params = TaskStatusNotificationParams {
                            task: entry.legacy(),
                            meta: None,
                        };
                        let _ = peer
                            .notify(methods::NOTIFICATIONS_TASKS_STATUS, &params)
                            .await;
                    }
                }
                Owner::Extension => {
                    if let Some(server) = server.upgrade() {
                        let task = entry.detailed();
                        for session in server.live_sessions() {
                            session.notify_task(&task).await;
                        }
                    }
                }
            }
            if terminal {
                return;
            }
        }
    });
}

/// The context a task's handler runs with: the request's, linked to the task it may
/// become (its input requests go there once it exists).
fn task_context(ctx: &RequestContext, launch: &Arc<Launch>) -> RequestContext {
    let mut hctx = ctx.clone();
    let round = match &ctx.round {
        Some(round) => round.clone(),
        None => Arc::new(Round::default()),
    };
    round.set_launch(launch.clone());
    hctx.round = Some(round);
    hctx
}

/// 2026-07-28 `tools/call` of a task-capable tool from a client that accepts tasks (inside
/// the multi-round-trip loop): become a task as `start` says, or answer synchronously.
pub(crate) async fn call_as_task(
    server: &Arc<ServerInner>,
    ctx: RequestContext,
    call: ToolFn,
    args: Option<Box<RawValue>>,
    start: TaskStart,
    support: TaskSupport,
) -> HandlerResult {
    let version = ctx.protocol_version();
    let launch = Arc::new(Launch::default());
    let mut hctx = task_context(&ctx, &launch);
    let options = server.options();
    if start == TaskStart::Immediately {
        let create = || {
            new_task(
                server,
                Owner::Extension,
                options.tasks.ttl,
                &options.tasks,
                CancellationToken::new(),
            )
        };
        match launch.become_task(create) {
            Ok(Some(entry)) => {
                hctx.cancel = entry.cancel.clone();
                let created = ExtCreateTaskResult::new(entry.ext_task(&entry.state()));
                let work = tokio::spawn(call(hctx, args));
                spawn_runner(server, entry, work, version);
                return encode(&created);
            }
            // Full: an optional tool still runs, synchronously.
            Err(e) if support == TaskSupport::Required => return Err(e),
            _ => return sync_result(&ctx, call(hctx, args).await?),
        }
    }
    let work_cancel = CancellationToken::new();
    hctx.cancel = work_cancel.clone();
    let mut work = tokio::spawn(call(hctx, args));
    let mut guard = AbortOnDrop(Some(work.abort_handle()));
    let window = async {
        match start {
            TaskStart::After(d) => tokio::time::sleep(d).await,
            _ => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        joined = &mut work => return sync_result(&ctx, joined_result(joined)??),
        _ = launch.asked.notified() => {}
        _ = window => {}
    }
    // From here on the handler's cancellation is the task's.
    let create = || {
        new_task(
            server,
            Owner::Extension,
            options.tasks.ttl,
            &options.tasks,
            work_cancel.clone(),
        )
    };
    match launch.become_task(create) {
        Ok(Some(entry)) => {
            guard.0 = None;
            let created = ExtCreateTaskResult::new(entry.ext_task(&entry.state()));
            spawn_runner(server, entry, work, version);
            encode(&created)
        }
        // The handler asked for input: the multi-round-trip result answers.
        Ok(None) => std::future::pending().await,
        // No room for a task: finish synchronously.
        Err(_) => sync_result(&ctx, joined_result(work.await)??),
    }
}

fn joined_result(
    joined: Result<Result<CallToolResult, ErrorObject>, tokio::task::JoinError>,
) -> Result<Result<CallToolResult, ErrorObject>, ErrorObject> {
    joined.map_err(|e| {
        if e.is_panic() {
            tracing::warn!("a tool handler panicked");
        }
        ErrorObject::internal("The tool's handler failed")
    })
}

/// A handler that finished before becoming a task: answer with its result.
fn sync_result(ctx: &RequestContext, mut result: CallToolResult) -> HandlerResult {
    if result.is_error()
        && let Some(error) = ctx.round.as_ref().and_then(|r| r.missing_capabilities())
    {
        return Err(error);
    }
    result.result_type = Some("complete".to_owned());
    encode(&result)
}

/// 2025-11-25 `tools/call` with `task`: create the task at once and run the tool in it.
pub(crate) fn call_as_legacy_task(
    server: &Arc<ServerInner>,
    session: &Arc<Session>,
    ctx: RequestContext,
    call: ToolFn,
    args: Option<Box<RawValue>>,
    task: &RawValue,
) -> HandlerResult {
    let asked: TaskMetadata = serde_json::from_str(task.get())
        .map_err(|e| ErrorObject::invalid_params(format!("Invalid params: task: {e}")))?;
    let options = server.options();
    let ttl = asked
        .ttl
        .map_or(options.tasks.ttl, Duration::from_millis)
        .max(Duration::from_secs(1))
        .min(options.tasks.max_ttl);
    let entry = new_task(
        server,
        Owner::Session(Arc::downgrade(session)),
        ttl,
        &options.tasks,
        CancellationToken::new(),
    )?;
    let launch = Arc::new(Launch::for_task(entry.clone()));
    let mut hctx = task_context(&ctx, &launch);
    hctx.cancel = entry.cancel.clone();
    let version = ctx.protocol_version();
    let work = tokio::spawn(call(hctx, args));
    let created = CreateTaskResult {
        task: entry.legacy(),
        meta: None,
    };
    spawn_runner(server, entry, work, version);
    encode(&created)
}

/// `tasks/update` params, the answers left as JSON (an answer of the wrong shape fails the
/// task when its handler reads it, not the update).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpdateParams {
    task_id: String,
    input_responses: BTreeMap<String, Value>,
}

fn unknown_task(id: &str) -> ErrorObject {
    ErrorObject::new(
        INVALID_PARAMS,
        format!("Invalid params: no task {id:?} (it never existed, or it expired)"),
    )
}

/// `tasks/get`, `tasks/update`, `tasks/cancel` (both eras), `tasks/result` and
/// `tasks/list` (2025-11-25).
pub(crate) async fn handle(
    server: &Arc<ServerInner>,
    session: &Arc<Session>,
    method: &str,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> HandlerResult {
    let version = ctx.protocol_version();
    let modern = version.is_some_and(ProtocolVersion::has_tasks_extension);
    let legacy = version.is_some_and(ProtocolVersion::has_tasks);
    let defined = match method {
        methods::TASKS_GET | methods::TASKS_CANCEL => modern || legacy,
        ext::TASKS_UPDATE => modern,
        _ => legacy,
    };
    if !defined || !server.offers_tasks() {
        return Err(ErrorObject::method_not_found(method));
    }
    if modern {
        if !accepts_tasks(&ctx) {
            return Err(missing_extension(method));
        }
        return handle_extension(server, method, params).await;
    }
    let owner = Owner::Session(Arc::downgrade(session));
    if method == methods::TASKS_LIST {
        let p: ListTasksRequestParams = decode_params(params)?;
        let tasks: Vec<Task> = server
            .tasks
            .owned_by(&owner)
            .iter()
            .map(|t| t.legacy())
            .collect();
        let (tasks, next_cursor) = pagination::page(
            &tasks,
            p.cursor.as_deref(),
            "tasks",
            server.options().page_size,
        )?;
        return encode(&ListTasksResult {
            tasks,
            next_cursor,
            meta: None,
        });
    }
    let p: GetTaskRequestParams = decode_params(params)?;
    let entry = server
        .tasks
        .get(&p.task_id, &owner)
        .ok_or_else(|| unknown_task(&p.task_id))?;
    match method {
        methods::TASKS_GET => encode(&GetTaskResult {
            task: entry.legacy(),
            meta: None,
        }),
        methods::TASKS_CANCEL => {
            if !entry.cancel() {
                return Err(ErrorObject::new(
                    INVALID_PARAMS,
                    format!(
                        "Invalid params: task {:?} has already finished ({})",
                        entry.id,
                        status_name(entry.state().status)
                    ),
                ));
            }
            encode(&GetTaskResult {
                task: entry.legacy(),
                meta: None,
            })
        }
        _ => legacy_result(&entry, ctx).await,
    }
}

async fn handle_extension(
    server: &Arc<ServerInner>,
    method: &str,
    params: Option<&RawValue>,
) -> HandlerResult {
    let owner = Owner::Extension;
    let ack = || {
        encode(&EmptyResult {
            result_type: Some("complete".to_owned()),
            ..Default::default()
        })
    };
    if method == ext::TASKS_UPDATE {
        let p: UpdateParams = decode_params(params)?;
        let entry = server
            .tasks
            .get(&p.task_id, &owner)
            .ok_or_else(|| unknown_task(&p.task_id))?;
        entry.answer(p.input_responses);
        return ack();
    }
    let p: GetTaskRequestParams = decode_params(params)?;
    let entry = server
        .tasks
        .get(&p.task_id, &owner)
        .ok_or_else(|| unknown_task(&p.task_id))?;
    if method == methods::TASKS_CANCEL {
        // Idempotent: cancelling a finished task is acknowledged too.
        entry.cancel();
        return ack();
    }
    encode(&ExtGetTaskResult::new(entry.detailed()))
}

/// 2025-11-25 `tasks/result`: wait for the end, then answer exactly what the call would
/// have (its result, marked with the task, or its error).
async fn legacy_result(entry: &Arc<TaskEntry>, ctx: RequestContext) -> HandlerResult {
    let mut changes = entry.changed.subscribe();
    let id = ctx.request_id().clone();
    entry.state().result_waiters.push(id.clone());
    struct Unwait<'a>(&'a TaskEntry, RequestId);
    impl Drop for Unwait<'_> {
        fn drop(&mut self) {
            self.0.state().result_waiters.retain(|w| w != &self.1);
        }
    }
    let _unwait = Unwait(entry, id);
    loop {
        {
            let st = entry.state();
            match st.status {
                TaskStatus::Completed => {
                    let mut result = st.result.clone().unwrap_or_default();
                    let meta = result
                        .entry("_meta")
                        .or_insert_with(|| Value::Object(Default::default()));
                    if let Value::Object(meta) = meta {
                        meta.insert(
                            META_RELATED_TASK.to_owned(),
                            serde_json::to_value(RelatedTaskMetadata {
                                task_id: entry.id.clone(),
                            })
                            .unwrap_or_default(),
                        );
                    }
                    return encode(&GetTaskPayloadResult {
                        meta: None,
                        payload: result,
                    });
                }
                TaskStatus::Failed => {
                    return Err(st
                        .error
                        .clone()
                        .unwrap_or_else(|| ErrorObject::internal("The task failed")));
                }
                TaskStatus::Cancelled => {
                    return Err(ErrorObject::new(
                        INVALID_PARAMS,
                        format!(
                            "Invalid params: task {:?} was cancelled; it has no result",
                            entry.id
                        ),
                    ));
                }
                _ => {}
            }
        }
        if changes.changed().await.is_err() {
            return Err(ErrorObject::internal("The task is gone"));
        }
    }
}

fn status_name(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Working => "working",
        TaskStatus::InputRequired => "input_required",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
        _ => "unknown",
    }
}

/// 2025-11-25 refusals of a `tools/call` whose `task` does not fit the tool.
pub(crate) fn legacy_mismatch(
    name: &str,
    support: TaskSupport,
    asked: bool,
) -> Option<ErrorObject> {
    match (support, asked) {
        (TaskSupport::Required, false) => Some(ErrorObject::new(
            METHOD_NOT_FOUND,
            format!(
                "Tool {name} must be called as a task (its execution.taskSupport is \"required\")"
            ),
        )),
        (TaskSupport::Forbidden, true) => Some(ErrorObject::new(
            METHOD_NOT_FOUND,
            format!("Tool {name} cannot be called as a task"),
        )),
        _ => None,
    }
}
