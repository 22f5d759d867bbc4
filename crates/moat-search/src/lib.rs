//! Tool search for the moat gateway: given a request in the user's words, find the few
//! tools of a large catalog that serve it, so a client need not put every tool definition
//! in its model's context.
//!
//! Two rankings, each turned into standard scores over the candidate tools and added, the
//! semantic one weighted 3 ([`fusion`]; reciprocal rank fusion is kept as an option):
//! - **lexical**: BM25 ([`bm25`]) over each tool's name split into words, title,
//!   description, and argument names and descriptions ([`ToolDoc`]); stemmed, stop words
//!   dropped ([`text`]).
//! - **semantic**: cosine similarity of sentence embeddings from all-MiniLM-L6-v2, run
//!   in-process on the CPU by the crate's own BERT forward pass ([`Embedder`]), of the
//!   same text plus annotation hints in words. Tool embeddings are computed once per
//!   definition and cached on disk by definition hash ([`cache`]). Without a model the
//!   index is lexical only ([`Mode::Lexical`]); models are found, never downloaded
//!   ([`Embedder::find`]).
//!
//! Before ranking, a request is cleaned ([`query`]: paths, URLs, numbers, quoted text and
//! code are set apart from the intent words, leaving hints such as "file js") and expanded
//! from a table of general vocabulary ([`alias`]: "rm" → delete, "PR" → pull request);
//! words the catalog never uses are matched to near spellings ([`typo`]).
//! [`tokens`] counts what tool definitions cost in a prompt. [`eval`] measures all of it;
//! `cargo run -p moat-search --release --bin moat-search-eval` prints the table.
//!
//! ```no_run
//! use moat_search::{Embedder, Index, ToolDoc};
//! use std::sync::Arc;
//! # fn main() -> Result<(), moat_search::SearchError> {
//! # let docs: Vec<ToolDoc> = Vec::new();
//! let embedder = match Embedder::find(None)? {
//!     Some(dir) => Some(Arc::new(Embedder::load(&dir)?)),
//!     None => None, // say so once, then search lexically
//! };
//! let index = Index::build(docs, embedder, Some("/var/cache/moat".as_ref()))?;
//! let hits = index.search("who is free thursday afternoon", 5, &|_name| true);
//! # Ok(()) }
//! ```

pub mod alias;
mod bert;
pub mod bm25;
pub mod cache;
mod doc;
mod embed;
mod error;
pub mod eval;
pub mod fusion;
mod index;
mod kernel;
pub mod query;
pub mod text;
pub mod tokens;
pub mod typo;

pub use doc::ToolDoc;
pub use embed::{Embedder, Found, MODEL_FILES, MODEL_NAME, ModelSource};
pub use error::SearchError;
pub use index::{Hit, Index, Mode, Options, Ranking};
pub use text::split_identifier;

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn shared_types_are_send_and_sync() {
        assert_send_sync::<Embedder>();
        assert_send_sync::<Index>();
    }
}
