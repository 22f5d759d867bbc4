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

use moat::{Client, HttpOptions, HttpTransport, RequestOptions, ServerNotification};
use moat_protocol::Era;
use moat_transport::ChildConfig;
use serde_json::Value;
use tokio::sync::watch;
use tracing::Instrument;

use crate::config::{ServerConfig, ServerTransport, UrlTransport};
use crate::error::HostError;
use crate::inner::Inner;

/// The first backoff; doubled after each failed start, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A server that stayed up this long starts again from the first backoff.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// Health checks: a `ping` every interval; this many failures in a row restart it.
const PING_FAILURES_TO_RESTART: u32 = 2;

/// Connects to the server `cfg` describes. `helper` is the binary whose
/// `sandbox --stdio --profile JSON -- CMD…` confines a command (the `moat` binary);
/// `report`, where that sandbox writes how the server ended (`--report`).
pub(crate) async fn connect(
    host: &Weak<Inner>,
    cfg: &ServerConfig,
    helper: Option<&std::path::Path>,
    report: Option<&std::path::Path>,
    request_timeout: Duration,
    start_timeout: Duration,
) -> Result<Client, HostError> {
    connect_with(
        host,
        cfg,
        helper,
        report,
        request_timeout,
        start_timeout,
        None,
    )
    .await
}

/// Connects to the URL server `cfg` describes as one user, whose credentials `authorizer`
/// gives (`downstream_auth`).
pub(crate) async fn connect_as_user(
    host: &Weak<Inner>,
    cfg: &ServerConfig,
    authorizer: Arc<dyn moat_transport::http::oauth::Authorizer>,
    request_timeout: Duration,
    start_timeout: Duration,
) -> Result<Client, HostError> {
    connect_with(
        host,
        cfg,
        None,
        None,
        request_timeout,
        start_timeout,
        Some(authorizer),
    )
    .await
}

async fn connect_with(
    host: &Weak<Inner>,
    cfg: &ServerConfig,
    helper: Option<&std::path::Path>,
    report: Option<&std::path::Path>,
    request_timeout: Duration,
    start_timeout: Duration,
    user: Option<Arc<dyn moat_transport::http::oauth::Authorizer>>,
) -> Result<Client, HostError> {
    // The gateway offers what the policy lets the server ask of the client; what it asks
    // outside a call is answered here, inside one by the call's answerer.
    let capabilities = host
        .upgrade()
        .map(|inner| crate::requests::capabilities_for(&inner, &cfg.name))
        .unwrap_or_default();
    let weak = host.clone();
    let name = cfg.name.clone();
    let builder = Client::builder()
        .protocol(cfg.protocol)
        .request_timeout(Some(request_timeout))
        // Starting may take far longer than a call (a package fetched on first use): the
        // handshake is bounded by the start-up deadline, not by `call_timeout`.
        .handshake_timeout(Some(start_timeout))
        .discover_timeout(Duration::from_secs(5))
        .capabilities(capabilities)
        .on_input(move |request| {
            crate::requests::answer_outside_a_call(weak.clone(), name.clone(), request)
        });
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
            let sandboxed = cfg.profile().is_some();
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
                    let mut argv: Vec<String> = vec!["sandbox".into(), "--stdio".into()];
                    if let Some(report) = report.and_then(std::path::Path::to_str) {
                        argv.extend(["--report".into(), report.to_owned()]);
                    }
                    argv.extend(["--profile".into(), json, "--".into(), command.clone()]);
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
            let span = if sandboxed {
                crate::telemetry::spans::sandbox_spawn(&cfg.name)
            } else {
                tracing::Span::none()
            };
            builder
                .connect_child(child)
                .instrument(span)
                .await
                .map_err(|e| fail(format!("could not start `{command}`: {e}")))
        }
        ServerTransport::Url { url, transport, .. } => {
            let mode = match transport {
                UrlTransport::Streamable => HttpTransport::StreamableHttp,
                UrlTransport::Sse => HttpTransport::LegacySse,
                _ => HttpTransport::Auto,
            };
            let options = HttpOptions::default().mode(mode);
            // The configured headers and `[servers.NAME.auth]`'s credentials: the
            // gateway's own, or the user's.
            let options = match user {
                Some(authorizer) => crate::downstream_auth::headers::user_options(cfg, options)
                    .authorizer(authorizer),
                None => crate::downstream_auth::headers::shared_options(cfg, options),
            };
            builder
                .connect_url(url, options)
                .await
                .map_err(|e| fail(format!("could not connect to {url}: {e}")))
        }
        #[allow(unreachable_patterns)]
        _ => Err(fail("this kind of server is not supported".into())),
    }
}

