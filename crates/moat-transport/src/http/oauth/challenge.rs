//! `WWW-Authenticate` parsing (RFC 9110 §11.6.1, RFC 6750 §3, RFC 9728 §5.1, RFC 9449 §7.1).
//!
//! A header may hold several challenges, and a response several headers. Each challenge is a
//! scheme followed by either a `token68` or comma-separated `name=value` parameters whose
//! values are tokens or quoted strings. The parser is total: garbage yields fewer challenges,
//! never a panic.

use http::HeaderMap;

/// One challenge: a scheme and its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The auth scheme as sent (compare case-insensitively).
    pub scheme: String,
    /// Parameters in order; names lowercased, values unquoted.
    pub params: Vec<(String, String)>,
    /// A `token68` instead of parameters, if that is what was sent.
    pub token68: Option<String>,
}

impl Challenge {
    /// The value of parameter `name` (case-insensitive), the first if repeated.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What an MCP client needs from a 401/403: the parameters of the `Bearer` (or `DPoP`)
/// challenges, merged (the first value of each wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    /// `error`, e.g. `invalid_token`, `insufficient_scope`, `use_dpop_nonce`.
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
    /// `scope`: the scopes the operation needs, space-separated.
    pub scope: Option<String>,
    /// `resource_metadata`: where the Protected Resource Metadata is.
    pub resource_metadata: Option<String>,
    /// Whether a `DPoP` challenge was among them.
    pub dpop: bool,
}

impl BearerChallenge {
    /// Collect the Bearer/DPoP challenges from every `WWW-Authenticate` header.
    pub fn from_headers(headers: &HeaderMap) -> BearerChallenge {
        let mut all = Vec::new();
        for value in headers.get_all(http::header::WWW_AUTHENTICATE) {
            // Header values that are not visible ASCII are parsed lossily: a quoted
            // description with odd bytes must not hide the resource_metadata next to it.
            let text = String::from_utf8_lossy(value.as_bytes());
            all.extend(parse_www_authenticate(&text));
        }
        BearerChallenge::from_challenges(&all)
    }

    /// Merge the Bearer/DPoP challenges among `challenges`.
    pub fn from_challenges(challenges: &[Challenge]) -> BearerChallenge {
        let mut out = BearerChallenge::default();
        for c in challenges {
            let dpop = c.scheme.eq_ignore_ascii_case("dpop");
            if !(dpop || c.scheme.eq_ignore_ascii_case("bearer")) {
                continue;
            }
            out.dpop |= dpop;
            let take = |slot: &mut Option<String>, name: &str| {
                if slot.is_none() {
                    *slot = c.param(name).map(str::to_owned);
                }
            };
            take(&mut out.error, "error");
            take(&mut out.error_description, "error_description");
            take(&mut out.scope, "scope");
            take(&mut out.resource_metadata, "resource_metadata");
        }
        out
    }

    /// The challenged scopes, split on spaces.
    pub fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref())
    }
}

/// Split a space-separated scope string, dropping empties and duplicates (order kept).
pub(crate) fn split_scopes(scope: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in scope.unwrap_or("").split(' ').filter(|s| !s.is_empty()) {
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    }
    out
}

/// Parse one `WWW-Authenticate` field value into its challenges.
pub fn parse_www_authenticate(input: &str) -> Vec<Challenge> {
    let mut p = Parser {
        s: input.as_bytes(),
        i: 0,
    };
    let mut out = Vec::new();
    loop {
        p.skip_ws_and_commas();
        if p.at_end() {
            break;
        }
        let scheme = p.token();
        if scheme.is_empty() {
            // Not a token: skip one byte and resynchronise on the next comma.
            p.i += 1;
            while !p.at_end() && p.peek() != Some(b',') {
                p.i += 1;
            }
            continue;
        }
        let mut challenge = Challenge {
            scheme,
            params: Vec::new(),
            token68: None,
        };
        p.skip_ws();
        // Parameters, a token68, or nothing.
        loop {
            if p.at_end() {
                break;
            }
            if p.peek() == Some(b',') {
                // Between parameters (or the end of this challenge): look past the comma.
                p.i += 1;
                p.skip_ws_and_commas();
                if !p.next_is_param() {
                    break;
                }
                continue;
            }
            let save = p.i;
            if challenge.params.is_empty() && challenge.token68.is_none() {
                if let Some(t) = p.token68_alone() {
                    challenge.token68 = Some(t);
                    continue;
                }
                p.i = save;
            }
            if !p.next_is_param() {
                // Junk inside the challenge: skip to the next comma.
                while !p.at_end() && p.peek() != Some(b',') {
                    p.i += 1;
                }
                continue;
            }
            let name = p.token().to_ascii_lowercase();
            p.skip_ws();
            p.i += 1; // '='
            p.skip_ws();
            let value = if p.peek() == Some(b'"') {
                p.quoted()
            } else {
                p.token()
            };
            challenge.params.push((name, value));
            p.skip_ws();
        }
        out.push(challenge);
    }
    out
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token68_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~+/".contains(&b)
}

