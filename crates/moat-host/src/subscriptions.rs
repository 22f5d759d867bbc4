//! Resource subscriptions through the gateway, whichever era each side speaks.
//!
//! Clients subscribe to the gateway (`resources/subscribe` in the handshake era, a
//! `subscriptions/listen` stream naming URIs in 2026-07-28); the SDK tells the gateway
//! when a URI gains its first watcher or loses its last one on a connection, and the
//! gateway counts watchers across connections, so one client leaving does not end what
//! another still watches. Towards each server it subscribes in that server's era: a
//! `resources/subscribe` to a handshake-era server, and for a 2026-07-28 server one
//! `subscriptions/listen` stream, opened when the server comes up, that asks for its list
//! changes and the updates of every URI of it that some client watches (reopened when that
//! set changes). `notifications/resources/updated` comes back to the gateway and goes, by
//! the SDK, only to the connections that watch that URI.

use std::collections::BTreeSet;
use std::sync::Arc;

use moat::{Client, Listening};
use moat_protocol::Era;
use moat_protocol::types::SubscriptionFilter;

use crate::inner::Inner;

impl Inner {
    /// A connection started (`on`) or stopped watching `uri`.
    pub(crate) fn watch_changed(self: &Arc<Self>, uri: &str, on: bool) {
        if !self.watched().count(uri, on) {
            return;
        }
        let Some(owner) = self.resource_owner(uri) else {
            return;
        };
        let Some(client) = self.live_client(&owner) else {
            // Subscribed when it comes up.
            return;
        };
        if is_modern(&client) {
            // Its listen stream follows `watched.version`.
            return;
        }
        let uri = uri.to_owned();
        tokio::spawn(async move {
            let result = if on {
                client.subscribe(&uri).await
            } else {
                client.unsubscribe(&uri).await
            };
            if let Err(e) = result {
                tracing::debug!(server = %owner, %uri, error = %e, "subscription not forwarded");
            }
        });
    }
}

/// What the gateway has asked a server that just came up to tell it.
pub(crate) struct Following {
    /// The open listen stream of a 2026-07-28 server.
    listening: Option<Listening>,
    /// The URIs it was last asked about.
    uris: BTreeSet<String>,
}

impl Following {
    /// Whether a listen stream is open (it is a request in flight, not a sign of work).
    pub(crate) fn streams(&self) -> usize {
        usize::from(self.listening.is_some())
    }
}

/// Asks a server that just came up for what clients watch: `resources/subscribe` for each
/// URI (handshake era), or one listen stream with its list changes too (2026-07-28, where
/// list changes come only on such a stream).
pub(crate) async fn follow(inner: &Arc<Inner>, server: &str, client: &Arc<Client>) -> Following {
    let uris = inner.watched_uris(server);
    if !is_modern(client) {
        for uri in &uris {
            if let Err(e) = client.subscribe(uri).await {
                tracing::debug!(server, %uri, error = %e, "subscription not forwarded");
            }
        }
        return Following {
            listening: None,
            uris,
        };
    }
    let listening = listen(server, client, &uris).await;
    Following { listening, uris }
}

/// Follows a change of what clients watch (a 2026-07-28 server: a new listen stream, then
/// the old one closed, so no update falls in between).
pub(crate) async fn refollow(
    inner: &Arc<Inner>,
    server: &str,
    client: &Arc<Client>,
    following: &mut Following,
) {
    if !is_modern(client) {
        return;
    }
    let uris = inner.watched_uris(server);
    if uris == following.uris {
        return;
    }
    if let Some(listening) = listen(server, client, &uris).await {
        following.listening = Some(listening);
        following.uris = uris;
    }
}

async fn listen(server: &str, client: &Client, uris: &BTreeSet<String>) -> Option<Listening> {
    let caps = client.server_capabilities();
    let subscribes = caps
        .resources
        .as_ref()
        .and_then(|r| r.subscribe)
        .unwrap_or(false);
    let filter = SubscriptionFilter {
        tools_list_changed: caps.tools.as_ref().map(|_| true),
        prompts_list_changed: caps.prompts.as_ref().map(|_| true),
        resources_list_changed: caps.resources.as_ref().map(|_| true),
        resource_subscriptions: (subscribes && !uris.is_empty())
            .then(|| uris.iter().cloned().collect()),
    };
    match client.listen(filter).await {
        Ok(listening) => Some(listening),
        Err(e) => {
            tracing::warn!(server, error = %e, "subscriptions/listen refused: list changes and resource updates of this server are not followed");
            None
        }
    }
}

fn is_modern(client: &Client) -> bool {
    client.protocol_version().map(|v| v.era()) == Some(Era::Modern)
}
