//! Our own stdin and stdout as a connection: how a server launched by a client talks.
//!
//! stdout carries protocol messages and nothing else; logs go to stderr.

use tokio::io::BufReader;

use crate::connection::{Connection, Limits};

/// A connection over this process's stdin and stdout.
pub fn stdio(limits: Limits) -> Connection {
    Connection::from_lines(
        BufReader::with_capacity(64 * 1024, tokio::io::stdin()),
        tokio::io::stdout(),
        limits,
    )
}
