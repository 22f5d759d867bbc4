//! Notifications shared by both sides: progress and cancellation. (The `list_changed` family
//! carries only [`crate::types::NotificationParams`].)

use serde::{Deserialize, Serialize};

use super::serde_util::{f64_compact, opt_f64_compact};
use crate::{Meta, ProgressToken, RequestId};

/// Params of `notifications/progress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressNotificationParams {
    /// The token from the request's `_meta.progressToken`.
    pub progress_token: ProgressToken,
    /// Progress so far; increases with every notification.
    #[serde(serialize_with = "f64_compact")]
    pub progress: f64,
    /// Total, if known.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_f64_compact"
    )]
    pub total: Option<f64>,
    /// What is happening (2025-03-26+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Notification metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ProgressNotificationParams {
    /// Progress for a token, without total or message.
    pub fn new(progress_token: ProgressToken, progress: f64) -> Self {
        ProgressNotificationParams {
            progress_token,
            progress,
            total: None,
            message: None,
            meta: None,
        }
    }
}

/// Params of `notifications/cancelled`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelledNotificationParams {
    /// The request to cancel. Required in every revision except 2025-11-25, where task
    /// cancellation goes through `tasks/cancel` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
    /// Why, for logs or the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Notification metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
