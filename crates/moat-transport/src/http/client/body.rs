//! Reading what a server sends, within bounds: JSON bodies up to the message limit, SSE
//! events (decoded by `sse-stream`) with a cap on the bytes of any one event, and short
//! snippets of error bodies for messages.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use sse_stream::{Sse, SseStream};

/// Why a body could not be read.
#[derive(Debug)]
pub(super) enum BodyError {
    /// Longer than the limit.
    TooLarge(usize),
    /// Not UTF-8.
    NotUtf8,
    /// No complete body in time.
    Timeout(Duration),
    /// The connection failed while reading.
    Http(String),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge(limit) => write!(f, "the body exceeds the limit of {limit} bytes"),
            BodyError::NotUtf8 => f.write_str("the body is not valid UTF-8"),
            BodyError::Timeout(t) => write!(f, "no complete body within {t:?}"),
            BodyError::Http(e) => write!(f, "reading the body failed: {e}"),
        }
    }
}

/// Read a whole body of at most `limit` bytes, within `timeout`.
pub(super) async fn read_limited(
    mut resp: reqwest::Response,
    limit: usize,
    timeout: Option<Duration>,
) -> Result<String, BodyError> {
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge(limit));
    }
    let read = async {
        let mut buf = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if buf.len() + chunk.len() > limit {
                        return Err(BodyError::TooLarge(limit));
                    }
                    buf.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return Err(BodyError::Http(super::error_chain(&e))),
            }
        }
        String::from_utf8(buf).map_err(|_| BodyError::NotUtf8)
    };
    match timeout {
        Some(t) => tokio::time::timeout(t, read)
            .await
            .unwrap_or(Err(BodyError::Timeout(t))),
        None => read.await,
    }
}

/// The most of an error body kept to inspect (a JSON-RPC error is small).
pub(super) const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Read an error body for inspection: at most [`ERROR_BODY_LIMIT`] bytes, briefly. What does
/// not fit or arrive in time is dropped; an unreadable body reads as empty.
pub(super) async fn read_error_body(mut resp: reqwest::Response) -> String {
    let read = async {
        let mut buf = Vec::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            let room = ERROR_BODY_LIMIT.saturating_sub(buf.len());
            buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if buf.len() >= ERROR_BODY_LIMIT {
                break;
            }
        }
        String::from_utf8_lossy(&buf).into_owned()
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .unwrap_or_default()
}

/// A short, single-line excerpt of a body for an error message.
pub(super) fn snippet(body: &str) -> String {
    const MAX: usize = 300;
    let flat: String = body
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= MAX {
        flat
    } else {
        let cut: String = flat.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

/// One SSE event, as the transport uses it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Event {
    /// The event type; `None` means `message`.
    pub event: Option<String>,
    /// The data (lines joined with `\n`); empty for priming events.
    pub data: String,
    /// The event id, for `Last-Event-ID`.
    pub id: Option<String>,
    /// The reconnection delay the server asked for, in milliseconds.
    pub retry: Option<u64>,
}

impl Event {
    /// Whether this event carries a JSON-RPC message: a `message` event with data.
    pub fn is_message(&self) -> bool {
        self.event.as_deref().is_none_or(|e| e == "message") && !self.data.trim().is_empty()
    }
}

/// Why an event stream stopped early.
#[derive(Debug)]
pub(super) enum StreamError {
    /// An event larger than the limit (the stream cannot continue past it).
    TooLarge(usize),
    /// The connection failed or the stream was malformed.
    Broken(String),
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::TooLarge(limit) => {
                write!(
                    f,
                    "the server sent an event larger than the limit of {limit} bytes"
                )
            }
            StreamError::Broken(e) => write!(f, "{e}"),
        }
    }
}

/// The events of an SSE response.
pub(super) type Events = Pin<Box<dyn Stream<Item = Result<Event, StreamError>> + Send>>;

