//! `RequestContext::client_info`: who the client is, from `initialize` in the handshake era
//! and from each request's `_meta` in 2026-07-28.

mod support;
use support::pair;

use moat::transport::{Connection, Limits};
use moat::{ClientBuilder, NoArgs, ProtocolVersion, RequestContext, Server, VersionPreference};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

/// A server whose one tool answers with the client's name and version, or "unknown".
fn server() -> Server {
    Server::new("who", "1").tool_with_context(
        "whoami",
        "Who is calling",
        |ctx: RequestContext, _: NoArgs| async move {
            Ok::<_, String>(match ctx.client_info() {
                Some(info) => format!("{} {}", info.name, info.version),
                None => "unknown".to_owned(),
            })
        },
    )
}

#[tokio::test]
async fn both_eras_name_the_client() {
    for version in [
        ProtocolVersion::V2024_11_05,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2026_07_28,
    ] {
        let (s, c) = pair();
        let _peer = server().start(s);
        let client = ClientBuilder::new("probe", "9.1")
            .protocol(VersionPreference::Exact(version))
            .connect(c)
            .await
            .unwrap();
        let out = client.call_tool("whoami", json!({})).await.unwrap();
        assert_eq!(out.content[0].as_text(), Some("probe 9.1"), "{version}");
    }
}

/// The server on one end of a pipe, and raw JSON lines on the other.
struct Raw {
    _peer: moat::Peer,
    lines: BufReader<ReadHalf<DuplexStream>>,
    writer: WriteHalf<DuplexStream>,
}

impl Raw {
    fn start() -> Raw {
        let (a, b) = tokio::io::duplex(1 << 16);
        let (ar, aw) = tokio::io::split(a);
        let peer = server().start(Connection::from_lines(
            BufReader::new(ar),
            aw,
            Limits::default(),
        ));
        let (br, bw) = tokio::io::split(b);
        Raw {
            _peer: peer,
            lines: BufReader::new(br),
            writer: bw,
        }
    }

    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.writer.write_all(line.as_bytes()).await.unwrap();
    }

    async fn receive(&mut self) -> Value {
        let mut line = String::new();
        self.lines.read_line(&mut line).await.unwrap();
        serde_json::from_str(&line).unwrap()
    }
}

/// Sends one 2026-07-28 `tools/call` with this `_meta` and returns the tool's text.
async fn modern_call(meta: Value) -> String {
    let mut raw = Raw::start();
    raw.send(json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "_meta": meta, "name": "whoami", "arguments": {} }
    }))
    .await;
    let answer = raw.receive().await;
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"))
        .to_owned()
}

#[tokio::test]
async fn a_modern_request_without_client_info_has_none() {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    assert_eq!(modern_call(meta).await, "unknown");
}

#[tokio::test]
async fn client_info_of_the_wrong_shape_is_none_and_the_call_is_served() {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": 42
    });
    assert_eq!(modern_call(meta).await, "unknown");
}

#[tokio::test]
async fn each_modern_request_speaks_for_itself() {
    let meta = |name: &str| {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": { "name": name, "version": "2" }
        })
    };
    assert_eq!(modern_call(meta("first")).await, "first 2");
    assert_eq!(modern_call(meta("second")).await, "second 2");
}

/// Before 2026-07-28 the client named itself once, in `initialize`; a request's `_meta`
/// cannot rename it.
#[tokio::test]
async fn a_handshake_request_cannot_rename_its_client() {
    let mut raw = Raw::start();
    raw.send(json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": { "name": "real", "version": "1" }
        }
    }))
    .await;
    raw.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
        .await;
    raw.send(json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {
            "_meta": { "io.modelcontextprotocol/clientInfo": { "name": "forged", "version": "6" } },
            "name": "whoami", "arguments": {}
        }
    }))
    .await;
    let _initialized = raw.receive().await;
    let answer = raw.receive().await;
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "real 1", "{answer}");
}
