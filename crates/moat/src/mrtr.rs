//! Multi round-trip requests (2026-07-28): how a server asks the client for input without
//! sending it requests.
//!
//! A handler calls [`RequestContext::elicit`](crate::RequestContext::elicit) (or
//! `create_message`, `list_roots`) exactly as in the handshake era. In the modern era the
//! call is recorded in the request's [`Round`]; if the client has not answered it yet, the
//! handler is dropped and the request is answered with an `InputRequiredResult`. The client
//! retries with `inputResponses`, the handler runs again from the start, and this time the
//! call returns the client's answer. Answers from earlier rounds travel in `requestState`,
//! which is attacker-controlled input: it is bound to the request (method, name, a digest of
//! the arguments), carries an expiry, and is protected with HMAC-SHA256. Only the answers
//! the handler used are sealed, and a retry cannot replace them.
//!
//! Input requests are keyed by kind and call order (`elicitation-0`, …) unless the handler
//! names them ([`RequestContext::keyed`](crate::RequestContext::keyed)); those asked in the
//! same poll (under `join!`) go out together. An answer of the wrong shape fails the
//! request with -32602, and a handler that fails after asking for a capability the client
//! did not declare is answered with -32021 naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use moat_protocol::ErrorObject;
use moat_protocol::error::MISSING_REQUIRED_CLIENT_CAPABILITY;
use moat_protocol::types::InputRequest;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use crate::task::Launch;

type HmacSha256 = Hmac<Sha256>;

/// How long a `requestState` stays valid.
pub(crate) const STATE_TTL: Duration = Duration::from_secs(15 * 60);

/// The secret that protects `requestState`. Random per process by default; servers behind a
/// load balancer share one so that any instance can take a retry.
#[derive(Clone)]
pub struct StateKey([u8; 32]);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(..)")
    }
}

impl StateKey {
    /// A fresh random key.
    pub fn random() -> StateKey {
        StateKey(rand::random())
    }

    /// A key from bytes (e.g. from a secret store), shared by every instance of a server.
    pub fn from_bytes(bytes: [u8; 32]) -> StateKey {
        StateKey(bytes)
    }

    /// A key derived from a secret text shared by every instance (at least 32 characters,
    /// e.g. `openssl rand -base64 32`); `None` for a shorter one, which could be guessed.
    pub fn from_secret(secret: &str) -> Option<StateKey> {
        let secret = secret.trim();
        if secret.chars().count() < 32 {
            return None;
        }
        let mut digest = Sha256::new();
        digest.update(b"moat requestState key v1\0");
        digest.update(secret.as_bytes());
        Some(StateKey(digest.finalize().into()))
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC accepts keys of any length; 32 bytes never fails.
        <HmacSha256 as Mac>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!())
    }
}

/// What a `requestState` is bound to: the request it was issued for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Binding {
    /// `tools/call`, `prompts/get` or `resources/read`.
    pub method: String,
    /// The tool or prompt name, or the resource URI.
    pub target: String,
    /// SHA-256 of the canonical JSON of the arguments, hex.
    pub args: String,
}

