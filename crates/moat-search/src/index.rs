//! The search index: BM25 over each tool's weighted fields plus, when a model is loaded,
//! one embedding per tool; a query is cleaned up, expanded, ranked both ways and the two
//! rankings fused (by standard scores unless told otherwise).

use crate::doc::{TEXT_VERSION, ToolDoc};
use crate::fusion::{self, Fusion};
use crate::{Embedder, SearchError, alias, bm25::Bm25, cache, kernel, query, text, typo};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;

/// How an index ranks: both ways fused, or by words alone (no model).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Hybrid,
    Lexical,
}

/// Which rankings a search uses; the evaluation compares them.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranking {
    /// Fused lexical and semantic (lexical alone when the index has no embeddings).
    Hybrid,
    Lexical,
    /// Semantic alone (nothing when the index has no embeddings).
    Semantic,
}

/// The knobs of indexing and search. The defaults are what the evaluation chose; each
/// improvement can be switched off to measure what it is worth. Build one with
/// `Options { field: value, ..Options::default() }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Index argument names and descriptions and annotation hints, not just name, title
    /// and description (build time).
    pub rich_text: bool,
    /// Separate literals (paths, numbers, quoted text…) from intent words.
    pub clean_query: bool,
    /// Add words from the alias table to the lexical query.
    pub expand_aliases: bool,
    /// Embed a second, short view of each tool (server, name, title) besides the whole
    /// definition, and score a tool by the better of the two (build time). Off: the
    /// evaluation found it no better (recall@5 0.789 against 0.811; the mean of the two
    /// views 0.808).
    pub short_view: bool,
    /// Match query words the catalog never uses to catalog words an edit or two away.
    pub correct_typos: bool,
    /// Add the alias words to the text embedded for the semantic ranking too.
    pub expand_semantic: bool,
    /// Weight of alias and hint words relative to the user's own words (lexical).
    pub expansion_weight: f32,
    /// Weight of the semantic ranking in the fusion; the lexical ranking weighs 1. 3 with
    /// standard scores: the model is the better ranking alone, and its scores have a long
    /// flat tail that standard scores stretch less than BM25's few matches. Recall@5 0.873
    /// at 2, 0.882 at 3, 0.875 at 4.
    pub semantic_weight: f32,
    /// How the lexical and semantic rankings are combined. Scores rather than reciprocal
    /// ranks: a ranking sure of its first answer (a tool name matched word for word, far
    /// ahead of the rest) keeps that lead, where ranks make every first place equal.
    /// Standard scores beat RRF (k 20) at recall@5 0.851 against 0.837, on both halves of
    /// the evaluation set; min-max scaling (each ranking's best 1, worst 0) then beat
    /// standard scores once the question prior was in, 0.899 against 0.892 (MRR 0.723
    /// against 0.714), better on all four halves of the two splits.
    pub fusion: Fusion,
    /// Also embed the request as the user wrote it, besides the cleaned and expanded
    /// text, and score a tool by the mean of the two similarities. Off: no better (0.863
    /// against 0.882), and a second embedding per query.
    pub raw_query: bool,
    /// Weight of the request's similarity to a tool's server as a whole (the mean of its
    /// tools' embeddings) added to its similarity to the tool: the domain of a request
    /// ("calendar", "repository") often shows where a single tool's text does not. 0.25:
    /// with min-max fusion, recall@5 0.902 against 0.899 without (MRR 0.725 against 0.723),
    /// equal or better on all four halves; with standard scores it had been better on one
    /// half and worse on the other, and larger weights were worse.
    pub server_prior: f32,
    /// The reciprocal-rank constant, for [`Fusion::Rrf`]. 20 rather than the customary 60:
    /// on the evaluation set it gave recall@5 0.837 against 0.818, trusting each ranking's
    /// head more.
    pub rrf_k: f32,
    /// Added to the fused score (in the fusion's units) of read-only tools
    /// (`readOnlyHint`) when the request is a question ([`query::is_question`]): a
    /// question wants information, and siblings that change things ("create_event" for
    /// "when is my next meeting?") share its words. 2: recall@5 0.892 against 0.882
    /// without (MRR 0.714 against 0.694), better on both halves of both splits of the
    /// evaluation set; 1 gave 0.887, 3 gave 0.894 but nearly a filter.
    pub question_prior: f32,
    pub ranking: Ranking,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            rich_text: true,
            short_view: false,
            clean_query: true,
            correct_typos: true,
            expand_aliases: true,
            expand_semantic: true,
            expansion_weight: 0.5,
            semantic_weight: 3.0,
            rrf_k: 20.0,
            fusion: Fusion::MinMax,
            raw_query: false,
            server_prior: 0.25,
            question_prior: 2.0,
            ranking: Ranking::Hybrid,
        }
    }
}

