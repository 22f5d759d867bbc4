//! The SDK's error type: what can go wrong between asking a peer and getting an answer.

use std::time::Duration;

use moat_protocol::ErrorObject;
use moat_protocol::jsonrpc::EncodeError;
use moat_protocol::lifecycle::LifecycleError;
use moat_protocol::pending::TooManyPending;
use moat_protocol::version::NegotiationError;

/// An error from a [`Peer`](crate::Peer), [`Client`](crate::Client) or [`Server`](crate::Server).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The connection is gone; the text says why (the server exited, the stream ended, …).
    #[error("connection closed: {0}")]
    Closed(String),
    /// No answer arrived in time; the request was cancelled.
    #[error("{method} timed out after {after:?}")]
    Timeout {
        /// The method asked.
        method: String,
        /// How long we waited.
        after: Duration,
    },
    /// The peer answered with a JSON-RPC error.
    #[error("the peer answered {method} with error {}: {}", .error.code, .error.message)]
    Remote {
        /// The method asked.
        method: String,
        /// The error it sent.
        error: ErrorObject,
    },
    /// An answer did not have the shape its method promises.
    #[error("could not decode the answer to {method}: {detail}")]
    Decode {
        /// The method asked.
        method: String,
        /// What serde said.
        detail: String,
    },
    /// A message could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The lifecycle forbids this now.
    #[error(transparent)]
    Lifecycle(#[from] LifecycleError),
    /// Too many requests in flight.
    #[error(transparent)]
    TooManyPending(#[from] TooManyPending),
    /// The peers share no protocol revision.
    #[error(transparent)]
    Negotiation(#[from] NegotiationError),
    /// A server process could not be started.
    #[error("could not start the server: {0}")]
    Spawn(std::io::Error),
    /// The client did not declare the capability a request to it needs.
    #[error("the client does not support {0} (it did not declare the capability)")]
    ClientLacks(&'static str),
    /// I/O failed (serving on stdio, binding, …).
    #[error(transparent)]
    Io(#[from] std::io::Error),

    /// An HTTP connection could not be set up (bad URL or header, unreachable server, an
    /// endpoint that is not MCP).
    #[error(transparent)]
    Http(#[from] moat_transport::http::client::ClientError),

    /// The HTTP server could not start.
    #[error(transparent)]
    HttpServer(#[from] moat_transport::http::server::HttpServerError),
}

impl Error {
    /// The JSON-RPC error object, when the peer sent one.
    pub fn remote(&self) -> Option<&ErrorObject> {
        match self {
            Error::Remote { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// `Result<T, moat::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;
