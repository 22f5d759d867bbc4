//! 2026-07-28 requests: no session; each POST carries one request, checked against its
//! mirrored headers, served on a connection of its own, and answered as JSON or as an SSE
//! stream scoped to it. Closing that stream cancels the request.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use hyper::body::Frame as BodyFrame;
use moat_protocol::RequestId;
use moat_protocol::error::{
    ErrorObject, HEADER_MISMATCH, INVALID_REQUEST, METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION,
};
use moat_protocol::jsonrpc::Message;
use moat_protocol::session::{self, OwnedRequestHead, RequestHead};
use tokio::sync::mpsc;

use crate::connection::{Connection, Driver, DriverSlot, Inbound, Outgoing, OutgoingKind};
use crate::framing::Frame;
use crate::http::headers::{self as h, ParamHeader};

/// Tells the server which tool arguments are mirrored into `Mcp-Param-*` headers, so it
/// can hold the headers to the body. Implemented by whoever knows the tools.
pub trait ToolHeaders: Send + Sync {
    /// The `x-mcp-header` annotations of `tool`'s `inputSchema` (empty when unknown).
    fn param_headers(&self, tool: &str) -> Vec<ParamHeader>;
}

/// Hold the mirrored headers to the body (the spec's "Server Validation") and check the
/// request metadata every 2026-07-28 request carries. The error — -32020 `HeaderMismatch`,
/// or -32602 for missing `_meta` fields — is answered with status 400.
pub(crate) fn validate(
    headers: &HeaderMap,
    head: &RequestHead<'_>,
    tools: Option<&dyn ToolHeaders>,
) -> Result<(), ErrorObject> {
    let mismatch = |m: String| ErrorObject::new(HEADER_MISMATCH, format!("Header mismatch: {m}"));
    let meta = &head.meta;
    let header = |name: &str| headers.get(name).map(|v| v.as_bytes());

    let Some(header_version) = header(h::PROTOCOL_VERSION) else {
        return Err(mismatch(
            "the MCP-Protocol-Version header is missing".into(),
        ));
    };
    // The core's rule, answered here with status 400.
    session::check_modern_meta(meta)?;
    let body_version = meta.protocol_version.as_deref().unwrap_or_default();
    if header_version != body_version.as_bytes() {
        return Err(mismatch(format!(
            "MCP-Protocol-Version header value '{}' does not match body value '{body_version}'",
            String::from_utf8_lossy(header_version)
        )));
    }
    match header(h::METHOD) {
        None => return Err(mismatch("the Mcp-Method header is missing".into())),
        Some(m) if m != head.method.as_bytes() => {
            return Err(mismatch(format!(
                "Mcp-Method header value '{}' does not match body value '{}'",
                String::from_utf8_lossy(m),
                head.method
            )));
        }
        _ => {}
    }
    if let Some(expected) = head.mirrored_name() {
        let raw =
            header(h::NAME).ok_or_else(|| mismatch("the Mcp-Name header is missing".into()))?;
        let got = h::decode_value(raw).map_err(|e| mismatch(format!("the Mcp-Name header {e}")))?;
        if got != expected {
            return Err(mismatch(format!(
                "Mcp-Name header value '{got}' does not match body value '{expected}'"
            )));
        }
    }
    if let Some(tool) = head.mirrored_tool() {
        let declared = match tools {
            Some(t) => t.param_headers(tool),
            None => Vec::new(),
        };
        // Arguments stay raw unless a tool mirrors some of them into headers.
        let arguments = head.fields.as_ref().ok().and_then(|f| f.arguments);
        let args = match (declared.is_empty(), arguments) {
            (false, Some(raw)) => serde_json::from_str(raw.get()).unwrap_or_default(),
            _ => serde_json::Value::Null,
        };
        let args = &args;
        for p in &declared {
            let header_name = p.header_name();
            let expected = p.value_in(args);
            let got = match header(&header_name) {
                Some(raw) => Some(
                    h::decode_value(raw)
                        .map_err(|e| mismatch(format!("the Mcp-Param-{} header {e}", p.name)))?,
                ),
                None => None,
            };
            let Some(want) = expected else { continue };
            let Some(got) = got else {
                return Err(mismatch(format!(
                    "the Mcp-Param-{} header is missing; the body has '{want}'",
                    p.name
                )));
            };
            if !same_value(&want, &got) {
                return Err(mismatch(format!(
                    "Mcp-Param-{} header value '{got}' does not match body value '{want}'",
                    p.name
                )));
            }
        }
    }
    Ok(())
}

/// Integers compare numerically (`42` and `42.0` are the same).
fn same_value(body: &str, header: &str) -> bool {
    body == header
        || matches!((body.parse::<f64>(), header.parse::<f64>()), (Ok(a), Ok(b)) if a == b)
}

