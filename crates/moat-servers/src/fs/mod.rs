//! The filesystem server (`moat serve fs --root DIR`): tools to list, read, search, stat,
//! write, move and delete files under one directory, and the files as resources.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! moat_servers::fs::server("/srv/notes".into())?.serve_stdio().await?;
//! # Ok(()) }
//! ```
//!
//! # Tools
//!
//! | tool | does | annotations |
//! |---|---|---|
//! | `list_directory` | entries of a directory, optionally recursive | read-only, idempotent |
//! | `read_file` | a file or a byte range of it: text as text, images as image content, other binary as a base64 blob | read-only, idempotent |
//! | `search_files` | names by glob or substring, optionally files containing a text | read-only, idempotent |
//! | `stat` | kind, size, modification time, permissions, link target | read-only, idempotent |
//! | `write_file` | create or replace a file (text or base64) | destructive, idempotent |
//! | `move_file` | rename or move a file or directory | destructive |
//! | `delete_file` | delete a file or link, or a directory tree with `recursive` | destructive, idempotent |
//!
//! With [`FsOptions::read_only`] only the first four are offered. None of them reaches
//! beyond the root (`openWorldHint: false`).
//!
//! # Paths and the root
//!
//! Tool paths are relative to the root; an absolute path is accepted only when it is spelled
//! under the root's canonical path. `..` is refused outright. Every path is opened from a
//! descriptor of the root with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` and every
//! operation is then done on descriptors (`fstat`, `openat`/`renameat`/`unlinkat` relative
//! to the parent's descriptor), so no `..`, symlink or race between a check and its use can
//! lead outside (see `root.rs`, which also has the fallback for kernels without `openat2`).
//!
//! **Symlinks**: a link whose target stays inside the root is followed when reading and when
//! it is a directory along the way; one leading outside (`..` past the root) is refused, and
//! so is every absolute target, even one naming a file inside the root (the kernel's
//! `RESOLVE_BENEATH` rule, kept by the fallback too). The last component of a write, move or delete is never followed: writing to a
//! link is refused, moving or deleting one acts on the link itself. Recursive listings,
//! searches and deletes do not enter linked directories.
//!
//! String checks and descriptors are one fence; the other is the sandbox. Run behind the
//! gateway with `rw = [root]` in its sandbox table (as `moat demo` does), or under
//! `moat sandbox --stdio --rw ROOT`, the root is the server's only writable path, so even a
//! flaw here cannot write elsewhere. `moat serve fs` on its own is not confined.
//!
//! # Resources
//!
//! Files are `file:///absolute/path` resources (percent-encoded). `resources/list` offers
//! the first [`FsOptions::list_limit`] regular files, breadth-first, leaving out hidden names
//! (starting with `.`, so `.git` does not crowd out the rest); the template `file:///{+path}`
//! reads any file under the root. A file's MIME type comes from its extension; text comes as
//! text, anything else as a blob. Reads larger than [`FsOptions::max_read_bytes`] are refused
//! with a pointer to `read_file`'s ranges.
//!
//! Changes are found by polling: subscribed files every [`FsOptions::watch_interval`]
//! (`notifications/resources/updated`), the list every [`FsOptions::list_interval`] and right
//! after a tool changes the tree (`notifications/resources/list_changed`). The list poller
//! starts with [`server`] when it is called inside a tokio runtime, and ends when the
//! server is dropped.

mod root;
mod util;
mod watch;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use moat::schemars::{self, JsonSchema};
use moat::types::{
    BlobResourceContents, CallToolResult, ContentBlock, Resource, ResourceContents,
    ResourceTemplate, TextResourceContents, Tool, ToolAnnotations,
};
use moat::{Json, RequestContext, ResourceRequest, Server};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use root::{Kind, RelPath, Root, WalkOptions};

/// Largest file `search_files` looks inside when searching content.
const SEARCH_FILE_CAP: u64 = 8 << 20;
/// Entries a recursive listing or a search looks at before it stops.
const MAX_VISITS: usize = 200_000;

/// Settings of the filesystem server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FsOptions {
    /// The most bytes one `read_file` returns, and the largest file a resource read returns.
    pub max_read_bytes: u64,
    /// Offer only the read-only tools.
    pub read_only: bool,
    /// How many files `resources/list` offers.
    pub list_limit: usize,
    /// How often subscribed files are checked for changes.
    pub watch_interval: Duration,
    /// How often the listed files are walked again for additions and removals.
    pub list_interval: Duration,
}

