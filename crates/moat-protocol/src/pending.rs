//! The pending-request table: id allocation, correlation, cancellation, progress tokens and
//! deadlines, as plain data. The caller owns the clock: it passes instants in and asks which
//! entries have expired.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use crate::id::{ProgressToken, RequestId};
use crate::types::CancelledNotificationParams;

/// One request awaiting its answer.
#[derive(Debug)]
pub struct Pending<T> {
    /// The method, for error messages and logs.
    pub method: String,
    /// When to give up, if ever.
    pub deadline: Option<Instant>,
    /// The progress token sent with the request, if any.
    pub progress_token: Option<ProgressToken>,
    /// The caller's data (typically the channel to deliver the answer on).
    pub data: T,
}

/// The table is full: too many requests in flight.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("too many requests in flight (limit {limit})")]
pub struct TooManyPending {
    /// The limit that was hit.
    pub limit: usize,
}

/// Outgoing requests awaiting answers, keyed by the ids we allocated.
#[derive(Debug)]
pub struct PendingTable<T> {
    next_id: i64,
    limit: usize,
    entries: HashMap<RequestId, Pending<T>>,
    progress: HashMap<ProgressToken, RequestId>,
    /// The entries that have a deadline, earliest first.
    deadlines: BTreeSet<(Instant, RequestId)>,
}

impl<T> PendingTable<T> {
    /// An empty table allowing at most `limit` requests in flight.
    pub fn new(limit: usize) -> Self {
        PendingTable {
            next_id: 1,
            limit,
            entries: HashMap::new(),
            progress: HashMap::new(),
            deadlines: BTreeSet::new(),
        }
    }

    /// Number of requests in flight.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every request in flight, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &Pending<T>> {
        self.entries.values()
    }

    /// Allocate an id and record the request. With `with_progress`, the id doubles as the
    /// progress token (it is unique for as long as the request is pending).
    pub fn insert(
        &mut self,
        method: &str,
        deadline: Option<Instant>,
        with_progress: bool,
        data: T,
    ) -> Result<RequestId, TooManyPending> {
        if self.entries.len() >= self.limit {
            return Err(TooManyPending { limit: self.limit });
        }
        let id = RequestId::Number(self.next_id);
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let progress_token = with_progress.then(|| id.clone());
        if let Some(token) = &progress_token {
            self.progress.insert(token.clone(), id.clone());
        }
        if let Some(deadline) = deadline {
            self.deadlines.insert((deadline, id.clone()));
        }
        self.entries.insert(
            id.clone(),
            Pending {
                method: method.to_owned(),
                deadline,
                progress_token,
                data,
            },
        );
        Ok(id)
    }

    /// The answer to `id` arrived: remove and return its entry. `None` for an id we never
    /// sent or already settled (the caller logs and drops such a response).
    pub fn complete(&mut self, id: &RequestId) -> Option<Pending<T>> {
        let entry = self.entries.remove(id)?;
        if let Some(token) = &entry.progress_token {
            self.progress.remove(token);
        }
        if let Some(deadline) = entry.deadline {
            self.deadlines.remove(&(deadline, id.clone()));
        }
        Some(entry)
    }

    /// We give up on `id`: remove it and return the entry with the `notifications/cancelled`
    /// params to send. (`initialize` must never be cancelled; the caller does not ask.)
    pub fn cancel(
        &mut self,
        id: &RequestId,
        reason: Option<String>,
    ) -> Option<(Pending<T>, CancelledNotificationParams)> {
        let entry = self.complete(id)?;
        let params = CancelledNotificationParams {
            request_id: Some(id.clone()),
            reason,
            ..Default::default()
        };
        Some((entry, params))
    }

    /// The pending request a progress token belongs to.
    pub fn by_progress_token(
        &mut self,
        token: &ProgressToken,
    ) -> Option<(RequestId, &mut Pending<T>)> {
        let id = self.progress.get(token)?.clone();
        let entry = self.entries.get_mut(&id)?;
        Some((id, entry))
    }

    /// Push back the deadline of `id` (e.g. when progress arrives and the caller resets timeouts).
    pub fn extend_deadline(&mut self, id: &RequestId, deadline: Instant) {
        if let Some(entry) = self.entries.get_mut(id) {
            if let Some(old) = entry.deadline.replace(deadline) {
                self.deadlines.remove(&(old, id.clone()));
            }
            self.deadlines.insert((deadline, id.clone()));
        }
    }

    /// The earliest deadline, for the caller to sleep until.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Remove and return every entry whose deadline is at or before `now`.
    pub fn take_expired(&mut self, now: Instant) -> Vec<(RequestId, Pending<T>)> {
        let expired: Vec<RequestId> = self
            .deadlines
            .iter()
            .take_while(|(d, _)| *d <= now)
            .map(|(_, id)| id.clone())
            .collect();
        expired
            .into_iter()
            .filter_map(|id| self.complete(&id).map(|e| (id, e)))
            .collect()
    }

    /// Remove and return everything: the connection is gone and every caller must hear so.
    pub fn drain(&mut self) -> Vec<(RequestId, Pending<T>)> {
        self.progress.clear();
        self.deadlines.clear();
        self.entries.drain().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn allocates_correlates_and_forgets() {
        let mut t = PendingTable::new(8);
        let a = t.insert("tools/call", None, false, "a").unwrap();
        let b = t.insert("tools/list", None, false, "b").unwrap();
        assert_ne!(a, b);
        assert_eq!(t.complete(&b).unwrap().data, "b");
        assert!(t.complete(&b).is_none(), "a second answer is unknown");
        assert!(t.complete(&RequestId::from("nope")).is_none());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn limit_is_enforced() {
        let mut t = PendingTable::new(1);
        t.insert("a", None, false, ()).unwrap();
        assert_eq!(
            t.insert("b", None, false, ()),
            Err(TooManyPending { limit: 1 })
        );
    }

    #[test]
    fn cancel_yields_notification_params() {
        let mut t = PendingTable::new(8);
        let id = t.insert("tools/call", None, true, ()).unwrap();
        let (_, params) = t.cancel(&id, Some("user".into())).unwrap();
        assert_eq!(params.request_id, Some(id.clone()));
        assert!(t.by_progress_token(&id).is_none());
    }

    #[test]
    fn progress_tokens_route_to_their_request() {
        let mut t = PendingTable::new(8);
        let id = t.insert("tools/call", None, true, 5).unwrap();
        let (found, entry) = t.by_progress_token(&id).unwrap();
        assert_eq!(found, id);
        assert_eq!(entry.data, 5);
    }

    #[test]
    fn deadlines_expire_in_order() {
        let now = Instant::now();
        let mut t = PendingTable::new(8);
        let early = t
            .insert("a", Some(now + Duration::from_millis(10)), false, ())
            .unwrap();
        let _late = t
            .insert("b", Some(now + Duration::from_secs(10)), false, ())
            .unwrap();
        let _never = t.insert("c", None, false, ()).unwrap();
        assert_eq!(t.next_deadline(), Some(now + Duration::from_millis(10)));
        let expired = t.take_expired(now + Duration::from_millis(20));
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].0, early);
        assert_eq!(t.drain().len(), 2);
        assert!(t.is_empty());
    }
}
