//! Small pure helpers: MIME types by extension, `file://` URIs, glob patterns, text
//! detection and timestamps. No I/O here.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// The MIME type of a file name by its extension, if it is one we know.
pub(crate) fn mime_of(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "txt" | "text" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "xml" => "application/xml",
        "json" => "application/json",
        "jsonl" | "ndjson" => "application/x-ndjson",
        "js" | "mjs" | "cjs" => "text/javascript",
        "ts" | "tsx" => "text/x-typescript",
        "py" => "text/x-python",
        "rs" => "text/x-rust",
        "go" => "text/x-go",
        "c" | "h" => "text/x-c",
        "cc" | "cpp" | "cxx" | "hpp" => "text/x-c++",
        "java" => "text/x-java",
        "rb" => "text/x-ruby",
        "sh" | "bash" => "text/x-shellscript",
        "sql" => "application/sql",
        "toml" => "application/toml",
        "yaml" | "yml" => "application/yaml",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "ico" => "image/x-icon",
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        "ogg" => "audio/ogg",
        "flac" => "audio/flac",
        "mp4" => "video/mp4",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "wasm" => "application/wasm",
        "db" | "sqlite" | "sqlite3" => "application/vnd.sqlite3",
        _ => return None,
    })
}

/// MIME types sent as image content (those clients render).
pub(crate) fn is_image(mime: &str) -> bool {
    matches!(
        mime,
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    )
}

/// MIME types sent as audio content.
pub(crate) fn is_audio(mime: &str) -> bool {
    matches!(mime, "audio/wav" | "audio/mpeg" | "audio/ogg")
}

/// Binary formats never shown as text even when their bytes happen to be UTF-8.
pub(crate) fn is_binary_mime(mime: &str) -> bool {
    (mime.starts_with("image/") && mime != "image/svg+xml")
        || mime.starts_with("audio/")
        || mime.starts_with("video/")
        || matches!(
            mime,
            "application/pdf"
                | "application/zip"
                | "application/gzip"
                | "application/x-tar"
                | "application/wasm"
                | "application/vnd.sqlite3"
        )
}

/// `bytes` as text, if they are text: UTF-8 without NUL bytes. When the bytes were cut
/// from a longer file (`cut`), a multi-byte character split at the end is left off;
/// returns the text and how many bytes it covers.
pub(crate) fn as_text(bytes: &[u8], cut: bool) -> Option<(&str, usize)> {
    if bytes.contains(&0) {
        return None;
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => Some((s, bytes.len())),
        Err(e) if cut && e.error_len().is_none() => {
            let n = e.valid_up_to();
            std::str::from_utf8(&bytes[..n]).ok().map(|s| (s, n))
        }
        Err(_) => None,
    }
}

