//! Policy: which tools are visible and callable, decided deny → ask → allow; rate limits per
//! tool; and the labels that prompt-injection containment reads.
//!
//! One predicate serves both `tools/list` and `tools/call`: [`Policy::visible`] is
//! [`Policy::evaluate`] without arguments, so a tool hidden from the listing is always denied
//! when called.
//!
//! # Configuration
//!
//! ```toml
//! [policy]
//! default = "ask"                      # allow | ask | deny, when no rule matches (default: ask)
//!
//! [[policy.rules]]
//! name = "no-shell"                    # optional; default "rule N" (1-based)
//! decision = "deny"
//! server = "exec"                      # glob or list of globs on the server name (optional)
//! tool = ["run_*", "spawn"]            # glob(s) on the tool's name: its own or exec__run_… (optional)
//!
//! [[policy.rules]]
//! name = "destructive-asks"
//! decision = "ask"
//! annotations = { destructiveHint = true }   # readOnlyHint, destructiveHint, idempotentHint, openWorldHint
//!
//! [[policy.rules]]
//! name = "confine-fs"
//! decision = "deny"
//! server = "fs"
//! [policy.rules.args]                  # every condition must hold for the rule to match
//! path = { outside = ["/home/*/project/**", "/tmp"] }
//!
//! [[policy.rules]]
//! name = "no-drop"
//! decision = "deny"
//! server = "sqlite"
//! args = { query = { regex = "(?i)\\bdrop\\b" } }
//!
//! [[policy.rules]]
//! name = "small-pages"
//! decision = "deny"
//! args = { count = { gt = 100 } }      # gt, ge, lt, le: the rule matches when the comparison holds
//!
//! [[policy.rules]]
//! name = "read-project"
//! decision = "allow"
//! server = "fs"
//! tool = "read_*"
//! args = { path = { inside = "/home/*/project" } }
//!
//! [[policy.rate_limits]]
//! name = "fetch"                       # optional; default "rate limit N"
//! server = "fetch"                     # globs as in rules, both optional
//! tool = "*"
//! per_minute = 30                      # exactly one of per_second, per_minute, per_hour
//! burst = 10                           # optional: calls at once after a quiet spell (default: the count)
//! shared = false                       # optional: true = one bucket for all matching tools
//!
//! [[policy.requests]]                  # what servers may ask of the client
//! server = "web*"                      # glob(s) on the server name (optional)
//! sampling = "ask"                     # allow | ask | deny: use the client's LLM
//! elicitation = "deny"                 # allow | deny: ask the user for input
//! roots = "allow"                      # allow | deny: learn the client's roots
//!
//! [[policy.labels]]                    # prompt-injection labels, see below
//! server = "fetch"
//! tool = "*"
//! untrusted = true                     # and/or private, sink
//! ```
//!
//! # Rules
//!
//! A rule matches a tool when each selector it has matches: `server` and `tool` globs,
//! `annotations`, and every `args` condition. A `tool` glob matches the tool's own name on its
//! server (`delete_file`) or the name clients see (`files__delete_file`, or the server's
//! configured `prefix` and the tool's name), so a rule written either way does what it says:
//! `tool = "files__delete_file"` and `server = "files", tool = "delete_file"` select the same
//! tool. Because both names are tried, `tool = "git*"` also selects every tool of a server
//! whose name starts with `git`; give `server` to narrow it. The same holds for rate limits
//! and labels.
//!
//! A `server` or `tool` glob that selects nothing is almost always a typo, and a deny rule with
//! a typo denies nothing: [`Policy::unmatched_servers`] and [`Policy::unmatched_tools`] find
//! them (with the closest names), and the gateway reports them at start and in
//! `moat gateway --check`. Evaluation: if any matching rule denies, the call is denied; else if any asks,
//! it asks; else if any allows, it is allowed; else `default`. The verdict names the first rule of
//! the winning kind.
//!
//! An `annotations` selector compares effective hints: an absent hint takes the MCP default
//! (`readOnlyHint` false, `destructiveHint` true unless `readOnlyHint` is true, `idempotentHint`
//! false, `openWorldHint` true), so `{ destructiveHint = true }` also catches tools that say nothing.
//! Annotations come from the server and are only as trustworthy as it is.
//!
//! # Argument conditions
//!
//! `args` maps an argument name to tests, all of which must hold:
//! - `inside` / `outside` (glob or list): the value is an absolute path, normalised lexically
//!   first (`/a/b/../../etc` is `/etc`, so `..` cannot walk out). A path is inside a glob when it
//!   or one of its ancestors matches it: `/p`, `/p/` and `/p/**` all mean `/p` and everything under
//!   it. `*` does not cross `/`; `**` does; a glob must start with `/` or `**`. Symlinks are not
//!   resolved: that is the sandbox's job.
//! - `regex` / `not_regex`: the value is a string; the regex is unanchored (use `^…$`).
//! - `gt`, `ge`, `lt`, `le`: the value is a number (or a string holding one, since servers
//!   coerce). Each holds when the comparison does, so "deny when count > 100" is
//!   `{ gt = 100 }` on a deny rule and "allow 1 to 10" is `{ ge = 1, le = 10 }` on an allow rule.
//!
//! The key `"*"` applies the condition to every string anywhere in the arguments (e.g. a regex
//! against injected instructions); it cannot carry numeric bounds.
//!
//! Values policy cannot read are decided on the safe side. A deny or ask rule is *restrictive*: it
//! matches an array when **any** element satisfies the condition, and treats a value it cannot
//! read (a relative path, a non-string, a non-number) as satisfying it. An allow rule needs
//! **every** element to satisfy it and never matches on an unreadable value. So a relative path
//! is never proven `inside`, and is caught by a deny with `outside` or with `inside`.
//!
//! An argument that is absent, `null` or `[]` satisfies only the negative tests: a condition made
//! of `outside` and/or `not_regex` holds (a deny rule confining `path` catches a call that leaves
//! `path` out, since the server would then pick a path policy never saw), any other condition does
//! not (a deny on `query` matching `drop` has nothing to find when there is no query, and an allow
//! needs the value it vouches for). `if_absent = true | false` on a condition overrides this, for
//! a tool whose missing argument has a known harmless default.
//!
//! Listing (no arguments): rules with `args` cannot be decided and are skipped, except that when
//! no unconditional rule matches, a matching conditional allow (or ask) rule stands in for a more
//! restrictive default — the tool is listed when some call to it could go through. A tool that is
//! not visible is therefore denied for every argument.
//!
//! # Requests from servers
//!
//! A server may ask the client, while it handles a call, for an LLM completion
//! (`sampling`), for the user's input (`elicitation`) or for its roots (`roots`). Each
//! `[[policy.requests]]` entry that selects the server and names the kind has its say;
//! deny beats ask beats allow, and with no say the request is allowed. The gateway offers
//! a server only what it may ask. `ask` (sampling only) puts the request to a person first,
//! as for a tool call.
//!
//! # Rate limits
//!
//! Each `[[policy.rate_limits]]` entry is a token bucket per (entry, server, tool) — or one bucket
//! for all its tools with `shared = true`. A call takes one token from every bucket it falls in;
//! if any is empty, none is taken and [`RateLimited`] says when to retry.
//!
//! # Labels
//!
//! [`Labels`] feed containment of "private data + untrusted content + exfiltration". They are
//! worked out in this order, each step overriding the last:
//! 1. annotations: `openWorldHint = true` → untrusted source and sink (it talks to the outside
//!    world: what it returns may be attacker text, what it is sent can leave); `readOnlyHint` not
//!    true, or `destructiveHint = true` → sink. Only an explicit `openWorldHint = true` marks a
//!    source untrusted (most servers do not annotate, and marking every tool would make containment
//!    fire always); nothing infers private data.
//! 2. the per-server [`TrustOverride`] from the server's configuration;
//! 3. `[[policy.labels]]` entries that match the tool, in file order (the last one wins).

