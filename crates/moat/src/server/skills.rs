//! Skills a server offers (the Skills extension, SEP-2640): each is a `SKILL.md` whose YAML
//! frontmatter names and describes it, and the files beside it. A [`SkillBundle`] holds one
//! skill's files in memory (read from a directory, or given), with the digests and sizes
//! `skills/list` publishes; the server answers `skills/list`, `skills/get`,
//! `resources/read` of each file and `resources/directory/read` from the bundles.
//!
//! Skills that are not in memory — another server's, forwarded by a gateway, or skills kept
//! in a store — come from a [`SkillSource`], asked when a client asks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path};
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use moat_protocol::JsonObject;
use moat_protocol::error::ErrorObject;
use moat_protocol::types::skills::{DIRECTORY_MIME_TYPE, MAX_SKILL_BYTES, MAX_SKILL_FILES};
use moat_protocol::types::{
    BlobResourceContents, Resource, ResourceContents, Skill, SkillResource, SkillResources,
    TextResourceContents,
};
use sha2::{Digest, Sha256};

use crate::handler::{BoxFuture, RequestContext};

/// The file every skill has, holding its frontmatter and instructions.
pub const SKILL_FILE: &str = "SKILL.md";

/// The URI scheme of skills' files and directories.
pub const SKILL_SCHEME: &str = "skill://";

/// Skills looked up when a client asks for them, beside the server's [`SkillBundle`]s
/// (which are tried first). Install one with [`Server::skill_source`](super::Server::skill_source).
///
/// Each lookup answers `Ok(None)` for a URI it does not know, which the client then gets as
/// "not found"; an `Err` reaches the client as it is. `ctx` tells who asks, so a source may
/// show different callers different skills. [`read`](Self::read) is asked only for
/// `skill://` URIs the bundles do not hold.
pub trait SkillSource: Send + Sync + 'static {
    /// Every skill the caller may see, in listing order (the server pages them).
    fn list(&self, ctx: &RequestContext) -> BoxFuture<Result<Vec<Skill>, ErrorObject>>;

    /// The skill whose `SKILL.md` is at `uri`.
    fn get(&self, ctx: &RequestContext, uri: &str)
    -> BoxFuture<Result<Option<Skill>, ErrorObject>>;

    /// The contents of the file at `uri`, as `resources/read` answers them.
    fn read(
        &self,
        ctx: &RequestContext,
        uri: &str,
    ) -> BoxFuture<Result<Option<Vec<ResourceContents>>, ErrorObject>>;

    /// The direct children of the directory at `uri`, every page.
    fn directory(
        &self,
        ctx: &RequestContext,
        uri: &str,
    ) -> BoxFuture<Result<Option<Vec<Resource>>, ErrorObject>>;
}

/// Why a skill could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// Reading its files failed.
    #[error("reading the skill at {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// It has no `SKILL.md`.
    #[error("a skill needs a SKILL.md at its root")]
    NoSkillFile,
    /// Its `SKILL.md` does not start with a YAML frontmatter block, or the block is not a map.
    #[error("SKILL.md: {0}")]
    Frontmatter(String),
    /// A frontmatter field it needs is missing or not text.
    #[error("SKILL.md: the frontmatter needs a `{0}` (text)")]
    Missing(&'static str),
    /// Its name is not a path segment.
    #[error("SKILL.md: the name {0:?} must be non-empty, without `/`")]
    BadName(String),
    /// A file path leaves the skill's directory, or is not plain.
    #[error("the file path {0:?} must be relative, inside the skill, without `..`")]
    BadPath(String),
    /// More files than a host must accept.
    #[error("{count} files: a skill may have at most {MAX_SKILL_FILES}")]
    TooManyFiles {
        /// How many it has.
        count: usize,
    },
    /// More bytes than a host must accept.
    #[error("{bytes} bytes: a skill's files may take at most {MAX_SKILL_BYTES} together")]
    TooLarge {
        /// How many it has.
        bytes: u64,
    },
}

/// One file of a skill.
#[derive(Debug, Clone)]
struct SkillFile {
    bytes: Arc<[u8]>,
    digest: String,
}

/// One skill and all its files, in memory.
#[derive(Debug, Clone)]
pub struct SkillBundle {
    /// Path segments before the name (`acme/billing` in `skill://acme/billing/refunds`).
    prefix: String,
    name: String,
    frontmatter: JsonObject,
    /// By path relative to the skill's root (`SKILL.md`, `references/GUIDE.md`).
    files: BTreeMap<String, SkillFile>,
}

