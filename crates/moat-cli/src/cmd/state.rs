//! `moat audit` and `moat pins`: reading and changing the gateway's state from another
//! terminal while it runs.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use moat_host::Config;
use moat_host::audit::{self, AuditQuery};
use moat_host::pins::PinStore;

use crate::Failure;
use crate::cli::{AuditArgs, PinsAction, PinsArgs};

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

pub fn audit(args: AuditArgs) -> Result<(), Failure> {
    let config = load_config(args.config.as_deref())?;
    let dir = state_dir(config.as_ref())?;
    let path = match &config {
        Some(c) => c.audit.store_path(&dir),
        None => moat_host::state::audit_path(&dir),
    };
    let since_ms = match &args.since {
        Some(text) => {
            let ago = audit::parse_duration(text)
                .map_err(|e| Failure::Usage(anyhow!("--since {text}: {e}")))?;
            Some(audit::ms_ago(ago))
        }
        None => None,
    };
    let reader = audit::read_only(&path).map_err(|e| {
        Failure::Usage(anyhow!(
            "{e}\n(the gateway writes its audit trail there once it has handled a call; \
             pass --config FILE if its configuration moves it)"
        ))
    })?;
    let query = AuditQuery {
        since_ms,
        tool: args.tool.clone(),
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

pub fn pins(args: PinsArgs) -> Result<(), Failure> {
    let config = load_config(args.config.as_deref())?;
    let dir = state_dir(config.as_ref())?;
    let store = PinStore::open(&moat_host::state::pins_path(&dir))
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    match args.action.unwrap_or(PinsAction::List) {
        PinsAction::List => {
            let pins = store.list().map_err(|e| Failure::Usage(anyhow!(e)))?;
            if args.json {
                let value =
                    serde_json::to_value(&pins).map_err(|e| Failure::Connection(e.into()))?;
                crate::output::print_json(&value);
                return Ok(());
            }
            if pins.is_empty() {
                eprintln!("no tools pinned yet (the gateway pins each tool when it first sees it)");
            }
            for pin in &pins {
                match pin.pending_diff() {
                    Some(diff) => {
                        println!(
                            "{}  CHANGED — held back until `moat pins approve {}`",
                            crate::output::bold(&pin.exposed_name),
                            pin.exposed_name
                        );
                        println!("{diff}");
                    }
                    None => println!(
                        "{}  {}",
                        pin.exposed_name,
                        crate::output::dim(&pin.hash[..pin.hash.len().min(12)])
                    ),
                }
            }
            Ok(())
        }
        PinsAction::Approve { name } => {
            let pin = store
                .get(&name)
                .map_err(|e| Failure::Usage(anyhow!(e)))?
                .ok_or_else(|| {
                    Failure::Usage(anyhow!(
                        "no tool {name} is pinned (`moat pins` lists them; names are server__tool)"
                    ))
                })?;
            let Some(pending) = &pin.pending else {
                return Err(Failure::Usage(anyhow!(
                    "{} has no changed definition waiting: nothing to approve",
                    pin.exposed_name
                )));
            };
            if !args.json {
                // What the person approves is exactly what they were shown: approve_hash
                // refuses if the server changed the definition again meanwhile.
                println!("{}", pin.pending_diff().unwrap_or_default());
            }
            let approved = store.approve_hash(&name, &pending.hash).map_err(|e| {
                Failure::Usage(anyhow!(
                    "{e}\n(`moat pins` lists the tools waiting for approval)"
                ))
            })?;
            if args.json {
                let value = serde_json::to_value(&approved.pin)
                    .map_err(|e| Failure::Connection(e.into()))?;
                crate::output::print_json(&value);
            } else {
                println!(
                    "approved {}: a running gateway lists it again within a second",
                    approved.pin.exposed_name
                );
            }
            Ok(())
        }
        PinsAction::Reset { name } => {
            let n = store
                .reset(name.as_deref())
                .map_err(|e| Failure::Usage(anyhow!(e)))?;
            println!("forgot {n} pin(s); they are pinned again when the gateway next sees them");
            Ok(())
        }
    }
}
