//! The gateway inside an application: moat-host as a library. The app starts a host from a
//! configuration (here one server: the SDK's calculator example, so build it first), talks
//! to it in-process as any MCP client would, and every call goes through the host's policy
//! and audit on the way.
//!
//! ```sh
//! cargo build -p moat --example calculator
//! cargo run -p moat-host --example embedded -- target/debug/examples/calculator
//! ```
//!
//! A real deployment keeps the servers sandboxed: drop `sandbox = false` and pass
//! `HostOptions::sandbox_helper` the path of the `moat` binary, which confines them.

use std::time::Duration;

use moat::Client;
use moat::transport::{Connection, Limits};
use moat_host::{Config, Host, HostOptions};
use serde_json::json;

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("embedded: {e}");
        std::process::exit(2);
    }
}

async fn run() -> Result<(), String> {
    let Some(server) = std::env::args().nth(1) else {
        return Err(
            "usage: embedded PATH-OF-AN-MCP-SERVER (e.g. target/debug/examples/calculator)".into(),
        );
    };
    // Keys and paths as in a moat.toml; `multiply` is refused by policy.
    let config = format!(
        r#"
        [servers.calc]
        command = {server:?}
        sandbox = false

        [policy]
        default = "allow"

        [[policy.rules]]
        name = "no-multiplying"
        decision = "deny"
        server = "calc"
        tool = "multiply"
        "#
    );
    let config = Config::from_toml_str(&config, None).map_err(|e| e.to_string())?;
    let host = Host::start(config, HostOptions::default().ephemeral(true))
        .await
        .map_err(|e| e.to_string())?;
    host.ready().await;
    if let Some((name, why)) = host.down_reasons().into_iter().next() {
        return Err(format!("the server {name} did not start: {why}"));
    }

    // An in-memory connection between the app's client and the host's server side.
    let (app_end, host_end) = tokio::io::duplex(1 << 20);
    let (host_read, host_write) = tokio::io::split(host_end);
    host.server().start(Connection::from_lines(
        tokio::io::BufReader::new(host_read),
        host_write,
        Limits::default(),
    ));
    let (app_read, app_write) = tokio::io::split(app_end);
    let client = Client::builder()
        .request_timeout(Some(Duration::from_secs(30)))
        .connect(Connection::from_lines(
            tokio::io::BufReader::new(app_read),
            app_write,
            Limits::default(),
        ))
        .await
        .map_err(|e| e.to_string())?;

    let tools = client.list_all_tools().await.map_err(|e| e.to_string())?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    println!("tools through the host: {}", names.join(", "));
    for tool in ["calc__add", "calc__multiply"] {
        let result = client
            .call_tool(tool, json!({ "a": 6, "b": 7 }))
            .await
            .map_err(|e| e.to_string())?;
        let text = result
            .content
            .iter()
            .filter_map(|c| c.as_text())
            .collect::<Vec<_>>()
            .join(" ");
        let verdict = if result.is_error == Some(true) {
            "refused"
        } else {
            "ok"
        };
        println!("{tool}: {verdict}: {text}");
    }
    client.close().await;
    host.shutdown().await;
    Ok(())
}
