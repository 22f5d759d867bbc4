//! The sentence-embedding model, run in-process: all-MiniLM-L6-v2 (a 6-layer BERT, run by
//! [`bert`](crate::bert)) on the CPU, tokenised with `tokenizers`, mean-pooled and
//! L2-normalised, as sentence-transformers does for this model. Also where models are
//! looked for. Nothing is downloaded here (`moat model fetch` does that): a missing model
//! means lexical search.

use crate::SearchError;
use crate::bert::{Bert, LoadError};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokenizers::{Tokenizer, TruncationParams};

/// The files a model directory must hold.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
/// The model's name, as a directory under the cache and on the Hugging Face hub.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// sentence-transformers' sequence limit for this model; longer text is cut.
const MAX_TOKENS: usize = 256;
/// Fewer texts than this are embedded on the calling thread: starting threads costs more
/// than it saves.
const PARALLEL_FROM: usize = 8;

/// A loaded embedding model. Cheap to share behind an `Arc`; embedding takes `&self`.
pub struct Embedder {
    model: Bert,
    tokenizer: Tokenizer,
    fingerprint: [u8; 32],
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dim", &self.model.dim())
            .finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads the model from a directory holding [`MODEL_FILES`].
    pub fn load(dir: &Path) -> Result<Embedder, SearchError> {
        check_dir(dir)?;
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| SearchError::Io { path, source })
        };
        let bad = |name: &str, reason: String| SearchError::ModelFile {
            path: dir.join(name),
            reason,
        };

        let config_bytes = read("config.json")?;
        let tokenizer_bytes = read("tokenizer.json")?;
        let weights = read("model.safetensors")?;
        let mut tokenizer = Tokenizer::from_bytes(&tokenizer_bytes)
            .map_err(|e| bad("tokenizer.json", e.to_string()))?;
        let model = Bert::load(&config_bytes, &weights).map_err(|e| match e {
            LoadError::Config(reason) => bad("config.json", reason),
            LoadError::Weights(reason) => bad("model.safetensors", reason),
        })?;
        // Texts are embedded one by one, so never padded (the shipped tokenizer pads to 128).
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS.min(model.max_positions()),
                ..Default::default()
            }))
            .map_err(|e| bad("tokenizer.json", e.to_string()))?;
        let fingerprint = fingerprint(&config_bytes, &tokenizer_bytes, &weights);
        let embedder = Embedder {
            model,
            tokenizer,
            fingerprint,
        };
        // A model that loads but cannot run (a tokenizer for another vocabulary) should
        // fail here, not mid-query.
        embedder.embed(&["probe"])?;
        Ok(embedder)
    }

    /// Finds a model directory: `explicit` if given (an error if it is not a model), else
    /// `$MOAT_MODEL_DIR` (likewise), else the moat cache
    /// (`$XDG_CACHE_HOME/moat/models/all-MiniLM-L6-v2`, default `~/.cache/…`), else the
    /// Hugging Face hub cache. `Ok(None)` when there is none.
    pub fn find(explicit: Option<&Path>) -> Result<Option<PathBuf>, SearchError> {
        Ok(locate_in(explicit, &Places::from_env())?.map(|found| found.dir))
    }

    /// [`Embedder::find`], saying which of the places the model was found in (for
    /// `moat model status`).
    pub fn locate(explicit: Option<&Path>) -> Result<Option<Found>, SearchError> {
        locate_in(explicit, &Places::from_env())
    }

    /// Where `moat model fetch` puts the model and [`Embedder::find`] looks third:
    /// `$XDG_CACHE_HOME/moat/models/all-MiniLM-L6-v2`, default `~/.cache/…`. `None`
    /// when neither `XDG_CACHE_HOME` nor `HOME` is set.
    pub fn cache_dir() -> Option<PathBuf> {
        Places::from_env().moat_cache()
    }

    /// Length of the vectors [`Embedder::embed`] returns.
    pub fn dim(&self) -> usize {
        self.model.dim()
    }

    /// Identifies the model's files, so embeddings cached from another model are not reused.
    pub fn fingerprint(&self) -> [u8; 32] {
        self.fingerprint
    }

    /// Unit-length embeddings of `texts`, in order. Many texts are spread over the
    /// available cores; a few (a query) run on the calling thread.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, SearchError> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if texts.len() < PARALLEL_FROM || threads == 1 {
            return texts.iter().map(|t| self.embed_one(t)).collect();
        }
        // Interleaved rather than contiguous shares: catalogs list long and short
        // definitions together, and this keeps the threads' work even.
        let results: Vec<Result<Numbered, SearchError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        (t..texts.len())
                            .step_by(threads)
                            .map(|i| Ok((i, self.embed_one(texts[i])?)))
                            .collect()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(SearchError::Inference(
                            "an embedding thread panicked".into(),
                        ))
                    })
                })
                .collect()
        });
        let mut out = vec![Vec::new(); texts.len()];
        for part in results {
            for (i, v) in part? {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// One text's embedding, as [`Bert`] computes it.
    fn embed_one(&self, text: &str) -> Result<Vec<f32>, SearchError> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| SearchError::Tokenizer(e.to_string()))?;
        self.model
            .embed(encoding.get_ids())
            .map_err(SearchError::Inference)
    }
}

