//! The request every provider makes: a JSON POST answered by server-sent events, retried
//! with backoff on 429 and 5xx (honouring `retry-after`), with errors classified so the user
//! is told what to fix.

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde_json::Value;
use sse_stream::{Sse, SseStream};

use crate::ChatError;
use crate::error::MAX_RETRY_AFTER;
use crate::event::Event;

/// How failed requests are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Requests made at most (the first included).
    pub attempts: u32,
    /// The first wait; each next one doubles.
    pub backoff: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 3,
            backoff: Duration::from_millis(500),
        }
    }
}

/// A provider's endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub client: reqwest::Client,
    pub provider: &'static str,
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub retry: Retry,
    /// Where the key came from, for the 401 message.
    pub key_env: String,
    pub model: String,
}

/// The events of one streamed answer.
pub(crate) type Events = Pin<Box<dyn Stream<Item = Result<Sse, ChatError>> + Send>>;

impl Endpoint {
    pub fn new(
        provider: &'static str,
        url: String,
        headers: Vec<(&'static str, String)>,
        retry: Retry,
        key_env: String,
        model: String,
    ) -> Result<Endpoint, ChatError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            // Between two chunks of a stream, not for the whole answer.
            .read_timeout(Duration::from_secs(300))
            .build()
            .map_err(|e| ChatError::Settings(format!("building the HTTP client: {e}")))?;
        Ok(Endpoint {
            client,
            provider,
            url,
            headers,
            retry,
            key_env,
            model,
        })
    }

    /// POSTs `body` and returns its event stream, retrying what is worth retrying.
    pub async fn stream(
        &self,
        body: &Value,
        on_event: &(dyn Fn(&Event) + Send + Sync),
    ) -> Result<Events, ChatError> {
        let attempts = self.retry.attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut request = self
                .client
                .post(&self.url)
                .header("content-type", "application/json")
                .body(body.to_string());
            for (name, value) in &self.headers {
                request = request.header(*name, value);
            }
            let response = match request.send().await {
                Ok(r) => r,
                Err(source) => {
                    if attempt < attempts {
                        let wait = self.backoff(attempt);
                        on_event(&Event::Retry {
                            attempt,
                            status: 0,
                            wait_ms: wait.as_millis() as u64,
                        });
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    return Err(ChatError::Connect {
                        url: self.url.clone(),
                        source,
                    });
                }
            };
            let status = response.status().as_u16();
            if response.status().is_success() {
                let bytes = response.bytes_stream();
                let events = SseStream::from_bytes_stream(bytes).map(|item| {
                    item.map_err(|e| ChatError::StreamCut(format!("reading the stream: {e}")))
                });
                return Ok(Box::pin(events));
            }
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let text = response.text().await.unwrap_or_default();
            let retryable = status == 429 || status >= 500;
            if retryable && attempt < attempts {
                let wait = retry_after
                    .map(|d| d.min(MAX_RETRY_AFTER))
                    .unwrap_or_else(|| self.backoff(attempt));
                on_event(&Event::Retry {
                    attempt,
                    status,
                    wait_ms: wait.as_millis() as u64,
                });
                tokio::time::sleep(wait).await;
                continue;
            }
            return Err(self.classify(status, &text, attempt));
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        self.retry.backoff * 2u32.saturating_pow(attempt.saturating_sub(1))
    }

    /// The error for a non-success answer, from its status and body.
    fn classify(&self, status: u16, body: &str, attempts: u32) -> ChatError {
        let (message, code) = error_message(body);
        let message = if message.is_empty() {
            format!("HTTP {status}")
        } else {
            message
        };
        if is_context_error(&message, code.as_deref()) {
            return ChatError::ContextTooLong { message };
        }
        match status {
            401 | 403 => ChatError::Auth {
                provider: self.provider,
                status,
                message,
                key_env: self.key_env.clone(),
            },
            404 => ChatError::UnknownModel {
                provider: self.provider,
                model: self.model.clone(),
                message,
            },
            429 | 500.. => ChatError::Unavailable {
                provider: self.provider,
                status,
                attempts,
                message,
            },
            _ => ChatError::Rejected {
                provider: self.provider,
                status,
                message,
            },
        }
    }
}

/// The message and code of an error body: `{"error": {"message", "code"|"type"}}` (both
/// Anthropic and OpenAI), else the text itself.
pub(crate) fn error_message(body: &str) -> (String, Option<String>) {
    let Ok(value) = serde_json::from_str::<Value>(body) else {
        return (body.trim().chars().take(500).collect(), None);
    };
    error_parts(&value)
}

/// [`error_message`] from a parsed value (also used for errors inside a stream).
pub(crate) fn error_parts(value: &Value) -> (String, Option<String>) {
    let error = value.get("error").unwrap_or(value);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| error.as_str().map(str::to_owned))
        .unwrap_or_else(|| value.to_string());
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .or_else(|| error.get("type").and_then(Value::as_str))
        .map(str::to_owned);
    (message, code)
}

/// Whether a provider's error says the input is too long (each words it its own way).
pub(crate) fn is_context_error(message: &str, code: Option<&str>) -> bool {
    if code == Some("context_length_exceeded") {
        return true;
    }
    let m = message.to_ascii_lowercase();
    [
        "prompt is too long",
        "context window",
        "context length",
        "maximum context",
    ]
    .iter()
    .any(|p| m.contains(p))
}
