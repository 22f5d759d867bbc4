//! `moat pins`: the held servers and pinned tools of the gateway's state, and their
//! approval from another terminal while the gateway runs.
//!
//! Tools are pinned by their server's identity (its launch), so one display name
//! (`server__tool`) may stand for the tools of several servers that different
//! configurations gave the same name: the listing shows each one's identity, and approval
//! takes the one with a change waiting, or `--id` (or `--config`) to choose.

use anyhow::anyhow;
use moat_host::Config;
use moat_host::launch_pins::{self, ServerPin};
use moat_host::pins::{Pin, PinStore, ServerIdentity};

use crate::Failure;
use crate::cli::PinsAction;

fn usage(e: impl std::fmt::Display) -> Failure {
    Failure::Usage(anyhow!("{e}"))
}

/// Runs one `moat pins` action against `store`; `config`, when given, narrows names to
/// its servers.
pub fn run(
    store: &PinStore,
    config: Option<&Config>,
    action: PinsAction,
    json: bool,
) -> Result<(), Failure> {
    match action {
        PinsAction::List => list(store, json),
        PinsAction::Approve { name, id } => match name.strip_prefix("server:") {
            Some(server) => approve_server(store, config, server, id.as_deref(), json),
            None => approve_tool(store, config, &name, id.as_deref(), json),
        },
        PinsAction::Reset { name, id } => {
            let n = match name.as_deref().map(|n| (n, n.strip_prefix("server:"))) {
                Some((_, Some(server))) => {
                    let origin = match id.as_deref() {
                        Some(file) => Some(server_origin(store, server, Some(file), config)?),
                        None => config.and_then(|c| config_origin(c, server)),
                    };
                    store
                        .reset_launch(origin.as_deref(), server)
                        .map_err(usage)?
                }
                Some((tool, None)) => {
                    let id = id.or_else(|| config.and_then(|c| config_identity(c, tool)));
                    store.reset_in(Some(tool), id.as_deref()).map_err(usage)?
                }
                None => store.reset(None).map_err(usage)?,
            };
            println!("forgot {n} pin(s); they are pinned again when the gateway next sees them");
            Ok(())
        }
    }
}

fn list(store: &PinStore, json: bool) -> Result<(), Failure> {
    let pins = store.list().map_err(usage)?;
    let launches = store.launches().map_err(usage)?;
    let held: Vec<&ServerPin> = launches.iter().filter(|p| p.is_held()).collect();
    if json {
        let value = serde_json::json!({ "tools": pins, "servers": launches });
        crate::output::print_json(&value);
        return Ok(());
    }
    for pin in &held {
        println!(
            "{}  HELD — not started until `moat pins approve server:{}`",
            crate::output::bold(&format!("server:{}", pin.server)),
            pin.server
        );
        if !pin.origin.is_empty() {
            println!("  configured in {}", pin.origin);
        }
        println!("{}", pin.pending_diff().unwrap_or_default());
    }
    if pins.is_empty() {
        eprintln!("no tools pinned yet (the gateway pins each tool when it first sees it)");
    }
    let is_shared = |pin: &Pin| {
        pins.iter()
            .any(|p| p.exposed_name == pin.exposed_name && p.server_id != pin.server_id)
    };
    for pin in &pins {
        let shared = is_shared(pin);
        // Several servers show this name: say whose pin this is, and how to choose it.
        let whose = if shared {
            format!(
                "  [{} {}]",
                ServerIdentity::short(&pin.server_id),
                pin.identity
            )
        } else {
            String::new()
        };
        let id_flag = if shared {
            format!(" --id {}", ServerIdentity::short(&pin.server_id))
        } else {
            String::new()
        };
        match pin.pending_diff() {
            Some(diff) => {
                println!(
                    "{}  CHANGED — held back until `moat pins approve {}{id_flag}`{whose}",
                    crate::output::bold(&pin.exposed_name),
                    pin.exposed_name
                );
                println!("{diff}");
            }
            None => println!(
                "{}  {}{whose}",
                pin.exposed_name,
                crate::output::dim(&pin.hash[..pin.hash.len().min(12)])
            ),
        }
    }
    Ok(())
}