impl Default for FsOptions {
    fn default() -> Self {
        FsOptions {
            max_read_bytes: 1 << 20,
            read_only: false,
            list_limit: 1000,
            watch_interval: Duration::from_secs(1),
            list_interval: Duration::from_secs(2),
        }
    }
}

/// Why the server could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// The root does not exist or cannot be opened.
    #[error("cannot open the root {path}: {source}")]
    Root {
        /// The root as given.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The root is not a directory.
    #[error("the root {0} is not a directory")]
    NotADirectory(PathBuf),
}

/// Why one operation failed: the message the client (a model, often) reads, saying what
/// to do instead.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpError {
    #[error(
        "`{path}` is outside the root {}; give a path relative to the root, or an absolute path under it",
        root.display()
    )]
    Outside { path: String, root: PathBuf },
    #[error("`{path}`: `..` is not allowed in paths; give the path from the root instead")]
    DotDot { path: String },
    #[error(
        "`{path}` leads outside the root through a symbolic link; only links that stay inside the root are followed"
    )]
    Escape { path: String },
    #[error("`{path}` does not exist; list_directory or search_files show what does")]
    NotFound { path: String },
    #[error("the directory of `{path}` does not exist; pass create_dirs=true to create it")]
    NoParent { path: String },
    #[error("`{path}` is a directory; use list_directory to see what is in it")]
    IsDir { path: String },
    #[error("`{path}` is not a directory (or a part of it is a file)")]
    NotDir { path: String },
    #[error(
        "`{path}` is (or passes through) a symbolic link this operation does not follow, or a loop of links; act on the link's target instead"
    )]
    Symlink { path: String },
    #[error("`{path}` already exists; pass overwrite=true to replace it")]
    Exists { path: String },
    #[error("`{path}` is not a regular file (a FIFO, socket or device)")]
    NotRegular { path: String },
    #[error("`{path}` is the root itself, which cannot be {what}")]
    RootItself { path: String, what: &'static str },
    #[error("`{path}`: permission denied")]
    Denied { path: String },
    #[error(
        "`{path}` is {size} bytes, more than the {cap}-byte limit; read it in parts with read_file's offset and length"
    )]
    TooLarge { path: String, size: u64, cap: u64 },
    #[error("{0}")]
    Invalid(String),
    #[error("`{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl OpError {
    fn from_errno(e: rustix::io::Errno, path: &str) -> OpError {
        use rustix::io::Errno;
        let path = path.to_owned();
        match e {
            Errno::NOENT => OpError::NotFound { path },
            // What RESOLVE_BENEATH answers for a step that would leave the root.
            Errno::XDEV => OpError::Escape { path },
            Errno::LOOP => OpError::Symlink { path },
            Errno::ISDIR => OpError::IsDir { path },
            Errno::NOTDIR => OpError::NotDir { path },
            Errno::EXIST => OpError::Exists { path },
            Errno::ACCESS | Errno::PERM | Errno::ROFS => OpError::Denied { path },
            // Opening a FIFO for writing with no reader (we never wait for one).
            Errno::NXIO => OpError::NotRegular { path },
            e => OpError::Io {
                path,
                source: e.into(),
            },
        }
    }

    fn io(path: &str, source: std::io::Error) -> OpError {
        match source.raw_os_error() {
            Some(code) => OpError::from_errno(rustix::io::Errno::from_raw_os_error(code), path),
            None => OpError::Io {
                path: path.to_owned(),
                source,
            },
        }
    }
}

/// What every handler shares.
pub(crate) struct Fs {
    root: Root,
    options: FsOptions,
    /// Poked after a tool changes the tree, so `list_changed` need not wait for the poll.
    tree_changed: tokio::sync::Notify,
}

impl Fs {
    fn rel_from_uri(&self, uri: &str) -> Result<RelPath, OpError> {
        let path = util::uri_path(uri).map_err(OpError::Invalid)?;
        self.root.relative_os(&path, uri)
    }

    fn uri(&self, rel: &RelPath) -> String {
        util::file_uri(&self.root.absolute(rel))
    }