impl SkillBundle {
    /// A skill from its files (paths relative to its root; one must be `SKILL.md`).
    pub fn from_files<P, B>(files: impl IntoIterator<Item = (P, B)>) -> Result<Self, SkillError>
    where
        P: Into<String>,
        B: Into<Vec<u8>>,
    {
        let mut map = BTreeMap::new();
        let mut total = 0u64;
        for (path, bytes) in files {
            let path = path.into();
            check_path(&path)?;
            let bytes: Vec<u8> = bytes.into();
            total += bytes.len() as u64;
            let digest = format!("sha256:{:x}", Sha256::digest(&bytes));
            map.insert(
                path,
                SkillFile {
                    bytes: bytes.into(),
                    digest,
                },
            );
        }
        if map.len() > MAX_SKILL_FILES {
            return Err(SkillError::TooManyFiles { count: map.len() });
        }
        if total > MAX_SKILL_BYTES {
            return Err(SkillError::TooLarge { bytes: total });
        }
        let skill_md = map.get(SKILL_FILE).ok_or(SkillError::NoSkillFile)?;
        let text = std::str::from_utf8(&skill_md.bytes)
            .map_err(|_| SkillError::Frontmatter("not UTF-8 text".into()))?;
        let frontmatter = frontmatter(text)?;
        let name = text_field(&frontmatter, "name")?.to_owned();
        text_field(&frontmatter, "description")?;
        if name.is_empty() || name.contains('/') {
            return Err(SkillError::BadName(name));
        }
        Ok(SkillBundle {
            prefix: String::new(),
            name,
            frontmatter,
            files: map,
        })
    }

    /// A skill from a directory holding `SKILL.md` and its other files (every regular file
    /// under it; symbolic links are not followed out of it).
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self, SkillError> {
        let dir = dir.as_ref();
        let mut files = Vec::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(at) = pending.pop() {
            let io = |source| SkillError::Io {
                path: at.display().to_string(),
                source,
            };
            for entry in std::fs::read_dir(&at).map_err(io)? {
                let entry = entry.map_err(io)?;
                let kind = entry.file_type().map_err(io)?;
                let path = entry.path();
                if kind.is_dir() {
                    pending.push(path);
                } else if kind.is_file() {
                    let rel = path
                        .strip_prefix(dir)
                        .map_err(|_| SkillError::BadPath(path.display().to_string()))?;
                    let rel = rel
                        .to_str()
                        .ok_or_else(|| SkillError::BadPath(rel.display().to_string()))?
                        .to_owned();
                    let bytes = std::fs::read(&path).map_err(|source| SkillError::Io {
                        path: path.display().to_string(),
                        source,
                    })?;
                    files.push((rel, bytes));
                    if files.len() > MAX_SKILL_FILES {
                        return Err(SkillError::TooManyFiles { count: files.len() });
                    }
                }
            }
        }
        SkillBundle::from_files(files)
    }

