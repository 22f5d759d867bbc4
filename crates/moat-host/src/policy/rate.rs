//! Rate limits: a token bucket per (rate limit, server, tool), refilled continuously.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::select::{Named, PolicyError, Selector, ToolRef, item_label};
use crate::config::policy::RateLimitConfig;

/// Buckets beyond this many are pruned of full ones (a full bucket is the same as no bucket).
const PRUNE_ABOVE: usize = 4096;

/// A call refused by a rate limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rule}: rate limit exceeded, retry after {:.1}s", retry_after.as_secs_f64())]
#[non_exhaustive]
pub struct RateLimited {
    /// The limit that refused, e.g. `rate limit 1 (fetch)`.
    pub rule: String,
    /// How long until the call would be accepted.
    pub retry_after: Duration,
}

/// One token bucket as a shared store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SharedBucket {
    /// The limit (its label, burst and rate).
    pub(crate) limit: String,
    /// Which bucket of the limit (server, tool, user, as the limit splits).
    pub(crate) bucket: String,
    /// Burst: tokens when full.
    pub(crate) capacity: f64,
    /// Refill rate.
    pub(crate) per_second: f64,
    /// The limit's label, for the refusal.
    pub(crate) label: String,
}

#[derive(Debug)]
struct RateRule {
    label: String,
    selector: Selector,
    capacity: f64,
    per_second: f64,
    shared: bool,
    per_user: bool,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// (limit, server, tool, user): the parts a limit does not split on are empty.
type Key = (usize, String, String, String);

#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    rules: Vec<RateRule>,
    buckets: Mutex<HashMap<Key, Bucket>>,
}

impl RateLimiter {
    pub(crate) fn new(configs: &[RateLimitConfig]) -> Result<Self, PolicyError> {
        let rules = configs
            .iter()
            .enumerate()
            .map(|(i, c)| RateRule::new(i, c))
            .collect::<Result<_, _>>()?;
        Ok(RateLimiter {
            rules,
            buckets: Mutex::default(),
        })
    }

    /// Takes a token from every bucket the tool falls in, or from none if one is empty.
    pub(crate) fn check(
        &self,
        tool: &Named,
        user: Option<&str>,
        now: Instant,
    ) -> Result<(), RateLimited> {
        if self.rules.is_empty() {
            return Ok(());
        }
        // A panic elsewhere while holding the lock leaves buckets that are still valid numbers.
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken = Vec::new();
        let mut refused: Option<RateLimited> = None;
        for (index, rule) in self.rules.iter().enumerate() {
            if !rule.selector.matches(tool) {
                continue;
            }
            let key = rule.key(index, tool.tool(), user);
            let bucket = rule.refill(buckets.get(&key).copied(), now);
            if bucket.tokens >= 1.0 {
                taken.push((key, bucket));
                continue;
            }
            let retry_after = Duration::from_secs_f64((1.0 - bucket.tokens) / rule.per_second);
            if refused.as_ref().is_none_or(|r| r.retry_after < retry_after) {
                refused = Some(RateLimited {
                    rule: rule.label.clone(),
                    retry_after,
                });
            }
        }
        if let Some(refused) = refused {
            return Err(refused);
        }
        for (key, bucket) in taken {
            buckets.insert(
                key,
                Bucket {
                    tokens: bucket.tokens - 1.0,
                    ..bucket
                },
            );
        }
        if buckets.len() > PRUNE_ABOVE {
            self.prune(&mut buckets, now);
        }
        Ok(())
    }

    /// The buckets a call of `tool` takes a token from, for a store that keeps the buckets
    /// of several gateways ([`crate::store::rate`]).
    pub(crate) fn shared_buckets(&self, tool: &Named, user: Option<&str>) -> Vec<SharedBucket> {
        self.rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.selector.matches(tool))
            .map(|(index, rule)| {
                let (_, server, tool, user) = rule.key(index, tool.tool(), user);
                SharedBucket {
                    // The rate and burst are part of the name: a changed limit starts afresh.
                    limit: format!("{}|{}|{}", rule.label, rule.capacity, rule.per_second),
                    bucket: format!("{server}\u{1f}{tool}\u{1f}{user}"),
                    capacity: rule.capacity,
                    per_second: rule.per_second,
                    label: rule.label.clone(),
                }
            })
            .collect()
    }

    /// Each limit's label and selector, in file order.
    pub(crate) fn selectors(&self) -> impl Iterator<Item = (&str, &Selector)> {
        self.rules.iter().map(|r| (r.label.as_str(), &r.selector))
    }

    fn prune(&self, buckets: &mut HashMap<Key, Bucket>, now: Instant) {
        buckets.retain(|(index, _, _, _), bucket| {
            let rule = &self.rules[*index];
            rule.refill(Some(*bucket), now).tokens < rule.capacity
        });
    }
}

impl RateRule {
    fn new(index: usize, c: &RateLimitConfig) -> Result<Self, PolicyError> {
        let label = item_label("rate limit", index, c.name.as_deref());
        let invalid = |field: &str, reason: &str| PolicyError::Invalid {
            item: label.clone(),
            field: field.to_owned(),
            reason: reason.to_owned(),
        };
        let rates = [
            ("per_second", c.per_second, 1.0),
            ("per_minute", c.per_minute, 60.0),
            ("per_hour", c.per_hour, 3600.0),
        ];
        let mut given = rates.iter().filter(|(_, n, _)| n.is_some());
        let (field, count, period) = match (given.next(), given.next()) {
            (Some((field, Some(n), period)), None) => (*field, *n, *period),
            (None, _) => {
                return Err(invalid(
                    "per_minute",
                    "give one of per_second, per_minute, per_hour",
                ));
            }
            _ => {
                return Err(invalid(
                    "per_minute",
                    "give only one of per_second, per_minute, per_hour",
                ));
            }
        };
        if count == 0 {
            return Err(invalid(
                field,
                "must be at least 1 (to forbid a tool, write a deny rule)",
            ));
        }
        let burst = c.burst.unwrap_or(count);
        if burst == 0 {
            return Err(invalid("burst", "must be at least 1"));
        }
        Ok(RateRule {
            selector: Selector::new(&label, c.server.as_ref(), c.tool.as_ref())?,
            label,
            capacity: f64::from(burst),
            per_second: f64::from(count) / period,
            shared: c.shared,
            per_user: c.per_user,
        })
    }

    fn key(&self, index: usize, tool: &ToolRef, user: Option<&str>) -> Key {
        // Callers nobody names share one bucket: the anonymous are one user here.
        let user = match (self.per_user, user) {
            (true, Some(u)) => format!("u:{u}"),
            _ => String::new(),
        };
        if self.shared {
            (index, String::new(), String::new(), user)
        } else {
            (index, tool.server.to_owned(), tool.tool.to_owned(), user)
        }
    }

    /// The bucket as of `now`; a new bucket starts full.
    fn refill(&self, bucket: Option<Bucket>, now: Instant) -> Bucket {
        let Some(bucket) = bucket else {
            return Bucket {
                tokens: self.capacity,
                at: now,
            };
        };
        // An instant earlier than the last one (an injected clock) adds nothing.
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        Bucket {
            tokens: (bucket.tokens + elapsed * self.per_second).min(self.capacity),
            at: now.max(bucket.at),
        }
    }
}
