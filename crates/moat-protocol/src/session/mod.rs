//! The sans-IO session: what each incoming message means for one connection, decided here.
//!
//! A [`Session`] owns the connection's lifecycle and the revisions it speaks. Its
//! [`handle_incoming`](Session::handle_incoming) parses a message once — envelope, then the
//! params' [`RequestHead`] — applies every rule of the lifecycle and the eras (a 2026-07-28
//! request's `_meta` revision and client capabilities, what the revision defines, batches
//! only in 2025-03-26, `ping` answered at once) and says what to do: run a request, answer
//! now with a line, deliver a response, act on a notification. The shell that drives a
//! transport (`moat`'s `Peer`) does the I/O and runs handlers; it knows no method names, era
//! rules or error codes of its own.

mod head;
mod outbound;

use std::borrow::Cow;
use std::time::Instant;

use serde_json::value::RawValue;

pub use head::{
    OwnedRequestHead, ParamsFields, RequestFields, RequestHead, RequestMeta, RequestParts,
    check_input_responses,
};
pub use outbound::{Outbound, OutboundNotice, OutboundRequests, negotiated_version, outbound};

use crate::error::{ErrorObject, INVALID_REQUEST, PARSE_ERROR};
use crate::id::RequestId;
use crate::jsonrpc::{self, EnvelopeError, ErrorResponse, Message};
use crate::lifecycle::{Lifecycle, Role, State};
use crate::pending::{Pending, PendingTable};
use crate::types::{
    CancelledNotificationParams, EmptyResult, LoggingMessageNotificationParams,
    ProgressNotificationParams, methods,
};
use crate::version::{
    Era, META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, ProtocolVersion, SupportedVersions,
};

/// What to do about one incoming message.
#[derive(Debug)]
#[non_exhaustive]
pub enum Incoming<'a> {
    /// Run this request through the handler; its answer goes back under its id.
    Request(RequestHead<'a>),
    /// `initialize` (server side): the handler answers it, then
    /// [`Session::initialize_answered`] records the revision.
    Initialize {
        /// The request id.
        id: RequestId,
        /// Its params, undecoded.
        params: Option<&'a RawValue>,
    },
    /// Write this line now, before reading on (a `ping` answer, a refusal, the answer to
    /// a malformed message).
    Reply(Reply),
    /// The answer to one of our requests.
    Response {
        /// The id of our request.
        id: RequestId,
        /// The result, undecoded.
        result: &'a RawValue,
    },
    /// An error answer, to one of our requests when its id is readable.
    Error(ErrorResponse),
    /// A notification, already applied to the lifecycle where it changes it.
    Notification(Notice<'a>),
    /// A 2025-03-26 batch: what to do about each element, in order. The answers to its
    /// requests (and its elements' replies) go back together as one array.
    Batch {
        /// Each element's meaning.
        items: Vec<Incoming<'a>>,
        /// The first request in it: Streamable HTTP sends the batch's answer on its stream.
        related: Option<RequestId>,
    },
    /// Nothing to do (a malformed message that wants no answer).
    Ignored,
}

/// A line to write, and the request of the other side it answers (for routing).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The JSON-RPC text.
    pub line: String,
    /// The request it answers, when its id could be read.
    pub to: Option<RequestId>,
    /// The error's code, when the reply is an error (a transport may answer with a status
    /// that depends on it).
    pub error: Option<i64>,
}

impl Reply {
    /// The error answer to `to` (or to no id, when the id could not be read).
    pub fn error(to: Option<&RequestId>, error: &ErrorObject) -> Reply {
        Reply {
            line: jsonrpc::encode_error(to, error),
            to: to.cloned(),
            error: Some(error.code),
        }
    }
}

/// A notification from the other side.
#[derive(Debug)]
pub struct Notice<'a> {
    /// The method name.
    pub method: Cow<'a, str>,
    /// The params, undecoded.
    pub params: Option<&'a RawValue>,
    /// What it means to the connection.
    pub kind: NoticeKind,
}

