//! Pinning: tool definitions hashed on first approval, changed definitions held back.
//!
//! A server can show a harmless tool, get it approved, and later change what the tool says
//! (a "rug pull"). So the first time the host sees a tool it pins the tool's definition
//! (trust on first use): a SHA-256 of its canonical JSON ([`definition_hash`]) and the
//! definition itself go into a SQLite table. When a later definition hashes differently,
//! [`PinStore::observe`] keeps it as *pending* and answers [`PinStatus::Changed`]: the
//! gateway hides the tool and refuses its calls until a person runs `moat pins approve NAME`,
//! which shows the [`diff`] and calls [`PinStore::approve_hash`] from another process.
//! The gateway notices that through [`PinStore::version`].
//!
//! A tool pin is keyed by the server's identity ([`ServerIdentity`]: its command line and
//! working directory, or its URL) and the tool's own name, not by the name clients see:
//! the state directory is shared by every configuration on the machine, and two of them may
//! give the name `fs` to different servers. The display name (`server__tool`) is kept to find
//! a pin from the command line; when several identities share it, each is shown with its
//! identity. The launches themselves are pinned too: see [`crate::launch_pins`].
//!
//! Schema versions: 1 keyed tool pins by server name (table `pins`); 2 (now) by identity
//! (`tool_pins`) and adds launch pins (`server_pins`). Opening a version-1 store renames
//! `pins` to `pins_v1` and keeps it: a tool seen again with the definition its old pin
//! names takes that pin over (keeping its date); any other definition is pinned afresh, so
//! an old row never holds a tool back (old rows were where the name collisions made false
//! "changed" holds). A change held back before the upgrade is therefore not held after it.
//!
//! Pinned fields: name, title, description, inputSchema, outputSchema, annotations. Not
//! pinned: icons, `_meta` and execution, which do not change what the model reads.
//!
//! The store is one table (`pins`, plus `pins_generation`) in a file that other modules may
//! share; WAL mode and a busy timeout let the CLI and a running gateway use it at once.
//!
//! Configuration, the `[pins]` table (every key optional):
//!
//! ```toml
//! [pins]
//! enabled = true          # pin tool definitions and hold back changed ones
//! servers = "imports"     # hold changed launches: imports | all | off (launch_pins)
//! invisible = "block"     # invisible Unicode in a definition: off | warn | block
//! instructions = "block"  # text phrased as orders to the model
//! shadowing = "warn"      # text naming another server's tool
//! ```
//!
//! The scan defaults: invisible characters have no place in a tool definition and hide text
//! from the person approving it, so they block; the instruction patterns are narrow enough
//! that a match is worth stopping for, so they block too; shadowing only warns, because
//! servers that work together (a filesystem and a git server) legitimately name each
//! other's tools. `enabled` governs pinning only; set a scan key to `"off"` to skip it.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use moat_protocol::types::Tool;
use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, Row, Transaction, TransactionBehavior, params};
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub use crate::config::pins::{PinsConfig, ServerPins};

/// Errors of the pin store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PinError {
    /// The directory for the store could not be created.
    #[error("cannot create the directory of the pin store {path}: {source}")]
    CreateDir {
        /// The directory.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// SQLite failed (including a stored definition that is not JSON).
    #[error("pin store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// No pinned tool has that name.
    #[error("no pinned tool is named {0:?}")]
    NotFound(String),
    /// The name fits pins of more than one server identity.
    #[error(
        "{name:?} names the tools of {} servers that share the name: {}; choose one with --id ID",
        .candidates.len(),
        .candidates.join("; ")
    )]
    Ambiguous {
        /// The name.
        name: String,
        /// Each match: its identity's id (short) and how it is launched.
        candidates: Vec<String>,
    },
    /// The tool has no changed definition waiting for approval.
    #[error("{0:?} has no changed definition waiting for approval")]
    NothingPending(String),
    /// The pending definition changed again since it was shown.
    #[error("the pending definition of {name:?} changed again (now {found}); review it again")]
    PendingChanged {
        /// The tool.
        name: String,
        /// The hash now pending.
        found: String,
    },
}

/// What [`PinStore::observe`] found.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
// A verdict, returned and dropped: boxing the pin would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum PinStatus {
    /// First sight: the definition is pinned now.
    New,
    /// The definition is the pinned one.
    Pinned,
    /// The definition differs from the pinned one: hold the tool back. `pinned.pending`
    /// holds the new definition.
    Changed {
        /// The pin, with the new definition pending.
        pinned: Pin,
    },
}