    /// The resources to list: the first regular files under the root, hidden names left out.
    fn snapshot(&self) -> BTreeMap<String, Resource> {
        let mut out = BTreeMap::new();
        let limit = self.options.list_limit;
        let options = WalkOptions {
            recursive: true,
            hidden: false,
            max_visits: MAX_VISITS,
        };
        let walked = self.root.walk(&RelPath::root(), ".", options, |_, entry| {
            if entry.kind == Kind::File {
                let Ok(rel) = self.root.relative(&entry.path) else {
                    return true;
                };
                let uri = self.uri(&rel);
                let def = Resource {
                    uri: uri.clone(),
                    name: entry.path.clone(),
                    mime_type: util::mime_of(&entry.path).map(str::to_owned),
                    ..Default::default()
                };
                out.insert(uri, def);
            }
            out.len() < limit
        });
        if let Err(e) = walked {
            tracing::warn!(error = %e, "listing the root for resources failed");
        }
        out
    }
}

/// Build the filesystem server for the files under `root` (which must be a directory), with
/// default options. See the [module docs](self).
pub fn server(root: PathBuf) -> Result<Server, FsError> {
    server_with(root, FsOptions::default())
}

/// Build the filesystem server with `options`.
pub fn server_with(root: PathBuf, options: FsOptions) -> Result<Server, FsError> {
    let root = Root::open(&root)?;
    let read_only = options.read_only;
    let fs = Arc::new(Fs {
        root,
        options,
        tree_changed: tokio::sync::Notify::new(),
    });
    let shown_root = fs.root.path().display().to_string();
    let mut server = Server::new("moat-fs", env!("CARGO_PKG_VERSION")).instructions(format!(
        "Files under {shown_root}. Paths are relative to that directory (absolute paths must lie \
         under it). Symbolic links are followed only while they stay inside it."
    ));
    server = read_tools(server, &fs);
    if !read_only {
        server = write_tools(server, &fs);
    }

    let listed = fs.snapshot();
    for def in listed.values() {
        register_file(&server, &fs, def.clone());
    }
    let template = ResourceTemplate {
        uri_template: "file:///{+path}".to_owned(),
        name: "file".to_owned(),
        title: Some("A file under the root".to_owned()),
        description: Some(format!(
            "Any file under {shown_root}, by absolute path: file://{shown_root}/RELATIVE/PATH"
        )),
        ..Default::default()
    };
    let reader = fs.clone();
    server = server
        .try_resource_template(template, move |req: ResourceRequest| {
            let reader = reader.clone();
            async move { read_resource(reader, req.uri).await.map_err(resource_error) }
        })
        .unwrap_or_else(|e| unreachable!("the file template is well formed: {e}"));

    let subs = watch::Subscriptions::new(fs.clone());
    let weak = server.downgrade();
    server = server.on_subscribe(move |uri, watching| subs.changed(uri, watching, &weak));
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(watch::list_watcher(fs.clone(), server.downgrade(), listed));
        }
        Err(_) => tracing::warn!("no tokio runtime: the resource list will not follow changes"),
    }
    Ok(server)
}

/// Register one file as a listed resource.
fn register_file(server: &Server, fs: &Arc<Fs>, def: Resource) {
    let fs = fs.clone();
    // A clone shares the registry; the returned handle is not needed.
    let _ = server
        .clone()
        .resource_def(def, move |req: ResourceRequest| {
            let fs = fs.clone();
            async move { read_resource(fs, req.uri).await.map_err(resource_error) }
        });
}

/// What a failed read tells the client: a path that does not exist, or that the root keeps
/// out of reach, is "not found" (no hint of what lies outside); the rest failed.
fn resource_error(e: OpError) -> moat::ResourceError {
    match e {
        OpError::NotFound { .. }
        | OpError::Outside { .. }
        | OpError::DotDot { .. }
        | OpError::Escape { .. } => moat::ResourceError::NotFound(e.to_string()),
        other => moat::ResourceError::Failed(other.to_string()),
    }
}

