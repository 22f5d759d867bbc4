//! Which provider, model, endpoint and key: from the command line, else the `[chat]` table
//! of moat.toml, else the environment (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`).

use moat_host::config::chat::ChatConfig;

use crate::ChatError;
use crate::provider::anthropic::Anthropic;
use crate::provider::openai_chat::OpenAiChat;
use crate::provider::openai_responses::OpenAiResponses;
use crate::provider::{Provider, Retry};
use crate::session::{LoopOptions, default_roots};

/// The wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProviderKind {
    /// The Anthropic Messages API.
    Anthropic,
    /// The OpenAI Responses API.
    OpenAi,
    /// OpenAI-compatible Chat Completions (Ollama, llama.cpp, vLLM, LM Studio, OpenAI).
    OpenAiChat,
}

impl ProviderKind {
    /// From its command-line name.
    pub fn parse(name: &str) -> Result<ProviderKind, ChatError> {
        match name {
            "anthropic" => Ok(ProviderKind::Anthropic),
            "openai" => Ok(ProviderKind::OpenAi),
            "openai-chat" => Ok(ProviderKind::OpenAiChat),
            other => Err(ChatError::Settings(format!(
                "unknown provider {other:?} (expected anthropic, openai or openai-chat)"
            ))),
        }
    }

    /// Its command-line name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiChat => "openai-chat",
        }
    }

    fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "https://api.anthropic.com",
            _ => "https://api.openai.com/v1",
        }
    }

    fn key_env(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
            _ => "OPENAI_API_KEY",
        }
    }

    fn default_model(self) -> Option<&'static str> {
        match self {
            ProviderKind::Anthropic => Some("claude-sonnet-4-5"),
            ProviderKind::OpenAi => Some("gpt-5"),
            // A local server's models are whatever was pulled into it.
            ProviderKind::OpenAiChat => None,
        }
    }
}

/// What the command line says (each overrides `[chat]`).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--provider`.
    pub provider: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
}

/// Everything needed to talk to the model.
#[derive(Debug, Clone)]
pub struct ChatSettings {
    /// The wire format.
    pub kind: ProviderKind,
    /// The model.
    pub model: String,
    /// Where the API is.
    pub base_url: String,
    /// The key (empty: none sent).
    pub key: String,
    /// The variable it came from.
    pub key_env: String,
    /// The system prompt.
    pub system: String,
    /// Model turns per prompt.
    pub max_steps: usize,
    /// Tokens per model turn.
    pub max_tokens: Option<u32>,
    /// Input tokens past which old tool results are cut.
    pub context_tokens: Option<u64>,
    /// Retries.
    pub retry: Retry,
}

/// The default system prompt.
pub const SYSTEM: &str = "You are moat chat, a helpful assistant in a terminal. You can call tools; \
every call goes through moat's gateway, which may refuse it (policy) or ask the user first. \
When a call is refused, say so plainly and do not try to get around the refusal.";

/// The default context budget, in input tokens: below every current model's window.
pub const CONTEXT_TOKENS: u64 = 100_000;

/// The default step limit.
pub const MAX_STEPS: usize = 20;

