//! The head of a request: everything the layers above decide on, read from the params in
//! one pass.
//!
//! A request's params are parsed once, here, into borrowed fields: the `_meta` entries the
//! revisions define, the target (`name`, `uri`, `taskId`), the raw `arguments`, and the
//! 2026-07-28 retry fields (`inputResponses`, `requestState`). What a handler needs beyond
//! that (a tool's arguments, a list's cursor) it decodes from those slices into its own type.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::ErrorObject;
use crate::id::{ProgressToken, RequestId};
use crate::types::{LoggingLevel, methods, tasks_extension};
use crate::version::ProtocolVersion;

/// A request, decoded as far as any layer needs to route it, borrowing from the input.
#[derive(Debug, Clone)]
pub struct RequestHead<'a> {
    /// The request id.
    pub id: RequestId,
    /// The method name.
    pub method: Cow<'a, str>,
    /// The params as sent (for handlers that decode their own type).
    pub params: Option<&'a RawValue>,
    /// The revision the request is made in: its `_meta` revision (2026-07-28), else the
    /// connection's.
    pub version: Option<ProtocolVersion>,
    /// The `_meta` entries the revisions define.
    pub meta: RequestMeta<'a>,
    /// The named fields of the params, or why they could not be read (a params object
    /// of the wrong shape: only the methods that need the fields refuse it).
    pub fields: Result<ParamsFields<'a>, ErrorObject>,
}

impl<'a> RequestHead<'a> {
    /// Reads the head of request `id` (`method`, `params`): the one read of its params.
    /// Its revision is the session's to decide ([`Session::handle_request`]); until then
    /// it is `None`.
    ///
    /// [`Session::handle_request`]: super::Session::handle_request
    pub fn read(id: RequestId, method: Cow<'a, str>, params: Option<&'a RawValue>) -> Self {
        let (meta, fields) = read(params);
        RequestHead {
            id,
            method,
            params,
            version: None,
            meta,
            fields,
        }
    }

    /// Whether this is `initialize` (which 2026-07-28 removed).
    pub fn is_initialize(&self) -> bool {
        self.method == methods::INITIALIZE
    }

    /// What the `Mcp-Name` header mirrors for this request (Streamable HTTP, 2026-07-28):
    /// the tool or prompt name, the resource URI, or the task id (the tasks extension);
    /// empty when the params lack it. `None` for methods that mirror nothing.
    pub fn mirrored_name(&self) -> Option<&str> {
        let fields = self.fields.as_ref().ok();
        let field = match self.method.as_ref() {
            methods::TOOLS_CALL | methods::PROMPTS_GET => fields.and_then(|f| f.name.as_deref()),
            methods::RESOURCES_READ => fields.and_then(|f| f.uri.as_deref()),
            methods::TASKS_GET | methods::TASKS_CANCEL | tasks_extension::TASKS_UPDATE => {
                fields.and_then(|f| f.task_id.as_deref())
            }
            _ => return None,
        };
        Some(field.unwrap_or(""))
    }

    /// The tool whose arguments `Mcp-Param-*` headers may mirror (a `tools/call`'s).
    pub fn mirrored_tool(&self) -> Option<&str> {
        if self.method != methods::TOOLS_CALL {
            return None;
        }
        self.fields.as_ref().ok()?.name.as_deref()
    }

    /// The same head, owned (copied, not read again), for a transport that read it to hand
    /// it on to the session.
    pub fn into_owned(mut self) -> OwnedRequestHead {
        OwnedRequestHead {
            line: String::new(),
            protocol_version: self.meta.protocol_version.take().map(Cow::into_owned),
            parts: self.into_parts(),
        }
    }

    /// The pieces of this head, owned (copied where borrowed), for a handler's task.
    pub fn into_parts(self) -> RequestParts {
        RequestParts {
            id: self.id,
            method: self.method.into_owned(),
            params: self.params.map(ToOwned::to_owned),
            meta: self.meta.raw.map(ToOwned::to_owned),
            progress_token: self.meta.progress_token,
            client_capabilities: self.meta.client_capabilities.map(ToOwned::to_owned),
            client_info: self.meta.client_info.map(ToOwned::to_owned),
            log_level: self.meta.log_level,
            fields: self.fields.map(|f| f.to_owned_fields()),
        }
    }
}

