//! `moat gateway`: the supervising host, on stdio or HTTP, reloading its configuration
//! on SIGHUP and when the file changes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow};
use moat::transport::http::server::{HttpServerOptions, Replica, Replication, ResourceOptions};
use moat_host::config::auth::AuthConfig;
use moat_host::{Config, Host, HostOptions};

use crate::Failure;
use crate::cli::GatewayArgs;

/// The `[telemetry]` table the gateway will run with, read before it starts so that its
/// log subscriber has the trace exporter from the first event on (`None` with `--check`,
/// which exports nothing). A configuration that does not load has the defaults here: the
/// run reports why it does not load.
pub fn telemetry(args: &GatewayArgs) -> Option<moat_host::config::telemetry::TelemetryConfig> {
    if args.check {
        return None;
    }
    let config = config_path(args.config.as_deref())
        .ok()
        .and_then(|path| Config::load(&path).ok());
    Some(config.map(|c| c.telemetry).unwrap_or_default())
}

pub async fn run(args: GatewayArgs) -> Result<(), Failure> {
    let path = config_path(args.config.as_deref()).map_err(Failure::Usage)?;
    let mut config = Config::load(&path).map_err(|e| Failure::Usage(anyhow!(e)))?;
    let flags = Flags::of(&args);
    flags.apply(&mut config);
    let resource = match &config.auth {
        Some(auth) if args.http.is_some() => Some(resource_options(auth).map_err(Failure::Usage)?),
        _ => None,
    };
    let metrics_addr = config.telemetry.metrics.filter(|_| !args.check);
    // Read before any server starts: a bad key file is a usage error, not a half start.
    let state_keys = match &args.state_key_file {
        Some(file) => Some(crate::cmd::state_keys::read(file).map_err(Failure::Usage)?),
        None => None,
    };
    let helper = std::env::current_exe().context("finding the moat binary (the sandbox helper)")?;
    let options = HostOptions::default()
        .sandbox_helper(helper)
        .ephemeral(args.ephemeral);
    let host = Host::start(config, options)
        .await
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    if args.check {
        host.ready().await;
        return check(&host, args.json, args.search.as_deref()).await;
    }
    let _metrics = match metrics_addr {
        Some(addr) => {
            let endpoint = host
                .serve_metrics(addr)
                .await
                .map_err(|e| Failure::Usage(anyhow!(e)))?;
            eprintln!(
                "moat gateway: metrics on http://{}/metrics",
                endpoint.local_addr()
            );
            Some(endpoint)
        }
        None => None,
    };
    let console = match &args.console {
        Some(addr) => {
            let addr = crate::cmd::serve::parse_addr(addr)
                .await
                .map_err(Failure::Usage)?;
            if !addr.ip().is_loopback() {
                eprintln!(
                    "moat gateway: warning: the console listens on {addr}, off loopback: anyone \
                     who gets the login link can approve calls (the link works once)"
                );
            }
            let console = host
                .serve_console(addr)
                .await
                .map_err(|e| Failure::Usage(anyhow!(e)))?;
            eprintln!(
                "moat gateway: console on http://{}/ — log in (once) with {}",
                console.local_addr(),
                console.login_url()
            );
            if let Some(provider) = console.sign_in_with() {
                eprintln!("moat gateway: console sign-in also with {provider} ([console.oidc])");
            }
            Some(std::sync::Arc::new(console))
        }
        None => None,
    };
    // Clients are served while the servers start; the summary follows their first attempts.
    let for_summary = host.clone();
    let summary_path = path.clone();
    tokio::spawn(async move {
        for_summary.ready().await;
        summary(&for_summary, &summary_path);
        release_startup_memory();
    });
    spawn_reload(host.clone(), path.clone(), console.clone(), flags);

    if let Some((current, retired)) = state_keys {
        // A `Server` is a handle: this sets the gateway's own server's keys.
        let _keyed = host.server().clone().state_keys(current, retired);
    }
    let Some(addr) = &args.http else {
        // Until the client closes stdin, or the gateway is told to stop: either way every
        // server stops with it (they run in process groups of their own, which a signal
        // to the gateway does not reach).
        tokio::select! {
            served = host.serve_stdio() => served?,
            _ = crate::cmd::shutdown::terminated() => host.shutdown().await,
        }
        return Ok(());
    };
    let addr = crate::cmd::serve::parse_addr(addr)
        .await
        .map_err(Failure::Usage)?;
    let mut http_options = HttpServerOptions::default();
    http_options.token = args.token.clone();
    if resource.is_some() && args.token.is_some() {
        return Err(Failure::Usage(anyhow!(
            "[auth] (or --oauth-issuer) and --token cannot both be used: a request would need one or the other"
        )));
    }
    http_options.resource = resource;
    http_options.allowed_hosts = args.allow_host.clone();
    http_options.allowed_origins = args.allow_origin.clone();
    http_options.drain_timeout = args.drain_timeout;
    http_options.on_response = Some(host.http_response_hook());
    if let Some(directory) = host.session_directory() {
        let url = advertised_url(args.advertise_url.as_deref(), addr).map_err(Failure::Usage)?;
        http_options.replication = Some(Replication {
            replica: Replica::new(url),
            directory,
        });
    }
    let http = host
        .server()
        .bind_http(addr, http_options)
        .await
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    let local = http.local_addr().context("reading the bound address")?;
    eprintln!("moat gateway: serving on http://{local}/mcp (legacy HTTP+SSE at /sse)");
    // Not ready for a load balancer until the servers have started (or failed to).
    let readiness = http.readiness();
    readiness.set_ready(false);
    let starting = host.clone();
    tokio::spawn(async move {
        starting.ready().await;
        readiness.set_ready(true);
    });
    let served =
        crate::cmd::shutdown::serve_until_signalled("moat gateway", http, args.drain_timeout)
            .await
            .context("serving HTTP");
    host.shutdown().await;
    served?;
    Ok(())
}