/// Runs one server until `stop` fires (or its sender goes: a successor took over): start,
/// publish, watch, back off, again. The first attempt's end (up, or failed) ends a start
/// under way ([`Inner::started`]). A server that goes away keeps its catalog while it
/// restarts — a restart that brings back the same tools changes nothing for clients — and
/// loses it when a restart fails; calls meanwhile wait for it (bounded). Only the current
/// task of a server (`generation`) withdraws what it offered.
pub(crate) async fn supervise(
    host: Weak<Inner>,
    cfg: ServerConfig,
    generation: u64,
    live: watch::Sender<Option<Arc<Client>>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut first = true;
    let mut backoff = FIRST_BACKOFF;
    loop {
        let Some(inner) = host.upgrade() else { return };
        let (helper, start_timeout, request_timeout, health) = inner.supervision_settings(&cfg);
        // Where its sandbox says which limit it hit, when that is counted.
        let report = crate::telemetry::sandbox::LimitReport::new(
            inner.metrics(),
            helper.is_some() && cfg.profile().is_some(),
        );
        drop(inner);
        let attempt = tokio::select! {
            _ = stop.changed() => {
                end_first_attempt(&host, &mut first);
                return;
            }
            r = tokio::time::timeout(start_timeout, connect(&host, &cfg, helper.as_deref(), report.as_ref().map(|r| r.path()), request_timeout, start_timeout)) => r,
        };
        let client = match attempt {
            Ok(Ok(client)) => Arc::new(client),
            failed => {
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!("it did not answer initialize within {start_timeout:?}"),
                };
                tracing::warn!(server = %cfg.name, error = %why, retry_in = ?backoff, "server did not start");
                if let Some(report) = report {
                    report.collect(host.clone(), cfg.name.clone());
                }
                if let Some(inner) = host.upgrade() {
                    crate::telemetry::server_start_failed(inner.metrics(), &cfg.name);
                    inner.set_down(&cfg.name, Some(why));
                    // Not back: what it offered goes (it was kept while it restarted).
                    if inner.is_current(&cfg.name, generation) {
                        inner.withdraw(&cfg.name);
                    }
                }
                end_first_attempt(&host, &mut first);
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
        crate::telemetry::server_up(inner.metrics(), &cfg);
        inner.set_down(&cfg.name, None);
        if let Err(e) = inner.refresh_catalog(&cfg.name, &client).await {
            tracing::error!(server = %cfg.name, error = %e, "catalog refused");
        }
        // A handshake-era server sends the log level it was set to for good: the most, so
        // each client gets what it asked for (the gateway filters per client).
        if client.protocol_version().map(|v| v.era()) == Some(Era::Handshake)
            && client.server_capabilities().logging.is_some()
            && let Err(e) = client
                .set_log_level(moat_protocol::types::LoggingLevel::Debug)
                .await
        {
            tracing::debug!(server = %cfg.name, error = %e, "logging/setLevel refused");
        }
        let mut watched = inner.watched().changes();
        let mut following = crate::subscriptions::follow(&inner, &cfg.name, &client).await;
        drop(inner);
        end_first_attempt(&host, &mut first);

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
                        let _ = inner.refresh_catalog(&cfg.name, &client).await;
                    }
                    Err(_) => break false,
                },
                _ = watched.changed() => {
                    let Some(inner) = host.upgrade() else { return };
                    crate::subscriptions::refollow(&inner, &cfg.name, &client, &mut following).await;
                }
                _ = ticker.tick() => {
                    let streams = following.streams();
                    if healthy(&client, streams, request_timeout.min(Duration::from_secs(10))).await {
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
        let why = if stopped {
            None
        } else if failures >= PING_FAILURES_TO_RESTART {
            Some(format!(
                "it stopped answering (no answer to {failures} health checks in a row), so moat restarted it"
            ))
        } else {
            Some(client.peer().close_reason())
        };
        client_close(client).await;
        if stopped {
            return;
        }
        if let Some(report) = report {
            report.collect(host.clone(), cfg.name.clone());
        }
        if let Some(inner) = host.upgrade() {
            crate::telemetry::server_restarting(inner.metrics(), &cfg.name);
            inner.note_restart(&cfg.name);
            inner.set_down(&cfg.name, why.clone());
        }
        if up_since.elapsed() >= STABLE_AFTER {
            backoff = FIRST_BACKOFF;
        }
        tracing::warn!(server = %cfg.name, why = ?why, retry_in = ?backoff, "server went away; restarting");
        if sleep_or_stop(&mut stop, &mut backoff).await {
            return;
        }
    }
}

/// Ends the start under way of this server's first attempt, once.
fn end_first_attempt(host: &Weak<Inner>, first: &mut bool) {
    if std::mem::take(first)
        && let Some(inner) = host.upgrade()
    {
        inner.started();
    }
}

/// Whether the server answers a liveness probe in time: `ping` in the handshake era,
/// `server/discover` in 2026-07-28 (which has no `ping`). A call in flight has its own
/// deadline and proves nothing either way, so the probe is skipped then; the gateway's
/// own `streams` (listen requests that stay open) are not calls.
async fn healthy(client: &Client, streams: usize, within: Duration) -> bool {
    if client.peer().pending_requests() > streams {
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

impl Inner {
    /// A notification from a downstream server.
    async fn downstream_notification(
        self: &Arc<Self>,
        server: &str,
        client: &Arc<Client>,
        n: ServerNotification,
    ) {
        match n.method.as_str() {
            "notifications/tools/list_changed"
            | "notifications/resources/list_changed"
            | "notifications/prompts/list_changed" => {
                if let Err(e) = self.refresh_catalog(server, client).await {
                    tracing::warn!(server, error = %e, "catalog refresh failed");
                }
            }
            "notifications/resources/updated" => {
                let uri = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("uri"))
                    .and_then(Value::as_str);
                if let Some(uri) = uri
                    && self.resource_owner(uri).as_deref() == Some(server)
                {
                    self.server().notify_resource_updated(uri).await;
                }
            }
            "notifications/message" => {
                tracing::info!(server, params = ?n.params, "server log");
            }
            _ => {}
        }
    }
}
