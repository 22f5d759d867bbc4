//! Every official 2026-07-28 example message must round-trip through the moat types unchanged.
//!
//! Examples live in `<spec>/2026-07-28/examples/<TypeName>/*.json`; `<spec>` is `$MOAT_SPEC_DIR`
//! or the repository's `spec/`. Each directory name is mapped explicitly to
//! a check below; an unmapped directory fails the test.

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use moat_protocol::ErrorObject;
use moat_protocol::types::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn spec_dir() -> PathBuf {
    let dir = match std::env::var_os("MOAT_SPEC_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec"),
    };
    assert!(
        dir.join("2026-07-28").is_dir(),
        "MCP spec directory not found at {} (set MOAT_SPEC_DIR)",
        dir.display()
    );
    dir
}

type Check = fn(&Value) -> Result<(), String>;

/// Decode `v` as `T` (both from a `Value` and from text), encode it again, and demand the same
/// JSON back.
fn rt<T: DeserializeOwned + Serialize + PartialEq + Debug>(v: &Value) -> Result<T, String> {
    let from_value: T = serde_json::from_value(v.clone()).map_err(|e| format!("decode: {e}"))?;
    let text = serde_json::to_string(v).map_err(|e| e.to_string())?;
    let from_text: T = serde_json::from_str(&text).map_err(|e| format!("decode from text: {e}"))?;
    if from_value != from_text {
        return Err(format!(
            "decoding from a Value and from text differ:\n{from_value:?}\n{from_text:?}"
        ));
    }
    let back = serde_json::to_value(&from_value).map_err(|e| format!("encode: {e}"))?;
    if &back != v {
        return Err(format!(
            "round trip changed the JSON:\n  original: {v}\n  re-encoded: {back}"
        ));
    }
    Ok(from_value)
}

fn plain<T: DeserializeOwned + Serialize + PartialEq + Debug>(v: &Value) -> Result<(), String> {
    rt::<T>(v).map(drop)
}

/// `v` without its `"type"` key: how a content struct serializes on its own.
fn without_type(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("type");
    }
    v
}

/// A content-block struct: round-trips through the tagged enum as variant `pick`, and on its
/// own (minus the tag).
fn block<T, E>(v: &Value, pick: fn(&E) -> bool) -> Result<(), String>
where
    T: DeserializeOwned + Serialize + PartialEq + Debug,
    E: DeserializeOwned + Serialize + PartialEq + Debug,
{
    let e = rt::<E>(v)?;
    if !pick(&e) {
        return Err(format!("decoded as the wrong variant: {e:?}"));
    }
    rt::<T>(&without_type(v)).map(drop)
}

/// A struct that is also one variant of an enum that carries no extra tag.
fn variant<T, E>(v: &Value, pick: fn(&E) -> bool) -> Result<(), String>
where
    T: DeserializeOwned + Serialize + PartialEq + Debug,
    E: DeserializeOwned + Serialize + PartialEq + Debug,
{
    let e = rt::<E>(v)?;
    if !pick(&e) {
        return Err(format!("decoded as the wrong variant: {e:?}"));
    }
    rt::<T>(v).map(drop)
}

fn only_keys(v: &Value, allowed: &[&str]) -> Result<(), String> {
    let obj = v.as_object().ok_or("envelope is not an object")?;
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!("unexpected envelope key {k:?}")),
        None => Ok(()),
    }
}

/// A request or notification envelope: check the method, round-trip the params.
fn envelope(v: &Value, method: &str, params: Option<Check>) -> Result<(), String> {
    only_keys(v, &["jsonrpc", "id", "method", "params"])?;
    if v.get("method").and_then(Value::as_str) != Some(method) {
        return Err(format!("method is not {method:?}"));
    }
    match (v.get("params"), params) {
        (Some(p), Some(check)) => check(p),
        (None, _) => Ok(()),
        (Some(_), None) => Err("params present but no params type given".into()),
    }
}

/// A result response envelope: round-trip the result.
fn response(v: &Value, result: Check) -> Result<(), String> {
    only_keys(v, &["jsonrpc", "id", "result"])?;
    result(v.get("result").ok_or("no result")?)
}

