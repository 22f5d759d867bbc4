//! `moat-conformance-client`: the client the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, `client` mode) drives.
//!
//! The suite starts a mock server per scenario and runs `moat-conformance-client <serverUrl>`
//! with the scenario's name in `MCP_CONFORMANCE_SCENARIO`, its data (if any) as JSON in
//! `MCP_CONFORMANCE_CONTEXT`, and, from 0.2.0 on, the revision to speak in
//! `MCP_CONFORMANCE_PROTOCOL_VERSION` (`2025-11-25` or earlier: the `initialize` handshake;
//! `2026-07-28`: the stateless wire). It then grades what reached its server.
//!
//! Everything goes through the moat SDK and its HTTP transport, as any application would use
//! them: the point is to grade those, so a scenario that fails here is a bug to fix there,
//! never something to work around with hand-made HTTP.
//!
//! - [`invocation`]: reading the command line and the environment.
//! - [`scenarios`]: what the client does in each scenario.
//! - [`auth`]: where an OAuth authorizer is configured for the `auth/*` scenarios.
//! - [`form`]: filling elicitation forms and tool arguments from their schemas.
//!
//! Exit status 0 when the scenario's steps completed, 1 otherwise (the reason on stderr).
//! Logs go to stderr (`MOAT_LOG` or `RUST_LOG` set the filter; default `info`).

mod auth;
mod form;
mod invocation;
mod scenarios;

use std::process::ExitCode;

use invocation::Invocation;

fn main() -> ExitCode {
    init_tracing();
    let invocation = match Invocation::from_env() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("moat-conformance-client: {e:#}");
            eprintln!("{}", invocation::USAGE);
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("moat-conformance-client: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(
        scenario = %invocation.scenario,
        url = %invocation.server_url,
        protocol = ?invocation.protocol,
        "starting"
    );
    match runtime.block_on(scenarios::run(&invocation)) {
        Ok(()) => {
            tracing::info!(scenario = %invocation.scenario, "done");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "moat-conformance-client: scenario {}: {e:#}",
                invocation.scenario
            );
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("MOAT_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
