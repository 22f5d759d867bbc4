//! Who made a request: the caller a transport vouches for, handed with each request to
//! whoever answers it.
//!
//! Over HTTP with an OAuth issuer configured it is what the access token says (the
//! resource server in `http::server` produces it); over stdio it is the local OS user the
//! process runs as, since whoever can write to our stdin already runs as that user.

use std::sync::Arc;

use serde_json::{Map, Value};

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Identity {
    /// The issuer that vouched for it; `None` for the local OS user.
    pub issuer: Option<String>,
    /// The user (`sub` of a token, the OS user name over stdio), if known.
    pub subject: Option<String>,
    /// The client the token was issued to (`client_id`, or `azp`).
    pub client_id: Option<String>,
    /// The scopes granted (none for the local OS user, who needs none).
    pub scopes: Vec<String>,
    /// The token claims asked for (`ResourceOptions::claims`), those present.
    pub claims: Map<String, Value>,
    /// The access token the request carried, when a resource server validated one: what a
    /// gateway exchanges (RFC 8693) for a token of its own to a server behind it. It is
    /// never to be sent on as it is.
    pub access_token: Option<AccessToken>,
}

/// A caller's access token, as validated: its `Debug` shows no part of it, so it cannot
/// end up in a log by way of the identity that carries it.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(Arc<str>);

impl AccessToken {
    /// The token `value`.
    pub fn new(value: &str) -> AccessToken {
        AccessToken(Arc::from(value))
    }

    /// The token itself, for the one request that needs it (a token exchange).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken(<redacted>)")
    }
}

impl Identity {
    /// An identity for `subject` vouched for by `issuer` (for tests and custom transports).
    pub fn new(issuer: Option<String>, subject: Option<String>) -> Identity {
        Identity {
            issuer,
            subject,
            ..Identity::default()
        }
    }

    /// The OS user this process runs as: the name `/etc/passwd` gives its uid, else the uid
    /// itself as text (an `$USER` the environment sets could name anyone).
    pub fn local_user() -> Identity {
        let uid = rustix::process::getuid().as_raw();
        let name = std::fs::read_to_string("/etc/passwd")
            .ok()
            .and_then(|passwd| user_of(&passwd, uid))
            .unwrap_or_else(|| uid.to_string());
        Identity::new(None, Some(name))
    }

    /// Whether the token granted `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// The string values of claim `name`: one string, or the strings of a list (how
    /// issuers send `groups` and `roles`).
    pub fn claim_strings(&self, name: &str) -> Vec<&str> {
        match self.claims.get(name) {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        }
    }
}

/// A shared identity, as requests carry it.
pub type SharedIdentity = Arc<Identity>;

/// The name of `uid` in a passwd file's text.
fn user_of(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let _password = fields.next()?;
        let id: u32 = fields.next()?.parse().ok()?;
        (id == uid && !name.is_empty()).then(|| name.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_lookup() {
        let passwd =
            "root:x:0:0:root:/root:/bin/sh\n# comment\nalice:x:1000:1000::/home/a:/bin/sh\n";
        assert_eq!(user_of(passwd, 1000).as_deref(), Some("alice"));
        assert_eq!(user_of(passwd, 0).as_deref(), Some("root"));
        assert_eq!(user_of(passwd, 7), None);
    }

    #[test]
    fn claim_strings_of_a_string_or_a_list() {
        let mut id = Identity::default();
        id.claims
            .insert("groups".into(), serde_json::json!(["a", 1, "b"]));
        id.claims.insert("role".into(), serde_json::json!("admin"));
        assert_eq!(id.claim_strings("groups"), ["a", "b"]);
        assert_eq!(id.claim_strings("role"), ["admin"]);
        assert!(id.claim_strings("none").is_empty());
    }

    #[test]
    fn local_user_has_a_subject() {
        let me = Identity::local_user();
        assert!(me.subject.is_some_and(|s| !s.is_empty()));
        assert_eq!(me.issuer, None);
    }
}
