//! Our requests' deadlines: kept by the session, slept on by one timer task per peer. A
//! request past its deadline fails with `Error::Timeout` and the other side is told to stop
//! (`notifications/cancelled`); a later request with an earlier deadline is not held up by
//! one already waiting. On a paused clock, so no wall time passes and nothing is timed.

mod support;
use support::pair;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use moat::{Client, Error, NoArgs, RequestContext, RequestOptions, Server};
use serde_json::{Value, json};

/// A server whose `stall` tool never answers; it counts the calls that were cancelled.
fn stalling(cancelled: Arc<AtomicUsize>) -> Server {
    Server::new("stall", "1").tool_with_context(
        "stall",
        "Never answers",
        move |ctx: RequestContext, _: NoArgs| {
            let cancelled = cancelled.clone();
            async move {
                // A cancelled request's handler is dropped: count the drop.
                struct Count(Arc<AtomicUsize>);
                impl Drop for Count {
                    fn drop(&mut self) {
                        self.0.fetch_add(1, Ordering::SeqCst);
                    }
                }
                let _count = Count(cancelled);
                ctx.cancelled().await;
                Ok::<_, String>("cancelled")
            }
        },
    )
}

async fn call(peer: moat::Peer, deadline: Duration) -> Result<Value, Error> {
    {
        peer.request_with(
            "tools/call",
            &json!({"name": "stall", "arguments": {}}),
            RequestOptions::default().timeout(deadline),
        )
        .await
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_past_its_deadline_fails_and_is_cancelled_on_the_other_side() {
    let cancelled = Arc::new(AtomicUsize::new(0));
    let (s, c) = pair();
    let _peer = stalling(cancelled.clone()).start(s);
    let client = Client::builder().connect(c).await.unwrap();

    // A long deadline first, then a short one: the short one must not wait for the long.
    let long = tokio::spawn(call(client.peer().clone(), Duration::from_secs(3600)));
    tokio::task::yield_now().await;
    let short = call(client.peer().clone(), Duration::from_millis(100)).await;
    match short {
        Err(Error::Timeout { method, after }) => {
            assert_eq!(method, "tools/call");
            assert_eq!(after, Duration::from_millis(100));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(!long.is_finished(), "the long request still waits");
    assert_eq!(client.peer().pending_requests(), 1);
    // The server heard that the short one was given up.
    for _ in 0..100 {
        if cancelled.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        cancelled.load(Ordering::SeqCst),
        1,
        "the server was told to stop"
    );

    // The long one times out in its turn.
    match long.await.unwrap() {
        Err(Error::Timeout { after, .. }) => assert_eq!(after, Duration::from_secs(3600)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(client.peer().pending_requests(), 0);
}
