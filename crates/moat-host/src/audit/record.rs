//! One audit record as stored ([`AuditRecord`], also what `moat audit --json` prints), the
//! clock it is stamped with, and what a reader asks for ([`AuditQuery`]).

use serde::{Deserialize, Serialize};

use super::redact::{Redactor, args_digest};
use crate::config::audit::AuditConfig;

/// One tool call, as stored. JSON output of `moat audit --json` is this type serialized.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Unix time in milliseconds when the call arrived.
    pub time_ms: i64,
    /// What is recorded: `call` (a `tools/call`; also when empty), or a request a server
    /// made of the client — `sampling`, `elicitation`, `roots` — whose `tool` is its
    /// method.
    #[serde(default)]
    pub kind: String,
    /// Who: the upstream session or connection id.
    pub session: String,
    /// The client's name/version from `initialize`, when known.
    pub client: Option<String>,
    /// The user the call came from: the access token's subject over HTTP with `[auth]`,
    /// the local OS user over stdio; `None` when nobody vouched for the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The OAuth client the caller's token was issued to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The downstream server's configured name.
    pub server: String,
    /// The tool's name on its server.
    pub tool: String,
    /// The name the client saw (`server__tool`).
    pub exposed_name: String,
    /// SHA-256 hex of the canonical arguments (object keys sorted); see [`args_digest`].
    pub args_digest: String,
    /// The arguments themselves, redacted; only with `full_arguments`.
    pub arguments: Option<serde_json::Value>,
    /// `allow`, `ask`, `deny` or `error` ([`Decision`](super::Decision)).
    pub decision: String,
    /// Which rule decided, e.g. `rule 2 (no-writes)`, `default`, `pin changed`, `schema`
    /// (the gateway's own: [`Refusal`](super::Refusal)).
    pub rule: String,
    /// How consent went, e.g. `approved once via elicitation`; `None` when none was asked.
    pub consent: Option<String>,
    /// `ok`, `tool_error`, `refused`, `failed` or `cancelled` ([`Outcome`](super::Outcome)).
    pub outcome: String,
    /// Time from arrival to answer, in microseconds.
    pub duration_us: u64,
    /// Size of the result sent back, in bytes.
    pub result_bytes: u64,
    /// What went wrong, when something did.
    pub error: Option<String>,
}

impl AuditRecord {
    /// Fills `args_digest`, and `arguments` when `config.full_arguments`, from a call's arguments.
    ///
    /// The digest is taken over the *redacted* arguments: a digest of a short password could be
    /// brute-forced offline by anyone who can read the store.
    pub fn set_arguments(
        &mut self,
        args: &serde_json::Value,
        config: &AuditConfig,
        redactor: &Redactor,
    ) {
        let redacted = redactor.redact(args);
        self.args_digest = args_digest(&redacted);
        self.arguments = config.full_arguments.then_some(redacted);
    }
}

/// Unix time now, in milliseconds (for [`AuditRecord::time_ms`]).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The unix time in milliseconds `ago` before now (for `--since`: `since_ms: Some(ms_ago(d))`).
pub fn ms_ago(ago: std::time::Duration) -> i64 {
    now_ms().saturating_sub(i64::try_from(ago.as_millis()).unwrap_or(i64::MAX))
}

/// What to read back. Every filter is optional; results come oldest first, newest last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only calls that arrived at or after this unix time in milliseconds.
    pub since_ms: Option<i64>,
    /// A glob matched against the exposed name (`fs__read_*`) or against `server/tool` (`fs/*`).
    pub tool: Option<String>,
    /// Only calls to this server.
    pub server: Option<String>,
    /// Only calls of this user (the record's `subject`).
    pub user: Option<String>,
    /// At most this many records: the newest ones.
    pub limit: Option<usize>,
}
