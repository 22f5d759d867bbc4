//! JSON-RPC 2.0 envelopes, decoded borrowed and encoded without intermediate values.
//!
//! [`Message::parse`] looks at the envelope only: the method is a `&str`, params and results
//! stay `&RawValue` until whoever handles them decodes them, exactly once, into their own type.
//! Every way a line can be wrong maps to one [`EnvelopeError`], which knows the JSON-RPC error
//! code to answer with and the id to answer to (if one could be read).

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::{ErrorObject, INVALID_REQUEST, PARSE_ERROR};
use crate::id::RequestId;

/// One decoded JSON-RPC message, borrowing from the input.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Message<'a> {
    /// A request: expects a response with the same id.
    Request(Request<'a>),
    /// A notification: no id, no response.
    Notification(Notification<'a>),
    /// A successful response.
    Response(Response<'a>),
    /// An error response.
    Error(ErrorResponse),
}

/// A request, borrowing from the input.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The request id.
    pub id: RequestId,
    /// The method name.
    pub method: Cow<'a, str>,
    /// The params, undecoded.
    pub params: Option<&'a RawValue>,
}

/// A notification, borrowing from the input.
#[derive(Debug, Clone)]
pub struct Notification<'a> {
    /// The method name.
    pub method: Cow<'a, str>,
    /// The params, undecoded.
    pub params: Option<&'a RawValue>,
}

/// A successful response, borrowing from the input.
#[derive(Debug, Clone)]
pub struct Response<'a> {
    /// The id of the request this answers.
    pub id: RequestId,
    /// The result, undecoded.
    pub result: &'a RawValue,
}

/// An error response.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorResponse {
    /// The id of the request this answers; `None` when the request's id could not be read.
    pub id: Option<RequestId>,
    /// The error.
    pub error: ErrorObject,
}

/// Why a line is not a valid JSON-RPC message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error}")]
pub struct EnvelopeError {
    /// The id to answer to, when the message had a readable one. `None` answers with `"id": null`.
    pub id: Option<RequestId>,
    /// The error to answer with (-32700 or -32600).
    pub error: ErrorObject,
    /// Whether an answer is due. A malformed notification gets none; anything whose
    /// kind could not be told gets one with `id: null`, as JSON-RPC asks.
    pub respond: bool,
}

impl EnvelopeError {
    fn parse(message: String) -> Self {
        EnvelopeError {
            id: None,
            error: ErrorObject::new(PARSE_ERROR, message),
            respond: true,
        }
    }

    fn invalid(id: Option<RequestId>, message: impl Into<String>) -> Self {
        EnvelopeError {
            id,
            error: ErrorObject::new(INVALID_REQUEST, message),
            respond: true,
        }
    }
}

/// A present-but-raw field; distinguishes `"id": null` (present) from a missing `id`.
#[derive(Default)]
struct Field<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(d).map(|raw| Field(Some(raw)))
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Field<'a>,
    #[serde(default, borrow)]
    id: Field<'a>,
    #[serde(default, borrow)]
    method: Field<'a>,
    #[serde(default, borrow)]
    params: Field<'a>,
    #[serde(default, borrow)]
    result: Field<'a>,
    #[serde(default, borrow)]
    error: Field<'a>,
}

fn describe(e: &serde_json::Error) -> String {
    let text = e.to_string();
    if text.contains("recursion limit exceeded") {
        "Parse error: message nested too deeply (limit 128)".to_owned()
    } else {
        format!("Parse error: {text}")
    }
}

/// The deepest nesting of arrays and objects accepted in params (serde_json's own limit).
pub const MAX_DEPTH: usize = 128;

