//! Tasks (2025-11-25): long-running, pollable requests (`tasks/get`, `tasks/result`,
//! `tasks/cancel`, `tasks/list`, `notifications/tasks/status`); and, in
//! [`tasks_extension`], their successor from 2026-07-28 on, the tasks extension (SEP-2663).

use serde::{Deserialize, Serialize};

use super::Cursor;
use crate::{JsonObject, Meta};

/// The state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskStatus {
    /// Being worked on.
    Working,
    /// Waiting for input from the requester.
    InputRequired,
    /// Finished successfully.
    Completed,
    /// Finished with an error.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl TaskStatus {
    /// Whether the task has reached a final state.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// Whether a tool may be called as a task ([`crate::types::ToolExecution`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TaskSupport {
    /// Never as a task (the default).
    Forbidden,
    /// Either way.
    Optional,
    /// Only as a task.
    Required,
}

/// A task's state and timing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The task's identifier.
    pub task_id: String,
    /// Current state.
    pub status: TaskStatus,
    /// Human-readable detail about the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// ISO 8601 creation time.
    pub created_at: String,
    /// ISO 8601 time of the last status change.
    pub last_updated_at: String,
    /// Retention after creation in milliseconds; `null` for unlimited. Always serialized:
    /// the schema requires the key.
    #[serde(default)]
    pub ttl: Option<u64>,
    /// Suggested polling interval in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<u64>,
}

/// Asks for a request to be run as a task (the `task` field of task-augmented params).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskMetadata {
    /// Requested retention in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u64>,
}

/// Associates a message with a task (in `_meta` under `io.modelcontextprotocol/related-task`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelatedTaskMetadata {
    /// The task's identifier.
    pub task_id: String,
}

/// The common part of task-augmentable request params.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskAugmentedRequestParams {
    /// Run as a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskMetadata>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The answer to a task-augmented request: the task that was created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateTaskResult {
    /// The new task.
    pub task: Task,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Params of `tasks/get`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequestParams {
    /// The task to query.
    pub task_id: String,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Params of `tasks/result`.
pub type GetTaskPayloadRequestParams = GetTaskRequestParams;

/// Params of `tasks/cancel`.
pub type CancelTaskRequestParams = GetTaskRequestParams;

/// Params of `tasks/list`.
pub type ListTasksRequestParams = super::PaginatedRequestParams;

/// Result of `tasks/get` and `tasks/cancel`: the task's fields at top level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetTaskResult {
    /// The task.
    #[serde(flatten)]
    pub task: Task,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Result of `tasks/cancel`.
pub type CancelTaskResult = GetTaskResult;

/// Result of `tasks/result`: the result of the underlying request (e.g. a `CallToolResult`),
/// kept as an open object.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GetTaskPayloadResult {
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// The underlying result's fields.
    #[serde(flatten)]
    pub payload: JsonObject,
}

/// Result of `tasks/list`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResult {
    /// The tasks on this page.
    pub tasks: Vec<Task>,
    /// Cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Cursor>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Params of `notifications/tasks/status`: the task's fields at top level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatusNotificationParams {
    /// The task.
    #[serde(flatten)]
    pub task: Task,
    /// Notification metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl super::Tool {
    /// Declare whether `tools/call` of this tool may, or must, run as a task
    /// (`execution.taskSupport`).
    pub fn with_task_support(mut self, support: TaskSupport) -> Self {
        self.execution
            .get_or_insert_with(Default::default)
            .task_support = Some(support);
        self
    }

    /// The tool's declared task support ([`TaskSupport::Forbidden`] when absent).
    pub fn task_support(&self) -> TaskSupport {
        self.execution
            .as_ref()
            .and_then(|e| e.task_support)
            .unwrap_or(TaskSupport::Forbidden)
    }
}

/// The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`), which replaces the
/// 2025-11-25 tasks from 2026-07-28 on. The client opts in per request (the extension in
/// `_meta["io.modelcontextprotocol/clientCapabilities"].extensions`); the server alone
/// decides to answer a `tools/call` with a [`CreateTaskResult`] (`resultType: "task"`). The
/// client polls `tasks/get` (a [`GetTaskResult`]: the task with its result, error or
/// pending `inputRequests` inlined), answers input with `tasks/update` and may
/// `tasks/cancel`; both are answered with an empty acknowledgement. There is no
/// `tasks/result` or `tasks/list`, and the wire names are `ttlMs` and `pollIntervalMs`.
///
/// Type names follow the extension's schema, hence this module of their own.
pub mod tasks_extension {
    use serde::{Deserialize, Serialize};

