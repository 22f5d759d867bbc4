//! The console's HTTP/1.1 server (on hyper, like the metrics endpoint): the accept loop.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use super::State;

pub(crate) async fn serve(listener: TcpListener, state: Arc<State>) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, usually: the browser retries.
                tracing::debug!(error = %e, "console: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(super::routes::handle(&state, req, peer).await) }
            });
            let io = hyper_util::rt::TokioIo::new(tcp);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await
            {
                tracing::debug!(error = %e, "console: connection ended");
            }
        });
    }
}
