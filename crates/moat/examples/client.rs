//! A client: start a server (any command speaking MCP over stdio) or connect to a URL, list
//! its tools, and call one. The revision is negotiated (2026-07-28's `server/discover`
//! first, then the `initialize` handshake).
//!
//! ```sh
//! cargo build -p moat --example client --example calculator
//! target/debug/examples/client -- target/debug/examples/calculator
//! target/debug/examples/client --call add '{"a": 1, "b": 2}' -- target/debug/examples/calculator
//! target/debug/examples/client http://127.0.0.1:8080/mcp
//! ```

use moat::Client;
use serde_json::Value;

const USAGE: &str = "usage: client [--call TOOL JSON] (URL | -- COMMAND [ARGS...])";

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("client: {e}");
        std::process::exit(2);
    }
}

async fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut call: Option<(String, Value)> = None;
    let mut url = None;
    let mut command = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--call" => {
                let (Some(name), Some(json)) = (args.next(), args.next()) else {
                    return Err(USAGE.to_owned());
                };
                let value = serde_json::from_str(&json)
                    .map_err(|e| format!("the arguments of --call are not JSON: {e}"))?;
                call = Some((name, value));
            }
            "--" => command.extend(args.by_ref()),
            _ if url.is_none() && command.is_empty() => url = Some(arg),
            _ => return Err(USAGE.to_owned()),
        }
    }
    let client = match (url, command.is_empty()) {
        (Some(url), true) => Client::connect_url(&url).await,
        (None, false) => Client::connect_command(command).await,
        _ => return Err(USAGE.to_owned()),
    }
    .map_err(|e| e.to_string())?;

    let info = client.server_info();
    let revision = client.protocol_version().map(|v| v.to_string());
    println!(
        "{} {} (revision {})",
        info.name,
        info.version,
        revision.as_deref().unwrap_or("?")
    );
    for tool in client.list_all_tools().await.map_err(|e| e.to_string())? {
        println!(
            "  {}: {}",
            tool.name,
            tool.description.as_deref().unwrap_or("")
        );
    }
    if let Some((name, arguments)) = call {
        let result = client
            .call_tool(&name, arguments)
            .await
            .map_err(|e| e.to_string())?;
        let text = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?;
        println!("{name} → {text}");
        if result.is_error == Some(true) {
            client.close().await;
            return Err(format!("{name} returned an error"));
        }
    }
    client.close().await;
    Ok(())
}
