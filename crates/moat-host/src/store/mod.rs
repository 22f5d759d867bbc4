//! The store: where the state gateways may share lives, in one of two engines.
//!
//! - **SQLite** (the default): the files of the state directory, as always (`pins.db` for
//!   tool and launch pins and lasting consent decisions, `audit.db` for the audit trail);
//!   rate-limit buckets in the gateway's memory. One machine.
//! - **PostgreSQL** (`[store] url = "postgres://…"`, or `--store URL`): every gateway given
//!   the URL shares pins, launch pins, lasting consent decisions and rate-limit buckets.
//!
//! With PostgreSQL, pins and decisions are still read and written through the same
//! [`PinStore`](crate::pins::PinStore) and [`Decisions`](crate::consent::Decisions) code, on
//! an in-memory copy ([`Mirror`]) that a task of the gateway keeps in step with the server
//! ([`Mirror::sync`], every [`SYNC_EVERY`]): local writes go up as compare-and-set statements
//! (the server's row must still be the one this copy last saw, or the write is dropped and
//! the server's row taken: the first writer wins, as SQLite's transactions decide on one
//! machine), and the server's changes come down when its generation counter moves. So a
//! call never waits for a PostgreSQL round trip to check a pin or a decision, and a change
//! made on one gateway is seen by the others within two sync periods.
//!
//! The HTTP session directory ([`PostgresDirectory`]) is read and written straight through
//! the pool: a replica looks a session up only when a request names one it does not hold.
//!
//! Rate limits are the exception too: their buckets live in the server ([`rate`]) and a call
//! under a limit takes its token there, in one statement, so N per minute is N across every
//! gateway.

pub mod error;
pub mod mirror;
pub mod postgres;
pub mod rate;
pub mod sessions;
pub mod tokens;

use std::time::Duration;

pub use crate::config::store::StoreConfig;
pub use error::StoreError;
pub use mirror::Mirror;
pub use postgres::Postgres;
pub use sessions::PostgresDirectory;
pub use tokens::SharedTokens;

/// How often a gateway on PostgreSQL sends its changes and looks for others'.
pub const SYNC_EVERY: Duration = Duration::from_millis(200);