/// The HTTP status for a final JSON-RPC answer in this era, from its error code (none for
/// a result).
pub(crate) fn status_for(error: Option<i64>) -> http::StatusCode {
    match error {
        None => http::StatusCode::OK,
        Some(METHOD_NOT_FOUND) => http::StatusCode::NOT_FOUND,
        Some(
            HEADER_MISMATCH
            | UNSUPPORTED_PROTOCOL_VERSION
            | MISSING_REQUIRED_CLIENT_CAPABILITY
            | INVALID_REQUEST,
        ) => http::StatusCode::BAD_REQUEST,
        Some(_) => http::StatusCode::OK,
    }
}

/// A request's own connection, as handed to the MCP side: its first outgoing message, and
/// the rest.
pub(crate) struct Exchange {
    pub first: Outgoing,
    pub rest: Rest,
}

/// What follows an exchange's first message.
pub(crate) struct Rest {
    rx: mpsc::Receiver<Outgoing>,
    // Dropped before `driving`, so that the reading loop sees the cancellation (or the end
    // of its input) when it is polled for the last time.
    pub cancel: CancelOnDrop,
    driving: Driving,
}

impl Rest {
    /// The next message of the MCP side, running its reading loop meanwhile.
    pub(crate) async fn next(&mut self) -> Option<Outgoing> {
        self.driving.recv(&mut self.rx).await
    }
}

/// The MCP side's reading loop for one request, when it left it to this task to poll
/// ([`DriverSlot`]): no task of its own to spawn and wake. Whatever is left of it when the
/// exchange ends is polled once more, then spawned if it still has work (a request that
/// drains after a cancellation).
#[derive(Default)]
pub(crate) struct Driving(Option<Driver>);

impl Driving {
    /// The next message from `rx`, polling the reading loop while waiting for it.
    async fn recv(&mut self, rx: &mut mpsc::Receiver<Outgoing>) -> Option<Outgoing> {
        std::future::poll_fn(|cx| self.poll_recv(rx, cx)).await
    }

    /// One poll of [`Driving::recv`]. The loop runs in this very task, so what it sends
    /// while polled must not wake the task: that wake-up would make the runtime queue the
    /// task again, and rouse an idle worker to take it, for a message read just below. So
    /// the receiver holds a no-op waker while the loop runs, and this task's own after; a
    /// message sent from elsewhere in between is found by the last look (tokio's receiver
    /// looks again after taking a waker).
    fn poll_recv(
        &mut self,
        rx: &mut mpsc::Receiver<Outgoing>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Outgoing>> {
        use std::task::Poll;
        let Some(driver) = self.0.as_mut() else {
            return rx.poll_recv(cx);
        };
        let mut quiet = std::task::Context::from_waker(std::task::Waker::noop());
        if let Poll::Ready(msg) = rx.poll_recv(&mut quiet) {
            return Poll::Ready(msg);
        }
        if driver.as_mut().poll(cx).is_ready() {
            self.0 = None;
        }
        rx.poll_recv(cx)
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        let Some(mut driver) = self.0.take() else {
            return;
        };
        // Usually done at once: its input has just ended, or its cancellation is queued.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if driver.as_mut().poll(&mut cx).is_pending()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(driver);
        }
    }
}

/// Serve one request on a connection of its own; returns its first outgoing message and
/// the rest of the exchange. `None`: the MCP side ended without answering.
pub(crate) async fn start(
    head: OwnedRequestHead,
    origin: super::session::Origin,
    on_connection: &super::OnConnection,
) -> Option<Exchange> {
    let id = head.id().clone();
    let (in_tx, in_rx) = mpsc::channel(4);
    let (out_tx, mut out_rx) = mpsc::channel(64);
    let slot = DriverSlot::default();
    on_connection(Connection {
        inbound: in_rx,
        outbound: out_tx,
        closer: None,
        single_request: true,
        driver: Some(slot.clone()),
    });
    let mut driving = Driving(slot.take());
    in_tx
        .send(origin.wrap(Inbound::Request(Box::new(head))))
        .await
        .ok()?;
    let cancel = CancelOnDrop {
        inbound: Some(in_tx),
        id,
    };
    // Hang-ups are for resumable streams; this era has none.
    let first = loop {
        let msg = driving.recv(&mut out_rx).await?;
        if !msg.hang_up {
            break msg;
        }
    };
    Some(Exchange {
        first,
        rest: Rest {
            rx: out_rx,
            cancel,
            driving,
        },
    })
}

/// Until the answer is out, dropping this cancels the request (the client closed the
/// stream); afterwards it just ends the connection.
pub(crate) struct CancelOnDrop {
    inbound: Option<mpsc::Sender<Inbound>>,
    id: RequestId,
}

