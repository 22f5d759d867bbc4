//! Query clean-up: separates what the user wants done (intent words) from what they want
//! it done to (paths, URLs, file names, numbers, quoted text, code), which otherwise drowns
//! the intent ("in server.js change port 3000 to 8080"). Literals are not just dropped:
//! the kind of thing they are is kept as a hint ("server.js" → "file js", "s3://b/k" →
//! "s3 url"), because that is often what tells two tools apart.

/// A request split into intent words and hints drawn from its literals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CleanQuery {
    /// The request with its literals removed, words in their original order.
    pub intent: String,
    /// Words naming the kinds of literal found (deduplicated, in order of appearance).
    pub hints: Vec<String>,
}

/// Top-level domains common enough that `example.com` reads as a site, not a file.
const TLDS: &[&str] = &[
    "com", "org", "net", "io", "dev", "ai", "co", "app", "gov", "edu", "uk", "de",
];

/// Splits a request into intent and hints. Never fails; a request that is all literal
/// keeps its original text as intent so there is still something to search for.
pub fn clean(query: &str) -> CleanQuery {
    let mut hints: Vec<String> = Vec::new();
    let mut hint = |words: &str| {
        for w in words.split(' ') {
            if !w.is_empty() && !hints.iter().any(|h| h == w) {
                hints.push(w.to_owned());
            }
        }
    };
    // A request on several lines is a prompt with pasted content (a manifest, a query, a
    // file): the first line says what to do, the rest is what to do it with.
    let (query, pasted) = match query.trim().split_once('\n') {
        Some((first, rest)) if !first.trim().is_empty() => (first, Some(rest)),
        _ => (query, None),
    };
    if let Some(block) = pasted {
        hint(code_kind(block));
    }
    // Pasted SQL on the same line: everything from the statement's keyword on.
    let query = match sql_start(query) {
        Some(at) => {
            hint("sql query");
            &query[..at]
        }
        None => query,
    };
    let without_quotes = strip_quoted(query, &mut hint);
    let mut intent: Vec<&str> = Vec::new();
    let mut naming = false;
    for raw in without_quotes.split_whitespace() {
        let tok = raw
            .trim_start_matches(['(', '[', '{', '<'])
            .trim_end_matches([',', ';', ':', '!', '?', ')', ']', '}', '>', '.']);
        if tok.is_empty() {
            continue;
        }
        // "a folder called drafts": the word after "called"/"named" is a name, not intent.
        if std::mem::take(&mut naming) {
            continue;
        }
        match classify(tok) {
            Kind::Word => {
                naming = matches!(tok.to_lowercase().as_str(), "called" | "named" | "titled");
                intent.push(tok);
            }
            Kind::Literal(h) => hint(&h),
        }
    }
    let intent = if intent.is_empty() {
        query.trim().to_owned()
    } else {
        intent.join(" ")
    };
    CleanQuery { intent, hints }
}

/// Whether a request asks a question ("what meetings do I have", "how big is x.dump",
/// "is the build green?") rather than asks for a change. A question wants information,
/// which read-only tools give; an imperative may want either. Polite requests phrased as
/// questions ("can you delete…?") are not questions in this sense.
pub fn is_question(query: &str) -> bool {
    let lower = query.trim().to_lowercase();
    let first = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '\u{2019}'))
        .find(|w| !w.is_empty())
        .unwrap_or("");
    let first = first.split(['\'', '\u{2019}']).next().unwrap_or("");
    const ASKING: [&str; 8] = [
        "what", "which", "who", "whose", "when", "where", "how", "why",
    ];
    const POLITE: [&str; 6] = ["can", "could", "would", "will", "please", "pls"];
    if ASKING.contains(&first) {
        // "how do I…" / "how to…" ask for a way to do something, often a change.
        let rest = lower.trim_start_matches(first).trim_start();
        return !(first == "how" && (rest.starts_with("do ") || rest.starts_with("to ")));
    }
    lower.ends_with('?') && !POLITE.contains(&first)
}

