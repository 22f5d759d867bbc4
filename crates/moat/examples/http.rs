//! A server over Streamable HTTP (every revision; the legacy HTTP+SSE pair too), on
//! loopback, with a bearer token when `MOAT_TOKEN` is set. The HTTP server checks `Host`
//! and `Origin` against DNS rebinding, bounds bodies and sessions, and resumes SSE streams.
//!
//! ```sh
//! cargo run -p moat --example http -- 127.0.0.1:8080
//! moat tools --url http://127.0.0.1:8080/mcp
//! ```

use std::net::SocketAddr;

use moat::Server;
use moat::transport::http::server::HttpServerOptions;
use schemars::JsonSchema;
use serde::Deserialize;

/// Whom to greet.
#[derive(Deserialize, JsonSchema)]
struct Greet {
    /// A name.
    name: String,
}

#[tokio::main]
async fn main() -> moat::Result<()> {
    let addr: SocketAddr = match std::env::args().nth(1) {
        Some(arg) => match arg.parse() {
            Ok(addr) => addr,
            Err(e) => {
                eprintln!("http: {arg:?} is not an address like 127.0.0.1:8080: {e}");
                std::process::exit(2);
            }
        },
        None => SocketAddr::from(([127, 0, 0, 1], 8080)),
    };
    let mut options = HttpServerOptions::default();
    options.token = std::env::var("MOAT_TOKEN").ok();
    let server = Server::new("greeter", "1.0").tool(
        "greet",
        "Greet someone by name",
        |Greet { name }| async move { format!("Hello, {name}!") },
    );
    let bound = server.bind_http(addr, options).await?;
    eprintln!("http: serving MCP at http://{}/mcp", bound.local_addr()?);
    bound.run().await?;
    Ok(())
}
