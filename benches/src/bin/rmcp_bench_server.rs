//! rmcp's bench server: the same trivial `echo` and `add` tools, written with rmcp's own
//! API (its tool router macros, router kept in a field) and served on its stdio transport.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
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
    tool_router: rmcp::handler::server::router::tool::ToolRouter<Self>,
}

#[tool_router]
impl Bench {
    #[tool(description = "Echo the message back")]
    fn echo(&self, Parameters(EchoArgs { message }): Parameters<EchoArgs>) -> String {
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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bench = Bench {
        tool_router: Bench::tool_router(),
    };
    // `--pipes`: rmcp's non-blocking pipe transport (`stdio_pipes`, reads and writes on the
    // reactor) instead of its default `stdio()` (tokio's blocking-pool stdin/stdout).
    if std::env::args().any(|a| a == "--pipes") {
        let service = bench.serve(rmcp::transport::io::stdio_pipes()).await?;
        service.waiting().await?;
    } else {
        let service = bench.serve(rmcp::transport::stdio()).await?;
        service.waiting().await?;
    }
    Ok(())
}
