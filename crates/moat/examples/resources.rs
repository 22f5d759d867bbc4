//! A server with resources: a fixed one, a template, and a clock that clients can
//! subscribe to (handshake revisions: `resources/subscribe`; 2026-07-28: a listen stream).
//! The server is told when someone starts or stops watching, and says when the clock
//! changed.
//!
//! ```sh
//! cargo build -p moat --example resources
//! moat resources -- target/debug/examples/resources
//! moat read note://hello -- target/debug/examples/resources
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use moat::{ResourceError, ResourceRequest, Server};

const CLOCK: &str = "clock://now";

#[tokio::main]
async fn main() -> moat::Result<()> {
    let watchers = Arc::new(AtomicUsize::new(0));
    let counted = watchers.clone();
    let server = Server::new("notes", "1.0")
        .resource("config://app", "The app's configuration", || async {
            "debug = false\n"
        })
        .resource_template(
            "note://{name}",
            "A note by name",
            |req: ResourceRequest| async move {
                let name = req.var("name").unwrap_or_default().to_owned();
                match name.as_str() {
                    "hello" => Ok(format!("Hello from the note called {name}.\n")),
                    _ => Err(ResourceError::NotFound(format!(
                        "no note called {name:?}; try note://hello"
                    ))),
                }
            },
        )
        .resource(CLOCK, "Seconds since the Unix epoch", || async {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            now.as_secs().to_string()
        })
        .on_subscribe(move |uri, watching| {
            if uri == CLOCK {
                if watching {
                    counted.fetch_add(1, Ordering::Relaxed);
                } else {
                    counted.fetch_sub(1, Ordering::Relaxed);
                }
            }
        });

    // Tell watchers once a second that the clock changed; they read it again.
    let ticker = server.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            if watchers.load(Ordering::Relaxed) > 0 {
                ticker.notify_resource_updated(CLOCK).await;
            }
        }
    });
    server.serve_stdio().await
}
