//! Launch pins: what the gateway runs for each server, pinned the first time it starts it,
//! and a changed launch from a file someone else may write held until a person approves it.
//!
//! Tool definitions are pinned ([`crate::pins`]); the commands that produce them must be
//! too. A project's `.vscode/mcp.json` or `.cursor/mcp.json` changes with a `git pull`, and
//! a hot reload would run the new command at once (the "MCPoison" swap). So before it
//! starts a server the gateway compares its launch spec ([`launch_spec`]: command, args,
//! environment names with digests of the values, working directory, sandbox profile; or
//! URL, header names and transport) with the pin of that server, keyed by the file the
//! server is configured in and its name ([`origin`]):
//!
//! - no pin: trust on first use when the gateway starts, or when the file is new to the
//!   configuration (the user just imported it); a server *added* to a file the gateway
//!   already runs from is held, as a change is;
//! - the pinned spec: it starts;
//! - another spec: held ([`LaunchStatus::Held`]), not started, until `moat pins approve
//!   server:NAME` (from another process: the gateway notices through
//!   [`crate::pins::PinStore::version`]). Reverting the file to the approved spec releases it.
//!
//! Which servers are held depends on `[pins] servers` ([`ServerPins`]): by default only
//! servers read from a client's JSON (`imported_from`), and only when what that file says
//! changed: a spec that differs only in its sandbox (a `[servers.NAME]` adjustment in the
//! user's own moat.toml, or a newer moat's defaults) is pinned anew and started, as are
//! edits of moat.toml's own servers. `"all"` holds every change of every server; `"off"`
//! neither pins nor holds.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

pub use crate::config::pins::ServerPins;
use crate::config::{SandboxSetting, ServerConfig, ServerTransport};
use crate::pins::{PinError, PinStore, bump, diff, hash_value, json_column, unix_now};

/// The launch spec of a server, as pinned: what decides what runs. Secrets stay out: an
/// environment value is a digest, a header only its name.
pub fn launch_spec(cfg: &ServerConfig) -> Value {
    match &cfg.transport {
        ServerTransport::Command {
            command,
            args,
            env,
            cwd,
        } => {
            let env: Map<String, Value> = env
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(value_digest(v))))
                .collect();
            let sandbox = match &cfg.sandbox {
                SandboxSetting::Profile(profile) => {
                    serde_json::to_value(profile).unwrap_or(Value::Null)
                }
                _ => Value::String("off".into()),
            };
            json!({
                "command": command,
                "args": args,
                "env": env,
                "cwd": cwd,
                "sandbox": sandbox,
            })
        }
        ServerTransport::Url {
            url,
            headers,
            transport,
        } => json!({
            "url": url,
            "headers": headers.keys().collect::<Vec<_>>(),
            "transport": format!("{transport:?}").to_lowercase(),
        }),
        #[allow(unreachable_patterns)]
        _ => json!({ "name": cfg.name }),
    }
}

/// The digest of what an imported file alone decides: the spec without its sandbox (which
/// moat derives, and moat.toml may adjust).
fn source_of(spec: &Value) -> String {
    let mut spec = spec.clone();
    if let Value::Object(map) = &mut spec {
        map.remove("sandbox");
    }
    hash_value(&spec)
}