/// Embeddings with the position of their text, as a thread returns them.
type Numbered = Vec<(usize, Vec<f32>)>;

/// Hashes what determines the model's output. The weights are sampled (size, first and
/// last MiB) rather than hashed whole: hashing 90 MB at every start would cost more than
/// the rest of loading, and two different weight files of equal size with equal ends and
/// equal configuration do not occur in practice.
fn fingerprint(config: &[u8], tokenizer: &[u8], weights: &[u8]) -> [u8; 32] {
    const MIB: usize = 1 << 20;
    let mut h = Sha256::new();
    for part in [config, tokenizer] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.update((weights.len() as u64).to_le_bytes());
    h.update(&weights[..weights.len().min(MIB)]);
    h.update(&weights[weights.len().saturating_sub(MIB)..]);
    h.finalize().into()
}

fn missing_files(dir: &Path) -> Vec<&'static str> {
    MODEL_FILES
        .into_iter()
        .filter(|f| !dir.join(f).is_file())
        .collect()
}

fn check_dir(dir: &Path) -> Result<(), SearchError> {
    if !dir.is_dir() {
        return Err(SearchError::ModelDir {
            dir: dir.to_owned(),
            reason: "not a directory".into(),
        });
    }
    let missing = missing_files(dir);
    if !missing.is_empty() {
        return Err(SearchError::ModelDir {
            dir: dir.to_owned(),
            reason: format!("missing {}", missing.join(", ")),
        });
    }
    Ok(())
}

/// The environment the search for a model reads, separate so tests need not change the
/// process environment.
#[derive(Debug, Default, Clone)]
pub(crate) struct Places {
    pub moat_model_dir: Option<PathBuf>,
    pub xdg_cache_home: Option<PathBuf>,
    pub home: Option<PathBuf>,
    pub hf_hub_cache: Option<PathBuf>,
    pub hf_home: Option<PathBuf>,
}

impl Places {
    fn from_env() -> Places {
        // Empty variables count as unset, as the XDG spec says for XDG_CACHE_HOME.
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Places {
            moat_model_dir: var("MOAT_MODEL_DIR"),
            xdg_cache_home: var("XDG_CACHE_HOME"),
            home: var("HOME"),
            hf_hub_cache: var("HF_HUB_CACHE"),
            hf_home: var("HF_HOME"),
        }
    }

    fn cache_home(&self) -> Option<PathBuf> {
        self.xdg_cache_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".cache")))
    }

    fn moat_cache(&self) -> Option<PathBuf> {
        self.cache_home()
            .map(|cache| cache.join("moat").join("models").join(MODEL_NAME))
    }
}

/// A model directory and the place it was found in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The directory holding [`MODEL_FILES`].
    pub dir: PathBuf,
    /// Which place it is.
    pub source: ModelSource,
}

/// The places a model is looked for, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelSource {
    /// The directory the caller named (the gateway's `[tool_search] model`).
    Explicit,
    /// `$MOAT_MODEL_DIR`.
    EnvVar,
    /// moat's cache, where `moat model fetch` puts it ([`Embedder::cache_dir`]).
    MoatCache,
    /// A snapshot in the Hugging Face hub cache.
    HubCache,
}

impl ModelSource {
    /// The place in words, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            ModelSource::Explicit => "the configured directory ([tool_search] model)",
            ModelSource::EnvVar => "$MOAT_MODEL_DIR",
            ModelSource::MoatCache => "moat's model cache",
            ModelSource::HubCache => "the Hugging Face hub cache",
        }
    }
}

#[cfg(test)]
pub(crate) fn find_in(
    explicit: Option<&Path>,
    places: &Places,
) -> Result<Option<PathBuf>, SearchError> {
    Ok(locate_in(explicit, places)?.map(|found| found.dir))
}

fn locate_in(explicit: Option<&Path>, places: &Places) -> Result<Option<Found>, SearchError> {
    // A directory the user named is a promise: say what is wrong with it, don't look elsewhere.
    let named = explicit
        .map(|dir| (dir.to_path_buf(), ModelSource::Explicit))
        .or_else(|| {
            places
                .moat_model_dir
                .clone()
                .map(|dir| (dir, ModelSource::EnvVar))
        });
    if let Some((dir, source)) = named {
        check_dir(&dir)?;
        return Ok(Some(Found { dir, source }));
    }
    if let Some(dir) = places.moat_cache()
        && dir.is_dir()
        && missing_files(&dir).is_empty()
    {
        return Ok(Some(Found {
            dir,
            source: ModelSource::MoatCache,
        }));
    }
    let hub = places
        .hf_hub_cache
        .clone()
        .or_else(|| places.hf_home.as_ref().map(|h| h.join("hub")))
        .or_else(|| {
            places
                .cache_home()
                .map(|c| c.join("huggingface").join("hub"))
        });
    Ok(hub
        .and_then(|hub| {
            hub_snapshot(&hub.join(format!("models--sentence-transformers--{MODEL_NAME}")))
        })
        .map(|dir| Found {
            dir,
            source: ModelSource::HubCache,
        }))
}

