//! Elicitation: the server asks the user for input through the client (`elicitation/create`,
//! 2025-06-18+), either with a restricted form schema or (2025-11-25+) by sending the user to a
//! URL.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::TaskMetadata;
use super::serde_util::{opt_f64_compact, string_tag};
use crate::Meta;

string_tag!(
    /// The `"type": "string"` of a string or single-select schema.
    StringTag = "string"
);
string_tag!(
    /// The `"type": "boolean"` of a boolean schema.
    BooleanTag = "boolean"
);
string_tag!(
    /// The `"type": "array"` of a multi-select schema.
    ArrayTag = "array"
);
string_tag!(
    /// The `"type": "object"` of a requested schema.
    ObjectTag = "object"
);
string_tag!(
    /// The `"mode": "form"` of form-mode elicitation params.
    FormModeTag = "form"
);
string_tag!(
    /// The `"mode": "url"` of URL-mode elicitation params.
    UrlModeTag = "url"
);

/// Params of `elicitation/create`: form mode or URL mode, told apart by `"mode"` (absent
/// means form, as in 2025-06-18).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ElicitRequestParams {
    /// Ask for structured data with a form.
    Form(ElicitRequestFormParams),
    /// Send the user to a URL (2025-11-25+).
    Url(ElicitRequestURLParams),
}

impl<'de> Deserialize<'de> for ElicitRequestParams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        let is_url = value.get("mode").and_then(Value::as_str) == Some(UrlModeTag::VALUE);
        if is_url {
            ElicitRequestURLParams::deserialize(value)
                .map(ElicitRequestParams::Url)
                .map_err(D::Error::custom)
        } else {
            ElicitRequestFormParams::deserialize(value)
                .map(ElicitRequestParams::Form)
                .map_err(D::Error::custom)
        }
    }
}

impl From<ElicitRequestFormParams> for ElicitRequestParams {
    fn from(p: ElicitRequestFormParams) -> Self {
        ElicitRequestParams::Form(p)
    }
}

impl From<ElicitRequestURLParams> for ElicitRequestParams {
    fn from(p: ElicitRequestURLParams) -> Self {
        ElicitRequestParams::Url(p)
    }
}

/// Form-mode elicitation params (the only shape in 2025-06-18, which has no `mode`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitRequestFormParams {
    /// `"form"`; optional (2025-11-25+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<FormModeTag>,
    /// What to ask the user.
    pub message: String,
    /// The form: a flat object schema of primitive properties.
    pub requested_schema: RequestedSchema,
    /// 2025-11-25: run as a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskMetadata>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ElicitRequestFormParams {
    /// Form params with a message and a schema (no `mode` key, valid in every revision).
    pub fn new(message: impl Into<String>, requested_schema: RequestedSchema) -> Self {
        ElicitRequestFormParams {
            message: message.into(),
            requested_schema,
            ..Default::default()
        }
    }
}

/// URL-mode elicitation params (2025-11-25+).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitRequestURLParams {
    /// `"url"`.
    pub mode: UrlModeTag,
    /// Why the user should open the URL.
    pub message: String,
    /// The URL to open.
    pub url: String,
    /// Identifier echoed by `notifications/elicitation/complete` (required in 2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation_id: Option<String>,
    /// 2025-11-25: run as a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskMetadata>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The `requestedSchema` of form-mode elicitation: an object schema with only top-level
/// primitive properties.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RequestedSchema {
    /// `$schema` dialect URI (2025-11-25+).
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// `"object"`.
    #[serde(rename = "type")]
    pub r#type: ObjectTag,
    /// The fields.
    pub properties: BTreeMap<String, PrimitiveSchemaDefinition>,
    /// Names of the required fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<String>>,
}

/// One field of a [`RequestedSchema`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum PrimitiveSchemaDefinition {
    /// A string.
    String(StringSchema),
    /// A number or integer.
    Number(NumberSchema),
    /// A boolean.
    Boolean(BooleanSchema),
    /// One of plain values (`enum`).
    UntitledSingleSelect(UntitledSingleSelectEnumSchema),
    /// One of titled values (`oneOf`, 2025-11-25+).
    TitledSingleSelect(TitledSingleSelectEnumSchema),
    /// Several of plain values (2025-11-25+).
    UntitledMultiSelect(UntitledMultiSelectEnumSchema),
    /// Several of titled values (2025-11-25+).
    TitledMultiSelect(TitledMultiSelectEnumSchema),
    /// One of values named by the non-standard `enumNames` (2025-06-18 `EnumSchema`). Decoding
    /// picks this variant only when `enumNames` is present; without it the JSON is identical to
    /// [`PrimitiveSchemaDefinition::UntitledSingleSelect`].
    LegacyTitled(LegacyTitledEnumSchema),
}

impl<'de> Deserialize<'de> for PrimitiveSchemaDefinition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use PrimitiveSchemaDefinition as P;
        let value = Value::deserialize(d)?;
        let has = |key: &str| value.get(key).is_some();
        let result = match value.get("type").and_then(Value::as_str) {
            Some("boolean") => BooleanSchema::deserialize(value).map(P::Boolean),
            Some("number" | "integer") => NumberSchema::deserialize(value).map(P::Number),
            Some("array") => {
                if value.get("items").and_then(|i| i.get("anyOf")).is_some() {
                    TitledMultiSelectEnumSchema::deserialize(value).map(P::TitledMultiSelect)
                } else {
                    UntitledMultiSelectEnumSchema::deserialize(value).map(P::UntitledMultiSelect)
                }
            }
            Some("string") if has("oneOf") => {
                TitledSingleSelectEnumSchema::deserialize(value).map(P::TitledSingleSelect)
            }
            Some("string") if has("enum") && has("enumNames") => {
                LegacyTitledEnumSchema::deserialize(value).map(P::LegacyTitled)
            }
            Some("string") if has("enum") => {
                UntitledSingleSelectEnumSchema::deserialize(value).map(P::UntitledSingleSelect)
            }
            Some("string") => StringSchema::deserialize(value).map(P::String),
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "unsupported primitive schema type {other:?}"
                )));
            }
            None => {
                return Err(D::Error::custom(
                    "primitive schema without a string \"type\"",
                ));
            }
        };
        result.map_err(D::Error::custom)
    }
}