/// A request's pieces, owned, for whoever keeps them past the message they came in (a
/// handler's task): taken from an [`OwnedRequestHead`] without a copy
/// ([`OwnedRequestHead::into_parts`]) or copied from a borrowed head
/// ([`RequestHead::into_parts`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RequestParts {
    /// The request id.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The params as sent.
    pub params: Option<Box<RawValue>>,
    /// The whole `_meta` object.
    pub meta: Option<Box<RawValue>>,
    /// `progressToken`.
    pub progress_token: Option<ProgressToken>,
    /// `io.modelcontextprotocol/clientCapabilities`, undecoded.
    pub client_capabilities: Option<Box<RawValue>>,
    /// `io.modelcontextprotocol/clientInfo`, undecoded.
    pub client_info: Option<Box<RawValue>>,
    /// `io.modelcontextprotocol/logLevel`.
    pub log_level: Option<LoggingLevel>,
    /// The named fields of the params, or why they could not be read.
    pub fields: Result<RequestFields, ErrorObject>,
}

/// A [`RequestHead`] owned: what a transport that read a request hands to the session
/// (a 2026-07-28 POST, whose headers it checked against the head).
#[derive(Debug, Clone)]
pub struct OwnedRequestHead {
    /// The message as it arrived, for a consumer that reads lines itself.
    line: String,
    /// `_meta`'s revision, which the session reads and a handler does not need.
    protocol_version: Option<String>,
    parts: RequestParts,
}

impl OwnedRequestHead {
    /// Keeps the message as it arrived beside its head (moved, not copied), for a consumer
    /// of the transport that reads lines itself ([`line`](Self::line)).
    pub fn with_line(mut self, line: String) -> Self {
        self.line = line;
        self
    }

    /// The message as it arrived (empty unless given by [`with_line`](Self::with_line)).
    pub fn line(&self) -> &str {
        &self.line
    }

    /// The request's id.
    pub fn id(&self) -> &RequestId {
        &self.parts.id
    }

    /// The pieces of this head, moved out of it (the message as it arrived is dropped).
    pub fn into_parts(self) -> RequestParts {
        self.parts
    }

    /// The head, borrowed from this one.
    pub fn view(&self) -> RequestHead<'_> {
        let p = &self.parts;
        RequestHead {
            id: p.id.clone(),
            method: Cow::Borrowed(&p.method),
            params: p.params.as_deref(),
            version: None,
            meta: RequestMeta {
                raw: p.meta.as_deref(),
                progress_token: p.progress_token.clone(),
                protocol_version: self.protocol_version.as_deref().map(Cow::Borrowed),
                client_capabilities: p.client_capabilities.as_deref(),
                client_info: p.client_info.as_deref(),
                log_level: p.log_level,
            },
            fields: match &p.fields {
                Ok(f) => Ok(ParamsFields {
                    name: f.name.as_deref().map(Cow::Borrowed),
                    uri: f.uri.as_deref().map(Cow::Borrowed),
                    task_id: f.task_id.as_deref().map(Cow::Borrowed),
                    arguments: f.arguments.as_deref(),
                    input_responses: f.input_responses.as_deref(),
                    request_state: f.request_state.as_deref().map(Cow::Borrowed),
                    task: f.task.as_deref(),
                }),
                Err(e) => Err(e.clone()),
            },
        }
    }
}

/// The `_meta` entries of a request that moat acts on.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RequestMeta<'a> {
    /// The whole `_meta` object, for passing on (trace context, vendor keys).
    pub raw: Option<&'a RawValue>,
    /// `progressToken`.
    pub progress_token: Option<ProgressToken>,
    /// `io.modelcontextprotocol/protocolVersion` (2026-07-28).
    pub protocol_version: Option<Cow<'a, str>>,
    /// `io.modelcontextprotocol/clientCapabilities`, undecoded.
    pub client_capabilities: Option<&'a RawValue>,
    /// `io.modelcontextprotocol/clientInfo`, undecoded.
    pub client_info: Option<&'a RawValue>,
    /// `io.modelcontextprotocol/logLevel`.
    pub log_level: Option<LoggingLevel>,
}