impl CancelOnDrop {
    /// The answer was delivered: end the connection without cancelling.
    pub(crate) fn answered(&mut self) {
        self.inbound = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.inbound.take() {
            let line = session::cancellation(&self.id, "the client closed the response stream");
            let _ = tx.try_send(Inbound::Frame(Frame::Line(line)));
        }
    }
}

/// Whether `msg` is the final answer.
/// Whether `msg` answers the request (`Some`), and with which error code if it is an error.
pub(crate) fn answer_of(msg: &Outgoing) -> Option<Option<i64>> {
    if msg.hang_up {
        return None;
    }
    match msg.kind {
        OutgoingKind::Answer { error } => Some(error),
        // Not said by whoever encoded it: read it.
        _ => match Message::parse(&msg.text) {
            Ok(Message::Response(_)) => Some(None),
            Ok(Message::Error(e)) => Some(Some(e.error.code)),
            _ => None,
        },
    }
}

type Item = Result<BodyFrame<Bytes>, Infallible>;

/// The SSE body of an exchange: its messages until the answer, comments while idle.
pub(crate) fn sse_body(exchange: Exchange, keepalive: Duration) -> super::stream::SseBody {
    struct St {
        first: Option<Outgoing>,
        rest: Rest,
        done: bool,
        keepalive: Duration,
    }
    let st = St {
        first: Some(exchange.first),
        rest: exchange.rest,
        done: false,
        keepalive,
    };
    let stream = futures_util::stream::unfold(st, |mut st| async move {
        if st.done {
            return None;
        }
        let msg = match st.first.take() {
            Some(m) => m,
            None => match tokio::time::timeout(st.keepalive, st.rest.next()).await {
                Ok(Some(m)) if m.hang_up => {
                    // Not resumable in this era: nothing to say; keep streaming.
                    let item: Item = Ok(BodyFrame::data(Bytes::from_static(b":\n\n")));
                    return Some((item, st));
                }
                Ok(Some(m)) => m,
                Ok(None) => return None,
                Err(_) => {
                    let item: Item = Ok(BodyFrame::data(Bytes::from_static(b":\n\n")));
                    return Some((item, st));
                }
            },
        };
        if answer_of(&msg).is_some() {
            st.rest.cancel.answered();
            st.done = true;
        }
        let text = super::stream::encode_event(None, &msg.text);
        let item: Item = Ok(BodyFrame::data(Bytes::from(text)));
        Some((item, st))
    });
    http_body_util::StreamBody::new(Box::pin(stream))
}

/// Wait for the answer, dropping what comes before it (a client that takes no SSE).
pub(crate) async fn answer_only(exchange: Exchange) -> Option<(String, Option<i64>)> {
    let (mut msg, mut rest) = (exchange.first, exchange.rest);
    loop {
        if let Some(error) = answer_of(&msg) {
            rest.cancel.answered();
            return Some((msg.text, error));
        }
        msg = rest.next().await?;
    }
}

