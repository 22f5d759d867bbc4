//! Typed MCP messages: the params, results and notification params of every revision.
//!
//! One superset set of types covers 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25 and
//! 2026-07-28. A field that exists only in some revisions is an `Option` (or a defaulted `Vec`)
//! and is left out of the JSON when absent, so the same struct serializes correctly for each
//! revision as long as the caller only fills what that revision knows. Unknown fields are
//! ignored when decoding; the open-ended capability objects keep them in an `extra` map.
//!
//! Struct names are the schema definition names (`Tool`, `CallToolResult`, ...); everything is
//! re-exported flat here, so write `moat_protocol::types::Tool`. Method names live in
//! [`methods`].

mod serde_util;

pub mod capabilities;
pub mod common;
pub mod completion;
pub mod content;
pub mod elicitation;
pub mod errors;
pub mod input;
pub mod lifecycle;
pub mod logging;
pub mod methods;
pub mod notifications;
pub mod prompts;
pub mod resources;
pub mod roots;
pub mod sampling;
pub mod skills;
pub mod subscriptions;
pub mod tasks;
pub mod tools;

pub use capabilities::*;
pub use common::*;
pub use completion::*;
pub use content::*;
pub use elicitation::*;
pub use errors::*;
pub use input::*;
pub use lifecycle::*;
pub use logging::*;
pub use notifications::*;
pub use prompts::*;
pub use resources::*;
pub use roots::*;
pub use sampling::*;
pub use skills::{
    GetSkillRequestParams, GetSkillResult, ListSkillsRequestParams, ListSkillsResult,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, Skill, SkillResource,
    SkillResources, SkillsSettings,
};
pub use subscriptions::*;
pub use tasks::*;
pub use tools::*;
