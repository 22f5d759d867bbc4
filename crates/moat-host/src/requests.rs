//! Requests a server makes of the client — `sampling/createMessage`, `elicitation/create`,
//! `roots/list` — passed on to the client whose call caused them, under the policy.
//!
//! The gateway offers each server what `[[policy.requests]]` lets it ask, so a server that
//! decides at `initialize` what to offer (sampling tools only for clients that sample)
//! offers it. A forwarded call carries an [`InputAnswerer`] for its upstream request: what
//! the server asks while handling it goes to that client, in that client's revision (a
//! request in the handshake era, a multi-round-trip answer in 2026-07-28: the SDK's
//! `RequestContext` does either). Every such request is checked against the policy,
//! put to a person first where the policy says `ask`, and audited as a record of its own
//! kind. Roots are cut to what the server's sandbox lets it reach.
//!
//! A request outside any call (a server asking for roots on its own) goes to the one
//! connected client that can answer it; with several, nobody can tell whose it is, and the
//! server gets an error saying so. A roots request during a call whose client declared no
//! roots is answered with an error, not passed into the call: it may not be the call's.
//!
//! An elicitation goes on only in a mode the client declared (`elicitation.form`,
//! `elicitation.url`; an empty `elicitation` is form only): the gateway offers servers both
//! modes, and servers must not send a client a mode it does not support. A URL elicitation
//! passed to a 2025-11-25 client is remembered ([`crate::url_elicitations`]), so that the
//! server's `notifications/elicitation/complete` reaches that client.

use std::sync::{Arc, Weak};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use moat::{InputAnswerer, RequestContext, RequestOptions};
use moat_protocol::ErrorObject;
use moat_protocol::JsonObject;
use moat_protocol::types::{
    ClientCapabilities, ElicitAction, ElicitRequestParams, ElicitationCapability, InputRequest,
    InputResponse, ListRootsResult, RequestParams, Root, RootsCapability, SamplingCapability,
    methods,
};
use moat_protocol::version::{META_CLIENT_CAPABILITIES, META_LOG_LEVEL};
use serde_json::Value;

use crate::audit::{self, AuditRecord, Outcome};
use crate::consent::{self, Question};
use crate::inner::Inner;
use crate::policy::{Decision, RequestKind};
use crate::sessions::Sessions;
use crate::url_elicitations::Recipient;

/// JSON-RPC error code for a request the gateway refuses (as a client refuses one its
/// user rejects).
const REFUSED: i64 = -1;

/// What the gateway offers `server`: what the policy lets it ask.
pub(crate) fn capabilities_for(inner: &Inner, server: &str) -> ClientCapabilities {
    let settings = inner.settings();
    let allowed = |kind| settings.policy.request(server, kind).decision != Decision::Deny;
    let mut caps = ClientCapabilities::default();
    if allowed(RequestKind::Sampling) {
        caps.sampling = Some(SamplingCapability::default());
    }
    if allowed(RequestKind::Elicitation) {
        caps.elicitation = Some(ElicitationCapability {
            form: Some(Default::default()),
            url: Some(Default::default()),
            ..Default::default()
        });
    }
    if allowed(RequestKind::Roots) {
        caps.roots = Some(RootsCapability {
            list_changed: Some(true),
            ..Default::default()
        });
    }
    caps
}

/// What a forwarded call carries in `_meta`: the client's own entries (trace context and
/// the like) untouched, less what belongs to one connection (`progressToken`, the
/// protocol's `io.modelcontextprotocol/` keys); to a 2026-07-28 server also the
/// capabilities the client behind the call has (of those the server is offered) and the
/// log level it asked for, as that revision carries them on each request.
pub(crate) fn meta_for_call(
    inner: &Inner,
    ctx: &RequestContext,
    server: &str,
    client: &moat::Client,
) -> JsonObject {
    let mut meta: JsonObject = ctx
        .request_meta()
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or_default();
    meta.retain(|key, _| key != "progressToken" && !key.starts_with(crate::naming::PROTOCOL_KEYS));
    if client.protocol_version().map(|v| v.era()) == Some(moat_protocol::Era::Modern) {
        let offered = capabilities_for(inner, server);
        let theirs = ctx.client_capabilities().cloned().unwrap_or_default();
        let caps = ClientCapabilities {
            sampling: offered.sampling.filter(|_| theirs.sampling.is_some()),
            elicitation: match (offered.elicitation, theirs.elicitation) {
                (Some(_), Some(theirs)) => Some(theirs),
                _ => None,
            },
            roots: offered.roots.filter(|_| theirs.roots.is_some()),
            ..Default::default()
        };
        if let Ok(caps) = serde_json::to_value(&caps) {
            meta.insert(META_CLIENT_CAPABILITIES.to_owned(), caps);
        }
        if let Some(level) = ctx.log_level()
            && let Ok(level) = serde_json::to_value(level)
        {
            meta.insert(META_LOG_LEVEL.to_owned(), level);
        }
    }
    meta
}