/// Whether the JSON text nests arrays/objects deeper than `limit`. Brackets inside strings
/// do not count. Linear, allocation-free, and skipped for texts too short to be that deep.
fn nesting_exceeds(text: &str, limit: usize) -> bool {
    if text.len() <= limit {
        return false;
    }
    // Depth never exceeds the number of opening brackets: a count settles almost every
    // message without the byte-by-byte walk that tells strings apart. It adds bytes in
    // chunks that cannot overflow a `u8`, so the compiler counts 16 bytes per instruction
    // rather than widening each byte to a `usize`.
    let openers: usize = text
        .as_bytes()
        .chunks(usize::from(u8::MAX))
        .map(|chunk| {
            let n: u8 = chunk
                .iter()
                .map(|&b| u8::from(b == b'{' || b == b'['))
                .sum();
            usize::from(n)
        })
        .sum();
    if openers <= limit {
        return false;
    }
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text.as_bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Whether `line` (after leading whitespace) starts a JSON array: a batch.
pub fn is_batch(line: &str) -> bool {
    line.trim_start().starts_with('[')
}

impl<'a> Message<'a> {
    /// Decode one message (not a batch).
    pub fn parse(line: &'a str) -> Result<Message<'a>, EnvelopeError> {
        let env: Envelope<'a> = match serde_json::from_str(line) {
            Ok(env) => env,
            Err(e) => {
                return Err(match e.classify() {
                    serde_json::error::Category::Data => {
                        // Valid JSON of the wrong shape: not an object, or a duplicate member.
                        if line.trim_start().starts_with('{') {
                            EnvelopeError::invalid(None, format!("Invalid request: {e}"))
                        } else {
                            EnvelopeError::invalid(
                                None,
                                "Invalid request: a message must be a JSON object",
                            )
                        }
                    }
                    _ => EnvelopeError::parse(describe(&e)),
                });
            }
        };
        Self::from_envelope(env)
    }

    /// Decode a batch (a JSON array of messages). Each element is decoded on its own, so one
    /// bad element does not spoil the rest. An empty array is itself invalid.
    pub fn parse_batch(
        line: &'a str,
    ) -> Result<Vec<Result<Message<'a>, EnvelopeError>>, EnvelopeError> {
        let items: Vec<&'a RawValue> =
            serde_json::from_str(line).map_err(|e| match e.classify() {
                serde_json::error::Category::Data => {
                    EnvelopeError::invalid(None, format!("Invalid request: {e}"))
                }
                _ => EnvelopeError::parse(describe(&e)),
            })?;
        if items.is_empty() {
            return Err(EnvelopeError::invalid(None, "Invalid request: empty batch"));
        }
        Ok(items
            .into_iter()
            .map(|raw| {
                if raw.get().trim_start().starts_with('{') {
                    Message::parse(raw.get())
                } else {
                    Err(EnvelopeError::invalid(
                        None,
                        "Invalid request: a batch element must be a JSON object",
                    ))
                }
            })
            .collect())
    }

    fn from_envelope(env: Envelope<'a>) -> Result<Message<'a>, EnvelopeError> {
        // Read the id first, so that every later complaint can be addressed to it.
        let id = match env.id.0 {
            None => None,
            Some(raw) => match serde_json::from_str::<RequestId>(raw.get()) {
                Ok(id) => Some(id),
                // An error response may carry `id: null` (its request's id was unreadable);
                // answering it would start two peers replying to each other's errors.
                Err(_)
                    if raw.get() == "null" && env.method.0.is_none() && env.error.0.is_some() =>
                {
                    None
                }
                Err(_) => {
                    let what = match raw.get().as_bytes().first() {
                        Some(b'n') => "null",
                        Some(b'{') => "an object",
                        Some(b'[') => "an array",
                        Some(b't' | b'f') => "a boolean",
                        _ => "not a string or an integer",
                    };
                    return Err(EnvelopeError::invalid(
                        None,
                        format!("Invalid request: id must be a string or an integer, got {what}"),
                    ));
                }
            },
        };
        let is_notification = env.method.0.is_some() && env.id.0.is_none();
        let fail = |message: String| {
            let mut e = EnvelopeError::invalid(id.clone(), message);
            e.respond = !is_notification;
            e
        };
        match env.jsonrpc.0.map(RawValue::get) {
            Some("\"2.0\"") => {}
            Some(other) => {
                return Err(fail(format!(
                    "Invalid request: jsonrpc must be \"2.0\", got {other}"
                )));
            }
            None => {
                return Err(fail(
                    "Invalid request: missing \"jsonrpc\": \"2.0\"".to_owned(),
                ));
            }
        }
        if let Some(raw) = env.method.0 {
            // Borrowed unless it has escapes (a `Cow` alone would always copy).
            let method: Cow<'a, str> = match serde_json::from_str::<&'a str>(raw.get()) {
                Ok(m) => Cow::Borrowed(m),
                Err(_) => match serde_json::from_str::<String>(raw.get()) {
                    Ok(m) => Cow::Owned(m),
                    Err(_) => {
                        return Err(fail("Invalid request: method must be a string".to_owned()));
                    }
                },
            };
            if env.result.0.is_some() || env.error.0.is_some() {
                return Err(fail(
                    "Invalid request: a request cannot carry result or error".to_owned(),
                ));
            }
            if let Some(p) = env.params.0 {
                match p.get().as_bytes().first() {
                    Some(b'{' | b'[') => {}
                    _ => {
                        return Err(fail(
                            "Invalid request: params must be an object or an array".to_owned(),
                        ));
                    }
                }
                // Raw capture does not bound nesting; check it here so every handler can
                // rely on it (and a pathological message gets one clear answer).
                if nesting_exceeds(p.get(), MAX_DEPTH) {
                    let mut e = fail(format!(
                        "Parse error: params nested deeper than {MAX_DEPTH} levels"
                    ));
                    e.error.code = PARSE_ERROR;
                    return Err(e);
                }
            }
            return Ok(match id {
                Some(id) => Message::Request(Request {
                    id,
                    method,
                    params: env.params.0,
                }),
                None => Message::Notification(Notification {
                    method,
                    params: env.params.0,
                }),
            });
        }
        match (env.result.0, env.error.0) {
            (Some(result), None) => match id {
                Some(id) => Ok(Message::Response(Response { id, result })),
                None => Err(EnvelopeError::invalid(None, "Invalid response: missing id")),
            },
            (None, Some(error)) => match serde_json::from_str::<ErrorObject>(error.get()) {
                Ok(error) => Ok(Message::Error(ErrorResponse { id, error })),
                Err(e) => Err(EnvelopeError {
                    respond: false,
                    ..EnvelopeError::invalid(id, format!("Invalid error response: {e}"))
                }),
            },
            (Some(_), Some(_)) => Err(EnvelopeError {
                respond: false,
                ..EnvelopeError::invalid(id, "Invalid response: both result and error")
            }),
            (None, None) => Err(EnvelopeError::invalid(
                id,
                "Invalid request: no method, result or error",
            )),
        }
    }
}

impl Request<'_> {
    /// Decode the params into `T`; a missing `params` decodes as `{}`.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, ErrorObject> {
        decode_params(self.params)
    }
}

