//! A downstream server's `sampling/createMessage`, answered with the chat's own model. The
//! gateway has already applied `[[policy.requests]]` (and asked the person, for `ask`)
//! before the request reaches the chat.

use std::sync::Arc;

use moat::protocol::ErrorObject;
use moat::types::{
    CreateMessageRequestParams, CreateMessageResult, Role, SamplingMessageContentBlock,
};

use crate::event::{Event, EventSink};
use crate::message::{StopReason, Turn};
use crate::provider::{Provider, Request};

/// Answers one sampling request with `provider`'s `model` (no tools: the server asked for
/// text).
pub async fn answer(
    provider: Arc<dyn Provider>,
    model: String,
    events: EventSink,
    params: CreateMessageRequestParams,
) -> Result<CreateMessageResult, ErrorObject> {
    let mut turns = Vec::new();
    for message in &params.messages {
        let text: Vec<String> = message
            .content
            .blocks()
            .iter()
            .map(|b| match b {
                SamplingMessageContentBlock::Text(t) => t.text.clone(),
                _ => "[non-text content omitted]".to_owned(),
            })
            .collect();
        let text = text.join("\n");
        turns.push(match message.role {
            Role::Assistant => Turn::Assistant {
                text,
                tool_calls: Vec::new(),
            },
            _ => Turn::User { text },
        });
    }
    if turns.is_empty() {
        return Err(ErrorObject::new(
            -32602,
            "sampling request without messages",
        ));
    }
    let request = Request {
        model: &model,
        system: params.system_prompt.as_deref(),
        turns: &turns,
        tools: &[],
        max_tokens: u32::try_from(params.max_tokens).ok().filter(|n| *n > 0),
    };
    // The sampled text is the server's, not the user's answer: it is not streamed as one.
    let quiet = |event: &Event| {
        if matches!(event, Event::Retry { .. }) {
            events(event);
        }
    };
    let reply = provider
        .complete(request, &quiet)
        .await
        .map_err(|e| ErrorObject::new(-32603, format!("the model: {e}")))?;
    // A refusal is the model's answer too; the server is told by the stop reason.
    let text = match &reply.refusal {
        Some(r) if reply.text.is_empty() => r.clone(),
        Some(r) => format!("{}\n{r}", reply.text),
        None => reply.text.clone(),
    };
    events(&Event::Sampled { text: text.clone() });
    let stop = match reply.stop {
        StopReason::EndTurn => "endTurn",
        StopReason::MaxTokens => "maxTokens",
        StopReason::ToolUse => "toolUse",
        StopReason::Refusal => "refusal",
        _ => "endTurn",
    };
    Ok(CreateMessageResult {
        role: Role::Assistant,
        content: SamplingMessageContentBlock::text(text).into(),
        model,
        stop_reason: Some(stop.to_owned()),
        meta: None,
    })
}
