//! The conversation and its tool loop over an in-process host: the model sees the host's
//! tools (or its search meta-tools, when tool search is on), and every call it makes goes
//! through the host's call path — policy, containment, consent (asked through a
//! [`consent::Prompt`](crate::consent::Prompt)), the sandboxed server, the audit trail with
//! this session as the client. Calls the model makes together run together.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use moat::transport::{Connection, Limits};
use moat::types::methods::NOTIFICATIONS_ELICITATION_COMPLETE;
use moat::types::{
    CallToolResult, ClientCapabilities, ContentBlock, ElicitRequestParams, ElicitRequestURLParams,
    ElicitResult, ElicitValue, ElicitationCapability, Root, RootsCapability, SamplingCapability,
};
use moat::{Client, ClientBuilder};
use moat_host::{Config, Host, HostOptions};
use serde_json::Value;

use crate::ChatError;
use crate::consent::{Prompt, Question};
use crate::event::{Event, EventSink};
use crate::message::{StopReason, ToolCall, ToolDef, ToolResult, Turn};
use crate::provider::{Provider, Request};
use crate::transcript::Transcript;

/// How the loop runs.
#[derive(Debug, Clone)]
pub struct LoopOptions {
    /// The model.
    pub model: String,
    /// The system prompt.
    pub system: Option<String>,
    /// Model turns one prompt may take.
    pub max_steps: usize,
    /// The most tokens per model turn.
    pub max_tokens: Option<u32>,
    /// Input tokens past which old tool results are cut (`None`: never).
    pub context_tokens: Option<u64>,
    /// The roots offered to servers that ask (default: the working directory).
    pub roots: Vec<std::path::PathBuf>,
}

/// The longest tool result kept in full in an event (the model gets all of it).
const EVENT_TEXT: usize = 400;

/// A conversation.
pub struct Session {
    host: Host,
    client: Client,
    provider: Arc<dyn Provider>,
    options: LoopOptions,
    turns: Vec<Turn>,
    /// Turns already written to the transcript.
    saved: usize,
    tools: Vec<ToolDef>,
    /// The model's name for a tool → the host's.
    names: BTreeMap<String, String>,
    events: EventSink,
    transcript: Option<Transcript>,
    /// The count of the last request's input tokens (the provider's, else `o200k_base`).
    last_input_tokens: u64,
}

impl Session {
    /// Starts the host described by `config` in this process and connects to it.
    pub async fn start(
        config: Config,
        host_options: HostOptions,
        provider: Box<dyn Provider>,
        options: LoopOptions,
        consent: Arc<dyn Prompt>,
        events: EventSink,
    ) -> Result<Session, ChatError> {
        let host = Host::start(config, host_options)
            .await
            .map_err(|e| ChatError::Host(e.to_string()))?;
        host.ready().await;
        let (client_io, host_io) = tokio::io::duplex(1 << 20);
        let (hr, hw) = tokio::io::split(host_io);
        host.server().start(Connection::from_lines(
            tokio::io::BufReader::new(hr),
            hw,
            Limits::default(),
        ));
        let (cr, cw) = tokio::io::split(client_io);
        let roots = options
            .roots
            .iter()
            .map(|p| Root::new(format!("file://{}", p.display())))
            .collect();
        let provider: Arc<dyn Provider> = Arc::from(provider);
        let on_event = events.clone();
        let (sampler, sampling_events, model) =
            (provider.clone(), events.clone(), options.model.clone());
        let builder = ClientBuilder::new("moat-chat", env!("CARGO_PKG_VERSION"))
            // Consent may wait on a person; the host's own [consent] timeout bounds it.
            .request_timeout(None)
            .roots(roots)
            .on_sampling(move |params| {
                crate::sampling::answer(
                    sampler.clone(),
                    model.clone(),
                    sampling_events.clone(),
                    params,
                )
            })
            .on_elicitation(move |request| {
                let consent = consent.clone();
                let events = on_event.clone();
                async move { Ok(answer_form(&*consent, &events, request).await) }
            })
            // Both elicitation modes: forms on the terminal, and links opened after a yes.
            .capabilities(ClientCapabilities {
                sampling: Some(SamplingCapability::default()),
                elicitation: Some(ElicitationCapability {
                    form: Some(Default::default()),
                    url: Some(Default::default()),
                    ..Default::default()
                }),
                roots: Some(RootsCapability {
                    list_changed: Some(false),
                    ..Default::default()
                }),
                ..Default::default()
            });
        // Subscribed before connecting, so no completion is missed.
        tokio::spawn(follow_completions(builder.notifications(), events.clone()));
        let client = builder
            .connect(Connection::from_lines(
                tokio::io::BufReader::new(cr),
                cw,
                Limits::default(),
            ))
            .await
            .map_err(|e| ChatError::Host(format!("connecting to the in-process gateway: {e}")))?;
        Ok(Session {
            host,
            client,
            provider,
            options,
            turns: Vec::new(),
            saved: 0,
            tools: Vec::new(),
            names: BTreeMap::new(),
            events,
            transcript: None,
            last_input_tokens: 0,
        })
    }