/// Format of a [`StringSchema`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum StringFormat {
    /// `email`.
    Email,
    /// `uri`.
    Uri,
    /// `date`.
    Date,
    /// `date-time`.
    DateTime,
}

/// A string field.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringSchema {
    /// `"string"`.
    #[serde(rename = "type")]
    pub r#type: StringTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Minimum length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// Maximum length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// Format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<StringFormat>,
    /// Default value (2025-11-25+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// `"number"` or `"integer"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum NumberType {
    /// Any number.
    #[default]
    Number,
    /// Integers only.
    Integer,
}

/// A number field.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NumberSchema {
    /// `"number"` or `"integer"`.
    #[serde(rename = "type")]
    pub r#type: NumberType,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Minimum.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_f64_compact"
    )]
    pub minimum: Option<f64>,
    /// Maximum.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_f64_compact"
    )]
    pub maximum: Option<f64>,
    /// Default value (2025-11-25+).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_f64_compact"
    )]
    pub default: Option<f64>,
}

/// A boolean field.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BooleanSchema {
    /// `"boolean"`.
    #[serde(rename = "type")]
    pub r#type: BooleanTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Default value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
}

/// A value with a display label, in titled enum schemas.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EnumOption {
    /// The value.
    #[serde(rename = "const")]
    pub value: String,
    /// Its label.
    pub title: String,
}

/// Single choice among plain values.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UntitledSingleSelectEnumSchema {
    /// `"string"`.
    #[serde(rename = "type")]
    pub r#type: StringTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The allowed values.
    #[serde(rename = "enum")]
    pub values: Vec<String>,
    /// Default value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// Single choice among titled values (`oneOf` of `const`/`title`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledSingleSelectEnumSchema {
    /// `"string"`.
    #[serde(rename = "type")]
    pub r#type: StringTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The options.
    pub one_of: Vec<EnumOption>,
    /// Default value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// The `items` of an [`UntitledMultiSelectEnumSchema`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UntitledEnumItems {
    /// `"string"`.
    #[serde(rename = "type")]
    pub r#type: StringTag,
    /// The allowed values.
    #[serde(rename = "enum")]
    pub values: Vec<String>,
}

/// The `items` of a [`TitledMultiSelectEnumSchema`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledEnumItems {
    /// The options.
    pub any_of: Vec<EnumOption>,
}

/// Multiple choice among plain values.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UntitledMultiSelectEnumSchema {
    /// `"array"`.
    #[serde(rename = "type")]
    pub r#type: ArrayTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Minimum number of choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// Maximum number of choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// The allowed values.
    pub items: UntitledEnumItems,
    /// Default choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Vec<String>>,
}

/// Multiple choice among titled values.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledMultiSelectEnumSchema {
    /// `"array"`.
    #[serde(rename = "type")]
    pub r#type: ArrayTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Minimum number of choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// Maximum number of choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// The options.
    pub items: TitledEnumItems,
    /// Default choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Vec<String>>,
}

/// Single choice with labels in the non-standard `enumNames` (deprecated; the 2025-06-18
/// `EnumSchema`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyTitledEnumSchema {
    /// `"string"`.
    #[serde(rename = "type")]
    pub r#type: StringTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The allowed values.
    #[serde(rename = "enum")]
    pub values: Vec<String>,
    /// Display names, parallel to `values`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enum_names: Option<Vec<String>>,
    /// Default value (2025-11-25+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// The user's answer to an elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ElicitAction {
    /// Submitted.
    Accept,
    /// Explicitly declined.
    Decline,
    /// Dismissed without choosing.
    Cancel,
}

/// One submitted form value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ElicitValue {
    /// A boolean.
    Boolean(bool),
    /// An integer.
    Integer(i64),
    /// A non-integer number (outside the schema, accepted for robustness).
    Number(f64),
    /// A string.
    String(String),
    /// Several strings, from a multi-select (2025-11-25+).
    StringArray(Vec<String>),
}

/// Result of `elicitation/create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// What the user did.
    pub action: ElicitAction,
    /// The submitted values (form mode, `accept` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<BTreeMap<String, ElicitValue>>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ElicitResult {
    /// The user accepted with these values.
    pub fn accept(content: BTreeMap<String, ElicitValue>) -> Self {
        ElicitResult {
            action: ElicitAction::Accept,
            content: Some(content),
            meta: None,
        }
    }

    /// The user declined.
    pub fn decline() -> Self {
        ElicitResult {
            action: ElicitAction::Decline,
            content: None,
            meta: None,
        }
    }

    /// The user dismissed the request.
    pub fn cancel() -> Self {
        ElicitResult {
            action: ElicitAction::Cancel,
            content: None,
            meta: None,
        }
    }
}

/// Params of `notifications/elicitation/complete` (2025-11-25): a URL-mode elicitation ended.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationCompleteNotificationParams {
    /// The [`ElicitRequestURLParams::elicitation_id`] that completed.
    pub elicitation_id: String,
    /// Notification metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