impl PinStatus {
    /// Whether the tool must be hidden and its calls refused.
    pub fn is_held(&self) -> bool {
        matches!(self, PinStatus::Changed { .. })
    }
}

/// A pinned tool definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pin {
    /// The server's identity ([`ServerIdentity::id`]): the key, with `tool`.
    pub server_id: String,
    /// How the server is launched, for people ([`ServerIdentity::shown`]).
    pub identity: String,
    /// The server's name in the configuration, as last seen.
    pub server: String,
    /// The tool's name on its server.
    pub tool: String,
    /// The name the gateway exposes (`server__tool`), as last seen.
    pub exposed_name: String,
    /// [`definition_hash`] of `definition`.
    pub hash: String,
    /// The pinned fields of the approved definition.
    pub definition: Value,
    /// When it was pinned or approved (Unix seconds).
    pub pinned_at: i64,
    /// A changed definition waiting for approval.
    pub pending: Option<Pending>,
}

impl Pin {
    /// The unified diff from the pinned definition to the pending one, if any.
    pub fn pending_diff(&self) -> Option<String> {
        let pending = self.pending.as_ref()?;
        Some(diff(&self.definition, &pending.definition))
    }
}

/// A changed definition waiting for approval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pending {
    /// [`definition_hash`] of `definition`.
    pub hash: String,
    /// The pinned fields of the changed definition.
    pub definition: Value,
    /// When this definition was first seen (Unix seconds).
    pub seen_at: i64,
}

/// What [`PinStore::approve`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Approved {
    /// The pin now, with the approved definition.
    pub pin: Pin,
    /// The hash that was pinned before.
    pub previous_hash: String,
    /// The unified diff from the previous definition to the approved one.
    pub diff: String,
}

/// The pinned fields of a tool, as a JSON object.
pub fn pinned_definition(tool: &Tool) -> Value {
    let mut map = Map::new();
    map.insert("name".into(), Value::String(tool.name.clone()));
    if let Some(title) = &tool.title {
        map.insert("title".into(), Value::String(title.clone()));
    }
    if let Some(description) = &tool.description {
        map.insert("description".into(), Value::String(description.clone()));
    }
    map.insert("inputSchema".into(), tool.input_schema.clone());
    if let Some(schema) = &tool.output_schema {
        map.insert("outputSchema".into(), schema.clone());
    }
    if let Some(annotations) = &tool.annotations {
        // Plain options and booleans: serializing cannot fail.
        let value = serde_json::to_value(annotations).unwrap_or(Value::Null);
        map.insert("annotations".into(), value);
    }
    Value::Object(map)
}

/// SHA-256 (lower-case hex) of the canonical JSON (keys sorted, no whitespace) of a tool's
/// pinned fields.
pub fn definition_hash(tool: &Tool) -> String {
    hash_value(&pinned_definition(tool))
}

pub(crate) fn hash_value(definition: &Value) -> String {
    let canonical = sorted(definition).to_string();
    Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The value with every object's keys in sorted order, whatever map serde_json was built with
/// (`preserve_order` keeps insertion order, so sort explicitly).
pub(crate) fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let map = keys
                .into_iter()
                .map(|k| (k.clone(), sorted(&map[k])))
                .collect();
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// A unified diff of the pretty JSON of two definitions (keys sorted), `pinned` to `pending`.
pub fn diff(old: &Value, new: &Value) -> String {
    let pretty = |v: &Value| {
        let mut text = serde_json::to_string_pretty(&sorted(v)).unwrap_or_default();
        text.push('\n');
        text
    };
    let (old, new) = (pretty(old), pretty(new));
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header("pinned", "pending")
        .to_string()
}

/// Who a server is, whatever it is called: what tool pins are keyed by.
///
/// A command server is its command, arguments and working directory (its `cwd`, else the
/// gateway's own, which it inherits: the same program in another folder may serve, and
/// describe, other files); a URL server is its URL. The environment, the
/// sandbox and the name are left out: a rotated token or a wider sandbox does not make
/// another server, and a name is what two configurations may share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerIdentity {
    /// SHA-256 (hex) of the canonical JSON of what identifies the server.
    pub id: String,
    /// The same, for people: the command line (and folder), or the URL without its query.
    pub shown: String,
}