/// The answerer of one forwarded call: its questions go to the client behind `ctx`.
pub(crate) fn answerer_for(
    inner: &Arc<Inner>,
    ctx: &RequestContext,
    server: &str,
    connection: &Arc<moat::Client>,
) -> InputAnswerer {
    // Requests of one session may share a question; 2026-07-28 requests have no session,
    // so each is its own.
    let group = if Sessions::is_sessionless(ctx) {
        format!("request {}", ctx.peer().id())
    } else {
        format!("session {}", Sessions::key(ctx))
    };
    let weak = Arc::downgrade(inner);
    let ctx = ctx.clone();
    let server = server.to_owned();
    // Weak: the answerer lives in the connection's table of requests in flight.
    let connection = Arc::downgrade(connection);
    InputAnswerer::new(group, move |key, request| {
        let weak = weak.clone();
        let ctx = ctx.clone();
        let server = server.clone();
        let connection = connection.clone();
        async move { answer(weak, Some((ctx, key, connection)), &server, request).await }
    })
}

/// The call a question belongs to: its client's request, the server's key for the
/// question, and the connection to the server the call went out on.
type Call = (
    RequestContext,
    Option<String>,
    std::sync::Weak<moat::Client>,
);

/// The answer to a request `server` made outside any call.
pub(crate) async fn answer_outside_a_call(
    weak: Weak<Inner>,
    server: String,
    request: InputRequest,
) -> Result<InputResponse, ErrorObject> {
    answer(weak, None, &server, request).await
}

/// `call`: the request of the client the question goes to, and the server's key for it
/// (kept, so the client sees the names the server chose).
async fn answer(
    weak: Weak<Inner>,
    call: Option<Call>,
    server: &str,
    request: InputRequest,
) -> Result<InputResponse, ErrorObject> {
    let (ctx, key, connection) = match call {
        Some((ctx, key, connection)) => (Some(ctx), key, connection.upgrade()),
        None => (None, None, None),
    };
    let inner = weak
        .upgrade()
        .ok_or_else(|| ErrorObject::internal("the gateway is shutting down"))?;
    let Some(kind) = kind_of(&request) else {
        return Err(ErrorObject::method_not_found(request.method()));
    };
    let started = Instant::now();
    let mut record = AuditRecord {
        time_ms: unix_ms(),
        kind: kind.as_str().to_owned(),
        session: ctx
            .as_ref()
            .map_or_else(|| "-".to_owned(), |c| Sessions::key(c).to_string()),
        client: ctx
            .as_ref()
            .and_then(|c| c.client_info())
            .map(|i| format!("{} {}", i.name, i.version)),
        server: server.to_owned(),
        tool: request.method().to_owned(),
        exposed_name: format!("{server}: {}", request.method()),
        ..AuditRecord::default()
    };
    record.decide(audit::Decision::Deny);
    record.end(Outcome::Refused);
    let settings = inner.settings();
    if let Ok(params) = serde_json::to_value(&request) {
        let params = params.get("params").cloned().unwrap_or(Value::Null);
        record.set_arguments(&params, &settings.config.audit, &settings.redactor);
    }
    // A question of a handshake-era server has no key. Towards a 2026-07-28 client it gets
    // one made of what it asks: the client's retry runs the call again, and an answer
    // must go back only to the same question, never to whatever is asked in its place.
    let key = key.or_else(|| {
        let modern = ctx
            .as_ref()
            .and_then(RequestContext::protocol_version)
            .is_some_and(|v| v.era() == moat_protocol::Era::Modern);
        modern.then(|| content_key(kind, &request))
    });
    let result = decide_and_forward(
        &inner,
        ctx.as_ref(),
        key,
        server,
        connection.as_ref(),
        request,
        &mut record,
    )
    .await;
    record.duration_us = started.elapsed().as_micros() as u64;
    match &result {
        Ok(answer) => {
            record.end(Outcome::Ok);
            record.result_bytes = serde_json::to_vec(answer).map_or(0, |v| v.len() as u64);
        }
        Err(error) => {
            if record.outcome_kind() != Some(Outcome::Refused) {
                record.end(Outcome::Failed);
            }
            record.error = Some(error.message.clone());
        }
    }
    if let Some(audit) = inner.audit() {
        audit.record(record);
    }
    result
}

