//! What to change so a call policy asks about goes through without asking: advice for a
//! refusal message that works given how decisions combine (deny beats ask beats allow, so
//! an allow rule cannot quiet an ask rule that also matches).

use serde_json::{Map, Value};

use super::{Decision, Policy, ToolRef};

impl Policy {
    /// The labels of the rules that match this call (arguments included) and decide
    /// `decision`, in file order.
    pub fn matching_rules(
        &self,
        tool: &ToolRef,
        args: &Map<String, Value>,
        decision: Decision,
    ) -> Vec<String> {
        let named = self.named(tool);
        self.rules
            .iter()
            .filter(|r| r.decision == decision && r.selects(&named) && r.args_hold(args))
            .map(|r| r.label.clone())
            .collect()
    }

    /// How to let this call through without being asked, as sentences for a refusal:
    /// which rules ask and what to do about them, or the rule to add when the default asks.
    pub fn advice_to_allow(&self, tool: &ToolRef, args: &Map<String, Value>) -> String {
        let exposed = self.exposed_name(tool);
        let asking = self.matching_rules(tool, args, Decision::Ask);
        if asking.is_empty() {
            return format!(
                "No rule matches {exposed}, so [policy] default = \"{}\" applies. To allow it \
                 without asking, add this rule to the gateway's configuration: \
                 [[policy.rules]] decision = \"allow\", server = \"{}\", tool = \"{}\".",
                self.default, tool.server, tool.tool
            );
        }
        let (them, they) = if asking.len() == 1 {
            ("it", "it")
        } else {
            ("them", "they")
        };
        format!(
            "Asking comes from {}. A rule with decision = \"allow\" would not help: an ask rule \
             that matches wins over any allow rule. To allow {exposed} without asking, narrow \
             {them} so {they} no longer select{} it (with `server`, `tool`, `annotations` or \
             `args`), or change {them} to decision = \"allow\".",
            join(&asking),
            if asking.len() == 1 { "s" } else { "" },
        )
    }
}

/// `a`, `a and b`, `a, b and c`.
fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}
