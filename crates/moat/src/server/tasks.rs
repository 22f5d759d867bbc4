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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use moat_protocol::error::{INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY};
use moat_protocol::jsonrpc::decode_params;
use moat_protocol::types::tasks_extension::{
    self as ext, CreateTaskResult as ExtCreateTaskResult, DetailedTask,
    GetTaskResult as ExtGetTaskResult,
};
use moat_protocol::types::{
    CallToolResult, CreateTaskResult, EmptyResult, GetTaskPayloadResult, GetTaskRequestParams,
    GetTaskResult, InputRequest, ListTasksRequestParams, ListTasksResult, META_RELATED_TASK,
    RelatedTaskMetadata, Task, TaskMetadata, TaskStatus, TaskStatusNotificationParams, TaskSupport,
    methods,
};
use moat_protocol::{ErrorObject, ProtocolVersion, RequestId};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ServerInner;
use super::pagination;
use super::session::Session;
use super::tools::ToolFn;
use crate::handler::{HandlerResult, RequestContext};
use crate::mrtr::{Round, missing_capabilities};

/// Limits and defaults of tasks, in [`ServerOptions::tasks`](super::ServerOptions::tasks).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TaskOptions {
    /// How many tasks may exist at once (running or kept for polling); memory is bounded
    /// by it. A task is never dropped before its TTL, so beyond it no task is created.
    pub max_tasks: usize,
    /// How long a task is kept after its creation (its `ttlMs`), finished or not. Work
    /// still running then is stopped.
    pub ttl: Duration,
    /// The longest TTL a 2025-11-25 client may ask for with `task.ttl`.
    pub max_ttl: Duration,
    /// The polling interval suggested to clients (`pollIntervalMs`).
    pub poll_interval: Duration,
}

impl Default for TaskOptions {
    fn default() -> Self {
        TaskOptions {
            max_tasks: 1024,
            ttl: Duration::from_secs(10 * 60),
            max_ttl: Duration::from_secs(60 * 60),
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// When a call of a task-capable tool becomes a task, for a client that accepts tasks
/// (2026-07-28). A 2025-11-25 client asks for the task itself, and gets it at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TaskStart {
    /// At once: the handler runs only as the task.
    #[default]
    Immediately,
    /// Unless the handler finishes within this time, in which case the client gets its
    /// result directly (the immediate-result shortcut). Until then the handler may gather
    /// input with multi-round-trip results.
    After(Duration),
    /// When the handler calls
    /// [`RequestContext::continue_as_task`](crate::RequestContext::continue_as_task), after
    /// gathering what it needs with multi-round-trip results; a handler that never calls it
    /// answers synchronously.
    Manual,
}

/// How a tool registered with [`Server::task_tool`](super::Server::task_tool) runs as a
/// task: whether it may or must (`execution.taskSupport`), and when a call becomes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskTool {
    pub(crate) support: TaskSupport,
    pub(crate) start: TaskStart,
}

impl TaskTool {
    /// How a tool whose definition declares `support` runs as a task (at once).
    pub fn with_support(support: TaskSupport) -> TaskTool {
        TaskTool {
            support,
            start: TaskStart::Immediately,
        }
    }

    /// Runs as a task for clients that accept tasks, synchronously for the others.
    pub fn optional() -> TaskTool {
        TaskTool {
            support: TaskSupport::Optional,
            start: TaskStart::Immediately,
        }
    }

    /// Runs only as a task: clients that do not accept tasks are refused (-32021 in
    /// 2026-07-28, -32601 for a 2025-11-25 call without `task`). Revisions without tasks
    /// run it synchronously.
    pub fn required() -> TaskTool {
        TaskTool {
            support: TaskSupport::Required,
            start: TaskStart::Immediately,
        }
    }