    /// Put the skill under a path prefix: `skill://PREFIX/NAME/SKILL.md`.
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        self.prefix = prefix.trim_matches('/').to_owned();
        self
    }

    /// The frontmatter's `name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `skill://[PREFIX/]NAME`, the skill's root directory.
    pub fn root_uri(&self) -> String {
        if self.prefix.is_empty() {
            format!("skill://{}", self.name)
        } else {
            format!("skill://{}/{}", self.prefix, self.name)
        }
    }

    /// The URI of the skill's `SKILL.md`.
    pub fn skill_md_uri(&self) -> String {
        format!("{}/{SKILL_FILE}", self.root_uri())
    }

    /// The skill as `skills/list` and `skills/get` describe it.
    pub fn describe(&self) -> Skill {
        let root = self.root_uri();
        Skill {
            uri: format!("{root}/{SKILL_FILE}"),
            frontmatter: self.frontmatter.clone(),
            resources: SkillResources::Files(
                self.files
                    .iter()
                    .map(|(path, file)| SkillResource {
                        uri: format!("{root}/{path}"),
                        digest: file.digest.clone(),
                        size: file.bytes.len() as u64,
                    })
                    .collect(),
            ),
        }
    }

    /// The file at `uri`, if it is one of this skill's.
    fn file(&self, uri: &str) -> Option<(&str, &SkillFile)> {
        let rel = uri.strip_prefix(&self.root_uri())?.strip_prefix('/')?;
        self.files.get_key_value(rel).map(|(k, v)| (k.as_str(), v))
    }

    /// The contents of the file at `uri`, as `resources/read` answers them.
    pub(crate) fn read(&self, uri: &str) -> Option<ResourceContents> {
        let (path, file) = self.file(uri)?;
        let mime = mime_type(path);
        Some(match std::str::from_utf8(&file.bytes) {
            Ok(text) => {
                let mut c = TextResourceContents::new(uri, text);
                c.mime_type = Some(mime.to_owned());
                ResourceContents::Text(c)
            }
            Err(_) => {
                let mut c = BlobResourceContents::new(uri, STANDARD.encode(&file.bytes));
                c.mime_type = Some(mime.to_owned());
                ResourceContents::Blob(c)
            }
        })
    }

    /// The direct children of the directory `uri` (the root or one below it), if it is one
    /// of this skill's directories.
    pub(crate) fn directory(&self, uri: &str) -> Option<Vec<Resource>> {
        let root = self.root_uri();
        let rel = uri.strip_prefix(&root)?;
        let dir = match rel {
            "" => "",
            _ => rel.strip_prefix('/').filter(|d| !d.is_empty())?,
        };
        let inside = |path: &'_ str| -> Option<String> {
            if dir.is_empty() {
                Some(path.to_owned())
            } else {
                path.strip_prefix(dir)?.strip_prefix('/').map(str::to_owned)
            }
        };
        let mut files = Vec::new();
        let mut dirs = BTreeSet::new();
        let mut found = dir.is_empty();
        for (path, file) in &self.files {
            let Some(rest) = inside(path) else { continue };
            found = true;
            match rest.split_once('/') {
                Some((sub, _)) => {
                    dirs.insert(sub.to_owned());
                }
                None => {
                    let mut r = Resource::new(format!("{root}/{path}"), rest.clone());
                    r.mime_type = Some(mime_type(path).to_owned());
                    r.size = Some(file.bytes.len() as u64);
                    files.push(r);
                }
            }
        }
        if !found {
            return None;
        }
        let base = if dir.is_empty() {
            root.clone()
        } else {
            format!("{root}/{dir}")
        };
        let mut out: Vec<Resource> = dirs
            .into_iter()
            .map(|sub| {
                let mut r = Resource::new(format!("{base}/{sub}"), sub);
                r.mime_type = Some(DIRECTORY_MIME_TYPE.to_owned());
                r
            })
            .collect();
        out.extend(files);
        Some(out)
    }
}

/// Find every skill under `dir`: `dir` itself if it holds a `SKILL.md`, else each directory
/// below it that does (not looking inside a skill for more).
pub fn skills_in(dir: impl AsRef<Path>) -> Result<Vec<SkillBundle>, SkillError> {
    let dir = dir.as_ref();
    if dir.join(SKILL_FILE).is_file() {
        return Ok(vec![SkillBundle::from_dir(dir)?]);
    }
    let io = |source| SkillError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut found = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if entry.file_type().map_err(io)?.is_dir() {
            found.extend(skills_in(entry.path())?);
        }
    }
    Ok(found)
}

fn check_path(path: &str) -> Result<(), SkillError> {
    let bad = || SkillError::BadPath(path.to_owned());
    if path.is_empty() || path.contains('\\') || path.ends_with('/') {
        return Err(bad());
    }
    for part in Path::new(path).components() {
        if !matches!(part, Component::Normal(_)) {
            return Err(bad());
        }
    }
    Ok(())
}

/// The YAML block between the first two `---` lines, as JSON.
fn frontmatter(text: &str) -> Result<JsonObject, SkillError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(SkillError::Frontmatter(
            "it must start with a `---` line opening the YAML frontmatter".into(),
        ));
    }
    let mut yaml = String::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err(SkillError::Frontmatter(
            "the frontmatter has no closing `---` line".into(),
        ));
    }
    let value: serde_json::Value = serde_saphyr::from_str(&yaml)
        .map_err(|e| SkillError::Frontmatter(format!("the frontmatter is not YAML: {e}")))?;
    match value {
        serde_json::Value::Object(map) => Ok(map),
        _ => Err(SkillError::Frontmatter(
            "the frontmatter must be a YAML map".into(),
        )),
    }
}

fn text_field<'a>(map: &'a JsonObject, key: &'static str) -> Result<&'a str, SkillError> {
    map.get(key)
        .and_then(|v| v.as_str())
        .ok_or(SkillError::Missing(key))
}

