//! Shared by the SDK's integration tests: two connected in-process connections.

use moat::transport::{Connection, Limits};
use tokio::io::BufReader;

/// A server end and a client end joined by an in-memory duplex pipe.
pub fn pair() -> (Connection, Connection) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    (
        Connection::from_lines(BufReader::new(ar), aw, Limits::default()),
        Connection::from_lines(BufReader::new(br), bw, Limits::default()),
    )
}
