//! What the user brings into a prompt from the servers: a resource named `@uri` in the
//! text, or an MCP prompt (`/prompt NAME key=value…`), both read through the gateway.

use std::collections::BTreeMap;

use moat::Client;
use moat::types::{ContentBlock, ResourceContents};

use crate::ChatError;

/// `prompt` with every `@scheme://…` word followed by that resource's text.
pub async fn resources(client: &Client, prompt: &str) -> Result<String, ChatError> {
    let mut out = prompt.to_owned();
    for word in prompt.split_whitespace() {
        let Some(uri) = word.strip_prefix('@').filter(|u| u.contains("://")) else {
            continue;
        };
        let read = client
            .read_resource(uri)
            .await
            .map_err(|e| ChatError::Host(format!("reading {uri}: {e}")))?;
        for contents in &read.contents {
            let body = match contents {
                ResourceContents::Text(t) => t.text.clone(),
                ResourceContents::Blob(_) => "[binary content not shown]".to_owned(),
                _ => "[content not shown]".to_owned(),
            };
            out.push_str(&format!(
                "\n\n<resource uri=\"{uri}\">\n{body}\n</resource>"
            ));
        }
    }
    Ok(out)
}

/// The text of the MCP prompt `name` filled with `args` (`key=value` words).
pub async fn prompt(client: &Client, name: &str, args: &[&str]) -> Result<String, ChatError> {
    let mut arguments = BTreeMap::new();
    for arg in args {
        let Some((k, v)) = arg.split_once('=') else {
            return Err(ChatError::Settings(format!(
                "/prompt {name}: {arg:?} is not key=value"
            )));
        };
        arguments.insert(k.to_owned(), v.to_owned());
    }
    let result = client
        .get_prompt(name, arguments)
        .await
        .map_err(|e| ChatError::Host(format!("prompt {name}: {e}")))?;
    let parts: Vec<String> = result
        .messages
        .iter()
        .map(|m| match &m.content {
            ContentBlock::Text(t) => t.text.clone(),
            _ => "[non-text content omitted]".to_owned(),
        })
        .collect();
    Ok(parts.join("\n\n"))
}
