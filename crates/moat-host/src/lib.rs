//! moat's host: the security supervisor and gateway that sits between an MCP client (an IDE,
//! a desktop chat app, an agent) and the MCP servers it uses.
//!
//! Configuration in ([`Config`]), one supervised MCP server out: the host starts every
//! configured server (sandboxed by its profile), merges their tools, resources and prompts
//! under `server__name`, checks every `tools/call` against the [`policy`], asks for consent,
//! pins tool definitions against silent changes, contains prompt injection, and writes an
//! audit record of every call.

pub mod audit;
pub mod config;
mod expand;
mod import;
pub mod pins;
pub mod policy;
pub mod scan;
pub mod watch;
