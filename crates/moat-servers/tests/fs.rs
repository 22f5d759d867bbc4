//! The fs server, driven in-process by a real moat client: every tool and resource path,
//! and the attacks it must refuse — `..`, absolute paths, symlinks out of the root (as the
//! file, as a directory along the way), a symlink swapped in between check and use, and
//! moves and deletes across the root's boundary. Each attack test checks that nothing from
//! outside came back (not even base64-encoded) and that nothing outside changed.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use moat::transport::{Connection, Limits};
use moat::types::{CallToolResult, ContentBlock, ResourceContents, SubscriptionFilter};
use moat::{Client, ProtocolVersion, ServerNotification, VersionPreference};
use moat_servers::fs::{FsError, FsOptions, server, server_with};
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::sync::broadcast;

/// What lives outside the root. It must never come back from the server.
const SECRET: &str = "TOPSECRET-outside-the-root";
/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

const READ_TOOLS: [&str; 4] = ["list_directory", "read_file", "search_files", "stat"];
const WRITE_TOOLS: [&str; 3] = ["write_file", "move_file", "delete_file"];

struct Env {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    client: Client,
}

impl Env {
    fn uri(&self, rel: &str) -> String {
        format!("file://{}/{rel}", self.root.display())
    }

    async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        self.client.call_tool(tool, args).await.unwrap()
    }

    /// A call that must succeed; its structured content.
    async fn ok(&self, tool: &str, args: Value) -> Value {
        let r = self.call(tool, args.clone()).await;
        assert!(!r.is_error(), "{tool} {args} failed: {}", text(&r));
        r.structured_content.unwrap_or(Value::Null)
    }

    /// A call that must fail, and must not carry anything from outside; its message.
    async fn refused(&self, tool: &str, args: Value) -> String {
        let r = self.call(tool, args.clone()).await;
        assert!(r.is_error(), "{tool} {args} succeeded: {r:?}");
        assert_no_secret(&r);
        text(&r)
    }

    /// Nothing outside the root changed, or appeared.
    fn assert_outside_intact(&self) {
        let secret = std::fs::read_to_string(self.outside.join("secret")).unwrap();
        assert_eq!(secret, SECRET, "the file outside the root was changed");
        let mut names: Vec<_> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["secret"], "something was created outside the root");
    }
}

fn conn_pair() -> (Connection, Connection) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    (
        Connection::from_lines(BufReader::new(ar), aw, Limits::default()),
        Connection::from_lines(BufReader::new(br), bw, Limits::default()),
    )
}

fn fast() -> FsOptions {
    let mut o = FsOptions::default();
    o.watch_interval = Duration::from_millis(100);
    o.list_interval = Duration::from_millis(200);
    o
}

/// A root with files, a hidden directory, and links in and out; `outside/secret` beside it.
async fn env_with(options: FsOptions, version: ProtocolVersion) -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("notes/deep")).unwrap();
    std::fs::create_dir_all(root.join(".hidden")).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret"), SECRET).unwrap();
    std::fs::write(root.join("hello.txt"), "hello world\n").unwrap();
    std::fs::write(
        root.join("notes/todo.md"),
        "# todo\n- buy milk\n- find the needle here\n",
    )
    .unwrap();
    std::fs::write(root.join("notes/deep/more.md"), "more").unwrap();
    std::fs::write(root.join("data.bin"), (0..=255u8).collect::<Vec<_>>()).unwrap();
    std::fs::write(root.join("pic.png"), STANDARD.decode(PNG).unwrap()).unwrap();
    std::fs::write(root.join(".hidden/h.txt"), "hidden needle").unwrap();
    symlink("hello.txt", root.join("link_in")).unwrap();
    symlink("../outside/secret", root.join("rel_out")).unwrap();
    symlink(outside.join("secret"), root.join("abs_out")).unwrap();
    symlink("../outside", root.join("dir_out")).unwrap();

    let (server_side, client_side) = conn_pair();
    server_with(root.clone(), options)
        .unwrap()
        .start(server_side);
    let client = Client::builder()
        .protocol(VersionPreference::Exact(version))
        .request_timeout(Some(Duration::from_secs(20)))
        .connect(client_side)
        .await
        .unwrap();
    Env {
        _tmp: tmp,
        root,
        outside,
        client,
    }
}

async fn env() -> Env {
    env_with(fast(), ProtocolVersion::V2025_11_25).await
}

/// All text blocks of a result.
fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The secret appears nowhere in `value`, neither as text nor base64-encoded.
fn assert_no_secret(value: &impl serde::Serialize) {
    let wire = serde_json::to_string(value).unwrap();
    assert!(!wire.contains(SECRET), "the secret leaked: {wire}");
    let encoded = STANDARD.encode(&SECRET.as_bytes()[..24]);
    assert!(
        !wire.contains(&encoded),
        "the secret leaked (base64): {wire}"
    );
}

