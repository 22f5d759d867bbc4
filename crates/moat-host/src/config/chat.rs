//! The `[chat]` table: defaults for `moat chat` (the LLM client that embeds this host).
//! The host only carries it as data so one moat.toml configures both; the chat crate
//! checks the values and says what is wrong with them.

use serde::Deserialize;

/// `[chat]`: which model `moat chat` talks to, and how. Every key is optional; the command
/// line and the environment (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`) fill the rest.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct ChatConfig {
    /// `anthropic`, `openai` (the Responses API) or `openai-chat` (Chat Completions).
    pub provider: Option<String>,
    /// The model name, as the provider spells it.
    pub model: Option<String>,
    /// Where the provider's API is (a local server, a proxy).
    pub base_url: Option<String>,
    /// The environment variable holding the API key, when not the provider's usual one.
    pub api_key_env: Option<String>,
    /// The system prompt.
    pub system: Option<String>,
    /// How many model turns one prompt may take before the loop stops.
    pub max_steps: Option<usize>,
    /// The most tokens the model may write in one turn.
    pub max_tokens: Option<u32>,
    /// Input tokens past which older tool results are cut (with a marker).
    pub context_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use crate::Config;

    #[test]
    fn the_chat_table_is_carried_and_checked_for_typos() {
        let config = Config::from_toml_str(
            "[chat]\nprovider = \"openai-chat\"\nmodel = \"qwen3:8b\"\nbase_url = \"http://localhost:11434/v1\"\nmax_steps = 5\n",
            None,
        )
        .expect("a [chat] table");
        assert_eq!(config.chat.provider.as_deref(), Some("openai-chat"));
        assert_eq!(config.chat.model.as_deref(), Some("qwen3:8b"));
        assert_eq!(config.chat.max_steps, Some(5));
        let err = Config::from_toml_str("[chat]\nmodle = \"x\"\n", None).expect_err("a typo");
        assert!(err.to_string().contains("modle"), "{err}");
        assert_eq!(
            Config::from_toml_str("", None).expect("empty").chat,
            Default::default()
        );
    }
}