impl Parser<'_> {
    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn skip_ws_and_commas(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b',')) {
            self.i += 1;
        }
    }

    fn token(&mut self) -> String {
        let start = self.i;
        while self.peek().is_some_and(is_tchar) {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    /// At `name BWS "="` not followed by another `=` (which would make it a token68)?
    fn next_is_param(&self) -> bool {
        let mut j = self.i;
        let start = j;
        while self.s.get(j).copied().is_some_and(is_tchar) {
            j += 1;
        }
        if j == start {
            return false;
        }
        while matches!(self.s.get(j), Some(b' ' | b'\t')) {
            j += 1;
        }
        if self.s.get(j) != Some(&b'=') {
            return false;
        }
        self.s.get(j + 1) != Some(&b'=')
    }

    /// A token68 that is the whole credential part: `1*tchar68 *"="` followed by the end
    /// or a comma. Leaves the cursor after it, or returns `None` (cursor unspecified).
    fn token68_alone(&mut self) -> Option<String> {
        let start = self.i;
        while self.peek().is_some_and(is_token68_char) {
            self.i += 1;
        }
        if self.i == start {
            return None;
        }
        while self.peek() == Some(b'=') {
            self.i += 1;
        }
        let end = self.i;
        self.skip_ws();
        if self.at_end() || self.peek() == Some(b',') {
            // `name=value` also matches this shape; only accept it when it is not a param.
            let text = &self.s[start..end];
            let eq = text.iter().position(|&b| b == b'=');
            match eq {
                Some(k) if k + 1 < text.len() && text[k + 1] != b'=' => None,
                _ => Some(String::from_utf8_lossy(text).into_owned()),
            }
        } else {
            None
        }
    }

    fn quoted(&mut self) -> String {
        debug_assert_eq!(self.peek(), Some(b'"'));
        self.i += 1;
        let mut out = Vec::new();
        while let Some(b) = self.peek() {
            self.i += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    if let Some(n) = self.peek() {
                        out.push(n);
                        self.i += 1;
                    }
                }
                _ => out.push(b),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_with_quoted_params() {
        let c = parse_www_authenticate(
            r#"Bearer error="invalid_token", error_description="Missing \"Authorization\" header", scope="a b", resource_metadata="http://x/.well-known/oauth-protected-resource/mcp""#,
        );
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].scheme, "Bearer");
        assert_eq!(c[0].param("error"), Some("invalid_token"));
        assert_eq!(
            c[0].param("error_description"),
            Some(r#"Missing "Authorization" header"#)
        );
        assert_eq!(c[0].param("SCOPE"), Some("a b"));
        let b = BearerChallenge::from_challenges(&c);
        assert_eq!(
            b.resource_metadata.as_deref(),
            Some("http://x/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(b.scopes(), vec!["a", "b"]);
    }

    #[test]
    fn several_challenges_and_token_values() {
        let c = parse_www_authenticate(
            r#"Basic realm="x", Bearer realm=example,error=insufficient_scope , scope="w",DPoP algs="ES256", resource_metadata="u""#,
        );
        let schemes: Vec<&str> = c.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, vec!["Basic", "Bearer", "DPoP"]);
        assert_eq!(c[1].param("realm"), Some("example"));
        assert_eq!(c[1].param("error"), Some("insufficient_scope"));
        let b = BearerChallenge::from_challenges(&c);
        assert_eq!(b.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(b.scope.as_deref(), Some("w"));
        assert_eq!(b.resource_metadata.as_deref(), Some("u"));
        assert!(b.dpop);
    }

    #[test]
    fn token68_and_bare_schemes() {
        let c = parse_www_authenticate("Negotiate abc+/==, Bearer, NTLM");
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].token68.as_deref(), Some("abc+/=="));
        assert!(c[1].params.is_empty());
        assert_eq!(c[2].scheme, "NTLM");
        let c = parse_www_authenticate("Bearer");
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn garbage_never_panics() {
        for s in [
            "",
            ",,,",
            "=",
            "Bearer =",
            "Bearer a=",
            "Bearer a=\"unterminated",
            "Bearer a=\"x\\",
            "\"quoted\"",
            "Bearer a = b , c = \"d\"",
            "Bearer ,, a=b",
            "ü Bearer scope=x",
        ] {
            let _ = parse_www_authenticate(s);
        }
        let c = parse_www_authenticate("Bearer a = b , c = \"d\"");
        assert_eq!(c[0].param("a"), Some("b"));
        assert_eq!(c[0].param("c"), Some("d"));
        let c = parse_www_authenticate("Bearer ,, a=b");
        assert_eq!(c[0].param("a"), Some("b"));
    }

    #[test]
    fn from_headers_merges_fields() {
        let mut h = HeaderMap::new();
        h.append(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer scope=\"a\""),
        );
        h.append(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer resource_metadata=\"m\", scope=\"b\""),
        );
        let b = BearerChallenge::from_headers(&h);
        assert_eq!(b.scope.as_deref(), Some("a"));
        assert_eq!(b.resource_metadata.as_deref(), Some("m"));
    }

    #[test]
    fn scopes_dedup() {
        assert_eq!(split_scopes(Some(" a  b a ")), vec!["a", "b"]);
        assert!(split_scopes(None).is_empty());
    }
}
