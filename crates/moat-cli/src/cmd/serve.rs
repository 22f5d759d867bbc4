//! `moat serve`: run a built-in server.

use anyhow::anyhow;

use crate::Failure;
use crate::cli::{BuiltinServer, ServeArgs};

pub async fn run(args: ServeArgs) -> Result<(), Failure> {
    if let Some(addr) = args.http {
        return Err(Failure::Usage(anyhow!(
            "--http {addr}: the Streamable HTTP transport is not in this build yet; serve over stdio (omit --http)"
        )));
    }
    let server = match args.server {
        BuiltinServer::Everything => moat_servers::everything::server(),
    };
    tracing::info!(server = %server.info().name, "serving on stdio");
    server.serve_stdio().await?;
    Ok(())
}