/// An error response envelope: round-trip the error object and its typed data, if any.
fn error_response(v: &Value, code: i64, data: Option<Check>) -> Result<(), String> {
    only_keys(v, &["jsonrpc", "id", "error"])?;
    let error = v.get("error").ok_or("no error")?;
    let obj = rt::<ErrorObject>(error)?;
    if obj.code != code {
        return Err(format!("code {} is not {code}", obj.code));
    }
    match (error.get("data"), data) {
        (Some(d), Some(check)) => check(d),
        (None, Some(_)) => Err("error data missing".into()),
        _ => Ok(()),
    }
}

fn error_object(v: &Value, code: i64) -> Result<(), String> {
    let obj = rt::<ErrorObject>(v)?;
    if obj.code != code {
        return Err(format!("code {} is not {code}", obj.code));
    }
    Ok(())
}

/// The explicit mapping from example directory name to the check for its files.
fn check_for(name: &str) -> Option<Check> {
    use moat_protocol::types::methods as m;
    type P = PrimitiveSchemaDefinition;
    type S = SamplingMessageContentBlock;
    let check: Check = match name {
        // Content blocks: via the tagged enum, and as the bare struct.
        "TextContent" => {
            |v| block::<TextContent, ContentBlock>(v, |e| matches!(e, ContentBlock::Text(_)))
        }
        "ImageContent" => {
            |v| block::<ImageContent, ContentBlock>(v, |e| matches!(e, ContentBlock::Image(_)))
        }
        "AudioContent" => {
            |v| block::<AudioContent, ContentBlock>(v, |e| matches!(e, ContentBlock::Audio(_)))
        }
        "ResourceLink" => |v| {
            block::<ResourceLink, ContentBlock>(v, |e| matches!(e, ContentBlock::ResourceLink(_)))
        },
        "EmbeddedResource" => |v| {
            block::<EmbeddedResource, ContentBlock>(v, |e| matches!(e, ContentBlock::Resource(_)))
        },
        "ToolUseContent" => |v| block::<ToolUseContent, S>(v, |e| matches!(e, S::ToolUse(_))),
        "ToolResultContent" => {
            |v| block::<ToolResultContent, S>(v, |e| matches!(e, S::ToolResult(_)))
        }
        "TextResourceContents" => |v| {
            variant::<TextResourceContents, ResourceContents>(v, |e| {
                matches!(e, ResourceContents::Text(_))
            })
        },
        "BlobResourceContents" => |v| {
            variant::<BlobResourceContents, ResourceContents>(v, |e| {
                matches!(e, ResourceContents::Blob(_))
            })
        },
        // Elicitation schemas: as the struct and as the right PrimitiveSchemaDefinition variant.
        "BooleanSchema" => |v| variant::<BooleanSchema, P>(v, |e| matches!(e, P::Boolean(_))),
        "NumberSchema" => |v| variant::<NumberSchema, P>(v, |e| matches!(e, P::Number(_))),
        "StringSchema" => |v| variant::<StringSchema, P>(v, |e| matches!(e, P::String(_))),
        "UntitledSingleSelectEnumSchema" => |v| {
            variant::<UntitledSingleSelectEnumSchema, P>(v, |e| {
                matches!(e, P::UntitledSingleSelect(_))
            })
        },
        "TitledSingleSelectEnumSchema" => |v| {
            variant::<TitledSingleSelectEnumSchema, P>(v, |e| matches!(e, P::TitledSingleSelect(_)))
        },
        "UntitledMultiSelectEnumSchema" => |v| {
            variant::<UntitledMultiSelectEnumSchema, P>(v, |e| {
                matches!(e, P::UntitledMultiSelect(_))
            })
        },
        "TitledMultiSelectEnumSchema" => |v| {
            variant::<TitledMultiSelectEnumSchema, P>(v, |e| matches!(e, P::TitledMultiSelect(_)))
        },
        "ElicitRequestFormParams" => |v| {
            variant::<ElicitRequestFormParams, ElicitRequestParams>(v, |e| {
                matches!(e, ElicitRequestParams::Form(_))
            })
        },
        "ElicitRequestURLParams" => |v| {
            variant::<ElicitRequestURLParams, ElicitRequestParams>(v, |e| {
                matches!(e, ElicitRequestParams::Url(_))
            })
        },
        // Plain types of the same name.
        "CallToolRequestParams" => plain::<CallToolRequestParams>,
        "CallToolResult" => plain::<CallToolResult>,
        "CancelledNotificationParams" => plain::<CancelledNotificationParams>,
        "ClientCapabilities" => plain::<ClientCapabilities>,
        "CompleteRequestParams" => plain::<CompleteRequestParams>,
        "CompleteResult" => plain::<CompleteResult>,
        "CreateMessageRequestParams" => plain::<CreateMessageRequestParams>,
        "CreateMessageResult" => plain::<CreateMessageResult>,
        "DiscoverResult" => plain::<DiscoverResult>,
        "ElicitResult" => plain::<ElicitResult>,
        "GetPromptRequestParams" => plain::<GetPromptRequestParams>,
        "GetPromptResult" => plain::<GetPromptResult>,
        "InputRequests" => plain::<InputRequests>,
        "InputRequiredResult" => plain::<InputRequiredResult>,
        "InputResponses" => plain::<InputResponses>,
        "ListPromptsResult" => plain::<ListPromptsResult>,
        "ListResourceTemplatesResult" => plain::<ListResourceTemplatesResult>,
        "ListResourcesResult" => plain::<ListResourcesResult>,
        "ListRootsResult" => plain::<ListRootsResult>,
        "ListToolsResult" => plain::<ListToolsResult>,
        "LoggingMessageNotificationParams" => plain::<LoggingMessageNotificationParams>,
        "ModelPreferences" => plain::<ModelPreferences>,
        "PaginatedRequestParams" => plain::<PaginatedRequestParams>,
        "ProgressNotificationParams" => plain::<ProgressNotificationParams>,
        "ReadResourceResult" => plain::<ReadResourceResult>,
        "Resource" => plain::<Resource>,
        "ResourceUpdatedNotificationParams" => plain::<ResourceUpdatedNotificationParams>,
        "Root" => plain::<Root>,
        "SamplingMessage" => plain::<SamplingMessage>,
        "ServerCapabilities" => plain::<ServerCapabilities>,
        "SubscriptionsListenResult" => plain::<SubscriptionsListenResult>,
        "Tool" => plain::<Tool>,
        // Request envelopes: their params.
        "CallToolRequest" => |v| envelope(v, m::TOOLS_CALL, Some(plain::<CallToolRequestParams>)),
        "CompleteRequest" => |v| {
            envelope(
                v,
                m::COMPLETION_COMPLETE,
                Some(plain::<CompleteRequestParams>),
            )
        },
        "CreateMessageRequest" => |v| {
            envelope(
                v,
                m::SAMPLING_CREATE_MESSAGE,
                Some(plain::<CreateMessageRequestParams>),
            )
        },
        "DiscoverRequest" => {
            |v| envelope(v, m::SERVER_DISCOVER, Some(plain::<DiscoverRequestParams>))
        }
        "ElicitRequest" => {
            |v| envelope(v, m::ELICITATION_CREATE, Some(plain::<ElicitRequestParams>))
        }
        "GetPromptRequest" => {
            |v| envelope(v, m::PROMPTS_GET, Some(plain::<GetPromptRequestParams>))
        }
        "ListPromptsRequest" => {
            |v| envelope(v, m::PROMPTS_LIST, Some(plain::<PaginatedRequestParams>))
        }
        "ListResourceTemplatesRequest" => |v| {
            envelope(
                v,
                m::RESOURCES_TEMPLATES_LIST,
                Some(plain::<PaginatedRequestParams>),
            )
        },
        "ListResourcesRequest" => {
            |v| envelope(v, m::RESOURCES_LIST, Some(plain::<PaginatedRequestParams>))
        }
        "ListRootsRequest" => |v| envelope(v, m::ROOTS_LIST, Some(plain::<RequestParams>)),
        "ListToolsRequest" => |v| envelope(v, m::TOOLS_LIST, Some(plain::<PaginatedRequestParams>)),
        "ReadResourceRequest" => |v| {
            envelope(
                v,
                m::RESOURCES_READ,
                Some(plain::<ReadResourceRequestParams>),
            )
        },
        "SubscriptionsListenRequest" => |v| {
            envelope(
                v,
                m::SUBSCRIPTIONS_LISTEN,
                Some(plain::<SubscriptionsListenRequestParams>),
            )
        },
        // Notification envelopes: their params.
        "CancelledNotification" => |v| {
            envelope(
                v,
                m::NOTIFICATIONS_CANCELLED,
                Some(plain::<CancelledNotificationParams>),
            )
        },
        "LoggingMessageNotification" => |v| {
            envelope(
                v,
                m::NOTIFICATIONS_MESSAGE,
                Some(plain::<LoggingMessageNotificationParams>),
            )
        },
        "ProgressNotification" => |v| {
            envelope(
                v,
                m::NOTIFICATIONS_PROGRESS,
                Some(plain::<ProgressNotificationParams>),
            )
        },
        "PromptListChangedNotification" => |v| {
            envelope(
                v,
                m::NOTIFICATIONS_PROMPTS_LIST_CHANGED,
                Some(plain::<NotificationParams>),
            )
        },
        "ResourceListChangedNotification" => |v| {
            envelope(
                v,
                m::NOTIFICATIONS_RESOURCES_LIST_CHANGED,
                Some(plain::<NotificationParams>),
            )
        },
        "ToolListChangedNotification" => |v| {
            envelope(
                v,
                m::NOTIFICATIONS_TOOLS_LIST_CHANGED,
                Some(plain::<NotificationParams>),
            )
        },
        "ResourceUpdatedNotification" => |v| {
            envelope(
                v,
                m::NOTIFICATIONS_RESOURCES_UPDATED,
                Some(plain::<ResourceUpdatedNotificationParams>),
            )
        },
        "SubscriptionsAcknowledgedNotification" => |v| {
            envelope(
                v,
                m::NOTIFICATIONS_SUBSCRIPTIONS_ACKNOWLEDGED,
                Some(plain::<SubscriptionsAcknowledgedNotificationParams>),
            )
        },
        // Result envelopes: their result.
        "CallToolResultResponse" => |v| response(v, plain::<CallToolResult>),
        "CompleteResultResponse" => |v| response(v, plain::<CompleteResult>),
        "DiscoverResultResponse" => |v| response(v, plain::<DiscoverResult>),
        "GetPromptResultResponse" => |v| response(v, plain::<GetPromptResult>),
        "ListPromptsResultResponse" => |v| response(v, plain::<ListPromptsResult>),
        "ListResourceTemplatesResultResponse" => {
            |v| response(v, plain::<ListResourceTemplatesResult>)
        }
        "ListResourcesResultResponse" => |v| response(v, plain::<ListResourcesResult>),
        "ListToolsResultResponse" => |v| response(v, plain::<ListToolsResult>),
        "ReadResourceResultResponse" => |v| response(v, plain::<ReadResourceResult>),
        "SubscriptionsListenResultResponse" => |v| response(v, plain::<SubscriptionsListenResult>),
        // Errors: the error object, and typed data where MCP defines it.
        "HeaderMismatchError" => |v| error_response(v, -32020, None),
        "MissingRequiredClientCapabilityError" => |v| {
            error_response(
                v,
                -32021,
                Some(plain::<MissingRequiredClientCapabilityErrorData>),
            )
        },
        "UnsupportedProtocolVersionError" => |v| {
            error_response(
                v,
                -32022,
                Some(plain::<UnsupportedProtocolVersionErrorData>),
            )
        },
        "ParseError" => |v| error_object(v, -32700),
        "InvalidParamsError" => |v| error_object(v, -32602),
        "MethodNotFoundError" => |v| error_object(v, -32601),
        "InternalError" => |v| error_object(v, -32603),
        _ => return None,
    };
    Some(check)
}

#[test]
fn every_example_round_trips() {
    let examples = spec_dir().join("2026-07-28/examples");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&examples)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", examples.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        !dirs.is_empty(),
        "no example directories in {}",
        examples.display()
    );

    let mut present = 0usize;
    let mut checked = 0usize;
    let mut failures = Vec::new();
    for dir in &dirs {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .expect("utf-8 directory name");
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("read example directory")
            .map(|e| e.expect("directory entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        present += files.len();
        let Some(check) = check_for(name) else {
            failures.push(format!(
                "{name}: no mapping to a moat type ({} files)",
                files.len()
            ));
            continue;
        };
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read example");
            let value: Value = serde_json::from_str(&text).expect("example is JSON");
            if let Err(e) = check(&value) {
                failures.push(format!(
                    "{name}/{}: {e}",
                    file.file_name().and_then(|n| n.to_str()).unwrap_or("?")
                ));
            }
            checked += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} example failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(checked, present, "every example file must be checked");
    assert!(checked > 100, "suspiciously few examples: {checked}");
}
