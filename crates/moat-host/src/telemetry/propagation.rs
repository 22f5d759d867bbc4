//! W3C trace context in `_meta`: the 2026-07-28 revision (SEP-414) carries `traceparent`,
//! `tracestate` and `baggage` in a request's `_meta`, so a trace follows a tool call from
//! the client through the gateway to the server.

use opentelemetry::Context;
use opentelemetry::propagation::{
    Extractor, Injector, TextMapCompositePropagator, TextMapPropagator,
};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use serde_json::{Map, Value};

/// The `_meta` keys trace context travels in.
pub const KEYS: [&str; 3] = ["traceparent", "tracestate", "baggage"];

fn propagator() -> TextMapCompositePropagator {
    TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ])
}

struct MetaReader<'a>(&'a Map<String, Value>);

impl Extractor for MetaReader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        KEYS.iter()
            .copied()
            .filter(|k| self.0.contains_key(*k))
            .collect()
    }
}

struct MetaWriter<'a>(&'a mut Map<String, Value>);

impl Injector for MetaWriter<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), Value::String(value));
    }
}

/// The trace context a request's `_meta` carries (an empty context when it has none, or
/// one that does not parse).
pub fn extract(meta: &Map<String, Value>) -> Context {
    propagator().extract(&MetaReader(meta))
}

/// [`extract`] from `_meta` as the request carried it, unparsed.
pub fn extract_raw(meta: Option<&serde_json::value::RawValue>) -> Option<Context> {
    let raw = meta?;
    // Only the three keys matter: most `_meta` has none, and is not parsed further.
    if !KEYS.iter().any(|k| raw.get().contains(k)) {
        return None;
    }
    let map: Map<String, Value> = serde_json::from_str(raw.get()).ok()?;
    Some(extract(&map))
}

/// Writes `cx` into `meta` (replacing the trace context it carried: the downstream call
/// is a child of the gateway's span, not of the client's).
pub fn inject(cx: &Context, meta: &mut Map<String, Value>) {
    propagator().inject_context(cx, &mut MetaWriter(meta));
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TraceContextExt;
    use serde_json::json;

    use super::*;

    fn meta(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_traceparent_in_meta_is_the_remote_parent() {
        let cx = extract(&meta(json!({
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "tracestate": "vendor=value",
            "other": 1,
        })));
        let span = cx.span();
        let sc = span.span_context();
        assert!(sc.is_valid() && sc.is_remote() && sc.is_sampled());
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert_eq!(sc.trace_state().get("vendor"), Some("value"));
    }

    #[test]
    fn a_malformed_traceparent_is_no_parent() {
        for bad in [
            json!("00-xyz"),
            json!(42),
            json!("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
        ] {
            let cx = extract(&meta(json!({ "traceparent": bad })));
            assert!(!cx.span().span_context().is_valid(), "{bad}");
        }
    }

    #[test]
    fn meta_without_trace_context_is_not_parsed() {
        let raw = serde_json::value::RawValue::from_string(r#"{"progressToken":1}"#.into())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(extract_raw(Some(&raw)).is_none());
        assert!(extract_raw(None).is_none());
    }

    #[test]
    fn injecting_no_span_leaves_the_callers_context_in_place() {
        let mut m = meta(
            json!({ "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" }),
        );
        inject(&Context::new(), &mut m);
        assert_eq!(
            m["traceparent"],
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn a_context_is_written_back_as_it_was_read() {
        let incoming = extract(&meta(json!({
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "baggage": "user=alice",
        })));
        let mut m = Map::new();
        inject(&incoming, &mut m);
        assert_eq!(
            m["traceparent"],
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(m["baggage"], "user=alice");
    }
}
