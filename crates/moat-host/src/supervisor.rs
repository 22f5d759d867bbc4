//! Supervision: start each downstream server (sandboxed by its profile), negotiate, watch
//! it, health-check it, and restart it with exponential backoff when it goes away.
//!
//! One task per server runs [`supervise`]. While the server is up, its catalog is
//! published to the gateway (its tools appear, `list_changed` goes out); when it goes
//! away, the catalog is withdrawn at once (calls in flight fail with the connection, new
//! calls get a "restarting" error) and the task waits out the backoff before trying again.
//! Children are reaped by the child transport; a server killed mid-call takes only its
//! own calls down.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use moat::{Client, HttpOptions, HttpTransport, RequestOptions};
use moat_protocol::Era;
use moat_transport::ChildConfig;
use tokio::sync::{oneshot, watch};

use crate::HostError;
use crate::config::{ServerConfig, ServerTransport, UrlTransport};
use crate::host::Inner;

/// The first backoff; doubled after each failed start, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A server that stayed up this long starts again from the first backoff.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// Health checks: a `ping` every interval; this many failures in a row restart it.
const PING_FAILURES_TO_RESTART: u32 = 2;

/// The live connection of a server, shared with calls.
pub(crate) type Live = watch::Receiver<Option<Arc<Client>>>;

/// Connects to the server `cfg` describes. `helper` is the binary whose
/// `sandbox --stdio --profile JSON -- CMD…` confines a command (the `moat` binary).
pub(crate) async fn connect(
    cfg: &ServerConfig,
    helper: Option<&std::path::Path>,
    request_timeout: Duration,
) -> Result<Client, HostError> {
    let builder = Client::builder()
        .request_timeout(Some(request_timeout))
        .discover_timeout(Duration::from_secs(5));
    let fail = |detail: String| HostError::Server {
        server: cfg.name.clone(),
        detail,
    };
    match &cfg.transport {
        ServerTransport::Command {
            command,
            args,
            env,
            cwd,
        } => {
            let mut child = match cfg.profile() {
                Some(mut profile) => {
                    let helper = helper.ok_or_else(|| {
                        fail("its sandbox needs the moat binary to confine it; set `sandbox = false` for this server, or run it from `moat gateway`".into())
                    })?;
                    // What the configuration names reaches the command; nothing else.
                    for name in env.keys().map(String::as_str).chain(["PATH", "HOME"]) {
                        if !profile.env.iter().any(|e| e == name) {
                            profile.env.push(name.to_owned());
                        }
                    }
                    // The server's stdout is the protocol: it cannot be capped.
                    profile.limits.output_bytes = None;
                    if profile.cwd.is_none() {
                        profile.cwd = cwd.clone();
                    }
                    let json = serde_json::to_string(&profile)
                        .map_err(|e| fail(format!("its sandbox profile: {e}")))?;
                    let mut argv: Vec<String> = vec![
                        "sandbox".into(),
                        "--stdio".into(),
                        "--profile".into(),
                        json,
                        "--".into(),
                        command.clone(),
                    ];
                    argv.extend(args.iter().cloned());
                    ChildConfig::new(helper.as_os_str(), argv)
                }
                None => ChildConfig::new(command.as_str(), args.iter().map(String::as_str)),
            };
            child.clear_env = true;
            child.name = cfg.name.clone();
            child.cwd = cwd.clone();
            for (key, value) in env {
                child = child.env(key, value);
            }
            builder
                .connect_child(child)
                .await
                .map_err(|e| fail(format!("could not start `{command}`: {e}")))
        }
        ServerTransport::Url {
            url,
            headers,
            transport,
        } => {
            let mode = match transport {
                UrlTransport::Streamable => HttpTransport::StreamableHttp,
                UrlTransport::Sse => HttpTransport::LegacySse,
                _ => HttpTransport::Auto,
            };
            let mut options = HttpOptions::default().mode(mode);
            for (name, value) in headers {
                options = options.header(name, value);
            }
            builder
                .connect_url(url, options)
                .await
                .map_err(|e| fail(format!("could not connect to {url}: {e}")))
        }
        #[allow(unreachable_patterns)]
        _ => Err(fail("this kind of server is not supported".into())),
    }
}