fn value_digest(value: &str) -> String {
    let digest = Sha256::digest(value.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The file a server's launch comes from (the key of its pin, with its name): the client's
/// JSON it was imported from, else the configuration file; absolute when it exists.
pub fn origin(config_path: Option<&Path>, cfg: &ServerConfig) -> String {
    match cfg.imported_from.as_deref().or(config_path) {
        Some(path) => std::fs::canonicalize(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string(),
        None => String::new(),
    }
}

/// The files a configuration reads servers from (itself and its imports), as [`origin`]
/// names them.
pub fn files(config: &crate::config::Config) -> Vec<String> {
    config
        .path
        .iter()
        .chain(&config.imports)
        .map(|path| {
            std::fs::canonicalize(path)
                .unwrap_or_else(|_| path.clone())
                .display()
                .to_string()
        })
        .collect()
}

/// Whether a server's launch is held when it changes.
fn guarded(mode: ServerPins, cfg: &ServerConfig) -> bool {
    match mode {
        ServerPins::All => true,
        ServerPins::Imports => cfg.imported_from.is_some(),
        _ => false,
    }
}

/// The pinned launch of one server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerPin {
    /// The file it is configured in ([`origin`]).
    pub origin: String,
    /// Its name there.
    pub server: String,
    /// The approved spec's hash; `None` for a server added while the gateway ran and never
    /// approved.
    pub hash: Option<String>,
    /// The approved spec.
    pub spec: Option<Value>,
    /// When it was pinned or approved (Unix seconds).
    pub pinned_at: Option<i64>,
    /// A changed (or added) launch waiting for approval: the server is held.
    pub pending: Option<PendingLaunch>,
    #[serde(skip)]
    source: Option<String>,
}

/// A launch waiting for approval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingLaunch {
    /// The hash of `spec`.
    pub hash: String,
    /// The spec that would run.
    pub spec: Value,
    /// When it was first seen (Unix seconds).
    pub seen_at: i64,
    #[serde(skip)]
    source: String,
}

impl ServerPin {
    /// Whether the server is held: a launch is waiting, or none was ever approved.
    pub fn is_held(&self) -> bool {
        self.pending.is_some() || self.hash.is_none()
    }

    /// The unified diff from the approved spec (nothing, for an added server) to the
    /// pending one.
    pub fn pending_diff(&self) -> Option<String> {
        let pending = self.pending.as_ref()?;
        let before = self.spec.clone().unwrap_or_else(|| json!({}));
        Some(diff(&before, &pending.spec))
    }

    /// Why the server is held and what to run, for the client and the terminal.
    pub fn held_reason(&self) -> String {
        let what = if self.hash.is_none() {
            "was added"
        } else {
            "changed since it was approved"
        };
        let from = if self.origin.is_empty() {
            String::new()
        } else {
            format!(" in {}", self.origin)
        };
        format!(
            "its launch (command, arguments, environment or sandbox){from} {what}, so moat does \
             not start it until a person approves it: `moat pins approve server:{}` (`moat pins` \
             shows the difference)",
            self.server
        )
    }
}

/// What [`PinStore::check_launch`] decided.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
// A verdict, returned and dropped: boxing the pin would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum LaunchStatus {
    /// First sight: pinned now, start it.
    New,
    /// The pinned launch: start it.
    Pinned,
    /// Changed where the user's own settings decide: pinned anew, start it.
    Repinned,
    /// Do not start it until approved.
    Held {
        /// The pin, with the launch waiting.
        pin: ServerPin,
    },
}

const COLUMNS: &str = "origin, server, hash, spec, source, pinned_at, pending_hash, \
                       pending_spec, pending_source, pending_seen_at";

impl PinStore {
    /// Checks the launch of `cfg` (configured in `config_path`) before it starts, pinning it
    /// or holding it (see the module docs). `trust_new`: a server without a pin is pinned
    /// and started (the gateway's start, a file new to the configuration) rather than held.
    pub fn check_launch(
        &self,
        config_path: Option<&Path>,
        cfg: &ServerConfig,
        mode: ServerPins,
        trust_new: bool,
    ) -> Result<LaunchStatus, PinError> {
        let origin = origin(config_path, cfg);
        let spec = launch_spec(cfg);
        let hash = hash_value(&spec);
        let source = source_of(&spec);
        let guarded = guarded(mode, cfg);
        let now = unix_now();
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found = select(&tx, &origin, &cfg.name)?;
        let pin_now = |tx: &Connection| -> Result<(), PinError> {
            tx.execute(
                "INSERT INTO server_pins (origin, server, hash, spec, source, pinned_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (origin, server) DO UPDATE SET \
                 hash = ?3, spec = ?4, source = ?5, pinned_at = ?6, pending_hash = NULL, \
                 pending_spec = NULL, pending_source = NULL, pending_seen_at = NULL",
                params![origin, cfg.name, hash, spec.to_string(), source, now],
            )?;
            Ok(())
        };
        let status = match found {
            None if !guarded || trust_new => {
                pin_now(&tx)?;
                LaunchStatus::New
            }
            Some(pin) if pin.hash.as_deref() == Some(hash.as_str()) => {
                if pin.pending.is_some() || pin.source.as_deref() != Some(source.as_str()) {
                    // Back to the approved launch: a stale pending one must not be approvable.
                    tx.execute(
                        "UPDATE server_pins SET source = ?3, pending_hash = NULL, \
                         pending_spec = NULL, pending_source = NULL, pending_seen_at = NULL \
                         WHERE origin = ?1 AND server = ?2",
                        params![origin, cfg.name, source],
                    )?;
                } else {
                    tx.commit()?;
                    return Ok(LaunchStatus::Pinned);
                }
                LaunchStatus::Pinned
            }
            Some(pin)
                if !guarded
                    || (mode == ServerPins::Imports
                        && pin.hash.is_some()
                        && pin.source.as_deref() == Some(source.as_str())) =>
            {
                pin_now(&tx)?;
                LaunchStatus::Repinned
            }
            found => {
                let mut pin = found.unwrap_or_else(|| ServerPin {
                    origin: origin.clone(),
                    server: cfg.name.clone(),
                    hash: None,
                    spec: None,
                    pinned_at: None,
                    pending: None,
                    source: None,
                });
                let known = pin.pending.as_ref().is_some_and(|p| p.hash == hash);
                if known {
                    tx.commit()?;
                    return Ok(LaunchStatus::Held { pin });
                }
                let pending = PendingLaunch {
                    hash,
                    spec,
                    seen_at: now,
                    source,
                };
                tx.execute(
                    "INSERT INTO server_pins (origin, server, pending_hash, pending_spec, \
                     pending_source, pending_seen_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                     ON CONFLICT (origin, server) DO UPDATE SET pending_hash = ?3, \
                     pending_spec = ?4, pending_source = ?5, pending_seen_at = ?6",
                    params![
                        origin,
                        cfg.name,
                        pending.hash,
                        pending.spec.to_string(),
                        pending.source,
                        pending.seen_at
                    ],
                )?;
                pin.pending = Some(pending);
                LaunchStatus::Held { pin }
            }
        };
        bump(&tx)?;
        tx.commit()?;
        Ok(status)
    }

