//! When a user's own downstream connection is closed for being idle: one decision, shared
//! by the OAuth broker and the token exchange's connections (see [`super::state`]).

use std::time::Duration;

/// What a sweep does with a user's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// A call has it: use, however long ago it was handed out (and so, used now).
    InUse,
    /// Used within `idle`: kept.
    Fresh,
    /// Unused for `idle`, or closed by the server: closed and let go.
    Close,
}

/// The sweep's decision, made under the lock that hands connections to calls (so that no
/// call can be given the connection between this judgement and its closing).
pub(super) fn judge(
    held_by_a_call: bool,
    pending_requests: usize,
    closed: bool,
    unused_for: Duration,
    idle: Duration,
) -> Verdict {
    if held_by_a_call || pending_requests > 0 {
        Verdict::InUse
    } else if closed || unused_for >= idle {
        Verdict::Close
    } else {
        Verdict::Fresh
    }
}