async fn next_notification(
    notes: &mut broadcast::Receiver<ServerNotification>,
    method: &str,
    within: Duration,
) -> Option<ServerNotification> {
    tokio::time::timeout(within, async {
        loop {
            match notes.recv().await {
                Ok(n) if n.method == method => return Some(n),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .await
    .ok()
    .flatten()
}

// ---------------------------------------------------------------------------------------
// Construction and tool definitions

#[tokio::test]
async fn the_root_must_be_an_existing_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = server(tmp.path().join("missing")).unwrap_err();
    assert!(matches!(missing, FsError::Root { .. }), "{missing}");
    std::fs::write(tmp.path().join("file"), "x").unwrap();
    let file = server(tmp.path().join("file")).unwrap_err();
    assert!(matches!(file, FsError::NotADirectory(_)), "{file}");
    assert!(server(tmp.path().to_owned()).is_ok());
}

#[tokio::test]
async fn tools_have_titles_and_accurate_annotations() {
    let env = env().await;
    let tools = env.client.list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort();
    let mut expected = [READ_TOOLS.as_slice(), WRITE_TOOLS.as_slice()].concat();
    expected.sort();
    assert_eq!(names, expected);
    for t in &tools {
        let a = t.annotations.as_ref().expect("annotations");
        assert!(
            t.title.is_some() && a.title.is_some(),
            "{} has no title",
            t.name
        );
        assert_eq!(a.open_world_hint, Some(false), "{}", t.name);
        let read_only = READ_TOOLS.contains(&t.name.as_str());
        assert_eq!(a.read_only_hint, Some(read_only), "{}", t.name);
        assert_eq!(a.destructive_hint, Some(!read_only), "{}", t.name);
        assert_eq!(a.idempotent_hint, Some(t.name != "move_file"), "{}", t.name);
        assert_eq!(t.input_schema["type"], "object");
    }
    let stat = tools.iter().find(|t| t.name == "stat").unwrap();
    assert!(stat.output_schema.is_some());

    let mut options = fast();
    options.read_only = true;
    let ro = env_with(options, ProtocolVersion::V2025_11_25).await;
    let mut names: Vec<_> = ro
        .client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    names.sort();
    assert_eq!(names, READ_TOOLS);
}

// ---------------------------------------------------------------------------------------
// Tools

#[tokio::test]
async fn list_directory_lists_recurses_and_limits() {
    let env = env().await;
    let top = env.ok("list_directory", json!({})).await;
    let entries = top["entries"].as_array().unwrap();
    let find = |p: &str| entries.iter().find(|e| e["path"] == p).cloned();
    assert_eq!(find("hello.txt").unwrap()["kind"], "file");
    assert_eq!(find("hello.txt").unwrap()["size"], 12);
    assert_eq!(find("notes").unwrap()["kind"], "directory");
    assert_eq!(find("dir_out").unwrap()["kind"], "symlink");
    assert_eq!(find(".hidden").unwrap()["kind"], "directory");
    assert!(find("notes/todo.md").is_none(), "not recursive");
    assert_eq!(top["truncated"], false);

    let sub = env.ok("list_directory", json!({"path": "notes"})).await;
    let paths: Vec<_> = sub["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(paths, ["notes/deep", "notes/todo.md"]);

    let all = env.ok("list_directory", json!({"recursive": true})).await;
    let paths: Vec<_> = all["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_owned())
        .collect();
    assert!(paths.contains(&"notes/deep/more.md".to_owned()));
    assert!(
        !paths.iter().any(|p| p.starts_with("dir_out/")),
        "a linked directory was entered: {paths:?}"
    );

    let few = env.ok("list_directory", json!({"limit": 2})).await;
    assert_eq!(few["entries"].as_array().unwrap().len(), 2);
    assert_eq!(few["truncated"], true);

    let e = env
        .refused("list_directory", json!({"path": "hello.txt"}))
        .await;
    assert!(e.contains("not a directory"), "{e}");
    let e = env.refused("list_directory", json!({"path": "nope"})).await;
    assert!(e.contains("does not exist"), "{e}");
}

#[tokio::test]
async fn read_file_text_ranges_and_truncation() {
    let env = env().await;
    let whole = env.call("read_file", json!({"path": "hello.txt"})).await;
    assert!(!whole.is_error());
    assert_eq!(text(&whole), "hello world\n");
    assert_eq!(whole.content.len(), 1, "no note for a whole file");

    let part = env
        .call(
            "read_file",
            json!({"path": "hello.txt", "offset": 6, "length": 5}),
        )
        .await;
    assert_eq!(part.content[0].as_text(), Some("world"));
    let note = part.content[1].as_text().unwrap();
    assert!(
        note.contains("bytes 6..11 of 12") && note.contains("offset=11"),
        "{note}"
    );

    let tail = env
        .call("read_file", json!({"path": "hello.txt", "offset": 6}))
        .await;
    assert_eq!(tail.content[0].as_text(), Some("world\n"));
    assert!(text(&tail).contains("end of the file"));

    let past = env
        .call("read_file", json!({"path": "hello.txt", "offset": 100}))
        .await;
    assert!(!past.is_error());
    assert!(text(&past).contains("past the end"));

    // A multi-byte character cut by the range is left for the next read.
    std::fs::write(env.root.join("utf8.txt"), "aé").unwrap();
    let cut = env
        .call("read_file", json!({"path": "utf8.txt", "length": 2}))
        .await;
    assert_eq!(cut.content[0].as_text(), Some("a"));
    assert!(text(&cut).contains("offset=1"));

    // The server's cap bounds every read, whatever length is asked for.
    let mut options = fast();
    options.max_read_bytes = 4;
    let small = env_with(options, ProtocolVersion::V2025_11_25).await;
    let r = small
        .call("read_file", json!({"path": "hello.txt", "length": 1000}))
        .await;
    assert_eq!(r.content[0].as_text(), Some("hell"));
    let note = r.content[1].as_text().unwrap();
    assert!(
        note.contains("truncated") && note.contains("offset=4"),
        "{note}"
    );
    assert!(note.contains("at most 4 bytes"), "{note}");

    let e = env.refused("read_file", json!({"path": "notes"})).await;
    assert!(e.contains("is a directory"), "{e}");
    let e = env
        .refused("read_file", json!({"path": "missing.txt"}))
        .await;
    assert!(e.contains("does not exist"), "{e}");
}

#[tokio::test]
async fn read_file_binary_images_and_links_inside() {
    let env = env().await;
    let bin = env.call("read_file", json!({"path": "data.bin"})).await;
    let ContentBlock::Resource(embedded) = &bin.content[0] else {
        panic!("binary as an embedded blob: {bin:?}");
    };
    let ResourceContents::Blob(blob) = &embedded.resource else {
        panic!("a blob: {bin:?}");
    };
    assert_eq!(
        STANDARD.decode(&blob.blob).unwrap(),
        (0..=255u8).collect::<Vec<_>>()
    );
    assert_eq!(blob.mime_type.as_deref(), Some("application/octet-stream"));
    assert_eq!(blob.uri, env.uri("data.bin"));

    let range = env
        .call(
            "read_file",
            json!({"path": "data.bin", "offset": 250, "length": 100}),
        )
        .await;
    let ContentBlock::Resource(embedded) = &range.content[0] else {
        panic!("{range:?}");
    };
    let ResourceContents::Blob(blob) = &embedded.resource else {
        panic!("{range:?}");
    };
    assert_eq!(
        STANDARD.decode(&blob.blob).unwrap(),
        [250, 251, 252, 253, 254, 255]
    );

    let pic = env.call("read_file", json!({"path": "pic.png"})).await;
    let ContentBlock::Image(image) = &pic.content[0] else {
        panic!("an image: {pic:?}");
    };
    assert_eq!(image.mime_type, "image/png");
    assert_eq!(image.data, PNG);

    // A link whose target stays inside the root is followed.
    let linked = env.call("read_file", json!({"path": "link_in"})).await;
    assert_eq!(text(&linked), "hello world\n");
}

#[tokio::test]
async fn search_files_by_glob_substring_and_content() {
    let env = env().await;
    let paths = |v: &Value| -> Vec<String> {
        v["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap().to_owned())
            .collect()
    };
    let md = env.ok("search_files", json!({"pattern": "*.md"})).await;
    assert_eq!(paths(&md), ["notes/todo.md", "notes/deep/more.md"]);
    let deep = env
        .ok("search_files", json!({"pattern": "notes/deep/**"}))
        .await;
    assert_eq!(paths(&deep), ["notes/deep/more.md"]);
    let sub = env.ok("search_files", json!({"pattern": "HELLO"})).await;
    assert_eq!(paths(&sub), ["hello.txt"]);
    let scoped = env
        .ok(
            "search_files",
            json!({"pattern": "*.md", "path": "notes/deep"}),
        )
        .await;
    assert_eq!(paths(&scoped), ["notes/deep/more.md"]);

    let found = env.ok("search_files", json!({"content": "needle"})).await;
    assert_eq!(paths(&found), ["notes/todo.md"], "hidden files skipped");
    assert_eq!(found["matches"][0]["line"], 3);
    assert_eq!(found["matches"][0]["text"], "- find the needle here");
    let hidden = env
        .ok(
            "search_files",
            json!({"content": "needle", "include_hidden": true}),
        )
        .await;
    assert_eq!(paths(&hidden), [".hidden/h.txt", "notes/todo.md"]);

    let one = env
        .ok("search_files", json!({"pattern": "", "limit": 1}))
        .await;
    assert_eq!(paths(&one).len(), 1);
    assert_eq!(one["truncated"], true);

    let e = env
        .refused("search_files", json!({"pattern": "[oops"}))
        .await;
    assert!(e.contains("unclosed"), "{e}");
}

#[tokio::test]
async fn stat_reports_kind_size_time_permissions_and_links() {
    let env = env().await;
    let f = env.ok("stat", json!({"path": "hello.txt"})).await;
    assert_eq!(f["kind"], "file");
    assert_eq!(f["size"], 12);
    assert_eq!(f["path"], "hello.txt");
    let mtime = std::fs::metadata(env.root.join("hello.txt"))
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(f["modified_unix"], mtime);
    assert!(f["modified"].as_str().unwrap().ends_with('Z'));
    assert_eq!(f["permissions"].as_str().unwrap().len(), 4);
    assert_eq!(f["mode"].as_str().unwrap().len(), 9);

    let d = env.ok("stat", json!({"path": "notes"})).await;
    assert_eq!(d["kind"], "directory");
    let root = env.ok("stat", json!({"path": "."})).await;
    assert_eq!(root["kind"], "directory");
    // A link is described, not followed — even one pointing outside (its target string is
    // only what the link says, no content).
    let l = env.ok("stat", json!({"path": "rel_out"})).await;
    assert_eq!(l["kind"], "symlink");
    assert_eq!(l["target"], "../outside/secret");
}

#[tokio::test]
async fn write_file_creates_replaces_and_refuses() {
    let env = env().await;
    let w = env
        .ok("write_file", json!({"path": "new.txt", "content": "one"}))
        .await;
    assert_eq!(w["created"], true);
    assert_eq!(w["bytes"], 3);
    assert_eq!(
        std::fs::read_to_string(env.root.join("new.txt")).unwrap(),
        "one"
    );

    let w = env
        .ok(
            "write_file",
            json!({"path": "new.txt", "content": "replaced"}),
        )
        .await;
    assert_eq!(w["created"], false);
    assert_eq!(
        std::fs::read_to_string(env.root.join("new.txt")).unwrap(),
        "replaced"
    );

    let e = env
        .refused(
            "write_file",
            json!({"path": "new.txt", "content": "x", "overwrite": false}),
        )
        .await;
    assert!(e.contains("overwrite=true"), "{e}");
    assert_eq!(
        std::fs::read_to_string(env.root.join("new.txt")).unwrap(),
        "replaced"
    );

    let e = env
        .refused("write_file", json!({"path": "a/b/c.txt", "content": "x"}))
        .await;
    assert!(e.contains("create_dirs=true"), "{e}");
    env.ok(
        "write_file",
        json!({"path": "a/b/c.txt", "content": "deep", "create_dirs": true}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.root.join("a/b/c.txt")).unwrap(),
        "deep"
    );

    env.ok(
        "write_file",
        json!({"path": "blob.bin", "content": STANDARD.encode([0u8, 159, 255]), "encoding": "base64"}),
    )
    .await;
    assert_eq!(
        std::fs::read(env.root.join("blob.bin")).unwrap(),
        [0, 159, 255]
    );

    let e = env
        .refused("write_file", json!({"path": "notes", "content": "x"}))
        .await;
    assert!(e.contains("directory"), "{e}");
    let e = env
        .refused("write_file", json!({"path": ".", "content": "x"}))
        .await;
    assert!(e.contains("root itself"), "{e}");
    // Writing to a link inside the root is refused too: links are never written through.
    let e = env
        .refused("write_file", json!({"path": "link_in", "content": "x"}))
        .await;
    assert!(e.contains("symbolic link"), "{e}");
    assert_eq!(
        std::fs::read_to_string(env.root.join("hello.txt")).unwrap(),
        "hello world\n"
    );
    let e = env
        .refused(
            "write_file",
            json!({"path": "x", "content": "x", "bogus": 1}),
        )
        .await;
    assert!(e.contains("bogus"), "{e}");
}

#[tokio::test]
async fn move_file_renames_and_refuses_to_clobber() {
    let env = env().await;
    let m = env
        .ok(
            "move_file",
            json!({"source": "hello.txt", "destination": "greeting.txt"}),
        )
        .await;
    assert_eq!(m["destination"], "greeting.txt");
    assert!(!env.root.join("hello.txt").exists());
    assert!(env.root.join("greeting.txt").exists());

    let e = env
        .refused(
            "move_file",
            json!({"source": "greeting.txt", "destination": "data.bin"}),
        )
        .await;
    assert!(e.contains("overwrite=true"), "{e}");
    env.ok(
        "move_file",
        json!({"source": "greeting.txt", "destination": "data.bin", "overwrite": true}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.root.join("data.bin")).unwrap(),
        "hello world\n"
    );

    env.ok(
        "move_file",
        json!({"source": "notes", "destination": "archive/notes", "create_dirs": true}),
    )
    .await;
    assert!(env.root.join("archive/notes/todo.md").exists());

    // Moving a link moves the link, wherever it points.
    env.ok(
        "move_file",
        json!({"source": "rel_out", "destination": "archive/rel_out"}),
    )
    .await;
    assert!(
        std::fs::symlink_metadata(env.root.join("archive/rel_out"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let e = env
        .refused(
            "move_file",
            json!({"source": "missing", "destination": "x"}),
        )
        .await;
    assert!(e.contains("does not exist"), "{e}");
    env.refused("move_file", json!({"source": ".", "destination": "x"}))
        .await;
    env.assert_outside_intact();
}

#[tokio::test]
async fn delete_file_files_links_and_trees() {
    let env = env().await;
    let d = env.ok("delete_file", json!({"path": "hello.txt"})).await;
    assert_eq!(d["removed"], 1);
    assert!(!env.root.join("hello.txt").exists());

    let e = env.refused("delete_file", json!({"path": "notes"})).await;
    assert!(e.contains("recursive=true"), "{e}");
    assert!(env.root.join("notes/todo.md").exists());
    let d = env
        .ok("delete_file", json!({"path": "notes", "recursive": true}))
        .await;
    assert_eq!(d["removed"], 4);
    assert!(!env.root.join("notes").exists());

    // A link is deleted itself; its target (here outside the root) is untouched.
    env.ok("delete_file", json!({"path": "rel_out"})).await;
    assert!(std::fs::symlink_metadata(env.root.join("rel_out")).is_err());
    env.ok("delete_file", json!({"path": "dir_out", "recursive": true}))
        .await;
    assert!(std::fs::symlink_metadata(env.root.join("dir_out")).is_err());
    env.assert_outside_intact();

    for root in [".", "", env.root.to_str().unwrap()] {
        let e = env
            .refused("delete_file", json!({"path": root, "recursive": true}))
            .await;
        assert!(e.contains("root itself"), "{e}");
    }
    assert!(env.root.join("data.bin").exists());
}

#[tokio::test]
async fn fifos_are_refused_without_hanging() {
    use rustix::fs::{CWD, FileType, Mode, mknodat};

    let env = env().await;
    let fifo = env.root.join("pipe");
    mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();
    // Opening a FIFO blocks until the other end opens: the server must not.
    let calls = async {
        let e = env.refused("read_file", json!({"path": "pipe"})).await;
        assert!(e.contains("not a regular file"), "{e}");
        env.refused("write_file", json!({"path": "pipe", "content": "x"}))
            .await;
        let r = env.client.read_resource(&env.uri("pipe")).await;
        assert!(r.is_err(), "{r:?}");
    };
    tokio::time::timeout(Duration::from_secs(5), calls)
        .await
        .expect("a FIFO hung the server");
}

// ---------------------------------------------------------------------------------------
// Attacks

/// Every tool, given `path` (and, for moves, as either end), must refuse it.
async fn refuse_everywhere(env: &Env, path: &str) {
    env.refused("read_file", json!({"path": path})).await;
    env.refused("stat", json!({"path": path})).await;
    env.refused("list_directory", json!({"path": path})).await;
    env.refused("search_files", json!({"path": path, "pattern": ""}))
        .await;
    env.refused("write_file", json!({"path": path, "content": "pwned"}))
        .await;
    env.refused(
        "write_file",
        json!({"path": format!("{path}/new"), "content": "pwned", "create_dirs": true}),
    )
    .await;
    env.refused("delete_file", json!({"path": path, "recursive": true}))
        .await;
    env.refused(
        "move_file",
        json!({"source": path, "destination": "stolen"}),
    )
    .await;
    env.refused(
        "move_file",
        json!({"source": "data.bin", "destination": path, "overwrite": true}),
    )
    .await;
    env.assert_outside_intact();
    assert!(env.root.join("data.bin").exists());
    assert!(!env.root.join("stolen").exists());
}

#[tokio::test]
async fn dotdot_traversal_is_refused() {
    let env = env().await;
    for path in [
        "../outside/secret",
        "notes/../../outside/secret",
        "./../outside",
        "..",
    ] {
        refuse_everywhere(&env, path).await;
    }
    let e = env
        .refused("read_file", json!({"path": "../outside/secret"}))
        .await;
    assert!(e.contains("`..` is not allowed"), "{e}");
}

#[tokio::test]
async fn absolute_paths_outside_the_root_are_refused() {
    let env = env().await;
    let secret = env.outside.join("secret");
    let sneaky = format!("{}/../outside/secret", env.root.display());
    // A sibling whose name merely starts with the root's.
    let sibling = format!("{}x/file", env.root.display());
    for path in [
        secret.to_str().unwrap(),
        env.outside.to_str().unwrap(),
        "/etc/passwd",
        &sneaky,
        &sibling,
    ] {
        refuse_everywhere(&env, path).await;
    }
    let e = env
        .refused("read_file", json!({"path": secret.to_str().unwrap()}))
        .await;
    assert!(e.contains("outside the root"), "{e}");
    // An absolute path under the root is fine.
    let inside = env.root.join("hello.txt");
    let r = env
        .call("read_file", json!({"path": inside.to_str().unwrap()}))
        .await;
    assert_eq!(text(&r), "hello world\n");
}

#[tokio::test]
async fn symlinks_pointing_outside_are_refused() {
    let env = env().await;
    // The link as the file itself: relative and absolute targets.
    for path in ["rel_out", "abs_out"] {
        let e = env.refused("read_file", json!({"path": path})).await;
        assert!(e.contains("outside the root"), "{e}");
        let e = env
            .refused("write_file", json!({"path": path, "content": "pwned"}))
            .await;
        assert!(e.contains("symbolic link"), "{e}");
    }
    // The link as a directory along the way.
    for path in ["dir_out/secret", "dir_out/new"] {
        refuse_everywhere(&env, path).await;
    }
    // The link itself may be examined (stat describes it), but not entered.
    env.refused("list_directory", json!({"path": "dir_out"}))
        .await;
    env.refused("search_files", json!({"path": "dir_out", "pattern": ""}))
        .await;
    env.refused(
        "write_file",
        json!({"path": "dir_out/", "content": "pwned"}),
    )
    .await;
    // Through a link inside the root that leads to one leading out.
    symlink("dir_out", env.root.join("chain")).unwrap();
    symlink("notes/..", env.root.join("notes_up")).unwrap();
    for path in [
        "chain/secret",
        "notes_up/dir_out/secret",
        "notes_up/rel_out",
    ] {
        env.refused("read_file", json!({"path": path})).await;
    }
    // Walks do not enter the linked directory: the secret is found nowhere.
    let found = env
        .ok(
            "search_files",
            json!({"content": "TOPSECRET", "include_hidden": true}),
        )
        .await;
    assert_eq!(found["matches"], json!([]));
    let all = env.call("list_directory", json!({"recursive": true})).await;
    assert!(!text(&all).contains("dir_out/secret"));
    env.assert_outside_intact();
}

/// A thread swaps `race` between a real file and a symlink to the secret (and `rdir`
/// between a real directory and a symlink to the outside) as fast as it can, while the
/// client reads and writes through them. The server must never return the secret nor
/// write outside, and the test checks it really saw both states.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_in_between_check_and_use_never_leaks() {
    use rustix::fs::{CWD, RenameFlags, renameat_with};

    let env = env().await;
    let root = env.root.clone();
    std::fs::write(root.join("race"), "inside").unwrap();
    symlink("../outside/secret", root.join(".race_alt")).unwrap();
    std::fs::create_dir(root.join("rdir")).unwrap();
    std::fs::write(root.join("rdir/secret"), "inside").unwrap();
    symlink("../outside", root.join(".rdir_alt")).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        let root = root.clone();
        std::thread::spawn(move || {
            let pairs = [("race", ".race_alt"), ("rdir", ".rdir_alt")];
            while !stop.load(Ordering::Relaxed) {
                for (a, b) in pairs {
                    // An atomic exchange: both names always exist.
                    let swapped =
                        renameat_with(CWD, root.join(a), CWD, root.join(b), RenameFlags::EXCHANGE);
                    // Gone only when the test failed and is tearing its directory down.
                    if swapped.is_err() {
                        return;
                    }
                }
            }
        })
    };

    let mut seen = [[0u32; 2]; 3];
    for round in 0..6000 {
        let (i, r) = match round % 3 {
            0 => (0, env.call("read_file", json!({"path": "race"})).await),
            1 => (
                1,
                env.call("read_file", json!({"path": "rdir/secret"})).await,
            ),
            _ => (
                2,
                env.call(
                    "write_file",
                    json!({"path": "rdir/victim", "content": "pwned"}),
                )
                .await,
            ),
        };
        assert_no_secret(&r);
        if i < 2 && !r.is_error() {
            assert_eq!(text(&r), "inside");
        }
        seen[i][usize::from(r.is_error())] += 1;
        assert!(
            !env.outside.join("victim").exists(),
            "a write landed outside the root"
        );
        if round >= 1200 && seen.iter().all(|s| s[0] >= 20 && s[1] >= 20) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    for (what, [ok, refused]) in ["file", "directory", "write"].iter().zip(seen) {
        assert!(
            ok > 0 && refused > 0,
            "the {what} race was not exercised: {ok} served, {refused} refused"
        );
    }
    env.assert_outside_intact();
}

#[tokio::test]
async fn moves_across_the_root_boundary_are_refused() {
    let env = env().await;
    let secret = env.outside.join("secret");
    let secret = secret.to_str().unwrap();
    let outside_new = env.outside.join("moved");
    let outside_new = outside_new.to_str().unwrap();
    for (source, destination) in [
        ("hello.txt", "../outside/moved"),
        ("hello.txt", outside_new),
        ("hello.txt", "dir_out/moved"),
        ("notes", "dir_out/notes"),
        ("../outside/secret", "stolen"),
        (secret, "stolen"),
        ("dir_out/secret", "stolen"),
    ] {
        env.refused(
            "move_file",
            json!({"source": source, "destination": destination, "create_dirs": true}),
        )
        .await;
    }
    assert!(env.root.join("hello.txt").exists());
    assert!(env.root.join("notes/todo.md").exists());
    assert!(!env.root.join("stolen").exists());
    env.assert_outside_intact();
}

#[tokio::test]
async fn deletes_outside_the_root_are_refused() {
    let env = env().await;
    let secret = env.outside.join("secret");
    for path in [
        "../outside/secret",
        secret.to_str().unwrap(),
        "dir_out/secret",
        env.outside.to_str().unwrap(),
    ] {
        env.refused("delete_file", json!({"path": path, "recursive": true}))
            .await;
    }
    env.assert_outside_intact();
}

#[tokio::test]
async fn resources_outside_the_root_are_refused() {
    let env = env().await;
    let root = env.root.display().to_string();
    let outside = env.outside.display().to_string();
    for uri in [
        format!("file://{outside}/secret"),
        format!("file://{root}/rel_out"),
        format!("file://{root}/abs_out"),
        format!("file://{root}/dir_out/secret"),
        format!("file://{root}/../outside/secret"),
        format!("file://{root}/%2e%2e/outside/secret"),
        format!("file://{root}x/secret"),
        format!("file://evil.example{outside}/secret"),
        "file:///etc/passwd".to_owned(),
    ] {
        let r = env.client.read_resource(&uri).await;
        assert!(r.is_err(), "{uri} was read: {r:?}");
        assert_no_secret(&format!("{r:?}"));
    }
    env.assert_outside_intact();
}

// ---------------------------------------------------------------------------------------
// Resources

#[tokio::test]
async fn resources_list_read_and_template() {
    let env = env().await;
    let caps = env.client.server_capabilities().resources.clone().unwrap();
    assert_eq!(caps.subscribe, Some(true));
    assert_eq!(caps.list_changed, Some(true));

    let listed = env.client.list_all_resources().await.unwrap();
    let uris: Vec<_> = listed.iter().map(|r| r.uri.as_str()).collect();
    for rel in [
        "hello.txt",
        "notes/todo.md",
        "notes/deep/more.md",
        "data.bin",
        "pic.png",
    ] {
        assert!(
            uris.contains(&env.uri(rel).as_str()),
            "{rel} not in {uris:?}"
        );
    }
    assert!(
        !uris
            .iter()
            .any(|u| u.contains(".hidden") || u.ends_with("_out") || u.ends_with("link_in")),
        "hidden files and links are not listed: {uris:?}"
    );
    let hello = listed
        .iter()
        .find(|r| r.uri == env.uri("hello.txt"))
        .unwrap();
    assert_eq!(hello.name, "hello.txt");
    assert_eq!(hello.mime_type.as_deref(), Some("text/plain"));

    let read = env
        .client
        .read_resource(&env.uri("hello.txt"))
        .await
        .unwrap();
    let ResourceContents::Text(t) = &read.contents[0] else {
        panic!("{read:?}");
    };
    assert_eq!(t.text, "hello world\n");
    assert_eq!(t.mime_type.as_deref(), Some("text/plain"));

    let read = env.client.read_resource(&env.uri("pic.png")).await.unwrap();
    let ResourceContents::Blob(b) = &read.contents[0] else {
        panic!("{read:?}");
    };
    assert_eq!(b.blob, PNG);
    assert_eq!(b.mime_type.as_deref(), Some("image/png"));

    let templates = env.client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "file:///{+path}");
    // Through the template: a file not in the list (hidden), and one with a space, encoded.
    let hidden = env
        .client
        .read_resource(&env.uri(".hidden/h.txt"))
        .await
        .unwrap();
    assert_eq!(hidden.contents[0].uri(), env.uri(".hidden/h.txt"));
    std::fs::write(env.root.join("a b.md"), "spaced").unwrap();
    let spaced = env
        .client
        .read_resource(&env.uri("a%20b.md"))
        .await
        .unwrap();
    let ResourceContents::Text(t) = &spaced.contents[0] else {
        panic!("{spaced:?}");
    };
    assert_eq!(t.text, "spaced");
    assert_eq!(t.mime_type.as_deref(), Some("text/markdown"));

    // Resource reads are capped; the error says how to read on.
    let mut options = fast();
    options.max_read_bytes = 4;
    let small = env_with(options, ProtocolVersion::V2025_11_25).await;
    let e = small
        .client
        .read_resource(&small.uri("hello.txt"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("read_file"), "{e}");
}

#[tokio::test]
async fn list_changed_when_files_appear_and_go() {
    let env = env().await;
    let mut notes = env.client.notifications();
    std::fs::write(env.root.join("fresh.txt"), "new").unwrap();
    next_notification(
        &mut notes,
        "notifications/resources/list_changed",
        Duration::from_secs(5),
    )
    .await
    .expect("list_changed after a file appeared");
    let uris: Vec<_> = env
        .client
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri)
        .collect();
    assert!(uris.contains(&env.uri("fresh.txt")));

    // Through a tool, too; the listing follows right away.
    let mut notes = env.client.notifications();
    env.ok("delete_file", json!({"path": "fresh.txt"})).await;
    next_notification(
        &mut notes,
        "notifications/resources/list_changed",
        Duration::from_secs(5),
    )
    .await
    .expect("list_changed after a file went");
    let uris: Vec<_> = env
        .client
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri)
        .collect();
    assert!(!uris.contains(&env.uri("fresh.txt")));
}

#[tokio::test]
async fn updated_after_a_subscribed_file_changes() {
    let env = env().await;
    let uri = env.uri("hello.txt");
    let mut notes = env.client.notifications();
    env.client.subscribe(&uri).await.unwrap();
    std::fs::write(env.root.join("hello.txt"), "hello again, longer\n").unwrap();
    let n = next_notification(
        &mut notes,
        "notifications/resources/updated",
        Duration::from_secs(5),
    )
    .await
    .expect("updated after the subscribed file changed");
    assert_eq!(n.params.unwrap()["uri"], uri);

    // Other files' changes are not reported; after unsubscribing, nothing is. (Let the
    // write above settle first: a poll between its truncation and its data sees two changes.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut notes = env.client.notifications();
    std::fs::write(env.root.join("data.bin"), "changed").unwrap();
    let quiet = next_notification(
        &mut notes,
        "notifications/resources/updated",
        Duration::from_millis(500),
    )
    .await;
    assert!(quiet.is_none(), "{quiet:?}");
    env.client.unsubscribe(&uri).await.unwrap();
    std::fs::write(env.root.join("hello.txt"), "and again").unwrap();
    let quiet = next_notification(
        &mut notes,
        "notifications/resources/updated",
        Duration::from_millis(500),
    )
    .await;
    assert!(quiet.is_none(), "updated after unsubscribing: {quiet:?}");
}

#[tokio::test]
async fn updated_reaches_a_2026_listen_stream() {
    let env = env_with(fast(), ProtocolVersion::V2026_07_28).await;
    let uri = env.uri("notes/todo.md");
    let mut notes = env.client.notifications();
    let listening = env
        .client
        .listen(SubscriptionFilter {
            resource_subscriptions: Some(vec![uri.clone()]),
            ..Default::default()
        })
        .await
        .unwrap();
    std::fs::write(env.root.join("notes/todo.md"), "done").unwrap();
    let n = next_notification(
        &mut notes,
        "notifications/resources/updated",
        Duration::from_secs(5),
    )
    .await
    .expect("updated on the listen stream");
    assert_eq!(n.params.unwrap()["uri"], uri);
    drop(listening);
}

/// Paths are compared as the server sees them; a sanity check of the fixture itself.
#[test]
fn the_fixture_links_point_where_the_tests_think() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::create_dir(tmp.path().join("outside")).unwrap();
    std::fs::write(tmp.path().join("outside/secret"), SECRET).unwrap();
    symlink("../outside/secret", root.join("rel_out")).unwrap();
    // Followed naively (as a plain `std::fs::read` would), the link does reach the secret:
    // the refusals above are the server's doing.
    assert_eq!(
        std::fs::read_to_string(Path::new(&root).join("rel_out")).unwrap(),
        SECRET
    );
}