/// The identity of the server of `config` whose tools `name` names, if one does.
fn config_identity(config: &Config, name: &str) -> Option<String> {
    let server = match name.split_once('/') {
        Some((server, _)) => config.server(server)?,
        None => config
            .servers
            .iter()
            .filter(|s| name.starts_with(&s.exposed_prefix()))
            .max_by_key(|s| s.exposed_prefix().len())?,
    };
    Some(ServerIdentity::of(server).id)
}

/// The file `config` configures the server `name` in (the key of its launch pin).
fn config_origin(config: &Config, name: &str) -> Option<String> {
    let server = config.server(name)?;
    Some(launch_pins::origin(config.path.as_deref(), server))
}

fn approve_tool(
    store: &PinStore,
    config: Option<&Config>,
    name: &str,
    id: Option<&str>,
    json: bool,
) -> Result<(), Failure> {
    let id = id
        .map(str::to_owned)
        .or_else(|| config.and_then(|c| config_identity(c, name)));
    let pin = store
        .get_in(name, id.as_deref())
        .map_err(|e| usage(format!("{e}\n(`moat pins` lists them with their ids)")))?
        .ok_or_else(|| {
            usage(format!(
                "no tool {name} is pinned (`moat pins` lists them; names are server__tool, \
                 held servers server:NAME)"
            ))
        })?;
    let Some(pending) = &pin.pending else {
        return Err(usage(format!(
            "{} has no changed definition waiting: nothing to approve",
            pin.exposed_name
        )));
    };
    if !json {
        // What the person approves is exactly what they were shown: approve_hash refuses
        // if the server changed the definition again meanwhile.
        println!("{}", pin.pending_diff().unwrap_or_default());
    }
    let approved = store
        .approve_hash_in(name, Some(&pin.server_id), &pending.hash)
        .map_err(|e| {
            usage(format!(
                "{e}\n(`moat pins` lists the tools waiting for approval)"
            ))
        })?;
    if json {
        let value =
            serde_json::to_value(&approved.pin).map_err(|e| Failure::Connection(e.into()))?;
        crate::output::print_json(&value);
    } else {
        println!(
            "approved {}: a running gateway lists it again within a second",
            approved.pin.exposed_name
        );
    }
    Ok(())
}

/// The one file whose server `name` `file` (or `config`) means, among those pinned.
fn server_origin(
    store: &PinStore,
    name: &str,
    file: Option<&str>,
    config: Option<&Config>,
) -> Result<String, Failure> {
    let launches = store.launches().map_err(usage)?;
    let mut found: Vec<&ServerPin> = launches.iter().filter(|p| p.server == name).collect();
    if let Some(file) = file {
        let given = std::fs::canonicalize(file)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| file.to_owned());
        found.retain(|p| p.origin == given || p.origin.ends_with(file));
    } else if let Some(origin) = config.and_then(|c| config_origin(c, name)) {
        found.retain(|p| p.origin == origin);
    }
    if found.len() > 1 {
        found.retain(|p| p.pending.is_some());
    }
    match found.as_slice() {
        [one] => Ok(one.origin.clone()),
        [] => Err(usage(format!(
            "no server {name} waits for approval (`moat pins` lists the held servers)"
        ))),
        many => Err(usage(format!(
            "several configurations hold a server {name}: {}; choose one with --id FILE",
            many.iter()
                .map(|p| p.origin.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn approve_server(
    store: &PinStore,
    config: Option<&Config>,
    name: &str,
    file: Option<&str>,
    json: bool,
) -> Result<(), Failure> {
    let origin = server_origin(store, name, file, config)?;
    let pin = store
        .launches()
        .map_err(usage)?
        .into_iter()
        .find(|p| p.server == name && p.origin == origin)
        .ok_or_else(|| usage(format!("no server {name} is pinned")))?;
    let Some(pending) = &pin.pending else {
        return Err(usage(format!(
            "server {name} has no changed launch waiting: nothing to approve"
        )));
    };
    if !json {
        println!("{}", pin.pending_diff().unwrap_or_default());
    }
    let approved = store
        .approve_launch(&origin, name, &pending.hash)
        .map_err(|e| usage(format!("{e}\n(`moat pins` lists the held servers)")))?;
    if json {
        let value = serde_json::to_value(&approved).map_err(|e| Failure::Connection(e.into()))?;
        crate::output::print_json(&value);
    } else {
        println!("approved server:{name}: a running gateway starts it within a second");
    }
    Ok(())
}
