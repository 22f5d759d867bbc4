//! The Skills extension (SEP-2640, `io.modelcontextprotocol/skills`): a server offers
//! agent skills — a `SKILL.md` with YAML frontmatter and the files beside it — listed by
//! `skills/list`, fetched by `skills/get`, their files read with `resources/read` and their
//! directories with `resources/directory/read`. Declared under `capabilities.extensions`
//! in every revision (`initialize` or `server/discover`); it has no notifications.

use serde::{Deserialize, Serialize};

use super::{CacheScope, Cursor, Resource};
use crate::{JsonObject, Meta};

/// The extension's identifier, the key under `capabilities.extensions`.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";
/// List the skills a server offers.
pub const SKILLS_LIST: &str = "skills/list";
/// Fetch one skill by the URI of its `SKILL.md`.
pub const SKILLS_GET: &str = "skills/get";
/// List the direct children of a directory resource (with `directoryRead`).
pub const RESOURCES_DIRECTORY_READ: &str = "resources/directory/read";
/// The MIME type that marks a resource as a directory.
pub const DIRECTORY_MIME_TYPE: &str = "inode/directory";
/// Most files one skill may have (hosts must accept up to this).
pub const MAX_SKILL_FILES: usize = 512;
/// Most bytes one skill's files may take together (16 MiB).
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;

/// The extension's settings, as a server declares them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillsSettings {
    /// Whether the server answers `resources/directory/read`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub directory_read: bool,
}

/// One file of a skill, with what a client checks it against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillResource {
    /// The file's resource URI.
    pub uri: String,
    /// `sha256:` and 64 lowercase hex digits of the file's bytes.
    pub digest: String,
    /// The file's length in bytes.
    pub size: u64,
}

/// A skill's files: a complete manifest, or `"dynamic"` (read them as needed).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkillResources {
    /// Every file of the skill, `SKILL.md` included.
    Files(Vec<SkillResource>),
    /// The files are not listed ahead of time.
    Dynamic,
}

impl Serialize for SkillResources {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SkillResources::Files(files) => files.serialize(s),
            SkillResources::Dynamic => s.serialize_str("dynamic"),
        }
    }
}

impl<'de> Deserialize<'de> for SkillResources {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Files(Vec<SkillResource>),
            Word(String),
        }
        match Either::deserialize(d)? {
            Either::Files(files) => Ok(SkillResources::Files(files)),
            Either::Word(w) if w == "dynamic" => Ok(SkillResources::Dynamic),
            Either::Word(w) => Err(serde::de::Error::custom(format!(
                "resources must be a list of files or \"dynamic\", not {w:?}"
            ))),
        }
    }
}

/// One skill, as `skills/list` and `skills/get` describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    /// The URI of the skill's `SKILL.md`; its last directory is the skill's name.
    pub uri: String,
    /// The `SKILL.md` frontmatter as written (at least `name` and `description`).
    pub frontmatter: JsonObject,
    /// The skill's files.
    pub resources: SkillResources,
}

impl Skill {
    /// The frontmatter's `name`.
    pub fn name(&self) -> &str {
        self.frontmatter
            .get("name")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
    }

    /// The frontmatter's `description`.
    pub fn description(&self) -> &str {
        self.frontmatter
            .get("description")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
    }
}

/// Params of `skills/list`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSkillsRequestParams {
    /// Where the previous page ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Result of `skills/list`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSkillsResult {
    /// The skills on this page (a skill is never split across pages).
    pub skills: Vec<Skill>,
    /// Cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Cursor>,
    /// 2026-07-28: `"complete"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<String>,
    /// 2026-07-28: cache lifetime in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// 2026-07-28: who may cache the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Params of `skills/get`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetSkillRequestParams {
    /// The URI of the skill's `SKILL.md`.
    pub uri: String,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Result of `skills/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetSkillResult {
    /// The skill.
    pub skill: Skill,
    /// 2026-07-28: `"complete"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<String>,
    /// 2026-07-28: cache lifetime in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// 2026-07-28: who may cache the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Params of `resources/directory/read`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadResourceDirectoryRequestParams {
    /// The directory's URI (no trailing slash).
    pub uri: String,
    /// Where the previous page ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Result of `resources/directory/read`: the directory's direct children.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadResourceDirectoryResult {
    /// Files, and directories (MIME type [`DIRECTORY_MIME_TYPE`]).
    pub resources: Vec<Resource>,
    /// Cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Cursor>,
    /// 2026-07-28: `"complete"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<String>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