/// `file://` + the absolute path, percent-encoded (all but unreserved characters and `/`).
pub(crate) fn file_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The path a `file://` URI names (`file:///p` or `file://localhost/p`), decoded.
pub(crate) fn uri_path(uri: &str) -> Result<OsString, String> {
    let rest = uri
        .strip_prefix("file://")
        .ok_or_else(|| format!("`{uri}` is not a file:// URI"))?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return Err(format!(
            "`{uri}` names a host; use file:///absolute/path (no host)"
        ));
    }
    if rest.contains(['?', '#']) {
        return Err(format!(
            "`{uri}` has a query or fragment; percent-encode `?` and `#` in file names"
        ));
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("`{uri}` has a malformed percent-escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(OsString::from_vec(out))
}

/// Seconds since the epoch as RFC 3339 UTC (`2024-05-01T12:00:00Z`). A time outside about
/// the years -9999 to 9999 (a file whose clock was broken) stays a count of seconds.
pub(crate) fn rfc3339(secs: i64) -> String {
    match jiff::Timestamp::from_second(secs) {
        Ok(time) => time.to_string(),
        Err(_) => secs.to_string(),
    }
}

/// `rwxr-xr-x` for permission bits.
pub(crate) fn mode_string(mode: u32) -> String {
    let mut s = String::with_capacity(9);
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

// ---------------------------------------------------------------------------------------
// Globs

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Char(char),
    /// `?`: one character other than `/`.
    Any,
    /// `*`: any run of characters other than `/`.
    Star,
    /// `**`: any run of characters.
    DoubleStar,
    /// `**/`: nothing, or any run of characters ending in `/`.
    Dirs,
    /// `[...]`: one character (not `/`) in (or, negated, not in) the ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// A glob: `*`, `**`, `?`, `[a-z]`, `[!x]`, and `\` to escape. Matching runs in time
/// proportional to pattern × text (no backtracking blow-up).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Glob {
    toks: Vec<Tok>,
    /// A pattern with `/` is matched against the whole path, else against the name.
    pub whole_path: bool,
}

/// Whether `pattern` is a glob (else a plain substring).
pub(crate) fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

impl Glob {
    pub(crate) fn parse(pattern: &str) -> Result<Glob, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut toks = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' if chars.get(i + 1) == Some(&'*') => {
                    let at_start = i == 0 || chars[i - 1] == '/';
                    if at_start && chars.get(i + 2) == Some(&'/') {
                        toks.push(Tok::Dirs);
                        i += 3;
                    } else {
                        toks.push(Tok::DoubleStar);
                        i += 2;
                    }
                    continue;
                }
                '*' => toks.push(Tok::Star),
                '?' => toks.push(Tok::Any),
                '\\' => {
                    i += 1;
                    let c = chars
                        .get(i)
                        .ok_or_else(|| format!("the glob `{pattern}` ends with `\\`"))?;
                    toks.push(Tok::Char(*c));
                }
                '[' => {
                    let mut j = i + 1;
                    let negated = matches!(chars.get(j), Some('!' | '^'));
                    if negated {
                        j += 1;
                    }
                    let mut ranges = Vec::new();
                    let mut first = true;
                    loop {
                        let Some(&c) = chars.get(j) else {
                            return Err(format!(
                                "the glob `{pattern}` has an unclosed `[`; write `\\[` for a literal one"
                            ));
                        };
                        if c == ']' && !first {
                            break;
                        }
                        first = false;
                        if chars.get(j + 1) == Some(&'-')
                            && chars.get(j + 2).is_some_and(|&e| e != ']')
                        {
                            ranges.push((c, chars[j + 2]));
                            j += 3;
                        } else {
                            ranges.push((c, c));
                            j += 1;
                        }
                    }
                    toks.push(Tok::Class { negated, ranges });
                    i = j;
                }
                c => toks.push(Tok::Char(c)),
            }
            i += 1;
        }
        Ok(Glob {
            toks,
            whole_path: pattern.contains('/'),
        })
    }

    pub(crate) fn matches(&self, text: &str) -> bool {
        let t: Vec<char> = text.chars().collect();
        let n = t.len();
        // reach[j]: the tokens so far can consume exactly t[..j].
        let mut reach = vec![false; n + 1];
        reach[0] = true;
        for tok in &self.toks {
            let mut next = vec![false; n + 1];
            match tok {
                Tok::Char(c) => {
                    for j in 0..n {
                        next[j + 1] = reach[j] && t[j] == *c;
                    }
                }
                Tok::Any => {
                    for j in 0..n {
                        next[j + 1] = reach[j] && t[j] != '/';
                    }
                }
                Tok::Class { negated, ranges } => {
                    for j in 0..n {
                        let inside = ranges.iter().any(|&(lo, hi)| lo <= t[j] && t[j] <= hi);
                        next[j + 1] = reach[j] && t[j] != '/' && inside != *negated;
                    }
                }
                Tok::Star => {
                    let mut run = false;
                    for j in 0..=n {
                        run = reach[j] || (run && t[j - 1] != '/');
                        next[j] = run;
                    }
                }
                Tok::DoubleStar => {
                    let mut run = false;
                    for j in 0..=n {
                        run = run || reach[j];
                        next[j] = run;
                    }
                }
                Tok::Dirs => {
                    let mut any = false;
                    for j in 0..=n {
                        next[j] = reach[j] || (any && j > 0 && t[j - 1] == '/');
                        any = any || reach[j];
                    }
                }
            }
            reach = next;
        }
        reach[n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        Glob::parse(p).unwrap().matches(t)
    }

    #[test]
    fn globs() {
        assert!(m("*.rs", "main.rs"));
        assert!(!m("*.rs", "src/main.rs"));
        assert!(m("**/*.rs", "main.rs"));
        assert!(m("**/*.rs", "src/a/main.rs"));
        assert!(m("src/**/*.rs", "src/main.rs"));
        assert!(m("src/**", "src/a/b"));
        assert!(m("?.txt", "a.txt"));
        assert!(!m("?.txt", "ab.txt"));
        assert!(m("[a-c]x", "bx"));
        assert!(!m("[!a-c]x", "bx"));
        assert!(m("\\*", "*"));
        assert!(!m("a*b", "a/b"));
        assert!(m(&"*a".repeat(30), &"a".repeat(40)));
        assert!(Glob::parse("[abc").is_err());
    }

    #[test]
    fn uris_round_trip() {
        let p = Path::new("/tmp/a b/ü%x?.txt");
        let uri = file_uri(p);
        assert_eq!(uri, "file:///tmp/a%20b/%C3%BC%25x%3F.txt");
        assert_eq!(uri_path(&uri).unwrap(), p.as_os_str());
        assert!(uri_path("file://evil.example/etc/passwd").is_err());
        assert!(uri_path("http:///x").is_err());
        assert!(uri_path("file:///a%2").is_err());
    }

    #[test]
    fn times_and_modes() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_709_210_096), "2024-02-29T12:34:56Z");
        assert_eq!(rfc3339(-86_401), "1969-12-30T23:59:59Z");
        assert_eq!(rfc3339(i64::MAX), i64::MAX.to_string());
        assert_eq!(mode_string(0o754), "rwxr-xr--");
    }

    #[test]
    fn text_detection() {
        assert_eq!(as_text(b"hi", false), Some(("hi", 2)));
        assert_eq!(as_text(b"a\0b", false), None);
        let e = "é".as_bytes();
        assert_eq!(as_text(&[b'a', e[0]], true), Some(("a", 1)));
        assert_eq!(as_text(&[b'a', e[0]], false), None);
    }
}
