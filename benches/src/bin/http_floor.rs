//! The HTTP floor: hyper's HTTP/1 server (as moat's and rmcp's servers use it) reading each
//! POST body whole and answering a fixed JSON-RPC result of a `tools/call` of `echo`: what
//! HTTP itself costs on this machine, with no MCP at all.
//!
//! `http-floor ADDR`; the first line on stdout is `listening on http://ADDR/mcp`.

use std::convert::Infallible;
use std::io::Write;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

const ANSWER: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],"isError":false}}"#;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr: std::net::SocketAddr = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| ([127, 0, 0, 1], 0).into());
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "listening on http://{}/mcp", listener.local_addr()?);
    let _ = out.flush();
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(
                |req: hyper::Request<hyper::body::Incoming>| async move {
                    let body = req.into_body().collect().await.map(|b| b.to_bytes());
                    let mut r =
                        hyper::Response::new(Full::new(Bytes::from_static(ANSWER.as_bytes())));
                    if body.is_err() {
                        *r.status_mut() = hyper::StatusCode::BAD_REQUEST;
                    }
                    r.headers_mut().insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static("application/json"),
                    );
                    Ok::<_, Infallible>(r)
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                .await;
        });
    }
}