impl Options {
    /// Plain fusion: every improvement off (the baseline of the evaluation).
    pub fn plain() -> Options {
        Options {
            rich_text: false,
            short_view: false,
            clean_query: false,
            correct_typos: false,
            expand_aliases: false,
            expand_semantic: false,
            semantic_weight: 1.0,
            rrf_k: fusion::DEFAULT_K,
            fusion: Fusion::Rrf,
            raw_query: false,
            server_prior: 0.0,
            question_prior: 0.0,
            ..Options::default()
        }
    }
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The tool's `server__tool` name.
    pub name: String,
    /// Higher is better; comparable only within one result list.
    pub score: f32,
}

/// A searchable catalog. Immutable once built: rebuild it when the catalog changes (the
/// embedding cache makes that cheap).
pub struct Index {
    names: Vec<String>,
    bm25: Bm25,
    /// Unit vectors, `views` × `dim` floats per tool, in catalog order.
    vectors: Option<Vec<f32>>,
    dim: usize,
    views: usize,
    embedder: Option<Arc<Embedder>>,
    /// Each tool's server, as an index into `centroids`.
    group: Vec<u32>,
    /// Per server, the normalised mean of its tools' first-view vectors, `dim` floats each.
    centroids: Vec<f32>,
    /// Whether each tool declares itself read-only (`readOnlyHint`).
    read_only: Vec<bool>,
    options: Options,
    /// Query embeddings kept by text, when [`Index::memoize_queries`] asked for it.
    memo: Option<std::sync::Mutex<std::collections::HashMap<String, Vec<f32>>>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("tools", &self.names.len())
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

impl Index {
    /// Indexes a catalog with the default options. With an embedder the index is hybrid;
    /// tool embeddings come from `cache_dir` when cached there, and new ones are saved.
    pub fn build(
        docs: Vec<ToolDoc>,
        embedder: Option<Arc<Embedder>>,
        cache_dir: Option<&Path>,
    ) -> Result<Index, SearchError> {
        Index::build_with(docs, embedder, cache_dir, Options::default())
    }

    /// [`Index::build`] with explicit options.
    pub fn build_with(
        docs: Vec<ToolDoc>,
        embedder: Option<Arc<Embedder>>,
        cache_dir: Option<&Path>,
        options: Options,
    ) -> Result<Index, SearchError> {
        let fields: Vec<Vec<(f32, Vec<String>)>> = docs
            .iter()
            .map(|d| {
                d.fields(options.rich_text)
                    .into_iter()
                    .map(|(w, t)| (w, text::terms(&t)))
                    .collect()
            })
            .collect();
        let bm25 = Bm25::build(&fields);
        let views = View::of(&options);
        let (vectors, dim) = match &embedder {
            Some(e) => (Some(embed_docs(&docs, e, cache_dir, &views)?), e.dim()),
            None => (None, 0),
        };
        let (group, centroids) = match &vectors {
            Some(v) => server_centroids(&docs, v, dim, views.len()),
            None => (vec![0; docs.len()], Vec::new()),
        };
        let read_only = docs
            .iter()
            .map(|d| {
                d.annotations
                    .as_ref()
                    .and_then(|a| a.get("readOnlyHint"))
                    .and_then(serde_json::Value::as_bool)
                    == Some(true)
            })
            .collect();
        Ok(Index {
            read_only,
            group,
            centroids,
            names: docs.into_iter().map(|d| d.name).collect(),
            bm25,
            vectors,
            dim,
            views: views.len(),
            embedder,
            options,
            memo: None,
        })
    }

