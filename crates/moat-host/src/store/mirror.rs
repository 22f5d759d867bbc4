//! [`Mirror`]: an in-memory copy of the shared tables (pins, launch pins, lasting consent
//! decisions) that the usual SQLite-backed stores work on, kept in step with PostgreSQL.
//!
//! The copy remembers, per row, what it last knew to be on the server (its *base*). A sync
//! sends every row that differs from its base as a compare-and-set statement (insert if
//! still absent, update or delete if the server's row is still the base), then, when the
//! server's generation moved, takes the server's rows, keeping local rows not yet sent. A
//! row the server refused (another process changed it first) is replaced by the server's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use rusqlite::Connection;
use tokio_postgres::types::ToSql;

use super::error::StoreError;
use super::postgres::Postgres;
use crate::consent::Decisions;
use crate::pins::PinStore;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ty {
    Text,
    Int,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Side {
    Pins,
    Decisions,
}

/// A shared table: its columns, the first `key` of them its primary key.
struct Table {
    name: &'static str,
    cols: &'static [(&'static str, Ty)],
    key: usize,
    side: Side,
}

use Ty::{Int, Text};

const TABLES: &[Table] = &[
    Table {
        name: "tool_pins",
        cols: &[
            ("server_id", Text),
            ("tool", Text),
            ("identity", Text),
            ("server", Text),
            ("exposed_name", Text),
            ("hash", Text),
            ("definition", Text),
            ("pinned_at", Int),
            ("pending_hash", Text),
            ("pending_definition", Text),
            ("pending_seen_at", Int),
        ],
        key: 2,
        side: Side::Pins,
    },
    Table {
        name: "server_pins",
        cols: &[
            ("origin", Text),
            ("server", Text),
            ("hash", Text),
            ("spec", Text),
            ("source", Text),
            ("pinned_at", Int),
            ("pending_hash", Text),
            ("pending_spec", Text),
            ("pending_source", Text),
            ("pending_seen_at", Int),
        ],
        key: 2,
        side: Side::Pins,
    },
    Table {
        name: "consent_always",
        cols: &[("tool", Text), ("decided_at", Int)],
        key: 1,
        side: Side::Decisions,
    },
    Table {
        name: "consent_always_user",
        cols: &[("user", Text), ("tool", Text), ("decided_at", Int)],
        key: 2,
        side: Side::Decisions,
    },
];

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Val {
    Null,
    Text(String),
    Int(i64),
}

/// A table's rows by key.
type Rows = BTreeMap<Vec<Val>, Vec<Val>>;

#[derive(Default)]
struct SyncState {
    base: HashMap<&'static str, Rows>,
    generation: Option<i64>,
}

/// What one [`Mirror::sync`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Synced {
    /// Local changes the server took.
    pub sent: usize,
    /// Local changes refused (another process changed the row first): the server's row won.
    pub refused: usize,
    /// Whether rows changed locally because of the server (another process's changes).
    pub received: bool,
}

/// The local copy of the shared tables, and its link to the server.
pub struct Mirror {
    pg: Postgres,
    pins: Arc<PinStore>,
    decisions: Arc<Decisions>,
    state: tokio::sync::Mutex<SyncState>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror").field("pg", &self.pg).finish()
    }
}

impl Mirror {
    /// A copy of the server's tables, taken now.
    pub async fn open(pg: Postgres) -> Result<Mirror, StoreError> {
        let pins = PinStore::open_in_memory().map_err(|e| StoreError::Unavailable {
            url: pg.shown().to_owned(),
            detail: e.to_string(),
        })?;
        let decisions = Decisions::in_memory().map_err(|e| StoreError::Unavailable {
            url: pg.shown().to_owned(),
            detail: e.to_string(),
        })?;
        let mirror = Mirror {
            pg,
            pins: Arc::new(pins),
            decisions: Arc::new(decisions),
            state: tokio::sync::Mutex::default(),
        };
        mirror.sync().await?;
        Ok(mirror)
    }

    /// The pin store this copy holds.
    pub fn pins(&self) -> &Arc<PinStore> {
        &self.pins
    }

    /// The lasting decisions this copy holds.
    pub fn decisions(&self) -> &Arc<Decisions> {
        &self.decisions
    }

    /// The server.
    pub fn postgres(&self) -> &Postgres {
        &self.pg
    }