/// What kind of question a request is, for policy and the audit trail (`None`: one the
/// gateway does not pass on).
fn kind_of(request: &InputRequest) -> Option<RequestKind> {
    match request {
        InputRequest::CreateMessage(_) => Some(RequestKind::Sampling),
        InputRequest::Elicit(_) => Some(RequestKind::Elicitation),
        InputRequest::ListRoots(_) => Some(RequestKind::Roots),
        _ => None,
    }
}

async fn decide_and_forward(
    inner: &Arc<Inner>,
    ctx: Option<&RequestContext>,
    key: Option<String>,
    server: &str,
    connection: Option<&Arc<moat::Client>>,
    request: InputRequest,
    record: &mut AuditRecord,
) -> Result<InputResponse, ErrorObject> {
    let Some(kind) = kind_of(&request) else {
        return Err(ErrorObject::method_not_found(request.method()));
    };
    let settings = inner.settings();
    let verdict = settings.policy.request(server, kind);
    record.rule = verdict.rule.clone();
    record.decide(verdict.decision.into());
    if verdict.decision == Decision::Deny {
        return Err(ErrorObject::new(
            REFUSED,
            format!(
                "moat's policy does not let server {server} use {} ({}): the client was not asked",
                kind.as_str(),
                verdict.rule
            ),
        ));
    }
    let Some(ctx) = ctx else {
        return match kind {
            RequestKind::Roots => roots_outside_a_call(inner, server, record).await,
            _ => Err(ErrorObject::new(
                REFUSED,
                format!(
                    "moat passes {} on to the client of a call this server is handling; \
                     outside a call there is no client to ask",
                    request.method()
                ),
            )),
        };
    };
    // A server may ask for roots at any time (the reference servers do right after
    // `initialized`), so a `roots/list` during a call need not be the call's. Passed into
    // a call whose client has no roots, it would fail the call with "missing capability"
    // in 2026-07-28; the server is told instead, and the call goes on.
    if kind == RequestKind::Roots && ctx.client_capabilities().is_none_or(|c| c.roots.is_none()) {
        record.end(Outcome::Failed);
        return Err(ErrorObject::new(
            moat_protocol::error::METHOD_NOT_FOUND,
            "the client behind the call in flight did not declare roots \
             (capabilities.roots); moat does not pass roots/list on",
        ));
    }
    if let InputRequest::Elicit(params) = &request
        && let Some(mode) = undeclared_mode(ctx, params)
    {
        return Err(ErrorObject::new(
            moat_protocol::error::INVALID_PARAMS,
            format!(
                "the client behind this call did not declare {mode}-mode elicitation \
                 (capabilities.elicitation.{mode}); moat does not pass the request on"
            ),
        ));
    }
    if verdict.decision == Decision::Ask {
        let arguments = serde_json::to_value(&request).unwrap_or(Value::Null);
        let what = format!("{server}: {}", request.method());
        let reason = format!(
            "server {server} asks to use the client's {} (policy {})",
            kind.as_str(),
            verdict.rule
        );
        let question = Question {
            tool: &what,
            reason: &reason,
            arguments: &arguments,
        };
        let consent = &settings.config.consent;
        let answer = consent::ask(
            ctx,
            consent.mode,
            consent.timeout,
            &question,
            inner.console(),
        )
        .await;
        record.consent = Some(answer.how.clone());
        if !answer.choice.approves() {
            return Err(ErrorObject::new(
                REFUSED,
                format!(
                    "server {server}'s {} request needs consent, and it was not given ({}){}",
                    kind.as_str(),
                    answer.how,
                    answer
                        .unasked
                        .as_ref()
                        .map(|u| format!(". {}", u.explain()))
                        .unwrap_or_default()
                ),
            ));
        }
    }
    record.end(Outcome::Failed);
    let lacks = |what: &str| {
        ErrorObject::new(
            moat_protocol::error::METHOD_NOT_FOUND,
            format!(
                "the client behind this call does not support {what}; moat cannot pass the request on"
            ),
        )
    };
    let tracked = match &request {
        InputRequest::Elicit(ElicitRequestParams::Url(p)) => match &p.elicitation_id {
            Some(id) => track(inner, ctx, server, connection, id),
            None => None,
        },
        _ => None,
    };
    // Under the server's key, when it gave one: the client sees the names it chose.
    let sent = match (request, key) {
        (InputRequest::CreateMessage(p), Some(key)) => ctx
            .keyed(key)
            .create_message(p)
            .await
            .map(InputResponse::CreateMessage),
        (InputRequest::CreateMessage(p), None) => ctx
            .create_message(p)
            .await
            .map(InputResponse::CreateMessage),
        (InputRequest::Elicit(p), Some(key)) => {
            ctx.keyed(key).elicit(p).await.map(InputResponse::Elicit)
        }
        (InputRequest::Elicit(p), None) => ctx.elicit(p).await.map(InputResponse::Elicit),
        (InputRequest::ListRoots(_), Some(key)) => ctx
            .keyed(key)
            .list_roots()
            .await
            .map(|r| InputResponse::ListRoots(within_sandbox(inner, server, r))),
        (InputRequest::ListRoots(_), None) => ctx
            .list_roots()
            .await
            .map(|r| InputResponse::ListRoots(within_sandbox(inner, server, r))),
        (other, _) => return Err(ErrorObject::method_not_found(other.method())),
    };
    // Only an accepted page can be completed; a declined one is forgotten now.
    if let Some((connection, id, to)) = tracked {
        let accepted =
            matches!(&sent, Ok(InputResponse::Elicit(r)) if r.action == ElicitAction::Accept);
        if !accepted {
            inner.url_elicitations().unsent(connection, &id, &to);
        }
    }
    sent.map_err(|e| match e {
        moat::Error::ClientLacks(what) => lacks(what),
        moat::Error::Remote { error, .. } => error,
        other => ErrorObject::internal(format!("the client did not answer: {other}")),
    })
}

