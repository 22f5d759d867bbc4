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
use tokio::time::MissedTickBehavior;

use super::State;
use super::pending::Watching;

/// Every response's body.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// How often an idle event stream gets a comment: proxies and browsers keep it open.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// How often an event stream checks that its session is still open.
const SESSION_CHECK: Duration = Duration::from_secs(5);

/// A whole body.
pub(crate) fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed()
}

/// A body of server-sent events: `event: pending` with the list each time it changes
/// (and once at the start), a comment when idle. The stream counts as a watcher while the
/// browser keeps it open, and ends when its session does (`still_open` turns false: expired,
/// evicted, or its user dropped from the allow-list), checked before each event and every
/// [`SESSION_CHECK`]: the browser then reconnects and is refused.
pub(crate) fn pending_events(
    state: &Arc<State>,
    still_open: impl Fn() -> bool + Send + 'static,
) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    let (mut version, watching) = state.pending.watch();
    let state = state.clone();
    tokio::spawn(async move {
        let mut check = tokio::time::interval(SESSION_CHECK);
        check.set_missed_tick_behavior(MissedTickBehavior::Delay);
        check.tick().await; // the first tick is at once
        loop {
            if !still_open() {
                return;
            }
            let list = serde_json::to_string(&state.pending.list()).unwrap_or_default();
            if tx
                .send(Bytes::from(format!("event: pending\ndata: {list}\n\n")))
                .await
                .is_err()
            {
                return;
            }
            let mut idle = Duration::ZERO;
            loop {
                tokio::select! {
                    changed = version.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        break;
                    }
                    _ = check.tick() => {
                        if !still_open() {
                            return;
                        }
                        idle += SESSION_CHECK;
                        if idle >= KEEPALIVE {
                            idle = Duration::ZERO;
                            if tx.send(Bytes::from_static(b": keepalive\n\n")).await.is_err() {
                                return;
                            }
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    fn state() -> Arc<State> {
        Arc::new(State {
            inner: std::sync::Weak::new(),
            auth: super::super::auth::Auth::new("127.0.0.1:4000".parse().unwrap()).0,
            oidc: None,
            pending: Arc::new(super::super::Pending::new(std::sync::Weak::new())),
            config_errors: std::sync::Mutex::new(Vec::new()),
        })
    }

    async fn next_chunk(body: &mut Body) -> Option<String> {
        let frame = body.frame().await?.ok()?;
        let data = frame.into_data().ok()?;
        Some(String::from_utf8_lossy(&data).into_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn the_event_stream_ends_with_its_session() {
        let open = Arc::new(AtomicBool::new(true));
        let flag = open.clone();
        let mut body = pending_events(&state(), move || flag.load(Ordering::SeqCst));
        let first = next_chunk(&mut body).await.expect("the list at the start");
        assert!(first.starts_with("event: pending\n"), "{first}");
        // Idle and open: keepalives.
        let idle = next_chunk(&mut body).await.expect("a keepalive");
        assert_eq!(idle, ": keepalive\n\n");
        // The session ends: the stream ends at the next check, with nothing more sent.
        open.store(false, Ordering::SeqCst);
        let started = tokio::time::Instant::now();
        assert_eq!(next_chunk(&mut body).await, None);
        assert!(
            started.elapsed() <= SESSION_CHECK,
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_whose_session_is_already_closed_sends_nothing() {
        let mut body = pending_events(&state(), || false);
        assert_eq!(next_chunk(&mut body).await, None);
    }
}
