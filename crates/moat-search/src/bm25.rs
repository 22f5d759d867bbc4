//! Okapi BM25 over weighted fields, with weighted query terms.
//!
//! Our own rather than the `bm25` crate (2.3): that crate scores with the query's term
//! indices only, so alias expansions could not count for less than the user's own words;
//! it has no field weights (a match in a tool's name should beat one in an argument's
//! description); it hashes terms into `u32` (collisions merge unrelated words); and it finds
//! a term in a document by a linear scan per query term. What is here is the textbook
//! formula with the simplest BM25F variant: each field's term counts are multiplied by the
//! field's weight and summed before the usual saturation and length normalisation.

use std::collections::HashMap;

/// Term-frequency saturation: how quickly repeated matches stop adding score.
const K1: f32 = 1.2;
/// Length normalisation: 0 ignores document length, 1 fully normalises by it.
const B: f32 = 0.75;

/// An inverted index over documents numbered 0..n.
#[derive(Debug, Default)]
pub struct Bm25 {
    /// term → (document, weighted term frequency)
    postings: HashMap<String, Vec<(u32, f32)>>,
    /// weighted length of each document
    lengths: Vec<f32>,
    avg_length: f32,
}

impl Bm25 {
    /// Indexes documents given as (field weight, field terms) lists.
    pub fn build(docs: &[Vec<(f32, Vec<String>)>]) -> Bm25 {
        let mut postings: HashMap<String, Vec<(u32, f32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(docs.len());
        for (i, fields) in docs.iter().enumerate() {
            let mut tf: HashMap<&str, f32> = HashMap::new();
            let mut len = 0.0;
            for (weight, terms) in fields {
                for t in terms {
                    *tf.entry(t.as_str()).or_default() += weight;
                    len += weight;
                }
            }
            lengths.push(len);
            for (t, f) in tf {
                postings
                    .entry(t.to_owned())
                    .or_default()
                    .push((i as u32, f));
            }
        }
        let avg_length = if lengths.is_empty() {
            0.0
        } else {
            lengths.iter().sum::<f32>() / lengths.len() as f32
        };
        Bm25 {
            postings,
            lengths,
            avg_length,
        }
    }

    /// Whether any document has the term.
    pub fn has_term(&self, term: &str) -> bool {
        self.postings.contains_key(term)
    }

    /// Every indexed term (in no particular order).
    pub fn terms(&self) -> impl Iterator<Item = &str> {
        self.postings.keys().map(String::as_str)
    }

    /// Number of indexed documents.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether no document is indexed.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// Inverse document frequency of a term, never negative.
    fn idf(&self, df: usize) -> f32 {
        let n = self.len() as f32;
        let df = df as f32;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// The score of every document for weighted query terms (0 where nothing matches).
    /// A term given twice counts once, with the larger weight.
    pub fn scores(&self, query: &[(String, f32)]) -> Vec<f32> {
        let mut scores = vec![0.0; self.len()];
        let mut seen: HashMap<&str, f32> = HashMap::new();
        for (t, w) in query {
            let e = seen.entry(t.as_str()).or_insert(0.0);
            *e = e.max(*w);
        }
        for (term, qw) in seen {
            let Some(list) = self.postings.get(term) else {
                continue;
            };
            let idf = self.idf(list.len());
            for &(doc, tf) in list {
                let norm = 1.0 - B + B * self.lengths[doc as usize] / self.avg_length.max(1e-6);
                scores[doc as usize] += qw * idf * tf * (K1 + 1.0) / (tf + K1 * norm);
            }
        }
        scores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Vec<(f32, Vec<String>)> {
        vec![(1.0, text.split(' ').map(str::to_owned).collect())]
    }

    fn q(terms: &[&str]) -> Vec<(String, f32)> {
        terms.iter().map(|t| (t.to_string(), 1.0)).collect()
    }

    #[test]
    fn matches_textbook_formula() {
        let idx = Bm25::build(&[doc("a b c"), doc("a a d e f"), doc("g")]);
        let s = idx.scores(&q(&["a"]));
        // n=3, df=2: idf = ln(1 + 1.5/2.5); avgdl = 3
        let idf = (1.0f32 + 1.5 / 2.5).ln();
        let want0 = idf * 1.0 * 2.2 / (1.0 + 1.2 * (0.25 + 0.75 * 3.0 / 3.0));
        let want1 = idf * 2.0 * 2.2 / (2.0 + 1.2 * (0.25 + 0.75 * 5.0 / 3.0));
        assert!((s[0] - want0).abs() < 1e-6, "{} vs {want0}", s[0]);
        assert!((s[1] - want1).abs() < 1e-6);
        assert_eq!(s[2], 0.0);
    }

    #[test]
    fn rare_terms_weigh_more() {
        let idx = Bm25::build(&[doc("file read"), doc("file write"), doc("file delete")]);
        let s = idx.scores(&q(&["file", "delete"]));
        assert!(s[2] > s[0] && s[2] > s[1]);
        assert_eq!(s[0], s[1]);
    }

    #[test]
    fn field_weights_and_query_weights() {
        let idx = Bm25::build(&[
            vec![(3.0, vec!["send".into()]), (1.0, vec!["x".into()])],
            vec![(1.0, vec!["send".into()]), (1.0, vec!["x".into()])],
            doc("other"),
        ]);
        let s = idx.scores(&q(&["send"]));
        assert!(s[0] > s[1], "a heavier field must score higher");
        let half = idx.scores(&[("send".into(), 0.5)]);
        assert!((half[1] - s[1] / 2.0).abs() < 1e-6);
        // A repeated query term counts once, at its largest weight.
        let twice = idx.scores(&[("send".into(), 0.5), ("send".into(), 1.0)]);
        assert_eq!(twice, s);
    }

    #[test]
    fn empty_index_and_unknown_terms() {
        assert!(Bm25::build(&[]).scores(&q(&["a"])).is_empty());
        let idx = Bm25::build(&[doc("a")]);
        assert_eq!(idx.scores(&q(&["zzz"])), [0.0]);
    }
}
