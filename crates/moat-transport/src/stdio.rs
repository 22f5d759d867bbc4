//! Our own stdin and stdout as a connection: how a server launched by a client talks.
//!
//! stdout carries protocol messages and nothing else; logs go to stderr.
//!
//! When stdin and stdout are pipes (the normal case: a client launched us), they are driven
//! non-blocking through the reactor, like any socket. tokio's own `stdin()`/`stdout()` hand
//! every read and write to a blocking thread pool instead, which costs a thread hand-off per
//! message in each direction; we use them only for terminals and files, where non-blocking
//! I/O is not available.

use std::os::fd::{AsFd, OwnedFd};

use tokio::io::BufReader;
use tokio::net::unix::pipe;

use crate::connection::{Connection, Limits};

/// A connection over this process's stdin and stdout.
pub fn stdio(limits: Limits) -> Connection {
    let reader = pipe_receiver();
    let writer = pipe_sender();
    match (reader, writer) {
        (Some(r), Some(w)) => {
            Connection::from_lines(BufReader::with_capacity(64 * 1024, r), w, limits)
        }
        (Some(r), None) => Connection::from_lines(
            BufReader::with_capacity(64 * 1024, r),
            tokio::io::stdout(),
            limits,
        ),
        (None, Some(w)) => Connection::from_lines(
            BufReader::with_capacity(64 * 1024, tokio::io::stdin()),
            w,
            limits,
        ),
        (None, None) => Connection::from_lines(
            BufReader::with_capacity(64 * 1024, tokio::io::stdin()),
            tokio::io::stdout(),
            limits,
        ),
    }
}

/// A duplicate of `fd` (so that the process's own stdin/stdout handles stay valid).
fn dup(fd: std::os::fd::BorrowedFd<'_>) -> Option<OwnedFd> {
    rustix::io::fcntl_dupfd_cloexec(fd, 3).ok()
}

fn pipe_receiver() -> Option<pipe::Receiver> {
    let fd = dup(std::io::stdin().as_fd())?;
    // Fails (and we fall back) unless stdin is a FIFO.
    pipe::Receiver::from_owned_fd(fd).ok()
}

fn pipe_sender() -> Option<pipe::Sender> {
    let fd = dup(std::io::stdout().as_fd())?;
    pipe::Sender::from_owned_fd(fd).ok()
}
