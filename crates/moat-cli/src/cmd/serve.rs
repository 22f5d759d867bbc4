//! `moat serve`: run a built-in server on stdio or over HTTP.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, anyhow};
use moat::transport::http::server::{HttpServerOptions, ResourceOptions};

use crate::Failure;
use crate::cli::{BuiltinServer, SandboxNet, ServeArgs};

pub async fn run(args: ServeArgs) -> Result<(), Failure> {
    let mut server = build(&args).map_err(Failure::Usage)?;
    if let Some(file) = &args.state_key_file {
        let (current, retired) = crate::cmd::state_keys::read(file).map_err(Failure::Usage)?;
        server = server.state_keys(current, retired);
    }
    let Some(addr) = &args.http else {
        tracing::info!(server = %server.info().name, "serving on stdio");
        server.serve_stdio().await?;
        return Ok(());
    };
    let addr = parse_addr(addr).await.map_err(Failure::Usage)?;
    let mut options = HttpServerOptions::default();
    options.stateless = args.stateless;
    options.token = args.token.clone();
    if let (Some(issuer), Some(resource)) = (&args.oauth_issuer, &args.resource) {
        let mut r = ResourceOptions::new(issuer.clone(), resource.clone());
        r.scopes = args.scope.clone();
        options.resource = Some(r);
    }
    options.allowed_hosts = args.allow_host.clone();
    options.allowed_origins = args.allow_origin.clone();
    options.session_idle_timeout = args.session_idle.max(Duration::from_secs(1));
    options.drain_timeout = args.drain_timeout;
    let http = server
        .bind_http(addr, options)
        .await
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    let local = http.local_addr().context("reading the bound address")?;
    let what = if args.stateless {
        "Streamable HTTP, 2026-07-28 only (stateless)".to_owned()
    } else {
        format!("Streamable HTTP, every revision; legacy HTTP+SSE at http://{local}/sse")
    };
    eprintln!(
        "moat: serving {} on http://{local}/mcp ({what})",
        server.info().name
    );
    crate::cmd::shutdown::serve_until_signalled("moat", http, args.drain_timeout)
        .await
        .context("serving HTTP")?;
    Ok(())
}

/// The built-in server `args` names, with its options.
fn build(args: &ServeArgs) -> anyhow::Result<moat::Server> {
    Ok(match args.server {
        BuiltinServer::Everything => moat_servers::everything::server(),
        BuiltinServer::Fs => {
            let root = args
                .root
                .clone()
                .ok_or_else(|| anyhow!("moat serve fs needs --root DIR"))?;
            let mut options = moat_servers::fs::FsOptions::default();
            options.read_only = args.read_only;
            moat_servers::fs::server_with(root, options)?
        }
        BuiltinServer::Sqlite => {
            let db = args
                .db
                .clone()
                .ok_or_else(|| anyhow!("moat serve sqlite needs --db FILE"))?;
            moat_servers::sqlite::server(db, moat_servers::sqlite::SqliteOptions::default())?
        }
        BuiltinServer::Exec => {
            let mut options = moat_servers::exec::ExecOptions::default();
            options.helper = Some(std::env::current_exe().context("finding the moat binary")?);
            options.profile.ro.extend(args.ro.iter().cloned());
            options.profile.rw.extend(args.rw.iter().cloned());
            if let Some(cwd) = &args.cwd {
                options.profile.cwd = Some(cwd.clone());
            }
            options.profile.net = match args.net {
                SandboxNet::None => moat_sandbox::Net::None,
                SandboxNet::Host => moat_sandbox::Net::Host,
            };
            options.allow_shell = args.allow_shell;
            moat_servers::exec::server(options)?
        }
    })
}

/// `8080`, `:8080`, `127.0.0.1:8080`, `[::1]:8080` or `localhost:8080`.
pub(crate) async fn parse_addr(text: &str) -> anyhow::Result<SocketAddr> {
    let text = text.trim();
    let with_host = if let Some(port) = text.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else if text.bytes().all(|b| b.is_ascii_digit()) {
        format!("127.0.0.1:{text}")
    } else {
        text.to_owned()
    };
    if let Ok(addr) = with_host.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let mut found = tokio::net::lookup_host(&with_host)
        .await
        .with_context(|| {
            format!("--http {text}: expected HOST:PORT or PORT (e.g. 127.0.0.1:8080)")
        })?
        .collect::<Vec<_>>();
    // Prefer IPv4 loopback for `localhost`, as most clients resolve it that way.
    found.sort_by_key(|a| !a.is_ipv4());
    found
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("--http {text}: the host name resolves to no address"))
}