mod args;
mod explain;
pub(crate) mod rate;
mod select;
mod unmatched;
mod who;

use std::cell::OnceCell;
use std::collections::HashMap;
use std::time::Instant;

use moat_protocol::types::ToolAnnotations;
use serde_json::{Map, Value};

pub use crate::config::policy::{
    AnnotationsConfig, ArgCondition, Decision, Globs, LabelConfig, ParseDecisionError,
    PolicyConfig, RateLimitConfig, RequestRuleConfig, RuleConfig, TrustOverride,
};
pub use rate::RateLimited;
use select::{NameGlobs, Named, Selector, item_label, name_globs};
pub use select::{PolicyError, ToolRef};
pub use unmatched::{Unmatched, unmatched_names};
pub use who::Who;
use who::WhoMatch;

use args::ArgRule;
use rate::RateLimiter;

/// A decision and the rule that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verdict {
    /// The decision.
    pub decision: Decision,
    /// `rule 3 (no-shell)`, `rule 2`, or `default`.
    pub rule: String,
}

/// Labels of a tool for prompt-injection containment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Labels {
    /// Its results may carry attacker-controlled text.
    pub untrusted_source: bool,
    /// Its results may carry private data.
    pub private_data: bool,
    /// A call to it can carry data out or change the world.
    pub sink: bool,
}