    /// Writes every turn, from now on (and those so far), to `transcript`.
    pub fn record(&mut self, transcript: Transcript) -> Result<(), ChatError> {
        self.transcript = Some(transcript);
        self.saved = 0;
        self.flush()
    }

    /// Continues a conversation (turns loaded from a transcript).
    pub fn restore(&mut self, turns: Vec<Turn>) {
        self.turns = turns;
        self.saved = self.turns.len();
    }

    /// The conversation so far.
    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }

    /// Forgets the conversation (the transcript keeps it).
    pub fn clear(&mut self) {
        self.turns.clear();
        self.saved = 0;
    }

    /// The host, for what the loop does not cover (its audit trail, its servers).
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The in-process client (resources, prompts, anything the loop does not use).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The tools as the model sees them (after [`Session::refresh_tools`]).
    pub fn tools(&self) -> &[ToolDef] {
        &self.tools
    }

    /// Changes the model for the next turns.
    pub fn set_model(&mut self, model: &str) {
        self.options.model = model.to_owned();
    }

    /// Reads the host's tool list again (it changes as servers come and go).
    pub async fn refresh_tools(&mut self) -> Result<(), ChatError> {
        let listed = self
            .client
            .list_all_tools()
            .await
            .map_err(|e| ChatError::Host(format!("listing tools: {e}")))?;
        self.tools.clear();
        self.names.clear();
        for tool in listed {
            let name = wire_name(&tool.name, &self.names);
            self.names.insert(name.clone(), tool.name.clone());
            self.tools.push(ToolDef {
                name,
                description: tool
                    .description
                    .clone()
                    .or(tool.title.clone())
                    .unwrap_or_default(),
                input_schema: object_schema(moat::schema::portable::portable_input(
                    &tool.input_schema,
                )),
            });
        }
        Ok(())
    }

    /// Sends `prompt` and runs the loop until the model answers without calling a tool.
    /// Returns the answer. A failed first request leaves the conversation as it was.
    pub async fn send(&mut self, prompt: &str) -> Result<String, ChatError> {
        let outcome = self.run(prompt).await;
        if let Err(e) = &outcome {
            (self.events)(&Event::Error {
                message: e.to_string(),
            });
        }
        self.flush()?;
        outcome
    }

    async fn run(&mut self, prompt: &str) -> Result<String, ChatError> {
        self.refresh_tools().await?;
        let before = self.turns.len();
        self.turns.push(Turn::User {
            text: prompt.to_owned(),
        });
        for step in 0..self.options.max_steps.max(1) {
            self.keep_within_budget();
            let request = Request {
                model: &self.options.model,
                system: self.options.system.as_deref(),
                turns: &self.turns,
                tools: &self.tools,
                max_tokens: self.options.max_tokens,
            };
            let reply = match self.provider.complete(request, &*self.events).await {
                Ok(reply) => reply,
                Err(e) => {
                    if step == 0 {
                        self.turns.truncate(before);
                    }
                    return Err(e);
                }
            };
            // A server that reports no usage is counted here, so the budget still holds.
            let (input_tokens, output_tokens, counted_by) = if reply.usage.input_tokens > 0 {
                (
                    reply.usage.input_tokens,
                    reply.usage.output_tokens,
                    "provider",
                )
            } else {
                (
                    crate::budget::count_request(&request),
                    crate::budget::count_reply(&reply),
                    "o200k_base",
                )
            };
            (self.events)(&Event::Usage {
                input_tokens,
                output_tokens,
                counted_by: counted_by.to_owned(),
            });
            self.last_input_tokens = input_tokens;
            if reply.stop == StopReason::Refusal {
                // The refused exchange is dropped, so the next prompt starts from a
                // conversation every provider takes up again (Anthropic asks for it).
                self.turns.truncate(before);
                let text = reply.refusal.clone().unwrap_or_else(|| reply.text.clone());
                (self.events)(&Event::Refusal { text: text.clone() });
                return Ok(text);
            }
            self.turns.push(Turn::Assistant {
                text: reply.text.clone(),
                tool_calls: reply.tool_calls.clone(),
            });
            if reply.tool_calls.is_empty() {
                (self.events)(&Event::Answer {
                    text: reply.text.clone(),
                });
                return Ok(reply.text);
            }
            let calls = reply.tool_calls.iter().map(|call| self.run_tool(call));
            let results = futures_util::future::join_all(calls).await;
            self.turns.push(Turn::Tool { results });
            self.flush()?;
        }
        Err(ChatError::StepLimit(self.options.max_steps))
    }

    /// Runs one call through the host; every outcome is a result the model can read.
    async fn run_tool(&self, call: &ToolCall) -> ToolResult {
        (self.events)(&Event::ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        let started = Instant::now();
        let (content, is_error, decision) = match self.names.get(&call.name) {
            None => {
                let known: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
                (
                    format!(
                        "There is no tool named {:?}. The tools are: {}.",
                        call.name,
                        known.join(", ")
                    ),
                    true,
                    "refused",
                )
            }
            Some(name) => match self.client.call_tool(name, call.arguments.clone()).await {
                Ok(result) => {
                    let text = result_text(&result);
                    if result.is_error == Some(true) {
                        let decision = if is_refusal(&text) {
                            "refused"
                        } else {
                            "failed"
                        };
                        (text, true, decision)
                    } else {
                        (text, false, "allowed")
                    }
                }
                Err(e) => (format!("The call failed: {e}"), true, "failed"),
            },
        };
        (self.events)(&Event::ToolResult {
            id: call.id.clone(),
            name: call.name.clone(),
            decision: decision.to_owned(),
            is_error,
            ms: started.elapsed().as_secs_f64() * 1000.0,
            text: content.chars().take(EVENT_TEXT).collect(),
        });
        ToolResult {
            id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error,
        }
    }

    /// Mends the conversation after a turn was stopped midway (Ctrl-C): calls left without
    /// results get one saying the user cancelled them, so the next request is well formed.
    pub fn cancelled(&mut self) {
        (self.events)(&Event::Cancelled);
        if let Some(Turn::Assistant { tool_calls, .. }) = self.turns.last()
            && !tool_calls.is_empty()
        {
            let results = tool_calls
                .iter()
                .map(|c| ToolResult {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    content: "The user cancelled this call.".into(),
                    is_error: true,
                })
                .collect();
            self.turns.push(Turn::Tool { results });
        }
        if let Err(e) = self.flush() {
            tracing::warn!("{e}");
        }
    }

    /// Cuts older tool results when the last request already passed the budget.
    fn keep_within_budget(&mut self) {
        let Some(limit) = self.options.context_tokens else {
            return;
        };
        if self.last_input_tokens <= limit {
            return;
        }
        let results = crate::budget::trim(&mut self.turns);
        if results > 0 {
            (self.events)(&Event::Trimmed {
                results,
                input_tokens: self.last_input_tokens,
            });
        }
    }

    fn flush(&mut self) -> Result<(), ChatError> {
        if let Some(t) = &mut self.transcript {
            for turn in &self.turns[self.saved.min(self.turns.len())..] {
                t.append(turn)?;
            }
        }
        self.saved = self.turns.len();
        Ok(())
    }

    /// Stops the host and its servers.
    pub async fn shutdown(self) {
        self.host.shutdown().await;
        drop(self.client);
    }
}

