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