/// The params fields that name what a request is about, borrowed.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ParamsFields<'a> {
    /// `name`: the tool (`tools/call`) or prompt (`prompts/get`).
    pub name: Option<Cow<'a, str>>,
    /// `uri`: the resource.
    pub uri: Option<Cow<'a, str>>,
    /// `taskId`.
    pub task_id: Option<Cow<'a, str>>,
    /// `arguments`, undecoded.
    pub arguments: Option<&'a RawValue>,
    /// `inputResponses`, undecoded; `Some` when present, even as `null` (which a retry
    /// must not send: see [`RequestFields::check_input_responses`]).
    pub input_responses: Option<&'a RawValue>,
    /// `requestState` (2026-07-28 retries).
    pub request_state: Option<Cow<'a, str>>,
    /// `task` (2025-11-25: run as a task), undecoded.
    pub task: Option<&'a RawValue>,
}

impl ParamsFields<'_> {
    /// The same fields, owned (copied, not parsed again), to move into a handler's task.
    pub fn to_owned_fields(&self) -> RequestFields {
        RequestFields {
            name: self.name.as_deref().map(str::to_owned),
            uri: self.uri.as_deref().map(str::to_owned),
            task_id: self.task_id.as_deref().map(str::to_owned),
            arguments: self.arguments.map(ToOwned::to_owned),
            input_responses: self.input_responses.map(ToOwned::to_owned),
            request_state: self.request_state.as_deref().map(str::to_owned),
            task: self.task.map(ToOwned::to_owned),
        }
    }
}

/// [`ParamsFields`] owned: what a handler's task keeps of the params it was given.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RequestFields {
    /// `name`: the tool (`tools/call`) or prompt (`prompts/get`).
    pub name: Option<String>,
    /// `uri`: the resource.
    pub uri: Option<String>,
    /// `taskId`.
    pub task_id: Option<String>,
    /// `arguments`, undecoded.
    pub arguments: Option<Box<RawValue>>,
    /// `inputResponses`, undecoded; `Some` when present, even as `null`.
    pub input_responses: Option<Box<RawValue>>,
    /// `requestState` (2026-07-28 retries).
    pub request_state: Option<String>,
    /// `task` (2025-11-25: run as a task), undecoded.
    pub task: Option<Box<RawValue>>,
}

impl RequestFields {
    /// See [`check_input_responses`].
    pub fn check_input_responses(&self) -> Result<(), ErrorObject> {
        check_input_responses(self.input_responses.as_deref())
    }
}

/// `inputResponses` is optional, but when present it is an object of answers: an explicit
/// `null` (or any other non-object) is a malformed retry, refused with -32602 rather than
/// taken for a first call.
pub fn check_input_responses(input_responses: Option<&RawValue>) -> Result<(), ErrorObject> {
    match input_responses {
        Some(raw) if !raw.get().trim_start().starts_with('{') => Err(ErrorObject::invalid_params(
            "Invalid params: inputResponses must be an object of answers keyed by input request",
        )),
        _ => Ok(()),
    }
}

#[derive(Deserialize, Default)]
struct Fields<'a> {
    #[serde(borrow, default, deserialize_with = "text")]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "text")]
    uri: Option<Cow<'a, str>>,
    #[serde(rename = "taskId", borrow, default, deserialize_with = "text")]
    task_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(
        rename = "inputResponses",
        borrow,
        default,
        deserialize_with = "present"
    )]
    input_responses: Option<&'a RawValue>,
    #[serde(rename = "requestState", borrow, default, deserialize_with = "text")]
    request_state: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    task: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<&'a RawValue>,
}

/// A string borrowed from the input unless it has escapes (serde's own `Option<Cow<str>>`
/// always copies: its `borrow` reaches only a bare `Cow`); `null` → `None`.
fn text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    #[derive(Deserialize)]
    struct Text<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(Option::<Text<'de>>::deserialize(d)?.map(|t| t.0))
}