/// How other replicas reach this one: `--advertise-url`, else the address it listens on
/// when that names one.
fn advertised_url(given: Option<&str>, addr: std::net::SocketAddr) -> anyhow::Result<String> {
    if let Some(url) = given {
        // Only the origin counts: the MCP path is the same on every replica.
        let authority = url
            .strip_prefix("http://")
            .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(""))
            .filter(|a| !a.is_empty() && !a.contains('@') && !a.contains(char::is_whitespace));
        return match authority {
            Some(a) => Ok(format!("http://{a}")),
            None => Err(anyhow!(
                "--advertise-url {url:?}: give an http:// URL with a host, such as \
                 http://10.0.3.7:8080 (the replicas talk plain HTTP to each other, as the \
                 balancer does to them)"
            )),
        };
    }
    if addr.ip().is_unspecified() || addr.port() == 0 {
        return Err(anyhow!(
            "with a shared store ([store] url) and --http {addr}, say how the other replicas \
             reach this one: --advertise-url http://THIS-HOST:PORT (or MOAT_ADVERTISE_URL; on \
             Kubernetes, the pod IP: docs/deploy.md)"
        ));
    }
    Ok(format!("http://{addr}"))
}

/// The HTTP server's resource-server settings from `[auth]`.
fn resource_options(auth: &AuthConfig) -> anyhow::Result<ResourceOptions> {
    auth.resource_options().map_err(|e| anyhow!(e))
}

/// Hands the heap pages that start-up used and freed (each server's tool list as parsed
/// JSON, the scans, the schema checks) back to the system. glibc keeps freed memory inside
/// its heap for reuse; a long-lived gateway would carry about a megabyte of it for good.
fn release_startup_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's own heaps.
    unsafe {
        libc::malloc_trim(0);
    }
}

const DOWN_HINT: &str = "moat gateway: `moat -v gateway …` shows each server's own error output. \
A sandboxed server sees only the system directories and the paths its profile names: one that \
cannot find its program or files needs a [servers.NAME.sandbox] table with `ro`/`rw` paths (and \
`net` if it downloads), or `sandbox = false`. Servers imported from a client's JSON get the default \
profile and what their command line names (program, files, folders): to give one more, import the \
file from a moat.toml and add [servers.NAME] with just a `sandbox` table (docs/gateway.md).";

/// `--config`, else ./moat.toml, else the user's moat.toml.
pub(crate) fn config_path(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path.to_path_buf());
    }
    let local = PathBuf::from("moat.toml");
    if local.exists() {
        return Ok(local);
    }
    let user = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|d| d.join("moat/moat.toml"));
    match user {
        Some(path) if path.exists() => Ok(path),
        user => {
            let looked = match user {
                Some(path) => format!("./moat.toml and {}", path.display()),
                None => "./moat.toml (and, with neither XDG_CONFIG_HOME nor HOME set, no \
                         user configuration)"
                    .to_owned(),
            };
            Err(anyhow!(
                "no configuration: looked for {looked}. Pass --config FILE (a moat.toml, or \
                 your client's claude_desktop_config.json / .vscode/mcp.json as is), or create \
                 one of those files (docs/gateway.md shows one)"
            ))
        }
    }
}

