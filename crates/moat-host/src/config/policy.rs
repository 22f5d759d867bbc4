//! The `[policy]` table as written in the configuration, before [`Policy::new`](crate::policy::Policy::new)
//! compiles it. Every table refuses unknown keys so a typo is an error, not a silently ignored rule.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// What policy decides about a tool call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Decision {
    /// Forward the call.
    Allow,
    /// Forward the call only with the user's consent.
    #[default]
    Ask,
    /// Refuse the call (and hide the tool when denied outright).
    Deny,
}

impl Decision {
    /// `"allow"`, `"ask"` or `"deny"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not `allow`, `ask` or `deny`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown decision {0:?} (expected allow, ask or deny)")]
pub struct ParseDecisionError(pub String);

impl FromStr for Decision {
    type Err = ParseDecisionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(Decision::Allow),
            "ask" => Ok(Decision::Ask),
            "deny" => Ok(Decision::Deny),
            other => Err(ParseDecisionError(other.to_owned())),
        }
    }
}

/// The `[policy]` table of the configuration.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PolicyConfig {
    /// The decision when no rule matches (default `ask`).
    #[serde(default)]
    pub default: Decision,
    /// `[[policy.rules]]`, evaluated deny → ask → allow.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// `[[policy.rate_limits]]`: token buckets on calls.
    #[serde(default)]
    pub rate_limits: Vec<RateLimitConfig>,
    /// `[[policy.labels]]`: prompt-injection labels, applied in order.
    #[serde(default)]
    pub labels: Vec<LabelConfig>,
    /// `[[policy.requests]]`: what servers may ask of the client (sampling, elicitation,
    /// roots).
    #[serde(default)]
    pub requests: Vec<RequestRuleConfig>,
}

/// One `[[policy.requests]]` entry: what the servers it selects may ask of the client. A
/// kind it does not name is left to other entries (default: allow).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RequestRuleConfig {
    /// Glob(s) on the server name (default: every server).
    #[serde(default)]
    pub server: Option<Globs>,
    /// `sampling/createMessage`: use the client's LLM (`allow`, `ask` a person first, or `deny`).
    #[serde(default)]
    pub sampling: Option<Decision>,
    /// `elicitation/create`: ask the user for input (`allow` or `deny`; the user answers the
    /// form either way).
    #[serde(default)]
    pub elicitation: Option<Decision>,
    /// `roots/list`: learn the client's roots (`allow` or `deny`).
    #[serde(default)]
    pub roots: Option<Decision>,
}

/// One `[[policy.rules]]` entry. It matches a call when every selector it has matches.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RuleConfig {
    /// Shown in verdicts and errors; default `rule N` (1-based).
    #[serde(default)]
    pub name: Option<String>,
    /// What the rule decides when it matches.
    pub decision: Decision,
    /// Glob(s) on the server name.
    #[serde(default)]
    pub server: Option<Globs>,
    /// Glob(s) on the tool's name: its own (`delete_file`) or the one clients see
    /// (`files__delete_file`, under the server's prefix).
    #[serde(default)]
    pub tool: Option<Globs>,
    /// Annotation values the tool must have.
    #[serde(default)]
    pub annotations: Option<AnnotationsConfig>,
    /// Conditions on arguments, by argument name (`"*"`: every string anywhere in the arguments).
    #[serde(default)]
    pub args: BTreeMap<String, ArgCondition>,
    /// Glob(s) on the caller's user name.
    #[serde(default)]
    pub user: Option<Globs>,
    /// Glob(s) on the caller's groups (one must match).
    #[serde(default)]
    pub group: Option<Globs>,
    /// Glob(s) on the scopes of the caller's token (one must match).
    #[serde(default)]
    pub scope: Option<Globs>,
    /// Glob(s) on claims of the caller's token, by claim name (a value must match each).
    #[serde(default)]
    pub claims: BTreeMap<String, Globs>,
}

impl RuleConfig {
    /// A rule that matches every tool of every server.
    pub fn new(decision: Decision) -> Self {
        RuleConfig {
            name: None,
            decision,
            server: None,
            tool: None,
            annotations: None,
            args: BTreeMap::new(),
            user: None,
            group: None,
            scope: None,
            claims: BTreeMap::new(),
        }
    }
}

/// Tool annotation values a rule requires; an absent hint takes the MCP default (see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct AnnotationsConfig {
    /// `readOnlyHint`.
    #[serde(default)]
    pub read_only_hint: Option<bool>,
    /// `destructiveHint`.
    #[serde(default)]
    pub destructive_hint: Option<bool>,
    /// `idempotentHint`.
    #[serde(default)]
    pub idempotent_hint: Option<bool>,
    /// `openWorldHint`.
    #[serde(default)]
    pub open_world_hint: Option<bool>,
}

