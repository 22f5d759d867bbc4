//! One module per group of subcommands.

pub mod chat;
pub mod client;
pub mod completions;
pub mod demo;
pub mod gateway;
pub mod man;
pub mod model;
pub mod pins;
pub mod sandbox;
pub mod serve;
pub mod shutdown;
pub mod skills;
pub mod state;
pub mod state_keys;
pub mod tour;
