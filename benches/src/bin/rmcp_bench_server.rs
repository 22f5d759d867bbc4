//! rmcp's bench server: the same trivial `echo` and `add` tools, written with rmcp's own
//! API (its tool router macros, router built once and shared) and served on its stdio
//! transport, or with `--http ADDR` on its Streamable HTTP server (`StreamableHttpService`
//! with the in-memory `LocalSessionManager`, on hyper's HTTP/1 server, as moat's is).
//!
//! HTTP options: `--json-response` (rmcp's `json_response`: a plain answer to a stateless
//! request goes out as one JSON body instead of an SSE stream; sessions always stream),
//! `--stateless` (`legacy_session_mode = false`: no sessions, 2025-era requests are served
//! one by one too). With `--http`, the first line on stdout is `listening on http://ADDR/mcp`.

use std::io::Write;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ProgressNotificationParam, RequestMetaObject};
use rmcp::service::Peer;
use rmcp::{RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Deserialize;

#[derive(Deserialize, rmcp::schemars::JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    message: String,
}

#[derive(Deserialize, rmcp::schemars::JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[derive(Clone)]
struct Bench {
    // Shared: the HTTP service makes a handler per session and per stateless request
    // (and per header check), so each of those is a pointer copy, not a router copy.
    tool_router: Arc<ToolRouter<Self>>,
}

#[tool_router]
impl Bench {
    #[tool(description = "Echo the message back")]
    fn echo(&self, Parameters(EchoArgs { message }): Parameters<EchoArgs>) -> String {
        message
    }

    #[tool(description = "Report progress once, then echo the message back")]
    async fn echo_progress(
        &self,
        Parameters(EchoArgs { message }): Parameters<EchoArgs>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> String {
        if let Some(token) = meta.get_progress_token() {
            let _ = peer
                .notify_progress(ProgressNotificationParam::new(token, 1.0).with_total(1.0))
                .await;
        }
        message
    }

    #[tool(description = "Add two integers")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }
}

// The router is built once and kept in a field, rmcp's fastest set-up (its default,
// `Self::tool_router()`, builds the router again on every call).
#[tool_handler(router = self.tool_router)]
impl ServerHandler for Bench {}

async fn serve_http(
    bench: Bench,
    addr: std::net::SocketAddr,
    json_response: bool,
    stateless: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let config = StreamableHttpServerConfig::default()
        .with_json_response(json_response)
        .with_legacy_session_mode(!stateless);
    let service = StreamableHttpService::new(
        move || Ok(bench.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "listening on http://{}/mcp", listener.local_addr()?);
    let _ = out.flush();
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                .await;
        });
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bench = Bench {
        tool_router: Arc::new(Bench::tool_router()),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--http") {
        let addr = args
            .get(i + 1)
            .and_then(|a| a.parse().ok())
            .expect("--http needs an address, e.g. 127.0.0.1:0");
        let flag = |f: &str| args.iter().any(|a| a == f);
        return serve_http(bench, addr, flag("--json-response"), flag("--stateless")).await;
    }
    // `--pipes`: rmcp's non-blocking pipe transport (`stdio_pipes`, reads and writes on the
    // reactor) instead of its default `stdio()` (tokio's blocking-pool stdin/stdout).
    if args.iter().any(|a| a == "--pipes") {
        let service = bench.serve(rmcp::transport::io::stdio_pipes()).await?;
        service.waiting().await?;
    } else {
        let service = bench.serve(rmcp::transport::stdio()).await?;
        service.waiting().await?;
    }
    Ok(())
}