/// What a notification means to the connection.
#[derive(Debug)]
#[non_exhaustive]
pub enum NoticeKind {
    /// `notifications/initialized`: the handshake is done (already applied).
    Initialized,
    /// The other side cancels its request `id`.
    Cancelled {
        /// The request to stop.
        id: RequestId,
        /// Why, if said.
        reason: Option<String>,
    },
    /// Progress on one of our requests.
    Progress(ProgressNotificationParams),
    /// A log message (to the request that asked for them, if the shell can tell which).
    Log(LoggingMessageNotificationParams),
    /// Anything else: for the handler.
    Other,
}

/// One connection's protocol state: lifecycle, revisions, and our requests awaiting
/// answers (each with the caller's data `T`) with their deadlines.
#[derive(Debug)]
pub struct Session<T = ()> {
    lifecycle: Lifecycle,
    versions: SupportedVersions,
    max_message_bytes: usize,
    pending: PendingTable<T>,
    /// The connection carries one request and ends (a 2026-07-28 HTTP POST): no handshake
    /// can happen on it.
    single_request: bool,
}

/// One of our requests whose deadline passed: what to tell its caller and the other side.
#[derive(Debug)]
pub struct Expired<T> {
    /// The request's id.
    pub id: RequestId,
    /// Its entry, removed from the table.
    pub entry: Pending<T>,
    /// The `notifications/cancelled` to send, unless it was `initialize` (which is never
    /// cancelled).
    pub cancel: Option<CancelledNotificationParams>,
}

impl<T> Session<T> {
    /// A fresh connection in `role`, speaking `versions`, with at most `max_pending` of our
    /// requests in flight; messages over `max_message_bytes` are refused by the transport,
    /// and [`Session::oversized`] says so.
    pub fn new(
        role: Role,
        versions: SupportedVersions,
        max_message_bytes: usize,
        max_pending: usize,
    ) -> Session<T> {
        Session {
            lifecycle: Lifecycle::new(role),
            versions,
            max_message_bytes,
            pending: PendingTable::new(max_pending),
            single_request: false,
        }
    }

    /// The connection carries one request and then ends (a 2026-07-28 HTTP POST has a
    /// connection of its own): an `initialize` on it is refused, since no session could
    /// follow it.
    pub fn single_request(mut self) -> Session<T> {
        self.single_request = true;
        self
    }

    /// Our requests awaiting answers.
    pub fn pending(&self) -> &PendingTable<T> {
        &self.pending
    }

    /// Our requests awaiting answers, to add, settle or cancel one.
    pub fn pending_mut(&mut self) -> &mut PendingTable<T> {
        &mut self.pending
    }

