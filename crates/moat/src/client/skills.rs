//! The Skills extension from the client's side: whether the server offers skills, the list,
//! one skill, and the files and directories they are made of.
//!
//! ```no_run
//! # async fn run(client: moat::Client) -> moat::Result<()> {
//! if client.offers_skills() {
//!     for skill in client.list_all_skills().await? {
//!         let skill_md = client.read_resource(&skill.uri).await?;
//!         println!("{}: {} ({} contents)", skill.name(), skill.description(), skill_md.contents.len());
//!     }
//! }
//! # Ok(()) }
//! ```

use moat_protocol::types::skills::{
    RESOURCES_DIRECTORY_READ, SKILLS_EXTENSION, SKILLS_GET, SKILLS_LIST,
};
use moat_protocol::types::{
    GetSkillRequestParams, GetSkillResult, ListSkillsRequestParams, ListSkillsResult,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, Resource, Skill,
    SkillsSettings,
};

use super::Client;
use crate::error::Result;

impl Client {
    /// The server's Skills extension settings, if it declared the extension.
    pub fn skills_settings(&self) -> Option<SkillsSettings> {
        let declared = self
            .server_capabilities()
            .extensions
            .as_ref()?
            .get(SKILLS_EXTENSION)?;
        Some(serde_json::from_value(declared.clone()).unwrap_or_default())
    }

    /// Whether the server declared the Skills extension.
    pub fn offers_skills(&self) -> bool {
        self.skills_settings().is_some()
    }

    /// One page of `skills/list`.
    pub async fn list_skills(&self, cursor: Option<String>) -> Result<ListSkillsResult> {
        let params = ListSkillsRequestParams {
            cursor,
            ..Default::default()
        };
        self.peer().request(SKILLS_LIST, &params).await
    }

    /// Every skill, following pagination.
    pub async fn list_all_skills(&self) -> Result<Vec<Skill>> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        loop {
            let page = self.list_skills(cursor.take()).await?;
            out.extend(page.skills);
            match page.next_cursor {
                Some(next) if seen.insert(next.clone()) => cursor = Some(next),
                _ => break,
            }
        }
        Ok(out)
    }

    /// `skills/get`: the skill whose `SKILL.md` is at `uri`.
    pub async fn get_skill(&self, uri: &str) -> Result<Skill> {
        let params = GetSkillRequestParams {
            uri: uri.to_owned(),
            ..Default::default()
        };
        let result: GetSkillResult = self.peer().request(SKILLS_GET, &params).await?;
        Ok(result.skill)
    }

    /// `resources/directory/read`: the direct children of the directory at `uri`, every
    /// page (directories have the MIME type `inode/directory`).
    pub async fn read_directory(&self, uri: &str) -> Result<Vec<Resource>> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        loop {
            let params = ReadResourceDirectoryRequestParams {
                uri: uri.to_owned(),
                cursor: cursor.take(),
                ..Default::default()
            };
            let page: ReadResourceDirectoryResult = self
                .peer()
                .request(RESOURCES_DIRECTORY_READ, &params)
                .await?;
            out.extend(page.resources);
            match page.next_cursor {
                Some(next) if seen.insert(next.clone()) => cursor = Some(next),
                _ => break,
            }
        }
        Ok(out)
    }
}