/// Removes "double", 'single' (at word boundaries, so "don't" survives) and `backtick`
/// quoted spans; a backtick span is code, so it leaves the hint "code".
fn strip_quoted(query: &str, hint: &mut impl FnMut(&str)) -> String {
    let chars: Vec<char> = query.chars().collect();
    let mut out = String::with_capacity(query.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let opens = matches!(c, '"' | '`' | '\u{201c}')
            || (c == '\'' && (i == 0 || !chars[i - 1].is_alphanumeric()));
        if opens {
            let close = match c {
                '\u{201c}' => '\u{201d}',
                other => other,
            };
            if let Some(len) = chars[i + 1..].iter().position(|&d| d == close) {
                let after = i + 1 + len + 1;
                // A closing single quote must end a word too ('tis, rock 'n' roll aside).
                let ends_word =
                    c != '\'' || after >= chars.len() || !chars[after].is_alphanumeric();
                if ends_word {
                    if c == '`' {
                        hint("code");
                    }
                    out.push(' ');
                    i = after;
                    continue;
                }
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// What a pasted block is, as hint words.
fn code_kind(block: &str) -> &'static str {
    let lower = block.to_lowercase();
    if lower.contains("apiversion:") && lower.contains("kind:") {
        "kubernetes manifest yaml"
    } else if sql_start(block).is_some() {
        "sql query"
    } else if block.trim_start().starts_with(['{', '[']) {
        "json"
    } else {
        "code"
    }
}

/// Byte offset of an SQL statement in the text: an upper-case statement keyword followed
/// somewhere by its companion (SELECT … FROM, UPDATE … SET, INSERT INTO, …). Upper case
/// only, so that "select all text" or "delete from my calendar" stay words.
fn sql_start(text: &str) -> Option<usize> {
    const STATEMENTS: &[(&str, &[&str])] = &[
        ("SELECT", &["FROM"]),
        ("WITH", &["SELECT"]),
        ("INSERT", &["INTO"]),
        ("UPDATE", &["SET"]),
        ("DELETE", &["FROM"]),
        ("CREATE", &["TABLE", "INDEX", "VIEW"]),
        ("ALTER", &["TABLE"]),
        ("DROP", &["TABLE", "INDEX", "VIEW"]),
        ("EXPLAIN", &["SELECT", "UPDATE", "DELETE", "INSERT"]),
    ];
    let mut offset = 0;
    let words: Vec<(usize, &str)> = text
        .split(' ')
        .map(|w| {
            let at = offset;
            offset += w.len() + 1;
            (at, w)
        })
        .collect();
    for (i, (at, w)) in words.iter().enumerate() {
        let Some((_, companions)) = STATEMENTS.iter().find(|(k, _)| k == w) else {
            continue;
        };
        if words[i + 1..]
            .iter()
            .any(|(_, n)| companions.contains(&n.trim_end_matches(',')))
        {
            return Some(*at);
        }
    }
    None
}

enum Kind {
    Word,
    /// A literal, with the hint words it leaves behind (possibly none).
    Literal(String),
}

fn classify(tok: &str) -> Kind {
    let lower = tok.to_lowercase();
    if let Some((scheme, _)) = lower.split_once("://") {
        return Kind::Literal(match scheme {
            "http" | "https" => "url web".to_owned(),
            s if s.chars().all(|c| c.is_ascii_alphanumeric() || c == '+') => format!("{s} url"),
            _ => "url".to_owned(),
        });
    }
    if lower.starts_with("www.") {
        return Kind::Literal("url web".into());
    }
    if let Some(at) = lower.find('@') {
        if at > 0 && lower[at + 1..].contains('.') {
            return Kind::Literal("email".into());
        }
        if at == 0 && lower.len() > 1 {
            return Kind::Literal("user".into());
        }
    }
    if let Some(rest) = lower.strip_prefix('#') {
        return Kind::Literal(
            if rest.chars().all(|c| c.is_ascii_digit()) && !rest.is_empty() {
                "number".into()
            } else {
                "channel".into()
            },
        );
    }
    if is_path(tok) {
        let mut h = if lower.ends_with('/') {
            "directory".to_owned()
        } else {
            "file".to_owned()
        };
        if let Some(ext) = extension(lower.rsplit(['/', '\\']).next().unwrap_or("")) {
            h = format!("file {ext}");
        }
        return Kind::Literal(h);
    }
    if is_owner_repo(&lower) {
        return Kind::Literal(if lower.contains('#') {
            "repository number".into()
        } else {
            "repository".into()
        });
    }
    if let Some(ext) = extension(&lower) {
        if TLDS.contains(&ext.as_str()) {
            return Kind::Literal("website url".into());
        }
        return Kind::Literal(format!("file {ext}"));
    }
    if looks_numeric(&lower) {
        return Kind::Literal(String::new());
    }
    if let Some(h) = resource_id(&lower) {
        return Kind::Literal(h.into());
    }
    if looks_like_code(tok) || looks_like_id(tok) {
        return Kind::Literal(String::new());
    }
    Kind::Word
}

/// Identifiers whose shape says what they name: cloud resource ids (`i-0abc`, `ami-…`,
/// `vol-…`, `sg-…`, ARNs) and commit hashes (7 to 40 hex digits).
fn resource_id(lower: &str) -> Option<&'static str> {
    const PREFIXES: &[(&str, &str)] = &[
        ("i-", "instance"),
        ("ami-", "image"),
        ("vol-", "volume"),
        ("snap-", "snapshot"),
        ("sg-", "security group"),
        ("vpc-", "network"),
        ("subnet-", "network subnet"),
    ];
    if lower.starts_with("arn:") {
        return Some("resource");
    }
    for (p, h) in PREFIXES {
        if let Some(rest) = lower.strip_prefix(p)
            && rest.len() >= 4
            && rest.chars().all(|c| c.is_ascii_hexdigit())
        {
            return Some(h);
        }
    }
    let hex = (7..=40).contains(&lower.len()) && lower.chars().all(|c| c.is_ascii_hexdigit());
    let mixed =
        lower.chars().any(|c| c.is_ascii_digit()) && lower.chars().any(|c| c.is_ascii_alphabetic());
    (hex && mixed).then_some("commit")
}

/// `owner/repo` (optionally `#123`), the way code hosts name repositories.
fn is_owner_repo(lower: &str) -> bool {
    let name = lower.split('#').next().unwrap_or(lower);
    let ok = |p: &str| {
        p.len() >= 2
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    matches!(name.split_once('/'), Some((o, r)) if ok(o) && ok(r) && !r.contains('/') && !name.contains(".."))
        && name
            .rsplit('/')
            .next()
            .is_none_or(|r| extension(r).is_none())
}

fn is_path(tok: &str) -> bool {
    tok.starts_with('/')
        || tok.starts_with("~/")
        || tok.starts_with("./")
        || tok.starts_with("../")
        || tok.contains('\\')
        // a/b/c, src/main.rs; but not "and/or"-style word pairs
        || (tok.matches('/').count() >= 2 || (tok.contains('/') && tok.contains('.')))
}

/// The extension of a file name (letters, at most 5, after a non-empty stem): "server.js"
/// → "js"; "3.5", "e.g" and "v1.2" are not file names.
fn extension(name: &str) -> Option<String> {
    let (stem, ext) = name.rsplit_once('.')?;
    let stem_ok = !stem.is_empty()
        && stem.len() > 1
        && stem
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
    let ext_ok = (1..=5).contains(&ext.len())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().any(|c| c.is_ascii_alphabetic());
    (stem_ok && ext_ok).then(|| ext.to_owned())
}

/// 3000, 2024-01-05, 15:30, 3.5, 50%, $20, 1,000, 10k, 3pm, v2
fn looks_numeric(tok: &str) -> bool {
    let core = tok.trim_start_matches(['$', '€', '£', '+', '-', 'v']);
    let digits = core.chars().filter(char::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    let letters: String = core.chars().filter(|c| c.is_alphabetic()).collect();
    let units = [
        "", "k", "m", "mb", "gb", "kb", "tb", "ms", "s", "h", "am", "pm", "st", "nd", "rd", "th",
        "x", "d", "w",
    ];
    units.contains(&letters.as_str())
        && core
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | ',' | ':' | '-' | '/' | '%'))
}

fn looks_like_code(tok: &str) -> bool {
    tok.contains(['=', '(', '{', ';', '$', '<', '>', '|', '*'])
        || tok.contains("::")
        || tok.contains("->")
}

/// Hashes, ids and tokens: long runs mixing letters and digits (a1b2c3d4, 550e8400-e29b).
fn looks_like_id(tok: &str) -> bool {
    let digits = tok.chars().filter(char::is_ascii_digit).count();
    let letters = tok.chars().filter(|c| c.is_ascii_alphabetic()).count();
    tok.len() >= 7
        && digits >= 2
        && letters >= 1
        && tok.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[cfg(test)]
mod tests {
    #[test]
    fn questions() {
        assert!(super::is_question("what meetings do I have next week?"));
        assert!(super::is_question("when's my next standup"));
        assert!(super::is_question("is the build green?"));
        assert!(!super::is_question("can you delete the branch?"));
        assert!(!super::is_question("how do I delete a branch"));
        assert!(!super::is_question("delete the branch"));
    }

    use super::*;

    fn c(q: &str) -> (String, Vec<String>) {
        let r = clean(q);
        (r.intent, r.hints)
    }

    #[test]
    fn paths_and_numbers_leave_intent() {
        assert_eq!(
            c("in server.js change port 3000 to 8080"),
            ("in change port to".into(), vec!["file".into(), "js".into()])
        );
        assert_eq!(
            c("rm scratch.txt"),
            ("rm".into(), vec!["file".into(), "txt".into()])
        );
        assert_eq!(
            c("show me /etc/hosts"),
            ("show me".into(), vec!["file".into()])
        );
        assert_eq!(c("ls ~/projects/"), ("ls".into(), vec!["directory".into()]));
        assert_eq!(
            c("open src/main.rs"),
            ("open".into(), vec!["file".into(), "rs".into()])
        );
    }

    #[test]
    fn urls_schemes_and_sites() {
        assert_eq!(
            c("copy s3://logs/2024/a.gz here"),
            ("copy here".into(), vec!["s3".into(), "url".into()])
        );
        assert_eq!(
            c("fetch https://example.com/x"),
            ("fetch".into(), vec!["url".into(), "web".into()])
        );
        assert_eq!(
            c("is example.com down?"),
            ("is down".into(), vec!["website".into(), "url".into()])
        );
    }

    #[test]
    fn quoted_text_and_code() {
        assert_eq!(
            c("send \"hello team, lunch at 1\" to #general"),
            ("send to".into(), vec!["channel".into()])
        );
        assert_eq!(c("don't delete 'notes'"), ("don't delete".into(), vec![]));
        assert_eq!(
            c("run `SELECT count(*) FROM users`"),
            ("run".into(), vec!["code".into()])
        );
        assert_eq!(c("set x=5 in config"), ("set in config".into(), vec![]));
    }

    #[test]
    fn people_numbers_ids_dates() {
        assert_eq!(
            c("DM @bob about PR #42"),
            ("DM about PR".into(), vec!["user".into(), "number".into()])
        );
        assert_eq!(
            c("mail ann@example.org"),
            ("mail".into(), vec!["email".into()])
        );
        assert_eq!(
            c("meeting 2024-05-01 at 3pm for 30m"),
            ("meeting at for".into(), vec![])
        );
        assert_eq!(
            c("revert a1b2c3d4e5"),
            ("revert".into(), vec!["commit".into()])
        );
        assert_eq!(
            c("reboot i-0abc123"),
            ("reboot".into(), vec!["instance".into()])
        );
        assert_eq!(c("tag ami-0123"), ("tag".into(), vec!["image".into()]));
        assert_eq!(
            c("who is free thursday afternoon"),
            ("who is free thursday afternoon".into(), vec![])
        );
        assert_eq!(c("use v1.2 and k8s"), ("use and k8s".into(), vec![]));
    }

    #[test]
    fn pasted_code_and_sql() {
        assert_eq!(
            c("is this fast: SELECT * FROM t WHERE a = 1"),
            ("is this fast".into(), vec!["sql".into(), "query".into()])
        );
        assert_eq!(
            c("SELECT count(*) FROM t"),
            (String::new(), vec!["sql".into(), "query".into()])
        );
        assert_eq!(
            c("select all text in the editor").0,
            "select all text in the editor"
        );
        assert_eq!(c("delete from my calendar").0, "delete from my calendar");
        assert_eq!(
            c("apply this:\napiVersion: v1\nkind: ConfigMap"),
            (
                "apply this".into(),
                vec!["kubernetes".into(), "manifest".into(), "yaml".into()]
            )
        );
        assert_eq!(c("save this:\nhello there").1, ["code"]);
    }

    #[test]
    fn names_and_repositories() {
        assert_eq!(
            c("make a folder called drafts"),
            ("make a folder called".into(), vec![])
        );
        assert_eq!(
            c("list issues in acme/web"),
            ("list issues in".into(), vec!["repository".into()])
        );
        assert_eq!(
            c("tag acme/web#212"),
            ("tag".into(), vec!["repository".into(), "number".into()])
        );
        assert_eq!(c("open src/main.rs").1, ["file", "rs"]);
    }

    #[test]
    fn all_literal_keeps_the_text() {
        assert_eq!(c("/tmp/x.txt").0, "/tmp/x.txt");
    }
}
