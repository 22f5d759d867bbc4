//! What the console's pages show, read from the gateway's state as JSON: servers, tools,
//! held pins, and the audit trail with its filters.

use serde_json::{Value, json};

use crate::audit::AuditQuery;
use crate::inner::Inner;
use crate::policy::ToolRef;

/// The most audit records one search returns.
const MAX_RECORDS: usize = 1000;

/// Every configured server: its state, protocol revision, restarts, and last stderr lines.
pub(crate) fn servers(inner: &Inner) -> Value {
    let settings = inner.settings();
    let held = inner.held_reasons();
    let list: Vec<Value> = settings
        .config
        .servers
        .iter()
        .map(|cfg| {
            let name = cfg.name.as_str();
            let live = inner.live_client(name);
            let held_why = held.iter().find(|(n, _)| n == name).map(|(_, why)| why);
            let down_why = inner.down_reason(name);
            let (state, why) = if !cfg.enabled {
                ("disabled", None)
            } else if let Some(why) = held_why {
                ("held", Some(why.clone()))
            } else if live.is_some() {
                ("up", None)
            } else if let Some(why) = down_why {
                ("down", Some(why))
            } else {
                ("starting", None)
            };
            let stderr: Vec<String> = live
                .as_ref()
                .and_then(|c| c.child())
                .map(|child| child.stderr_tail())
                .unwrap_or_default();
            json!({
                "name": name,
                "state": state,
                "why": why,
                "revision": live.as_ref().and_then(|c| c.protocol_version()).map(|v| v.to_string()),
                "server": live.as_ref().map(|c| {
                    let info = c.server_info();
                    format!("{} {}", info.name, info.version)
                }),
                "restarts": inner.restarts(name),
                "stderr": stderr,
            })
        })
        .collect();
    json!(list)
}

/// Every tool a server offers: listed or held, its policy decision (for a call with no
/// arguments from nobody in particular) and its containment labels.
pub(crate) fn tools(inner: &Inner) -> Value {
    let settings = inner.settings();
    let catalog = inner.catalog();
    let mut list: Vec<Value> = catalog
        .tools
        .iter()
        .map(|(exposed, entry)| {
            let tool_ref = ToolRef {
                server: &entry.server,
                tool: &entry.tool.name,
                annotations: entry.tool.annotations.as_ref(),
            };
            let verdict = settings.policy.evaluate(&tool_ref, None);
            json!({
                "name": exposed,
                "server": entry.server,
                "listed": catalog.registered.contains_key(exposed),
                "decision": verdict.decision.as_str(),
                "rule": verdict.rule,
                "labels": {
                    "untrusted_source": entry.labels.untrusted_source,
                    "private_data": entry.labels.private_data,
                    "sink": entry.labels.sink,
                },
                "description": entry.tool.description,
            })
        })
        .collect();
    list.extend(catalog.held.iter().map(|(exposed, held)| {
        json!({
            "name": exposed,
            "server": held.server,
            "listed": false,
            "held": held.reason,
        })
    }));
    list.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    json!(list)
}

/// The tool pins whose changed definition waits for approval, with the diff; and the
/// servers whose launch does.
pub(crate) fn pins(inner: &Inner) -> Result<Value, String> {
    let pins = inner.pins().list().map_err(|e| e.to_string())?;
    let tools: Vec<Value> = pins
        .iter()
        .filter_map(|pin| {
            let pending = pin.pending.as_ref()?;
            Some(json!({
                "name": pin.exposed_name,
                "server": pin.server,
                "server_id": pin.server_id,
                "identity": pin.identity,
                "hash": pending.hash,
                "seen_at": pending.seen_at,
                "diff": pin.pending_diff(),
            }))
        })
        .collect();
    let servers: Vec<Value> = inner
        .held_reasons()
        .into_iter()
        .map(|(name, why)| json!({"name": name, "why": why}))
        .collect();
    Ok(json!({"tools": tools, "servers": servers}))
}

/// The audit records that match the filters, newest first. Filters: `since_ms`,
/// `until_ms` (unix milliseconds), `server`, `tool` (a glob, as `moat audit --tool`),
/// `user`, `decision`, `outcome`, `limit`.
pub(crate) fn audit(inner: &Inner, query: &[(String, String)]) -> Result<Value, String> {
    let Some(log) = inner.audit() else {
        return Ok(json!({"records": [], "off": true}));
    };
    let get = |key: &str| {
        query
            .iter()
            .find(|(k, v)| k == key && !v.trim().is_empty())
            .map(|(_, v)| v.trim().to_owned())
    };
    let number = |key: &str| -> Result<Option<i64>, String> {
        get(key)
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| format!("{key}: not a number: {v:?}"))
            })
            .transpose()
    };
    let limit = number("limit")?
        .and_then(|l| usize::try_from(l).ok())
        .unwrap_or(200)
        .min(MAX_RECORDS);
    let until = number("until_ms")?;
    let decision = get("decision");
    let outcome = get("outcome");
    let filtered_here = until.is_some() || decision.is_some() || outcome.is_some();
    let q = AuditQuery {
        since_ms: number("since_ms")?,
        tool: get("tool"),
        server: get("server"),
        user: get("user"),
        // Filters the store does not know are applied here, on a wider window.
        limit: Some(if filtered_here {
            MAX_RECORDS * 10
        } else {
            limit
        }),
    };
    let records = log.query(&q).map_err(|e| e.to_string())?;
    let mut kept: Vec<Value> = records
        .into_iter()
        .rev()
        .filter(|r| until.is_none_or(|u| r.time_ms <= u))
        .filter(|r| decision.as_deref().is_none_or(|d| r.decision == d))
        .filter(|r| outcome.as_deref().is_none_or(|o| r.outcome == o))
        .take(limit)
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect();
    kept.shrink_to_fit();
    Ok(json!({"records": kept}))
}
