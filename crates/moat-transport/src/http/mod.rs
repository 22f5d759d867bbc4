//! MCP over HTTP: Streamable HTTP (2025-03-26 onwards, both eras) and the legacy HTTP+SSE
//! transport of 2024-11-05, server and client.
//!
//! - [`headers`]: the MCP header names and the `Mcp-Name` / `Mcp-Param-*` value encoding.
//! - [`server`]: one endpoint serving every revision, plus the legacy `/sse` endpoints.
//! - [`client`]: a [`Connection`](crate::Connection) to a remote server, either transport.
//! - [`oauth`]: OAuth 2.1 authorization for the client, as the MCP authorization spec asks.

pub mod client;
pub mod headers;
pub mod oauth;
pub mod server;
