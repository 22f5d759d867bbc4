//! moat's built-in MCP servers.
//!
//! - [`everything`]: the fixture the official conformance suite tests servers against.

pub mod everything;