impl Binding {
    pub(crate) fn new(method: &str, target: &str, args: Option<&Value>) -> Binding {
        let mut canonical = String::new();
        if let Some(args) = args {
            write_canonical(args, &mut canonical);
        }
        let digest = Sha256::digest(canonical.as_bytes());
        Binding {
            method: method.to_owned(),
            target: target.to_owned(),
            args: hex(&digest),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// JSON with object keys sorted, so a client that re-serializes its arguments in another
/// order still matches.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[derive(Serialize, Deserialize)]
struct StatePayload {
    #[serde(rename = "b")]
    binding: Binding,
    /// Expiry, seconds since the Unix epoch.
    #[serde(rename = "e")]
    expires: u64,
    /// Answers from earlier rounds, by input-request key.
    #[serde(rename = "r")]
    responses: BTreeMap<String, Value>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Seal earlier answers into a `requestState` for `binding`.
pub(crate) fn seal(
    key: &StateKey,
    binding: &Binding,
    responses: &BTreeMap<String, Value>,
) -> String {
    let payload = StatePayload {
        binding: binding.clone(),
        expires: now_secs() + STATE_TTL.as_secs(),
        responses: responses.clone(),
    };
    let body = serde_json::to_vec(&payload).unwrap_or_default();
    let mut mac = key.mac();
    mac.update(&body);
    let tag = mac.finalize().into_bytes();
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(&body),
        URL_SAFE_NO_PAD.encode(tag)
    )
}

/// Verify and open a `requestState`: integrity first (constant-time), under `key` or one of
/// the `retired` keys (a rotation: states sealed before it stay valid until they expire),
/// then expiry, then that it was issued for this very request.
pub(crate) fn open(
    key: &StateKey,
    retired: &[StateKey],
    state: &str,
    binding: &Binding,
) -> Result<BTreeMap<String, Value>, ErrorObject> {
    let invalid =
        |why: &str| ErrorObject::invalid_params(format!("Invalid params: requestState {why}"));
    let (body, tag) = state
        .split_once('.')
        .ok_or_else(|| invalid("is malformed"))?;
    let body = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| invalid("is malformed"))?;
    let tag = URL_SAFE_NO_PAD
        .decode(tag)
        .map_err(|_| invalid("is malformed"))?;
    let verified = std::iter::once(key).chain(retired).any(|key| {
        let mut mac = key.mac();
        mac.update(&body);
        mac.verify_slice(&tag).is_ok()
    });
    if !verified {
        return Err(invalid("failed verification"));
    }
    let payload: StatePayload =
        serde_json::from_slice(&body).map_err(|_| invalid("is malformed"))?;
    if payload.expires < now_secs() {
        return Err(invalid("has expired; start the request again"));
    }
    if &payload.binding != binding {
        return Err(invalid("belongs to a different request"));
    }
    Ok(payload.responses)
}

/// One round of a modern-era request: the answers known so far, the questions asked, and
/// whatever stops the handler from going on (an unanswered question, an invalid answer, a
/// capability the client lacks).
///
/// For a task-capable tool it also links to the [`Launch`] that may turn the request into a
/// task; once it has, the handler's input requests go to the task instead.
#[derive(Debug, Default)]
pub(crate) struct Round {
    answers: BTreeMap<String, Value>,
    state: Mutex<RoundState>,
    notify: Notify,
    launch: OnceLock<Arc<Launch>>,
}

#[derive(Debug, Default)]
struct RoundState {
    /// Questions asked and not answered, in the order asked.
    asked: Vec<(String, InputRequest)>,
    /// Keys whose answers the handler used (the only ones carried into the next round).
    used: BTreeSet<String>,
    /// Auto-assigned keys handed out so far.
    counter: usize,
    /// An answer the handler cannot use: the request fails with this error.
    failure: Option<ErrorObject>,
    /// Capabilities the handler needed and the client did not declare.
    lacking: BTreeSet<&'static str>,
}

/// The error for a handler that needed capabilities the client did not declare: `-32021`,
/// with `data.requiredCapabilities` naming them.
pub(crate) fn missing_capabilities(names: &[&str]) -> ErrorObject {
    // `elicitation.url` is `{"elicitation": {"url": {}}}`.
    let mut required = serde_json::Map::new();
    for name in names {
        let mut at = &mut required;
        for part in name.split('.') {
            let next = at
                .entry(part.to_owned())
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if !next.is_object() {
                *next = Value::Object(serde_json::Map::new());
            }
            let Value::Object(inner) = next else { break };
            at = inner;
        }
    }
    ErrorObject::new(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!(
            "Missing required client capability: {} (declare it in \
             io.modelcontextprotocol/clientCapabilities)",
            names.join(", ")
        ),
    )
    .with_data(serde_json::json!({ "requiredCapabilities": required }))
}

/// What stopped a round's handler.
#[derive(Debug)]
pub(crate) enum Stall {
    /// It asked for input the client has not given yet.
    NeedsInput(Vec<(String, InputRequest)>),
    /// An answer was invalid.
    Failed(ErrorObject),
}

impl Round {
    pub(crate) fn new(answers: BTreeMap<String, Value>) -> Round {
        Round {
            answers,
            ..Default::default()
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, RoundState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A key for a request the handler did not name: by kind and call order, so the same
    /// handler code gets the same keys on every run.
    pub(crate) fn next_key(&self, request: &InputRequest) -> String {
        let kind = match request {
            InputRequest::CreateMessage(_) => "sampling",
            InputRequest::Elicit(_) => "elicitation",
            InputRequest::ListRoots(_) => "roots",
            _ => "input",
        };
        let mut st = self.state();
        let key = format!("{kind}-{}", st.counter);
        st.counter += 1;
        key
    }

    /// Link the request to the task it may become.
    pub(crate) fn set_launch(&self, launch: Arc<Launch>) {
        let _ = self.launch.set(launch);
    }

    /// The task the request may become, if its tool is task-capable.
    pub(crate) fn launch(&self) -> Option<&Arc<Launch>> {
        self.launch.get()
    }

    /// The client's answer to input request `key`, if this round carries it.
    pub(crate) fn answered(&self, key: &str) -> Option<Value> {
        let answer = self.answers.get(key)?.clone();
        self.state().used.insert(key.to_owned());
        Some(answer)
    }

    /// The answer to input request `key`, or (never returning) a note that it is needed.
    pub(crate) async fn ask(&self, key: String, request: InputRequest) -> Value {
        if let Some(answer) = self.answered(&key) {
            return answer;
        }
        self.state().asked.push((key, request));
        self.notify.notify_one();
        std::future::pending().await
    }

    /// Fail the request with `error` (an answer the handler cannot use); never returns.
    pub(crate) async fn fail(&self, error: ErrorObject) -> ! {
        self.state().failure.get_or_insert(error);
        self.notify.notify_one();
        std::future::pending().await
    }

    /// Note that the handler needed a capability the client did not declare.
    pub(crate) fn lacks(&self, capability: &'static str) {
        self.state().lacking.insert(capability);
    }

    /// If the handler needed capabilities the client did not declare, the error that says
    /// so (`-32021`, with `data.requiredCapabilities` naming them).
    pub(crate) fn missing_capabilities(&self) -> Option<ErrorObject> {
        let st = self.state();
        if st.lacking.is_empty() {
            return None;
        }
        let names: Vec<&str> = st.lacking.iter().copied().collect();
        Some(missing_capabilities(&names))
    }

    /// Resolves once the handler is stuck: it asked for something not yet answered, or
    /// an answer was unusable. Requests made in the same poll (e.g. under `join!`) are
    /// all collected.
    pub(crate) async fn stalled(&self) -> Stall {
        self.notify.notified().await;
        let mut st = self.state();
        match st.failure.take() {
            Some(error) => Stall::Failed(error),
            None => Stall::NeedsInput(std::mem::take(&mut st.asked)),
        }
    }

    /// The answers the handler used in this round (to carry into the next).
    pub(crate) fn used_answers(&self) -> BTreeMap<String, Value> {
        let st = self.state();
        self.answers
            .iter()
            .filter(|(k, _)| st.used.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn state_round_trips_and_rejects_tampering() {
        let key = StateKey::random();
        let binding = Binding::new(
            "tools/call",
            "t",
            Some(&json!({"b": 1, "a": [1, {"y": 2, "x": 1}]})),
        );
        let mut answers = BTreeMap::new();
        answers.insert("elicitation-0".to_owned(), json!({"action": "accept"}));
        let state = seal(&key, &binding, &answers);
        assert_eq!(open(&key, &[], &state, &binding).unwrap(), answers);

        // Key order of the arguments does not matter.
        let same = Binding::new(
            "tools/call",
            "t",
            Some(&json!({"a": [1, {"x": 1, "y": 2}], "b": 1})),
        );
        assert!(open(&key, &[], &state, &same).is_ok());

        // Another request, another key, a flipped byte, garbage: all refused.
        let other = Binding::new("tools/call", "t", Some(&json!({"b": 2})));
        assert!(open(&key, &[], &state, &other).is_err());
        assert!(open(&StateKey::random(), &[], &state, &binding).is_err());
        let mut bytes = state.clone().into_bytes();
        bytes[3] = if bytes[3] == b'A' { b'B' } else { b'A' };
        assert!(open(&key, &[], &String::from_utf8(bytes).unwrap(), &binding).is_err());
        assert!(open(&key, &[], "not-a-state", &binding).is_err());
        let err = open(&key, &[], "x.y", &binding).unwrap_err();
        assert_eq!(err.code, -32602);
    }

    #[test]
    fn a_rotated_key_still_opens_what_it_sealed_and_secrets_must_be_long() {
        let old = StateKey::from_secret("an old secret of at least thirty-two characters").unwrap();
        let new = StateKey::from_secret("the new secret, also thirty-two characters long").unwrap();
        let binding = Binding::new("tools/call", "t", None);
        let state = seal(&old, &binding, &BTreeMap::new());
        assert!(
            open(&new, &[], &state, &binding).is_err(),
            "not without the old key"
        );
        assert!(open(&new, std::slice::from_ref(&old), &state, &binding).is_ok());
        // The same secret gives the same key on every instance.
        let again = StateKey::from_secret("  an old secret of at least thirty-two characters\n");
        assert!(open(&again.unwrap(), &[], &state, &binding).is_ok());
        assert!(StateKey::from_secret("short").is_none());
    }
}
