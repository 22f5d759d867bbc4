//! A [`Connection`]: the handle a peer drives, whatever carries the bytes.
//!
//! Reading and writing each run in their own task, so a slow writer never stalls the reader
//! and vice versa. The inbound side is a channel of [`Inbound`] items that ends when the
//! stream does; the outbound side is a bounded channel of encoded messages.

use std::future::Future;
use std::pin::Pin;

use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot};

use moat_protocol::RequestId;

use crate::framing::{Frame, LineReader};

/// Limits that protect a connection from its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Longest message accepted, in bytes. Longer lines are skipped and reported.
    pub max_message_bytes: usize,
    /// Messages buffered in each direction before the sender waits.
    pub queue: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 8 * 1024 * 1024,
            queue: 1024,
        }
    }
}

impl Limits {
    /// Set the largest message accepted.
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }
}

/// Something that arrived from the peer.
#[derive(Debug)]
#[non_exhaustive]
pub enum Inbound {
    /// A frame (a message, or a report of one that was refused).
    Frame(Frame),
    /// A request the transport already read (an HTTP POST of one request, whose headers it
    /// checked against it): the session decides on its head without reading it again; a
    /// consumer that reads lines itself finds the message in `line()`.
    Request(Box<moat_protocol::session::OwnedRequestHead>),
    /// A message (a [`Inbound::Frame`] or an [`Inbound::Request`]) from a caller the
    /// transport authenticated: over HTTP, the identity behind the request's access token.
    /// It holds for that message only; the next request may come with another token.
    Caller(crate::identity::SharedIdentity, Box<Inbound>),
    /// A message (possibly from a [`Inbound::Caller`]) that arrived with W3C trace context
    /// outside it: over HTTP, the `traceparent`, `tracestate` and `baggage` headers.
    Traced(TraceHeaders, Box<Inbound>),
    /// Reading failed; the stream is over. (A clean end of stream just closes the channel.)
    Failed(std::io::Error),
    /// The stream ended, and the transport can say why (e.g. the child process exited).
    Ended(String),
}

/// W3C trace context a transport read beside a message ([`Inbound::Traced`]), as sent:
/// validating it is a tracing library's job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TraceHeaders {
    pub traceparent: String,
    pub tracestate: Option<String>,
    pub baggage: Option<String>,
}

impl TraceHeaders {
    /// The trace context of HTTP headers, if they carry a `traceparent`.
    pub fn from_http(headers: &http::HeaderMap) -> Option<TraceHeaders> {
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Some(TraceHeaders {
            traceparent: text("traceparent")?,
            tracestate: text("tracestate"),
            baggage: text("baggage"),
        })
    }
}

/// A message on its way to the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outgoing {
    /// One encoded JSON-RPC message (or batch), without a trailing newline.
    pub text: String,
    /// The peer's request this message belongs to: its response, or a notification or
    /// request sent while handling it. Streamable HTTP routes a message to the stream of
    /// that request; line transports ignore it.
    pub related: Option<RequestId>,
    /// Not a message: a request to end the stream carrying `related`'s answer now, to be
    /// resumed by the client later (SSE polling, 2025-11-25). Line transports ignore it.
    pub hang_up: bool,
    /// What the message is, when whoever encoded it said so.
    pub kind: OutgoingKind,
}

/// What an [`Outgoing`] message is, when whoever encoded it says so: a transport that must
/// know (Streamable HTTP ends a request's stream with its answer, and picks the status of a
/// 2026-07-28 answer from its error code) then acts without reading the text again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OutgoingKind {
    /// Not said: a transport that needs to know reads the text.
    #[default]
    Unknown,
    /// The answer to one of the peer's requests: a result (`error: None`), or an error with
    /// its code.
    Answer {
        /// The error's code, for an error answer.
        error: Option<i64>,
    },
}