    use super::TaskStatus;
    use crate::types::{InputRequests, InputResponses, RESULT_TYPE_COMPLETE};
    use crate::{ErrorObject, JsonObject, Meta};

    /// The extension identifier (a key of `capabilities.extensions`).
    pub const ID: &str = "io.modelcontextprotocol/tasks";
    /// `tasks/update`: answers to a task's input requests.
    pub const TASKS_UPDATE: &str = "tasks/update";
    /// `notifications/tasks`: a task's state, on a `subscriptions/listen` stream.
    pub const NOTIFICATIONS_TASKS: &str = "notifications/tasks";
    /// The `resultType` of a [`CreateTaskResult`].
    pub const RESULT_TYPE_TASK: &str = "task";

    /// A task's state and timing.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Task {
        /// The task's identifier (unguessable: it is the only key to the task).
        pub task_id: String,
        /// Current state.
        pub status: TaskStatus,
        /// Human-readable detail about the state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub status_message: Option<String>,
        /// ISO 8601 creation time.
        pub created_at: String,
        /// ISO 8601 time of the last change.
        pub last_updated_at: String,
        /// Retention after creation in integer milliseconds; `null` for unlimited. Always
        /// serialized: the schema requires the key.
        #[serde(default)]
        pub ttl_ms: Option<u64>,
        /// Suggested polling interval in integer milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub poll_interval_ms: Option<u64>,
    }

    /// A task with what its status carries inlined: `inputRequests` when `input_required`,
    /// `result` when `completed`, `error` when `failed`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DetailedTask {
        /// The task.
        #[serde(flatten)]
        pub task: Task,
        /// The requests the client must fulfil (`input_required`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub input_requests: Option<InputRequests>,
        /// What the underlying request returned (`completed`), e.g. a `CallToolResult`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub result: Option<JsonObject>,
        /// The JSON-RPC error the underlying request failed with (`failed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub error: Option<ErrorObject>,
    }

    /// The answer to a request the server chose to run as a task: the task, flat, with
    /// `resultType: "task"`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct CreateTaskResult {
        /// `"task"`.
        pub result_type: String,
        /// The new task.
        #[serde(flatten)]
        pub task: Task,
        /// Result metadata.
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        pub meta: Option<Meta>,
    }

    impl CreateTaskResult {
        /// The result announcing `task`.
        pub fn new(task: Task) -> Self {
            CreateTaskResult {
                result_type: RESULT_TYPE_TASK.to_owned(),
                task,
                meta: None,
            }
        }
    }

    /// Params of `tasks/get` and `tasks/cancel`.
    pub type GetTaskRequestParams = super::GetTaskRequestParams;

    /// Result of `tasks/get`: the detailed task, flat, with `resultType: "complete"`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct GetTaskResult {
        /// `"complete"`.
        pub result_type: String,
        /// The task.
        #[serde(flatten)]
        pub task: DetailedTask,
        /// Result metadata.
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        pub meta: Option<Meta>,
    }

    impl GetTaskResult {
        /// The answer describing `task`.
        pub fn new(task: DetailedTask) -> Self {
            GetTaskResult {
                result_type: RESULT_TYPE_COMPLETE.to_owned(),
                task,
                meta: None,
            }
        }
    }

    /// Params of `tasks/update`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct UpdateTaskRequestParams {
        /// The task to update.
        pub task_id: String,
        /// Answers to its outstanding input requests, by their keys.
        pub input_responses: InputResponses,
        /// Request metadata.
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        pub meta: Option<Meta>,
    }

    /// Params of `notifications/tasks`: the detailed task, as `tasks/get` would answer.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct TaskStatusNotificationParams {
        /// The task.
        #[serde(flatten)]
        pub task: DetailedTask,
        /// Notification metadata (on a listen stream, the subscription id).
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        pub meta: Option<Meta>,
    }

    /// What the extension adds to a `subscriptions/listen` filter (and to its
    /// acknowledgement): the tasks whose `notifications/tasks` the client wants.
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct TaskSubscription {
        /// The tasks to hear about.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub task_ids: Option<Vec<String>>,
    }
}
