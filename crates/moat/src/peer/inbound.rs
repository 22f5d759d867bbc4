//! What a [`Peer`] does with what it reads: [`Peer::start`] spawns the connection's reading
//! task (or leaves it to the transport to poll, when it offers to: a 2026-07-28 request over
//! HTTP), which asks the session what each message means and acts on it — answers our
//! requests, applies cancellation and progress, and runs each request of the other side
//! through the [`Handler`] in a task of its own, with a [`RequestContext`] for it (the one
//! request of a single-request connection runs on the reading task itself, beside the
//! reading). A handler that panics answers its request with an internal error.
//!
//! It sits above the handler interface, which in turn sits above the peer's sending half:
//! a handler talks back through the [`Peer`] its context holds.

use std::sync::Arc;

use futures_util::FutureExt;
use moat_protocol::error::ErrorObject;
use moat_protocol::jsonrpc;
use moat_protocol::lifecycle::Role;
use moat_protocol::session::{Incoming, Notice, NoticeKind, Reply, RequestParts};
use moat_protocol::{Era, ProtocolVersion, RequestId};
use moat_transport::{Connection, Frame, Inbound};
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{LocalRequest, Peer, PeerOptions, Stage};
use crate::error::Error;
use crate::handler::{Capabilities, ClientInfo, Handler, IncomingRequest, RequestContext};

impl Peer {
    /// Start driving `conn` as `role`, answering the other side through `handler`.
    /// Spawns the reading task on the current tokio runtime.
    pub fn start(
        mut conn: Connection,
        role: Role,
        handler: Arc<dyn Handler>,
        options: PeerOptions,
    ) -> Peer {
        let peer = Peer::new(&mut conn, role, options);
        let reading = read_loop(peer.clone(), conn.inbound, handler);
        // A transport that serves the connection in a task of its own polls the loop there.
        match conn.driver.take() {
            Some(slot) => slot.put(Box::pin(reading)),
            None => {
                tokio::spawn(reading);
            }
        }
        peer
    }
}

async fn read_loop(peer: Peer, mut inbound: mpsc::Receiver<Inbound>, handler: Arc<dyn Handler>) {
    // A single-request connection's one request runs here, beside the reading (which must
    // go on: the client's cancellation arrives through it), instead of in a task of its
    // own: one task and one cross-thread wake-up fewer per 2026-07-28 request over HTTP.
    let mut running: Option<LocalRequest> = None;
    let reason = loop {
        let next = match running.as_mut() {
            Some(request) => tokio::select! {
                biased;
                () = request.as_mut() => None,
                item = inbound.recv() => Some(item),
            },
            None => Some(inbound.recv().await),
        };
        let Some(item) = next else {
            running = None; // answered
            continue;
        };
        let Some(item) = item else {
            break "the peer closed the connection".to_owned();
        };
        // A message the transport authenticated comes from its caller; any other from
        // whoever the connection as a whole serves (over stdio, the local user).
        let (caller, item) = unwrap_origin(item, &peer);
        match item {
            Inbound::Frame(Frame::Line(line)) => on_line(&peer, &handler, line, &caller).await,
            Inbound::Request(head) => {
                let incoming = peer.state().session.handle_request(head.view());
                let reply = match incoming {
                    // The transport's owned copy is moved into the handler, not copied again.
                    Incoming::Request(view) => {
                        let version = view.version;
                        run_request(&peer, &handler, head.into_parts(), version, None, &caller)
                    }
                    incoming => act(&peer, &handler, incoming, None, &caller),
                };
                if let Some(reply) = reply {
                    peer.send_reply(reply).await;
                }
            }
            Inbound::Frame(Frame::Oversized(n)) => {
                let reply = peer.state().session.oversized(n);
                peer.send_reply(reply).await;
            }
            Inbound::Frame(Frame::InvalidUtf8) => {
                let reply = peer.state().session.invalid_utf8();
                peer.send_reply(reply).await;
            }
            Inbound::Failed(e) => break format!("reading from the peer failed: {e}"),
            Inbound::Ended(why) => break why,
            _ => {}
        }
        let handed = if peer.shared.single_request {
            peer.shared.local.lock().ok().and_then(|mut l| l.take())
        } else {
            None
        };
        if let Some(request) = handed {
            match running {
                None => running = Some(request),
                // Not expected (the session refuses a second request), but never lost.
                Some(_) => {
                    peer.shared.tracker.spawn(request);
                }
            }
        }
    };
    tracing::debug!(%reason, "connection ended");
    // A request still running when the input ended finishes like any other (drained).
    if let Some(request) = running.take() {
        peer.shared.tracker.spawn(request);
    }
    // Nothing more will arrive: our own requests can never be answered, so they fail now.
    peer.fail_pending(&reason);
    peer.shared.stage.advance(Stage::InputEnded);
    // The other side may still be reading: let the requests it already sent finish and be
    // answered (a client that writes a request and closes stdin gets its answer), within
    // the drain deadline.
    peer.shared.tracker.close();
    let drain = peer.shared.options.drain_timeout;
    if tokio::time::timeout(drain, peer.shared.tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            ?drain,
            "requests still running when the connection closed were cancelled"
        );
    }
    peer.shutdown(reason);
    handler.on_close(&peer);
    peer.release_transport().await;
}

