//! A calculator server over stdio: tools that cannot fail return their value, a tool that
//! can returns a `Result` (the client sees an `isError` result), and `Json` gives a tool
//! structured output with an `outputSchema`.
//!
//! ```sh
//! cargo build -p moat --example calculator
//! moat tools -- target/debug/examples/calculator
//! moat call divide --args '{"a": 7, "b": 2}' -- target/debug/examples/calculator
//! ```

use moat::{Json, Server};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Two operands.
#[derive(Deserialize, JsonSchema)]
struct Operands {
    /// The left operand.
    a: f64,
    /// The right operand.
    b: f64,
}

/// Integer division, whole.
#[derive(Deserialize, JsonSchema)]
struct Division {
    /// The dividend.
    a: i64,
    /// The divisor (not zero).
    b: i64,
}

/// What `divide` answers.
#[derive(Serialize, JsonSchema)]
struct Quotient {
    quotient: i64,
    remainder: i64,
}

#[tokio::main]
async fn main() -> moat::Result<()> {
    Server::new("calculator", "1.0")
        .tool("add", "Add two numbers", |Operands { a, b }| async move {
            a + b
        })
        .tool(
            "multiply",
            "Multiply two numbers",
            |Operands { a, b }| async move { a * b },
        )
        .tool(
            "divide",
            "Divide two integers: quotient and remainder",
            |Division { a, b }| async move {
                if b == 0 {
                    return Err("cannot divide by zero: pass a non-zero b");
                }
                Ok(Json(Quotient {
                    quotient: a / b,
                    remainder: a % b,
                }))
            },
        )
        .serve_stdio()
        .await
}