impl Labels {
    fn from_annotations(annotations: Option<&ToolAnnotations>) -> Self {
        let hint = |get: fn(&ToolAnnotations) -> Option<bool>| annotations.and_then(get);
        let open_world = hint(|a| a.open_world_hint) == Some(true);
        Labels {
            untrusted_source: open_world,
            private_data: false,
            sink: open_world
                || hint(|a| a.read_only_hint) != Some(true)
                || hint(|a| a.destructive_hint) == Some(true),
        }
    }

    fn apply(&mut self, untrusted: Option<bool>, private: Option<bool>, sink: Option<bool>) {
        self.untrusted_source = untrusted.unwrap_or(self.untrusted_source);
        self.private_data = private.unwrap_or(self.private_data);
        self.sink = sink.unwrap_or(self.sink);
    }
}

/// Annotation values a rule requires, compared with the tool's effective hints.
#[derive(Debug, Default)]
struct AnnotationMatch(AnnotationsConfig);

impl AnnotationMatch {
    fn matches(&self, annotations: Option<&ToolAnnotations>) -> bool {
        let hint = |get: fn(&ToolAnnotations) -> Option<bool>| annotations.and_then(get);
        let read_only = hint(|a| a.read_only_hint).unwrap_or(false);
        let effective = [
            (self.0.read_only_hint, read_only),
            (
                self.0.destructive_hint,
                hint(|a| a.destructive_hint).unwrap_or(!read_only),
            ),
            (
                self.0.idempotent_hint,
                hint(|a| a.idempotent_hint).unwrap_or(false),
            ),
            (
                self.0.open_world_hint,
                hint(|a| a.open_world_hint).unwrap_or(true),
            ),
        ];
        effective
            .iter()
            .all(|(wanted, actual)| wanted.is_none_or(|w| w == *actual))
    }
}

#[derive(Debug)]
struct Rule {
    label: String,
    decision: Decision,
    selector: Selector,
    annotations: AnnotationMatch,
    args: Vec<ArgRule>,
    who: WhoMatch,
}

impl Rule {
    fn new(index: usize, c: &RuleConfig) -> Result<Self, PolicyError> {
        let label = item_label("rule", index, c.name.as_deref());
        let args = c
            .args
            .iter()
            .map(|(key, cond)| ArgRule::new(&label, key, cond))
            .collect::<Result<_, _>>()?;
        Ok(Rule {
            selector: Selector::new(&label, c.server.as_ref(), c.tool.as_ref())?,
            decision: c.decision,
            annotations: AnnotationMatch(c.annotations.unwrap_or_default()),
            args,
            who: WhoMatch::new(&label, c)?,
            label,
        })
    }

    /// Whether the rule is about this tool, arguments aside.
    fn selects(&self, tool: &Named) -> bool {
        self.selector.matches(tool) && self.annotations.matches(tool.tool.annotations)
    }