/// The mode of `params` the client behind `ctx` did not declare, if it declared
/// elicitation at all (a client without it is told so where the request is sent).
fn undeclared_mode(ctx: &RequestContext, params: &ElicitRequestParams) -> Option<&'static str> {
    let declared = ctx.client_capabilities()?.elicitation.as_ref()?;
    match params {
        // An empty `elicitation` means form mode (2025-11-25, for older clients).
        ElicitRequestParams::Form(_) => {
            (declared.form.is_none() && declared.url.is_some()).then_some("form")
        }
        ElicitRequestParams::Url(_) => declared.url.is_none().then_some("url"),
        // A mode of a later revision: the client decides.
        _ => None,
    }
}

/// Remembers that the URL elicitation `id` of the server's connection behind this call goes
/// to the call's client, and follows that connection for its completion. A 2026-07-28
/// client is not remembered: that revision has no completion, and its stateless request
/// no channel for one. Returns what [`UrlElicitations::unsent`] needs to take it back.
///
/// [`UrlElicitations::unsent`]: crate::url_elicitations::UrlElicitations::unsent
fn track(
    inner: &Arc<Inner>,
    ctx: &RequestContext,
    server: &str,
    client: Option<&Arc<moat::Client>>,
    id: &str,
) -> Option<(u64, String, Recipient)> {
    if ctx.protocol_version().map(|v| v.era()) != Some(moat_protocol::Era::Handshake) {
        return None;
    }
    // The connection the call went out on (the server's, or the user's own to it).
    let Some(client) = client else {
        tracing::debug!(
            server,
            "no connection to follow for an elicitation's completion"
        );
        return None;
    };
    let connection = client.peer().id();
    let to = Recipient::of(ctx);
    inner.url_elicitations().sent(connection, id, to.clone());
    inner
        .url_elicitations()
        .follow(connection, server, client.notifications());
    Some((connection, id.to_owned(), to))
}