/// Runs one server until `stop` fires: start, publish, watch, withdraw, back off, again.
/// `ready` is told once the first attempt has ended (up, or failed), so the host can wait
/// for every server's first catalog before it answers `tools/list`.
pub(crate) async fn supervise(
    host: Weak<Inner>,
    cfg: ServerConfig,
    live: watch::Sender<Option<Arc<Client>>>,
    mut stop: watch::Receiver<bool>,
    ready: oneshot::Sender<Result<(), HostError>>,
) {
    let mut ready = Some(ready);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let Some(inner) = host.upgrade() else { return };
        let (helper, start_timeout, request_timeout, health) = inner.supervision_settings(&cfg);
        drop(inner);
        let attempt = tokio::select! {
            _ = stop.changed() => return,
            r = tokio::time::timeout(start_timeout, connect(&cfg, helper.as_deref(), request_timeout)) => r,
        };
        let client = match attempt {
            Ok(Ok(client)) => Arc::new(client),
            Ok(Err(e)) => {
                tracing::warn!(server = %cfg.name, error = %e, retry_in = ?backoff, "server did not start");
                if let Some(tx) = ready.take() {
                    let _ = tx.send(Ok(()));
                }
                if sleep_or_stop(&mut stop, &mut backoff).await {
                    return;
                }
                continue;
            }
            Err(_) => {
                tracing::warn!(server = %cfg.name, after = ?start_timeout, retry_in = ?backoff, "server did not answer initialize in time");
                if let Some(tx) = ready.take() {
                    let _ = tx.send(Ok(()));
                }
                if sleep_or_stop(&mut stop, &mut backoff).await {
                    return;
                }
                continue;
            }
        };
        let up_since = Instant::now();
        tracing::info!(
            server = %cfg.name,
            version = ?client.protocol_version(),
            "server up"
        );
        let mut notifications = client.notifications();
        // Live before its tools appear: a call that follows the listing finds it.
        live.send_replace(Some(client.clone()));
        let Some(inner) = host.upgrade() else { return };
        let published = inner
            .refresh_catalog(&cfg.name, &client, ready.is_some())
            .await;
        drop(inner);
        if let Err(e) = published {
            // Only a start-time collision is fatal: the host refuses to start.
            if let Some(tx) = ready.take() {
                live.send_replace(None);
                let _ = tx.send(Err(e));
                client_close(client).await;
                return;
            }
            tracing::error!(server = %cfg.name, error = %e, "catalog refused");
        }
        if let Some(tx) = ready.take() {
            let _ = tx.send(Ok(()));
        }

        let mut ticker = tokio::time::interval(health);
        ticker.tick().await;
        let mut failures = 0u32;
        let stopped = loop {
            tokio::select! {
                _ = stop.changed() => break true,
                _ = client.peer().closed() => break false,
                n = notifications.recv() => match n {
                    Ok(n) => {
                        let Some(inner) = host.upgrade() else { return };
                        inner.downstream_notification(&cfg.name, &client, n).await;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        // Missed some: a full refresh covers whatever they said.
                        let Some(inner) = host.upgrade() else { return };
                        let _ = inner.refresh_catalog(&cfg.name, &client, false).await;
                    }
                    Err(_) => break false,
                },
                _ = ticker.tick() => {
                    if healthy(&client, request_timeout.min(Duration::from_secs(10))).await {
                        failures = 0;
                    } else {
                        failures += 1;
                        tracing::warn!(server = %cfg.name, failures, "health check failed");
                        if failures >= PING_FAILURES_TO_RESTART {
                            break false;
                        }
                    }
                }
            }
        };
        live.send_replace(None);
        if let Some(inner) = host.upgrade() {
            inner.withdraw(&cfg.name);
        }
        let status = client.child().and_then(|c| c.exit_status());
        client_close(client).await;
        if stopped {
            return;
        }
        if up_since.elapsed() >= STABLE_AFTER {
            backoff = FIRST_BACKOFF;
        }
        tracing::warn!(server = %cfg.name, status = ?status, retry_in = ?backoff, "server went away; restarting");
        if sleep_or_stop(&mut stop, &mut backoff).await {
            return;
        }
    }
}

/// Whether the server answers a liveness probe in time: `ping` in the handshake era,
/// `server/discover` in 2026-07-28 (which has no `ping`). A call in flight has its own
/// deadline and proves nothing either way, so the probe is skipped then.
async fn healthy(client: &Client, within: Duration) -> bool {
    if client.peer().pending_requests() > 0 {
        return true;
    }
    let modern = client.protocol_version().map(|v| v.era()) == Some(Era::Modern);
    let probe = async {
        if modern {
            client
                .peer()
                .request_raw(
                    "server/discover",
                    &serde_json::json!({}),
                    RequestOptions::default(),
                )
                .await
                .map(|_| ())
        } else {
            client.ping().await
        }
    };
    matches!(tokio::time::timeout(within, probe).await, Ok(Ok(())))
}

/// Closes the connection (ending the child: stdin closed, then SIGTERM, then SIGKILL).
async fn client_close(client: Arc<Client>) {
    match Arc::try_unwrap(client) {
        Ok(client) => client.close().await,
        // Calls still hold it: closing the peer ends them, the child ends with the last handle.
        Err(shared) => {
            shared.peer().close().await;
            if let Some(child) = shared.child() {
                child.kill();
            }
        }
    }
}

/// Waits out the backoff (doubling it for next time); true when told to stop meanwhile.
async fn sleep_or_stop(stop: &mut watch::Receiver<bool>, backoff: &mut Duration) -> bool {
    let wait = *backoff;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
    tokio::select! {
        _ = stop.changed() => true,
        _ = tokio::time::sleep(wait) => false,
    }
}