impl ServerIdentity {
    /// The identity of a configured server.
    pub fn of(cfg: &crate::config::ServerConfig) -> ServerIdentity {
        use crate::config::ServerTransport;
        match &cfg.transport {
            ServerTransport::Command {
                command, args, cwd, ..
            } => {
                // Without a `cwd` the server runs where the gateway was started (a client
                // starts it in its workspace), and may describe that folder in its tools.
                let cwd = cwd.clone().or_else(|| std::env::current_dir().ok());
                let value = serde_json::json!({ "command": command, "args": args, "cwd": cwd });
                let mut shown = std::iter::once(command)
                    .chain(args)
                    .map(|a| shell_word(a))
                    .collect::<Vec<_>>()
                    .join(" ");
                if let Some(cwd) = cwd {
                    shown.push_str(&format!(" (in {})", cwd.display()));
                }
                ServerIdentity {
                    id: hash_value(&value),
                    shown,
                }
            }
            ServerTransport::Url { url, .. } => ServerIdentity {
                id: hash_value(&serde_json::json!({ "url": url })),
                // A query may carry a token: it counts, it is not shown.
                shown: url.split(['?', '#']).next().unwrap_or(url).to_owned(),
            },
            #[allow(unreachable_patterns)]
            _ => ServerIdentity::named(&cfg.name),
        }
    }

    /// An identity made of a name alone (servers the host has no configuration for, tests).
    pub fn named(name: &str) -> ServerIdentity {
        ServerIdentity {
            id: hash_value(&serde_json::json!({ "name": name })),
            shown: format!("server {name}"),
        }
    }

    /// The first characters of the id, as `moat pins` shows it and `--id` takes it.
    pub fn short(id: &str) -> &str {
        &id[..id.len().min(SHORT_ID)]
    }
}

/// How many characters of an identity's id are shown.
const SHORT_ID: usize = 8;

fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The schema this code writes (see the module docs for the versions).
const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS pins_schema (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tool_pins (
    server_id TEXT NOT NULL,
    identity TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    exposed_name TEXT NOT NULL,
    hash TEXT NOT NULL,
    definition TEXT NOT NULL,
    pinned_at INTEGER NOT NULL,
    pending_hash TEXT,
    pending_definition TEXT,
    pending_seen_at INTEGER,
    PRIMARY KEY (server_id, tool)
);
CREATE INDEX IF NOT EXISTS tool_pins_by_exposed_name ON tool_pins (exposed_name);
CREATE TABLE IF NOT EXISTS server_pins (
    origin TEXT NOT NULL,
    server TEXT NOT NULL,
    hash TEXT,
    spec TEXT,
    source TEXT,
    pinned_at INTEGER,
    pending_hash TEXT,
    pending_spec TEXT,
    pending_source TEXT,
    pending_seen_at INTEGER,
    PRIMARY KEY (origin, server)
);
CREATE TABLE IF NOT EXISTS pins_generation (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO pins_generation (id, value) VALUES (0, 0);
";

const COLUMNS: &str = "server_id, identity, server, tool, exposed_name, hash, definition, \
                       pinned_at, pending_hash, pending_definition, pending_seen_at";

/// How long a write waits for another process's write to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The pin store: one SQLite connection, shared by the gateway's tasks.
#[derive(Debug)]
pub struct PinStore {
    conn: Mutex<Connection>,
}

impl PinStore {
    /// Open (creating the directories, the file and the tables as needed, and bringing an
    /// older store up to date) the store at `path`.
    pub fn open(path: &Path) -> Result<PinStore, PinError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| PinError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
        }
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // WAL: the gateway reads while the CLI writes, and the reverse.
        let mode = crate::sqlite::use_wal(&conn)?;
        if !mode.eq_ignore_ascii_case("wal") {
            // Another connection holds the file; still correct, only less concurrent.
            tracing::warn!(path = %path.display(), %mode, "pin store is not in WAL mode");
        }
        PinStore::with(conn)
    }

    /// A store that lives in memory only (tests, `--no-state` runs).
    pub fn open_in_memory() -> Result<PinStore, PinError> {
        PinStore::with(Connection::open_in_memory()?)
    }

    fn with(mut conn: Connection) -> Result<PinStore, PinError> {
        migrate(&mut conn)?;
        Ok(PinStore {
            conn: Mutex::new(conn),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic mid-transaction rolled that transaction back; the connection is usable.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Check a tool the gateway sees from the server `identity` (configured as `server`):
    /// pin it if new ([`PinStatus::New`]), confirm it ([`PinStatus::Pinned`]), or keep a
    /// changed definition pending ([`PinStatus::Changed`]). Writes only when something
    /// changed.
    pub fn observe(
        &self,
        identity: &ServerIdentity,
        server: &str,
        exposed_name: &str,
        tool: &Tool,
    ) -> Result<PinStatus, PinError> {
        let definition = pinned_definition(tool);
        let hash = hash_value(&definition);
        let now = unix_now();
        let id = identity.id.as_str();
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let status = match select(&tx, id, &tool.name)? {
            None => {
                // A version-1 pin of this server name with this very definition carries over.
                let legacy = legacy_pinned_at(&tx, server, &tool.name, &hash)?;
                tx.execute(
                    "INSERT INTO tool_pins (server_id, identity, server, tool, exposed_name, \
                     hash, definition, pinned_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![
                        id,
                        identity.shown,
                        server,
                        tool.name,
                        exposed_name,
                        hash,
                        definition.to_string(),
                        legacy.unwrap_or(now)
                    ],
                )?;
                bump(&tx)?;
                if legacy.is_some() {
                    PinStatus::Pinned
                } else {
                    PinStatus::New
                }
            }
            Some(pin) if pin.hash == hash => {
                // Back to the approved definition: a stale pending one must not be approvable.
                if pin.pending.is_some() || pin.exposed_name != exposed_name || pin.server != server
                {
                    tx.execute(
                        "UPDATE tool_pins SET exposed_name = ?3, server = ?4, \
                         pending_hash = NULL, pending_definition = NULL, pending_seen_at = NULL \
                         WHERE server_id = ?1 AND tool = ?2",
                        params![id, tool.name, exposed_name, server],
                    )?;
                    bump(&tx)?;
                }
                PinStatus::Pinned
            }
            Some(mut pin) => {
                let known = pin.pending.as_ref().is_some_and(|p| p.hash == hash);
                if !known || pin.exposed_name != exposed_name || pin.server != server {
                    let pending = Pending {
                        hash,
                        definition,
                        seen_at: if known { pin_seen_at(&pin) } else { now },
                    };
                    tx.execute(
                        "UPDATE tool_pins SET exposed_name = ?3, server = ?4, pending_hash = ?5, \
                         pending_definition = ?6, pending_seen_at = ?7 \
                         WHERE server_id = ?1 AND tool = ?2",
                        params![
                            id,
                            tool.name,
                            exposed_name,
                            server,
                            pending.hash,
                            pending.definition.to_string(),
                            pending.seen_at
                        ],
                    )?;
                    bump(&tx)?;
                    pin.exposed_name = exposed_name.to_owned();
                    pin.server = server.to_owned();
                    pin.pending = Some(pending);
                }
                PinStatus::Changed { pinned: pin }
            }
        };
        tx.commit()?;
        Ok(status)
    }

    /// Approve the pending definition of `name` (`server__tool` as exposed, or
    /// `server/tool`): it becomes the pinned one.
    ///
    /// Between showing a diff and approving, the server may change the tool again; a CLI that
    /// showed a diff should call [`PinStore::approve_hash`] with the hash it showed.
    pub fn approve(&self, name: &str) -> Result<Approved, PinError> {
        self.approve_inner(name, None, None)
    }

    /// Approve the pending definition of `name` only if its hash is still `pending_hash`.
    pub fn approve_hash(&self, name: &str, pending_hash: &str) -> Result<Approved, PinError> {
        self.approve_inner(name, None, Some(pending_hash))
    }

    /// [`PinStore::approve_hash`] of the tool `name` of the server whose identity's id
    /// starts with `id` (when several servers share the name).
    pub fn approve_hash_in(
        &self,
        name: &str,
        id: Option<&str>,
        pending_hash: &str,
    ) -> Result<Approved, PinError> {
        self.approve_inner(name, id, Some(pending_hash))
    }

    fn approve_inner(
        &self,
        name: &str,
        id: Option<&str>,
        expected: Option<&str>,
    ) -> Result<Approved, PinError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut pin = resolve(&tx, name, id, true)?;
        let Some(pending) = pin.pending.take() else {
            return Err(PinError::NothingPending(name.to_owned()));
        };
        if expected.is_some_and(|h| h != pending.hash) {
            return Err(PinError::PendingChanged {
                name: name.to_owned(),
                found: pending.hash,
            });
        }
        let now = unix_now();
        tx.execute(
            "UPDATE tool_pins SET hash = pending_hash, definition = pending_definition, \
             pinned_at = ?3, pending_hash = NULL, pending_definition = NULL, \
             pending_seen_at = NULL WHERE server_id = ?1 AND tool = ?2",
            params![pin.server_id, pin.tool, now],
        )?;
        bump(&tx)?;
        tx.commit()?;
        let diff = diff(&pin.definition, &pending.definition);
        let previous_hash = std::mem::replace(&mut pin.hash, pending.hash);
        pin.definition = pending.definition;
        pin.pinned_at = now;
        Ok(Approved {
            pin,
            previous_hash,
            diff,
        })
    }

    /// Forget the pin of `name` (as in [`PinStore::approve`]), or every tool pin with
    /// `None`; the tool is pinned afresh the next time it is seen. Returns how many pins
    /// were removed (0 for a name that is not pinned).
    pub fn reset(&self, name: Option<&str>) -> Result<usize, PinError> {
        self.reset_in(name, None)
    }

    /// [`PinStore::reset`] of the server whose identity's id starts with `id`.
    pub fn reset_in(&self, name: Option<&str>, id: Option<&str>) -> Result<usize, PinError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let removed = match name {
            None => tx.execute("DELETE FROM tool_pins", [])?,
            Some(name) => match resolve(&tx, name, id, false) {
                Ok(pin) => tx.execute(
                    "DELETE FROM tool_pins WHERE server_id = ?1 AND tool = ?2",
                    params![pin.server_id, pin.tool],
                )?,
                Err(PinError::NotFound(_)) => 0,
                Err(e) => return Err(e),
            },
        };
        if removed > 0 {
            bump(&tx)?;
        }
        tx.commit()?;
        Ok(removed)
    }

    /// Every tool pin, by display name and identity.
    pub fn list(&self) -> Result<Vec<Pin>, PinError> {
        let conn = self.lock();
        let mut statement = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM tool_pins ORDER BY exposed_name, identity, tool"
        ))?;
        let pins = statement
            .query_map([], read_pin)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(pins)
    }

    /// The pin of `name` (as in [`PinStore::approve`]), if there is one; of several servers
    /// sharing the name, the one with a change waiting when only one has.
    pub fn get(&self, name: &str) -> Result<Option<Pin>, PinError> {
        self.get_in(name, None)
    }

    /// [`PinStore::get`] of the server whose identity's id starts with `id`.
    pub fn get_in(&self, name: &str, id: Option<&str>) -> Result<Option<Pin>, PinError> {
        let conn = self.lock();
        match resolve(&conn, name, id, true) {
            Ok(pin) => Ok(Some(pin)),
            Err(PinError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A number that changes whenever any process changes the pins (one small read).
    /// The gateway keeps the last value it saw; when it differs (say, after `moat pins
    /// approve` in another process), it observes its tools again and updates what it shows.
    pub fn version(&self) -> Result<u64, PinError> {
        let conn = self.lock();
        let value: i64 =
            conn.query_row("SELECT value FROM pins_generation WHERE id = 0", [], |r| {
                r.get(0)
            })?;
        Ok(u64::try_from(value).unwrap_or_default())
    }

    /// The schema version of the store (see the module docs).
    pub fn schema_version(&self) -> Result<i64, PinError> {
        let conn = self.lock();
        Ok(
            conn.query_row("SELECT version FROM pins_schema WHERE id = 0", [], |r| {
                r.get(0)
            })?,
        )
    }
}

/// Brings the store to [`SCHEMA_VERSION`] in one transaction.
fn migrate(conn: &mut Connection) -> Result<(), PinError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let table = |name: &str| -> Result<bool, PinError> {
        Ok(tx
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [name],
                |r| r.get::<_, i64>(0),
            )
            .optional()?
            .is_some())
    };
    let v1 = table("pins")? && !table("pins_v1")?;
    if v1 {
        let held: i64 = tx.query_row(
            "SELECT count(*) FROM pins WHERE pending_hash IS NOT NULL",
            [],
            |r| r.get(0),
        )?;
        tx.execute_batch(
            "ALTER TABLE pins RENAME TO pins_v1; DROP INDEX IF EXISTS pins_by_exposed_name;",
        )?;
        tracing::info!(
            held,
            "pin store upgraded: tool pins are now keyed by the server's launch, not its name; \
             old pins carry over when a tool is seen unchanged, changes held before are not held"
        );
    }
    tx.execute_batch(SCHEMA)?;
    tx.execute(
        "INSERT INTO pins_schema (id, version) VALUES (0, ?1) \
         ON CONFLICT (id) DO UPDATE SET version = max(version, excluded.version)",
        [SCHEMA_VERSION],
    )?;
    if v1 {
        bump(&tx)?;
    }
    tx.commit()?;
    Ok(())
}