    /// Keeps every query's embedding for reuse: for evaluations, which run the same
    /// requests under many option sets. Unbounded, so not for a serving index.
    pub fn memoize_queries(mut self) -> Index {
        self.memo = Some(Default::default());
        self
    }

    /// Hybrid when tools were embedded, else lexical.
    pub fn mode(&self) -> Mode {
        if self.vectors.is_some() {
            Mode::Hybrid
        } else {
            Mode::Lexical
        }
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether the catalog is empty.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The options the index was built with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The best `limit` tools for `query` among those `visible` accepts (a rejected tool
    /// never appears, and never takes a place in the results).
    pub fn search(&self, query: &str, limit: usize, visible: &dyn Fn(&str) -> bool) -> Vec<Hit> {
        self.search_with(query, limit, visible, &self.options)
    }

    /// [`Index::search`] with other query-time options (`rich_text` is fixed at build).
    pub fn search_with(
        &self,
        query: &str,
        limit: usize,
        visible: &dyn Fn(&str) -> bool,
        opts: &Options,
    ) -> Vec<Hit> {
        if limit == 0 || self.names.is_empty() {
            return Vec::new();
        }
        let shown: Vec<bool> = self.names.iter().map(|n| visible(n)).collect();
        let q = Query::new(query, opts, &self.bm25);

        let lexical = || {
            let scores = self.bm25.scores(&q.lexical);
            (
                fusion::rank(&scores, |i| shown[i as usize] && scores[i as usize] > 0.0),
                scores,
            )
        };
        let semantic = match opts.ranking {
            Ranking::Lexical => None,
            Ranking::Hybrid | Ranking::Semantic => {
                let raw = opts.raw_query && query.trim() != q.semantic;
                let texts: Vec<&str> = if raw {
                    vec![&q.semantic, query]
                } else {
                    vec![&q.semantic]
                };
                self.query_vectors(&texts)
            }
        };
        let semantic = semantic.map(|qs| self.similarities(&qs, opts.server_prior));
        let hits: Vec<(u32, f32)> = match (opts.ranking, semantic) {
            (Ranking::Semantic, None) => Vec::new(),
            (Ranking::Semantic, Some(sem)) => fusion::rank(&sem, |i| shown[i as usize])
                .into_iter()
                .map(|i| (i, sem[i as usize]))
                .collect(),
            (Ranking::Lexical, _) | (Ranking::Hybrid, None) => {
                let (ranked, scores) = lexical();
                ranked
                    .into_iter()
                    .map(|i| (i, scores[i as usize]))
                    .collect()
            }
            (Ranking::Hybrid, Some(sem)) => {
                let (lex, lex_scores) = lexical();
                let keep = |i: u32| shown[i as usize];
                match opts.fusion {
                    Fusion::Rrf => {
                        let sem = fusion::rank(&sem, keep);
                        fusion::rrf(&[(&lex, 1.0), (&sem, opts.semantic_weight)], opts.rrf_k)
                    }
                    Fusion::MinMax | Fusion::ZScore => {
                        let norm = if opts.fusion == Fusion::MinMax {
                            fusion::min_max
                        } else {
                            fusion::z_score
                        };
                        let l = norm(&lex_scores, &shown);
                        let s = norm(&sem, &shown);
                        let question = opts.question_prior != 0.0 && query::is_question(query);
                        let fused: Vec<f32> = l
                            .iter()
                            .zip(&s)
                            .zip(&self.read_only)
                            .map(|((a, b), ro)| {
                                let prior = if question && *ro {
                                    opts.question_prior
                                } else {
                                    0.0
                                };
                                a + opts.semantic_weight * b + prior
                            })
                            .collect();
                        fusion::rank(&fused, keep)
                            .into_iter()
                            .map(|i| (i, fused[i as usize]))
                            .collect()
                    }
                }
            }
        };
        hits.into_iter()
            .take(limit)
            .map(|(i, score)| Hit {
                name: self.names[i as usize].clone(),
                score,
            })
            .collect()
    }

    /// The query texts' embeddings, or `None` without a model (or when the model fails on
    /// this query, which is logged and answered lexically).
    fn query_vectors(&self, texts: &[&str]) -> Option<Vec<Vec<f32>>> {
        self.vectors.as_ref()?;
        let embedder = self.embedder.as_ref()?;
        match self.embed_queries(embedder, texts) {
            Ok(v) if !v.is_empty() => Some(v),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "embedding the query failed; answering lexically");
                None
            }
        }
    }

