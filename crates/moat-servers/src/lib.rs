//! moat's built-in MCP servers.
//!
//! - [`everything`]: the fixture the official conformance suite tests servers against.
//! - [`fs`]: files under one root directory, as tools and resources, resolved safely.
//! - [`sqlite`]: read-only SQL over one SQLite database (`moat serve sqlite --db FILE`).
//! - [`exec`]: `run_command`, a command run in a sandbox of its own (`moat serve exec`).

pub mod everything;
pub mod exec;
pub mod fs;
pub mod sqlite;
