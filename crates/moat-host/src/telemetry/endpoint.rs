//! The `/metrics` endpoint: a small HTTP/1.1 server of its own (on hyper), so metrics can
//! be scraped whether the gateway serves its clients over stdio or HTTP.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

/// The content type of the Prometheus text format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A bound metrics endpoint; it serves until the gateway ends (or this is dropped).
#[derive(Debug)]
pub struct MetricsEndpoint {
    local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsEndpoint {
    /// Binds `addr` and serves `render()` at `GET /metrics`.
    pub(crate) async fn bind(
        addr: SocketAddr,
        render: Arc<dyn Fn() -> String + Send + Sync>,
    ) -> std::io::Result<MetricsEndpoint> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let task = tokio::spawn(serve(listener, render));
        Ok(MetricsEndpoint { local, task })
    }

    /// Where it listens (the port chosen when the configuration said port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, render: Arc<dyn Fn() -> String + Send + Sync>) {
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of descriptors, usually: the scraper retries.
                tracing::debug!(error = %e, "metrics endpoint: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let render = render.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let render = render.clone();
                async move { Ok::<_, Infallible>(answer(&req, &*render)) }
            });
            let io = hyper_util::rt::TokioIo::new(tcp);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await
            {
                tracing::debug!(error = %e, "metrics endpoint: connection ended");
            }
        });
    }
}

fn answer(
    req: &Request<Incoming>,
    render: &(dyn Fn() -> String + Send + Sync),
) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => (StatusCode::OK, CONTENT_TYPE, render()),
        (_, "/metrics") => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only\n".to_owned(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "metrics are at /metrics\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}