/// `resources/read` of a `file://` URI.
async fn read_resource(fs: Arc<Fs>, uri: String) -> Result<ResourceContents, OpError> {
    blocking(move || {
        let rel = fs.rel_from_uri(&uri)?;
        let (file, meta) = fs.root.open_file(&rel, &uri)?;
        let cap = fs.options.max_read_bytes;
        if meta.size > cap {
            return Err(OpError::TooLarge {
                path: uri,
                size: meta.size,
                cap,
            });
        }
        // One more byte than allowed tells a file that grew since the fstat.
        let bytes = root::read_capped(file, cap + 1).map_err(|e| OpError::io(&uri, e))?;
        if bytes.len() as u64 > cap {
            return Err(OpError::TooLarge {
                path: uri,
                size: bytes.len() as u64,
                cap,
            });
        }
        let name = rel.display();
        let mime = util::mime_of(&name);
        let binary = mime.is_some_and(util::is_binary_mime);
        Ok(match util::as_text(&bytes, false).filter(|_| !binary) {
            Some((text, _)) => ResourceContents::Text(TextResourceContents {
                mime_type: Some(mime.unwrap_or("text/plain").to_owned()),
                ..TextResourceContents::new(uri, text)
            }),
            None => ResourceContents::Blob(BlobResourceContents {
                mime_type: Some(mime.unwrap_or("application/octet-stream").to_owned()),
                ..BlobResourceContents::new(uri, STANDARD.encode(&bytes))
            }),
        })
    })
    .await
}

/// Run blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, OpError> + Send + 'static,
) -> Result<T, OpError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        OpError::Invalid(format!(
            "the operation failed unexpectedly ({e}); try again"
        ))
    })?
}

fn def(name: &str, title: &str, description: &str, hints: [bool; 3]) -> Tool {
    let [read_only, destructive, idempotent] = hints;
    Tool::new(name, Value::Null)
        .with_title(title)
        .with_description(description)
        .with_annotations(ToolAnnotations {
            title: Some(title.to_owned()),
            read_only_hint: Some(read_only),
            destructive_hint: Some(destructive),
            idempotent_hint: Some(idempotent),
            open_world_hint: Some(false),
        })
}

const READ_ONLY: [bool; 3] = [true, false, true];

// ---------------------------------------------------------------------------------------
// Read-only tools

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// The directory, relative to the root (default: the root itself).
    #[serde(default)]
    path: Option<String>,
    /// Also list everything below it, breadth-first. Linked directories are listed, not entered.
    #[serde(default)]
    recursive: bool,
    /// The most entries to return (default 1000, at most 10000).
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
struct Listing {
    /// The directory listed, relative to the root.
    path: String,
    /// Its entries, by name within each directory.
    entries: Vec<ListEntry>,
    /// Whether there were more entries than returned.
    truncated: bool,
}

