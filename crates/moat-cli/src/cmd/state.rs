//! `moat audit` and `moat pins`: reading and changing the gateway's state from another
//! terminal while it runs (`moat audit verify` and `export` too: they read one snapshot).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use moat_host::Config;
use moat_host::audit::{self, AuditQuery};
use moat_host::pins::PinStore;

use crate::Failure;
use crate::cli::{AuditAction, AuditArgs, PinsAction, PinsArgs};

/// The configuration named, if any (it may move the state directory or the audit file).
fn load_config(path: Option<&Path>) -> Result<Option<Config>, Failure> {
    match path {
        Some(p) => Config::load(p)
            .map(Some)
            .map_err(|e| Failure::Usage(anyhow!(e))),
        None => Ok(None),
    }
}

fn state_dir(config: Option<&Config>) -> Result<PathBuf, Failure> {
    moat_host::state::state_dir(config.and_then(|c| c.state_dir.as_deref()))
        .map_err(|e| Failure::Usage(anyhow!(e)))
}

fn open_store(path: &Path) -> Result<audit::AuditReader, Failure> {
    audit::read_only(path).map_err(|e| {
        Failure::Usage(anyhow!(
            "{e}\n(the gateway writes its audit trail there once it has handled a call; \
             pass --config FILE if its configuration moves it, or --store FILE)"
        ))
    })
}

/// `moat audit verify`: exit 0 when the chain is intact, 3 when it is broken.
fn audit_verify(
    path: &Path,
    dir: &Path,
    keys: &[String],
    from: Option<&Path>,
    json: bool,
) -> Result<(), Failure> {
    let key_file = audit::key::key_path(dir);
    let trusted = if keys.is_empty() {
        match audit::key::public_key(&key_file) {
            Ok(key) => vec![key],
            Err(e) if key_file.exists() => {
                return Err(Failure::Usage(anyhow!(
                    "{e}\n(pass the public key with --key HEX, as `moat audit key` printed it)"
                )));
            }
            Err(_) => Vec::new(),
        }
    } else {
        keys.iter()
            .map(|k| {
                audit::key::parse_public_key(k).ok_or_else(|| {
                    Failure::Usage(anyhow!(
                        "--key {k}: not an Ed25519 public key (64 hex digits)"
                    ))
                })
            })
            .collect::<Result<_, _>>()?
    };
    let (report, path) = match from {
        Some(file) => (verify_file(file, trusted)?, file),
        None => {
            let report = open_store(path)?
                .verify(trusted)
                .map_err(|e| Failure::Usage(anyhow!(e)))?;
            (report, path)
        }
    };
    report_verify(&report, path, json)
}

/// Prints a verification (`path`: the store it is of) and exits 3 when the chain is broken.
fn report_verify(report: &audit::chain::Report, path: &Path, json: bool) -> Result<(), Failure> {
    if json {
        let mut value = serde_json::to_value(report).map_err(|e| Failure::Connection(e.into()))?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("ok".into(), report.ok().into());
            obj.insert("store".into(), path.display().to_string().into());
            if let Some(problem) = &report.problem {
                obj.insert("record".into(), problem.record_id().into());
                obj.insert("message".into(), problem.to_string().into());
            }
        }
        crate::output::print_json(&value);
    } else {
        print_verify(report, path);
    }
    if report.ok() {
        Ok(())
    } else {
        // Already printed; exit 3 tells a broken chain from a store that could not be read (1).
        Err(Failure::ToolError)
    }
}

