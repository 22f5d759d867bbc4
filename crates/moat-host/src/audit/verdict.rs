//! The values of a record's `decision`, `outcome` and gateway-named `rule` columns, typed.
//!
//! The gateway decides and refuses in these types; the record keeps their text (the store,
//! the hash chain and `moat audit` show the same strings as ever), and a record read back
//! is asked for them with [`AuditRecord::decision_kind`] and [`AuditRecord::outcome_kind`]
//! (`None` for text this version does not know: an older or foreign store).

use std::fmt;

use super::record::AuditRecord;
use crate::config::policy::Decision as PolicyDecision;

/// What the gateway decided about a call or a server's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Decision {
    /// Forwarded as policy allows.
    Allow,
    /// Policy (or containment) asked for consent; the `consent` column says how it went.
    Ask,
    /// Refused by policy, a rate limit or a held tool.
    Deny,
    /// Not a call policy could judge: no such tool, or arguments its schema refuses.
    Error,
}

impl Decision {
    /// Every decision, in the order above.
    pub const ALL: [Decision; 4] = [
        Decision::Allow,
        Decision::Ask,
        Decision::Deny,
        Decision::Error,
    ];

    /// The text stored: `allow`, `ask`, `deny` or `error`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
            Decision::Error => "error",
        }
    }

    /// The decision stored as `text`, if it is one.
    pub fn parse(text: &str) -> Option<Decision> {
        Decision::ALL.into_iter().find(|d| d.as_str() == text)
    }
}

impl From<PolicyDecision> for Decision {
    fn from(d: PolicyDecision) -> Decision {
        match d {
            PolicyDecision::Allow => Decision::Allow,
            PolicyDecision::Ask => Decision::Ask,
            // Policy's decisions are allow, ask and deny; a new one is refused until it
            // has a column value of its own.
            _ => Decision::Deny,
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a call or request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The server answered with a result.
    Ok,
    /// The server answered with a tool result marked `isError`.
    ToolError,
    /// The gateway refused it (decision, rule and error say why).
    Refused,
    /// It was forwarded and failed: the server's error, a crash or a timeout.
    Failed,
    /// The client cancelled it.
    Cancelled,
}

impl Outcome {
    /// Every outcome, in the order above.
    pub const ALL: [Outcome; 5] = [
        Outcome::Ok,
        Outcome::ToolError,
        Outcome::Refused,
        Outcome::Failed,
        Outcome::Cancelled,
    ];

    /// The text stored: `ok`, `tool_error`, `refused`, `failed` or `cancelled`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        }
    }

    /// The outcome stored as `text`, if it is one.
    pub fn parse(text: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == text)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the gateway refused a call: the rule column's value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// No tool by that name (`unknown tool`).
    UnknownTool,
    /// The arguments are not an object, or not what the tool's schema describes (`schema`).
    Schema,
    /// A `[[policy.rate_limits]]` bucket is empty (`rate limit`).
    RateLimit,
    /// Containment: the session read untrusted content and the tool can send data out
    /// (`taint`).
    Taint,
    /// The tool's definition changed since it was approved (`pin changed`).
    PinChanged,
    /// The tool's pin could not be checked (`pin store`).
    PinStore,
    /// Any other named rule: a policy rule (`rule 2 (no-writes)`, `default`) or a scan
    /// finding that holds a tool (`scan: hidden instructions`).
    Rule(String),
}

impl Refusal {
    /// The text of the rule column.
    pub fn rule(&self) -> &str {
        match self {
            Refusal::UnknownTool => "unknown tool",
            Refusal::Schema => "schema",
            Refusal::RateLimit => "rate limit",
            Refusal::Taint => "taint",
            Refusal::PinChanged => "pin changed",
            Refusal::PinStore => "pin store",
            Refusal::Rule(rule) => rule,
        }
    }

    /// The decision it records: `error` for a call policy could not judge; otherwise
    /// `deny`, except that a refused `ask` stays `ask` (the consent column says who said no).
    fn decision(&self, before: Option<Decision>) -> Decision {
        match self {
            Refusal::UnknownTool | Refusal::Schema => Decision::Error,
            _ if before == Some(Decision::Ask) => Decision::Ask,
            _ => Decision::Deny,
        }
    }
}

impl AuditRecord {
    /// Records the decision.
    pub fn decide(&mut self, decision: Decision) {
        self.decision = decision.as_str().to_owned();
    }

    /// Records how it ended.
    pub fn end(&mut self, outcome: Outcome) {
        self.outcome = outcome.as_str().to_owned();
    }

    /// Records a refusal: its decision and rule, outcome `refused`, and `message` as the
    /// error.
    pub fn refuse(&mut self, refusal: &Refusal, message: &str) {
        self.decide(refusal.decision(self.decision_kind()));
        if self.rule != refusal.rule() {
            self.rule = refusal.rule().to_owned();
        }
        self.end(Outcome::Refused);
        self.error = Some(message.to_owned());
    }

    /// The decision, when the stored text is one this version knows.
    pub fn decision_kind(&self) -> Option<Decision> {
        Decision::parse(&self.decision)
    }

    /// The outcome, when the stored text is one this version knows.
    pub fn outcome_kind(&self) -> Option<Outcome> {
        Outcome::parse(&self.outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_text_is_the_same_as_ever_and_reads_back() {
        let texts: Vec<&str> = Decision::ALL.iter().map(|d| d.as_str()).collect();
        assert_eq!(texts, ["allow", "ask", "deny", "error"]);
        let texts: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(
            texts,
            ["ok", "tool_error", "refused", "failed", "cancelled"]
        );
        for d in Decision::ALL {
            assert_eq!(Decision::parse(d.as_str()), Some(d));
        }
        for o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
        }
        assert_eq!(Decision::parse("maybe"), None);
        assert_eq!(Outcome::parse(""), None);
    }

    #[test]
    fn a_refusal_records_error_for_calls_policy_cannot_judge_and_keeps_a_refused_ask() {
        let refused = |before: Decision, refusal: Refusal| {
            let mut record = AuditRecord::default();
            record.decide(before);
            record.rule = "rule 1".into();
            record.refuse(&refusal, "no");
            (record.decision, record.rule, record.outcome, record.error)
        };
        let (decision, rule, outcome, error) = refused(Decision::Deny, Refusal::UnknownTool);
        assert_eq!(
            (decision.as_str(), rule.as_str(), outcome.as_str()),
            ("error", "unknown tool", "refused")
        );
        assert_eq!(error.as_deref(), Some("no"));
        assert_eq!(refused(Decision::Allow, Refusal::Schema).0, "error");
        assert_eq!(refused(Decision::Allow, Refusal::RateLimit).0, "deny");
        assert_eq!(refused(Decision::Allow, Refusal::RateLimit).1, "rate limit");
        let ask = refused(Decision::Ask, Refusal::Rule("rule 1".into()));
        assert_eq!((ask.0.as_str(), ask.1.as_str()), ("ask", "rule 1"));
        assert_eq!(
            refused(Decision::Allow, Refusal::Rule("default".into())).0,
            "deny"
        );
        let rules: Vec<String> = [Refusal::Taint, Refusal::PinChanged, Refusal::PinStore]
            .iter()
            .map(|r| r.rule().to_owned())
            .collect();
        assert_eq!(rules, ["taint", "pin changed", "pin store"]);
    }
}
