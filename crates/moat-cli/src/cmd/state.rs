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
    let action = args.action.unwrap_or(PinsAction::List);
    crate::cmd::pins::run(&store, config.as_ref(), action, args.json)
}
