//! moat's bench server: a `Server` with trivial `echo` and `add` tools, served on stdio, or
//! with `--http ADDR` on moat's Streamable HTTP server (default options: sessions for the
//! handshake era, one connection per request for 2026-07-28, legacy endpoints on). With
//! `--http`, the first line on stdout is `listening on http://ADDR/mcp`.
//!
//! `echo_progress` echoes too, after one `notifications/progress` when the request carries
//! a progress token: over HTTP that notification before the answer is what makes the
//! answer go out as an SSE stream rather than one JSON body.
//!
//! `--catalog` adds the 100 tools of `moat_bench::fixtures::tool` and the 1 MiB text
//! resource `bench://blob` (the `tools/list` and `resources/read` rows of `moat-bench all`);
//! without it the server holds only the three small tools, as the idle-memory row wants.
//!
//! `MOAT_BENCH_DESCRIBE=TEXT` gives `echo` that description instead of its own:
//! `moat-bench reload` changes it to make a running gateway hold the tool back until its pin
//! is approved (an environment variable, because pins are keyed by the command line).

use std::io::Write;

use moat::Server;
use moat::transport::http::server::HttpServerOptions;
use moat_bench::{BLOB_URI, CATALOG_TOOLS, EchoArgs, blob_text, fixtures};
use serde::Deserialize;

#[derive(Deserialize, moat::schemars::JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[tokio::main]
async fn main() -> moat::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let describe =
        std::env::var("MOAT_BENCH_DESCRIBE").unwrap_or_else(|_| "Echo the message back".to_owned());
    let server = Server::new("moat-bench-server", env!("CARGO_PKG_VERSION"))
        .tool("echo", &describe, |EchoArgs { message }| async move {
            Ok::<_, String>(message)
        })
        .tool_with_context(
            "echo_progress",
            "Report progress once, then echo the message back",
            |ctx, EchoArgs { message }| async move {
                ctx.progress(1.0, Some(1.0), None).await;
                Ok::<_, String>(message)
            },
        )
        .tool("add", "Add two integers", |AddArgs { a, b }| async move {
            Ok::<_, String>(a + b)
        });
    let server = if args.iter().any(|a| a == "--catalog") {
        catalog(server)
    } else {
        server
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--http" {
            let addr = args
                .next()
                .and_then(|a| a.parse().ok())
                .expect("--http needs an address, e.g. 127.0.0.1:0");
            let http = server.bind_http(addr, HttpServerOptions::default()).await?;
            let mut out = std::io::stdout();
            let _ = writeln!(out, "listening on http://{}/mcp", http.local_addr()?);
            let _ = out.flush();
            http.run().await?;
            return Ok(());
        }
    }
    server.serve_stdio().await
}

/// The `--catalog` additions: tools that answer `ok`, and the large resource, built once.
fn catalog(mut server: Server) -> Server {
    for i in 0..CATALOG_TOOLS {
        server = server.tool_def(fixtures::tool(i), |_ctx, _args: serde_json::Value| async {
            Ok::<_, String>("ok")
        });
    }
    let blob = std::sync::Arc::new(blob_text());
    let mut def = moat::types::Resource::new(BLOB_URI, "blob");
    def.mime_type = Some("text/plain".to_owned());
    server.resource_def(def, move |_req| {
        let blob = blob.clone();
        // The handler hands over an owned `String`: one copy of the megabyte per read.
        async move { Ok::<_, String>(String::clone(&blob)) }
    })
}
