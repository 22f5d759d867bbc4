//! The HTTP session directory in PostgreSQL (`http_sessions`): what lets every gateway
//! replica on the store serve every handshake-era session (see
//! `moat::transport::http::server::directory`). One statement per operation, straight
//! through the pool: a lookup happens only for a session this replica does not hold.
//! The events of resumable SSE streams (`sse_events`) come in batches, one transaction
//! each, from the server's journal task.

use std::time::Duration;

use moat::transport::http::server::directory::{
    DirectoryError, DirectoryFuture, KEPT_EVENTS, Replica, SessionChange, SessionDirectory,
    SessionRecord, SessionUser, StoredEvent,
};

use super::postgres::Postgres;

/// The store as a session directory.
#[derive(Debug, Clone)]
pub struct PostgresDirectory {
    pg: Postgres,
}

impl PostgresDirectory {
    pub fn new(pg: Postgres) -> PostgresDirectory {
        PostgresDirectory { pg }
    }

    async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, DirectoryError> {
        let client = self.pg.client().await.map_err(unavailable)?;
        client
            .execute(sql, params)
            .await
            .map_err(|e| unavailable(self.pg.failed(e)))
    }
}

fn unavailable(e: impl std::fmt::Display) -> DirectoryError {
    DirectoryError(e.to_string())
}

const REGISTER: &str = "
INSERT INTO http_sessions (id, owner_id, owner_url, version, initialize, authenticated,
    issuer, subject, log_level, subscriptions, legacy, touched_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now())
ON CONFLICT (id) DO UPDATE SET owner_id = EXCLUDED.owner_id, owner_url = EXCLUDED.owner_url,
    version = EXCLUDED.version, initialize = EXCLUDED.initialize,
    authenticated = EXCLUDED.authenticated, issuer = EXCLUDED.issuer,
    subject = EXCLUDED.subject, log_level = EXCLUDED.log_level,
    subscriptions = EXCLUDED.subscriptions, legacy = EXCLUDED.legacy, touched_at = now()";

/// A batch of events, as arrays: one statement whatever the batch's size.
const APPEND_EVENTS: &str = "
INSERT INTO sse_events (session_id, stream, seq, answers, message)
SELECT * FROM unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[], $4::BOOLEAN[], $5::TEXT[])
ON CONFLICT DO NOTHING";

/// All but the latest events other than answers of the streams a batch wrote to go.
const TRIM_EVENTS: &str = "
DELETE FROM sse_events e
USING (SELECT s, st, max(n) AS newest
       FROM unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[]) AS t(s, st, n)
       GROUP BY s, st) AS w
WHERE e.session_id = w.s AND e.stream = w.st AND NOT e.answers AND e.seq <= w.newest - $4";

const FIND: &str = "
SELECT id, owner_id, owner_url, version, initialize, authenticated, issuer, subject,
    log_level, subscriptions, legacy
FROM http_sessions WHERE id = $1";

impl SessionDirectory for PostgresDirectory {
    fn register<'a>(&'a self, r: &'a SessionRecord) -> DirectoryFuture<'a, ()> {
        Box::pin(async move {
            let (issuer, subject) = match &r.user {
                Some(u) => (u.issuer.as_deref(), u.subject.as_deref()),
                None => (None, None),
            };
            self.execute(
                REGISTER,
                &[
                    &r.id,
                    &r.owner.id,
                    &r.owner.url,
                    &r.version,
                    &r.initialize,
                    &r.user.is_some(),
                    &issuer,
                    &subject,
                    &r.log_level,
                    &r.subscriptions,
                    &r.legacy,
                ],
            )
            .await
            .map(drop)
        })
    }