    /// When a call becomes a task ([`TaskStart::Immediately`] by default).
    pub fn start(mut self, start: TaskStart) -> TaskTool {
        self.start = start;
        self
    }
}

/// The task a handler runs as; see [`RequestContext::task`](crate::RequestContext::task).
#[derive(Clone)]
pub struct TaskHandle(pub(crate) Arc<TaskEntry>);

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl TaskHandle {
    /// The task id the client polls.
    pub fn id(&self) -> &str {
        &self.0.id
    }

    /// The task's status now.
    pub fn status(&self) -> TaskStatus {
        self.0.state().status
    }

    /// Describe what the task is doing (`statusMessage`, shown to the user or model).
    pub fn set_status_message(&self, message: impl Into<String>) {
        let message = message.into();
        self.0.change(|st| {
            if st.status.is_terminal() {
                return false;
            }
            st.message = Some(message);
            true
        });
    }

    /// End the task `failed` with this JSON-RPC error (what `tasks/get` inlines as
    /// `error`, and 2025-11-25's `tasks/result` answers). For protocol-level failures: a
    /// tool that ran and failed returns an error instead, which ends the task `completed`
    /// with an `isError` result. Never returns: the handler is dropped.
    pub async fn fail(&self, error: ErrorObject) -> ! {
        self.0.state().failure.get_or_insert(error);
        self.0.failed.notify_one();
        std::future::pending().await
    }
}

/// Who may see a task.
#[derive(Clone)]
pub(crate) enum Owner {
    /// Anyone with the id (the tasks extension).
    Extension,
    /// The 2025-11-25 connection that created it.
    Session(Weak<Session>),
}

impl Owner {
    fn same(&self, other: &Owner) -> bool {
        match (self, other) {
            (Owner::Extension, Owner::Extension) => true,
            (Owner::Session(a), Owner::Session(b)) => Weak::ptr_eq(a, b),
            _ => false,
        }
    }

    fn legacy(&self) -> bool {
        matches!(self, Owner::Session(_))
    }
}

/// A question a task is waiting on (2026-07-28).
struct Asked {
    request: InputRequest,
    reply: oneshot::Sender<Value>,
}

struct TaskState {
    status: TaskStatus,
    message: Option<String>,
    updated: Option<SystemTime>,
    /// `completed`: the underlying result (a `CallToolResult`), as JSON.
    result: Option<serde_json::Map<String, Value>>,
    /// `failed`: the JSON-RPC error.
    error: Option<ErrorObject>,
    /// 2026-07-28: the questions waiting for `tasks/update`, by key.
    pending: BTreeMap<String, Asked>,
    /// Every key ever issued (a key is never reused within a task).
    issued: HashSet<String>,
    counter: usize,
    /// 2025-11-25: requests to the client not answered yet.
    outstanding: usize,
    /// 2025-11-25: `tasks/result` requests waiting, newest last (the task's requests to the
    /// client travel with the newest).
    result_waiters: Vec<RequestId>,
    /// Set by [`TaskHandle::fail`].
    failure: Option<ErrorObject>,
    /// Capabilities the handler needed and the client did not declare.
    lacking: BTreeSet<&'static str>,
}

impl TaskState {
    fn new() -> TaskState {
        TaskState {
            status: TaskStatus::Working,
            message: None,
            updated: None,
            result: None,
            error: None,
            pending: BTreeMap::new(),
            issued: HashSet::new(),
            counter: 0,
            outstanding: 0,
            result_waiters: Vec::new(),
            failure: None,
            lacking: BTreeSet::new(),
        }
    }
}

/// One task.
pub(crate) struct TaskEntry {
    pub(crate) id: String,
    owner: Owner,
    created: SystemTime,
    ttl: Duration,
    deadline: tokio::time::Instant,
    poll_interval: Duration,
    cancel: CancellationToken,
    state: Mutex<TaskState>,
    /// Bumped on every change (status notifications, 2025-11-25 `tasks/result`).
    changed: watch::Sender<u64>,
    /// [`TaskHandle::fail`] was called.
    failed: Notify,
}

impl std::fmt::Debug for TaskEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .field("status", &self.state().status)
            .finish_non_exhaustive()
    }
}

