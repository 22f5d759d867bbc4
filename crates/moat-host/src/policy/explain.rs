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
                 without asking, add this rule to the gateway's configuration:\n\n\
                 [[policy.rules]]\ndecision = \"allow\"\nserver = {}\ntool = {}\n",
                self.default,
                toml_string(tool.server),
                toml_string(tool.tool)
            );
        }
        let (rules, they, select) = if asking.len() == 1 {
            ("that rule", "it", "selects")
        } else {
            ("those rules", "they", "select")
        };
        format!(
            "Asking comes from {}. A rule with decision = \"allow\" would not help: an ask rule \
             that matches wins over any allow rule. To allow {exposed} without asking, narrow \
             {rules} so {they} no longer {select} this tool (with `server`, `tool`, \
             `annotations` or `args`), or change {rules} to decision = \"allow\".",
            join(&asking),
        )
    }
}

/// A TOML basic string: JSON's escapes are TOML's for the names a server may give.
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// `a`, `a and b`, `a, b and c`.
fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}