impl Outgoing {
    /// A message that belongs to the peer's request `related`, if any.
    pub fn new(text: String, related: Option<RequestId>) -> Self {
        Outgoing {
            text,
            related,
            hang_up: false,
            kind: OutgoingKind::Unknown,
        }
    }

    /// The answer to the peer's request `to`: a result, or an error with code `error`.
    pub fn answer(text: String, to: RequestId, error: Option<i64>) -> Self {
        Outgoing {
            text,
            related: Some(to),
            hang_up: false,
            kind: OutgoingKind::Answer { error },
        }
    }

    /// Ask the transport to end the stream of the peer's request `related` for now.
    pub fn hang_up(related: RequestId) -> Self {
        Outgoing {
            text: String::new(),
            related: Some(related),
            hang_up: true,
            kind: OutgoingKind::Unknown,
        }
    }
}

impl From<String> for Outgoing {
    fn from(text: String) -> Self {
        Outgoing::new(text, None)
    }
}

/// A future that runs when the inbound stream ends and may explain why.
pub type Epilogue = Pin<Box<dyn Future<Output = Option<String>> + Send>>;

/// Closes a connection's underlying resource (e.g. shuts down a child process).
pub type Closer = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// A connection's reading loop, handed back to the transport to poll (see [`DriverSlot`]).
pub type Driver = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where the consumer of a connection may leave its reading loop for the transport to poll,
/// in the task that serves the connection, instead of spawning it: a 2026-07-28 request over
/// HTTP then costs one task and its wake-ups fewer. A consumer that leaves nothing runs its
/// loop as for any connection.
#[derive(Clone, Default)]
pub struct DriverSlot(std::sync::Arc<std::sync::Mutex<Option<Driver>>>);

impl DriverSlot {
    /// Leave `driver` for the transport to poll.
    pub fn put(&self, driver: Driver) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(driver);
    }

    /// The loop left here, if any.
    pub fn take(&self) -> Option<Driver> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl std::fmt::Debug for DriverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DriverSlot")
    }
}

/// A live connection: inbound frames, outbound messages, and how to close it.
pub struct Connection {
    /// Frames from the peer; `None` once the stream has ended.
    pub inbound: mpsc::Receiver<Inbound>,
    /// Messages to the peer.
    pub outbound: mpsc::Sender<Outgoing>,
    /// Ends the connection for good: closes the write side and releases what is behind it.
    pub closer: Option<Closer>,
    /// The connection carries one request and its answer, then ends (a 2026-07-28 request
    /// over HTTP): there is no session to keep state for across requests.
    pub single_request: bool,
    /// Set by a transport that polls the consumer's reading loop itself, if the consumer
    /// leaves it there (see [`DriverSlot`]).
    pub driver: Option<DriverSlot>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

impl Connection {
    /// Drive a line-delimited connection over any reader and writer. Spawns the reader and
    /// writer tasks on the current tokio runtime. The returned closer stops the writer
    /// (closing the write half) and waits until it is done.
    pub fn from_lines<R, W>(reader: R, writer: W, limits: Limits) -> Connection
    where
        R: AsyncBufRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::from_lines_with_epilogue(reader, writer, limits, None)
    }

    /// Like [`Connection::from_lines`]; when the inbound stream ends, `epilogue` runs and its
    /// answer, if any, is delivered as a final [`Inbound::Ended`].
    pub fn from_lines_with_epilogue<R, W>(
        reader: R,
        writer: W,
        limits: Limits,
        epilogue: Option<Epilogue>,
    ) -> Connection
    where
        R: AsyncBufRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (in_tx, in_rx) = mpsc::channel(limits.queue);
        let (out_tx, out_rx) = mpsc::channel(limits.queue);
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let (done_tx, done_rx) = oneshot::channel::<()>();
        tokio::spawn(read_loop(
            LineReader::new(reader, limits.max_message_bytes),
            in_tx,
            epilogue,
        ));
        tokio::spawn(async move {
            write_loop(out_rx, writer, stop_rx).await;
            let _ = done_tx.send(());
        });
        let closer: Closer = Box::new(move || {
            Box::pin(async move {
                let _ = stop_tx.send(());
                let _ = done_rx.await;
            })
        });
        Connection {
            inbound: in_rx,
            outbound: out_tx,
            closer: Some(closer),
            single_request: false,
            driver: None,
        }
    }
}

