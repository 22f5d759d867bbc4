//! Step-up for one tool: a handler refuses a caller whose token lacks the scopes the tool
//! needs with a JSON-RPC error of moat's own code, and the HTTP server, seeing that error
//! as the whole answer, turns it into 403 `insufficient_scope` with the scopes to ask for,
//! which is what an MCP client acts on (it gets a token with them and retries).

use moat_protocol::ErrorObject;
pub use moat_protocol::error::INSUFFICIENT_SCOPE;
use moat_protocol::jsonrpc::Message;
use serde_json::json;

/// The error that refuses a call whose caller lacks one of `scopes`.
pub fn insufficient_scope(scopes: &[String]) -> ErrorObject {
    let scope = scopes.join(" ");
    ErrorObject::new(
        INSUFFICIENT_SCOPE,
        format!("Forbidden: the access token needs the scopes {scope:?}"),
    )
    .with_data(json!({ "scope": scope }))
}

/// The scopes an answer refuses the call for lacking, if it is such a refusal.
pub(crate) fn scopes_needed(answer: &str) -> Option<Vec<String>> {
    // Every answer passes here: most are let go without being parsed.
    if !answer.contains("-32043") {
        return None;
    }
    let Ok(Message::Error(e)) = Message::parse(answer) else {
        return None;
    };
    if e.error.code != INSUFFICIENT_SCOPE {
        return None;
    }
    let scope = e.error.data.as_ref()?.get("scope")?.as_str()?;
    Some(scope.split_whitespace().map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scopes_come_back_out_of_the_answer() {
        let error = insufficient_scope(&["db:write".into(), "mcp:tools".into()]);
        let line = moat_protocol::jsonrpc::encode_error(Some(&1.into()), &error);
        assert_eq!(
            scopes_needed(&line),
            Some(vec!["db:write".to_owned(), "mcp:tools".to_owned()])
        );
        let other = ErrorObject::internal("x");
        let line = moat_protocol::jsonrpc::encode_error(Some(&1.into()), &other);
        assert_eq!(scopes_needed(&line), None);
        assert_eq!(
            scopes_needed(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            None
        );
    }
}