impl TaskEntry {
    fn state(&self) -> MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Apply `edit`; if it changed something, stamp the time and tell the watchers.
    fn change(&self, edit: impl FnOnce(&mut TaskState) -> bool) -> bool {
        let changed = {
            let mut st = self.state();
            let changed = edit(&mut st);
            if changed {
                st.updated = Some(SystemTime::now());
            }
            changed
        };
        if changed {
            self.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
        changed
    }

    pub(crate) fn is_legacy(&self) -> bool {
        self.owner.legacy()
    }

    /// Note that the handler needed a capability the client did not declare.
    pub(crate) fn lacks(&self, capability: &'static str) {
        self.state().lacking.insert(capability);
    }

    /// 2026-07-28: park a question until `tasks/update` answers it. The key is the
    /// handler's (made unique within the task if it was used before) or one by kind and
    /// order.
    pub(crate) fn ask(
        &self,
        key: Option<String>,
        request: InputRequest,
    ) -> oneshot::Receiver<Value> {
        let (tx, rx) = oneshot::channel();
        self.change(|st| {
            if st.status.is_terminal() {
                return false;
            }
            let base = key.unwrap_or_else(|| {
                let kind = match &request {
                    InputRequest::CreateMessage(_) => "sampling",
                    InputRequest::Elicit(_) => "elicitation",
                    InputRequest::ListRoots(_) => "roots",
                    _ => "input",
                };
                let n = st.counter;
                st.counter += 1;
                format!("{kind}-{n}")
            });
            let mut key = base.clone();
            let mut n = 1;
            while st.issued.contains(&key) {
                n += 1;
                key = format!("{base}-{n}");
            }
            st.issued.insert(key.clone());
            st.pending.insert(key, Asked { request, reply: tx });
            st.status = TaskStatus::InputRequired;
            true
        });
        rx
    }

    /// 2026-07-28: deliver the answers to the questions they name; others are ignored.
    fn answer(&self, responses: BTreeMap<String, Value>) {
        self.change(|st| {
            let mut changed = false;
            for (key, answer) in responses {
                if let Some(asked) = st.pending.remove(&key) {
                    let _ = asked.reply.send(answer);
                    changed = true;
                }
            }
            if changed && st.pending.is_empty() && st.status == TaskStatus::InputRequired {
                st.status = TaskStatus::Working;
            }
            changed
        });
    }

    /// 2025-11-25: a request to the client goes out (`input_required` until answered).
    pub(crate) fn client_request_started(&self) -> Option<RequestId> {
        self.change(|st| {
            if st.status.is_terminal() {
                return false;
            }
            st.outstanding += 1;
            st.status = TaskStatus::InputRequired;
            true
        });
        self.state().result_waiters.last().cloned()
    }

    /// 2025-11-25: a request to the client was answered.
    pub(crate) fn client_request_ended(&self) {
        self.change(|st| {
            st.outstanding = st.outstanding.saturating_sub(1);
            if st.outstanding == 0 && st.status == TaskStatus::InputRequired {
                st.status = TaskStatus::Working;
                return true;
            }
            false
        });
    }

    /// Mark the task terminal, unless it already is.
    fn finish(&self, outcome: Result<serde_json::Map<String, Value>, ErrorObject>) {
        self.change(|st| {
            if st.status.is_terminal() {
                return false;
            }
            st.pending.clear();
            match outcome {
                Ok(result) => {
                    st.status = TaskStatus::Completed;
                    st.result = Some(result);
                }
                Err(error) => {
                    st.status = TaskStatus::Failed;
                    if st.message.is_none() {
                        st.message = Some(error.message.clone());
                    }
                    st.error = Some(error);
                }
            }
            true
        });
    }

    /// Cancel the task: `cancelled` at once, its handler dropped. Whether it was still
    /// running.
    fn cancel(&self) -> bool {
        let cancelled = self.change(|st| {
            if st.status.is_terminal() {
                return false;
            }
            st.status = TaskStatus::Cancelled;
            st.message = Some("The task was cancelled by request.".to_owned());
            st.pending.clear();
            true
        });
        self.cancel.cancel();
        cancelled
    }

    async fn failure(&self) -> ErrorObject {
        loop {
            if let Some(error) = self.state().failure.take() {
                return error;
            }
            self.failed.notified().await;
        }
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    fn poll_ms(&self) -> u64 {
        u64::try_from(self.poll_interval.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// The task as the extension shows it.
    fn ext_task(&self, st: &TaskState) -> ext::Task {
        ext::Task {
            task_id: self.id.clone(),
            status: st.status,
            status_message: st.message.clone(),
            created_at: iso8601(self.created),
            last_updated_at: iso8601(st.updated.unwrap_or(self.created)),
            ttl_ms: Some(self.ttl_ms()),
            poll_interval_ms: Some(self.poll_ms()),
        }
    }

    /// What `tasks/get` (and `notifications/tasks`) show of it.
    fn detailed(&self) -> DetailedTask {
        let st = self.state();
        let input_requests = (st.status == TaskStatus::InputRequired && !st.pending.is_empty())
            .then(|| {
                st.pending
                    .iter()
                    .map(|(k, a)| (k.clone(), a.request.clone()))
                    .collect()
            });
        DetailedTask {
            task: self.ext_task(&st),
            input_requests,
            result: (st.status == TaskStatus::Completed)
                .then(|| st.result.clone())
                .flatten(),
            error: (st.status == TaskStatus::Failed)
                .then(|| st.error.clone())
                .flatten(),
        }
    }

    /// The task as 2025-11-25 shows it.
    fn legacy(&self) -> Task {
        let st = self.state();
        Task {
            task_id: self.id.clone(),
            status: st.status,
            status_message: st.message.clone(),
            created_at: iso8601(self.created),
            last_updated_at: iso8601(st.updated.unwrap_or(self.created)),
            ttl: Some(self.ttl_ms()),
            poll_interval: Some(self.poll_ms()),
        }
    }
}

/// Every task of a server.
#[derive(Default)]
pub(crate) struct TaskStore {
    tasks: Mutex<HashMap<String, Arc<TaskEntry>>>,
}

impl TaskStore {
    fn tasks(&self) -> MutexGuard<'_, HashMap<String, Arc<TaskEntry>>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new task, stored before anyone hears of it (a `tasks/get` right after the
    /// `CreateTaskResult` finds it).
    fn create(
        &self,
        owner: Owner,
        ttl: Duration,
        options: &TaskOptions,
        cancel: CancellationToken,
    ) -> Result<Arc<TaskEntry>, ErrorObject> {
        let now = tokio::time::Instant::now();
        let mut tasks = self.tasks();
        tasks.retain(|_, t| t.deadline > now);
        if tasks.len() >= options.max_tasks {
            return Err(ErrorObject::internal(
                "Server busy: too many tasks; retry later",
            ));
        }
        let id = new_task_id();
        let (changed, _) = watch::channel(0);
        let entry = Arc::new(TaskEntry {
            id: id.clone(),
            owner,
            created: SystemTime::now(),
            ttl,
            // A TTL too long for the clock is as good as forever.
            deadline: now
                .checked_add(ttl)
                .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400)),
            poll_interval: options.poll_interval,
            cancel,
            state: Mutex::new(TaskState::new()),
            changed,
            failed: Notify::new(),
        });
        tasks.insert(id, entry.clone());
        Ok(entry)
    }

    /// The task `id`, if `owner` may see it and it has not expired.
    fn get(&self, id: &str, owner: &Owner) -> Option<Arc<TaskEntry>> {
        let now = tokio::time::Instant::now();
        self.tasks()
            .get(id)
            .filter(|t| t.owner.same(owner) && t.deadline > now)
            .cloned()
    }

    /// The extension's task `id` as `tasks/get` would show it.
    pub(crate) fn extension_task(&self, id: &str) -> Option<DetailedTask> {
        self.get(id, &Owner::Extension).map(|t| t.detailed())
    }

    fn remove(&self, entry: &Arc<TaskEntry>) {
        let mut tasks = self.tasks();
        if tasks.get(&entry.id).is_some_and(|t| Arc::ptr_eq(t, entry)) {
            tasks.remove(&entry.id);
        }
    }

    fn owned_by(&self, owner: &Owner) -> Vec<Arc<TaskEntry>> {
        let now = tokio::time::Instant::now();
        let mut owned: Vec<_> = self
            .tasks()
            .values()
            .filter(|t| t.owner.same(owner) && t.deadline > now)
            .cloned()
            .collect();
        owned.sort_by(|a, b| a.created.cmp(&b.created).then(a.id.cmp(&b.id)));
        owned
    }

    /// A 2025-11-25 connection closed: nobody can reach its tasks any more.
    pub(crate) fn drop_session(&self, session: &Weak<Session>) {
        let owner = Owner::Session(session.clone());
        let gone: Vec<_> = {
            let mut tasks = self.tasks();
            let ids: Vec<String> = tasks
                .iter()
                .filter(|(_, t)| t.owner.same(&owner))
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| tasks.remove(id)).collect()
        };
        for task in gone {
            task.cancel();
        }
    }
}

/// How a handler's request may become a task: shared by the request (which creates the
/// task) and the handler's context (whose input requests go to the task once it exists).
#[derive(Debug, Default)]
pub(crate) struct Launch {
    state: Mutex<LaunchState>,
    asked: Notify,
}

#[derive(Debug, Default)]
enum LaunchState {
    /// Not a task (yet).
    #[default]
    Pending,
    /// The handler asked for input over a multi-round-trip result: this run ends with it,
    /// and cannot become a task.
    Rounds,
    /// The handler waits for [`RequestContext::continue_as_task`] to be granted.
    Asking(Vec<oneshot::Sender<bool>>),
    /// A task.
    Task(Arc<TaskEntry>),
    /// It will not become a task.
    Refused,
}

impl Launch {
    fn lock(&self) -> MutexGuard<'_, LaunchState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn for_task(entry: Arc<TaskEntry>) -> Launch {
        Launch {
            state: Mutex::new(LaunchState::Task(entry)),
            asked: Notify::new(),
        }
    }

