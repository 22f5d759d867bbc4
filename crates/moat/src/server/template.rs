//! RFC 6570 URI templates, for matching `resources/read` URIs against resource templates.
//!
//! Supports the expressions resource templates use in practice: `{var}` (one segment),
//! `{+var}` and `{#var}` (reserved: may span `/`), `{/var}` (path segment), `{.var}`, and
//! `{?a,b}` / `{&a,b}` (query parameters, in any order, each optional).

use std::collections::HashMap;

use percent_encoding::percent_decode_str;

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Var {
        op: Option<char>,
        names: Vec<String>,
    },
}

/// A parsed URI template.
#[derive(Debug, Clone, PartialEq)]
pub struct UriTemplate {
    source: String,
    parts: Vec<Part>,
}

/// A malformed template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid URI template {template:?}: {reason}")]
pub struct TemplateError {
    template: String,
    reason: &'static str,
}

impl UriTemplate {
    /// Parse a template.
    pub fn parse(source: &str) -> Result<UriTemplate, TemplateError> {
        let err = |reason| TemplateError {
            template: source.to_owned(),
            reason,
        };
        let mut parts = Vec::new();
        let mut rest = source;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let close = rest[open..].find('}').ok_or_else(|| err("unclosed '{'"))? + open;
            let mut expr = &rest[open + 1..close];
            let op = match expr.chars().next() {
                Some(c @ ('+' | '#' | '/' | '.' | '?' | '&' | ';')) => {
                    expr = &expr[1..];
                    Some(c)
                }
                _ => None,
            };
            let names: Vec<String> = expr
                .split(',')
                .map(|n| {
                    n.trim_end_matches('*')
                        .split(':')
                        .next()
                        .unwrap_or("")
                        .to_owned()
                })
                .collect();
            if names.iter().any(String::is_empty) {
                return Err(err("empty variable name"));
            }
            if matches!(parts.last(), Some(Part::Var { .. }))
                && !matches!(op, Some('/' | '.' | '#' | '?' | '&' | ';'))
            {
                return Err(err("two adjacent variables cannot be told apart"));
            }
            parts.push(Part::Var { op, names });
            rest = &rest[close + 1..];
        }
        if rest.contains('}') {
            return Err(err("unmatched '}'"));
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        Ok(UriTemplate {
            source: source.to_owned(),
            parts,
        })
    }

    /// The template text.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Match `uri`, returning the variables (percent-decoded) if it fits.
    pub fn matches(&self, uri: &str) -> Option<HashMap<String, String>> {
        let mut vars = HashMap::new();
        let mut rest = uri;
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
                Part::Var {
                    op: Some('?' | '&'),
                    names,
                } => {
                    let query = match rest.strip_prefix(['?', '&']) {
                        Some(q) => q,
                        None if rest.is_empty() => "",
                        None => return None,
                    };
                    for pair in query.split('&').filter(|p| !p.is_empty()) {
                        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                        if names.iter().any(|n| n == k) {
                            vars.insert(k.to_owned(), decode(v));
                        }
                    }
                    rest = "";
                }
                Part::Var { op, names } => {
                    let prefix = match op {
                        Some('/') => Some('/'),
                        Some('.') => Some('.'),
                        Some('#') => Some('#'),
                        _ => None,
                    };
                    if let Some(p) = prefix {
                        rest = rest.strip_prefix(p)?;
                    }
                    let reserved = matches!(op, Some('+' | '#'));
                    // The value runs to the next literal (or the end), and never across a
                    // `/`, `?` or `#` unless the operator allows reserved characters.
                    let stop = match self.parts.get(i + 1) {
                        Some(Part::Literal(next)) => rest.find(next.as_str()).unwrap_or(rest.len()),
                        _ => rest.len(),
                    };
                    let candidate = &rest[..stop];
                    let end = if reserved {
                        candidate.len()
                    } else {
                        candidate.find(['/', '?', '#']).unwrap_or(candidate.len())
                    };
                    let value = &candidate[..end];
                    if value.is_empty() {
                        return None;
                    }
                    let pieces: Vec<&str> = if names.len() > 1 {
                        value.split(',').collect()
                    } else {
                        vec![value]
                    };
                    if pieces.len() != names.len() {
                        return None;
                    }
                    for (name, piece) in names.iter().zip(pieces) {
                        vars.insert(name.clone(), decode(piece));
                    }
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(vars)
    }

    /// The variable names, in order.
    pub fn variables(&self) -> Vec<&str> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Var { names, .. } => Some(names.iter().map(String::as_str)),
                Part::Literal(_) => None,
            })
            .flatten()
            .collect()
    }
}

fn decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(t: &str, uri: &str) -> Option<HashMap<String, String>> {
        UriTemplate::parse(t).unwrap().matches(uri)
    }

    #[test]
    fn simple_variables_match_one_segment() {
        let v = m("test://template/{id}/data", "test://template/42/data").unwrap();
        assert_eq!(v["id"], "42");
        assert!(m("test://template/{id}/data", "test://template/4/2/data").is_none());
        assert!(m("test://template/{id}/data", "test://template//data").is_none());
        assert!(m("test://template/{id}/data", "test://template/42/data/x").is_none());
        assert_eq!(m("file:///{name}", "file:///a%20b").unwrap()["name"], "a b");
    }

    #[test]
    fn reserved_and_query_expressions() {
        assert_eq!(
            m("file:///{+path}", "file:///a/b/c.txt").unwrap()["path"],
            "a/b/c.txt"
        );
        let v = m("search://items{?q,limit}", "search://items?limit=5&q=rust").unwrap();
        assert_eq!(v["q"], "rust");
        assert_eq!(v["limit"], "5");
        assert!(
            m("search://items{?q}", "search://items")
                .unwrap()
                .is_empty()
        );
        assert_eq!(m("x://{a}{/b}", "x://one/two").unwrap()["b"], "two");
    }

    #[test]
    fn malformed_templates_are_refused() {
        assert!(UriTemplate::parse("x://{a").is_err());
        assert!(UriTemplate::parse("x://{}").is_err());
        assert!(UriTemplate::parse("x://a}").is_err());
        assert!(UriTemplate::parse("x://{a}{b}").is_err());
        assert_eq!(
            UriTemplate::parse("x://{a}/{b}").unwrap().variables(),
            vec!["a", "b"]
        );
    }
}
