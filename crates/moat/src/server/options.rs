//! How a server is set up: its [`ServerOptions`], the limits of its tasks
//! ([`TaskOptions`]), and how a task-capable tool runs as a task ([`TaskTool`],
//! [`TaskStart`]). Pure settings: nothing here serves anything.

use std::time::Duration;

use moat_protocol::types::TaskSupport;
use moat_transport::Limits;

use crate::mrtr::StateKey;
use crate::peer::PeerOptions;

/// Settings of a server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerOptions {
    /// Items per page of `tools/list`, `resources/list`, … (cursor pagination beyond it).
    pub page_size: usize,
    /// How long (ms) 2026-07-28 clients may cache list results (`ttlMs`).
    pub list_ttl_ms: u64,
    /// Settings of each connection's peer (timeouts, limits, revisions spoken).
    pub peer: PeerOptions,
    /// Framing limits on stdio.
    pub limits: Limits,
    /// The key protecting 2026-07-28 `requestState`; share one across instances of a server
    /// behind a load balancer.
    pub state_key: StateKey,
    /// Earlier keys, still accepted when opening a `requestState` (never used to seal): after
    /// a rotation, keep the old key here for the state's lifetime (15 minutes).
    pub retired_state_keys: Vec<StateKey>,
    /// Limits and defaults of tasks.
    pub tasks: TaskOptions,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            page_size: 500,
            list_ttl_ms: 0,
            peer: PeerOptions::default(),
            limits: Limits::default(),
            state_key: StateKey::random(),
            retired_state_keys: Vec::new(),
            tasks: TaskOptions::default(),
        }
    }
}

/// Limits and defaults of tasks, in [`ServerOptions::tasks`](ServerOptions::tasks).
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
