//! Token accounting: what a list of tool definitions costs in a model's context, counted
//! with a real tokenizer (tiktoken's `o200k_base`, the encoding of OpenAI's current models;
//! other vendors' tokenizers differ by some percent, not by orders). The BPE ranks are
//! compiled into `tiktoken-rs`, so counting never touches the network.

use serde_json::Value;

/// Tokens in `text` under `o200k_base`. Special-token markers in the text are counted as
/// ordinary text, as they would be in a tool description.
pub fn count(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len()
}

/// The context cost of tool definitions as a client puts them in the prompt: the
/// definitions serialised as a compact JSON array.
pub fn tools_cost(tools: &[Value]) -> usize {
    count(&Value::Array(tools.to_vec()).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_counts() {
        assert_eq!(count(""), 0);
        assert_eq!(count("hello world"), 2);
        assert_eq!(
            tiktoken_rs::o200k_base_singleton().encode_ordinary("hello world"),
            [24912, 2375]
        );
        // The example in OpenAI's tiktoken cookbook: cl100k_base, 6 tokens with these ids.
        assert_eq!(
            tiktoken_rs::cl100k_base_singleton().encode_ordinary("tiktoken is great!"),
            [83, 1609, 5963, 374, 2294, 0]
        );
    }

    #[test]
    fn special_markers_are_plain_text() {
        assert!(count("<|endoftext|>") > 1);
    }

    #[test]
    fn tools_cost_counts_the_json() {
        let tools = [json!({"name": "read_file", "description": "Read a file."})];
        let text = r#"[{"description":"Read a file.","name":"read_file"}]"#;
        assert_eq!(tools_cost(&tools), count(text));
        assert!(tools_cost(&[tools[0].clone(), tools[0].clone()]) > tools_cost(&tools));
        assert_eq!(tools_cost(&[]), count("[]"));
    }
}
