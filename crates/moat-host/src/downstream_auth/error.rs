//! Why a call could not get credentials for its server. Messages name the server and what
//! to do, never a token or a secret.

/// A failure to get a user's credentials for a downstream server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DownstreamError {
    /// The call carries no access token to exchange.
    #[error(
        "server {server} is called with each user's own credentials (token exchange), and this \
         call carries no access token: call the gateway over HTTP with a token of its \
         authorization server ([auth]); over stdio or a static token nobody's token can be \
         exchanged"
    )]
    NoCallerToken {
        /// The downstream server.
        server: String,
    },
    /// The token exchange failed.
    #[error("server {server}: the token exchange for this user failed: {why}")]
    Exchange {
        /// The downstream server.
        server: String,
        /// What went wrong (the authorization server's error, clipped).
        why: String,
    },
    /// The user's connection to the server could not be made.
    #[error("server {server}: could not connect as this user: {why}")]
    Connect {
        /// The downstream server.
        server: String,
        /// What went wrong.
        why: String,
    },
}
