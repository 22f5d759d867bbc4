//! Keeping secrets out of the store: redaction of arguments, and their canonical digest.
//!
//! An object member is redacted — its whole value, whatever its type, becomes `"[redacted]"` —
//! when its key, lowercased with `-`, `_`, `.` and spaces removed, matches the built-in list:
//!
//! - contains `password`, `passwd`, `passphrase`, `secret`, `apikey`, `privatekey`,
//!   `accesskey`, `credential`, `authorization` or `cookie`;
//! - ends with `token` (`token`, `access_token`, `refreshToken`, … but not `max_tokens`);
//! - is exactly `auth`, `pwd`, `session`, `sessionid` or `sessionkey`;
//!
//! or when the raw key matches one of the configured extra globs (case-insensitive).
//!
//! In every string value (keys kept or not) these spans are replaced by `[redacted]`:
//! `Bearer …`/`Basic …` credentials, OpenAI/Anthropic `sk-…` keys, Stripe `sk_live_…`/`rk_test_…`,
//! GitHub `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_`/`github_pat_` tokens, AWS `AKIA…`/`ASIA…` key ids,
//! Slack `xoxa-`/`xoxb-`/`xoxp-`/`xoxr-`/`xoxs-` tokens, GitLab `glpat-…`, Google `AIza…`,
//! npm `npm_…`, JSON Web Tokens (`eyJ….eyJ….…`), PEM `PRIVATE KEY` blocks, and the password
//! in URLs such as `https://user:password@host`.

use std::borrow::Cow;
use std::sync::LazyLock;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use regex::Regex;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::config::audit::AuditConfig;

/// What a redacted value or span becomes.
pub const REDACTED: &str = "[redacted]";

const KEY_CONTAINS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "apikey",
    "privatekey",
    "accesskey",
    "credential",
    "authorization",
    "cookie",
];
const KEY_ENDS_WITH: &[&str] = &["token"];
const KEY_EXACT: &[&str] = &["auth", "pwd", "session", "sessionid", "sessionkey"];

static TOKENS: LazyLock<Regex> = LazyLock::new(|| {
    let patterns = [
        r"(?i:\b(?:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,})",
        r"\bsk-[A-Za-z0-9_-]{16,}",
        r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
        r"\bgh[pousr]_[A-Za-z0-9]{20,}",
        r"\bgithub_pat_[A-Za-z0-9_]{20,}",
        r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
        r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
        r"\bglpat-[A-Za-z0-9_-]{20,}",
        r"\bAIza[A-Za-z0-9_-]{35,}",
        r"\bnpm_[A-Za-z0-9]{36}",
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        r"(?s:-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\z))",
    ];
    // The patterns are constants, checked by the tests: failing here is a bug in this file.
    Regex::new(&patterns.join("|")).expect("token patterns are valid")
});

static URL_PASSWORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^@\s/]+@").expect("URL pattern is valid")
});

/// Replaces token-looking spans of `text` by [`REDACTED`]; borrows when there are none.
pub(crate) fn scrub_tokens(text: &str) -> Cow<'_, str> {
    match TOKENS.replace_all(text, REDACTED) {
        Cow::Borrowed(b) => URL_PASSWORD.replace_all(b, format!("${{1}}{REDACTED}@")),
        Cow::Owned(o) => Cow::Owned(
            URL_PASSWORD
                .replace_all(&o, format!("${{1}}{REDACTED}@"))
                .into_owned(),
        ),
    }
}

fn is_secret_key(key: &str) -> bool {
    let norm: String = key
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect();
    KEY_CONTAINS.iter().any(|k| norm.contains(k))
        || KEY_ENDS_WITH.iter().any(|k| norm.ends_with(k))
        || KEY_EXACT.contains(&norm.as_str())
}

/// Redacts argument values: the built-in list plus extra key globs. Build once, use per call.
#[derive(Debug, Clone)]
pub struct Redactor {
    globs: GlobSet,
    // Entries that are not valid globs still redact the key they spell (lowercased).
    literals: Vec<String>,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new(&[])
    }
}

// Here rather than with the table: building a redactor is the audit's work, and the
// configuration stays data.
impl AuditConfig {
    /// The redactor for this configuration's extra keys (build it once, use it per call).
    pub fn redactor(&self) -> Redactor {
        Redactor::new(&self.redact)
    }
}

