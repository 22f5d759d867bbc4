//! moat's bench server: a `Server` with trivial `echo` and `add` tools, served on stdio.

use moat::Server;
use moat_bench::EchoArgs;
use serde::Deserialize;

#[derive(Deserialize, moat::schemars::JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[tokio::main]
async fn main() -> moat::Result<()> {
    Server::new("moat-bench-server", env!("CARGO_PKG_VERSION"))
        .tool(
            "echo",
            "Echo the message back",
            |EchoArgs { message }| async move { Ok::<_, String>(message) },
        )
        .tool("add", "Add two integers", |AddArgs { a, b }| async move {
            Ok::<_, String>(a + b)
        })
        .serve_stdio()
        .await
}