fn mime_type(path: &str) -> &'static str {
    match path
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
    {
        Some(ext) => match ext.as_str() {
            "md" | "markdown" => "text/markdown",
            "txt" => "text/plain",
            "json" => "application/json",
            "py" => "text/x-python",
            "sh" => "text/x-shellscript",
            "js" | "mjs" => "text/javascript",
            "html" | "htm" => "text/html",
            "csv" => "text/csv",
            "yaml" | "yml" => "application/yaml",
            "toml" => "application/toml",
            "png" => "image/png",
            "jpg" | "jpeg" => "image/jpeg",
            "pdf" => "application/pdf",
            _ => "application/octet-stream",
        },
        None => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKILL_MD: &str = "---\nname: refunds\ndescription: Process refunds\nmetadata:\n  version: \"2\"\n---\n# Refunds\n";

    fn bundle() -> SkillBundle {
        SkillBundle::from_files([
            ("SKILL.md", SKILL_MD.as_bytes().to_vec()),
            ("examples/email.md", b"Dear customer".to_vec()),
            ("examples/deep/x.bin", vec![0xff, 0x00]),
        ])
        .expect("a skill")
        .with_prefix("acme/billing")
    }

    #[test]
    fn describes_files_with_digests_and_sizes() {
        let skill = bundle().describe();
        assert_eq!(skill.uri, "skill://acme/billing/refunds/SKILL.md");
        assert_eq!(skill.name(), "refunds");
        assert_eq!(skill.frontmatter["metadata"]["version"], "2");
        let SkillResources::Files(files) = skill.resources else {
            panic!("a manifest")
        };
        assert_eq!(files.len(), 3);
        let email = files
            .iter()
            .find(|f| f.uri.ends_with("/examples/email.md"))
            .expect("email.md");
        assert_eq!(email.size, 13);
        assert_eq!(
            email.digest,
            format!("sha256:{:x}", Sha256::digest(b"Dear customer"))
        );
    }

    #[test]
    fn reads_files_as_text_or_blob() {
        let b = bundle();
        let Some(ResourceContents::Text(t)) = b.read("skill://acme/billing/refunds/SKILL.md")
        else {
            panic!("text")
        };
        assert_eq!(t.mime_type.as_deref(), Some("text/markdown"));
        assert!(matches!(
            b.read("skill://acme/billing/refunds/examples/deep/x.bin"),
            Some(ResourceContents::Blob(_))
        ));
        assert!(b.read("skill://acme/billing/refunds/nope.md").is_none());
        assert!(b.read("skill://acme/billing/refundsX/SKILL.md").is_none());
    }

    #[test]
    fn lists_direct_children_of_directories() {
        let b = bundle();
        let root = b
            .directory("skill://acme/billing/refunds")
            .expect("the root");
        let names: Vec<_> = root.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["examples", "SKILL.md"]);
        assert_eq!(root[0].mime_type.as_deref(), Some(DIRECTORY_MIME_TYPE));
        let examples = b
            .directory("skill://acme/billing/refunds/examples")
            .expect("examples/");
        let names: Vec<_> = examples.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["deep", "email.md"]);
        assert!(b.directory("skill://acme/billing/refunds/nope").is_none());
        assert!(b.directory("skill://acme/billing/refunds/").is_none());
        assert!(
            b.directory("skill://acme/billing/refunds/SKILL.md")
                .is_none()
        );
    }

    #[test]
    fn refuses_what_is_not_a_skill() {
        let one = |md: &str| SkillBundle::from_files([("SKILL.md", md.as_bytes().to_vec())]);
        assert!(matches!(
            one("# no frontmatter"),
            Err(SkillError::Frontmatter(_))
        ));
        assert!(matches!(
            one("---\nname: x\n"),
            Err(SkillError::Frontmatter(_))
        ));
        assert!(matches!(
            one("---\n- a\n---\n"),
            Err(SkillError::Frontmatter(_))
        ));
        assert!(matches!(
            one("---\n: : :\n  - [\n---\n"),
            Err(SkillError::Frontmatter(_))
        ));
        assert!(matches!(
            one("---\nname: x\n---\n"),
            Err(SkillError::Missing("description"))
        ));
        assert!(matches!(
            one("---\nname: a/b\ndescription: d\n---\n"),
            Err(SkillError::BadName(_))
        ));
        assert!(matches!(
            SkillBundle::from_files([("x.md", b"x".to_vec())]),
            Err(SkillError::NoSkillFile)
        ));
        for path in ["../x", "/etc/passwd", "a/../../b", "a\\b", ""] {
            assert!(
                matches!(
                    SkillBundle::from_files([(path, b"x".to_vec())]),
                    Err(SkillError::BadPath(_))
                ),
                "{path}"
            );
        }
        let many = (0..=MAX_SKILL_FILES).map(|i| (format!("f{i}"), vec![]));
        assert!(matches!(
            SkillBundle::from_files(many),
            Err(SkillError::TooManyFiles { .. })
        ));
    }
}