    /// Sends local changes, then takes the server's when they moved (see the module docs).
    /// A new pin seen, an approval or a decision taken elsewhere bumps the local pins'
    /// [`version`](PinStore::version), so the gateway notices as it notices `moat pins`.
    pub async fn sync(&self) -> Result<Synced, StoreError> {
        let mut state = self.state.lock().await;
        let state = &mut *state;
        let mut synced = Synced::default();
        let client = self.pg.client().await?;
        let mut refused_keys: HashMap<&'static str, BTreeSet<Vec<Val>>> = HashMap::new();
        for table in TABLES {
            let current = self.with_conn(table.side, |c| read_local(c, table))?;
            let base = state.base.entry(table.name).or_default();
            let keys: BTreeSet<Vec<Val>> = current.keys().chain(base.keys()).cloned().collect();
            for key in keys {
                let (before, after) = (base.get(&key), current.get(&key));
                if before == after {
                    continue;
                }
                let n = push(&client, table, before, after)
                    .await
                    .map_err(|e| self.pg.failed(e))?;
                if n == 1 {
                    synced.sent += 1;
                    match after {
                        Some(row) => base.insert(key, row.clone()),
                        None => base.remove(&key),
                    };
                } else {
                    synced.refused += 1;
                    refused_keys.entry(table.name).or_default().insert(key);
                }
            }
        }
        if synced.sent > 0 {
            client
                .execute("UPDATE generation SET value = value + 1 WHERE id = 0", &[])
                .await
                .map_err(|e| self.pg.failed(e))?;
        }
        let generation: i64 = client
            .query_one("SELECT value FROM generation WHERE id = 0", &[])
            .await
            .map_err(|e| self.pg.failed(e))?
            .get(0);
        if state.generation == Some(generation) && synced.refused == 0 {
            return Ok(synced);
        }
        let mut pins_changed = false;
        for table in TABLES {
            let remote = read_remote(&client, table)
                .await
                .map_err(|e| self.pg.failed(e))?;
            let base = state.base.entry(table.name).or_default();
            let refused = refused_keys.remove(table.name).unwrap_or_default();
            let changed = self.with_conn(table.side, |conn| {
                let current = read_local(conn, table)?;
                let keys: BTreeSet<&Vec<Val>> = current
                    .keys()
                    .chain(base.keys())
                    .chain(remote.keys())
                    .collect();
                let mut merged = Rows::new();
                for key in keys {
                    // A row changed here and not yet sent stays, unless the server refused it.
                    let dirty = current.get(key) != base.get(key) && !refused.contains(key);
                    let row = if dirty {
                        current.get(key)
                    } else {
                        remote.get(key)
                    };
                    if let Some(row) = row {
                        merged.insert(key.clone(), row.clone());
                    }
                }
                if merged == current {
                    return Ok(false);
                }
                replace_local(conn, table, &merged)?;
                Ok(true)
            })?;
            if changed {
                synced.received = true;
                pins_changed |= table.side == Side::Pins;
            }
            *base = remote;
        }
        if pins_changed {
            let mut conn = self.pins.lock();
            let tx = conn.transaction()?;
            crate::pins::bump(&tx).map_err(|e| StoreError::Unavailable {
                url: self.pg.shown().to_owned(),
                detail: e.to_string(),
            })?;
            tx.commit()?;
        }
        state.generation = Some(generation);
        Ok(synced)
    }

    fn with_conn<T>(
        &self,
        side: Side,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let result = match side {
            Side::Pins => f(&mut self.pins.lock()),
            Side::Decisions => f(&mut self.decisions.lock()),
        };
        Ok(result?)
    }
}

