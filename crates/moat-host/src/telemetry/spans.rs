//! The spans of a `tools/call` through the gateway, with the MCP and GenAI semantic
//! conventions' attribute names (`mcp.method.name`, `gen_ai.tool.name`, …) and moat's own
//! (`moat.policy.decision`, `moat.consent`, …). A child of the trace context in the
//! request's `_meta`; its children are policy, consent and the downstream call.

use moat::RequestContext;
use serde_json::{Map, Value};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{TARGET, propagation};
use crate::audit::AuditRecord;

/// The span of one `tools/call` of `exposed`, its parent taken from the request's `_meta`.
pub(crate) fn call(ctx: &RequestContext, exposed: &str) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "tools/call",
        otel.name = %format_args!("tools/call {exposed}"),
        otel.kind = "server",
        otel.status_code = Empty,
        mcp.method.name = "tools/call",
        mcp.protocol.version = Empty,
        mcp.session.id = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = exposed,
        moat.server = Empty,
        moat.tool = Empty,
        moat.policy.decision = Empty,
        moat.policy.rule = Empty,
        moat.consent = Empty,
        moat.outcome = Empty,
        moat.result.size = Empty,
        error.type = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if let Some(version) = ctx.protocol_version() {
        span.record("mcp.protocol.version", tracing::field::display(version));
    }
    // `_meta` first (SEP-414), else the HTTP request's `traceparent` header.
    let parent = propagation::extract_raw(ctx.request_meta()).or_else(|| {
        let t = ctx.trace_context()?;
        let mut keys = serde_json::Map::new();
        keys.insert("traceparent".into(), t.traceparent.into());
        if let Some(state) = t.tracestate {
            keys.insert("tracestate".into(), state.into());
        }
        if let Some(baggage) = t.baggage {
            keys.insert("baggage".into(), baggage.into());
        }
        Some(propagation::extract(&keys))
    });
    if let Some(parent) = parent
        && let Err(e) = span.set_parent(parent)
    {
        tracing::debug!(error = %e, "the request's trace context not used");
    }
    span
}

/// Puts what the call's audit record says on its span.
pub(crate) fn ended(span: &Span, record: &AuditRecord) {
    if span.is_disabled() {
        return;
    }
    span.record("mcp.session.id", record.session.as_str());
    span.record("moat.server", record.server.as_str());
    span.record("moat.tool", record.tool.as_str());
    span.record("moat.policy.decision", record.decision.as_str());
    span.record("moat.policy.rule", record.rule.as_str());
    if let Some(consent) = &record.consent {
        span.record("moat.consent", consent.as_str());
    }
    span.record("moat.outcome", record.outcome.as_str());
    span.record(
        "moat.result.size",
        i64::try_from(record.result_bytes).unwrap_or(i64::MAX),
    );
    match record.outcome.as_str() {
        "ok" => {}
        outcome => {
            span.record("error.type", outcome);
            if outcome != "refused" {
                span.record("otel.status_code", "ERROR");
            }
        }
    }
}

/// The policy evaluation's span.
pub(crate) fn policy() -> Span {
    tracing::info_span!(target: TARGET, "policy", otel.name = "moat.policy")
}

/// The span of a wait for consent.
pub(crate) fn consent(reason: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "consent",
        otel.name = "moat.consent",
        moat.consent.reason = reason,
        moat.consent = Empty
    )
}

/// The span of the call forwarded to `server`; `meta` (the downstream request's `_meta`)
/// gets its trace context, so the server's spans are its children.
pub(crate) fn downstream(server: &str, tool: &str, meta: &mut Map<String, Value>) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "downstream",
        otel.name = %format_args!("tools/call {tool}"),
        otel.kind = "client",
        mcp.method.name = "tools/call",
        gen_ai.tool.name = tool,
        moat.server = server,
    );
    if !span.is_disabled() {
        propagation::inject(&span.context(), meta);
    }
    span
}

/// The span of a sandboxed server's start.
pub(crate) fn sandbox_spawn(server: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "sandbox spawn",
        otel.name = "moat.sandbox.spawn",
        moat.server = server
    )
}

/// The span of a request the gateway forwards other than `tools/call` (`prompts/get`,
/// `resources/read`): `target` is the prompt's name or the resource's URI on `server`.
pub(crate) fn request(method: &str, target: &str, server: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "request",
        otel.name = %format_args!("{method} {target}"),
        otel.kind = "client",
        mcp.method.name = method,
        moat.server = server,
    )
}
