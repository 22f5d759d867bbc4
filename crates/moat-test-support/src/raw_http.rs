//! HTTP requests written by hand over a plain TCP connection, as a probe or a bare-bones
//! client sends them: a `GET` for a status (health probes), and one 2026-07-28 request with
//! the headers and `_meta` that revision requires. No client library decides anything for
//! the test (no retries, no redirects, no header of its own).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

/// How long a reply may take.
const REPLY_WITHIN: Duration = Duration::from_secs(30);

/// What came back.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code (0 if the status line could not be read).
    pub status: u16,
    /// The response head's header lines, as sent.
    pub head: String,
    /// The JSON in the body (between its first `{` and last `}`, so a chunked body reads
    /// too); `Null` when there is none.
    pub json: Value,
}

impl Reply {
    /// The value of header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Sends `request` (a whole HTTP/1.1 request with `Connection: close`) to `authority`.
pub fn exchange(authority: &str, request: &str) -> Option<Reply> {
    let mut tcp = TcpStream::connect(authority).ok()?;
    tcp.set_read_timeout(Some(REPLY_WITHIN)).ok()?;
    tcp.write_all(request.as_bytes()).ok()?;
    let mut out = String::new();
    tcp.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let json = body
        .find('{')
        .and_then(|start| body.rfind('}').map(|end| &body[start..=end]))
        .and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or(Value::Null);
    Some(Reply {
        status,
        head: head.to_owned(),
        json,
    })
}

/// The status of `GET path` at `authority`, sent with a `Host` no allow-list names (as an
/// orchestrator's probe, by address); `None` when nothing answers.
pub fn get_status(authority: &str, path: &str) -> Option<u16> {
    let reply = exchange(
        authority,
        &format!("GET {path} HTTP/1.1\r\nHost: 10.0.0.7\r\nConnection: close\r\n\r\n"),
    )?;
    (reply.status != 0).then_some(reply.status)
}

/// One 2026-07-28 request to `http://AUTHORITY/mcp`: `_meta` carries the revision, a
/// client that answers form elicitation, and its info; `Mcp-Method` and `Mcp-Name` mirror
/// the body; `bearer` adds an `Authorization` header.
pub fn modern_request(
    authority: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
    bearer: Option<&str>,
) -> Option<Reply> {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let name_header = name
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    let auth_header = bearer
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\n{auth_header}\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name_header}\
         Content-Length: {len}\r\nConnection: close\r\n\r\n{body}",
        len = body.len()
    );
    exchange(authority, &request)
}
