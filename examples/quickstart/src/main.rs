use moat::Server;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Add {
    /// The first addend.
    a: i64,
    b: i64,
}

#[tokio::main]
async fn main() -> moat::Result<()> {
    Server::new("calc", "1.0")
        .tool(
            "add",
            "Add two integers",
            |Add { a, b }| async move { a + b },
        )
        .resource("config://app", "The app's configuration", || async {
            "debug = false"
        })
        .serve_stdio()
        .await
}