#[derive(Serialize, JsonSchema)]
struct ListEntry {
    /// Relative to the root: pass it back to the other tools as is.
    path: String,
    kind: Kind,
    /// Bytes, for regular files.
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// The file, relative to the root.
    path: String,
    /// Byte offset to start at (default 0).
    #[serde(default)]
    offset: Option<u64>,
    /// Bytes to read (default and maximum: the server's read limit, 1 MiB unless configured).
    #[serde(default)]
    length: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Matched against names: a glob (`*.rs`, `src/**/*.md`, `?`, `[a-z]`) when it has `*`,
    /// `?` or `[`, else a case-insensitive part of the name. A glob with `/` is matched
    /// against the whole path from the root. Empty: every name.
    #[serde(default)]
    pattern: String,
    /// Only regular files containing this text (case-sensitive; files over 8 MiB are skipped).
    #[serde(default)]
    content: Option<String>,
    /// Where to search, relative to the root (default: the root).
    #[serde(default)]
    path: Option<String>,
    /// Also search hidden files and directories (names starting with `.`).
    #[serde(default)]
    include_hidden: bool,
    /// The most matches to return (default 100, at most 1000).
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
struct SearchResult {
    matches: Vec<SearchMatch>,
    /// Whether the search stopped at the limit (or at its budget of entries) before the end.
    truncated: bool,
}

#[derive(Serialize, JsonSchema)]
struct SearchMatch {
    /// Relative to the root.
    path: String,
    kind: Kind,
    /// For a content search: the first line with the text (1-based) …
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u64>,
    /// … and that line (cut to 200 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    /// Relative to the root.
    path: String,
}

#[derive(Serialize, JsonSchema)]
struct StatInfo {
    /// Relative to the root.
    path: String,
    /// What it is; a symbolic link is reported as one, not followed.
    kind: Kind,
    /// Bytes.
    size: u64,
    /// Last modification, RFC 3339 UTC.
    modified: String,
    /// Last modification, seconds since the Unix epoch.
    modified_unix: i64,
    /// Permission bits in octal, e.g. `0644`.
    permissions: String,
    /// Permission bits as `rw-r--r--`.
    mode: String,
    /// Where a symbolic link points (as written in the link).
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
}

fn read_tools(server: Server, fs: &Arc<Fs>) -> Server {
    let f = fs.clone();
    let server = server.tool_def(
        def(
            "list_directory",
            "List directory",
            "List the entries of a directory under the root (files, directories, symbolic \
             links), with sizes. Paths in the answer are relative to the root.",
            READ_ONLY,
        ),
        move |_: RequestContext, args: ListArgs| {
            let fs = f.clone();
            async move { blocking(move || list(&fs, args)).await.map(Json) }
        },
    );
    let f = fs.clone();
    let server = server.tool_def(
        def(
            "read_file",
            "Read file",
            "Read a file under the root, whole or a byte range (offset, length). Text comes as \
             text; images as image content; other binary data as a base64 blob. Long files are \
             cut at the read limit with a note saying how to read on.",
            READ_ONLY,
        ),
        move |_: RequestContext, args: ReadArgs| {
            let fs = f.clone();
            async move { blocking(move || read(&fs, args)).await }
        },
    );
    let f = fs.clone();
    let server = server.tool_def(
        def(
            "search_files",
            "Search files",
            "Find files and directories under the root by name (glob or substring), optionally \
             only files containing a text. Hidden names are skipped unless include_hidden.",
            READ_ONLY,
        ),
        move |ctx: RequestContext, args: SearchArgs| {
            let fs = f.clone();
            async move {
                let stop = Arc::new(AtomicBool::new(false));
                let flag = stop.clone();
                let work = blocking(move || search(&fs, args, &flag));
                tokio::select! {
                    out = work => out.map(Json),
                    () = ctx.cancelled() => {
                        stop.store(true, Ordering::Relaxed);
                        Err(OpError::Invalid("the search was cancelled".to_owned()))
                    }
                }
            }
        },
    );
    let f = fs.clone();
    server.tool_def(
        def(
            "stat",
            "File information",
            "Kind, size, modification time and permissions of a path under the root. A symbolic \
             link is described itself (with its target), not followed.",
            READ_ONLY,
        ),
        move |_: RequestContext, args: PathArgs| {
            let fs = f.clone();
            async move { blocking(move || stat(&fs, args)).await.map(Json) }
        },
    )
}

fn list(fs: &Fs, args: ListArgs) -> Result<Listing, OpError> {
    let shown = args.path.unwrap_or_else(|| ".".to_owned());
    let rel = fs.root.relative(&shown)?;
    let limit = args.limit.unwrap_or(1000).clamp(1, 10_000);
    let mut entries = Vec::new();
    let mut truncated = false;
    let options = WalkOptions {
        recursive: args.recursive,
        hidden: true,
        max_visits: MAX_VISITS,
    };
    let finished = fs.root.walk(&rel, &shown, options, |_, e| {
        if entries.len() == limit {
            truncated = true;
            return false;
        }
        entries.push(ListEntry {
            path: e.path.clone(),
            kind: e.kind,
            size: e.size,
        });
        true
    })?;
    Ok(Listing {
        path: rel.display(),
        entries,
        truncated: truncated || !finished,
    })
}

fn read(fs: &Fs, args: ReadArgs) -> Result<CallToolResult, OpError> {
    let shown = args.path;
    let rel = fs.root.relative(&shown)?;
    let cap = fs.options.max_read_bytes;
    let offset = args.offset.unwrap_or(0);
    let asked = args.length.unwrap_or(cap);
    let out = fs.root.read(&rel, &shown, offset, asked.min(cap))?;
    let size = out.size;
    let whole = offset == 0 && out.bytes.len() as u64 == size;
    let name = rel.display();
    let mime = util::mime_of(&name);
    let binary = mime.is_some_and(util::is_binary_mime);

    let mut blocks = Vec::new();
    let mut end = offset + out.bytes.len() as u64;
    match mime {
        Some(m) if whole && util::is_image(m) => {
            blocks.push(ContentBlock::image(STANDARD.encode(&out.bytes), m));
        }
        Some(m) if whole && util::is_audio(m) => {
            blocks.push(ContentBlock::audio(STANDARD.encode(&out.bytes), m));
        }
        _ => match util::as_text(&out.bytes, !whole).filter(|_| !binary) {
            Some((text, used)) => {
                end = offset + used as u64;
                blocks.push(ContentBlock::text(text));
            }
            None => blocks.push(ContentBlock::resource(BlobResourceContents {
                mime_type: Some(mime.unwrap_or("application/octet-stream").to_owned()),
                ..BlobResourceContents::new(fs.uri(&rel), STANDARD.encode(&out.bytes))
            })),
        },
    }
    if offset > size {
        blocks.push(ContentBlock::text(format!(
            "[offset {offset} is past the end of `{shown}`, which has {size} bytes]"
        )));
    } else if end < size {
        let why = if asked > cap {
            format!(" (at most {cap} bytes per call)")
        } else {
            String::new()
        };
        blocks.push(ContentBlock::text(format!(
            "[truncated: bytes {offset}..{end} of {size}{why}; call read_file with offset={end} to read on]"
        )));
    } else if offset > 0 {
        blocks.push(ContentBlock::text(format!(
            "[bytes {offset}..{end} of {size}: the end of the file]"
        )));
    }
    Ok(CallToolResult::new(blocks))
}

fn search(fs: &Fs, args: SearchArgs, stop: &AtomicBool) -> Result<SearchResult, OpError> {
    let shown = args.path.unwrap_or_else(|| ".".to_owned());
    let rel = fs.root.relative(&shown)?;
    let limit = args.limit.unwrap_or(100).clamp(1, 1000);
    let glob = if util::is_glob(&args.pattern) {
        Some(util::Glob::parse(&args.pattern).map_err(OpError::Invalid)?)
    } else {
        None
    };
    let needle = args.pattern.to_lowercase();
    let content = args.content.filter(|c| !c.is_empty());
    let mut matches = Vec::new();
    let mut truncated = false;
    let options = WalkOptions {
        recursive: true,
        hidden: args.include_hidden,
        max_visits: MAX_VISITS,
    };
    let finished = fs.root.walk(&rel, &shown, options, |dir, e| {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let name = e.name.to_string_lossy();
        let named = match &glob {
            Some(g) if g.whole_path => g.matches(&e.path),
            Some(g) => g.matches(&name),
            None => name.to_lowercase().contains(&needle),
        };
        if !named {
            return true;
        }
        let (line, text) = match &content {
            None => (None, None),
            Some(_) if e.kind != Kind::File || e.size.unwrap_or(0) > SEARCH_FILE_CAP => {
                return true;
            }
            Some(c) => {
                let Some(hit) = root::open_entry(dir, &e.name)
                    .and_then(|f| root::read_capped(f, SEARCH_FILE_CAP).ok())
                    .and_then(|bytes| find_line(&bytes, c.as_bytes()))
                else {
                    return true;
                };
                (Some(hit.0), Some(hit.1))
            }
        };
        if matches.len() == limit {
            truncated = true;
            return false;
        }
        matches.push(SearchMatch {
            path: e.path.clone(),
            kind: e.kind,
            line,
            text,
        });
        true
    })?;
    if stop.load(Ordering::Relaxed) {
        return Err(OpError::Invalid("the search was cancelled".to_owned()));
    }
    Ok(SearchResult {
        matches,
        truncated: truncated || !finished,
    })
}

/// The first line of `hay` containing `needle`: its number (1-based) and its text.
fn find_line(hay: &[u8], needle: &[u8]) -> Option<(u64, String)> {
    let at = hay.windows(needle.len()).position(|w| w == needle)?;
    let start = hay[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let end = hay[at..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(hay.len(), |i| at + i);
    let line = hay[..at].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    let text: String = String::from_utf8_lossy(&hay[start..end])
        .trim_end_matches('\r')
        .chars()
        .take(200)
        .collect();
    Some((line, text))
}

fn stat(fs: &Fs, args: PathArgs) -> Result<StatInfo, OpError> {
    let rel = fs.root.relative(&args.path)?;
    let (m, target) = fs.root.stat(&rel, &args.path)?;
    Ok(StatInfo {
        path: rel.display(),
        kind: m.kind,
        size: m.size,
        modified: util::rfc3339(m.mtime),
        modified_unix: m.mtime,
        permissions: format!("{:04o}", m.mode),
        mode: util::mode_string(m.mode),
        target,
    })
}

// ---------------------------------------------------------------------------------------
// Tools that change the tree

/// How `write_file`'s content is encoded.
#[derive(Deserialize, JsonSchema, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Encoding {
    /// The content is the text to write (UTF-8).
    #[default]
    Text,
    /// The content is base64 of the bytes to write.
    Base64,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// The file, relative to the root.
    path: String,
    /// What to write: text, or base64 when `encoding` is `base64`.
    content: String,
    /// `text` (default) or `base64`.
    #[serde(default)]
    encoding: Encoding,
    /// Create missing parent directories (default false).
    #[serde(default)]
    create_dirs: bool,
    /// Replace the file if it exists (default true); with false an existing file is an error.
    #[serde(default = "yes")]
    overwrite: bool,
}

#[derive(Serialize, JsonSchema)]
struct Written {
    /// Relative to the root.
    path: String,
    /// Bytes written.
    bytes: u64,
    /// Whether the file was created (else replaced).
    created: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MoveArgs {
    /// What to move (a file, link or directory), relative to the root.
    source: String,
    /// Its new path, relative to the root.
    destination: String,
    /// Replace an existing destination (default false).
    #[serde(default)]
    overwrite: bool,
    /// Create missing parent directories of the destination (default false).
    #[serde(default)]
    create_dirs: bool,
}

#[derive(Serialize, JsonSchema)]
struct Moved {
    source: String,
    destination: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteArgs {
    /// What to delete, relative to the root. A symbolic link is deleted itself, not its target.
    path: String,
    /// Required to delete a directory: deletes it and everything in it.
    #[serde(default)]
    recursive: bool,
}

#[derive(Serialize, JsonSchema)]
struct Deleted {
    path: String,
    /// How many entries were removed (files, links and directories).
    removed: u64,
}

fn write_tools(server: Server, fs: &Arc<Fs>) -> Server {
    let f = fs.clone();
    let server = server.tool_def(
        def(
            "write_file",
            "Write file",
            "Create a file under the root, or replace its content (overwrite, default true). \
             Content is text, or base64 with encoding=base64. Refuses to write through a \
             symbolic link.",
            [false, true, true],
        ),
        move |_: RequestContext, args: WriteArgs| {
            let fs = f.clone();
            async move {
                let out = blocking({
                    let fs = fs.clone();
                    move || write(&fs, args)
                })
                .await;
                fs.tree_changed.notify_one();
                out.map(Json)
            }
        },
    );
    let f = fs.clone();
    let server = server.tool_def(
        def(
            "move_file",
            "Move file",
            "Move or rename a file, link or directory within the root. An existing destination \
             is replaced only with overwrite=true.",
            [false, true, false],
        ),
        move |_: RequestContext, args: MoveArgs| {
            let fs = f.clone();
            async move {
                let out = blocking({
                    let fs = fs.clone();
                    move || {
                        let from = fs.root.relative(&args.source)?;
                        let to = fs.root.relative(&args.destination)?;
                        fs.root.rename(
                            &from,
                            &args.source,
                            &to,
                            &args.destination,
                            args.overwrite,
                            args.create_dirs,
                        )?;
                        Ok(Moved {
                            source: from.display(),
                            destination: to.display(),
                        })
                    }
                })
                .await;
                fs.tree_changed.notify_one();
                out.map(Json)
            }
        },
    );
    let f = fs.clone();
    server.tool_def(
        def(
            "delete_file",
            "Delete file",
            "Delete a file or symbolic link under the root (the link, not its target); a \
             directory only with recursive=true, and then everything in it.",
            [false, true, true],
        ),
        move |_: RequestContext, args: DeleteArgs| {
            let fs = f.clone();
            async move {
                let out = blocking({
                    let fs = fs.clone();
                    move || {
                        let rel = fs.root.relative(&args.path)?;
                        let removed = fs.root.remove(&rel, &args.path, args.recursive)?;
                        Ok(Deleted {
                            path: rel.display(),
                            removed,
                        })
                    }
                })
                .await;
                fs.tree_changed.notify_one();
                out.map(Json)
            }
        },
    )
}

fn write(fs: &Fs, args: WriteArgs) -> Result<Written, OpError> {
    let rel = fs.root.relative(&args.path)?;
    let bytes = match args.encoding {
        Encoding::Text => args.content.into_bytes(),
        Encoding::Base64 => STANDARD.decode(args.content.trim()).map_err(|e| {
            OpError::Invalid(format!(
                "the content is not valid base64 ({e}); send text with encoding=text"
            ))
        })?,
    };
    let created = fs
        .root
        .write(&rel, &args.path, &bytes, args.create_dirs, args.overwrite)?;
    Ok(Written {
        path: rel.display(),
        bytes: bytes.len() as u64,
        created,
    })
}