async fn read_loop<R: AsyncBufRead + Unpin>(
    mut reader: LineReader<R>,
    tx: mpsc::Sender<Inbound>,
    epilogue: Option<Epilogue>,
) {
    loop {
        let item = match reader.next_frame().await {
            Ok(Some(frame)) => Inbound::Frame(frame),
            Ok(None) => {
                if let Some(epilogue) = epilogue
                    && let Some(why) = epilogue.await
                {
                    let _ = tx.send(Inbound::Ended(why)).await;
                }
                return;
            }
            Err(e) => {
                let _ = tx.send(Inbound::Failed(e)).await;
                return;
            }
        };
        if tx.send(item).await.is_err() {
            return; // Nobody is listening any more.
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut rx: mpsc::Receiver<Outgoing>,
    writer: W,
    mut stop: oneshot::Receiver<()>,
) {
    // Enough for hundreds of small messages per write; a larger message is written
    // straight through. Every connection has one, so a gateway with many servers pays it
    // many times.
    let mut out = BufWriter::with_capacity(16 * 1024, writer);
    loop {
        let first = tokio::select! {
            biased;
            msg = rx.recv() => msg,
            _ = &mut stop => None,
        };
        let Some(first) = first else { break };
        if write_one(&mut out, &first.text).await.is_err() {
            break;
        }
        // Coalesce whatever else is queued into one flush: the pipelined case.
        let mut failed = false;
        while let Ok(more) = rx.try_recv() {
            if write_one(&mut out, &more.text).await.is_err() {
                failed = true;
                break;
            }
        }
        if failed || out.flush().await.is_err() {
            break;
        }
    }
    // Deliver what is already queued before closing, so a final response is not lost.
    rx.close();
    while let Ok(msg) = rx.try_recv() {
        if write_one(&mut out, &msg.text).await.is_err() {
            break;
        }
    }
    let _ = out.flush().await;
    let _ = out.shutdown().await;
}

async fn write_one<W: AsyncWrite + Unpin>(
    out: &mut BufWriter<W>,
    msg: &str,
) -> std::io::Result<()> {
    if msg.is_empty() {
        return Ok(()); // a control item (`hang_up`), not a message
    }
    out.write_all(msg.as_bytes()).await?;
    out.write_all(b"\n").await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    #[tokio::test]
    async fn round_trips_lines_both_ways() {
        let (a, b) = tokio::io::duplex(1024);
        let (ar, aw) = tokio::io::split(a);
        let mut conn = Connection::from_lines(BufReader::new(ar), aw, Limits::default());
        let (br, mut bw) = tokio::io::split(b);
        bw.write_all(b"{\"x\":1}\n").await.unwrap();
        match conn.inbound.recv().await {
            Some(Inbound::Frame(Frame::Line(l))) => assert_eq!(l, "{\"x\":1}"),
            other => panic!("{other:?}"),
        }
        conn.outbound
            .send(String::from("{\"y\":2}").into())
            .await
            .unwrap();
        let mut lines = BufReader::new(br).lines();
        assert_eq!(lines.next_line().await.unwrap().unwrap(), "{\"y\":2}");
        // Closing flushes and ends the write half: the other side sees end of stream.
        (conn.closer.take().unwrap())().await;
        assert_eq!(lines.next_line().await.unwrap(), None);
        // Dropping both halves of the other end ends the read side: the channel closes.
        drop(lines);
        drop(bw);
        assert!(conn.inbound.recv().await.is_none());
    }
}
