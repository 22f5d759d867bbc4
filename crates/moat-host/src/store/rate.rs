//! Rate-limit buckets in PostgreSQL, shared by every gateway on the store: a call takes a
//! token from each of its buckets in one transaction (all or none), refilled by the
//! server's clock, so N per minute is N across all replicas, not N per replica.

use std::time::Duration;

use super::error::StoreError;
use super::postgres::Postgres;
use crate::policy::RateLimited;
use crate::policy::rate::SharedBucket;

/// Refill and take one token, in one statement; no row back means the bucket is empty.
const TAKE: &str = "
WITH now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT AS us)
INSERT INTO rate_buckets AS b (limit_key, bucket, tokens, at_us)
SELECT $1, $2, $3::FLOAT8 - 1, now.us FROM now
ON CONFLICT (limit_key, bucket) DO UPDATE SET
    tokens = LEAST($3::FLOAT8, b.tokens
        + GREATEST(EXCLUDED.at_us - b.at_us, 0)::FLOAT8 / 1000000 * $4::FLOAT8) - 1,
    at_us = GREATEST(EXCLUDED.at_us, b.at_us)
WHERE LEAST($3::FLOAT8, b.tokens
        + GREATEST(EXCLUDED.at_us - b.at_us, 0)::FLOAT8 / 1000000 * $4::FLOAT8) >= 1
RETURNING b.tokens";

/// The tokens of an empty bucket as of now, for the retry hint.
const LEVEL: &str = "
SELECT LEAST($3::FLOAT8, tokens + GREATEST(
    (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT - at_us, 0)::FLOAT8 / 1000000
    * $4::FLOAT8)
FROM rate_buckets WHERE limit_key = $1 AND bucket = $2";

impl Postgres {
    /// Takes a token from every bucket, or from none when one is empty (the refusal says
    /// which and when to retry). Fails when the store is unreachable: a limited call is
    /// then refused, not let through uncounted.
    pub(crate) async fn take_tokens(
        &self,
        buckets: &[SharedBucket],
    ) -> Result<Result<(), RateLimited>, StoreError> {
        if buckets.is_empty() {
            return Ok(Ok(()));
        }
        // One order for every gateway, so two calls never wait on each other's rows.
        let mut ordered: Vec<&SharedBucket> = buckets.iter().collect();
        ordered.sort_by(|a, b| (&a.limit, &a.bucket).cmp(&(&b.limit, &b.bucket)));
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.failed(e))?;
        let mut refused: Option<RateLimited> = None;
        for b in ordered {
            let taken = tx
                .query_opt(TAKE, &[&b.limit, &b.bucket, &b.capacity, &b.per_second])
                .await
                .map_err(|e| self.failed(e))?;
            if taken.is_some() {
                continue;
            }
            let tokens: f64 = tx
                .query_opt(LEVEL, &[&b.limit, &b.bucket, &b.capacity, &b.per_second])
                .await
                .map_err(|e| self.failed(e))?
                .map_or(0.0, |r| r.get(0));
            let retry_after = Duration::from_secs_f64(((1.0 - tokens) / b.per_second).max(0.0));
            if refused.as_ref().is_none_or(|r| r.retry_after < retry_after) {
                refused = Some(RateLimited {
                    rule: b.label.clone(),
                    retry_after,
                });
            }
        }
        match refused {
            Some(refused) => {
                tx.rollback().await.map_err(|e| self.failed(e))?;
                Ok(Err(refused))
            }
            None => {
                tx.commit().await.map_err(|e| self.failed(e))?;
                Ok(Ok(()))
            }
        }
    }
}
