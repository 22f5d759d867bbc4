//! rmcp's bench server: the same trivial `echo` and `add` tools, written with rmcp's own
//! API (its tool router macros, router built once and shared) and served on its stdio
//! transport, or with `--http ADDR` on its Streamable HTTP server (`StreamableHttpService`
//! with the in-memory `LocalSessionManager`, on hyper's HTTP/1 server, as moat's is).
//!
//! HTTP options: `--json-response` (rmcp's `json_response`: a plain answer to a stateless
//! request goes out as one JSON body instead of an SSE stream; sessions always stream),
//! `--stateless` (`legacy_session_mode = false`: no sessions, 2025-era requests are served
//! one by one too). With `--http`, the first line on stdout is `listening on http://ADDR/mcp`.
//!
//! `--catalog` adds the 100 tools of `moat_bench::fixtures::tool` (the same definitions as
//! moat's bench server, converted through their JSON) and the 1 MiB text resource
//! `bench://blob`.

use std::io::Write;
use std::sync::Arc;

use moat_bench::{BLOB_URI, CATALOG_TOOLS, blob_text, fixtures};
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ListResourcesResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    RequestMetaObject, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::Peer;
use rmcp::service::RequestContext;
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
    /// The large resource, with `--catalog`.
    blob: Option<Arc<String>>,
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
impl ServerHandler for Bench {
    // Written out (the macro would generate one with tools only) to announce resources.
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::from_build_env())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, rmcp::ErrorData> {
        let resources = match self.blob {
            Some(_) => {
                serde_json::json!([{ "uri": BLOB_URI, "name": "blob", "mimeType": "text/plain" }])
            }
            None => serde_json::json!([]),
        };
        serde_json::from_value(serde_json::json!({ "resources": resources }))
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, rmcp::ErrorData> {
        match &self.blob {
            Some(blob) if request.uri == BLOB_URI => {
                Ok(ReadResourceResult::new(vec![ResourceContents::text(
                    String::clone(blob),
                    BLOB_URI,
                )])
                .into())
            }
            _ => Err(rmcp::ErrorData::resource_not_found(request.uri, None)),
        }
    }
}

/// The `--catalog` tools, each answering `ok`.
fn add_catalog(router: &mut ToolRouter<Bench>) {
    for i in 0..CATALOG_TOOLS {
        let def = serde_json::to_value(fixtures::tool(i)).expect("tool definition");
        let tool: rmcp::model::Tool = serde_json::from_value(def).expect("rmcp reads the tool");
        router.add_route(ToolRoute::new_dyn(tool, |_ctx| {
            Box::pin(async { Ok(CallToolResult::success(vec![ContentBlock::text("ok")]).into()) })
        }));
    }
}

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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let catalog = args.iter().any(|a| a == "--catalog");
    let mut router = Bench::tool_router();
    if catalog {
        add_catalog(&mut router);
    }
    let bench = Bench {
        tool_router: Arc::new(router),
        blob: catalog.then(|| Arc::new(blob_text())),
    };
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