async fn on_line(peer: &Peer, handler: &Arc<dyn Handler>, line: String, caller: &Caller) {
    // Read outside the lock (the costly part, for a large message); decide under it.
    let read = moat_protocol::session::read(&line);
    let incoming = peer.state().session.decide(read);
    match incoming {
        Incoming::Batch { items, related } => on_batch(peer, handler, items, related, caller),
        incoming => {
            if let Some(reply) = act(peer, handler, incoming, None, caller) {
                peer.send_reply(reply).await;
            }
        }
    }
}

/// Who sent the message being acted on, if anyone vouches for it, and the trace context
/// the transport read beside it.
#[derive(Clone, Default)]
struct Caller {
    identity: Option<moat_transport::SharedIdentity>,
    trace: Option<moat_transport::TraceHeaders>,
}

/// The message inside what the transport wrapped it in, and what the wrapping said.
fn unwrap_origin(item: Inbound, peer: &Peer) -> (Caller, Inbound) {
    let mut caller = Caller::default();
    let mut item = item;
    loop {
        item = match item {
            Inbound::Caller(identity, inner) => {
                caller.identity = Some(identity);
                *inner
            }
            Inbound::Traced(trace, inner) => {
                caller.trace = Some(trace);
                *inner
            }
            other => break (caller_or_default(caller, peer), other),
        };
    }
}

/// Without a caller the transport vouched for, the one the connection serves.
fn caller_or_default(mut caller: Caller, peer: &Peer) -> Caller {
    if caller.identity.is_none() {
        caller.identity = peer.shared.options.identity.clone();
    }
    caller
}

/// Where the answer to a request goes: straight to the wire, or into a batch's answer.
type BatchSlot = Option<(usize, mpsc::UnboundedSender<(usize, String)>)>;

/// Answers a batch with one array holding the answers to its requests, in order.
fn on_batch(
    peer: &Peer,
    handler: &Arc<dyn Handler>,
    items: Vec<Incoming<'_>>,
    related: Option<RequestId>,
    caller: &Caller,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, String)>();
    for (index, item) in items.into_iter().enumerate() {
        if let Some(reply) = act(peer, handler, item, Some((index, tx.clone())), caller) {
            let _ = tx.send((index, reply.line));
        }
    }
    drop(tx);
    let peer = peer.clone();
    peer.shared.tracker.clone().spawn(async move {
        let mut answers = Vec::new();
        while let Some(answer) = rx.recv().await {
            answers.push(answer);
        }
        if answers.is_empty() {
            return; // only notifications and responses: nothing to say
        }
        answers.sort_by_key(|(i, _)| *i);
        let body: Vec<&str> = answers.iter().map(|(_, s)| s.as_str()).collect();
        peer.send_line(format!("[{}]", body.join(",")), related)
            .await;
    });
}

/// Does what the session decided about one message. Returns an answer that is ready at
/// once (sent in order, before the next message is read); answers computed by handlers
/// are sent by their tasks.
fn act(
    peer: &Peer,
    handler: &Arc<dyn Handler>,
    incoming: Incoming<'_>,
    batch: BatchSlot,
    caller: &Caller,
) -> Option<Reply> {
    match incoming {
        Incoming::Request(head) => {
            let version = head.version;
            run_request(peer, handler, head.into_parts(), version, batch, caller)
        }
        Incoming::Initialize { id, params } => {
            let outcome = handler.initialize(params, peer).map(|(result, v)| {
                peer.state().session.initialize_answered(v);
                result
            });
            let (line, error) = encode_answer(&id, outcome);
            Some(Reply {
                line,
                to: Some(id),
                error,
            })
        }
        Incoming::Reply(reply) => Some(reply),
        Incoming::Notification(notice) => {
            on_notice(peer, handler, notice);
            None
        }
        Incoming::Response { id, result } => {
            let entry = peer.state().session.pending_mut().complete(&id);
            match entry {
                Some(entry) => {
                    let _ = entry.data.answer.send(Ok(result.to_owned()));
                }
                None => tracing::warn!(%id, "ignored a response to an unknown request id"),
            }
            None
        }
        Incoming::Error(resp) => {
            let entry = resp
                .id
                .as_ref()
                .and_then(|id| peer.state().session.pending_mut().complete(id));
            match entry {
                Some(entry) => {
                    let _ = entry.data.answer.send(Err(Error::Remote {
                        method: entry.method,
                        error: resp.error,
                    }));
                }
                None => tracing::warn!(
                    id = ?resp.id,
                    code = resp.error.code,
                    message = %resp.error.message,
                    "the peer reported an error not tied to a pending request"
                ),
            }
            None
        }
        Incoming::Ignored => {
            tracing::debug!("ignored a malformed message that wants no answer");
            None
        }
        _ => None,
    }
}