/// Decode the response body as SSE, refusing any event whose data exceeds `limit` bytes
/// without buffering more than about twice that.
pub(super) fn events(resp: reqwest::Response, limit: usize) -> Events {
    // The raw bytes of one event carry field names and line breaks besides the data.
    let raw_limit = limit.saturating_mul(2).saturating_add(4096);
    let bytes = Bounded {
        inner: Box::pin(resp.bytes_stream()),
        limit: raw_limit,
        event_len: 0,
        line_len: 0,
        after_cr: false,
    };
    let stream = SseStream::from_bytes_stream(bytes).map(move |item| match item {
        Ok(Sse {
            event,
            data,
            id,
            retry,
        }) => {
            let data = data.unwrap_or_default();
            if data.len() > limit {
                return Err(StreamError::TooLarge(limit));
            }
            Ok(Event {
                event,
                data,
                id,
                retry,
            })
        }
        Err(sse_stream::Error::Body(e)) => match e.downcast_ref::<BoundError>() {
            Some(BoundError::TooLarge) => Err(StreamError::TooLarge(limit)),
            Some(BoundError::Http(e)) => Err(StreamError::Broken(e.clone())),
            None => Err(StreamError::Broken(e.to_string())),
        },
        Err(e) => Err(StreamError::Broken(format!("malformed event stream: {e}"))),
    });
    Box::pin(stream)
}

#[derive(Debug)]
enum BoundError {
    TooLarge,
    Http(String),
}

impl std::fmt::Display for BoundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BoundError::TooLarge => f.write_str("event too large"),
            BoundError::Http(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for BoundError {}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Passes bytes through, failing once one event (bytes between blank lines) exceeds `limit`.
/// It only finds line ends (LF, CR, CRLF); decoding fields is `sse-stream`'s job.
struct Bounded {
    inner: ByteStream,
    limit: usize,
    event_len: usize,
    line_len: usize,
    after_cr: bool,
}

impl Bounded {
    fn check(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    if self.line_len == 0 {
                        self.event_len = 0; // A blank line ends the event.
                    }
                    self.line_len = 0;
                }
                _ => {
                    self.after_cr = false;
                    self.line_len += 1;
                    self.event_len += 1;
                    if self.event_len > self.limit {
                        return false;
                    }
                }
            }
        }
        true
    }
}

impl Stream for Bounded {
    type Item = Result<Bytes, BoundError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if self.as_mut().get_mut().check(&chunk) {
                    Poll::Ready(Some(Ok(chunk)))
                } else {
                    Poll::Ready(Some(Err(BoundError::TooLarge)))
                }
            }
            Poll::Ready(Some(Err(e))) => {
                Poll::Ready(Some(Err(BoundError::Http(super::error_chain(&e)))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounded(limit: usize) -> Bounded {
        Bounded {
            inner: Box::pin(futures_util::stream::empty()),
            limit,
            event_len: 0,
            line_len: 0,
            after_cr: false,
        }
    }

    #[test]
    fn blank_lines_reset_the_event_count_whatever_the_line_ending() {
        for sep in ["\n\n", "\r\n\r\n", "\r\r"] {
            let mut b = bounded(10);
            let text = format!("data: 1234{sep}data: 1234{sep}");
            assert!(b.check(text.as_bytes()), "{sep:?}");
        }
        let mut b = bounded(10);
        assert!(!b.check(b"data: 1234\ndata: 1234\n\n"));
    }

    #[test]
    fn a_crlf_split_across_chunks_is_one_line_end() {
        let mut b = bounded(12);
        assert!(b.check(b"data: 12\r"));
        assert!(b.check(b"\n\r\ndata: 12345\r\n"));
    }

    #[test]
    fn snippets_are_short_and_single_line() {
        assert_eq!(snippet("a\n  b\tc"), "a b c");
        assert!(snippet(&"x".repeat(1000)).chars().count() <= 301);
    }
}
