//! Method names of every request and notification of every revision.

/// `initialize` (handshake era).
pub const INITIALIZE: &str = "initialize";
/// `ping` (handshake era).
pub const PING: &str = "ping";
/// `server/discover` (2026-07-28).
pub const SERVER_DISCOVER: &str = "server/discover";
/// `resources/list`.
pub const RESOURCES_LIST: &str = "resources/list";
/// `resources/templates/list`.
pub const RESOURCES_TEMPLATES_LIST: &str = "resources/templates/list";
/// `resources/read`.
pub const RESOURCES_READ: &str = "resources/read";
/// `resources/subscribe` (handshake era).
pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
/// `resources/unsubscribe` (handshake era).
pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
/// `prompts/list`.
pub const PROMPTS_LIST: &str = "prompts/list";
/// `prompts/get`.
pub const PROMPTS_GET: &str = "prompts/get";
/// `tools/list`.
pub const TOOLS_LIST: &str = "tools/list";
/// `tools/call`.
pub const TOOLS_CALL: &str = "tools/call";
/// `logging/setLevel` (handshake era).
pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
/// `completion/complete`.
pub const COMPLETION_COMPLETE: &str = "completion/complete";
/// `sampling/createMessage` (server to client; an input request in 2026-07-28).
pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
/// `roots/list` (server to client; an input request in 2026-07-28).
pub const ROOTS_LIST: &str = "roots/list";
/// `elicitation/create` (2025-06-18+; an input request in 2026-07-28).
pub const ELICITATION_CREATE: &str = "elicitation/create";
/// `tasks/get` (2025-11-25).
pub const TASKS_GET: &str = "tasks/get";
/// `tasks/result` (2025-11-25).
pub const TASKS_RESULT: &str = "tasks/result";
/// `tasks/cancel` (2025-11-25).
pub const TASKS_CANCEL: &str = "tasks/cancel";
/// `tasks/list` (2025-11-25).
pub const TASKS_LIST: &str = "tasks/list";
/// `subscriptions/listen` (2026-07-28).
pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";

/// `notifications/initialized` (handshake era).
pub const NOTIFICATIONS_INITIALIZED: &str = "notifications/initialized";
/// `notifications/cancelled`.
pub const NOTIFICATIONS_CANCELLED: &str = "notifications/cancelled";
/// `notifications/progress`.
pub const NOTIFICATIONS_PROGRESS: &str = "notifications/progress";
/// `notifications/message` (log message).
pub const NOTIFICATIONS_MESSAGE: &str = "notifications/message";
/// `notifications/resources/list_changed`.
pub const NOTIFICATIONS_RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
/// `notifications/resources/updated`.
pub const NOTIFICATIONS_RESOURCES_UPDATED: &str = "notifications/resources/updated";
/// `notifications/prompts/list_changed`.
pub const NOTIFICATIONS_PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
/// `notifications/tools/list_changed`.
pub const NOTIFICATIONS_TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
/// `notifications/roots/list_changed` (handshake era).
pub const NOTIFICATIONS_ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
/// `notifications/elicitation/complete` (2025-11-25).
pub const NOTIFICATIONS_ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";
/// `notifications/tasks/status` (2025-11-25).
pub const NOTIFICATIONS_TASKS_STATUS: &str = "notifications/tasks/status";
/// `notifications/subscriptions/acknowledged` (2026-07-28).
pub const NOTIFICATIONS_SUBSCRIPTIONS_ACKNOWLEDGED: &str =
    "notifications/subscriptions/acknowledged";

/// Every request method above.
pub const REQUESTS: &[&str] = &[
    INITIALIZE,
    PING,
    SERVER_DISCOVER,
    RESOURCES_LIST,
    RESOURCES_TEMPLATES_LIST,
    RESOURCES_READ,
    RESOURCES_SUBSCRIBE,
    RESOURCES_UNSUBSCRIBE,
    PROMPTS_LIST,
    PROMPTS_GET,
    TOOLS_LIST,
    TOOLS_CALL,
    LOGGING_SET_LEVEL,
    COMPLETION_COMPLETE,
    SAMPLING_CREATE_MESSAGE,
    ROOTS_LIST,
    ELICITATION_CREATE,
    TASKS_GET,
    TASKS_RESULT,
    TASKS_CANCEL,
    TASKS_LIST,
    SUBSCRIPTIONS_LISTEN,
];

/// Every notification method above.
pub const NOTIFICATIONS: &[&str] = &[
    NOTIFICATIONS_INITIALIZED,
    NOTIFICATIONS_CANCELLED,
    NOTIFICATIONS_PROGRESS,
    NOTIFICATIONS_MESSAGE,
    NOTIFICATIONS_RESOURCES_LIST_CHANGED,
    NOTIFICATIONS_RESOURCES_UPDATED,
    NOTIFICATIONS_PROMPTS_LIST_CHANGED,
    NOTIFICATIONS_TOOLS_LIST_CHANGED,
    NOTIFICATIONS_ROOTS_LIST_CHANGED,
    NOTIFICATIONS_ELICITATION_COMPLETE,
    NOTIFICATIONS_TASKS_STATUS,
    NOTIFICATIONS_SUBSCRIPTIONS_ACKNOWLEDGED,
];
