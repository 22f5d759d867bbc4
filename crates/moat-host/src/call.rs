//! The path of one `tools/call` through the gateway:
//!
//! look up → the scopes `[auth.tool_scopes]` asks of the caller's token → arguments checked
//! against the tool's `inputSchema` → policy with the arguments and the caller (deny → ask
//! → allow) → rate limit → containment (a sink after untrusted
//! content needs consent) → consent where asked → forward with a deadline, progress and
//! cancellation → taint the session if the tool is a source of untrusted content → one
//! audit record, whatever happened.
//!
//! Refusals come back as tool results with `isError` and a message that says why and what
//! to do: the model can read it and tell the user, where a JSON-RPC error would often be
//! swallowed by the client.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use moat::client::ToolCall;
use moat::{RequestContext, RequestOptions};
use moat_protocol::ErrorObject;
use moat_protocol::types::{CallToolResult, TaskSupport};
use serde_json::{Map, Value};
use tracing::Instrument;

use crate::audit::{self, AuditRecord, Outcome, Refusal};
use crate::caller::{Caller, check_tool_scopes};
use crate::catalog::ToolEntry;
use crate::consent::{self, Choice, Question};
use crate::inner::Inner;
use crate::policy::{Decision, ToolRef};
use crate::sessions::Sessions;
use crate::telemetry::{self, spans};

/// Runs one call. Every refusal is a result for the client (with `isError`); the only
/// error is the server's own JSON-RPC error, passed on as it is.
pub(crate) async fn call(
    inner: Arc<Inner>,
    ctx: RequestContext,
    exposed: &str,
    args: Value,
) -> Result<CallToolResult, ErrorObject> {
    let started = Instant::now();
    let settings = inner.settings();
    let caller = Caller::of(&ctx, settings.config.auth.as_ref());
    let mut record = new_record(&ctx, exposed, &caller);
    // The digest is of the redacted arguments: a digest of a short secret could be
    // reversed by anyone who can read the store.
    record.set_arguments(&args, &settings.config.audit, &settings.redactor);
    let span = spans::call(&ctx, exposed);
    let result = run(&inner, &ctx, &caller, exposed, args, &mut record)
        .instrument(span.clone())
        .await;
    record.duration_us = started.elapsed().as_micros() as u64;
    telemetry::call_ended(inner.metrics(), &span, &record, started.elapsed());
    if let Some(audit) = inner.audit() {
        audit.record(record);
    }
    result
}

