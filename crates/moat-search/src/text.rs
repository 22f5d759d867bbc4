//! Lexical analysis shared by indexing and querying: identifiers split into words, words
//! lower-cased, stop words dropped, English stems (so "deleting", "deletes" and "delete" meet).

use rust_stemmers::{Algorithm, Stemmer};
use std::sync::OnceLock;

/// Words too common in requests and tool descriptions to tell tools apart. Deliberately
/// short: words like "all", "new", "list" or "who" carry intent and stay.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "could", "do", "does", "for", "from",
    "have", "i", "if", "in", "into", "is", "it", "its", "let", "me", "my", "of", "on", "or", "our",
    "please", "should", "so", "some", "that", "the", "their", "them", "then", "there", "this",
    "those", "to", "us", "was", "we", "were", "what", "which", "will", "with", "would", "you",
    "your", "i'd", "i'm", "want", "need", "just", "also",
];

fn stemmer() -> &'static Stemmer {
    static S: OnceLock<Stemmer> = OnceLock::new();
    S.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// Lower-cased alphanumeric words, camelCase and snake_case split, nothing dropped.
pub fn words(text: &str) -> Vec<String> {
    split_identifier(text)
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `list_directory`, `getFreeBusy`, `k8s-pods` → `list directory`, `get free busy`, `k8s pods`.
pub fn split_identifier(id: &str) -> String {
    let mut out = String::with_capacity(id.len() + 4);
    let mut prev: Option<char> = None;
    for c in id.chars() {
        if c == '_' || c == '-' || c == '.' || c == '/' || c == ':' || c.is_whitespace() {
            if !out.ends_with(' ') && !out.is_empty() {
                out.push(' ');
            }
            prev = None;
            continue;
        }
        if let Some(p) = prev {
            // A lower-to-upper step starts a word; a digit run stays attached (k8s, s3).
            if p.is_lowercase() && c.is_uppercase() && !out.ends_with(' ') {
                out.push(' ');
            }
        }
        out.extend(c.to_lowercase());
        prev = Some(c);
    }
    out.trim_end().to_owned()
}

/// Whether a word is a stop word.
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.contains(&word)
}

/// The stem of one lower-case word.
pub fn stem(word: &str) -> String {
    stemmer().stem(word).into_owned()
}

/// The index terms of a text: words without stop words, stemmed.
pub fn terms(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| !is_stop_word(w))
        .map(|w| stem(&w))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_into_words() {
        assert_eq!(split_identifier("list_directory"), "list directory");
        assert_eq!(split_identifier("getFreeBusy"), "get free busy");
        assert_eq!(split_identifier("k8s-pods"), "k8s pods");
        assert_eq!(split_identifier("s3__put_object"), "s3 put object");
        assert_eq!(split_identifier("HTTPRequest"), "httprequest");
    }

    #[test]
    fn words_split_and_lowercase() {
        assert_eq!(
            words("List the PR's in moat-mcp/moat"),
            ["list", "the", "pr's", "in", "moat", "mcp", "moat"]
        );
        assert_eq!(
            words("getFreeBusy, please!"),
            ["get", "free", "busy", "please"]
        );
    }

    #[test]
    fn terms_drop_stop_words_and_stem() {
        assert_eq!(
            terms("Deleting the files in my folder"),
            ["delet", "file", "folder"]
        );
        assert_eq!(terms("deletes"), terms("delete"));
        assert_eq!(terms("who is free"), ["who", "free"]);
    }
}
