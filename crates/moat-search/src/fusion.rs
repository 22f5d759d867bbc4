//! Combining rankings. Reciprocal rank fusion combines them by position, not by score, so
//! BM25 scores (unbounded) and cosine similarities (-1..1) need no calibration against
//! each other: a document at 0-based rank `r` in a list of weight `w` earns
//! `w / (k + r + 1)`; earnings add up across lists. `k` damps the head: large `k` flattens
//! the difference between ranks 1 and 10, small `k` trusts each list's first answer more.
//!
//! Positions forget margins, though: a first place far ahead of the second counts the same
//! as a near tie. Normalised scores ([`z_score`], [`min_max`]) put the two scales on one
//! footing and keep the margins.

use std::cmp::Ordering;
use std::collections::HashMap;

/// The usual constant from the original RRF paper (Cormack et al., 2009).
pub const DEFAULT_K: f32 = 60.0;

/// How the lexical and semantic rankings become one.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fusion {
    /// Reciprocal rank: positions only.
    Rrf,
    /// Each ranking's scores scaled to 0..1 over the visible tools, then added with the
    /// weights: keeps how far ahead a ranking's favourite is, which positions lose.
    MinMax,
    /// Each ranking's scores as standard scores (distance from the mean in standard
    /// deviations) over the visible tools, then added with the weights.
    ZScore,
}

/// Fuses ranked lists of document ids (best first), each with a weight. Returns every
/// document that appears in any list, best first; ties go to the lower id so results are
/// deterministic.
pub fn rrf(lists: &[(&[u32], f32)], k: f32) -> Vec<(u32, f32)> {
    let mut acc: HashMap<u32, f32> = HashMap::new();
    for (list, weight) in lists {
        for (rank, &doc) in list.iter().enumerate() {
            *acc.entry(doc).or_default() += weight / (k + rank as f32 + 1.0);
        }
    }
    let mut out: Vec<(u32, f32)> = acc.into_iter().collect();
    out.sort_by(|a, b| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(Ordering::Equal)
            .then(a.0.cmp(&b.0))
    });
    out
}

/// Ids of the documents `keep` accepts, by descending score (ties to the lower id).
pub fn rank(scores: &[f32], keep: impl Fn(u32) -> bool) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..scores.len() as u32).filter(|&i| keep(i)).collect();
    ids.sort_by(|&a, &b| {
        scores[b as usize]
            .partial_cmp(&scores[a as usize])
            .unwrap_or(Ordering::Equal)
            .then(a.cmp(&b))
    });
    ids
}

/// Scores scaled to 0..1 over the documents `shown` accepts (the best 1, the worst 0);
/// hidden documents and a ranking without spread score 0.
pub fn min_max(scores: &[f32], shown: &[bool]) -> Vec<f32> {
    let visible = visible(scores, shown);
    let lo = visible.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = visible.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    rescale(scores, shown, lo, hi - lo)
}

/// Standard scores over the documents `shown` accepts; hidden documents and a ranking
/// without spread score 0.
pub fn z_score(scores: &[f32], shown: &[bool]) -> Vec<f32> {
    let visible = visible(scores, shown);
    let n = visible.len().max(1) as f32;
    let mean = visible.iter().sum::<f32>() / n;
    let sd = (visible.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / n).sqrt();
    rescale(scores, shown, mean, sd)
}

fn visible(scores: &[f32], shown: &[bool]) -> Vec<f32> {
    scores
        .iter()
        .zip(shown)
        .filter(|(_, s)| **s)
        .map(|(x, _)| *x)
        .collect()
}

/// `(x - origin) / spread` for shown documents, 0 for the rest and when there is no spread.
fn rescale(scores: &[f32], shown: &[bool], origin: f32, spread: f32) -> Vec<f32> {
    scores
        .iter()
        .zip(shown)
        .map(|(x, s)| {
            if *s && spread > f32::EPSILON {
                (x - origin) / spread
            } else {
                0.0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_wins_and_weights_count() {
        let lex = [1, 2, 3];
        let sem = [2, 3, 1];
        let fused = rrf(&[(&lex, 1.0), (&sem, 1.0)], 60.0);
        assert_eq!(fused[0].0, 2, "rank 2+1 beats 1+3");
        assert!((fused[0].1 - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-7);
        // With the semantic list weighted up, its order wins.
        let fused = rrf(&[(&lex, 1.0), (&sem, 3.0)], 60.0);
        assert_eq!(fused.iter().map(|f| f.0).collect::<Vec<_>>(), [2, 3, 1]);
    }

    #[test]
    fn documents_in_one_list_only_still_count() {
        let fused = rrf(&[(&[7], 1.0), (&[8, 7], 1.0)], 1.0);
        assert_eq!(fused.iter().map(|f| f.0).collect::<Vec<_>>(), [7, 8]);
        assert!(rrf(&[], 60.0).is_empty());
    }

    #[test]
    fn ties_are_deterministic() {
        let fused = rrf(&[(&[5], 1.0), (&[3], 1.0)], 60.0);
        assert_eq!(fused.iter().map(|f| f.0).collect::<Vec<_>>(), [3, 5]);
    }

    #[test]
    fn normalised_scores() {
        let shown = [true, true, true, false];
        assert_eq!(min_max(&[1.0, 3.0, 2.0, 9.0], &shown), [0.0, 1.0, 0.5, 0.0]);
        let z = z_score(&[1.0, 3.0, 2.0, 9.0], &shown);
        assert!(z[0] < 0.0 && z[1] > 0.0 && z[2].abs() < 1e-6 && z[3] == 0.0);
        assert!((z[1] - 1.5f32.sqrt()).abs() < 1e-6, "{z:?}");
        // No spread, nothing to tell apart.
        assert_eq!(min_max(&[2.0, 2.0], &[true, true]), [0.0, 0.0]);
        assert_eq!(z_score(&[2.0, 2.0], &[true, true]), [0.0, 0.0]);
        assert!(z_score(&[], &[]).is_empty());
    }

    #[test]
    fn rank_orders_what_is_kept() {
        assert_eq!(rank(&[0.5, 0.0, 0.9, 0.7], |_| true), [2, 3, 0, 1]);
        assert_eq!(rank(&[0.5, 0.0, 0.9, 0.7], |i| i != 2), [3, 0, 1]);
        assert_eq!(rank(&[0.5, -0.2, 0.5], |_| true), [0, 2, 1]);
    }
}