/// The snapshot `refs/main` points at when it is complete, else the first complete one
/// in name order (so the choice does not depend on directory listing order).
fn hub_snapshot(repo: &Path) -> Option<PathBuf> {
    let snapshots = repo.join("snapshots");
    let complete = |d: &Path| d.is_dir() && missing_files(d).is_empty();
    if let Ok(main) = std::fs::read_to_string(repo.join("refs").join("main")) {
        let d = snapshots.join(main.trim());
        if !main.trim().is_empty() && complete(&d) {
            return Some(d);
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.into_iter().find(|d| complete(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_dir(root: &Path, rel: &str) -> PathBuf {
        let d = root.join(rel);
        std::fs::create_dir_all(&d).expect("mkdir");
        for f in MODEL_FILES {
            std::fs::write(d.join(f), b"x").expect("write");
        }
        d
    }

    #[test]
    fn explicit_and_env_dirs_must_be_valid() {
        let t = tempfile::tempdir().expect("tempdir");
        let good = model_dir(t.path(), "m");
        let places = Places::default();
        assert_eq!(
            find_in(Some(&good), &places).expect("ok"),
            Some(good.clone())
        );
        std::fs::remove_file(good.join("tokenizer.json")).expect("rm");
        let err = find_in(Some(&good), &places).expect_err("incomplete");
        assert!(err.to_string().contains("missing tokenizer.json"), "{err}");
        let env = Places {
            moat_model_dir: Some(t.path().join("nope")),
            ..Places::default()
        };
        assert!(matches!(
            find_in(None, &env),
            Err(SearchError::ModelDir { .. })
        ));
    }

    #[test]
    fn standard_places_in_order() {
        let t = tempfile::tempdir().expect("tempdir");
        let home = t.path().join("home");
        let places = Places {
            home: Some(home.clone()),
            ..Places::default()
        };
        assert_eq!(
            find_in(None, &places).expect("ok"),
            None,
            "nothing anywhere"
        );

        let hub =
            home.join(".cache/huggingface/hub/models--sentence-transformers--all-MiniLM-L6-v2");
        let snap_b = model_dir(&hub, "snapshots/bbb");
        let snap_a = model_dir(&hub, "snapshots/aaa");
        assert_eq!(
            find_in(None, &places).expect("ok"),
            Some(snap_a),
            "first complete snapshot"
        );
        std::fs::create_dir_all(hub.join("refs")).expect("mkdir");
        std::fs::write(hub.join("refs/main"), "bbb\n").expect("write");
        assert_eq!(
            find_in(None, &places).expect("ok"),
            Some(snap_b),
            "refs/main wins"
        );

        let moat = model_dir(&home, ".cache/moat/models/all-MiniLM-L6-v2");
        assert_eq!(
            find_in(None, &places).expect("ok"),
            Some(moat.clone()),
            "moat cache before the hub"
        );

        let xdg = t.path().join("xdg");
        let xdg_model = model_dir(&xdg, "moat/models/all-MiniLM-L6-v2");
        let with_xdg = Places {
            xdg_cache_home: Some(xdg),
            ..places.clone()
        };
        assert_eq!(find_in(None, &with_xdg).expect("ok"), Some(xdg_model));

        let env = model_dir(t.path(), "env");
        let with_env = Places {
            moat_model_dir: Some(env.clone()),
            ..places.clone()
        };
        assert_eq!(find_in(None, &with_env).expect("ok"), Some(env));

        // Each place is named as what it is (for `moat model status`).
        let source = |explicit: Option<&Path>, places: &Places| {
            locate_in(explicit, places)
                .expect("ok")
                .map(|found| found.source)
        };
        assert_eq!(source(None, &places), Some(ModelSource::MoatCache));
        assert_eq!(source(None, &with_env), Some(ModelSource::EnvVar));
        assert_eq!(source(Some(&moat), &with_env), Some(ModelSource::Explicit));
        std::fs::remove_dir_all(&moat).expect("rm");
        assert_eq!(source(None, &places), Some(ModelSource::HubCache));
    }

    #[test]
    fn corrupt_model_files_are_errors_not_panics() {
        let t = tempfile::tempdir().expect("tempdir");
        let d = model_dir(t.path(), "m");
        assert!(matches!(
            Embedder::load(&d),
            Err(SearchError::ModelFile { .. })
        ));
        std::fs::write(
            d.join("config.json"),
            include_str!("../tests/data/bert-config.json"),
        )
        .expect("write");
        let err = Embedder::load(&d).expect_err("bad tokenizer");
        assert!(err.to_string().contains("tokenizer.json"), "{err}");
        std::fs::write(
            d.join("tokenizer.json"),
            include_str!("../tests/data/tiny-tokenizer.json"),
        )
        .expect("write");
        let err = Embedder::load(&d).expect_err("bad weights");
        assert!(err.to_string().contains("model.safetensors"), "{err}");
        assert!(matches!(
            Embedder::load(&t.path().join("none")),
            Err(SearchError::ModelDir { .. })
        ));
    }
}