/// When a version-1 pin of `server`/`tool` pinned exactly `hash`, its date.
fn legacy_pinned_at(
    conn: &Connection,
    server: &str,
    tool: &str,
    hash: &str,
) -> Result<Option<i64>, PinError> {
    let exists: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pins_v1'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if exists.is_none() {
        return Ok(None);
    }
    Ok(conn
        .query_row(
            "SELECT pinned_at FROM pins_v1 WHERE server = ?1 AND tool = ?2 AND hash = ?3",
            params![server, tool, hash],
            |r| r.get(0),
        )
        .optional()?)
}

fn pin_seen_at(pin: &Pin) -> i64 {
    pin.pending.as_ref().map_or(0, |p| p.seen_at)
}

pub(crate) fn bump(tx: &Transaction<'_>) -> Result<(), PinError> {
    tx.execute(
        "UPDATE pins_generation SET value = value + 1 WHERE id = 0",
        [],
    )?;
    Ok(())
}

fn select(conn: &Connection, server_id: &str, tool: &str) -> Result<Option<Pin>, PinError> {
    let sql = format!("SELECT {COLUMNS} FROM tool_pins WHERE server_id = ?1 AND tool = ?2");
    Ok(conn
        .query_row(&sql, params![server_id, tool], read_pin)
        .optional()?)
}