/// Whether a failed result is the gateway refusing the call (policy, consent, containment,
/// pins, arguments) rather than the tool failing.
fn is_refusal(text: &str) -> bool {
    [
        "moat's policy",
        "moat holds back",
        "consent",
        "Unknown tool",
        "invalid arguments",
        "is called too often",
        "untrusted",
    ]
    .iter()
    .any(|p| text.contains(p))
}

/// The result as the model reads it: its text, else its structured content.
fn result_text(result: &CallToolResult) -> String {
    let mut parts = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            other => {
                let kind = serde_json::to_value(other)
                    .ok()
                    .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_else(|| "content".into());
                parts.push(format!("[{kind} content not shown]"));
            }
        }
    }
    if parts.iter().all(|p| p.starts_with('['))
        && let Some(sc) = &result.structured_content
    {
        parts.insert(0, sc.to_string());
    }
    parts.join("\n")
}

/// A tool name in the providers' alphabet (`[A-Za-z0-9_-]{1,64}`), unique among `taken`.
fn wire_name(name: &str, taken: &BTreeMap<String, String>) -> String {
    let mut clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if clean.is_empty() {
        clean.push_str("tool");
    }
    let mut candidate = clean.clone();
    let mut n = 2;
    while taken.contains_key(&candidate) {
        let suffix = format!("_{n}");
        let keep = 64 - suffix.len();
        candidate = format!("{}{suffix}", clean.chars().take(keep).collect::<String>());
        n += 1;
    }
    candidate
}

/// A schema every provider accepts for a function's parameters: the SDK's portable form
/// (one type per schema, no `$ref`, no root `anyOf`), an object with properties.
fn object_schema(schema: Value) -> Value {
    let mut schema = match schema {
        Value::Object(map) => map,
        _ => Default::default(),
    };
    schema.insert("type".into(), Value::String("object".into()));
    schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Default::default()));
    Value::Object(schema)
}

