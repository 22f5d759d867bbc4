//! Who a call comes from, as policy sees it ([`Who`]), and the `user`, `group`, `scope`
//! and `claims` conditions of a rule that test it ([`WhoMatch`]).
//!
//! A caller is what the transport vouched for: over HTTP with `[auth]`, the access token
//! (the user is the configured claim, `sub` by default; the groups are the groups claim);
//! over stdio, the local OS user. A rule with identity conditions matches only a caller
//! who satisfies every one of them, so it never matches a caller nobody vouched for (HTTP
//! with a static token): "deny bob" does not deny the anonymous, and "allow admins" does
//! not allow them.

use serde_json::{Map, Value};

use super::select::{NameGlobs, PolicyError, name_globs};
use crate::config::policy::RuleConfig;

/// A caller, as policy rules test it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Who {
    /// The user's name (the configured user claim, else the subject).
    pub user: Option<String>,
    /// The groups they belong to.
    pub groups: Vec<String>,
    /// The scopes their token grants.
    pub scopes: Vec<String>,
    /// The claims kept from their token.
    pub claims: Map<String, Value>,
}

impl Who {
    /// A caller named `user`, in `groups`, with nothing else known.
    pub fn user(user: &str, groups: &[&str]) -> Who {
        Who {
            user: Some(user.to_owned()),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..Who::default()
        }
    }

    /// The caller an identity describes: its user from `user_claim` (falling back on the
    /// subject), its groups from `groups_claim`.
    pub fn of(identity: &moat::transport::Identity, user_claim: &str, groups_claim: &str) -> Who {
        let user = match user_claim {
            "sub" => identity.subject.clone(),
            claim => identity
                .claim_strings(claim)
                .first()
                .map(|s| (*s).to_owned())
                .or_else(|| identity.subject.clone()),
        };
        Who {
            user,
            groups: identity
                .claim_strings(groups_claim)
                .into_iter()
                .map(str::to_owned)
                .collect(),
            scopes: identity.scopes.clone(),
            claims: identity.claims.clone(),
        }
    }

    /// The strings of claim `name`: one string, or those of a list.
    fn claim(&self, name: &str) -> Vec<&str> {
        match self.claims.get(name) {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        }
    }
}

/// A rule's identity conditions; an absent one holds for everyone.
#[derive(Debug, Default)]
pub(crate) struct WhoMatch {
    user: Option<NameGlobs>,
    group: Option<NameGlobs>,
    scope: Option<NameGlobs>,
    claims: Vec<(String, NameGlobs)>,
}

impl WhoMatch {
    pub(crate) fn new(label: &str, c: &RuleConfig) -> Result<WhoMatch, PolicyError> {
        let globs = |field: &str, g: &Option<crate::config::policy::Globs>| {
            g.as_ref().map(|g| name_globs(label, field, g)).transpose()
        };
        Ok(WhoMatch {
            user: globs("user", &c.user)?,
            group: globs("group", &c.group)?,
            scope: globs("scope", &c.scope)?,
            claims: c
                .claims
                .iter()
                .map(|(k, g)| Ok((k.clone(), name_globs(label, &format!("claims.{k}"), g)?)))
                .collect::<Result<_, PolicyError>>()?,
        })
    }

    /// Whether the rule has no identity condition.
    pub(crate) fn is_empty(&self) -> bool {
        self.user.is_none()
            && self.group.is_none()
            && self.scope.is_none()
            && self.claims.is_empty()
    }

