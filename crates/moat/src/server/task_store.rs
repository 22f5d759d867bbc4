//! Where a server keeps its tasks, and who may see each: one store per server, bounded by
//! count, each task dropped when its TTL runs out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use moat_protocol::ErrorObject;
use moat_protocol::types::tasks_extension::DetailedTask;
use tokio_util::sync::CancellationToken;

use super::options::TaskOptions;
use super::session::Session;
use crate::task::TaskEntry;

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

    pub(crate) fn legacy(&self) -> bool {
        matches!(self, Owner::Session(_))
    }
}

/// Every task of a server.
#[derive(Default)]
pub(crate) struct TaskStore {
    tasks: Mutex<HashMap<String, Stored>>,
}

/// A task and who may see it.
struct Stored {
    owner: Owner,
    entry: Arc<TaskEntry>,
}

impl TaskStore {
    fn tasks(&self) -> MutexGuard<'_, HashMap<String, Stored>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new task, stored before anyone hears of it (a `tasks/get` right after the
    /// `CreateTaskResult` finds it).
    pub(crate) fn create(
        &self,
        owner: Owner,
        ttl: Duration,
        options: &TaskOptions,
        cancel: CancellationToken,
    ) -> Result<Arc<TaskEntry>, ErrorObject> {
        let now = tokio::time::Instant::now();
        let mut tasks = self.tasks();
        tasks.retain(|_, t| t.entry.deadline > now);
        if tasks.len() >= options.max_tasks {
            return Err(ErrorObject::internal(
                "Server busy: too many tasks; retry later",
            ));
        }
        // Its connection then has something here to drop when it closes.
        if let Owner::Session(session) = &owner
            && let Some(session) = session.upgrade()
        {
            session.made_a_task();
        }
        let id = new_task_id();
        // A TTL too long for the clock is as good as forever.
        let deadline = now
            .checked_add(ttl)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
        let entry = Arc::new(TaskEntry::new(
            id.clone(),
            owner.legacy(),
            ttl,
            deadline,
            options.poll_interval,
            cancel,
        ));
        tasks.insert(
            id,
            Stored {
                owner,
                entry: entry.clone(),
            },
        );
        Ok(entry)
    }

    /// The task `id`, if `owner` may see it and it has not expired.
    pub(crate) fn get(&self, id: &str, owner: &Owner) -> Option<Arc<TaskEntry>> {
        let now = tokio::time::Instant::now();
        self.tasks()
            .get(id)
            .filter(|t| t.owner.same(owner) && t.entry.deadline > now)
            .map(|t| t.entry.clone())
    }

    /// The extension's task `id` as `tasks/get` would show it.
    pub(crate) fn extension_task(&self, id: &str) -> Option<DetailedTask> {
        self.get(id, &Owner::Extension).map(|t| t.detailed())
    }

    pub(crate) fn remove(&self, entry: &Arc<TaskEntry>) {
        let mut tasks = self.tasks();
        if tasks
            .get(&entry.id)
            .is_some_and(|t| Arc::ptr_eq(&t.entry, entry))
        {
            tasks.remove(&entry.id);
        }
    }

    pub(crate) fn owned_by(&self, owner: &Owner) -> Vec<Arc<TaskEntry>> {
        let now = tokio::time::Instant::now();
        let mut owned: Vec<_> = self
            .tasks()
            .values()
            .filter(|t| t.owner.same(owner) && t.entry.deadline > now)
            .map(|t| t.entry.clone())
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
            task.entry.cancel();
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_random_uuids() {
        let a = new_task_id();
        let b = new_task_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }
}