    fn args_hold(&self, args: &Map<String, Value>) -> bool {
        let restrictive = self.decision != Decision::Allow;
        self.args.iter().all(|a| a.holds(args, restrictive))
    }

    fn verdict(&self) -> Verdict {
        Verdict {
            decision: self.decision,
            rule: self.label.clone(),
        }
    }
}

#[derive(Debug)]
struct LabelRule {
    label: String,
    selector: Selector,
    untrusted: Option<bool>,
    private: Option<bool>,
    sink: Option<bool>,
}

/// A compiled policy. Cheap to share: evaluation takes `&self`, and rate buckets sit behind a
/// mutex.
#[derive(Debug)]
pub struct Policy {
    default: Decision,
    rules: Vec<Rule>,
    rates: RateLimiter,
    labels: Vec<LabelRule>,
    requests: Vec<RequestRule>,
    /// The configured servers and what their tools' names start with towards the client
    /// (see [`Policy::with_servers`]); a server not here has the default, `NAME__`.
    prefixes: HashMap<String, String>,
    /// The configured servers in configuration order, for [`Policy::unmatched_servers`];
    /// `None` when the policy was built without them.
    servers: Option<Vec<String>>,
}

/// What a server may ask of the client: one `[[policy.requests]]` entry, compiled.
#[derive(Debug)]
struct RequestRule {
    name: String,
    server: Option<NameGlobs>,
    decisions: [Option<Decision>; 3],
}

/// Something a server asks of the client, for [`Policy::request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestKind {
    /// `sampling/createMessage`.
    Sampling,
    /// `elicitation/create`.
    Elicitation,
    /// `roots/list`.
    Roots,
}

impl RequestKind {
    fn index(self) -> usize {
        match self {
            RequestKind::Sampling => 0,
            RequestKind::Elicitation => 1,
            RequestKind::Roots => 2,
        }
    }

    /// The key in `[[policy.requests]]`, and the audit record's kind.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Sampling => "sampling",
            RequestKind::Elicitation => "elicitation",
            RequestKind::Roots => "roots",
        }
    }
}

impl Default for Policy {
    /// No rules, no limits, no label overrides; every call asks.
    fn default() -> Self {
        Policy {
            default: Decision::Ask,
            rules: Vec::new(),
            rates: RateLimiter::default(),
            labels: Vec::new(),
            requests: Vec::new(),
            prefixes: HashMap::new(),
            servers: None,
        }
    }
}