    /// When the session next needs [`handle_timeout`](Self::handle_timeout): the earliest
    /// deadline of our requests. The shell sleeps until then (or until a request with an
    /// earlier deadline is sent).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.pending.next_deadline()
    }

    /// Time is `now`: the requests whose deadline passed, removed, each with the
    /// cancellation to send.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Expired<T>> {
        self.pending
            .take_expired(now)
            .into_iter()
            .map(|(id, entry)| {
                let cancel =
                    (entry.method != methods::INITIALIZE).then(|| CancelledNotificationParams {
                        request_id: Some(id.clone()),
                        reason: Some("the request timed out".to_owned()),
                        ..Default::default()
                    });
                Expired { id, entry, cancel }
            })
            .collect()
    }

    /// The lifecycle.
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// The lifecycle, to move it (the client's handshake, shutdown).
    pub fn lifecycle_mut(&mut self) -> &mut Lifecycle {
        &mut self.lifecycle
    }

    /// The revisions this side speaks.
    pub fn versions(&self) -> &SupportedVersions {
        &self.versions
    }

    /// The revision in use, once negotiated.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.lifecycle.version()
    }

    /// Server: we answered `initialize` in `version`.
    pub fn initialize_answered(&mut self, version: ProtocolVersion) {
        self.lifecycle.initialize_answered(version);
    }

    /// The answer to a message of `bytes` bytes, over the limit (the transport dropped it
    /// unread, so its id is unknown).
    pub fn oversized(&self, bytes: usize) -> Reply {
        let error = ErrorObject::new(
            INVALID_REQUEST,
            format!(
                "Invalid request: message of {bytes} bytes exceeds the limit of {} bytes",
                self.max_message_bytes
            ),
        );
        Reply::error(None, &error)
    }

    /// The answer to a message that is not UTF-8.
    pub fn invalid_utf8(&self) -> Reply {
        let error = ErrorObject::new(PARSE_ERROR, "Parse error: message is not valid UTF-8");
        Reply::error(None, &error)
    }

    /// What to do about `text`, one message or a batch: [`read`] it, then
    /// [`decide`](Self::decide).
    pub fn handle_incoming<'a>(&mut self, text: &'a str) -> Incoming<'a> {
        self.decide(read(text))
    }

    /// What to do about a message already [`read`]: the rules of the lifecycle and the
    /// revisions, applied to it. Cheap: the reading (the costly part, for a large message)
    /// needs no session, so a shell that shares its session does it outside any lock.
    pub fn decide<'a>(&mut self, read: Read<'a>) -> Incoming<'a> {
        match read.0 {
            ReadKind::One(Ok(message)) => self.message(message),
            ReadKind::One(Err(e)) | ReadKind::Batch(Err(e)) => refusal(e),
            ReadKind::Batch(Ok(elements)) => self.batch(elements),
        }
    }

    fn batch<'a>(&mut self, elements: Vec<Result<ReadMessage<'a>, EnvelopeError>>) -> Incoming<'a> {
        if !self
            .version()
            .is_some_and(ProtocolVersion::supports_batches)
        {
            let error = ErrorObject::invalid_request(format!(
                "Invalid request: JSON-RPC batches are only allowed in protocol revision 2025-03-26 (this connection: {})",
                self.version()
                    .map_or("not negotiated", ProtocolVersion::as_str)
            ));
            return Incoming::Reply(Reply::error(None, &error));
        }
        let related = elements.iter().find_map(|e| match e {
            Ok(ReadMessage::Request(head)) => Some(head.id.clone()),
            _ => None,
        });
        let items = elements
            .into_iter()
            .map(|element| match element {
                Ok(message) => self.message(message),
                Err(e) => refusal(e),
            })
            .collect();
        Incoming::Batch { items, related }
    }

    fn message<'a>(&mut self, message: ReadMessage<'a>) -> Incoming<'a> {
        match message {
            ReadMessage::Request(head) => self.handle_request(head),
            ReadMessage::Notification(n) => Incoming::Notification(self.notification(n)),
            ReadMessage::Response { id, result } => Incoming::Response { id, result },
            ReadMessage::Error(e) => Incoming::Error(e),
        }
    }

    fn notification<'a>(&mut self, n: jsonrpc::Notification<'a>) -> Notice<'a> {
        let kind = match n.method.as_ref() {
            methods::NOTIFICATIONS_INITIALIZED => {
                self.lifecycle.initialized_received();
                NoticeKind::Initialized
            }
            methods::NOTIFICATIONS_CANCELLED => {
                match decode(n.params).and_then(|p: CancelledNotificationParams| {
                    p.request_id.map(|id| (id, p.reason))
                }) {
                    Some((id, reason)) => NoticeKind::Cancelled { id, reason },
                    None => NoticeKind::Other,
                }
            }
            methods::NOTIFICATIONS_PROGRESS => {
                decode(n.params).map_or(NoticeKind::Other, NoticeKind::Progress)
            }
            methods::NOTIFICATIONS_MESSAGE => {
                decode(n.params).map_or(NoticeKind::Other, NoticeKind::Log)
            }
            _ => NoticeKind::Other,
        };
        Notice {
            method: n.method,
            params: n.params,
            kind,
        }
    }

    /// Checks a request against the lifecycle and the revision: answered at once
    /// (`ping`, refusals), `initialize`, or a request for the handler.
    /// What to do about a request whose head was already read (by a transport that
    /// checked its headers against it): the same rules as for a request in
    /// [`handle_incoming`](Self::handle_incoming), without reading its params again.
    pub fn handle_request<'a>(&mut self, head: RequestHead<'a>) -> Incoming<'a> {
        let refuse = |error: ErrorObject| Incoming::Reply(Reply::error(Some(&head.id), &error));
        let method: &str = &head.method;
        let meta = &head.meta;
        let state = self.lifecycle.state();
        let era = self.lifecycle.era();
        let role = self.lifecycle.role();

        // Which revision is this request made in? In the modern era each request says so
        // in `_meta`; a request that does so on a fresh connection makes it a modern one.
        let mut version = self.lifecycle.version();
        match meta.protocol_version.as_deref() {
            Some(requested)
                if method != methods::INITIALIZE
                    && (state == State::Uninitialized || era == Some(Era::Modern)) =>
            {
                match self.versions.check_modern(requested) {
                    // `server/discover` on a fresh connection answers in the modern era
                    // but commits the connection to nothing: a client that gives up
                    // waiting for the answer may fall back to `initialize` (the revisions'
                    // backward compatibility), and that must still work when the answer
                    // was only slow.
                    Ok(v)
                        if method == methods::SERVER_DISCOVER && state == State::Uninitialized =>
                    {
                        version = Some(v);
                    }
                    Ok(v) => {
                        if let Err(e) = self.lifecycle.enter_modern(v) {
                            return refuse(ErrorObject::invalid_request(e.to_string()));
                        }
                        version = Some(v);
                    }
                    Err(error) => return refuse(error),
                }
                // Capabilities are declared per request, and required.
                if role == Role::Server
                    && let Err(error) = check_modern_meta(meta)
                {
                    return refuse(error);
                }
            }
            None if era == Some(Era::Modern) && role == Role::Server => {
                if let Err(error) = check_modern_meta(meta) {
                    return refuse(error);
                }
            }
            _ => {}
        }
        let modern = version.map(ProtocolVersion::era) == Some(Era::Modern);
        if modern
            && role == Role::Server
            && version.is_some_and(|v| !v.defines_client_request(method))
        {
            return refuse(ErrorObject::method_not_found(method));
        }

        if method == methods::PING {
            return Incoming::Reply(match self.lifecycle.check_incoming_request(method) {
                Ok(()) => match jsonrpc::encode_result(&head.id, &EmptyResult::default()) {
                    Ok(line) => Reply {
                        line,
                        to: Some(head.id.clone()),
                        error: None,
                    },
                    Err(e) => Reply::error(Some(&head.id), &ErrorObject::internal(e.to_string())),
                },
                Err(error) => Reply::error(Some(&head.id), &error),
            });
        }
        if method == methods::INITIALIZE
            && role == Role::Server
            && let Some(error) = self.initialize_refused(&head)
        {
            return refuse(error);
        }
        if method != methods::SERVER_DISCOVER
            && !modern
            && let Err(error) = self.lifecycle.check_incoming_request(method)
        {
            return refuse(error);
        }
        if method == methods::INITIALIZE {
            return Incoming::Initialize {
                id: head.id,
                params: head.params,
            };
        }
        Incoming::Request(RequestHead { version, ..head })
    }
}