    /// Every launch pin, by name and file.
    pub fn launches(&self) -> Result<Vec<ServerPin>, PinError> {
        let conn = self.lock();
        let mut statement = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM server_pins ORDER BY server, origin"
        ))?;
        let pins = statement
            .query_map([], read)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(pins)
    }

    /// Approves the launch waiting for the server `server` of `origin`, provided it is still
    /// the one hashed `pending_hash` (the one shown). Returns the pin as approved.
    pub fn approve_launch(
        &self,
        origin: &str,
        server: &str,
        pending_hash: &str,
    ) -> Result<ServerPin, PinError> {
        let shown = format!("server:{server}");
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let Some(mut pin) = select(&tx, origin, server)? else {
            return Err(PinError::NotFound(shown));
        };
        let Some(pending) = pin.pending.take() else {
            return Err(PinError::NothingPending(shown));
        };
        if pending.hash != pending_hash {
            return Err(PinError::PendingChanged {
                name: shown,
                found: pending.hash,
            });
        }
        let now = unix_now();
        tx.execute(
            "UPDATE server_pins SET hash = pending_hash, spec = pending_spec, \
             source = pending_source, pinned_at = ?3, pending_hash = NULL, pending_spec = NULL, \
             pending_source = NULL, pending_seen_at = NULL WHERE origin = ?1 AND server = ?2",
            params![origin, server, now],
        )?;
        bump(&tx)?;
        tx.commit()?;
        pin.hash = Some(pending.hash);
        pin.spec = Some(pending.spec);
        pin.source = Some(pending.source);
        pin.pinned_at = Some(now);
        Ok(pin)
    }

    /// Forgets the launch pin of `server` in `origin` (every file when `None`); it is pinned
    /// afresh the next time the gateway starts. Returns how many were removed.
    pub fn reset_launch(&self, origin: Option<&str>, server: &str) -> Result<usize, PinError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let removed = match origin {
            Some(origin) => tx.execute(
                "DELETE FROM server_pins WHERE origin = ?1 AND server = ?2",
                params![origin, server],
            )?,
            None => tx.execute("DELETE FROM server_pins WHERE server = ?1", [server])?,
        };
        if removed > 0 {
            bump(&tx)?;
        }
        tx.commit()?;
        Ok(removed)
    }
}

fn select(conn: &Connection, origin: &str, server: &str) -> Result<Option<ServerPin>, PinError> {
    let sql = format!("SELECT {COLUMNS} FROM server_pins WHERE origin = ?1 AND server = ?2");
    Ok(conn
        .query_row(&sql, params![origin, server], read)
        .optional()?)
}