impl Policy {
    /// Compiles the `[policy]` table; errors name the entry and the key.
    pub fn new(cfg: &PolicyConfig) -> Result<Policy, PolicyError> {
        let rules = cfg
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| Rule::new(i, r))
            .collect::<Result<_, _>>()?;
        let labels = cfg
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let label = item_label("label", i, None);
                Ok(LabelRule {
                    selector: Selector::new(&label, l.server.as_ref(), l.tool.as_ref())?,
                    label,
                    untrusted: l.untrusted,
                    private: l.private,
                    sink: l.sink,
                })
            })
            .collect::<Result<_, PolicyError>>()?;
        let requests = cfg
            .requests
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let name = item_label("request rule", i, None);
                for (key, decision) in [("elicitation", r.elicitation), ("roots", r.roots)] {
                    if decision == Some(Decision::Ask) {
                        return Err(PolicyError::Invalid {
                            item: name.clone(),
                            field: key.to_owned(),
                            reason: format!(
                                "{key} is allow or deny: the user answers an elicitation form, \
                                 and roots are the client's to give"
                            ),
                        });
                    }
                }
                Ok(RequestRule {
                    server: r
                        .server
                        .as_ref()
                        .map(|g| name_globs(&name, "server", g))
                        .transpose()?,
                    name,
                    decisions: [r.sampling, r.elicitation, r.roots],
                })
            })
            .collect::<Result<_, PolicyError>>()?;
        Ok(Policy {
            default: cfg.default,
            rules,
            rates: RateLimiter::new(&cfg.rate_limits)?,
            labels,
            requests,
            prefixes: HashMap::new(),
            servers: None,
        })
    }

    /// Compiles `config`'s `[policy]` for its servers: `tool` globs then also match the
    /// names clients see under each server's `prefix`, and globs that select no configured
    /// server can be found ([`Policy::unmatched_servers`]).
    pub fn for_config(config: &crate::config::Config) -> Result<Policy, PolicyError> {
        Ok(Policy::new(&config.policy)?.with_servers(
            config
                .servers
                .iter()
                .map(|s| (s.name.clone(), s.exposed_prefix())),
        ))
    }

    /// The configured servers, in order, with what their tools' names start with towards
    /// the client (`fs__` by default, or the server's `prefix`).
    pub fn with_servers(mut self, servers: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut names = Vec::new();
        for (name, prefix) in servers {
            names.push(name.clone());
            self.prefixes.insert(name, prefix);
        }
        self.servers = Some(names);
        self
    }

    fn named<'a>(&'a self, tool: &'a ToolRef<'a>) -> Named<'a> {
        Named {
            tool,
            prefixes: &self.prefixes,
            exposed: OnceCell::new(),
        }
    }

    /// The name clients see for `tool` (`server__tool`, or the server's prefix and the
    /// tool's name).
    pub fn exposed_name(&self, tool: &ToolRef) -> String {
        self.named(tool).exposed().to_owned()
    }

    /// What `server` may ask of the client: deny → ask → allow over the
    /// `[[policy.requests]]` entries that select it and name `kind`; allow when none does.
    pub fn request(&self, server: &str, kind: RequestKind) -> Verdict {
        let mut found: Option<(Decision, &str)> = None;
        for rule in &self.requests {
            if !rule.server.as_ref().is_none_or(|g| g.set.is_match(server)) {
                continue;
            }
            let Some(decision) = rule.decisions[kind.index()] else {
                continue;
            };
            let stricter = match found {
                None => true,
                Some((d, _)) => rank(decision) > rank(d),
            };
            if stricter {
                found = Some((decision, &rule.name));
            }
        }
        match found {
            Some((decision, rule)) => Verdict {
                decision,
                rule: rule.to_owned(),
            },
            None => Verdict {
                decision: Decision::Allow,
                rule: "default".to_owned(),
            },
        }
    }

    /// The decision when no rule matches.
    pub fn default_decision(&self) -> Decision {
        self.default
    }

    /// Decides deny → ask → allow → default.
    ///
    /// `args: None` is a listing: rules with argument conditions cannot be decided and are
    /// skipped, save that a conditional allow/ask rule may stand in for a stricter default (see
    /// the module doc), so the verdict is the most a call could get. `args: Some` is a call and
    /// every rule applies; a call that sent no arguments must pass an empty map, never `None`.
    ///
    /// The caller is nobody in particular: rules with identity conditions do not match
    /// (see [`evaluate_as`](Self::evaluate_as)).
    pub fn evaluate(&self, tool: &ToolRef, args: Option<&Map<String, Value>>) -> Verdict {
        self.decide(tool, args, Caller::Is(None))
    }

    /// [`evaluate`](Self::evaluate) for the call or listing of `who`: rules with `user`,
    /// `group`, `scope` or `claims` conditions match when `who` satisfies them all.
    pub fn evaluate_as(
        &self,
        tool: &ToolRef,
        args: Option<&Map<String, Value>>,
        who: Option<&Who>,
    ) -> Verdict {
        self.decide(tool, args, Caller::Is(who))
    }

    fn decide(&self, tool: &ToolRef, args: Option<&Map<String, Value>>, caller: Caller) -> Verdict {
        let mut ask = None;
        let mut allow = None;
        let mut could_ask = None;
        let mut could_allow = None;
        let named = self.named(tool);
        for rule in self.rules.iter().filter(|r| r.selects(&named)) {
            // For anyone at all, who the caller is cannot be decided: such a rule is like
            // one on arguments in a listing.
            let undecided_who = match caller {
                Caller::Anyone => !rule.who.is_empty(),
                Caller::Is(who) if !rule.who.matches(who) => continue,
                Caller::Is(_) => false,
            };
            match args {
                Some(args) if !rule.args_hold(args) => continue,
                None if !rule.args.is_empty() || undecided_who => {
                    match rule.decision {
                        Decision::Allow => could_allow.get_or_insert(rule),
                        Decision::Ask => could_ask.get_or_insert(rule),
                        Decision::Deny => continue,
                    };
                    continue;
                }
                _ => {}
            }
            match rule.decision {
                Decision::Deny => return rule.verdict(),
                Decision::Ask => ask.get_or_insert(rule),
                Decision::Allow => allow.get_or_insert(rule),
            };
        }
        if let Some(rule) = ask.or(allow) {
            return rule.verdict();
        }
        let default = Verdict {
            decision: self.default,
            rule: "default".to_owned(),
        };
        match (self.default, could_allow, could_ask) {
            (Decision::Allow, _, _) => default,
            (_, Some(rule), _) => rule.verdict(),
            (Decision::Ask, _, _) => default,
            (_, _, Some(rule)) => rule.verdict(),
            _ => default,
        }
    }

    /// Whether the tool may be listed to someone: some call to it by some caller is not
    /// denied. Rules with identity conditions count as they might, like rules on
    /// arguments; what one caller sees is [`visible_to`](Self::visible_to).
    pub fn visible(&self, tool: &ToolRef) -> bool {
        self.decide(tool, None, Caller::Anyone).decision != Decision::Deny
    }

    /// Whether `tools/list` shows the tool to `who`: some call of theirs to it is not
    /// denied (the same predicate as their calls, without arguments).
    pub fn visible_to(&self, tool: &ToolRef, who: Option<&Who>) -> bool {
        self.evaluate_as(tool, None, who).decision != Decision::Deny
    }

    /// Whether any rule tests who the caller is (then listings differ between callers).
    pub fn has_identity_rules(&self) -> bool {
        self.rules.iter().any(|r| !r.who.is_empty())
    }

    /// Takes a token for one call from every rate limit the tool falls in.
    pub fn check_rate(&self, tool: &ToolRef) -> Result<(), RateLimited> {
        self.rates.check(&self.named(tool), None, Instant::now())
    }

    /// [`check_rate`](Self::check_rate) for a call of `user` (limits with `per_user` keep
    /// a bucket per user).
    pub fn check_rate_for(&self, tool: &ToolRef, user: Option<&str>) -> Result<(), RateLimited> {
        self.rates.check(&self.named(tool), user, Instant::now())
    }

    /// The rate-limit buckets a call of `tool` by `user` takes a token from, for a shared
    /// store ([`crate::store::rate`]), which takes them instead of this process.
    pub(crate) fn shared_buckets_for(
        &self,
        tool: &ToolRef,
        user: Option<&str>,
    ) -> Vec<rate::SharedBucket> {
        self.rates.shared_buckets(&self.named(tool), user)
    }

    /// [`check_rate`](Self::check_rate) at a given instant, for callers (and tests) with their
    /// own clock. Instants earlier than one already seen count as that one.
    pub fn check_rate_at(&self, tool: &ToolRef, now: Instant) -> Result<(), RateLimited> {
        self.rates.check(&self.named(tool), None, now)
    }

    /// [`check_rate_for`](Self::check_rate_for) at a given instant.
    pub fn check_rate_for_at(
        &self,
        tool: &ToolRef,
        user: Option<&str>,
        now: Instant,
    ) -> Result<(), RateLimited> {
        self.rates.check(&self.named(tool), user, now)
    }

    /// The tool's labels: annotations, then `server_trust`, then matching `[[policy.labels]]`.
    pub fn labels(&self, tool: &ToolRef, server_trust: &TrustOverride) -> Labels {
        let mut labels = Labels::from_annotations(tool.annotations);
        labels.apply(
            server_trust.untrusted,
            server_trust.private,
            server_trust.sink,
        );
        let named = self.named(tool);
        for entry in self.labels.iter().filter(|l| l.selector.matches(&named)) {
            labels.apply(entry.untrusted, entry.private, entry.sink);
        }
        labels
    }
}

