//! The crate's error type: every failure a caller can see, typed.

use std::path::PathBuf;

/// What can go wrong loading a model, embedding text or reading the evaluation files.
///
/// A corrupt or stale embedding cache is not an error: the index logs it and rebuilds.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// A model directory was named (configuration or `$MOAT_MODEL_DIR`) but is not usable.
    #[error("model directory {dir}: {reason}")]
    ModelDir { dir: PathBuf, reason: String },
    /// A model file could not be read or parsed.
    #[error("model file {path}: {reason}")]
    ModelFile { path: PathBuf, reason: String },
    /// The tokenizer rejected the input or its configuration.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The model failed while computing embeddings.
    #[error("embedding model: {0}")]
    Inference(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A JSON file did not have the expected shape.
    #[error("{path}: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}