fn read(row: &Row<'_>) -> rusqlite::Result<ServerPin> {
    let spec = match row.get::<_, Option<String>>(3)? {
        Some(_) => Some(json_column(row, 3)?),
        None => None,
    };
    let pending = match row.get::<_, Option<String>>(6)? {
        Some(hash) => Some(PendingLaunch {
            hash,
            spec: json_column(row, 7)?,
            source: row.get::<_, Option<String>>(8)?.unwrap_or_default(),
            seen_at: row.get::<_, Option<i64>>(9)?.unwrap_or_default(),
        }),
        None => None,
    };
    Ok(ServerPin {
        origin: row.get(0)?,
        server: row.get(1)?,
        hash: row.get(2)?,
        spec,
        source: row.get(4)?,
        pinned_at: row.get(5)?,
        pending,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn imported(command: &str) -> ServerConfig {
        let mut cfg = ServerConfig::command("shell", command, vec!["serve".into()]);
        cfg.imported_from = Some(PathBuf::from("/nonexistent/ws/.vscode/mcp.json"));
        cfg
    }

    #[test]
    fn spec_keeps_secrets_out() {
        let mut cfg = ServerConfig::url("api", "https://example.com/mcp?key=secret");
        if let ServerTransport::Url { headers, .. } = &mut cfg.transport {
            headers.insert("Authorization".into(), "Bearer hunter2".into());
        }
        let text = launch_spec(&cfg).to_string();
        assert!(
            text.contains("Authorization") && !text.contains("hunter2"),
            "{text}"
        );
        let mut cfg = ServerConfig::command("s", "srv", vec![]);
        if let ServerTransport::Command { env, .. } = &mut cfg.transport {
            env.insert("TOKEN".into(), "hunter2".into());
        }
        let text = launch_spec(&cfg).to_string();
        assert!(
            text.contains("TOKEN") && !text.contains("hunter2"),
            "{text}"
        );
    }

    #[test]
    fn an_import_is_trusted_first_then_a_change_is_held_until_approved() {
        let store = PinStore::open_in_memory().unwrap();
        let mode = ServerPins::Imports;
        let first = imported("good");
        assert_eq!(
            store.check_launch(None, &first, mode, true).unwrap(),
            LaunchStatus::New
        );
        assert_eq!(
            store.check_launch(None, &first, mode, false).unwrap(),
            LaunchStatus::Pinned
        );
        let swapped = imported("evil");
        let LaunchStatus::Held { pin } = store.check_launch(None, &swapped, mode, true).unwrap()
        else {
            panic!("a changed import runs")
        };
        let diff = pin.pending_diff().unwrap();
        assert!(diff.contains("-  \"command\": \"good\""), "{diff}");
        assert!(diff.contains("+  \"command\": \"evil\""), "{diff}");
        // Reverting releases it; changing it again holds it again.
        assert_eq!(
            store.check_launch(None, &first, mode, false).unwrap(),
            LaunchStatus::Pinned
        );
        let LaunchStatus::Held { pin } = store.check_launch(None, &swapped, mode, false).unwrap()
        else {
            panic!("held")
        };
        let pending = pin.pending.unwrap();
        assert!(matches!(
            store.approve_launch(&pin.origin, "shell", "0000"),
            Err(PinError::PendingChanged { .. })
        ));
        store
            .approve_launch(&pin.origin, "shell", &pending.hash)
            .unwrap();
        assert_eq!(
            store.check_launch(None, &swapped, mode, false).unwrap(),
            LaunchStatus::Pinned
        );
    }

    #[test]
    fn added_while_running_is_held_and_sandbox_only_changes_are_not() {
        let store = PinStore::open_in_memory().unwrap();
        let cfg = imported("srv");
        let LaunchStatus::Held { pin } = store
            .check_launch(None, &cfg, ServerPins::Imports, false)
            .unwrap()
        else {
            panic!("an added import runs")
        };
        assert!(pin.hash.is_none() && pin.is_held());
        // A restart does not launder it.
        assert!(matches!(
            store
                .check_launch(None, &cfg, ServerPins::Imports, true)
                .unwrap(),
            LaunchStatus::Held { .. }
        ));
        let hash = pin.pending.unwrap().hash;
        store.approve_launch(&pin.origin, "shell", &hash).unwrap();
        // moat.toml turns its sandbox off: the import did not change, it starts.
        let mut adjusted = cfg.clone();
        adjusted.sandbox = SandboxSetting::Off;
        assert_eq!(
            store
                .check_launch(None, &adjusted, ServerPins::Imports, false)
                .unwrap(),
            LaunchStatus::Repinned
        );
        // With "all", the same is held; moat.toml's own servers too.
        assert!(matches!(
            store
                .check_launch(None, &cfg, ServerPins::All, false)
                .unwrap(),
            LaunchStatus::Held { .. }
        ));
        let own = ServerConfig::command("own", "a", vec![]);
        let path = Path::new("/nonexistent/moat.toml");
        store
            .check_launch(Some(path), &own, ServerPins::Imports, true)
            .unwrap();
        let own_changed = ServerConfig::command("own", "b", vec![]);
        assert_eq!(
            store
                .check_launch(Some(path), &own_changed, ServerPins::Imports, false)
                .unwrap(),
            LaunchStatus::Repinned
        );
        assert!(matches!(
            store
                .check_launch(Some(path), &own, ServerPins::All, false)
                .unwrap(),
            LaunchStatus::Held { .. }
        ));
    }

    #[test]
    fn config_key() {
        let config: crate::pins::PinsConfig = toml::from_str("servers = \"all\"").unwrap();
        assert_eq!(config.servers, ServerPins::All);
        let config: crate::pins::PinsConfig = toml::from_str("").unwrap();
        assert_eq!(config.servers, ServerPins::Imports);
        assert!(toml::from_str::<crate::pins::PinsConfig>("servers = \"some\"").is_err());
    }
}