fn columns(table: &Table) -> String {
    table
        .cols
        .iter()
        .map(|(c, _)| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn read_local(conn: &Connection, table: &Table) -> rusqlite::Result<Rows> {
    let sql = format!("SELECT {} FROM {}", columns(table), table.name);
    let mut statement = conn.prepare(&sql)?;
    let mut rows = statement.query([])?;
    let mut out = Rows::new();
    while let Some(row) = rows.next()? {
        let mut values = Vec::with_capacity(table.cols.len());
        for (i, (_, ty)) in table.cols.iter().enumerate() {
            values.push(match ty {
                Text => row
                    .get::<_, Option<String>>(i)?
                    .map_or(Val::Null, Val::Text),
                Int => row.get::<_, Option<i64>>(i)?.map_or(Val::Null, Val::Int),
            });
        }
        out.insert(values[..table.key].to_vec(), values);
    }
    Ok(out)
}

fn replace_local(conn: &mut Connection, table: &Table, rows: &Rows) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    tx.execute(&format!("DELETE FROM {}", table.name), [])?;
    let marks: Vec<String> = (1..=table.cols.len()).map(|i| format!("?{i}")).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        table.name,
        columns(table),
        marks.join(", ")
    );
    {
        let mut statement = tx.prepare(&sql)?;
        for row in rows.values() {
            let params: Vec<rusqlite::types::Value> = row
                .iter()
                .map(|v| match v {
                    Val::Null => rusqlite::types::Value::Null,
                    Val::Text(s) => rusqlite::types::Value::Text(s.clone()),
                    Val::Int(n) => rusqlite::types::Value::Integer(*n),
                })
                .collect();
            statement.execute(rusqlite::params_from_iter(params))?;
        }
    }
    tx.commit()
}

async fn read_remote(
    client: &tokio_postgres::Client,
    table: &Table,
) -> Result<Rows, tokio_postgres::Error> {
    let sql = format!("SELECT {} FROM {}", columns(table), table.name);
    let mut out = Rows::new();
    for row in client.query(&sql, &[]).await? {
        let mut values = Vec::with_capacity(table.cols.len());
        for (i, (_, ty)) in table.cols.iter().enumerate() {
            values.push(match ty {
                Text => row
                    .try_get::<_, Option<String>>(i)?
                    .map_or(Val::Null, Val::Text),
                Int => row
                    .try_get::<_, Option<i64>>(i)?
                    .map_or(Val::Null, Val::Int),
            });
        }
        out.insert(values[..table.key].to_vec(), values);
    }
    Ok(out)
}

/// The values of a row as statement parameters, typed as the columns are.
fn params(table: &Table, row: &[Val]) -> Vec<Box<dyn ToSql + Sync + Send>> {
    row.iter()
        .zip(table.cols)
        .map(|(v, (_, ty))| -> Box<dyn ToSql + Sync + Send> {
            match (v, ty) {
                (Val::Text(s), _) => Box::new(Some(s.clone())),
                (Val::Int(n), _) => Box::new(Some(*n)),
                (Val::Null, Text) => Box::new(None::<String>),
                (Val::Null, Int) => Box::new(None::<i64>),
            }
        })
        .collect()
}

/// `"c1" IS NOT DISTINCT FROM $k AND …`, the marks numbered from `first`.
fn matches(table: &Table, first: usize) -> String {
    table
        .cols
        .iter()
        .enumerate()
        .map(|(i, (c, _))| format!("\"{c}\" IS NOT DISTINCT FROM ${}", first + i))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// One compare-and-set: how many rows it changed (1, or 0 when the server's row is not
/// `before`).
async fn push(
    client: &tokio_postgres::Client,
    table: &Table,
    before: Option<&Vec<Val>>,
    after: Option<&Vec<Val>>,
) -> Result<u64, tokio_postgres::Error> {
    let n = table.cols.len();
    let (sql, values) = match (before, after) {
        (None, Some(after)) => {
            let marks: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
            (
                format!(
                    "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING",
                    table.name,
                    columns(table),
                    marks.join(", ")
                ),
                params(table, after),
            )
        }
        (Some(before), None) => (
            format!("DELETE FROM {} WHERE {}", table.name, matches(table, 1)),
            params(table, before),
        ),
        (Some(before), Some(after)) => {
            let sets: Vec<String> = table
                .cols
                .iter()
                .enumerate()
                .map(|(i, (c, _))| format!("\"{c}\" = ${}", i + 1))
                .collect();
            let mut values = params(table, after);
            values.extend(params(table, before));
            (
                format!(
                    "UPDATE {} SET {} WHERE {}",
                    table.name,
                    sets.join(", "),
                    matches(table, n + 1)
                ),
                values,
            )
        }
        (None, None) => return Ok(1),
    };
    let refs: Vec<&(dyn ToSql + Sync)> = values
        .iter()
        .map(|v| v.as_ref() as &(dyn ToSql + Sync))
        .collect();
    client.execute(&sql, &refs).await
}
