//! Multi-round-trip requests (MRTR, 2026-07-28): instead of sending requests to the client, a
//! server answers `tools/call`, `prompts/get` or `resources/read` with an
//! [`InputRequiredResult`]; the client fulfils the [`InputRequests`] and retries the original
//! request with the matching [`InputResponses`] and the echoed `requestState`.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ListRootsResult, RESULT_TYPE_INPUT_REQUIRED, RequestParams, methods,
};
use crate::Meta;

/// A request the server needs the client to fulfil: `{"method": ..., "params": ...}`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InputRequest {
    /// `sampling/createMessage`.
    CreateMessage(CreateMessageRequestParams),
    /// `elicitation/create`.
    Elicit(ElicitRequestParams),
    /// `roots/list`; params are optional.
    ListRoots(Option<RequestParams>),
    /// A method this version of moat does not know, kept as is.
    Other {
        /// The method name.
        method: String,
        /// The raw params, if any.
        params: Option<Value>,
    },
}

impl InputRequest {
    /// The method name.
    pub fn method(&self) -> &str {
        match self {
            InputRequest::CreateMessage(_) => methods::SAMPLING_CREATE_MESSAGE,
            InputRequest::Elicit(_) => methods::ELICITATION_CREATE,
            InputRequest::ListRoots(_) => methods::ROOTS_LIST,
            InputRequest::Other { method, .. } => method,
        }
    }
}

impl Serialize for InputRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("method", self.method())?;
        match self {
            InputRequest::CreateMessage(p) => map.serialize_entry("params", p)?,
            InputRequest::Elicit(p) => map.serialize_entry("params", p)?,
            InputRequest::ListRoots(Some(p)) => map.serialize_entry("params", p)?,
            InputRequest::Other {
                params: Some(p), ..
            } => map.serialize_entry("params", p)?,
            InputRequest::ListRoots(None) | InputRequest::Other { params: None, .. } => {}
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for InputRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            method: String,
            #[serde(default)]
            params: Option<Value>,
        }
        let Raw { method, params } = Raw::deserialize(d)?;
        let required =
            |params: Option<Value>| params.ok_or_else(|| D::Error::missing_field("params"));
        Ok(match method.as_str() {
            methods::SAMPLING_CREATE_MESSAGE => InputRequest::CreateMessage(
                CreateMessageRequestParams::deserialize(required(params)?)
                    .map_err(D::Error::custom)?,
            ),
            methods::ELICITATION_CREATE => InputRequest::Elicit(
                ElicitRequestParams::deserialize(required(params)?).map_err(D::Error::custom)?,
            ),
            methods::ROOTS_LIST => InputRequest::ListRoots(match params {
                Some(p) => Some(RequestParams::deserialize(p).map_err(D::Error::custom)?),
                None => None,
            }),
            _ => InputRequest::Other { method, params },
        })
    }
}

/// The client's answer to one [`InputRequest`], told apart by shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum InputResponse {
    /// Answer to `sampling/createMessage`.
    CreateMessage(CreateMessageResult),
    /// Answer to `roots/list`.
    ListRoots(ListRootsResult),
    /// Answer to `elicitation/create`.
    Elicit(ElicitResult),
}

/// Requests the server needs fulfilled, by a key of the server's choosing.
pub type InputRequests = BTreeMap<String, InputRequest>;

/// The client's answers, by the keys of the [`InputRequests`] they answer.
pub type InputResponses = BTreeMap<String, InputResponse>;

/// A result saying the server needs input from the client before it can finish
/// (`resultType: "input_required"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequiredResult {
    /// `"input_required"`.
    pub result_type: String,
    /// What the client should do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// Opaque state to echo back on the retried request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl Default for InputRequiredResult {
    fn default() -> Self {
        InputRequiredResult {
            result_type: RESULT_TYPE_INPUT_REQUIRED.to_owned(),
            input_requests: None,
            request_state: None,
            meta: None,
        }
    }
}

impl InputRequiredResult {
    /// An `input_required` result with these requests.
    pub fn new(input_requests: InputRequests) -> Self {
        InputRequiredResult {
            input_requests: Some(input_requests),
            ..Default::default()
        }
    }

    /// Set the opaque request state.
    pub fn with_request_state(mut self, state: impl Into<String>) -> Self {
        self.request_state = Some(state.into());
        self
    }
}

/// The MRTR part of retried request params (the base of `tools/call`, `prompts/get` and
/// `resources/read` params in 2026-07-28).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputResponseRequestParams {
    /// Answers to the server's input requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<InputResponses>,
    /// Opaque state echoed from the `input_required` result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
