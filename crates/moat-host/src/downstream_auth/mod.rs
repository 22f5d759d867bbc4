//! Credentials to downstream URL servers (`[servers.NAME.auth]`): what the gateway sends
//! to a server behind it, never the caller's own token.
//!
//! - `static`: one secret of the gateway's, as a header on the server's one connection
//!   (added where the supervisor connects).
//! - `exchange`: each user's access token exchanged (RFC 8693, [`exchange`]) for a token
//!   whose audience is the server, kept per user until it expires ([`cache`]), and sent
//!   by that user's own connection ([`authorizer`]).
//! - `oauth`: the gateway as each user's OAuth client of the server ([`broker`]), a user
//!   without a token sent to authorize, tokens encrypted at rest ([`vault`]).
//!
//! Per-user connections, not one connection with a per-request header: in the handshake
//! era a session is opened by one token and belongs to its user (a moat server refuses
//! another user's token on it), and a server keeps per-session state (subscriptions, log
//! level, tasks) that must not mix users. So each user gets a client of their own
//! (`state.rs`), bounded in number. The server's shared connection — the catalog,
//! notifications, health checks — is the gateway's own: it authenticates with the client
//! credentials grant of the gateway's client, and no call is ever sent on it.

mod authorizer;
mod broker;
mod cache;
mod error;
mod exchange;
pub(crate) mod headers;
mod idle;
pub(crate) mod state;
mod user;
mod vault;

use std::sync::{Arc, Weak};
use std::time::Instant;

use moat::{Client, RequestContext};

use crate::config::{DownstreamAuth, ServerTransport};
use crate::inner::Inner;

pub use error::DownstreamError;

use authorizer::UserAuthorizer;
use state::UserClient;
use user::UserKey;
/// Users with a connection of their own open, per server; the least recently used closes.
const CONNECTIONS_PER_SERVER: usize = 256;

/// The client a call to `server` goes out on: the server's shared connection, or, for a
/// server with per-user credentials, the calling user's own (made on their first call).
pub(crate) async fn client_for_call(
    inner: &Arc<Inner>,
    ctx: &RequestContext,
    server: &str,
) -> Result<Arc<Client>, String> {
    // Up (or waited for) first: a server that is down is down for every user.
    let shared = inner.wait_live(server).await?;
    let per_user = inner.settings().config.server(server).is_some_and(|cfg| {
        matches!(cfg.transport, ServerTransport::Url { .. })
            && cfg.auth.as_ref().is_some_and(DownstreamAuth::per_user)
    });
    if !per_user {
        return Ok(shared);
    }
    // Boxed: the per-user path's state is 8 KB, which every call's future would otherwise
    // carry (and copy) whether or not it takes this path.
    Box::pin(user_client(inner, ctx, server, shared)).await
}

/// The calling user's own connection to `server` (per-user credentials), else `shared`.
async fn user_client(
    inner: &Arc<Inner>,
    ctx: &RequestContext,
    server: &str,
    shared: Arc<Client>,
) -> Result<Arc<Client>, String> {
    let settings = inner.settings();
    let Some(cfg) = settings.config.server(server) else {
        return Ok(shared);
    };
    let ServerTransport::Url { url, .. } = &cfg.transport else {
        return Ok(shared);
    };
    let exchange = match &cfg.auth {
        Some(DownstreamAuth::Exchange(exchange)) => exchange,
        Some(DownstreamAuth::OAuth(oauth)) => {
            // The local OS user (stdio) is a user too: their tokens are theirs.
            let user = match ctx.identity() {
                Some(i) => UserKey::new(
                    i.issuer.as_deref().unwrap_or("local"),
                    i.subject.as_deref().unwrap_or(""),
                ),
                None => UserKey::new("anonymous", ""),
            };
            if user.subject.is_empty() {
                return Err(format!(
                    "server {server} acts on behalf of each user, and nobody vouches for who \
                     is calling: configure [auth] for HTTP callers"
                ));
            }
            let broker = inner
                .downstream()
                .broker(
                    &inner.downstream_tokens_dir(),
                    inner.shared().map(|m| m.postgres()),
                    server,
                    oauth,
                )
                .await
                .map_err(|e| format!("server {server}: {e}"))?;
            // The user's connection, made when they are first sent to authorize.
            let weak: Weak<Inner> = Arc::downgrade(inner);
            let (_, start_timeout, request_timeout, _) = inner.supervision_settings(cfg);
            let cfg = Arc::new(cfg.clone());
            let connect: broker::Connect = Arc::new(move |authorizer| {
                let (weak, cfg) = (weak.clone(), cfg.clone());
                Box::pin(async move {
                    crate::supervisor::connect_as_user(
                        &weak,
                        &cfg,
                        authorizer,
                        request_timeout,
                        start_timeout + broker::AUTHORIZE_WITHIN,
                    )
                    .await
                    .map_err(|e| e.to_string())
                })
            });
            return broker.client_for(ctx, url, user, connect).await;
        }
        _ => return Ok(shared),
    };
    let no_token = || DownstreamError::NoCallerToken {
        server: server.to_owned(),
    };
    let identity = ctx.identity().ok_or_else(|| no_token().to_string())?;
    let (Some(issuer), Some(subject), Some(token)) = (
        identity.issuer.as_deref(),
        identity.subject.as_deref(),
        identity.access_token.clone(),
    ) else {
        return Err(no_token().to_string());
    };
    let user = UserKey::new(issuer, subject);
    let per_server = inner.downstream().server(server, url, exchange);
    let slot = per_server.users.slot(&user, CONNECTIONS_PER_SERVER);
    let mut held = slot.lock().await;
    if let Some(client) = state::UserClients::reuse(&mut held) {
        if let Some(uc) = held.as_ref() {
            uc.authorizer.set_subject(token);
        }
        return Ok(client);
    }
    let authorizer = Arc::new(UserAuthorizer::new(
        user,
        url,
        per_server.exchanger.clone(),
        per_server.cache.clone(),
        token,
    ));
    // Exchanged before connecting: a refusal reads as the exchange's, not as a failed start.
    authorizer
        .token()
        .await
        .map_err(|e: DownstreamError| e.to_string())?;
    let (_, start_timeout, request_timeout, _) = inner.supervision_settings(cfg);
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let client = crate::supervisor::connect_as_user(
        &weak,
        cfg,
        authorizer.clone(),
        request_timeout,
        start_timeout,
    )
    .await
    .map_err(|e| {
        DownstreamError::Connect {
            server: server.to_owned(),
            why: e.to_string(),
        }
        .to_string()
    })?;
    let client = Arc::new(client);
    *held = Some(UserClient {
        client: client.clone(),
        authorizer,
        used: Instant::now(),
    });
    Ok(client)
}
