//! The calls waiting for an answer in the console: the console's side of
//! [`consent::Channel`](crate::consent::Channel). Each question is listed until it is
//! answered or its call stops waiting; pages follow the list through a version counter.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use moat::RequestContext;
use serde::Serialize;
use tokio::sync::{oneshot, watch};

use crate::caller::Caller;
use crate::consent::{Channel, Choice, Question};
use crate::inner::Inner;

/// One question, as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Asked {
    pub(crate) id: u64,
    /// The tool as the client knows it.
    pub(crate) tool: String,
    /// Why consent is needed: the rule, or the untrusted content seen earlier.
    pub(crate) reason: String,
    /// The arguments, redacted as the audit trail redacts them.
    pub(crate) arguments: serde_json::Value,
    /// The client's name and version, when known.
    pub(crate) client: Option<String>,
    /// The user the call came from, when known.
    pub(crate) user: Option<String>,
    /// When it was asked (unix milliseconds).
    pub(crate) time_ms: i64,
}

/// A choice, and who made it (the user signed in through the identity provider; `None`
/// for a session of the one-time link).
type Answered = (Choice, Option<String>);

/// The questions waiting, and who watches them.
pub(crate) struct Pending {
    inner: Weak<Inner>,
    items: Mutex<BTreeMap<u64, (Asked, oneshot::Sender<Answered>)>>,
    next: AtomicU64,
    version: watch::Sender<u64>,
    /// Open event streams: the console is a channel only while someone has it open.
    watchers: Arc<AtomicUsize>,
    /// The console stopped (its streams may outlive it a moment): no channel any more.
    closed: AtomicBool,
}

/// Counts an open event stream while it lives.
pub(crate) struct Watching(Arc<AtomicUsize>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Withdraws a question when its call stops waiting (answered, timed out, cancelled).
struct Withdraw<'a> {
    pending: &'a Pending,
    id: u64,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if self.pending.lock().remove(&self.id).is_some() {
            self.pending.changed();
        }
    }
}

impl Pending {
    pub(crate) fn new(inner: Weak<Inner>) -> Pending {
        let (version, _) = watch::channel(0);
        Pending {
            inner,
            items: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(1),
            version,
            watchers: Arc::new(AtomicUsize::new(0)),
            closed: AtomicBool::new(false),
        }
    }

    /// The console stopped: it is no channel from now on, and the questions waiting go on
    /// to the next channel (their senders dropped, `ask` answers `None`).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.lock().clear();
        self.changed();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, (Asked, oneshot::Sender<Answered>)>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    /// The questions waiting, oldest first.
    pub(crate) fn list(&self) -> Vec<Asked> {
        self.lock().values().map(|(a, _)| a.clone()).collect()
    }

    /// Answers question `id` as `by`; false when it is no longer waiting.
    pub(crate) fn answer(&self, id: u64, choice: Choice, by: Option<String>) -> bool {
        let Some((_, tx)) = self.lock().remove(&id) else {
            return false;
        };
        self.changed();
        tx.send((choice, by)).is_ok()
    }

    /// Follows the list: a receiver that changes with it, and the count of watchers held
    /// up while the guard lives.
    pub(crate) fn watch(&self) -> (watch::Receiver<u64>, Watching) {
        self.watchers.fetch_add(1, Ordering::SeqCst);
        (self.version.subscribe(), Watching(self.watchers.clone()))
    }
}

impl Channel for Pending {
    fn present(&self) -> bool {
        !self.closed.load(Ordering::SeqCst) && self.watchers.load(Ordering::SeqCst) > 0
    }

    fn ask<'a>(
        &'a self,
        ctx: &'a RequestContext,
        question: &'a Question<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Choice>> + Send + 'a>> {
        Box::pin(async move { self.ask_who(ctx, question).await.map(|(choice, _)| choice) })
    }

    fn ask_who<'a>(
        &'a self,
        ctx: &'a RequestContext,
        question: &'a Question<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Answered>> + Send + 'a>> {
        Box::pin(async move {
            let (arguments, user) = match self.inner.upgrade() {
                Some(inner) => {
                    let settings = inner.settings();
                    let caller = Caller::of(ctx, settings.config.auth.as_ref());
                    (
                        settings.redactor.redact(question.arguments),
                        caller.user().map(str::to_owned),
                    )
                }
                None => return None,
            };
            let id = self.next.fetch_add(1, Ordering::SeqCst);
            let (tx, rx) = oneshot::channel();
            let asked = Asked {
                id,
                tool: question.tool.to_owned(),
                reason: question.reason.to_owned(),
                arguments,
                client: ctx
                    .client_info()
                    .map(|i| format!("{} {}", i.name, i.version)),
                user,
                time_ms: crate::audit::now_ms(),
            };
            self.lock().insert(id, (asked, tx));
            let _withdraw = Withdraw { pending: self, id };
            self.changed();
            rx.await.ok()
        })
    }

    fn name(&self) -> &'static str {
        "in the web console"
    }
}