    /// Whether `who` satisfies every condition: the user matches a `user` glob, one of
    /// the groups a `group` glob, one of the scopes a `scope` glob, and for each claim one
    /// of its values a glob of it. Nobody (`None`) satisfies any condition.
    pub(crate) fn matches(&self, who: Option<&Who>) -> bool {
        if self.is_empty() {
            return true;
        }
        let Some(who) = who else {
            return false;
        };
        fn any(globs: &Option<NameGlobs>, values: &[String]) -> bool {
            globs
                .as_ref()
                .is_none_or(|g| values.iter().any(|v| g.set.is_match(v)))
        }
        any(&self.user, who.user.as_slice())
            && any(&self.group, &who.groups)
            && any(&self.scope, &who.scopes)
            && self
                .claims
                .iter()
                .all(|(name, g)| who.claim(name).iter().any(|v| g.set.is_match(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Decision, Policy, PolicyConfig, ToolRef};

    fn policy(toml: &str) -> Policy {
        #[derive(serde::Deserialize)]
        struct File {
            policy: PolicyConfig,
        }
        let file: File = toml::from_str(toml).unwrap();
        Policy::new(&file.policy).unwrap()
    }

    #[test]
    fn identity_rules_match_whom_they_name_and_never_nobody() {
        let p = policy(
            r#"[policy]
default = "deny"
[[policy.rules]]
decision = "allow"
tool = "query"
group = ["analysts", "admins"]
[[policy.rules]]
name = "no-bob"
decision = "deny"
user = "bob"
"#,
        );
        let query = ToolRef::new("db", "query");
        let args = serde_json::Map::new();
        let alice = Who::user("alice", &["analysts"]);
        let bob = Who::user("bob", &["admins"]);
        let eve = Who::user("eve", &["sales"]);
        assert_eq!(
            p.evaluate_as(&query, Some(&args), Some(&alice)).decision,
            Decision::Allow
        );
        assert_eq!(
            p.evaluate_as(&query, Some(&args), Some(&bob)).rule,
            "rule 2 (no-bob)"
        );
        assert_eq!(
            p.evaluate_as(&query, Some(&args), Some(&eve)).decision,
            Decision::Deny
        );
        // Nobody vouched for: identity rules neither allow nor deny them.
        assert_eq!(p.evaluate(&query, Some(&args)).rule, "default");
        // Listing: for a caller, the same predicate as their calls; for anyone, what
        // some caller could get.
        assert!(p.visible_to(&query, Some(&alice)));
        assert!(!p.visible_to(&query, Some(&bob)));
        assert!(!p.visible_to(&query, None));
        assert!(p.visible(&query));
        assert!(!p.visible(&ToolRef::new("db", "drop")));
        assert!(p.has_identity_rules());
    }

    #[test]
    fn claims_and_scopes_of_a_token() {
        let p = policy(
            r#"[policy]
default = "allow"
[[policy.rules]]
decision = "deny"
scope = "read:*"
claims = { dept = "sales*", tier = "free" }
"#,
        );
        let t = ToolRef::new("s", "t");
        let args = serde_json::Map::new();
        let mut who = Who::user("u", &[]);
        who.scopes = vec!["read:all".into()];
        who.claims
            .insert("dept".into(), serde_json::json!(["eng", "sales-emea"]));
        assert_eq!(
            p.evaluate_as(&t, Some(&args), Some(&who)).decision,
            Decision::Allow
        );
        who.claims.insert("tier".into(), serde_json::json!("free"));
        assert_eq!(
            p.evaluate_as(&t, Some(&args), Some(&who)).decision,
            Decision::Deny
        );
        who.scopes = vec!["write:all".into()];
        assert_eq!(
            p.evaluate_as(&t, Some(&args), Some(&who)).decision,
            Decision::Allow
        );
    }

    #[test]
    fn who_of_an_identity_follows_the_configured_claims() {
        let mut id =
            moat::transport::Identity::new(Some("https://idp".into()), Some("u-123".into()));
        id.claims
            .insert("preferred_username".into(), serde_json::json!("alice"));
        id.claims.insert("roles".into(), serde_json::json!(["ops"]));
        let who = Who::of(&id, "preferred_username", "roles");
        assert_eq!(who.user.as_deref(), Some("alice"));
        assert_eq!(who.groups, ["ops"]);
        assert_eq!(Who::of(&id, "sub", "groups").user.as_deref(), Some("u-123"));
        assert_eq!(
            Who::of(&id, "email", "groups").user.as_deref(),
            Some("u-123")
        );
    }
}
