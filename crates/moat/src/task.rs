//! One task as its handler sees it: the [`TaskHandle`] a tool's handler is given, the
//! task's state (status, questions waiting for answers, its result), and the [`Launch`] by
//! which a request becomes a task.
//!
//! It sits below the handler interface, which reads and changes a task from a request's
//! context; the server's task machinery ([`server::tasks`](crate::server::tasks)) creates,
//! stores, runs and serves tasks on top of it.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use moat_protocol::types::tasks_extension::{self as ext, DetailedTask};
use moat_protocol::types::{InputRequest, Task, TaskStatus};
use moat_protocol::{ErrorObject, RequestId};
use serde_json::Value;
use tokio::sync::{Notify, oneshot, watch};
use tokio_util::sync::CancellationToken;

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

/// A question a task is waiting on (2026-07-28).
struct Asked {
    request: InputRequest,
    reply: oneshot::Sender<Value>,
}

/// What changes over a task's life, under its lock.
pub(crate) struct TaskState {
    pub(crate) status: TaskStatus,
    message: Option<String>,
    updated: Option<SystemTime>,
    /// `completed`: the underlying result (a `CallToolResult`), as JSON.
    pub(crate) result: Option<serde_json::Map<String, Value>>,
    /// `failed`: the JSON-RPC error.
    pub(crate) error: Option<ErrorObject>,
    /// 2026-07-28: the questions waiting for `tasks/update`, by key.
    pending: BTreeMap<String, Asked>,
    /// Every key ever issued (a key is never reused within a task).
    issued: HashSet<String>,
    counter: usize,
    /// 2025-11-25: requests to the client not answered yet.
    outstanding: usize,
    /// 2025-11-25: `tasks/result` requests waiting, newest last (the task's requests to the
    /// client travel with the newest).
    pub(crate) result_waiters: Vec<RequestId>,
    /// Set by [`TaskHandle::fail`].
    failure: Option<ErrorObject>,
    /// Capabilities the handler needed and the client did not declare.
    pub(crate) lacking: BTreeSet<&'static str>,
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
    /// A 2025-11-25 task (its connection's); else one of the tasks extension.
    legacy: bool,
    pub(crate) created: SystemTime,
    ttl: Duration,
    /// When it is dropped, finished or not.
    pub(crate) deadline: tokio::time::Instant,
    poll_interval: Duration,
    /// Stops its handler.
    pub(crate) cancel: CancellationToken,
    state: Mutex<TaskState>,
    /// Bumped on every change (status notifications, 2025-11-25 `tasks/result`).
    pub(crate) changed: watch::Sender<u64>,
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
    /// A task in `working`, kept until `ttl` from now (`deadline`, on tokio's clock).
    pub(crate) fn new(
        id: String,
        legacy: bool,
        ttl: Duration,
        deadline: tokio::time::Instant,
        poll_interval: Duration,
        cancel: CancellationToken,
    ) -> TaskEntry {
        let (changed, _) = watch::channel(0);
        TaskEntry {
            id,
            legacy,
            created: SystemTime::now(),
            ttl,
            deadline,
            poll_interval,
            cancel,
            state: Mutex::new(TaskState::new()),
            changed,
            failed: Notify::new(),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, TaskState> {
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
        self.legacy
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
    pub(crate) fn answer(&self, responses: BTreeMap<String, Value>) {
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
    pub(crate) fn finish(&self, outcome: Result<serde_json::Map<String, Value>, ErrorObject>) {
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
    pub(crate) fn cancel(&self) -> bool {
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

    pub(crate) async fn failure(&self) -> ErrorObject {
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
    pub(crate) fn ext_task(&self, st: &TaskState) -> ext::Task {
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
    pub(crate) fn detailed(&self) -> DetailedTask {
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
    pub(crate) fn legacy(&self) -> Task {
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

/// How a handler's request may become a task: shared by the request (which creates the
/// task) and the handler's context (whose input requests go to the task once it exists).
#[derive(Debug, Default)]
pub(crate) struct Launch {
    state: Mutex<LaunchState>,
    /// The handler asked to continue as a task.
    pub(crate) asked: Notify,
}

#[derive(Debug, Default)]
enum LaunchState {
    /// Not a task (yet).
    #[default]
    Pending,
    /// The handler asked for input over a multi-round-trip result: this run ends with it,
    /// and cannot become a task.
    Rounds,
    /// The handler waits for
    /// [`RequestContext::continue_as_task`](crate::RequestContext::continue_as_task) to be
    /// granted.
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

    pub(crate) fn for_task(entry: Arc<TaskEntry>) -> Launch {
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
    pub(crate) fn become_task(
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
}