/// Whom a verdict is for.
#[derive(Clone, Copy)]
enum Caller<'a> {
    /// Anyone at all (a listing before any caller asks).
    Anyone,
    /// This caller, or nobody anyone vouched for.
    Is(Option<&'a Who>),
}

/// How restrictive a decision is: deny > ask > allow.
fn rank(decision: Decision) -> u8 {
    match decision {
        Decision::Deny => 2,
        Decision::Ask => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The example in this module's doc, so the doc cannot drift from what parses.
    fn documented_example() -> String {
        let source = include_str!("mod.rs");
        let doc: Vec<&str> = source
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| l.trim_start_matches("//!").strip_prefix(' ').unwrap_or(""))
            .collect();
        let start = doc.iter().position(|l| *l == "```toml").unwrap() + 1;
        let len = doc[start..].iter().position(|l| *l == "```").unwrap();
        doc[start..start + len].join("\n")
    }

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        policy: PolicyConfig,
    }

    #[test]
    fn the_documented_example_compiles_and_means_what_it_says() {
        let file: File = toml::from_str(&documented_example()).unwrap();
        let p = Policy::new(&file.policy).unwrap();
        let call = |server, tool, a: Value| {
            let args = a.as_object().unwrap().clone();
            p.evaluate(&ToolRef::new(server, tool), Some(&args))
        };
        let read_only = ToolAnnotations {
            read_only_hint: Some(true),
            open_world_hint: Some(false),
            ..Default::default()
        };
        let fs_read = ToolRef::new("fs", "read_file").with_annotations(Some(&read_only));
        let args = |a: Value| a.as_object().unwrap().clone();
        assert_eq!(call("exec", "run_x", json!({})).rule, "rule 1 (no-shell)");
        // No path: the server would pick one, so the confining rule refuses.
        assert_eq!(
            call("fs", "read_file", json!({})).rule,
            "rule 3 (confine-fs)"
        );
        // Unannotated tools count as destructive.
        let write = call("fs", "write", json!({ "path": "/tmp/a" }));
        assert_eq!(
            (write.decision, write.rule.as_str()),
            (Decision::Ask, "rule 2 (destructive-asks)")
        );
        let ok = args(json!({ "path": "/home/u/project/a" }));
        let v = p.evaluate(&fs_read, Some(&ok));
        assert_eq!(
            (v.decision, v.rule.as_str()),
            (Decision::Allow, "rule 6 (read-project)")
        );
        let escape = args(json!({ "path": "/home/u/project/../.ssh/id" }));
        assert_eq!(
            p.evaluate(&fs_read, Some(&escape)).rule,
            "rule 3 (confine-fs)"
        );
        let drop = call("sqlite", "q", json!({ "query": "DROP TABLE x" }));
        assert_eq!(drop.rule, "rule 4 (no-drop)");
        assert_eq!(
            call("db", "list", json!({ "count": 101 })).rule,
            "rule 5 (small-pages)"
        );
        let fetch = ToolRef::new("fetch", "get");
        assert!(p.labels(&fetch, &TrustOverride::default()).untrusted_source);
        let now = Instant::now();
        for _ in 0..10 {
            assert!(p.check_rate_at(&fetch, now).is_ok());
        }
        assert!(p.check_rate_at(&fetch, now).is_err());
    }

    #[test]
    fn listing_verdict_names_the_rule_that_keeps_a_tool_visible() {
        let mut cfg = PolicyConfig {
            default: Decision::Deny,
            ..PolicyConfig::default()
        };
        let mut ask = RuleConfig::new(Decision::Ask);
        ask.tool = Some(Globs::from("w"));
        ask.args
            .insert("n".to_owned(), toml::from_str("gt = 1").unwrap());
        cfg.rules.push(ask);
        let p = Policy::new(&cfg).unwrap();
        let w = ToolRef::new("s", "w");
        let v = p.evaluate(&w, None);
        assert_eq!((v.decision, v.rule.as_str()), (Decision::Ask, "rule 1"));
        assert!(!p.visible(&ToolRef::new("s", "x")));
        assert_eq!(p.evaluate(&w, Some(&Map::new())).decision, Decision::Deny);
    }
}