    /// The task, once there is one.
    pub(crate) fn task(&self) -> Option<Arc<TaskEntry>> {
        match &*self.lock() {
            LaunchState::Task(t) => Some(t.clone()),
            _ => None,
        }
    }

    /// Where the handler's input request goes: to the task, or (`None`) to this round's
    /// multi-round-trip result, in which case the run cannot become a task any more.
    pub(crate) fn route_input(&self) -> Option<Arc<TaskEntry>> {
        let mut st = self.lock();
        match &*st {
            LaunchState::Task(t) => Some(t.clone()),
            LaunchState::Pending => {
                *st = LaunchState::Rounds;
                None
            }
            _ => None,
        }
    }

    /// The handler asks to continue as a task; whether it now is one.
    pub(crate) async fn request(&self) -> bool {
        let rx = {
            let mut st = self.lock();
            match &mut *st {
                LaunchState::Task(_) => return true,
                LaunchState::Refused | LaunchState::Rounds => return false,
                LaunchState::Asking(waiters) => {
                    let (tx, rx) = oneshot::channel();
                    waiters.push(tx);
                    rx
                }
                LaunchState::Pending => {
                    let (tx, rx) = oneshot::channel();
                    *st = LaunchState::Asking(vec![tx]);
                    rx
                }
            }
        };
        self.asked.notify_one();
        rx.await.unwrap_or(false)
    }

