//! Moving MCP messages between processes.
//!
//! A transport turns some byte stream into a [`Connection`]: a channel of inbound frames and a
//! sender for outbound messages, each driven by its own task. It knows framing, size limits
//! and process management, and nothing about tools or resources.
//!
//! - [`framing`]: newline-delimited JSON with a hard size limit and UTF-8 checks.
//! - [`stdio`]: our own stdin/stdout, for a server launched by a client.
//! - [`child`]: a server we launch, in its own process group, shut down as the spec says.
//! - [`http`]: Streamable HTTP and legacy HTTP+SSE, server and client.
//! - [`identity`]: who made a request, as the transport vouches for it.

pub mod child;
pub mod connection;
pub mod framing;
pub mod http;
pub mod identity;
pub mod stdio;

pub use child::{ChildConfig, ChildProcess};
pub use connection::{
    Closer, Connection, Driver, DriverSlot, Epilogue, Inbound, Limits, Outgoing, OutgoingKind,
    TraceHeaders,
};
pub use framing::Frame;
pub use identity::{AccessToken, Identity, SharedIdentity};
