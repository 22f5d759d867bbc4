//! The sans-IO core of moat.
//!
//! Everything here is plain data and pure functions: JSON-RPC 2.0 envelopes decoded borrowed
//! ([`jsonrpc`]), the MCP message types of every revision ([`types`]), version negotiation for
//! both eras ([`version`]), the lifecycle state machine ([`lifecycle`]) and the pending-request
//! table ([`pending`]). No clocks, sockets or files: the async layers (`moat-transport`, `moat`)
//! drive these types, which is what makes them easy to test and fuzz.
//!
//! ```
//! use moat_protocol::jsonrpc::Message;
//!
//! let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}"#;
//! let Ok(Message::Request(req)) = Message::parse(line) else { panic!() };
//! assert_eq!(req.method, "tools/call");
//! // The params stay raw until the handler decodes them into its own type, once.
//! assert_eq!(req.params.unwrap().get(), r#"{"name":"add"}"#);
//! ```

#![warn(missing_docs)]

pub mod count;
pub mod error;
pub mod id;
pub mod jsonrpc;
pub mod lifecycle;
pub mod pending;
pub mod session;
pub mod types;
pub mod version;

pub use error::ErrorObject;
pub use id::{ProgressToken, RequestId};
pub use version::{Era, ProtocolVersion};

/// The `_meta` object carried by params and results: an open map, preserved as is.
pub type Meta = serde_json::Map<String, serde_json::Value>;

/// A JSON object.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
