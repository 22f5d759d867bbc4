//! The headers and credentials of a downstream server's connections: the shared one (the
//! gateway's own credentials) and a user's (the configured headers; the credentials come
//! from the user's authorizer).

use moat::HttpOptions;
use moat_transport::http::oauth::{ClientCredentials, OAuthConfig};

use crate::config::{DownstreamAuth, OAuthAuth, ServerConfig, ServerTransport};

/// The options of a server's shared connection, with the credentials its `auth` asks for:
/// the static header, or the gateway's own client credentials. A header of `headers` with
/// the same name as the credential's is left out: the credential wins.
pub(crate) fn shared_options(cfg: &ServerConfig, mut options: HttpOptions) -> HttpOptions {
    let ServerTransport::Url { headers, .. } = &cfg.transport else {
        return options;
    };
    let replaced = match &cfg.auth {
        Some(DownstreamAuth::Static(s)) => Some(s.header.as_str()),
        Some(_) => Some("authorization"),
        None => None,
    };
    for (name, value) in headers {
        if replaced.is_some_and(|r| r.eq_ignore_ascii_case(name)) {
            continue;
        }
        options = options.header(name, value);
    }
    match &cfg.auth {
        Some(DownstreamAuth::Static(s)) => options.header(&s.header, s.value()),
        Some(DownstreamAuth::Exchange(e)) => options.oauth(OAuthConfig::client_credentials(
            ClientCredentials::secret(&e.client_id, e.client_secret.expose()),
        )),
        // The gateway's own client, when it has a secret; else the server lists its tools
        // to anyone.
        Some(DownstreamAuth::OAuth(OAuthAuth {
            client_id: Some(id),
            client_secret: Some(secret),
            ..
        })) => options.oauth(OAuthConfig::client_credentials(ClientCredentials::secret(
            id,
            secret.expose(),
        ))),
        _ => options,
    }
}

/// The options of one user's connection: the configured headers but `Authorization` (the
/// user's credentials come from their authorizer, never a shared token).
pub(crate) fn user_options(cfg: &ServerConfig, mut options: HttpOptions) -> HttpOptions {
    if let ServerTransport::Url { headers, .. } = &cfg.transport {
        for (name, value) in headers {
            if !name.eq_ignore_ascii_case("authorization") {
                options = options.header(name, value);
            }
        }
    }
    options
}
