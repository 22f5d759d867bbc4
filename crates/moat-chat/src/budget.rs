//! The context budget: when the provider's count of the last request's input tokens passes
//! the budget, the results of older tool calls are cut to their start, each with a marker
//! saying so (and an event for the user) — never silently. The latest results stay whole.
//!
//! The count is the provider's (`usage` in its answer); a server that reports none (some
//! OpenAI-compatible local servers) is counted here with `o200k_base` (moat-search's
//! tokenizer), so the budget still holds there.

use crate::message::{Reply, ToolDef, Turn};
use crate::provider::Request;

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

/// The request's input tokens under `o200k_base`: the system prompt, every turn's text,
/// calls and results, and the tool definitions as JSON. Providers add a few tokens of framing
/// per message; this leaves them out, so it counts a little low, not high.
pub fn count_request(request: &Request<'_>) -> u64 {
    let mut text = String::new();
    if let Some(system) = request.system {
        text.push_str(system);
        text.push('\n');
    }
    for turn in request.turns {
        match turn {
            Turn::User { text: t } => text.push_str(t),
            Turn::Assistant {
                text: t,
                tool_calls,
            } => {
                text.push_str(t);
                for call in tool_calls {
                    text.push_str(&call.name);
                    text.push_str(&call.arguments.to_string());
                }
            }
            Turn::Tool { results } => {
                for r in results {
                    text.push_str(&r.content);
                    text.push('\n');
                }
            }
        }
        text.push('\n');
    }
    let tools: Vec<serde_json::Value> = request
        .tools
        .iter()
        .filter_map(|t: &ToolDef| serde_json::to_value(t).ok())
        .collect();
    (moat_search::tokens::count(&text) + moat_search::tokens::tools_cost(&tools)) as u64
}

/// The reply's output tokens under `o200k_base`: its text and its calls.
pub fn count_reply(reply: &Reply) -> u64 {
    let mut text = reply.text.clone();
    for call in &reply.tool_calls {
        text.push_str(&call.name);
        text.push_str(&call.arguments.to_string());
    }
    moat_search::tokens::count(&text) as u64
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

    #[test]
    fn requests_are_counted_with_o200k_base() {
        let turns = vec![Turn::User {
            text: "hello world".into(),
        }];
        let request = Request {
            model: "m",
            system: None,
            turns: &turns,
            tools: &[],
            max_tokens: None,
        };
        // "hello world" is 2 tokens, the turn's separator 1, an empty tool list "[]" 1.
        assert_eq!(count_request(&request), 4);
        let long = vec![Turn::User {
            text: "word ".repeat(1000),
        }];
        let request = Request {
            turns: &long,
            ..request
        };
        assert!((1000..=1010).contains(&count_request(&request)));
    }
}