/// A shared, optional [`ToolHeaders`].
pub type SharedToolHeaders = Option<Arc<dyn ToolHeaders>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        map
    }

    struct Region;
    impl ToolHeaders for Region {
        fn param_headers(&self, tool: &str) -> Vec<ParamHeader> {
            if tool == "sql" {
                vec![ParamHeader {
                    path: vec!["region".into()],
                    name: "Region".into(),
                }]
            } else {
                vec![]
            }
        }
    }

    fn check(hs: &[(&str, &str)], method: &str, params: &str) -> Result<(), ErrorObject> {
        let raw = serde_json::value::RawValue::from_string(params.to_owned()).unwrap();
        let head = RequestHead::read(RequestId::Number(1), method.into(), Some(&raw));
        validate(&headers(hs), &head, Some(&Region))
    }

    const V: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

    #[test]
    fn matching_headers_pass() {
        let p = format!(r#"{{{V},"name":"sql","arguments":{{"region":"us-west1","q":"x"}}}}"#);
        let ok = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "sql"),
            ("mcp-param-region", "us-west1"),
        ];
        assert!(check(&ok, "tools/call", &p).is_ok());
        let list = format!("{{{V}}}");
        assert!(
            check(
                &[
                    ("mcp-protocol-version", "2026-07-28"),
                    ("mcp-method", "tools/list")
                ],
                "tools/list",
                &list
            )
            .is_ok()
        );
    }

    #[test]
    fn each_mismatch_is_refused_with_32020() {
        let p = format!(r#"{{{V},"name":"sql","arguments":{{"region":"us-west1"}}}}"#);
        let cases: [&[(&str, &str)]; 6] = [
            &[
                ("mcp-method", "tools/call"),
                ("mcp-name", "sql"),
                ("mcp-param-region", "us-west1"),
            ],
            &[
                ("mcp-protocol-version", "2025-11-25"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "sql"),
                ("mcp-param-region", "us-west1"),
            ],
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/list"),
                ("mcp-name", "sql"),
                ("mcp-param-region", "us-west1"),
            ],
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "other"),
                ("mcp-param-region", "us-west1"),
            ],
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "sql"),
            ],
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "sql"),
                ("mcp-param-region", "eu"),
            ],
        ];
        for hs in cases {
            let err = check(hs, "tools/call", &p).unwrap_err();
            assert_eq!(err.code, HEADER_MISMATCH, "{hs:?}");
        }
    }

    #[test]
    fn missing_request_metadata_is_invalid_params() {
        let hs = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ];
        for params in [
            "{}",
            r#"{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}"#,
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
        ] {
            let err = check(&hs, "tools/list", params).unwrap_err();
            assert_eq!(err.code, moat_protocol::error::INVALID_PARAMS, "{params}");
        }
    }

    #[test]
    fn task_methods_mirror_the_task_id() {
        let p = format!(r#"{{{V},"taskId":"t-1"}}"#);
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let ok = [
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", method),
                ("mcp-name", "t-1"),
            ];
            assert!(check(&ok, method, &p).is_ok(), "{method}");
            for name in [Some("t-2"), None] {
                let mut hs = vec![
                    ("mcp-protocol-version", "2026-07-28"),
                    ("mcp-method", method),
                ];
                hs.extend(name.map(|n| ("mcp-name", n)));
                let err = check(&hs, method, &p).unwrap_err();
                assert_eq!(err.code, HEADER_MISMATCH, "{method} {name:?}");
            }
        }
    }

    #[test]
    fn encoded_names_are_decoded_before_comparing() {
        let p = format!(r#"{{{V},"name":"日本"}}"#);
        let enc = h::encode_value("日本");
        let hs = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "prompts/get"),
            ("mcp-name", enc.as_str()),
        ];
        assert!(check(&hs, "prompts/get", &p).is_ok());
    }

    /// Counts the wake-ups of a task.
    #[derive(Default)]
    struct Wakes(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    impl Wakes {
        fn count(&self) -> usize {
            self.0.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    #[test]
    fn what_the_polled_loop_sends_is_read_at_once_without_waking_the_task() {
        let (tx, mut rx) = mpsc::channel(4);
        let keep = tx.clone();
        let mut driving = Driving(Some(Box::pin(async move {
            let _ = tx
                .send(Outgoing::new("from the loop".to_owned(), None))
                .await;
            std::future::pending::<()>().await;
        })));
        let wakes = Arc::new(Wakes::default());
        let waker = std::task::Waker::from(wakes.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        let got = driving.poll_recv(&mut rx, &mut cx);
        assert!(
            matches!(&got, std::task::Poll::Ready(Some(m)) if m.text == "from the loop"),
            "read in the poll that ran the loop"
        );
        assert_eq!(wakes.count(), 0, "the loop's own send woke the task");

        // Waiting again, the task's waker is the one held: a message from elsewhere wakes it.
        assert!(driving.poll_recv(&mut rx, &mut cx).is_pending());
        keep.try_send(Outgoing::new("from elsewhere".to_owned(), None))
            .expect("room in the channel");
        assert_eq!(wakes.count(), 1);
        let got = driving.poll_recv(&mut rx, &mut cx);
        assert!(matches!(&got, std::task::Poll::Ready(Some(m)) if m.text == "from elsewhere"));
    }

    #[test]
    fn statuses_follow_the_error() {
        let status = |text: &str| {
            let said = answer_of(&Outgoing::new(text.to_owned(), None)).expect("an answer");
            status_for(said)
        };
        assert_eq!(status(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), 200);
        assert_eq!(
            status(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}"#),
            404
        );
        assert_eq!(
            status(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x"}}"#),
            400
        );
        assert_eq!(
            status(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}"#),
            200
        );
        // What the encoder says is taken as said, without reading the text.
        let said = Outgoing::answer("not read".to_owned(), RequestId::from(1), Some(-32601));
        assert_eq!(
            answer_of(&said).map(status_for),
            Some(http::StatusCode::NOT_FOUND)
        );
        // Requests and notifications are no answers; neither is a hang-up.
        let note = Outgoing::new(r#"{"jsonrpc":"2.0","method":"x"}"#.to_owned(), None);
        assert_eq!(answer_of(&note), None);
        assert_eq!(answer_of(&Outgoing::hang_up(RequestId::from(1))), None);
    }
}
