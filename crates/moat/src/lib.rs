//! moat: write MCP servers and clients in Rust.
//!
//! A server is a set of plain async functions; argument schemas come from the types:
//!
//! ```no_run
//! use moat::Server;
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Add {
//!     /// The first addend.
//!     a: i64,
//!     b: i64,
//! }
//!
//! #[tokio::main]
//! async fn main() -> moat::Result<()> {
//!     Server::new("calc", "1.0")
//!         .tool("add", "Add two integers", |Add { a, b }| async move { a + b })
//!         .serve_stdio()
//!         .await
//! }
//! ```
//!
//! A client connects to any server, over any revision:
//!
//! ```no_run
//! # async fn run() -> moat::Result<()> {
//! let client = moat::Client::connect_command(["my-server", "--stdio"]).await?;
//! for tool in client.list_all_tools().await? {
//!     println!("{}", tool.name);
//! }
//! # Ok(()) }
//! ```
//!
//! Both sit on a [`Peer`], which drives one connection: correlation, cancellation,
//! progress, deadlines and an orderly shutdown that fails every pending call.

#![warn(missing_docs)]

mod answerer;
pub mod client;
pub mod error;
pub mod handler;
mod mrtr;
pub mod peer;
pub mod schema;
pub mod server;
mod task;

pub use client::{
    Client, ClientBuilder, HttpError, HttpOptions, HttpTransport, InputAnswerer, Listening,
    ServerNotification,
};
pub use error::{Error, Result};
pub use handler::{Handler, RequestContext, TraceContext};
pub use mrtr::StateKey;
pub use peer::{Peer, PeerOptions, RequestOptions};
pub use schema::NoArgs;
pub use server::{Blob, Json, ResourceError, ResourceRequest, Server, ServerOptions, WeakServer};

pub use moat_protocol as protocol;
pub use moat_protocol::types;
pub use moat_protocol::version::{ProtocolVersion, VersionPreference};
pub use moat_transport as transport;
pub use schemars;

/// The crate's README, whose examples are compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