/// Verifies an export file (JSON Lines from `moat audit export`).
fn verify_file(
    file: &Path,
    trusted: Vec<audit::key::VerifyingKey>,
) -> Result<audit::chain::Report, Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::Usage(anyhow!("--from {}: {e}", file.display())))?;
    let lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str(l).map_err(|e| {
                Failure::Usage(anyhow!(
                    "--from {} line {}: not a line of `moat audit export`: {e}",
                    file.display(),
                    n + 1
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(audit::chain::verify_export(&lines, trusted))
}

fn print_verify(report: &audit::chain::Report, path: &Path) {
    if let Some(problem) = &report.problem {
        println!(
            "{} at record {}: {problem}",
            crate::output::bold("audit trail BROKEN"),
            problem.record_id()
        );
        println!("  store: {}", path.display());
        return;
    }
    match &report.head {
        Some(head) => println!(
            "audit trail intact: {} record(s) chained ({} … {}), head {}",
            report.chained,
            report.first_chained.unwrap_or(head.id),
            head.id,
            crate::output::dim(&head.hash[..16])
        ),
        None => println!("audit trail intact: no chained records yet"),
    }
    if let Some(after) = report.anchored_after {
        println!(
            "  an export starting after record {after}: the records before it were not checked"
        );
    }
    if report.legacy > 0 {
        println!(
            "  {} record(s) before the chain (written by an older moat): a legacy prefix, \
             covered from the first chained record on",
            report.legacy
        );
    }
    match report.signed_through {
        Some(signed) => {
            let after = report.head.as_ref().map_or(0, |h| h.id - signed);
            println!(
                "  {} signed head(s) checked{}, the newest at record {signed}{}",
                report.checkpoints,
                if report.key_trusted {
                    ""
                } else {
                    " against the key each names (no trusted key: pass --key, or run where the gateway's audit.key is)"
                },
                if after > 0 {
                    format!("; {after} record(s) after it not signed yet")
                } else {
                    String::new()
                }
            );
        }
        None => println!(
            "  no signed heads (set `[audit] sign = true` to have the gateway sign the chain)"
        ),
    }
}

/// `moat audit export`: JSON Lines on stdout, a count on stderr.
fn audit_export(path: &Path, after: Option<i64>) -> Result<(), Failure> {
    use std::io::Write as _;
    let reader = open_store(path)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let count = reader
        .export(after, |line| {
            serde_json::to_writer(&mut out, line).map_err(std::io::Error::other)?;
            out.write_all(b"\n")
        })
        .map_err(|e| Failure::Connection(e.into()))?;
    out.flush().map_err(|e| Failure::Connection(e.into()))?;
    eprintln!("exported {count} record(s)");
    Ok(())
}

/// `moat audit key`: the public half of the signing key.
fn audit_key(dir: &Path, json: bool) -> Result<(), Failure> {
    let path = audit::key::key_path(dir);
    if !path.exists() {
        return Err(Failure::Usage(anyhow!(
            "no audit signing key at {} (set `[audit] sign = true` and start the gateway once: \
             it makes the key there)",
            path.display()
        )));
    }
    let key = audit::key::public_key(&path).map_err(|e| Failure::Usage(anyhow!(e)))?;
    let hex = audit::chain::to_hex(key.as_bytes());
    if json {
        crate::output::print_json(&serde_json::json!({
            "public_key": hex,
            "path": path.display().to_string(),
        }));
    } else {
        println!("{hex}");
    }
    Ok(())
}

pub async fn audit(args: AuditArgs) -> Result<(), Failure> {
    let config = load_config(args.config.as_deref())?;
    let mut store = config.as_ref().map(|c| c.store.clone()).unwrap_or_default();
    match &args.store {
        Some(given) if is_store_url(given) => store.url = Some(given.display().to_string()),
        Some(_) => store.url = None,
        None => {}
    }
    if store.url.is_some() {
        return shared_audit(&store, &args).await;
    }
    let dir = state_dir(config.as_ref())?;
    let path = match (&args.store, &config) {
        (Some(store), _) => store.clone(),
        (None, Some(c)) => c.audit.store_path(&dir),
        (None, None) => moat_host::state::audit_path(&dir),
    };
    match &args.action {
        Some(AuditAction::Verify { key, from }) => {
            return audit_verify(&path, &dir, key, from.as_deref(), args.json);
        }
        Some(AuditAction::Export { after }) => return audit_export(&path, *after),
        Some(AuditAction::Key) => return audit_key(&dir, args.json),
        None => {}
    }
    let since_ms = match &args.since {
        Some(text) => {
            let ago = audit::parse_duration(text)
                .map_err(|e| Failure::Usage(anyhow!("--since {text}: {e}")))?;
            Some(audit::ms_ago(ago))
        }
        None => None,
    };
    let reader = open_store(&path)?;
    let query = AuditQuery {
        since_ms,
        tool: args.tool.clone(),
        user: args.user.clone(),
        limit: Some(args.limit),
        ..AuditQuery::default()
    };
    let records = reader
        .query(&query)
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    if args.json {
        let value = serde_json::to_value(&records).map_err(|e| Failure::Connection(e.into()))?;
        crate::output::print_json(&value);
    } else {
        let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        print!("{}", audit::format_table(&records, colour));
        if records.is_empty() {
            eprintln!(
                "no calls recorded{}",
                if args.since.is_some() {
                    " in that time"
                } else {
                    ""
                }
            );
        }
    }
    Ok(())
}

pub async fn pins(args: PinsArgs) -> Result<(), Failure> {
    let config = load_config(args.config.as_deref())?;
    let mut store_config = config.as_ref().map(|c| c.store.clone()).unwrap_or_default();
    if args.store.is_some() {
        store_config.url = args.store.clone();
    }
    if store_config.url.is_some() {
        return shared_pins(&store_config, config.as_ref(), args).await;
    }
    let dir = state_dir(config.as_ref())?;
    let store = PinStore::open(&moat_host::state::pins_path(&dir))
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    let action = args.action.unwrap_or(PinsAction::List);
    crate::cmd::pins::run(&store, config.as_ref(), action, args.json)
}

/// `moat pins` on a shared store: the command works on a copy taken now, and what it
/// changed is sent back only where nobody changed the same pin in between.
async fn shared_pins(
    store: &moat_host::store::StoreConfig,
    config: Option<&Config>,
    args: PinsArgs,
) -> Result<(), Failure> {
    use moat_host::store::{Mirror, Postgres};
    let pg = Postgres::connect(store)
        .await
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    let mirror = Mirror::open(pg)
        .await
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    let action = args.action.unwrap_or(PinsAction::List);
    let outcome = crate::cmd::pins::run(mirror.pins(), config, action, args.json);
    let synced = mirror
        .sync()
        .await
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    if synced.refused > 0 {
        return Err(Failure::Usage(anyhow!(
            moat_host::store::StoreError::Conflict(synced.refused)
        )));
    }
    outcome
}

/// Whether `--store` names a PostgreSQL store rather than a file.
fn is_store_url(given: &Path) -> bool {
    let text = given.to_string_lossy();
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// `moat audit` on a shared store: the records of every gateway on it, one chain.
async fn shared_audit(
    store: &moat_host::store::StoreConfig,
    args: &AuditArgs,
) -> Result<(), Failure> {
    let pg = moat_host::store::Postgres::connect(store)
        .await
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    let shown = PathBuf::from(pg.shown());
    match &args.action {
        Some(AuditAction::Verify { key, from: None }) => {
            let trusted = key
                .iter()
                .map(|k| {
                    audit::key::parse_public_key(k).ok_or_else(|| {
                        Failure::Usage(anyhow!(
                            "--key {k}: not an Ed25519 public key (64 hex digits)"
                        ))
                    })
                })
                .collect::<Result<_, _>>()?;
            let report = audit::shared::verify(&pg, trusted)
                .await
                .map_err(|e| Failure::Usage(anyhow!(e)))?;
            return report_verify(&report, &shown, args.json);
        }
        Some(_) => {
            return Err(Failure::Usage(anyhow!(
                "with a PostgreSQL store, `moat audit` lists and verifies; export, key and \
                 verify --from work on SQLite files"
            )));
        }
        None => {}
    }
    let since_ms = match &args.since {
        Some(text) => {
            let ago = audit::parse_duration(text)
                .map_err(|e| Failure::Usage(anyhow!("--since {text}: {e}")))?;
            Some(audit::ms_ago(ago))
        }
        None => None,
    };
    let query = AuditQuery {
        since_ms,
        tool: args.tool.clone(),
        user: args.user.clone(),
        limit: Some(args.limit),
        ..AuditQuery::default()
    };
    let records = audit::shared::query(&pg, &query)
        .await
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    if args.json {
        let value = serde_json::to_value(&records).map_err(|e| Failure::Connection(e.into()))?;
        crate::output::print_json(&value);
    } else {
        let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        print!("{}", audit::format_table(&records, colour));
        if records.is_empty() {
            eprintln!("no calls recorded");
        }
    }
    Ok(())
}
