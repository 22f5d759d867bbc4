//! moat's host: the security supervisor and gateway that sits between an MCP client (an IDE,
//! a desktop chat app, an agent) and the MCP servers it uses.
//!
//! Configuration in ([`Config`]), one supervised MCP server out ([`Host`]): the host starts
//! every configured server (sandboxed by its profile), merges their tools, resources and
//! prompts under `server__name`, checks every `tools/call` against the [`policy`], asks for
//! [`consent`], pins tool definitions against silent changes ([`pins`], [`scan`]), contains
//! prompt injection (a session that has read untrusted content needs consent for every
//! call that could send data out), and writes an [`audit`] record of every call.
//!
//! ```no_run
//! use moat_host::{Config, Host, HostOptions};
//!
//! # async fn run() -> Result<(), moat_host::HostError> {
//! let config = Config::load("moat.toml".as_ref())?;
//! let host = Host::start(config, HostOptions::default().sandbox_helper("/usr/bin/moat")).await?;
//! host.serve_stdio().await
//! # }
//! ```

pub mod audit;
mod call;
mod caller;
mod catalog;
pub mod config;
pub mod consent;
mod console;
mod downstream_auth;
mod error;
mod host;
mod inner;
pub mod launch_pins;
pub mod naming;
mod options;
pub mod pins;
pub mod policy;
mod publish;
mod reindex;
mod requests;
pub mod scan;
pub mod search;
mod search_state;
mod sessions;
mod skills;
mod sqlite;
pub mod state;
pub mod store;
mod subscriptions;
mod supervisor;
pub mod telemetry;
mod url_elicitations;
pub mod watch;
mod watched;

pub use config::Config;
pub use console::Console;
pub use error::HostError;
pub use host::{Host, HostOptions};
pub use search::{SearchMode, ToolCost, ToolSearchConfig};