impl<T> Session<T> {
    /// Why an `initialize` cannot be answered here, if it cannot. Made as a 2026-07-28
    /// request (its `_meta` names that revision), it is a method the revision removed:
    /// -32601. Otherwise, when this side speaks no handshake-era revision or the connection
    /// ends after one request, the client gets -32022 naming the requested revision and the
    /// 2026-07-28 ones we do speak, so it can retry in that era.
    fn initialize_refused(&self, head: &RequestHead<'_>) -> Option<ErrorObject> {
        let modern_request = head
            .meta
            .protocol_version
            .as_deref()
            .and_then(ProtocolVersion::parse)
            .is_some_and(|v| v.era() == Era::Modern);
        if modern_request {
            return Some(ErrorObject::method_not_found(&head.method));
        }
        if !self.single_request && self.versions.latest_handshake().is_some() {
            return None;
        }
        let params = head.params;
        #[derive(serde::Deserialize)]
        struct Requested {
            #[serde(rename = "protocolVersion", default)]
            protocol_version: Option<String>,
        }
        let requested = decode::<Requested>(params)
            .and_then(|r| r.protocol_version)
            .unwrap_or_default();
        let modern = self
            .versions
            .as_slice()
            .iter()
            .copied()
            .filter(|v| v.era() == Era::Modern)
            .collect();
        Some(SupportedVersions::new(modern).unsupported_error(&requested))
    }
}

