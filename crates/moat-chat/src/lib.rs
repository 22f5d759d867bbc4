//! The LLM client role: a conversation with a model whose tool calls run through moat's
//! host, in this process — so every call a model makes is checked by policy, asked about
//! when policy says so, run in a sandbox and written to the audit trail.
//!
//! ```no_run
//! # async fn demo() -> Result<(), moat_chat::ChatError> {
//! use moat_chat::{ChatSettings, Session, consent::Refuse};
//! use std::sync::Arc;
//!
//! let config = moat_host::Config::load("moat.toml".as_ref()).expect("config");
//! let settings = ChatSettings::resolve(&config.chat, &Default::default(), &|k| std::env::var(k).ok())?;
//! let provider = settings.provider()?;
//! let mut session = Session::start(
//!     config,
//!     moat_host::HostOptions::default(),
//!     provider,
//!     settings.loop_options(),
//!     Arc::new(Refuse::default()),
//!     Arc::new(|event: &moat_chat::Event| eprintln!("{event:?}")),
//! )
//! .await?;
//! let answer = session.send("What is in /etc?").await?;
//! println!("{answer}");
//! session.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Modules: [`link`] (a server's link to open, URL-mode elicitation), [`provider`] (the three wire formats behind one trait, with retries),
//! [`session`] (history, the tool loop over the host), [`consent`] (asking a person),
//! [`transcript`] (JSON-lines transcripts), [`markdown`] (answers rendered for a terminal), [`sanitize`] (what a peer may put on a terminal), [`settings`] (flags, `[chat]`, environment),
//! [`scripted`] (a local model that speaks each wire format exactly, for tests and the demo).

pub mod attach;
pub mod budget;
pub mod consent;
mod error;
pub mod event;
pub mod form;
pub mod link;
pub mod markdown;
pub mod message;
pub mod provider;
mod sampling;
pub mod sanitize;
pub mod scripted;
pub mod session;
pub mod settings;
pub mod transcript;

pub use error::ChatError;
pub use event::Event;
pub use session::{LoopOptions, Session};
pub use settings::{ChatSettings, Overrides, ProviderKind};
