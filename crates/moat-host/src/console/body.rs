//! The console's response bodies: whole ones, and the event stream that carries the list
//! of calls waiting for consent.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::BodyExt;
use http_body_util::Full;
use http_body_util::combinators::BoxBody;
use hyper::body::{Bytes, Frame};
use tokio::sync::mpsc;

use super::State;
use super::pending::Watching;

/// Every response's body.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// How often an idle event stream gets a comment: proxies and browsers keep it open.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// A whole body.
pub(crate) fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed()
}

/// A body of server-sent events: `event: pending` with the list each time it changes
/// (and once at the start), a comment when idle. The stream counts as a watcher while the
/// browser keeps it open.
pub(crate) fn pending_events(state: &Arc<State>) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    let (mut version, watching) = state.pending.watch();
    let state = state.clone();
    tokio::spawn(async move {
        loop {
            let list = serde_json::to_string(&state.pending.list()).unwrap_or_default();
            if tx
                .send(Bytes::from(format!("event: pending\ndata: {list}\n\n")))
                .await
                .is_err()
            {
                return;
            }
            loop {
                tokio::select! {
                    changed = version.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        break;
                    }
                    _ = tokio::time::sleep(KEEPALIVE) => {
                        if tx.send(Bytes::from_static(b": keepalive\n\n")).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    });
    Events {
        rx,
        _watching: watching,
    }
    .boxed()
}

struct Events {
    rx: mpsc::Receiver<Bytes>,
    _watching: Watching,
}

impl hyper::body::Body for Events {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok(Frame::data(c))))
    }
}