/// The rule for every 2026-07-28 request a server gets: its `_meta` names the revision and
/// declares the client's capabilities (there is no handshake to learn them from). The
/// error (-32602) says which is missing. Transports that check a request before it reaches
/// a session (HTTP answers it with status 400) apply this same rule.
pub fn check_modern_meta(meta: &RequestMeta<'_>) -> Result<(), ErrorObject> {
    let missing = |revision: &str, what: &str| {
        Err(ErrorObject::invalid_params(format!(
            "Invalid params: a {revision} request must carry {what}"
        )))
    };
    if meta.raw.is_none() {
        return missing("2026-07-28", "params._meta");
    }
    let Some(revision) = meta.protocol_version.as_deref() else {
        return missing("2026-07-28", &format!("_meta[\"{META_PROTOCOL_VERSION}\"]"));
    };
    if meta.client_capabilities.is_none() {
        return missing(revision, &format!("_meta[\"{META_CLIENT_CAPABILITIES}\"]"));
    }
    Ok(())
}

/// A message (or batch) read — envelope and, for a request, its head — before the
/// session's rules are applied ([`Session::decide`]).
#[derive(Debug)]
pub struct Read<'a>(ReadKind<'a>);

// Lives on the stack for one message, most often a request: boxing the head would cost
// an allocation per request to save bytes for the rarer kinds.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum ReadKind<'a> {
    One(Result<ReadMessage<'a>, EnvelopeError>),
    Batch(Result<Vec<Result<ReadMessage<'a>, EnvelopeError>>, EnvelopeError>),
}

#[allow(clippy::large_enum_variant)] // as for `ReadKind`
#[derive(Debug)]
enum ReadMessage<'a> {
    Request(RequestHead<'a>),
    Notification(jsonrpc::Notification<'a>),
    Response { id: RequestId, result: &'a RawValue },
    Error(ErrorResponse),
}

/// Reads `text`, one message or a batch: the envelope, and each request's params once into
/// its head. Needs no session (see [`Session::decide`]).
pub fn read(text: &str) -> Read<'_> {
    fn one(message: Message<'_>) -> ReadMessage<'_> {
        match message {
            Message::Request(r) => {
                ReadMessage::Request(RequestHead::read(r.id, r.method, r.params))
            }
            Message::Notification(n) => ReadMessage::Notification(n),
            Message::Response(r) => ReadMessage::Response {
                id: r.id,
                result: r.result,
            },
            Message::Error(e) => ReadMessage::Error(e),
        }
    }
    if jsonrpc::is_batch(text) {
        return Read(ReadKind::Batch(
            Message::parse_batch(text)
                .map(|elements| elements.into_iter().map(|e| e.map(one)).collect()),
        ));
    }
    Read(ReadKind::One(Message::parse(text).map(one)))
}

/// The answer to a message that is not valid JSON-RPC, if it wants one.
fn refusal<'a>(e: EnvelopeError) -> Incoming<'a> {
    if e.respond {
        Incoming::Reply(Reply::error(e.id.as_ref(), &e.error))
    } else {
        Incoming::Ignored
    }
}

/// The `notifications/cancelled` line that gives up request `id` (a transport's, when
/// the stream that would carry its answer is gone).
pub fn cancellation(id: &RequestId, reason: &str) -> String {
    let params = CancelledNotificationParams {
        request_id: Some(id.clone()),
        reason: Some(reason.to_owned()),
        ..Default::default()
    };
    jsonrpc::encode_notification(methods::NOTIFICATIONS_CANCELLED, Some(&params))
        .unwrap_or_default()
}

/// A notification's params as `T`; `None` when they do not decode (the notification then
/// goes to the handler as it is).
fn decode<T: serde::de::DeserializeOwned>(params: Option<&RawValue>) -> Option<T> {
    serde_json::from_str(params.map_or("{}", RawValue::get)).ok()
}

#[cfg(test)]
mod tests;