impl Notification<'_> {
    /// Decode the params into `T`; a missing `params` decodes as `{}`.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, ErrorObject> {
        decode_params(self.params)
    }
}

/// Decode params into `T` (missing → `{}`), mapping failure to -32602. MCP params are
/// always an object: JSON-RPC's by-position (array) params are refused rather than
/// matched to fields by order.
pub fn decode_params<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    crate::count::params_read();
    let text = params.map_or("{}", RawValue::get);
    if !text.trim_start().starts_with('{') {
        return Err(ErrorObject::invalid_params(
            "Invalid params: MCP params must be a JSON object",
        ));
    }
    serde_json::from_str(text)
        .map_err(|e| ErrorObject::invalid_params(format!("Invalid params: {e}")))
}

#[derive(Serialize)]
struct OutRequest<'a, P: ?Sized> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

#[derive(Serialize)]
struct OutNotification<'a, P: ?Sized> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

#[derive(Serialize)]
struct OutResult<'a, R: ?Sized> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a R,
}

#[derive(Serialize)]
struct OutError<'a> {
    jsonrpc: &'static str,
    id: Option<&'a RequestId>,
    error: &'a ErrorObject,
}

/// Encoding failed: only possible for a `Serialize` impl that errors (e.g. a map with non-string keys).
#[derive(Debug, thiserror::Error)]
#[error("could not encode a JSON-RPC message: {0}")]
pub struct EncodeError(#[from] serde_json::Error);

/// Encode a request.
pub fn encode_request<P: Serialize + ?Sized>(
    id: &RequestId,
    method: &str,
    params: Option<&P>,
) -> Result<String, EncodeError> {
    Ok(serde_json::to_string(&OutRequest {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })?)
}

/// Encode a notification.
pub fn encode_notification<P: Serialize + ?Sized>(
    method: &str,
    params: Option<&P>,
) -> Result<String, EncodeError> {
    Ok(serde_json::to_string(&OutNotification {
        jsonrpc: "2.0",
        method,
        params,
    })?)
}

/// Encode a successful response.
pub fn encode_result<R: Serialize + ?Sized>(
    id: &RequestId,
    result: &R,
) -> Result<String, EncodeError> {
    Ok(serde_json::to_string(&OutResult {
        jsonrpc: "2.0",
        id,
        result,
    })?)
}

/// Encode an error response. `id: None` is written as `"id": null`.
pub fn encode_error(id: Option<&RequestId>, error: &ErrorObject) -> String {
    // An ErrorObject always serializes: string keys, a `Value` for data.
    serde_json::to_string(&OutError {
        jsonrpc: "2.0",
        id,
        error,
    })
    .unwrap_or_else(|_| {
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}"#
            .to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: &str) -> EnvelopeError {
        match Message::parse(line) {
            Ok(_) => panic!("accepted: {}", &line[..line.len().min(80)]),
            Err(e) => e,
        }
    }

    /// The method is read in place, and one written with escapes still reads right.
    #[test]
    fn a_method_borrows_from_the_line_unless_escaped() {
        let Ok(Message::Request(r)) =
            Message::parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        else {
            panic!("a request")
        };
        assert!(matches!(r.method, Cow::Borrowed("tools/list")));
        let Ok(Message::Request(r)) =
            Message::parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools\/list"}"#)
        else {
            panic!("a request")
        };
        assert!(matches!(r.method, Cow::Owned(ref m) if m == "tools/list"));
        assert!(Message::parse(r#"{"jsonrpc":"2.0","id":1,"method":7}"#).is_err());
    }

    #[test]
    fn decodes_each_kind() {
        let m = Message::parse(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
        )
        .unwrap();
        let Message::Request(r) = m else { panic!() };
        assert_eq!(r.id, RequestId::Number(1));
        assert_eq!(r.method, "tools/call");
        assert_eq!(r.params.unwrap().get(), r#"{"name":"x"}"#);

        let m =
            Message::parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(m, Message::Notification(_)));
        let m = Message::parse(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert!(matches!(
            m,
            Message::Response(Response {
                id: RequestId::String(_),
                ..
            })
        ));
        let m =
            Message::parse(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}"#)
                .unwrap();
        let Message::Error(e) = m else { panic!() };
        assert_eq!(e.error.code, -32601);
        let m =
            Message::parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#)
                .unwrap();
        assert!(matches!(m, Message::Error(ErrorResponse { id: None, .. })));
        assert!(
            decode_params::<crate::types::EmptyResult>(
                RawValue::from_string("[1]".into()).ok().as_deref()
            )
            .is_err()
        );
    }

    #[test]
    fn escaped_method_names_decode() {
        let m = Message::parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools\/list"}"#).unwrap();
        let Message::Request(r) = m else { panic!() };
        assert_eq!(r.method, "tools/list");
    }

    #[test]
    fn bad_envelopes_get_the_right_code() {
        assert_eq!(err("{not json").error.code, PARSE_ERROR);
        assert_eq!(err("42").error.code, INVALID_REQUEST);
        assert_eq!(err(r#""str""#).error.code, INVALID_REQUEST);
        assert_eq!(
            err(r#"{"id":1,"method":"ping"}"#).error.code,
            INVALID_REQUEST
        );
        assert_eq!(
            err(r#"{"id":1,"method":"ping"}"#).id,
            Some(RequestId::Number(1))
        );
        assert_eq!(
            err(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#)
                .error
                .code,
            INVALID_REQUEST
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#)
                .error
                .code,
            INVALID_REQUEST
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#)
                .error
                .code,
            INVALID_REQUEST
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#)
                .error
                .code,
            INVALID_REQUEST
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#)
                .error
                .code,
            INVALID_REQUEST
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":7}"#).error.code,
            INVALID_REQUEST
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#)
                .error
                .code,
            INVALID_REQUEST
        );
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{deep}}}"#);
        let deep = err(&line);
        assert_eq!(deep.error.code, PARSE_ERROR);
        assert_eq!(deep.id, Some(RequestId::Number(1)));
        // Brackets inside strings are not nesting.
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"x","params":{{"s":"{}"}}}}"#,
            "[".repeat(500)
        );
        assert!(Message::parse(&text).is_ok());
    }

    #[test]
    fn nesting_is_bounded_exactly_at_the_limit() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(!nesting_exceeds(&nested(MAX_DEPTH), MAX_DEPTH));
        assert!(nesting_exceeds(&nested(MAX_DEPTH + 1), MAX_DEPTH));
        // More opening brackets than the limit, none of them deep: counted, then walked.
        let wide = format!("[{}]", vec!["{}"; 3 * MAX_DEPTH].join(","));
        assert!(!nesting_exceeds(&wide, MAX_DEPTH));
        let padded = format!(
            r#"{{"pad":"{}","deep":{}}}"#,
            "x".repeat(500),
            nested(MAX_DEPTH)
        );
        assert!(nesting_exceeds(&padded, MAX_DEPTH));
    }

    #[test]
    fn malformed_notification_is_not_answered() {
        let e = err(r#"{"jsonrpc":"1.0","method":"notifications/initialized"}"#);
        assert!(!e.respond);
    }

    #[test]
    fn batches_decode_elementwise() {
        let items =
            Message::parse_batch(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}, 5]"#).unwrap();
        assert!(items[0].is_ok());
        assert!(items[1].is_err());
        assert!(Message::parse_batch("[]").is_err());
        assert!(is_batch("  [1]"));
    }

    #[test]
    fn encodes() {
        let id = RequestId::Number(7);
        assert_eq!(
            encode_request(&id, "ping", None::<&()>).unwrap(),
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#
        );
        assert_eq!(
            encode_error(None, &ErrorObject::parse_error("x")),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#
        );
    }
}