    /// Similarity of the query with every tool (cosine for unit query vectors; the
    /// fusion's normalisation makes the scale of the query vectors irrelevant). With
    /// several query vectors (views of one request), a tool scores the mean of its
    /// similarities to each.
    fn similarities(&self, qs: &[Vec<f32>], server_prior: f32) -> Vec<f32> {
        let Some(vectors) = self.vectors.as_ref() else {
            return vec![0.0; self.names.len()];
        };
        let n = qs.len() as f32;
        let server: Vec<f32> = self
            .centroids
            .chunks_exact(self.dim)
            .map(|c| qs.iter().map(|q| kernel::dot(c, q)).sum::<f32>() / n)
            .collect();
        vectors
            .chunks_exact(self.dim * self.views)
            .enumerate()
            .map(|(i, views)| {
                let own = qs
                    .iter()
                    .map(|q| {
                        views
                            .chunks_exact(self.dim)
                            .map(|v| kernel::dot(v, q))
                            .fold(f32::MIN, f32::max)
                    })
                    .sum::<f32>()
                    / n;
                own + server_prior * server.get(self.group[i] as usize).copied().unwrap_or(0.0)
            })
            .collect()
    }

    /// Embeds query texts, through the memo when there is one.
    fn embed_queries(
        &self,
        embedder: &Embedder,
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>, SearchError> {
        let Some(memo) = &self.memo else {
            return embedder.embed(texts);
        };
        let known: Option<Vec<Vec<f32>>> = {
            let m = memo.lock().unwrap_or_else(|e| e.into_inner());
            texts.iter().map(|t| m.get(*t).cloned()).collect()
        };
        if let Some(v) = known {
            return Ok(v);
        }
        let v = embedder.embed(texts)?;
        let mut m = memo.lock().unwrap_or_else(|e| e.into_inner());
        for (t, e) in texts.iter().zip(&v) {
            m.insert((*t).to_owned(), e.clone());
        }
        Ok(v)
    }
}

/// Groups tools by server and averages each server's first-view vectors into a unit
/// vector: what the server is about as a whole. Returns each tool's group and the
/// centroids, flat.
fn server_centroids(
    docs: &[ToolDoc],
    vectors: &[f32],
    dim: usize,
    views: usize,
) -> (Vec<u32>, Vec<f32>) {
    let mut names: Vec<&str> = Vec::new();
    let group: Vec<u32> = docs
        .iter()
        .map(|d| {
            let s = d.server_name().unwrap_or("");
            match names.iter().position(|n| *n == s) {
                Some(g) => g as u32,
                None => {
                    names.push(s);
                    (names.len() - 1) as u32
                }
            }
        })
        .collect();
    let mut centroids = vec![0.0f32; names.len() * dim];
    for (i, &g) in group.iter().enumerate() {
        let v = &vectors[i * views * dim..i * views * dim + dim];
        let c = &mut centroids[g as usize * dim..(g as usize + 1) * dim];
        for (a, b) in c.iter_mut().zip(v) {
            *a += b;
        }
    }
    for c in centroids.chunks_exact_mut(dim) {
        let norm = c.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > f32::EPSILON {
            c.iter_mut().for_each(|x| *x /= norm);
        }
    }
    (group, centroids)
}

/// A query prepared for both rankings.
struct Query {
    lexical: Vec<(String, f32)>,
    semantic: String,
}

impl Query {
    fn new(raw: &str, opts: &Options, bm25: &Bm25) -> Query {
        let cleaned = if opts.clean_query {
            query::clean(raw)
        } else {
            query::CleanQuery {
                intent: raw.to_owned(),
                hints: Vec::new(),
            }
        };
        let mut words = text::words(&cleaned.intent);
        words.extend(cleaned.hints.iter().cloned());
        let expansion = if opts.expand_aliases {
            alias::expand(&words)
        } else {
            Vec::new()
        };

        let mut lexical: Vec<(String, f32)> = text::terms(&cleaned.intent)
            .into_iter()
            .map(|t| (t, 1.0))
            .collect();
        for w in cleaned.hints.iter().chain(&expansion) {
            lexical.extend(
                text::terms(w)
                    .into_iter()
                    .map(|t| (t, opts.expansion_weight)),
            );
        }
        if opts.correct_typos {
            let unknown: Vec<String> = lexical
                .iter()
                .filter(|(t, w)| *w == 1.0 && !bm25.has_term(t))
                .map(|(t, _)| t.clone())
                .collect();
            for t in unknown {
                for c in typo::corrections(&t, bm25.terms()) {
                    lexical.push((c.to_owned(), opts.expansion_weight));
                }
            }
        }

        let mut semantic = cleaned.intent.clone();
        let extra: Vec<&str> = cleaned
            .hints
            .iter()
            .chain(if opts.expand_semantic {
                &expansion[..]
            } else {
                &[]
            })
            .map(String::as_str)
            .collect();
        if !extra.is_empty() {
            semantic.push_str(" (");
            semantic.push_str(&extra.join(" "));
            semantic.push(')');
        }
        Query { lexical, semantic }
    }
}

/// Embeds every view of every tool, reusing cached vectors by (definition hash, text
/// variant, view), and saves the cache when anything was new. Returns the vectors flat,
/// `views.len()` per tool.
fn embed_docs(
    docs: &[ToolDoc],
    embedder: &Embedder,
    cache_dir: Option<&Path>,
    views: &[View],
) -> Result<Vec<f32>, SearchError> {
    let dim = embedder.dim();
    let items: Vec<(usize, View, [u8; 32])> = docs
        .iter()
        .enumerate()
        .flat_map(|(i, d)| {
            let hash = d.definition_hash();
            views.iter().map(move |&v| {
                let mut h = Sha256::new();
                h.update(hash);
                h.update([v as u8]);
                (i, v, h.finalize().into())
            })
        })
        .collect();
    let file = cache_dir.map(|d| cache::path(d, &embedder.fingerprint()));
    let mut cached = file
        .as_deref()
        .and_then(|f| cache::load(f, dim, TEXT_VERSION))
        .unwrap_or_default();
    let missing: Vec<&(usize, View, [u8; 32])> = items
        .iter()
        .filter(|(_, _, k)| !cached.contains_key(k))
        .collect();
    if !missing.is_empty() {
        let texts: Vec<String> = missing.iter().map(|(i, v, _)| v.text(&docs[*i])).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let started = std::time::Instant::now();
        let fresh = embedder.embed(&refs)?;
        tracing::debug!(
            texts = missing.len(),
            ms = started.elapsed().as_millis() as u64,
            "embedded tool definitions"
        );
        for ((_, _, k), v) in missing.iter().zip(fresh) {
            cached.insert(*k, v);
        }
    }
    let mut flat = Vec::with_capacity(items.len() * dim);
    for (_, _, k) in &items {
        match cached.get(k) {
            Some(v) if v.len() == dim => flat.extend_from_slice(v),
            _ => {
                return Err(SearchError::Inference(
                    "embedding missing after embedding the catalog".into(),
                ));
            }
        }
    }
    // Rewrite when something was new, or when the file holds tools no longer in the
    // catalog (so it does not grow without bound).
    if let Some(f) = &file
        && (!missing.is_empty() || cached.len() != items.len())
    {
        let keep: std::collections::HashSet<&[u8; 32]> = items.iter().map(|(_, _, k)| k).collect();
        cached.retain(|k, _| keep.contains(k));
        cache::store(f, dim, TEXT_VERSION, &cached);
    }
    Ok(flat)
}

/// A text embedded for a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    /// Name, title and description (the whole definition with `rich_text`).
    Plain = 0,
    Rich = 1,
    /// Server, name and title only: a short request matches a short text best.
    Short = 2,
}

impl View {
    fn of(options: &Options) -> Vec<View> {
        let mut v = vec![if options.rich_text {
            View::Rich
        } else {
            View::Plain
        }];
        if options.short_view {
            v.push(View::Short);
        }
        v
    }