fn summary(host: &Host, path: &Path) {
    let listed = host.listed_tools().len();
    let held = host.held_tools();
    let held_servers = host.held_servers();
    let down = host.down_reasons();
    for collision in host.collisions() {
        eprintln!("moat gateway: name collision: {collision}");
    }
    let mut line = format!("moat gateway: {} — {listed} tools listed", path.display());
    if !held.is_empty() {
        line.push_str(&format!(", {} held back (see `moat pins`)", held.len()));
    }
    if !down.is_empty() {
        let names: Vec<&str> = down.iter().map(|(n, _)| n.as_str()).collect();
        line.push_str(&format!(", not running: {}", names.join(", ")));
    }
    eprintln!("{line}");
    for (name, why) in &held_servers {
        eprintln!("moat gateway: {name} is held, not started: {why}");
    }
    for (name, why) in &down {
        eprintln!("moat gateway: {name} did not start: {why}");
    }
    if !down.is_empty() {
        eprintln!("{DOWN_HINT}");
    }
}

async fn check(host: &Host, json: bool, search: Option<&str>) -> Result<(), Failure> {
    // Report the ranking a running gateway settles on (hybrid with a model), not the
    // words-only index it answers with while the embeddings are computed.
    host.settle_search().await;
    let listed = host.listed_tools();
    let held = host.held_tools();
    let held_servers = host.held_servers();
    let down = host.down_reasons();
    let collisions = host.collisions();
    let unmatched = host.unmatched();
    let cost = host.tool_cost();
    let hits = search.and_then(|q| host.search_tools(q, 8));
    if json {
        crate::output::print_json(&serde_json::json!({
            "tools": listed,
            "held": held.iter().map(|(n, r)| serde_json::json!({"name": n, "reason": r})).collect::<Vec<_>>(),
            "held_servers": held_servers.iter().map(|(n, r)| serde_json::json!({"name": n, "reason": r})).collect::<Vec<_>>(),
            "down": down.iter().map(|(n, why)| serde_json::json!({"name": n, "reason": why})).collect::<Vec<_>>(),
            "collisions": collisions,
            "unmatched": unmatched.iter().map(|u| serde_json::json!({
                "item": u.item,
                "field": u.field,
                "glob": u.glob,
                "among": u.among,
                "closest": u.closest,
            })).collect::<Vec<_>>(),
            "tool_search": {
                "active": cost.active,
                "ranking": cost.ranking,
                "tools": cost.tools,
                "full_tokens": cost.full_tokens,
                "search_tokens": cost.search_tokens,
            },
            "search": hits.as_ref().map(|h| h.iter().map(|(n, s)| serde_json::json!({"name": n, "score": s})).collect::<Vec<_>>()),
        }));
    } else {
        if cost.active {
            println!(
                "tool search on ({} ranking): {} listed directly, {} tools found through search_tools",
                cost.ranking.unwrap_or("lexical"),
                listed.len(),
                cost.tools
            );
        } else {
            println!("{} tools listed:", listed.len());
        }
        for name in &listed {
            println!("  {name}");
        }
        if cost.tools == 0 {
            println!("no tool definitions in the model's context");
        } else if cost.search_tokens < cost.full_tokens {
            let saved = 100.0 * (1.0 - cost.search_tokens as f64 / cost.full_tokens as f64);
            println!(
                "tool definitions in the model's context: {} tokens in full, {} with tool search ({saved:.0}% fewer){}",
                cost.full_tokens,
                cost.search_tokens,
                if cost.active {
                    ""
                } else {
                    "; [tool_search] mode = \"on\" switches it on"
                }
            );
        } else {
            println!(
                "tool definitions in the model's context: {} tokens in full, {} with tool search \
                 (the meta-tools cost more than this catalog: keep tool search off)",
                cost.full_tokens, cost.search_tokens
            );
        }
        if let (Some(query), Some(hits)) = (search, &hits) {
            println!("search_tools {query:?}:");
            for (i, (name, score)) in hits.iter().enumerate() {
                println!("  {}. {name} ({score:.3})", i + 1);
            }
        }
        for (name, reason) in &held {
            println!("held back: {name}: {reason}");
        }
        for (name, reason) in &held_servers {
            println!("held server (not started): {name}: {reason}");
        }
        for collision in &collisions {
            println!("name collision: {collision}");
        }
        for u in &unmatched {
            println!("selects nothing: {u}");
        }
        for (name, why) in &down {
            println!("not running: {name}: {why}");
        }
        if !down.is_empty() {
            eprintln!("{DOWN_HINT}");
        }
    }
    host.shutdown().await;
    if !down.is_empty() {
        let names: Vec<&str> = down.iter().map(|(n, _)| n.as_str()).collect();
        return Err(Failure::Connection(anyhow!(
            "{} server(s) did not start: {}",
            down.len(),
            names.join(", ")
        )));
    }
    if !held_servers.is_empty() {
        let names: Vec<&str> = held_servers.iter().map(|(n, _)| n.as_str()).collect();
        return Err(Failure::Usage(anyhow!(
            "{} server(s) held until their launch is approved: {} (`moat pins` shows what \
             changed; `moat pins approve server:NAME` starts it)",
            held_servers.len(),
            names.join(", ")
        )));
    }
    if !collisions.is_empty() {
        return Err(Failure::Usage(anyhow!(
            "{} name collision(s): give one of the servers a `prefix` (or keep the default, NAME__)",
            collisions.len()
        )));
    }
    if !unmatched.is_empty() {
        return Err(Failure::Usage(anyhow!(
            "{} glob(s) select nothing, so their entries do nothing: correct the names (a \
             `tool` glob may name the tool as its server does, or as clients see it, \
             server__tool), or remove the entries",
            unmatched.len()
        )));
    }
    Ok(())
}

