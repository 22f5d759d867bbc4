//! What can go wrong talking to a model, each error saying what to do about it.

use std::time::Duration;

/// An error from the chat client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChatError {
    /// The settings are incomplete or contradictory.
    #[error("{0}")]
    Settings(String),
    /// The provider refused the API key.
    #[error(
        "{provider} refused the API key ({status}): {message}\n(check {key_env}: it must hold a valid key for {provider})"
    )]
    Auth {
        /// The provider's name.
        provider: &'static str,
        /// 401 or 403.
        status: u16,
        /// What the provider said.
        message: String,
        /// Where the key came from.
        key_env: String,
    },
    /// The model does not exist (or the account cannot use it).
    #[error(
        "{provider} does not know the model {model:?} ({message})\n(pass --model with a model your account can use, or set model in [chat])"
    )]
    UnknownModel {
        /// The provider's name.
        provider: &'static str,
        /// The model asked for.
        model: String,
        /// What the provider said.
        message: String,
    },
    /// The conversation no longer fits the model's context window.
    #[error(
        "the conversation is too long for the model's context window: {message}\n(start a new conversation, or /clear in interactive mode)"
    )]
    ContextTooLong {
        /// What the provider said.
        message: String,
    },
    /// The provider kept failing (429 or 5xx) after every retry.
    #[error(
        "{provider} is unavailable: {status} after {attempts} attempts: {message}\n(try again later; a 429 means the account's rate limit)"
    )]
    Unavailable {
        /// The provider's name.
        provider: &'static str,
        /// The last status.
        status: u16,
        /// How many requests were made.
        attempts: u32,
        /// What the provider said last.
        message: String,
    },
    /// The provider could not be reached.
    #[error("cannot reach {url}: {source}\n(check --base-url and the network)")]
    Connect {
        /// Where the request went.
        url: String,
        /// Why it failed.
        #[source]
        source: reqwest::Error,
    },
    /// The provider refused the request for another reason.
    #[error("{provider} refused the request ({status}): {message}")]
    Rejected {
        /// The provider's name.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
    },
    /// The streamed answer ended before the provider said it was complete.
    #[error(
        "the model's answer was cut off mid-stream ({0}); nothing of it was kept — send the prompt again"
    )]
    StreamCut(String),
    /// The provider sent something that does not follow its own format.
    #[error("the provider sent a malformed reply: {0}")]
    BadReply(String),
    /// The model kept calling tools past the step limit.
    #[error("stopped after {0} model turns without a final answer (raise max_steps in [chat])")]
    StepLimit(usize),
    /// The in-process host failed.
    #[error("the gateway: {0}")]
    Host(String),
    /// Reading or writing a transcript failed.
    #[error("transcript {path}: {source}")]
    Transcript {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A transcript to resume was not found or is not one.
    #[error("{0}")]
    Resume(String),
}

/// The longest `retry-after` honoured: past this the user is better told.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