    /// Become the task `create` makes, unless the run is committed to multi-round-trip
    /// input (`Ok(None)`). On failure nothing will become a task.
    fn become_task(
        &self,
        create: impl FnOnce() -> Result<Arc<TaskEntry>, ErrorObject>,
    ) -> Result<Option<Arc<TaskEntry>>, ErrorObject> {
        let mut st = self.lock();
        let waiters = match std::mem::take(&mut *st) {
            LaunchState::Task(t) => {
                *st = LaunchState::Task(t.clone());
                return Ok(Some(t));
            }
            LaunchState::Rounds => {
                *st = LaunchState::Rounds;
                return Ok(None);
            }
            LaunchState::Asking(w) => w,
            LaunchState::Pending | LaunchState::Refused => Vec::new(),
        };
        match create() {
            Ok(task) => {
                *st = LaunchState::Task(task.clone());
                for w in waiters {
                    let _ = w.send(true);
                }
                Ok(Some(task))
            }
            Err(e) => {
                *st = LaunchState::Refused;
                for w in waiters {
                    let _ = w.send(false);
                }
                Err(e)
            }
        }
    }
}

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
    let entry = server.tasks.create(owner, ttl, options, cancel)?;
    spawn_notifier(server, &entry);
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
fn spawn_notifier(server: &Arc<ServerInner>, entry: &Arc<TaskEntry>) {
    let server = Arc::downgrade(server);
    let entry_weak = Arc::downgrade(entry);
    let mut changes = entry.changed.subscribe();
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let Some(entry) = entry_weak.upgrade() else {
                return;
            };
            let terminal = entry.state().status.is_terminal();
            match &entry.owner {
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

/// A task id: a random (version 4) UUID, from the thread's CSPRNG.
fn new_task_id() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// `2026-01-02T03:04:05.678Z` (RFC 3339, UTC, milliseconds). A time before 1970 (a clock
/// set wrong) reads as the epoch.
fn iso8601(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    match jiff::Timestamp::from_second(secs) {
        Ok(time) => format!(
            "{}.{:03}Z",
            time.strftime("%Y-%m-%dT%H:%M:%S"),
            since.subsec_millis()
        ),
        // Past the year 9999: no clock reads that; say so rather than invent a date.
        Err(_) => format!("{secs}.{:03}", since.subsec_millis()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601() {
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_767_323_045_678);
        assert_eq!(iso8601(t), "2026-01-02T03:04:05.678Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(iso8601(leap), "2000-02-29T00:00:00.000Z");
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(iso8601(before), "1970-01-01T00:00:00.000Z");
        let far = UNIX_EPOCH + Duration::from_secs(300_000_000_000);
        assert_eq!(iso8601(far), "300000000000.000");
    }

    #[test]
    fn task_ids_are_random_uuids() {
        let a = new_task_id();
        let b = new_task_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }
}