/// Present (even as `null`) → `Some`; absent → `None` (through `default`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize, Default)]
struct MetaFields<'a> {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<ProgressToken>,
    #[serde(
        rename = "io.modelcontextprotocol/protocolVersion",
        borrow,
        default,
        deserialize_with = "text"
    )]
    protocol_version: Option<Cow<'a, str>>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", borrow, default)]
    client_capabilities: Option<&'a RawValue>,
    #[serde(rename = "io.modelcontextprotocol/clientInfo", borrow, default)]
    client_info: Option<&'a RawValue>,
    #[serde(rename = "io.modelcontextprotocol/logLevel", default)]
    log_level: Option<LoggingLevel>,
}

/// Reads the fields and `_meta` of `params` in one pass over the params text (the `_meta`
/// object, when there is one, is then read from its own slice).
pub(crate) fn read(
    params: Option<&RawValue>,
) -> (RequestMeta<'_>, Result<ParamsFields<'_>, ErrorObject>) {
    let Some(params) = params else {
        return (RequestMeta::default(), Ok(ParamsFields::default()));
    };
    crate::count::params_read();
    let text = params.get();
    if !text.trim_start().starts_with('{') {
        // serde would read an array positionally into the fields.
        return (
            RequestMeta::default(),
            Err(ErrorObject::invalid_params(
                "Invalid params: MCP params must be a JSON object",
            )),
        );
    }
    let fields: Fields = match serde_json::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            // A field of another shape than MCP's (a method of the application's own may
            // use `name` for anything): the `_meta` still counts. A rare path, so the
            // second look costs nothing in the common case.
            #[derive(Deserialize)]
            struct OnlyMeta<'a> {
                #[serde(rename = "_meta", borrow, default)]
                meta: Option<&'a RawValue>,
            }
            let meta = serde_json::from_str::<OnlyMeta>(text)
                .ok()
                .and_then(|m| m.meta);
            return (
                read_meta(meta),
                Err(ErrorObject::invalid_params(format!("Invalid params: {e}"))),
            );
        }
    };
    let meta = read_meta(fields.meta);
    let fields = ParamsFields {
        name: fields.name,
        uri: fields.uri,
        task_id: fields.task_id,
        arguments: fields.arguments,
        input_responses: fields.input_responses,
        request_state: fields.request_state,
        task: fields.task,
    };
    (meta, Ok(fields))
}

/// The entries of a `_meta` object moat acts on. One that does not decode names nothing
/// (its raw form is still passed on).
fn read_meta(raw: Option<&RawValue>) -> RequestMeta<'_> {
    let Some(raw) = raw else {
        return RequestMeta::default();
    };
    let m: MetaFields = serde_json::from_str(raw.get()).unwrap_or_default();
    RequestMeta {
        raw: Some(raw),
        progress_token: m.progress_token,
        protocol_version: m.protocol_version,
        client_capabilities: m.client_capabilities,
        client_info: m.client_info,
        log_level: m.log_level,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).expect("JSON")
    }

    /// The names a request is routed by are read in place, unless written with escapes.
    #[test]
    fn names_borrow_from_the_params_unless_escaped() {
        let p = params(
            r#"{"name":"echo","uri":"x://a","taskId":"t","requestState":"s",
                "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
        );
        let (meta, fields) = read(Some(&p));
        let fields = fields.expect("fields");
        for field in [
            &fields.name,
            &fields.uri,
            &fields.task_id,
            &fields.request_state,
        ] {
            assert!(matches!(field, Some(Cow::Borrowed(_))), "{field:?}");
        }
        assert!(matches!(
            meta.protocol_version,
            Some(Cow::Borrowed("2026-07-28"))
        ));
        let p = params(r#"{"name":"e\u0063ho","uri":null}"#);
        let (_, fields) = read(Some(&p));
        let fields = fields.expect("fields");
        assert!(matches!(fields.name, Some(Cow::Owned(ref n)) if n == "echo"));
        assert_eq!(fields.uri, None);
        let p = params(r#"{"name":7}"#);
        assert!(read(Some(&p)).1.is_err(), "a name that is no string");
    }
}
