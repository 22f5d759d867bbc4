//! [`InputAnswerer`]: who answers what a server asks while it handles one request of ours.
//! Below the peer (a request's options carry one) and the client (which routes the
//! server's questions to it).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use moat_protocol::ErrorObject;
use moat_protocol::types::{InputRequest, InputResponse};

/// A boxed answer in the making (the handler module's `BoxFuture`, which sits above this one).
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The answering function, given the server's key (if any) and the request.
type KeyedInputFn = Arc<
    dyn Fn(Option<String>, InputRequest) -> BoxFuture<Result<InputResponse, ErrorObject>>
        + Send
        + Sync,
>;

/// Answers what a server asks the client (`sampling/createMessage`, `elicitation/create`,
/// `roots/list`) while it handles one request of ours, instead of the client's own
/// handlers: set it with [`RequestOptions::answer_with`](crate::RequestOptions::answer_with).
/// A gateway uses one per forwarded call, to send the question to the client that made
/// the call.
///
/// In 2026-07-28 a server's questions come back as the request's own multi-round-trip
/// answer, so they always reach the right answerer. In the handshake era they are
/// requests of their own, which over stdio say nothing of the request they serve: one is
/// given to the answerers of the requests in flight when it arrives if they all share one
/// `group` (say, one upstream session), and refused when groups differ, since handing it
/// to the wrong one would show one client another's question.
///
/// The answerer is given the server's key for each request of a multi-round-trip answer
/// (`None` for a request of its own), and the requests of one round at once, so it can
/// pass them on together under the same keys.
#[derive(Clone)]
pub struct InputAnswerer {
    group: Arc<str>,
    answer: KeyedInputFn,
}

impl std::fmt::Debug for InputAnswerer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputAnswerer")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl InputAnswerer {
    /// Answers with `f` (given the server's key, if any, and the request); `group` says
    /// who stands behind it (see the type's docs).
    pub fn new<F, Fut>(group: impl Into<Arc<str>>, f: F) -> Self
    where
        F: Fn(Option<String>, InputRequest) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<InputResponse, ErrorObject>> + Send + 'static,
    {
        let f = Arc::new(f);
        InputAnswerer {
            group: group.into(),
            answer: Arc::new(move |key, request| {
                let f = f.clone();
                Box::pin(async move { f(key, request).await })
            }),
        }
    }

    /// Who stands behind this answerer.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// Asks it: `key` is the server's key for a request of a multi-round-trip answer.
    pub(crate) fn answer(
        &self,
        key: Option<String>,
        request: InputRequest,
    ) -> BoxFuture<Result<InputResponse, ErrorObject>> {
        (self.answer)(key, request)
    }
}