/// A call to a name the client was not shown: a tool policy hides or one held back
/// (refused by the same path, and recorded), or no tool at all (error -32602, recorded).
pub(crate) async fn call_unlisted(
    inner: Arc<Inner>,
    ctx: RequestContext,
    name: &str,
    raw_args: Option<Box<serde_json::value::RawValue>>,
) -> Result<CallToolResult, ErrorObject> {
    let args = match &raw_args {
        Some(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
        None => Value::Null,
    };
    if let Err(None) = inner.lookup(name) {
        let settings = inner.settings();
        let caller = Caller::of(&ctx, settings.config.auth.as_ref());
        let mut record = new_record(&ctx, name, &caller);
        record.set_arguments(&args, &settings.config.audit, &settings.redactor);
        // A tool of a server that is down is unknown only because its server is: say so.
        let mut message = format!("Unknown tool: {name}");
        for server in inner.down_servers_for(name) {
            message.push_str(&format!(". {}", inner.down_message(&server)));
        }
        record.refuse(&Refusal::UnknownTool, &message);
        telemetry::call_ended(
            inner.metrics(),
            &spans::call(&ctx, name),
            &record,
            Default::default(),
        );
        if let Some(audit) = inner.audit() {
            audit.record(record);
        }
        return Err(ErrorObject::invalid_params(message));
    }
    call(inner, ctx, name, args).await
}

fn new_record(ctx: &RequestContext, exposed: &str, caller: &Caller) -> AuditRecord {
    let mut record = AuditRecord {
        subject: caller.user().map(str::to_owned),
        client_id: caller.client_id.clone(),
        time_ms: unix_ms(),
        session: Sessions::key(ctx).to_string(),
        client: ctx
            .client_info()
            .map(|i| format!("{} {}", i.name, i.version)),
        exposed_name: exposed.to_owned(),
        ..AuditRecord::default()
    };
    record.decide(audit::Decision::Deny);
    record.end(Outcome::Refused);
    record
}

async fn run(
    inner: &Arc<Inner>,
    ctx: &RequestContext,
    caller: &Caller,
    exposed: &str,
    args: Value,
    record: &mut AuditRecord,
) -> Result<CallToolResult, ErrorObject> {
    let entry = match inner.lookup(exposed) {
        Ok(entry) => entry,
        Err(held) => {
            return Ok(match held {
                Some(held) => {
                    record.server = held.server.clone();
                    refuse(
                        record,
                        held.rule.clone(),
                        format!("moat holds back {exposed}: {}", held.reason),
                    )
                }
                None => refuse(
                    record,
                    Refusal::UnknownTool,
                    format!("no tool {exposed} is available (its server may be restarting)"),
                ),
            });
        }
    };
    record.server = entry.server.clone();
    record.tool = entry.tool.name.clone();
    // A JSON-RPC error, not a tool result: over HTTP it becomes the 403 that has the client
    // get a token with the scopes and retry.
    if let Err(error) = check_tool_scopes(ctx, inner.settings().config.auth.as_ref(), exposed) {
        record.refuse(&Refusal::Rule("auth.tool_scopes".into()), &error.message);
        return Err(error);
    }
    let args = match args {
        Value::Object(_) => args,
        Value::Null => Value::Object(Map::new()),
        other => {
            return Ok(refuse(
                record,
                Refusal::Schema,
                format!("the arguments of {exposed} must be a JSON object, not {other}"),
            ));
        }
    };
    if let Err(message) = validate(&entry, &args) {
        return Ok(refuse(
            record,
            Refusal::Schema,
            format!("invalid arguments for {exposed}: {message}"),
        ));
    }

    let empty = Map::new();
    let map = args.as_object().unwrap_or(&empty);
    let settings = inner.settings();
    let tool_ref = ToolRef {
        server: &entry.server,
        tool: &entry.tool.name,
        annotations: entry.tool.annotations.as_ref(),
    };
    let verdict = {
        let _policy = spans::policy().entered();
        settings
            .policy
            .evaluate_as(&tool_ref, Some(map), caller.who.as_ref())
    };
    record.rule = verdict.rule.clone();
    if verdict.decision == Decision::Deny {
        return Ok(refuse(
            record,
            Refusal::Rule(verdict.rule.clone()),
            format!(
                "moat's policy denies this call to {exposed} ({}). If it should be allowed, change that rule in the gateway's configuration.",
                verdict.rule
            ),
        ));
    }
    // With a shared store the buckets are the store's, counted across every gateway.
    let limited = match inner.shared() {
        None => settings
            .policy
            .check_rate_for(&tool_ref, caller.rate_user()),
        Some(shared) => {
            let buckets = settings
                .policy
                .shared_buckets_for(&tool_ref, caller.rate_user());
            // Boxed, as every path most calls do not take: see `forward`.
            match Box::pin(shared.postgres().take_tokens(&buckets)).await {
                Ok(taken) => taken,
                Err(e) => {
                    return Ok(refuse(
                        record,
                        Refusal::RateLimit,
                        format!(
                            "{exposed} is under a rate limit, and the store that counts its calls \
                             cannot be reached ({e}); try again when it is back"
                        ),
                    ));
                }
            }
        }
    };
    if let Err(limited) = limited {
        return Ok(refuse(
            record,
            Refusal::RateLimit,
            format!("{exposed} is called too often: {limited}"),
        ));
    }

    // Containment: after untrusted content, anything that can send data out or change
    // things goes to a person, whatever its own rule says.
    let taint = if entry.labels.sink {
        inner.sessions().taint_source(ctx)
    } else {
        None
    };
    let mut decision = verdict.decision;
    let mut reason = format!("policy {}", verdict.rule);
    if let Some(source) = &taint {
        decision = Decision::Ask;
        reason = format!(
            "this session has read untrusted content (from {source}) and {exposed} can send data out or change things"
        );
        record.rule = Refusal::Taint.rule().to_owned();
    }
    record.decide(decision.into());

    if decision == Decision::Ask {
        let settled = taint.is_none()
            && (inner.sessions().approved(ctx, exposed)
                || inner
                    .decisions()
                    .always_allowed_for(caller.consent_user(), exposed));
        if settled {
            record.consent = Some("approved earlier".into());
        } else {
            let question = Question {
                tool: exposed,
                reason: &reason,
                arguments: &args,
            };
            let consent = &settings.config.consent;
            let asked = Instant::now();
            let span = spans::consent(&reason);
            let answer = Box::pin(
                consent::ask(
                    ctx,
                    consent.mode,
                    consent.timeout,
                    &question,
                    inner.console(),
                )
                .instrument(span.clone()),
            )
            .await;
            telemetry::consent_answered(inner.metrics(), &span, &answer, asked.elapsed());
            record.consent = Some(answer.how.clone());
            if !answer.choice.approves() {
                let hint = match &answer.unasked {
                    Some(unasked) => {
                        let advice = if taint.is_some() {
                            containment_advice(&entry.server, &entry.tool.name)
                        } else {
                            settings.policy.advice_to_allow(&tool_ref, map)
                        };
                        format!(" {}. {advice}", unasked.explain())
                    }
                    None => String::new(),
                };
                return Ok(refuse(
                    record,
                    Refusal::Rule(record.rule.clone()),
                    format!(
                        "{exposed} needs consent ({reason}), and it was not given ({}).{hint}",
                        answer.how
                    ),
                ));
            }
            // A taint prompt approves this call only: the next sink call is a new question.
            if taint.is_none() {
                match answer.choice {
                    // A 2026-07-28 request has no session to remember it for: the
                    // approval covers this call only, or it would cover every client.
                    Choice::Session if Sessions::is_sessionless(ctx) => {}
                    Choice::Session => inner.sessions().approve(ctx, exposed),
                    Choice::Always => {
                        if let Err(e) = inner
                            .decisions()
                            .allow_always_for(caller.consent_user(), exposed)
                        {
                            tracing::warn!(tool = exposed, error = %e, "decision not stored");
                        } else if let Some(shared) = inner.shared().cloned() {
                            // The other gateways learn of it now, not at the next sync.
                            tokio::spawn(async move {
                                let _ = shared.sync().await;
                            });
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    forward(inner, ctx, &entry, exposed, args, record).await
}

/// How to get past containment when nobody can be asked: it is not a policy rule, so the
/// advice is about labels and channels.
fn containment_advice(server: &str, tool: &str) -> String {
    format!(
        "Containment asks about every call that can send data out once the session has read \
         untrusted content, whatever the rules say. To go on, start a new session, run the \
         gateway where it can ask (a client with elicitation, or the gateway in the \
         foreground of a terminal), or, if this tool cannot send data out, say so with \
         [[policy.labels]] server = \"{server}\", tool = \"{tool}\", sink = false."
    )
}

/// Sends the call to its server and waits for the answer, the deadline, the client's
/// cancellation, or the server's end, whichever comes first.
///
/// The paths most calls do not take (a task, progress and logs, per-user credentials, and
/// in `run` consent and a shared rate limit) are awaited boxed: inline, their state more
/// than doubled every call's future (13.7 KB against 5.7), which is copied at each move.
async fn forward(
    inner: &Arc<Inner>,
    ctx: &RequestContext,
    entry: &Arc<ToolEntry>,
    exposed: &str,
    args: Value,
    record: &mut AuditRecord,
) -> Result<CallToolResult, ErrorObject> {
    // A server that is starting or restarting is waited for (bounded).
    // The server's connection, or the calling user's own to it (`[servers.NAME.auth]`).
    let client = match crate::downstream_auth::client_for_call(inner, ctx, &entry.server).await {
        Ok(client) => client,
        Err(message) => {
            record.end(Outcome::Failed);
            record.error = Some(message.clone());
            return Ok(CallToolResult::error(message));
        }
    };
    let timeout = inner.call_timeout(&entry.server);
    // What the server asks while handling the call goes to this call's client, and so do
    // its progress and log messages; the client's `_meta` goes to the server.
    let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel();
    let (logs_tx, mut logs_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut options = RequestOptions::default()
        .timeout(timeout)
        .answer_with(crate::requests::answerer_for(
            inner,
            ctx,
            &entry.server,
            &client,
        ))
        .logs(logs_tx);
    if ctx.progress_token().is_some() {
        options = options.progress(progress_tx);
    }
    let name = &entry.tool.name;
    let mut meta = crate::requests::meta_for_call(inner, ctx, &entry.server, &client);
    let span = spans::downstream(&entry.server, name, &mut meta);
    if !meta.is_empty() {
        options = options.meta(meta);
    }
    let accept_task = accepts_task(ctx, &entry.tool, &client);
    let call = async {
        if !accept_task {
            return client.call_tool_with(name, args, options).await;
        }
        // The server decides whether the call becomes a task; when it does, so does the
        // client's call (if the client takes tasks; else the gateway waits for the end).
        match client.call_tool_accepting_task(name, args, options).await? {
            ToolCall::Done(result) => Ok(result),
            ToolCall::Task(task) => {
                Box::pin(async move {
                    ctx.continue_as_task().await;
                    task.finish().await
                })
                .await
            }
            _ => Err(moat::Error::Closed("an unknown kind of answer".into())),
        }
    };
    let call = call.instrument(span);
    tokio::pin!(call);
    let sent = Instant::now();
    let answer = loop {
        tokio::select! {
            answer = &mut call => break Some(answer),
            Some(p) = progress_rx.recv() => Box::pin(ctx.progress(p.progress, p.total, p.message)).await,
            Some(m) = logs_rx.recv() => Box::pin(ctx.log(m.level, m.logger.as_deref(), m.data)).await,
            _ = ctx.cancelled() => break None,
        }
    };
    if let Some(metrics) = inner.metrics() {
        metrics.downstream(&entry.server, name, sent.elapsed());
    }
    // A server's last progress and logs often come just before its answer: pass on what
    // is queued before the answer, so none is lost.
    while let Ok(p) = progress_rx.try_recv() {
        Box::pin(ctx.progress(p.progress, p.total, p.message)).await;
    }
    while let Ok(m) = logs_rx.try_recv() {
        Box::pin(ctx.log(m.level, m.logger.as_deref(), m.data)).await;
    }
    match answer {
        None => {
            // Dropping the call future sends `notifications/cancelled` downstream.
            record.end(Outcome::Cancelled);
            Ok(CallToolResult::error("cancelled by the client"))
        }
        Some(Ok(mut result)) => {
            // What the protocol puts in `_meta` belongs to the server's connection with the
            // gateway (its name in 2026-07-28): the gateway speaks for itself to its client.
            if let Some(meta) = &mut result.meta {
                meta.retain(|key, _| !key.starts_with(crate::naming::PROTOCOL_KEYS));
                if meta.is_empty() {
                    result.meta = None;
                }
            }
            record.result_bytes = encoded_len(&result);
            record.end(if result.is_error == Some(true) {
                Outcome::ToolError
            } else {
                Outcome::Ok
            });
            if entry.labels.untrusted_source {
                inner.sessions().taint(ctx, exposed);
            }
            Ok(result)
        }
        // The server's own JSON-RPC error goes to the client as it is: an intermediary
        // that turned it into a tool result would change what the client sees.
        Some(Err(moat::Error::Remote { error, .. })) => {
            follow_required_elicitations(inner, ctx, &entry.server, &client, &error);
            record.end(Outcome::Failed);
            record.error = Some(format!("server {}: {error}", entry.server));
            Err(error)
        }
        Some(Err(error)) => {
            let message = match &error {
                moat::Error::Closed(_) => format!(
                    "server {} stopped during the call ({error}); moat is restarting it",
                    entry.server
                ),
                moat::Error::Timeout { after, .. } => format!(
                    "server {} did not answer {exposed} within {after:?}",
                    entry.server
                ),
                _ => format!("server {}: {error}", entry.server),
            };
            record.end(Outcome::Failed);
            record.error = Some(message.clone());
            Ok(CallToolResult::error(message))
        }
    }
}

/// A server's `URLElicitationRequiredError` (-32042) lists URL elicitations the client is
/// to complete: their completions go to this call's client, as those of an
/// `elicitation/create` do (a 2025-11-25 client: 2026-07-28 has no completion).
fn follow_required_elicitations(
    inner: &Arc<Inner>,
    ctx: &RequestContext,
    server: &str,
    client: &Arc<moat::Client>,
    error: &ErrorObject,
) {
    if error.code != moat_protocol::error::URL_ELICITATION_REQUIRED
        || ctx.protocol_version().map(moat::ProtocolVersion::era)
            != Some(moat_protocol::Era::Handshake)
    {
        return;
    }
    let ids: Vec<&str> = error
        .data
        .as_ref()
        .and_then(|d| d.get("elicitations"))
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|e| e.get("elicitationId")?.as_str())
                .collect()
        })
        .unwrap_or_default();
    if ids.is_empty() {
        return;
    }
    let connection = client.peer().id();
    for id in ids {
        let to = crate::url_elicitations::Recipient::of(ctx);
        inner.url_elicitations().sent(connection, id, to);
    }
    inner
        .url_elicitations()
        .follow(connection, server, client.notifications());
}

/// Whether the call to the server may become a task. A handshake-era server says which
/// tools may (`execution.taskSupport`). A 2026-07-28 server decides per call for a client
/// that takes tasks: the gateway takes them unless its own client is a 2026-07-28 one that
/// does not (then the server answers as it would that client, a required task refused).
fn accepts_task(
    ctx: &RequestContext,
    tool: &moat_protocol::types::Tool,
    client: &moat::Client,
) -> bool {
    let era = |v: Option<moat::ProtocolVersion>| v.map(moat::ProtocolVersion::era);
    if era(client.protocol_version()) != Some(moat_protocol::Era::Modern) {
        return tool.task_support() != TaskSupport::Forbidden;
    }
    if era(ctx.protocol_version()) != Some(moat_protocol::Era::Modern) {
        return true;
    }
    ctx.client_capabilities()
        .and_then(|c| c.extensions.as_ref())
        .is_some_and(|e| e.contains_key(moat_protocol::types::tasks_extension::ID))
}

/// The size of `result` as JSON, counted without building the text.
fn encoded_len(result: &CallToolResult) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, result) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

/// The arguments against the tool's `inputSchema`: the first few errors, with where.
fn validate(entry: &ToolEntry, args: &Value) -> Result<(), String> {
    let validator = entry.validator().map_err(|e| {
        format!("its inputSchema cannot be compiled ({e}), so moat cannot check the arguments")
    })?;
    // The common case, valid arguments, without building any error.
    if validator.is_valid(args) {
        return Ok(());
    }
    let errors: Vec<String> = validator
        .iter_errors(args)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

fn refuse(record: &mut AuditRecord, refusal: Refusal, message: String) -> CallToolResult {
    record.refuse(&refusal, &message);
    CallToolResult::error(message)
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

    /// The size of the future `f` returns, without calling it.
    fn future_size<F, Fut>(_: &F) -> usize
    where
        F: Fn(Arc<Inner>, RequestContext, &'static str, Value) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// Every call in flight holds this future, and it is moved (copied) as it is wrapped on
    /// its way to the runtime. With consent, the shared rate limit, tasks and per-user
    /// connections inline it was 13.7 KB; boxed, those paths cost a pointer each (5.7 KB).
    #[test]
    fn a_calls_future_stays_small() {
        let size = future_size(&call);
        assert!(
            size <= 8 * 1024,
            "call's future is {size} bytes: box the await that grew it (see `forward`)"
        );
    }
}