fn on_notice(peer: &Peer, handler: &Arc<dyn Handler>, notice: Notice<'_>) {
    let Notice {
        method,
        params,
        kind,
    } = notice;
    match kind {
        NoticeKind::Cancelled { id, reason } => {
            let token = peer.state().inflight.remove(&id);
            if let Some(token) = token {
                tracing::debug!(%id, ?reason, "request cancelled by the peer");
                token.cancel();
            }
        }
        NoticeKind::Progress(p) => {
            let mut state = peer.state();
            if let Some((_, entry)) = state
                .session
                .pending_mut()
                .by_progress_token(&p.progress_token)
                && let Some(tx) = &entry.data.progress
            {
                let _ = tx.send(p);
            }
        }
        // A log message goes to the one request in flight that asked for them, if only one
        // did (a line transport does not say which request it belongs to).
        NoticeKind::Log(p) => {
            let taker = {
                let state = peer.state();
                let mut wanting = state
                    .session
                    .pending()
                    .values()
                    .filter_map(|e| e.data.logs.as_ref());
                match (wanting.next(), wanting.next()) {
                    (Some(tx), None) => Some(tx.clone()),
                    _ => None,
                }
            };
            match taker {
                Some(tx) => {
                    let _ = tx.send(p);
                }
                None => handler.on_notification(&method, params, peer),
            }
        }
        _ => handler.on_notification(&method, params, peer),
    }
}

/// The answer's text, and its error code when it is an error.
fn encode_answer(
    id: &RequestId,
    outcome: Result<Box<RawValue>, ErrorObject>,
) -> (String, Option<i64>) {
    let error = match outcome {
        Ok(result) => match jsonrpc::encode_result(id, &result) {
            Ok(line) => return (line, None),
            Err(_) => ErrorObject::internal("could not encode the result"),
        },
        Err(err) => err,
    };
    (jsonrpc::encode_error(Some(id), &error), Some(error.code))
}

/// Runs a request the session let through in a task of its own (or, on a single-request
/// connection, hands it to the reading task) that sends its answer (or puts it in the
/// batch's); refused at once when too many are running.
fn run_request(
    peer: &Peer,
    handler: &Arc<dyn Handler>,
    head: RequestParts,
    version: Option<ProtocolVersion>,
    batch: BatchSlot,
    caller: &Caller,
) -> Option<Reply> {
    let token = CancellationToken::new();
    {
        let mut st = peer.state();
        if st.inflight.len() >= peer.shared.options.max_inflight {
            drop(st);
            let error =
                ErrorObject::internal("Server busy: too many requests in flight; retry later");
            return Some(Reply::error(Some(&head.id), &error));
        }
        if st.inflight.insert(head.id.clone(), token.clone()).is_some() {
            drop(st);
            tracing::warn!(id = %head.id, "the peer reused the id of a request still in flight");
        }
    }
    let modern = version.map(ProtocolVersion::era) == Some(Era::Modern);
    let client_capabilities = match head.client_capabilities {
        Some(raw) => Capabilities::Raw(Arc::from(raw), Default::default()),
        None => Capabilities::Known(peer.client_capabilities()),
    };
    // Only a 2026-07-28 request names its client; before, `initialize` did, once.
    let client_info = match head.client_info {
        Some(raw) if modern => ClientInfo::Raw(Arc::from(raw), Default::default()),
        _ => ClientInfo::Known,
    };
    let ctx = RequestContext {
        peer: peer.clone(),
        id: head.id.clone(),
        progress_token: head.progress_token,
        cancel: token.clone(),
        version,
        client_capabilities,
        client_info,
        log_level: head.log_level,
        round: None,
        request_meta: head.meta.map(Arc::from),
        identity: caller.identity.clone(),
        transport_trace: caller.trace.clone(),
    };
    let incoming = IncomingRequest {
        id: head.id.clone(),
        method: head.method,
        params: head.params,
        fields: head.fields,
    };
    let fut = handler.handle_request(incoming, ctx);
    let local = peer.shared.single_request && batch.is_none();
    let answering = peer.clone();
    let id = head.id;
    let request = async move {
        let outcome = tokio::select! {
            biased;
            _ = token.cancelled() => None,
            // A panicking handler ends its request, not the connection (its reading task
            // may be the one running it).
            r = std::panic::AssertUnwindSafe(fut).catch_unwind() => Some(r.unwrap_or_else(|_| {
                tracing::error!(%id, "a request's handler panicked");
                Err(ErrorObject::internal("the server failed while handling this request"))
            })),
        };
        answering.state().inflight.remove(&id);
        // A cancelled request gets no answer, as the spec asks.
        let Some(outcome) = outcome else { return };
        let (line, error) = encode_answer(&id, outcome);
        match batch {
            Some((index, tx)) => {
                let _ = tx.send((index, line));
            }
            None => answering.send_answer(line, id, error).await,
        }
    };
    if !local {
        peer.shared.tracker.spawn(request);
        return None;
    }
    let request: LocalRequest = Box::pin(request);
    match peer.shared.local.lock() {
        Ok(mut slot) if slot.is_none() => *slot = Some(request),
        _ => {
            peer.shared.tracker.spawn(request);
        }
    }
    None
}
