//! The context budget: when the provider's count of the last request's input tokens passes
//! the budget, the results of older tool calls are cut to their start, each with a marker
//! saying so (and an event for the user) — never silently. The latest results stay whole.

use crate::message::Turn;

/// What an old tool result is cut to.
pub const KEEP_CHARS: usize = 2000;

/// How the marker ends (a result that ends so was cut already).
const MARKER_END: &str = "context budget]";

/// Cuts every tool result but those of the last tool turn to [`KEEP_CHARS`]; returns how
/// many were cut.
pub fn trim(turns: &mut [Turn]) -> usize {
    let last_tool = turns.iter().rposition(|t| matches!(t, Turn::Tool { .. }));
    let mut cut = 0;
    for (i, turn) in turns.iter_mut().enumerate() {
        let Turn::Tool { results } = turn else {
            continue;
        };
        if Some(i) == last_tool {
            continue;
        }
        for r in results.iter_mut() {
            let total = r.content.chars().count();
            if total > KEEP_CHARS && !r.content.ends_with(MARKER_END) {
                let kept: String = r.content.chars().take(KEEP_CHARS).collect();
                r.content = format!(
                    "{kept}\n[… {} more characters cut by moat chat to keep the conversation within its context budget]",
                    total - KEEP_CHARS
                );
                cut += 1;
            }
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolResult;

    fn tool(text: &str) -> Turn {
        Turn::Tool {
            results: vec![ToolResult {
                id: "1".into(),
                name: "t".into(),
                content: text.into(),
                is_error: false,
            }],
        }
    }

    #[test]
    fn old_results_are_cut_with_a_marker_and_the_latest_kept() {
        let long = "x".repeat(KEEP_CHARS + 500);
        let mut turns = vec![Turn::User { text: "hi".into() }, tool(&long), tool(&long)];
        assert_eq!(trim(&mut turns), 1);
        let Turn::Tool { results } = &turns[1] else {
            panic!("a tool turn")
        };
        assert!(results[0].content.ends_with("context budget]"));
        assert!(results[0].content.contains("500 more characters"));
        let Turn::Tool { results } = &turns[2] else {
            panic!("a tool turn")
        };
        assert_eq!(results[0].content, long);
        assert_eq!(trim(&mut turns), 0, "a cut result is not cut again");
    }
}