/// Every pin named as exposed (`server__tool`), else as `server/tool`.
fn find(conn: &Connection, name: &str) -> Result<Vec<Pin>, PinError> {
    let query = |sql: &str, args: &[&dyn rusqlite::ToSql]| -> Result<Vec<Pin>, PinError> {
        let mut statement = conn.prepare(sql)?;
        Ok(statement
            .query_map(args, read_pin)?
            .collect::<Result<Vec<_>, _>>()?)
    };
    let found = query(
        &format!("SELECT {COLUMNS} FROM tool_pins WHERE exposed_name = ?1 ORDER BY identity"),
        &[&name],
    )?;
    if !found.is_empty() {
        return Ok(found);
    }
    match name.split_once('/') {
        Some((server, tool)) => query(
            &format!(
                "SELECT {COLUMNS} FROM tool_pins WHERE server = ?1 AND tool = ?2 ORDER BY identity"
            ),
            &[&server, &tool],
        ),
        None => Ok(Vec::new()),
    }
}

/// The one pin `name` (and `id`, a prefix of an identity's id) means. With `pending`, of
/// several, the only one with a change waiting.
fn resolve(
    conn: &Connection,
    name: &str,
    id: Option<&str>,
    pending: bool,
) -> Result<Pin, PinError> {
    let mut found = find(conn, name)?;
    if let Some(id) = id {
        found.retain(|p| p.server_id.starts_with(id));
    }
    if found.len() > 1 && pending && found.iter().filter(|p| p.pending.is_some()).count() == 1 {
        found.retain(|p| p.pending.is_some());
    }
    match found.len() {
        0 => Err(PinError::NotFound(name.to_owned())),
        1 => Ok(found.remove(0)),
        _ => Err(PinError::Ambiguous {
            name: name.to_owned(),
            candidates: found
                .iter()
                .map(|p| format!("{} ({})", ServerIdentity::short(&p.server_id), p.identity))
                .collect(),
        }),
    }
}