/// Roots asked for outside a call: from the one connected client that has them.
async fn roots_outside_a_call(
    inner: &Arc<Inner>,
    server: &str,
    record: &mut AuditRecord,
) -> Result<InputResponse, ErrorObject> {
    let with_roots: Vec<moat::Peer> = inner
        .server()
        .connections()
        .into_iter()
        .filter(|p| p.client_capabilities().is_some_and(|c| c.roots.is_some()))
        .collect();
    let peer = match with_roots.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(ErrorObject::new(
                REFUSED,
                "no connected client offers roots right now; moat tells this server when one does \
                 (notifications/roots/list_changed)",
            ));
        }
        several => {
            return Err(ErrorObject::new(
                REFUSED,
                format!(
                    "{} clients with roots are connected, and a request outside a call does not \
                     say whose roots it wants; ask during a call",
                    several.len()
                ),
            ));
        }
    };
    record.session = peer.id().to_string();
    record.end(Outcome::Failed);
    let roots: ListRootsResult = peer
        .request_with(
            methods::ROOTS_LIST,
            &RequestParams::default(),
            RequestOptions::default(),
        )
        .await
        .map_err(|e| ErrorObject::internal(format!("the client did not answer roots/list: {e}")))?;
    Ok(InputResponse::ListRoots(within_sandbox(
        inner, server, roots,
    )))
}

/// The client's roots a sandboxed server can reach: those inside a path its profile
/// names. A root outside is not offered (the server could not open it anyway, and its
/// name alone tells what the user works on).
fn within_sandbox(inner: &Inner, server: &str, mut roots: ListRootsResult) -> ListRootsResult {
    let Some(profile) = inner.server_config(server).and_then(|c| c.profile()) else {
        return roots;
    };
    let reachable: Vec<std::path::PathBuf> = profile
        .ro
        .iter()
        .chain(profile.rw.iter())
        .cloned()
        .collect();
    roots.roots.retain(|root| inside_any(root, &reachable));
    roots
}

fn inside_any(root: &Root, paths: &[std::path::PathBuf]) -> bool {
    let Some(path) = root.uri.strip_prefix("file://") else {
        return false;
    };
    let path = std::path::Path::new(path);
    // Lexically: `..` cannot walk out of a path it names.
    if path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return false;
    }
    paths.iter().any(|p| path.starts_with(p))
}

/// Tells every running server the gateway offers roots to that the client's roots changed.
pub(crate) fn roots_changed(inner: &Arc<Inner>) {
    for client in inner.live_clients() {
        let offered = inner.server_config(&client.0).is_some()
            && capabilities_for(inner, &client.0).roots.is_some();
        if !offered {
            continue;
        }
        let client = client.1;
        tokio::spawn(async move {
            let _ = client
                .peer()
                .notify(
                    methods::NOTIFICATIONS_ROOTS_LIST_CHANGED,
                    &moat_protocol::types::NotificationParams::default(),
                )
                .await;
        });
    }
}

/// `sampling-1a2b3c4d5e6f`: the kind and a digest of the request.
fn content_key(kind: RequestKind, request: &InputRequest) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(request).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{}-{hex}", kind.as_str())
}

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(uri: &str) -> Root {
        serde_json::from_value(serde_json::json!({ "uri": uri })).expect("a root")
    }

    #[test]
    fn a_root_is_offered_only_inside_a_reachable_path() {
        let paths = vec![std::path::PathBuf::from("/home/me/project")];
        assert!(inside_any(&root("file:///home/me/project"), &paths));
        assert!(inside_any(&root("file:///home/me/project/src"), &paths));
        assert!(!inside_any(&root("file:///home/me/projects"), &paths));
        assert!(!inside_any(&root("file:///home/me"), &paths));
        assert!(!inside_any(
            &root("file:///home/me/project/../secret"),
            &paths
        ));
        assert!(!inside_any(
            &root("https://example.com/home/me/project"),
            &paths
        ));
    }
}
