//! Newline-delimited framing (the MCP stdio transport): one JSON message per line.
//!
//! A line longer than the limit is skipped as it streams by, never buffered whole, and
//! reported as [`Frame::Oversized`]; a line that is not UTF-8 is reported as
//! [`Frame::InvalidUtf8`]. Either way the reader carries on with the next line.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One unit read off the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Frame {
    /// A complete line, without its terminator (`\n` or `\r\n`).
    Line(String),
    /// A line longer than the limit; it was discarded. Carries the bytes seen.
    Oversized(usize),
    /// A line that is not valid UTF-8; it was discarded.
    InvalidUtf8,
}

/// Reads frames from a buffered byte stream.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    max_len: usize,
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader that refuses lines longer than `max_len` bytes.
    pub fn new(inner: R, max_len: usize) -> Self {
        LineReader {
            inner,
            max_len,
            buf: Vec::new(),
        }
    }

    /// The next frame; `Ok(None)` at end of stream. Blank lines are skipped. A final line
    /// without a newline is still delivered.
    pub async fn next_frame(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            match self.read_line().await? {
                None => return Ok(None),
                Some(Frame::Line(l)) if l.trim().is_empty() => continue,
                Some(frame) => return Ok(Some(frame)),
            }
        }
    }

    async fn read_line(&mut self) -> std::io::Result<Option<Frame>> {
        self.buf.clear();
        let mut oversized: Option<usize> = None;
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                // End of stream.
                return Ok(match oversized {
                    Some(n) => Some(Frame::Oversized(n)),
                    None if self.buf.is_empty() => None,
                    None => Some(self.finish()),
                });
            }
            let (chunk, found) = match memchr::memchr(b'\n', available) {
                Some(i) => (&available[..i], Some(i + 1)),
                None => (available, None),
            };
            let consumed = found.unwrap_or(chunk.len());
            match oversized.as_mut() {
                Some(n) => *n += chunk.len(),
                None if self.buf.len() + chunk.len() > self.max_len => {
                    oversized = Some(self.buf.len() + chunk.len());
                    self.buf = Vec::new();
                }
                None => self.buf.extend_from_slice(chunk),
            }
            self.inner.consume(consumed);
            if found.is_some() {
                return Ok(Some(match oversized {
                    Some(n) => Frame::Oversized(n),
                    None => self.finish(),
                }));
            }
        }
    }

    fn finish(&mut self) -> Frame {
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        let bytes = std::mem::take(&mut self.buf);
        match String::from_utf8(bytes) {
            Ok(s) => Frame::Line(s),
            Err(_) => Frame::InvalidUtf8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn frames(input: &[u8], max: usize, cap: usize) -> Vec<Frame> {
        let mut r = LineReader::new(BufReader::with_capacity(cap, input), max);
        let mut out = Vec::new();
        while let Some(f) = r.next_frame().await.unwrap() {
            out.push(f);
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_strips_crlf() {
        let f = frames(b"{\"a\":1}\r\n\n{\"b\":2}\n{\"c\":3}", 100, 4).await;
        assert_eq!(
            f,
            vec![
                Frame::Line("{\"a\":1}".into()),
                Frame::Line("{\"b\":2}".into()),
                Frame::Line("{\"c\":3}".into())
            ]
        );
    }

    #[tokio::test]
    async fn oversized_lines_are_skipped_and_reading_goes_on() {
        let mut input = vec![b'x'; 1000];
        input.extend_from_slice(b"\nok\n");
        let f = frames(&input, 100, 16).await;
        assert_eq!(f, vec![Frame::Oversized(1000), Frame::Line("ok".into())]);
    }

    #[tokio::test]
    async fn invalid_utf8_is_reported_not_fatal() {
        let f = frames(b"\xff\xfe\nok\n", 100, 64).await;
        assert_eq!(f, vec![Frame::InvalidUtf8, Frame::Line("ok".into())]);
    }
}