/// Answers an elicitation: the gateway's consent question, a server's form, or a server's
/// link to open, through `consent`.
async fn answer_form(
    consent: &dyn Prompt,
    events: &EventSink,
    request: ElicitRequestParams,
) -> ElicitResult {
    let form = match request {
        ElicitRequestParams::Form(form) => form,
        ElicitRequestParams::Url(link) => return answer_link(consent, events, link).await,
        _ => return ElicitResult::decline(),
    };
    let schema = serde_json::to_value(&form.requested_schema).unwrap_or(Value::Null);
    let choices: Vec<String> = schema["properties"]["decision"]["enum"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if choices.is_empty() {
        // A server's own form, passed on by the gateway.
        return match consent.form(&form.message, &schema).await {
            Some(content) => ElicitResult::accept(content),
            None => ElicitResult::decline(),
        };
    }
    let question = Question {
        message: form.message.clone(),
        choices,
    };
    let answer = consent.ask(&question).await;
    (events)(&Event::Consent {
        message: form.message.clone(),
        choice: answer.clone().unwrap_or_else(|| "deny".into()),
    });
    match answer {
        Some(choice) => {
            let mut content = BTreeMap::new();
            content.insert("decision".to_owned(), ElicitValue::String(choice));
            ElicitResult::accept(content)
        }
        None => ElicitResult::decline(),
    }
}

/// A server's link: shown, asked about, opened only after a yes. `accept` tells the server
/// the person went (or will go) there; its completion arrives later as a notification.
async fn answer_link(
    consent: &dyn Prompt,
    events: &EventSink,
    link: ElicitRequestURLParams,
) -> ElicitResult {
    // From here on the link is the parsed address: the one asked about, opened and reported
    // is the same normalized string, never the server's raw one.
    let (result, choice, url) = match crate::link::check(&link.url) {
        Err(why) => {
            tracing::info!(url = %link.url, "{why}");
            (ElicitResult::decline(), "refused", link.url.clone())
        }
        Ok(url) => {
            let (result, choice) = match consent.link(&link.message, url.as_str()).await {
                Some(true) if crate::link::open(&url) => (accepted(), "opened"),
                Some(true) => (accepted(), "accepted"),
                Some(false) => (ElicitResult::decline(), "declined"),
                None => (ElicitResult::cancel(), "cancelled"),
            };
            (result, choice, url.to_string())
        }
    };
    (events)(&Event::UrlElicitation {
        message: link.message.clone(),
        url,
        elicitation_id: link.elicitation_id.clone(),
        choice: choice.to_owned(),
    });
    result
}

/// A URL-mode acceptance: no content (the person's answer is given on the page).
fn accepted() -> ElicitResult {
    ElicitResult {
        action: moat::types::ElicitAction::Accept,
        content: None,
        meta: None,
    }
}

/// Reports each `notifications/elicitation/complete` the gateway sends, until the client
/// goes away.
async fn follow_completions(
    mut notes: tokio::sync::broadcast::Receiver<moat::ServerNotification>,
    events: EventSink,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match notes.recv().await {
            Ok(note) if note.method == NOTIFICATIONS_ELICITATION_COMPLETE => {
                if let Some(id) = note
                    .params
                    .as_ref()
                    .and_then(|p| p.get("elicitationId"))
                    .and_then(Value::as_str)
                {
                    (events)(&Event::ElicitationComplete {
                        elicitation_id: id.to_owned(),
                    });
                }
            }
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => break,
        }
    }
}

/// The working directory, as the default root.
pub fn default_roots() -> Vec<std::path::PathBuf> {
    std::env::current_dir().map(|d| vec![d]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A completion the gateway sends is reported; other notifications are not.
    #[tokio::test]
    async fn completions_are_reported() {
        let (tx, rx) = tokio::sync::broadcast::channel(8);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let events: EventSink = Arc::new(move |e: &Event| {
            if let Ok(mut s) = sink.lock() {
                s.push(e.clone());
            }
        });
        let task = tokio::spawn(follow_completions(rx, events));
        for (method, params) in [
            (
                "notifications/message",
                serde_json::json!({"level": "info", "data": "x"}),
            ),
            (
                NOTIFICATIONS_ELICITATION_COMPLETE,
                serde_json::json!({"elicitationId": "el-1"}),
            ),
        ] {
            tx.send(moat::ServerNotification {
                method: method.into(),
                params: Some(params),
            })
            .expect("send");
        }
        drop(tx);
        task.await.expect("the follower ends with the client");
        let seen = seen.lock().expect("events").clone();
        assert_eq!(
            seen,
            vec![Event::ElicitationComplete {
                elicitation_id: "el-1".into()
            }]
        );
    }
}