fn read_pin(row: &Row<'_>) -> rusqlite::Result<Pin> {
    let pending_hash: Option<String> = row.get(8)?;
    let pending = match pending_hash {
        Some(hash) => Some(Pending {
            hash,
            definition: json_column(row, 9)?,
            seen_at: row.get::<_, Option<i64>>(10)?.unwrap_or_default(),
        }),
        None => None,
    };
    Ok(Pin {
        server_id: row.get(0)?,
        identity: row.get(1)?,
        server: row.get(2)?,
        tool: row.get(3)?,
        exposed_name: row.get(4)?,
        hash: row.get(5)?,
        definition: json_column(row, 6)?,
        pinned_at: row.get(7)?,
        pending,
    })
}

pub(crate) fn json_column(row: &Row<'_>, index: usize) -> rusqlite::Result<Value> {
    let text: String = row.get(index)?;
    serde_json::from_str(&text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(index, Type::Text, Box::new(e)))
}

pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::{Finding, FindingKind, ScanAction};
    use serde_json::json;

    fn tool(description: &str) -> Tool {
        Tool::new("echo", json!({ "type": "object" })).with_description(description)
    }

    #[test]
    fn config_defaults_and_parsing() {
        let config: PinsConfig = toml::from_str("").unwrap();
        assert_eq!(config, PinsConfig::default());
        assert!(config.enabled);
        assert_eq!(config.invisible, ScanAction::Block);
        assert_eq!(config.instructions, ScanAction::Block);
        assert_eq!(config.shadowing, ScanAction::Warn);
        let config: PinsConfig =
            toml::from_str("enabled = false\ninstructions = \"warn\"\nshadowing = \"off\"")
                .unwrap();
        assert!(!config.enabled);
        assert_eq!(config.instructions, ScanAction::Warn);
        assert_eq!(config.shadowing, ScanAction::Off);
        assert!(toml::from_str::<PinsConfig>("invisible = \"maybe\"").is_err());
        assert!(toml::from_str::<PinsConfig>("colour = 1").is_err());
    }

    #[test]
    fn verdict_is_the_strongest_action() {
        let config = PinsConfig::default();
        let finding = |kind| Finding {
            kind,
            detail: String::new(),
        };
        assert_eq!(config.verdict(&[]), ScanAction::Off);
        assert_eq!(
            config.verdict(&[finding(FindingKind::Shadowing)]),
            ScanAction::Warn
        );
        let both = [
            finding(FindingKind::Shadowing),
            finding(FindingKind::HiddenInstructions),
        ];
        assert_eq!(config.verdict(&both), ScanAction::Block);
    }

    #[test]
    fn hash_is_sha256_of_sorted_compact_json() {
        let t = Tool::new("a", json!({ "type": "object" }));
        let canonical = r#"{"inputSchema":{"type":"object"},"name":"a"}"#;
        let expected: String = Sha256::digest(canonical.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(definition_hash(&t), expected);
    }

    #[test]
    fn a_pending_change_that_reverts_is_dropped() {
        let store = PinStore::open_in_memory().unwrap();
        store
            .observe(&ServerIdentity::named("s"), "s", "s__echo", &tool("one"))
            .unwrap();
        assert!(
            store
                .observe(&ServerIdentity::named("s"), "s", "s__echo", &tool("two"))
                .unwrap()
                .is_held()
        );
        assert_eq!(
            store
                .observe(&ServerIdentity::named("s"), "s", "s__echo", &tool("one"))
                .unwrap(),
            PinStatus::Pinned
        );
        assert!(matches!(
            store.approve("s__echo"),
            Err(PinError::NothingPending(_))
        ));
    }

    #[test]
    fn seeing_the_same_change_again_writes_nothing() {
        let store = PinStore::open_in_memory().unwrap();
        store
            .observe(&ServerIdentity::named("s"), "s", "s__echo", &tool("one"))
            .unwrap();
        store
            .observe(&ServerIdentity::named("s"), "s", "s__echo", &tool("two"))
            .unwrap();
        let version = store.version().unwrap();
        assert!(
            store
                .observe(&ServerIdentity::named("s"), "s", "s__echo", &tool("two"))
                .unwrap()
                .is_held()
        );
        assert_eq!(store.version().unwrap(), version);
        store
            .observe(&ServerIdentity::named("s"), "s", "s__echo", &tool("one"))
            .unwrap();
        assert_ne!(store.version().unwrap(), version, "a revert clears pending");
    }
}