/// Reload on SIGHUP and on change; a broken edit is reported and the running
/// configuration kept.
/// The flags that stand in for settings of moat.toml: applied to the file as loaded at
/// start and again at each reload, so an edit to the file never undoes them.
#[derive(Clone)]
struct Flags {
    oauth_issuer: Option<String>,
    resource: Option<String>,
    scope: Vec<String>,
    store: Option<String>,
    search: bool,
    metrics: Option<std::net::SocketAddr>,
}

impl Flags {
    fn of(args: &GatewayArgs) -> Flags {
        Flags {
            oauth_issuer: args.oauth_issuer.clone(),
            resource: args.resource.clone(),
            scope: args.scope.clone(),
            store: args.store.clone(),
            search: args.search.is_some(),
            metrics: args.metrics,
        }
    }

    fn apply(&self, config: &mut Config) {
        if let (Some(issuer), Some(resource)) = (&self.oauth_issuer, &self.resource) {
            // The flags stand in for the issuer, resource and scopes of [auth], keeping its
            // claim mappings and tool scopes.
            let mut auth = config
                .auth
                .take()
                .unwrap_or_else(|| AuthConfig::new(issuer.clone(), resource.clone()));
            auth.only_issuer(issuer);
            auth.resource = resource.clone();
            if !self.scope.is_empty() {
                auth.scopes = self.scope.clone();
            }
            config.auth = Some(auth);
        }
        if self.store.is_some() {
            config.store.url = self.store.clone();
        }
        if self.search {
            config.tool_search.mode = moat_host::SearchMode::On;
        }
        if self.metrics.is_some() {
            config.telemetry.metrics = self.metrics;
        }
    }
}

fn spawn_reload(
    host: Host,
    path: PathBuf,
    console: Option<std::sync::Arc<moat_host::Console>>,
    flags: Flags,
) {
    tokio::spawn(async move {
        let mut changes = moat_host::watch::watch(path);
        while let Some(next) = changes.recv().await {
            let error = match next {
                Ok(mut config) => {
                    flags.apply(&mut config);
                    let reloaded = host.reload(config).await;
                    match reloaded {
                        Ok(()) => None,
                        Err(e) => {
                            eprintln!(
                                "moat gateway: reload refused, still running the previous configuration: {e}"
                            );
                            Some(format!("reload refused: {e}"))
                        }
                    }
                }
                Err(e) => {
                    eprintln!(
                        "moat gateway: the configuration has an error, still running the previous one: {e}"
                    );
                    Some(e.to_string())
                }
            };
            if let Some(console) = &console {
                console.reload_result(error);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}
