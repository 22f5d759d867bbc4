//! Sealed per-user downstream tokens in PostgreSQL (`downstream_tokens`), for the vault of
//! `oauth` servers (`downstream_auth::vault`), which seals and opens them: the store only
//! ever holds ciphertext.
//!
//! The vault's interface is synchronous (the OAuth client asks its token store from inside
//! a token refresh), so each operation is sent to a thread of its own, with a runtime and a
//! connection of its own (as the audit writer has), and waited for. The vault's callers
//! keep tokens in memory between uses, so this round trip is taken when a user's tokens are
//! first needed, refreshed or changed, not on every call.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::Client;

use super::postgres::Postgres;

/// How long an operation may wait for the store.
const WAIT: Duration = Duration::from_secs(5);

enum Op {
    Get(String, Sender<Result<Option<Vec<u8>>, String>>),
    Put(String, Vec<u8>, Sender<Result<(), String>>),
    Delete(String, Sender<Result<(), String>>),
}

/// The `downstream_tokens` table, by record name.
#[derive(Clone)]
pub struct SharedTokens {
    tx: Arc<Mutex<Sender<Op>>>,
    shown: String,
}

impl std::fmt::Debug for SharedTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTokens")
            .field("store", &self.shown)
            .finish()
    }
}

impl SharedTokens {
    /// Starts the thread that talks to `pg` (it connects on first use, and again after a
    /// failure).
    pub fn start(pg: Postgres) -> SharedTokens {
        let (tx, rx) = mpsc::channel::<Op>();
        let shown = pg.shown().to_owned();
        let spawned = std::thread::Builder::new()
            .name("moat-token-store".into())
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    tracing::error!("downstream tokens: cannot start the store's runtime");
                    return;
                };
                let mut client: Option<Client> = None;
                while let Ok(op) = rx.recv() {
                    runtime.block_on(serve(&pg, &mut client, op));
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "downstream tokens: cannot start the store's thread");
        }
        SharedTokens {
            tx: Arc::new(Mutex::new(tx)),
            shown,
        }
    }

    fn ask<T>(&self, op: impl FnOnce(Sender<Result<T, String>>) -> Op) -> Result<T, String> {
        let (reply, answer) = mpsc::channel();
        self.tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(op(reply))
            .map_err(|_| "the store's thread is gone".to_owned())?;
        answer
            .recv_timeout(WAIT)
            .map_err(|_| format!("the store {} did not answer in time", self.shown))?
    }

    /// The sealed record `place`, if any.
    pub fn get(&self, place: &str) -> Result<Option<Vec<u8>>, String> {
        self.ask(|r| Op::Get(place.to_owned(), r))
    }

    /// Keeps `sealed` as record `place`.
    pub fn put(&self, place: &str, sealed: Vec<u8>) -> Result<(), String> {
        self.ask(|r| Op::Put(place.to_owned(), sealed, r))
    }

    /// Forgets record `place`.
    pub fn delete(&self, place: &str) -> Result<(), String> {
        self.ask(|r| Op::Delete(place.to_owned(), r))
    }
}

async fn serve(pg: &Postgres, client: &mut Option<Client>, op: Op) {
    if client.as_ref().is_none_or(Client::is_closed) {
        match pg.connect_one().await {
            Ok(c) => *client = Some(c),
            Err(e) => {
                fail(op, e.to_string());
                return;
            }
        }
    }
    let Some(c) = client.as_ref() else {
        return;
    };
    let broken = |e: tokio_postgres::Error| pg.failed(e).to_string();
    match op {
        Op::Get(place, reply) => {
            let row = c
                .query_opt(
                    "SELECT sealed FROM downstream_tokens WHERE place = $1",
                    &[&place],
                )
                .await;
            let _ = reply.send(row.map(|r| r.map(|r| r.get(0))).map_err(broken));
        }
        Op::Put(place, sealed, reply) => {
            let done = c
                .execute(
                    "INSERT INTO downstream_tokens (place, sealed) VALUES ($1, $2) \
                     ON CONFLICT (place) DO UPDATE SET sealed = EXCLUDED.sealed, \
                     updated_at = now()",
                    &[&place, &sealed],
                )
                .await;
            let _ = reply.send(done.map(drop).map_err(broken));
        }
        Op::Delete(place, reply) => {
            let done = c
                .execute("DELETE FROM downstream_tokens WHERE place = $1", &[&place])
                .await;
            let _ = reply.send(done.map(drop).map_err(broken));
        }
    }
    if client.as_ref().is_some_and(Client::is_closed) {
        *client = None;
    }
}

fn fail(op: Op, why: String) {
    match op {
        Op::Get(_, r) => drop(r.send(Err(why))),
        Op::Put(_, _, r) | Op::Delete(_, r) => drop(r.send(Err(why))),
    }
}