/// A condition on one argument; every test given must hold.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ArgCondition {
    /// Holds when the path is at or under a match of one of these globs.
    #[serde(default)]
    pub inside: Option<Globs>,
    /// Holds when the path is not at or under a match of any of these globs.
    #[serde(default)]
    pub outside: Option<Globs>,
    /// Holds when the string matches (unanchored).
    #[serde(default)]
    pub regex: Option<String>,
    /// Holds when the string does not match (unanchored).
    #[serde(default)]
    pub not_regex: Option<String>,
    /// Holds when the number is greater than this.
    #[serde(default)]
    pub gt: Option<f64>,
    /// Holds when the number is greater than or equal to this.
    #[serde(default)]
    pub ge: Option<f64>,
    /// Holds when the number is less than this.
    #[serde(default)]
    pub lt: Option<f64>,
    /// Holds when the number is less than or equal to this.
    #[serde(default)]
    pub le: Option<f64>,
    /// Whether the condition holds when the argument is absent, `null` or `[]`.
    #[serde(default)]
    pub if_absent: Option<bool>,
}

/// One `[[policy.rate_limits]]` entry: a token bucket per matching (server, tool).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RateLimitConfig {
    /// Shown in errors; default `rate limit N`.
    #[serde(default)]
    pub name: Option<String>,
    /// Glob(s) on the server name.
    #[serde(default)]
    pub server: Option<Globs>,
    /// Glob(s) on the tool's own name or the one clients see.
    #[serde(default)]
    pub tool: Option<Globs>,
    /// Calls per second (exactly one of the three rates).
    #[serde(default)]
    pub per_second: Option<u32>,
    /// Calls per minute.
    #[serde(default)]
    pub per_minute: Option<u32>,
    /// Calls per hour.
    #[serde(default)]
    pub per_hour: Option<u32>,
    /// Calls allowed at once after a quiet spell; default: the rate's count.
    #[serde(default)]
    pub burst: Option<u32>,
    /// One bucket for every matching tool together instead of one per tool.
    #[serde(default)]
    pub shared: bool,
    /// A bucket per user (each caller its own rate) instead of one for everyone.
    #[serde(default)]
    pub per_user: bool,
}

/// One `[[policy.labels]]` entry: overrides labels of matching tools.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct LabelConfig {
    /// Glob(s) on the server name.
    #[serde(default)]
    pub server: Option<Globs>,
    /// Glob(s) on the tool's own name or the one clients see.
    #[serde(default)]
    pub tool: Option<Globs>,
    /// Results may carry attacker-controlled text.
    #[serde(default)]
    pub untrusted: Option<bool>,
    /// Results may carry private data.
    #[serde(default)]
    pub private: Option<bool>,
    /// Calls can carry data out or change the world.
    #[serde(default)]
    pub sink: Option<bool>,
}

/// Label overrides for every tool of one server; applied after annotations, before
/// `[[policy.labels]]`. `None` leaves a label as it was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustOverride {
    /// Results may carry attacker-controlled text.
    #[serde(default)]
    pub untrusted: Option<bool>,
    /// Results may carry private data.
    #[serde(default)]
    pub private: Option<bool>,
    /// Calls can carry data out or change the world.
    #[serde(default)]
    pub sink: Option<bool>,
}

/// One glob or a list of globs (`tool = "run_*"` or `tool = ["run_*", "exec"]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Globs(pub Vec<String>);

impl From<&str> for Globs {
    fn from(glob: &str) -> Self {
        Globs(vec![glob.to_owned()])
    }
}

impl From<Vec<String>> for Globs {
    fn from(globs: Vec<String>) -> Self {
        Globs(globs)
    }
}

impl<'de> Deserialize<'de> for Globs {
    // By hand rather than an untagged enum, whose error ("did not match any variant") hides what was wrong.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct GlobsVisitor;
        impl<'de> Visitor<'de> for GlobsVisitor {
            type Value = Globs;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a glob string or a list of glob strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Globs, E> {
                Ok(Globs::from(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Globs, A::Error> {
                let mut globs = Vec::new();
                while let Some(glob) = seq.next_element::<String>()? {
                    globs.push(glob);
                }
                Ok(Globs(globs))
            }
        }
        deserializer.deserialize_any(GlobsVisitor)
    }
}
