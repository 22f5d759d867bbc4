//! How `moat gateway` and `moat serve` stop: on SIGINT (Ctrl-C) or SIGTERM (what a service
//! manager or a container runtime sends), an HTTP server drains — stops accepting, lets the
//! requests in flight finish within `--drain-timeout` — and a second signal stops it at once.

use std::time::Duration;

use moat::transport::http::server::HttpServer;

/// Resolves on SIGINT or SIGTERM.
pub async fn terminated() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let sigterm = async {
        match term.as_mut() {
            Some(term) => {
                term.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = sigterm => {}
    }
}

/// Serves `http` until the first signal, then drains for up to `drain`; a second signal
/// ends the drain at once.
pub async fn serve_until_signalled(
    who: &str,
    http: HttpServer,
    drain: Duration,
) -> std::io::Result<()> {
    let second_signal = async {
        terminated().await;
        eprintln!(
            "{who}: draining: finishing the requests in flight (up to {drain:?}); signal again to stop now"
        );
        terminated().await;
        eprintln!("{who}: stopping without waiting for the requests in flight");
    };
    tokio::select! {
        served = http.run_until(terminated()) => served,
        _ = second_signal => Ok(()),
    }
}
