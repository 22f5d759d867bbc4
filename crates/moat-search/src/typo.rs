//! Spelling tolerance: a query word the catalog never uses is matched to catalog words
//! one or two edits away ("shwo" → "show", "comits" → "commit"), counted like expansions.

/// Catalog terms within reach of `word`: one edit for words of 4 to 6 letters, two from 7.
/// Shorter words are left alone: too many words are one edit from a 3-letter word.
pub fn corrections<'a>(word: &str, vocabulary: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let len = word.chars().count();
    let max = match len {
        0..=3 => return Vec::new(),
        4..=6 => 1,
        _ => 2,
    };
    let mut out: Vec<&str> = vocabulary
        .filter(|t| t.chars().count().abs_diff(len) <= max && distance(word, t) <= max)
        .collect();
    out.sort_unstable();
    out
}

/// Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of
/// neighbours each cost one.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().take(w).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("show", "shwo"), 1);
        assert_eq!(distance("comit", "commit"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("same", "same"), 0);
    }

    #[test]
    fn corrections_by_length() {
        let vocab = ["show", "commit", "list", "kubernetes", "shop"];
        assert_eq!(corrections("shwo", vocab.into_iter()), ["show"]);
        assert_eq!(corrections("comit", vocab.into_iter()), ["commit"]);
        assert_eq!(corrections("kuberntes", vocab.into_iter()), ["kubernetes"]);
        assert!(
            corrections("lst", vocab.into_iter()).is_empty(),
            "too short"
        );
        assert!(corrections("zzzz", vocab.into_iter()).is_empty());
    }
}