    fn find<'a>(&'a self, id: &'a str) -> DirectoryFuture<'a, Option<SessionRecord>> {
        Box::pin(async move {
            let client = self.pg.client().await.map_err(unavailable)?;
            let row = client
                .query_opt(FIND, &[&id])
                .await
                .map_err(|e| unavailable(self.pg.failed(e)))?;
            Ok(row.map(|row| {
                let authenticated: bool = row.get(5);
                let mut record = SessionRecord::new(
                    row.get::<_, String>(0),
                    Replica {
                        id: row.get(1),
                        url: row.get(2),
                    },
                );
                record.version = row.get(3);
                record.initialize = row.get(4);
                record.user = authenticated.then(|| SessionUser {
                    issuer: row.get(6),
                    subject: row.get(7),
                });
                record.log_level = row.get(8);
                record.subscriptions = row.get(9);
                record.legacy = row.get(10);
                record
            }))
        })
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        previous: &'a str,
        owner: &'a Replica,
    ) -> DirectoryFuture<'a, bool> {
        Box::pin(async move {
            let changed = self
                .execute(
                    "UPDATE http_sessions SET owner_id = $3, owner_url = $4, touched_at = now() \
                     WHERE id = $1 AND owner_id = $2",
                    &[&id, &previous, &owner.id, &owner.url],
                )
                .await?;
            Ok(changed == 1)
        })
    }

    fn update<'a>(&'a self, id: &'a str, change: &'a SessionChange) -> DirectoryFuture<'a, ()> {
        Box::pin(async move {
            let (sql, value) = match change {
                SessionChange::LogLevel(level) => (
                    "UPDATE http_sessions SET log_level = $2 WHERE id = $1",
                    level,
                ),
                SessionChange::Subscribe(uri) => (
                    "UPDATE http_sessions SET subscriptions = array_append(subscriptions, $2) \
                     WHERE id = $1 AND NOT ($2 = ANY(subscriptions))",
                    uri,
                ),
                SessionChange::Unsubscribe(uri) => (
                    "UPDATE http_sessions SET subscriptions = array_remove(subscriptions, $2) \
                     WHERE id = $1",
                    uri,
                ),
                _ => return Ok(()),
            };
            self.execute(sql, &[&id, value]).await.map(drop)
        })
    }

    fn remove<'a>(&'a self, id: &'a str, owner: Option<&'a str>) -> DirectoryFuture<'a, ()> {
        Box::pin(async move {
            let mut client = self.pg.client().await.map_err(unavailable)?;
            let failed = |e| unavailable(self.pg.failed(e));
            let tx = client.transaction().await.map_err(failed)?;
            let removed = tx
                .execute(
                    "DELETE FROM http_sessions \
                     WHERE id = $1 AND ($2::TEXT IS NULL OR owner_id = $2)",
                    &[&id, &owner],
                )
                .await
                .map_err(failed)?;
            if removed > 0 || owner.is_none() {
                tx.execute("DELETE FROM sse_events WHERE session_id = $1", &[&id])
                    .await
                    .map_err(failed)?;
            }
            tx.commit().await.map_err(failed)
        })
    }

    fn touch<'a>(
        &'a self,
        ids: &'a [String],
        owner: &'a str,
        stale: Duration,
    ) -> DirectoryFuture<'a, Vec<String>> {
        Box::pin(async move {
            let stale_seconds = stale.as_secs_f64();
            let client = self.pg.client().await.map_err(unavailable)?;
            let failed = |e| unavailable(self.pg.failed(e));
            let mut elsewhere = Vec::new();
            if !ids.is_empty() {
                client
                    .execute(
                        "UPDATE http_sessions SET touched_at = now() \
                         WHERE id = ANY($1) AND owner_id = $2",
                        &[&ids, &owner],
                    )
                    .await
                    .map_err(failed)?;
                elsewhere = client
                    .query(
                        "SELECT id FROM http_sessions WHERE id = ANY($1) AND owner_id <> $2",
                        &[&ids, &owner],
                    )
                    .await
                    .map_err(failed)?
                    .iter()
                    .map(|row| row.get(0))
                    .collect();
            }
            for sql in [
                // A stale session's events go with it.
                "WITH gone AS (DELETE FROM http_sessions \
                     WHERE touched_at < now() - make_interval(secs => $1) RETURNING id) \
                 DELETE FROM sse_events WHERE session_id IN (SELECT id FROM gone)",
                // Events written after their session was removed (a batch in flight then).
                "DELETE FROM sse_events e WHERE written_at < now() - make_interval(secs => $1) \
                 AND NOT EXISTS (SELECT 1 FROM http_sessions s WHERE s.id = e.session_id)",
            ] {
                client
                    .execute(sql, &[&stale_seconds])
                    .await
                    .map_err(failed)?;
            }
            Ok(elsewhere)
        })
    }

    fn append_events<'a>(&'a self, events: &'a [StoredEvent]) -> DirectoryFuture<'a, ()> {
        Box::pin(async move {
            let sessions: Vec<&str> = events.iter().map(|e| e.session.as_str()).collect();
            let streams: Vec<&str> = events.iter().map(|e| e.stream.as_str()).collect();
            // PostgreSQL has no unsigned integers; a stream's event number stays far below.
            let seqs: Vec<i64> = events
                .iter()
                .map(|e| i64::try_from(e.seq).unwrap_or(i64::MAX))
                .collect();
            let answers: Vec<bool> = events.iter().map(|e| e.answers).collect();
            let messages: Vec<&str> = events.iter().map(|e| e.json.as_str()).collect();
            let kept = i64::try_from(KEPT_EVENTS).unwrap_or(i64::MAX);
            let mut client = self.pg.client().await.map_err(unavailable)?;
            let failed = |e| unavailable(self.pg.failed(e));
            let tx = client.transaction().await.map_err(failed)?;
            tx.execute(
                APPEND_EVENTS,
                &[&sessions, &streams, &seqs, &answers, &messages],
            )
            .await
            .map_err(failed)?;
            tx.execute(TRIM_EVENTS, &[&sessions, &streams, &seqs, &kept])
                .await
                .map_err(failed)?;
            tx.commit().await.map_err(failed)
        })
    }

    fn events<'a>(
        &'a self,
        session: &'a str,
        stream: &'a str,
    ) -> DirectoryFuture<'a, Vec<StoredEvent>> {
        Box::pin(async move {
            let client = self.pg.client().await.map_err(unavailable)?;
            let rows = client
                .query(
                    "SELECT seq, answers, message FROM sse_events \
                     WHERE session_id = $1 AND stream = $2 ORDER BY seq",
                    &[&session, &stream],
                )
                .await
                .map_err(|e| unavailable(self.pg.failed(e)))?;
            Ok(rows
                .iter()
                .map(|row| {
                    let seq: i64 = row.get(0);
                    StoredEvent::new(
                        session,
                        stream,
                        u64::try_from(seq).unwrap_or(0),
                        row.get(1),
                        row.get::<_, String>(2),
                    )
                })
                .collect())
        })
    }
}
