//! Sessions this replica does not hold: finding their owner in the directory, and taking a
//! session over when its owner is gone (see [`super::directory`]).

use std::sync::Arc;
use std::time::Duration;

use moat_protocol::RequestId;

use super::Shared;
use super::directory::{Replica, SessionChange, SessionRecord, SessionUser};
use super::session::{self, Session};
use crate::identity::SharedIdentity;

/// How long replaying a session's handshake into a new peer may take.
const REPLAY_TIMEOUT: Duration = Duration::from_secs(15);

/// How long where a session lives is remembered without asking the directory again.
const REMEMBER_OWNER: Duration = Duration::from_secs(10);

/// Sessions remembered at most; beyond, the memory starts over.
const MOST_REMEMBERED: usize = 65_536;

/// Where the sessions this replica forwarded to lately live, so that each of their
/// requests is not a directory round trip. Forgotten when the owner cannot be reached or
/// no longer has the session, and after [`REMEMBER_OWNER`] (a takeover elsewhere is
/// learned within that time).
#[derive(Default)]
pub(super) struct Owners {
    known: std::sync::Mutex<std::collections::HashMap<String, Known>>,
}

struct Known {
    owner: Replica,
    user: Option<SessionUser>,
    at: std::time::Instant,
}

impl Owners {
    fn known(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Known>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The replica session `id` lived on lately, if `caller` may use the session.
    pub(super) fn get(&self, id: &str, caller: Option<&SharedIdentity>) -> Option<Replica> {
        let known = self.known();
        let k = known.get(id)?;
        let fresh = k.at.elapsed() < REMEMBER_OWNER;
        (fresh && k.user == session::user_of(caller.map(|c| &**c))).then(|| k.owner.clone())
    }

    pub(super) fn remember(&self, record: &SessionRecord) {
        let mut known = self.known();
        if known.len() >= MOST_REMEMBERED {
            known.clear();
        }
        known.insert(
            record.id.clone(),
            Known {
                owner: record.owner.clone(),
                user: record.user.clone(),
                at: std::time::Instant::now(),
            },
        );
    }

    pub(super) fn forget(&self, id: &str) {
        self.known().remove(id);
    }
}

/// Where a session the request names is.
pub(super) enum Located {
    /// Here, now (taken over if it had to be).
    Here(Arc<Session>),
    /// On another replica, to forward to.
    There(SessionRecord),
    /// Nowhere the caller may use.
    Nowhere,
    /// The directory could not be read.
    Unavailable(String),
}

/// Find session `id`, which this replica does not hold. `forwarded`: another replica sent
/// the request here, believing this replica the owner; it is never sent on again.
pub(super) async fn locate(
    shared: &Shared,
    id: &str,
    caller: Option<&SharedIdentity>,
    forwarded: bool,
) -> Located {
    let Some(replication) = &shared.replication else {
        return Located::Nowhere;
    };
    let record = match replication.directory.find(id).await {
        Ok(Some(r)) => r,
        Ok(None) => return Located::Nowhere,
        Err(e) => return Located::Unavailable(e.to_string()),
    };
    if !session::belongs_to(&record, caller.map(|c| &**c)) {
        return Located::Nowhere;
    }
    let me = &replication.replica;
    // Recorded here: this process, or the one it replaced at this address (a restart).
    if record.owner.id == me.id || record.owner.url == me.url {
        return take_over(shared, record, caller).await;
    }
    if forwarded {
        // The sender's idea of where the session lives is out of date: it learns so from
        // the 404 and asks the directory (a forwarded request is never sent on again).
        return Located::Nowhere;
    }
    Located::There(record)
}

/// Serve `record`'s session here: its owner is unreachable, or sent the request here.
pub(super) async fn take_over(
    shared: &Shared,
    record: SessionRecord,
    caller: Option<&SharedIdentity>,
) -> Located {
    let Some(replication) = &shared.replication else {
        return Located::Nowhere;
    };
    if record.legacy {
        // Its one SSE stream, which carried every answer, ended with its owner.
        return Located::Nowhere;
    }
    // One takeover at a time: two requests of one session arriving together restore it once.
    let _one = shared.takeovers.lock().await;
    if let Some(s) = shared.sessions.get(&record.id, caller.map(|c| &**c)) {
        return Located::Here(s);
    }
    let me = &replication.replica;
    if record.owner.id != me.id {
        match replication
            .directory
            .claim(&record.id, &record.owner.id, me)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                // Another replica took it first: it is the owner now.
                return match replication.directory.find(&record.id).await {
                    Ok(Some(r)) if r.owner.id != me.id => Located::There(r),
                    Ok(_) => Located::Nowhere,
                    Err(e) => Located::Unavailable(e.to_string()),
                };
            }
            Err(e) => return Located::Unavailable(e.to_string()),
        }
    }
    if shared.sessions.len() >= shared.options.max_sessions {
        return Located::Unavailable("too many sessions on this replica".into());
    }
    let (session, conn) = shared
        .sessions
        .reopen(&record, shared.bounds, shared.options.queue);
    (shared.on_connection)(conn);
    match replay(&session, &record, caller).await {
        Ok(()) => {
            tracing::info!(
                session = %record.id,
                from = %record.owner.url,
                "took over a session whose replica is gone"
            );
            Located::Here(session)
        }
        Err(why) => {
            tracing::warn!(session = %record.id, "taking a session over failed: {why}");
            shared.sessions.close(&record.id);
            Located::Nowhere
        }
    }
}

