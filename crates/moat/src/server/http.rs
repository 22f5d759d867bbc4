//! Serving a [`Server`] over HTTP: Streamable HTTP for every revision and the legacy
//! HTTP+SSE transport, from `moat_transport::http::server`.

use std::net::SocketAddr;
use std::sync::Arc;

use moat_transport::http::headers::{ParamHeader, param_headers};
use moat_transport::http::server::{HttpServer, HttpServerOptions, ToolHeaders};

use super::{Server, WeakServer};
use crate::error::Result;

impl Server {
    /// Bind an HTTP server for this MCP server at `addr` (port 0 picks one); run it with
    /// [`HttpServer::run`]. Each session, legacy session and 2026-07-28 request is served
    /// as a connection of its own.
    ///
    /// ```no_run
    /// # async fn f() -> moat::Result<()> {
    /// use moat::transport::http::server::HttpServerOptions;
    /// let server = moat::Server::new("demo", "1.0");
    /// let http = server.bind_http("127.0.0.1:8080".parse().unwrap(), HttpServerOptions::default()).await?;
    /// eprintln!("listening on http://{}/mcp", http.local_addr()?);
    /// http.run().await?;
    /// # Ok(()) }
    /// ```
    pub async fn bind_http(
        &self,
        addr: SocketAddr,
        mut options: HttpServerOptions,
    ) -> Result<HttpServer> {
        if options.tool_headers.is_none() {
            options.tool_headers = Some(Arc::new(ToolHeadersOf(self.downgrade())));
        }
        // The transport checks `MCP-Protocol-Version` against what this server speaks.
        options.versions = self.inner.options().peer.versions.clone();
        let server = self.clone();
        let on_connection = Arc::new(move |conn| {
            server.start(conn);
        });
        Ok(HttpServer::bind(addr, options, on_connection).await?)
    }

    /// Serve over HTTP at `addr` until the process ends.
    pub async fn serve_http(self, addr: SocketAddr, options: HttpServerOptions) -> Result<()> {
        let http = self.bind_http(addr, options).await?;
        http.run().await?;
        Ok(())
    }
}

/// The `x-mcp-header` annotations of the server's tools, for header validation.
struct ToolHeadersOf(WeakServer);

impl ToolHeaders for ToolHeadersOf {
    fn param_headers(&self, tool: &str) -> Vec<ParamHeader> {
        let Some(server) = self.0.upgrade() else {
            return Vec::new();
        };
        let registry = server.inner.registry();
        let Some(&i) = registry.tool_index.get(tool) else {
            return Vec::new();
        };
        param_headers(&registry.tools[i].def.input_schema).unwrap_or_default()
    }
}