impl ChatSettings {
    /// Resolves the settings; `env` looks up environment variables.
    pub fn resolve(
        config: &ChatConfig,
        over: &Overrides,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ChatSettings, ChatError> {
        let env = |k: &str| env(k).filter(|v| !v.is_empty());
        let kind = match over.provider.as_deref().or(config.provider.as_deref()) {
            Some(name) => ProviderKind::parse(name)?,
            None if env("ANTHROPIC_API_KEY").is_some() => ProviderKind::Anthropic,
            None if env("OPENAI_API_KEY").is_some() => ProviderKind::OpenAi,
            None => {
                return Err(ChatError::Settings(
                    "no model provider: set ANTHROPIC_API_KEY or OPENAI_API_KEY, or use a local \
                     server with --provider openai-chat --base-url http://localhost:11434/v1 \
                     --model NAME (or a [chat] table in moat.toml)"
                        .into(),
                ));
            }
        };
        let base_url = over
            .base_url
            .clone()
            .or(config.base_url.clone())
            .unwrap_or_else(|| kind.default_base_url().to_owned());
        let custom_url = base_url.trim_end_matches('/') != kind.default_base_url();
        let model = match over.model.clone().or(config.model.clone()) {
            Some(m) => m,
            None => kind.default_model().map(str::to_owned).ok_or_else(|| {
                ChatError::Settings(
                    "--provider openai-chat needs --model (the name the server knows, as \
                     `ollama list` shows it), or model in [chat]"
                        .into(),
                )
            })?,
        };
        let (key_env, key) = match (&config.api_key_env, kind) {
            (Some(var), _) => (var.clone(), env(var)),
            // A local Chat Completions server gets no OpenAI key unless told to.
            (None, ProviderKind::OpenAiChat) if custom_url => (String::new(), None),
            (None, _) => (kind.key_env().to_owned(), env(kind.key_env())),
        };
        let key = match key {
            Some(k) => k,
            None if kind == ProviderKind::OpenAiChat => String::new(),
            None => {
                return Err(ChatError::Settings(format!(
                    "--provider {} needs an API key in {key_env}",
                    kind.as_str()
                )));
            }
        };
        Ok(ChatSettings {
            kind,
            model,
            base_url,
            key,
            key_env,
            system: config.system.clone().unwrap_or_else(|| SYSTEM.to_owned()),
            max_steps: config.max_steps.unwrap_or(MAX_STEPS),
            max_tokens: config.max_tokens,
            context_tokens: Some(config.context_tokens.unwrap_or(CONTEXT_TOKENS)),
            retry: Retry::default(),
        })
    }

    /// The provider these settings describe.
    pub fn provider(&self) -> Result<Box<dyn Provider>, ChatError> {
        let (url, key, env, model, retry) = (
            &self.base_url,
            &self.key,
            &self.key_env,
            &self.model,
            self.retry,
        );
        Ok(match self.kind {
            ProviderKind::Anthropic => Box::new(Anthropic::new(url, key, env, model, retry)?),
            ProviderKind::OpenAi => Box::new(OpenAiResponses::new(url, key, env, model, retry)?),
            ProviderKind::OpenAiChat => Box::new(OpenAiChat::new(url, key, env, model, retry)?),
        })
    }

    /// The loop's options.
    pub fn loop_options(&self) -> LoopOptions {
        LoopOptions {
            model: self.model.clone(),
            system: Some(self.system.clone()),
            max_steps: self.max_steps,
            max_tokens: self.max_tokens,
            context_tokens: self.context_tokens,
            roots: default_roots(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_provider_follows_flags_then_config_then_keys() {
        let none = ChatConfig::default();
        let s = ChatSettings::resolve(
            &none,
            &Overrides::default(),
            &env(&[("OPENAI_API_KEY", "k")]),
        )
        .expect("openai");
        assert_eq!(s.kind, ProviderKind::OpenAi);
        assert_eq!(s.key, "k");
        let over = Overrides {
            provider: Some("anthropic".into()),
            ..Default::default()
        };
        let err = ChatSettings::resolve(&none, &over, &env(&[("OPENAI_API_KEY", "k")]))
            .expect_err("no anthropic key");
        assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
        assert!(ChatSettings::resolve(&none, &Overrides::default(), &env(&[])).is_err());
    }

    #[test]
    fn a_local_server_gets_no_openai_key() {
        let mut config = ChatConfig::default();
        config.provider = Some("openai-chat".into());
        config.base_url = Some("http://localhost:11434/v1".into());
        config.model = Some("qwen3".into());
        let s = ChatSettings::resolve(
            &config,
            &Overrides::default(),
            &env(&[("OPENAI_API_KEY", "secret")]),
        )
        .expect("local");
        assert_eq!(s.key, "");
        let mut no_model = config;
        no_model.model = None;
        assert!(ChatSettings::resolve(&no_model, &Overrides::default(), &env(&[])).is_err());
    }
}
