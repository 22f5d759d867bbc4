//! How far a connection has come towards its end, and waiting for it to get further.
//!
//! A `tokio::sync::watch` channel did this before. Its wait lists are split eight ways, and
//! every change woke all eight, as did dropping it. That happened three times per peer, and
//! a 2026-07-28 request over HTTP makes a peer of its own: about 1% of a bench server's CPU.
//! A stage only moves forward, so one atomic and one [`Notify`] are enough.

use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::Notify;

/// Where a connection is on its way to the end; only ever moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(super) enum Stage {
    Open = 0,
    /// Nothing more will arrive from the other side (its requests may still be draining).
    InputEnded = 1,
    /// Shut down, and the transport released.
    Closed = 2,
}

impl Stage {
    fn from_u8(n: u8) -> Stage {
        match n {
            0 => Stage::Open,
            1 => Stage::InputEnded,
            _ => Stage::Closed,
        }
    }
}

/// A connection's [`Stage`], shared by its peer's handles and tasks.
#[derive(Debug)]
pub(super) struct StageCell {
    stage: AtomicU8,
    moved: Notify,
}

impl StageCell {
    pub(super) fn new() -> StageCell {
        StageCell {
            stage: AtomicU8::new(Stage::Open as u8),
            moved: Notify::new(),
        }
    }

    pub(super) fn get(&self) -> Stage {
        Stage::from_u8(self.stage.load(Ordering::Acquire))
    }

    /// Moves to `to` unless the connection is there or further already; whether it moved.
    pub(super) fn advance(&self, to: Stage) -> bool {
        let before = self.stage.fetch_max(to as u8, Ordering::AcqRel);
        let moved = before < to as u8;
        if moved {
            self.moved.notify_waiters();
        }
        moved
    }

    /// Returns once the connection is at `at_least` or further.
    pub(super) async fn reached(&self, at_least: Stage) {
        loop {
            // Registered before the stage is read: a move between the two still wakes us.
            let moved = self.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            if self.get() >= at_least {
                return;
            }
            moved.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_stage_only_moves_forward() {
        let cell = StageCell::new();
        assert_eq!(cell.get(), Stage::Open);
        assert!(cell.advance(Stage::InputEnded));
        assert!(!cell.advance(Stage::InputEnded));
        assert!(!cell.advance(Stage::Open));
        assert_eq!(cell.get(), Stage::InputEnded);
        assert!(cell.advance(Stage::Closed));
        assert!(!cell.advance(Stage::InputEnded));
        assert_eq!(cell.get(), Stage::Closed);
    }

    #[tokio::test]
    async fn waiters_wake_when_their_stage_is_reached_and_not_before() {
        let cell = Arc::new(StageCell::new());
        let closed = tokio::spawn({
            let cell = cell.clone();
            async move { cell.reached(Stage::Closed).await }
        });
        let ended = tokio::spawn({
            let cell = cell.clone();
            async move { cell.reached(Stage::InputEnded).await }
        });
        tokio::task::yield_now().await;
        cell.advance(Stage::InputEnded);
        tokio::time::timeout(Duration::from_secs(10), ended)
            .await
            .expect("the input-ended waiter woke")
            .expect("joined");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!closed.is_finished(), "woke before the connection closed");
        cell.advance(Stage::Closed);
        tokio::time::timeout(Duration::from_secs(10), closed)
            .await
            .expect("the closed waiter woke")
            .expect("joined");
        // A stage already reached returns at once.
        cell.reached(Stage::InputEnded).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_move_racing_a_new_waiter_is_not_lost() {
        for _ in 0..1000 {
            let cell = Arc::new(StageCell::new());
            let waiter = tokio::spawn({
                let cell = cell.clone();
                async move { cell.reached(Stage::Closed).await }
            });
            cell.advance(Stage::Closed);
            tokio::time::timeout(Duration::from_secs(10), waiter)
                .await
                .expect("the waiter woke")
                .expect("joined");
        }
    }
}