/// Bring a new peer to where the session's client left it: initialized, at its log level,
/// subscribed to its resources. The answers go nowhere: the client has them already.
async fn replay(
    session: &Session,
    record: &SessionRecord,
    caller: Option<&SharedIdentity>,
) -> Result<(), String> {
    let params = if record.initialize.trim().is_empty() {
        "{}"
    } else {
        record.initialize.as_str()
    };
    ask(session, caller, "initialize", params).await?;
    session
        .deliver(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
            origin(caller),
        )
        .await
        .map_err(|_| "the session ended".to_owned())?;
    // The rest is the client's to have asked for: one that fails now (a resource that is
    // gone) leaves the session as it would be had the client's request failed.
    let mut rest = Vec::new();
    if let Some(level) = &record.log_level {
        let params = serde_json::json!({ "level": level }).to_string();
        rest.push(("logging/setLevel", params));
    }
    for uri in &record.subscriptions {
        let params = serde_json::json!({ "uri": uri }).to_string();
        rest.push(("resources/subscribe", params));
    }
    for (method, params) in rest {
        if let Err(why) = ask(session, caller, method, &params).await {
            tracing::warn!(session = %record.id, "restoring the session: {why}");
        }
    }
    Ok(())
}

/// Send one request of the replay and wait for its answer, which must not be an error.
async fn ask(
    session: &Session,
    caller: Option<&SharedIdentity>,
    method: &str,
    params: &str,
) -> Result<(), String> {
    let id = format!("moat-takeover-{method}");
    let stream = session.post_stream(&[RequestId::String(id.as_str().into())], false);
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":{},"method":{},"params":{params}}}"#,
        serde_json::Value::from(id.as_str()),
        serde_json::Value::from(method),
    );
    session
        .deliver(line, origin(caller))
        .await
        .map_err(|_| "the session ended".to_owned())?;
    let answer = tokio::time::timeout(REPLAY_TIMEOUT, stream.take_last())
        .await
        .map_err(|_| format!("{method} was not answered in time"))?
        .ok_or_else(|| format!("the session ended before {method} was answered"))?;
    let value: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
    match value.get("error") {
        Some(e) => Err(format!("{method} failed: {e}")),
        None => Ok(()),
    }
}

/// Replayed messages come from the session's user, with no trace of their own.
fn origin(caller: Option<&SharedIdentity>) -> session::Origin {
    session::Origin {
        identity: caller.cloned(),
        trace: None,
    }
}

/// What a request changes in its session's record, if anything.
pub(super) fn change_of(method: &str, text: &str) -> Option<SessionChange> {
    let field = |name: &str| -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        v.get("params")?.get(name)?.as_str().map(str::to_owned)
    };
    match method {
        "logging/setLevel" => field("level").map(SessionChange::LogLevel),
        "resources/subscribe" => field("uri").map(SessionChange::Subscribe),
        "resources/unsubscribe" => field("uri").map(SessionChange::Unsubscribe),
        _ => None,
    }
}

/// Tell the directory about a change before the request goes on, so that a replica that
/// takes the session over knows of it once the client has its answer. (Log levels and
/// subscriptions change rarely: the round trip is worth it.)
pub(super) async fn record_change(shared: &Shared, id: &str, change: SessionChange) {
    let Some(replication) = &shared.replication else {
        return;
    };
    if let Err(e) = replication.directory.update(id, &change).await {
        tracing::warn!(session = %id, "recording a session change failed: {e}");
    }
}

/// Record a session just opened here (awaited: the client's next request may land on
/// another replica, which must find it).
pub(super) async fn register(shared: &Shared, record: SessionRecord) {
    let Some(replication) = &shared.replication else {
        return;
    };
    if let Err(e) = replication.directory.register(&record).await {
        tracing::warn!(
            session = %record.id,
            "recording a new session failed (other replicas will not find it): {e}"
        );
    }
}

/// Forget a session everywhere: it was deleted (`expired` false), or this replica's copy
/// expired (then the record goes only if this replica still owns it).
pub(super) async fn forget(shared: &Shared, id: &str, expired: bool) {
    let Some(replication) = &shared.replication else {
        return;
    };
    let owner = expired.then_some(replication.replica.id.as_str());
    if let Err(e) = replication.directory.remove(id, owner).await {
        tracing::warn!(session = %id, "removing a session from the directory failed: {e}");
    }
}