    fn text(self, doc: &ToolDoc) -> String {
        match self {
            View::Plain => doc.embedding_text(false),
            View::Rich => doc.embedding_text(true),
            View::Short => doc.short_text(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog() -> Vec<ToolDoc> {
        [
            ("fs", json!({"name": "delete_file", "description": "Delete a file from disk.",
                "inputSchema": {"properties": {"path": {"description": "File to delete"}}}, "annotations": {"destructiveHint": true}})),
            ("fs", json!({"name": "list_directory", "description": "List the entries of a directory."})),
            ("fs", json!({"name": "read_file", "description": "Read the contents of a file.", "annotations": {"readOnlyHint": true}})),
            ("chat", json!({"name": "send_message", "description": "Send a direct message to a user."})),
            ("git", json!({"name": "create_pull_request", "description": "Open a pull request."})),
        ]
        .iter()
        .filter_map(|(s, t)| ToolDoc::from_definition(s, t))
        .collect()
    }

    fn top(idx: &Index, q: &str) -> Vec<String> {
        idx.search(q, 3, &|_| true)
            .into_iter()
            .map(|h| h.name)
            .collect()
    }

    #[test]
    fn lexical_finds_user_phrasings() {
        let idx = Index::build(catalog(), None, None).expect("build");
        assert_eq!(idx.mode(), Mode::Lexical);
        assert_eq!(top(&idx, "rm scratch.txt")[0], "fs__delete_file");
        assert_eq!(top(&idx, "ls ~/src/")[0], "fs__list_directory");
        assert_eq!(top(&idx, "DM @ann the notes")[0], "chat__send_message");
        assert_eq!(
            top(&idx, "open a PR for this")[0],
            "git__create_pull_request"
        );
        assert!(top(&idx, "zzz qqq").is_empty());
    }

    #[test]
    fn improvements_can_be_switched_off() {
        let idx = Index::build_with(catalog(), None, None, Options::plain()).expect("build");
        // Without the alias table nothing in the catalog says "rm".
        assert!(idx.search("rm", 3, &|_| true).is_empty());
        let on = Options {
            expand_aliases: true,
            ..Options::plain()
        };
        assert_eq!(
            idx.search_with("rm", 3, &|_| true, &on)[0].name,
            "fs__delete_file"
        );
    }

    #[test]
    fn hidden_tools_never_appear_nor_take_places() {
        let idx = Index::build(catalog(), None, None).expect("build");
        let hits = idx.search("delete file", 1, &|n| n != "fs__delete_file");
        assert_eq!(hits.len(), 1, "the next tool fills the place");
        assert_ne!(hits[0].name, "fs__delete_file");
        assert!(idx.search("file", 10, &|_| false).is_empty());
        assert!(idx.search("file", 0, &|_| true).is_empty());
    }

    #[test]
    fn semantic_without_model_is_empty_and_empty_catalog_is_fine() {
        let idx = Index::build(catalog(), None, None).expect("build");
        let sem = Options {
            ranking: Ranking::Semantic,
            ..Options::default()
        };
        assert!(idx.search_with("delete", 5, &|_| true, &sem).is_empty());
        let empty = Index::build(Vec::new(), None, None).expect("build");
        assert!(empty.is_empty() && empty.search("x", 5, &|_| true).is_empty());
    }
}