impl Redactor {
    /// A redactor for the built-in list and `extra` key globs (matched case-insensitively).
    pub fn new(extra: &[String]) -> Redactor {
        let mut builder = GlobSetBuilder::new();
        let mut literals = Vec::new();
        for pattern in extra {
            match GlobBuilder::new(pattern).case_insensitive(true).build() {
                Ok(glob) => {
                    builder.add(glob);
                }
                Err(e) => {
                    tracing::warn!(%pattern, error = %e, "audit: redact entry is not a glob, matching it literally");
                    literals.push(pattern.to_lowercase());
                }
            }
        }
        let globs = builder.build().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "audit: cannot combine redact globs, using the built-in list only");
            GlobSet::empty()
        });
        Redactor { globs, literals }
    }

    fn is_redacted_key(&self, key: &str) -> bool {
        is_secret_key(key)
            || self.globs.is_match(key)
            || self.literals.iter().any(|l| *l == key.to_lowercase())
    }

    /// A copy of `args` with secret members and token-looking spans replaced by [`REDACTED`].
    pub fn redact(&self, args: &Value) -> Value {
        match args {
            Value::Object(map) => {
                let out: Map<String, Value> = map
                    .iter()
                    .map(|(k, v)| {
                        let v = if self.is_redacted_key(k) {
                            Value::String(REDACTED.into())
                        } else {
                            self.redact(v)
                        };
                        (k.clone(), v)
                    })
                    .collect();
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.redact(v)).collect()),
            Value::String(s) => Value::String(scrub_tokens(s).into_owned()),
            other => other.clone(),
        }
    }
}

/// A copy of `args` with secrets replaced by `"[redacted]"`: the built-in list (see the module
/// docs) plus `extra` key globs. Prefer a [`Redactor`] built once when redacting many times.
pub fn redact(args: &Value, extra: &[String]) -> Value {
    Redactor::new(extra).redact(args)
}

/// SHA-256 (lowercase hex) of `args` in canonical form: compact JSON, object keys sorted.
pub fn args_digest(args: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(args, &mut canonical);
    let hash = Sha256::digest(canonical.as_bytes());
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(hash.len() * 2);
    for b in hash {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    hex
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_list() {
        for key in [
            "password",
            "DB_PASSWORD",
            "passwd",
            "client_secret",
            "api_key",
            "apiKey",
            "X-Api-Key",
            "Authorization",
            "Cookie",
            "set-cookie",
            "private_key",
            "aws_access_key_id",
            "credentials",
            "token",
            "access_token",
            "refreshToken",
            "session",
            "Session-Id",
            "auth",
        ] {
            assert!(is_secret_key(key), "{key} should be redacted");
        }
        for key in [
            "path",
            "max_tokens",
            "tokenizer",
            "author",
            "query",
            "sessions_dir",
        ] {
            assert!(!is_secret_key(key), "{key} should be kept");
        }
    }

    #[test]
    fn token_values() {
        for secret in [
            "Bearer abcdefghijklmnop",
            "sk-proj-abcdefghijklmnopqrstuvwxyz",
            "sk-ant-api03-abcdefghijklmnop",
            "sk_live_abcdefghijklmnop1234",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "github_pat_11ABCDEFG0123456789_abcdefghij",
            "AKIAIOSFODNN7EXAMPLE",
            "xoxb-1234567890-abcdefghij",
            "glpat-abcdefghijklmnopqrst",
            "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----",
        ] {
            assert_eq!(scrub_tokens(secret), REDACTED, "{secret}");
        }
        assert_eq!(
            scrub_tokens("curl -H 'Authorization: Bearer abcdefghijkl' https://x"),
            "curl -H 'Authorization: [redacted]' https://x"
        );
        assert_eq!(
            scrub_tokens("git clone https://me:hunter2@example.com/r.git"),
            "git clone https://me:[redacted]@example.com/r.git"
        );
        for plain in [
            "scikit-learn",
            "sk-short",
            "AKIA",
            "the bearer of bad news",
            "ask-me",
        ] {
            assert!(matches!(scrub_tokens(plain), Cow::Borrowed(_)), "{plain}");
        }
    }

    #[test]
    fn extra_globs_and_literals() {
        let r = Redactor::new(&["customer_*".into(), "X-Tenant".into(), "bad[".into()]);
        let out = r.redact(&json!({"Customer_Name": "a", "x-tenant": "b", "BAD[": "c", "ok": "d"}));
        assert_eq!(
            out,
            json!({"Customer_Name": REDACTED, "x-tenant": REDACTED, "BAD[": REDACTED, "ok": "d"})
        );
    }

    #[test]
    fn canonical_form() {
        let mut s = String::new();
        write_canonical(
            &json!({"b": [1, {"d": null, "c": "x\"y"}], "a": true}),
            &mut s,
        );
        assert_eq!(s, r#"{"a":true,"b":[1,{"c":"x\"y","d":null}]}"#);
        // Known vector: sha256 of "{}".
        assert_eq!(
            args_digest(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}
