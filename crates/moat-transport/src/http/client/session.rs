//! The handshake era's session (2025-03-26 … 2025-11-25): the standalone GET stream,
//! transparent re-initialisation when the server forgets the session, and its deletion.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, StatusCode};
use moat_protocol::RequestId;
use moat_protocol::jsonrpc::{self, Message};
use serde_json::Value;
use tokio::sync::oneshot;

use super::auth;
use super::body;
use super::errors::{challenge, describe_status, jsonrpc_error};
use super::wire::{backoff, get, note_initialize_result, post, session_headers};
use super::{Shared, is_event_stream};
use crate::http::headers::{LAST_EVENT_ID, SESSION_ID};

/// Open (or reopen) the standalone GET stream. The receiver completes once the server has
/// answered the first GET (with the stream or with a refusal), or the attempt failed.
pub(super) fn start_get_stream(shared: &Arc<Shared>) -> oneshot::Receiver<()> {
    let (answered, answered_rx) = oneshot::channel();
    let task = shared.clone();
    let handle = shared.spawn(async move { standalone_stream(&task, answered).await });
    if let Some(old) = shared.state().get_stream.replace(handle) {
        old.abort();
    }
    answered_rx
}

/// The handshake era's GET stream: server requests and notifications outside any request.
/// Reconnects when it drops, honouring `retry` and resuming with `Last-Event-ID`. `answered`
/// is told when the first GET has its answer.
async fn standalone_stream(shared: &Arc<Shared>, answered: oneshot::Sender<()>) {
    let mut answered = Some(answered);
    let mut last_id: Option<String> = None;
    let mut retry: Option<Duration> = None;
    let mut failures = 0u32;
    let limit = shared.options.max_message_bytes;
    loop {
        let (mut headers, generation, with_session) = session_headers(shared);
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(v) = last_id
            .as_deref()
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            headers.insert(HeaderName::from_static(LAST_EVENT_ID), v);
        }
        let mut progressed = false;
        let got = get(shared, headers).await;
        if let Some(tell) = answered.take() {
            let _ = tell.send(());
        }
        match got {
            Ok(resp) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                tracing::debug!("the server offers no standalone SSE stream (405)");
                return;
            }
            Ok(resp) if resp.status() == StatusCode::NOT_FOUND && with_session => {
                drop(resp);
                if let Err(why) = reinit(shared, generation).await {
                    tracing::warn!(%why, "the session is gone and re-initialising failed");
                }
                return; // A successful re-initialisation opened a new stream.
            }
            Ok(resp) if resp.status().is_success() && is_event_stream(&resp) => {
                let mut events = body::events(resp, limit);
                while let Some(item) = events.next().await {
                    match item {
                        Ok(ev) => {
                            progressed = true;
                            if let Some(id) = &ev.id {
                                last_id = Some(id.clone());
                            }
                            if let Some(ms) = ev.retry {
                                retry = Some(Duration::from_millis(ms));
                            }
                            if !ev.is_message() {
                                continue;
                            }
                            if let Some(id) = &ev.id
                                && !shared.state().seen.insert(id)
                            {
                                continue;
                            }
                            shared.deliver(ev.data).await;
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, "the standalone stream failed");
                            break;
                        }
                    }
                }
            }
            Ok(resp) => {
                tracing::debug!(status = %resp.status(), "the standalone stream was refused");
            }
            Err(e) if e.is_auth() => {
                // Trying again would only ask for credentials again.
                tracing::warn!(error = %e, "giving up on the standalone SSE stream");
                return;
            }
            Err(e) => tracing::debug!(error = %e, "could not open the standalone stream"),
        }
        if progressed {
            failures = 0;
        }
        failures += 1;
        if failures > shared.options.reconnect_attempts {
            tracing::warn!(url = %shared.url, "giving up on the standalone SSE stream");
            return;
        }
        tokio::time::sleep(backoff(shared, retry, failures)).await;
    }
}

/// The server forgot our session: replay `initialize` (under an id of our own, its answer
/// swallowed) and `notifications/initialized`, and take the new session. Concurrent callers
/// that saw the same generation fail re-initialise once.
pub(super) async fn reinit(shared: &Arc<Shared>, failed_generation: u64) -> Result<(), String> {
    let _one = shared.reinit.lock().await;
    let (init, note, n) = {
        let mut state = shared.state();
        if state.generation != failed_generation {
            return Ok(()); // Someone else already did it.
        }
        state.reinits += 1;
        (
            state.init_request.clone(),
            state.initialized_note.clone(),
            state.reinits,
        )
    };
    let init = init.ok_or("there is no initialize request to replay")?;
    let private = RequestId::from(format!("moat-transport-reinit-{n}"));
    let mut request: Value =
        serde_json::from_str(&init).map_err(|e| format!("cannot replay initialize: {e}"))?;
    request["id"] = serde_json::to_value(&private).map_err(|e| e.to_string())?;
    let body = Bytes::from(request.to_string());
    tracing::info!(url = %shared.url, "the server forgot our session; re-initialising");
    let mut headers = shared.headers();
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let resp = post(shared, body, headers).await?;
    let status = resp.status();
    if !status.is_success() {
        let url = resp.url().clone();
        let ch = challenge(&resp);
        let text = body::read_error_body(resp).await;
        return Err(match jsonrpc_error(&text) {
            Some(e) => format!("initialize was refused: {} (code {})", e.message, e.code),
            None => describe_status(shared, status, &url, &text, ch.as_deref()),
        });
    }
    let session = resp
        .headers()
        .get(SESSION_ID)
        .filter(|v| v.to_str().is_ok_and(|s| !s.is_empty()))
        .cloned();
    let answer = read_private_answer(shared, resp, &private).await?;
    match Message::parse(&answer) {
        Ok(Message::Response(_)) => {}
        Ok(Message::Error(e)) => {
            return Err(format!(
                "initialize was refused: {} (code {})",
                e.error.message, e.error.code
            ));
        }
        _ => return Err("initialize got no readable answer".to_owned()),
    }
    {
        let mut state = shared.state();
        state.session = session;
        state.generation += 1;
        state.seen.clear();
    }
    note_initialize_result(shared, &answer);
    if let Some(note) = note {
        let (mut headers, _, _) = session_headers(shared);
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let resp = post(shared, Bytes::from(note), headers).await?;
        if !resp.status().is_success() {
            return Err(format!(
                "notifications/initialized was refused with HTTP {}",
                resp.status()
            ));
        }
        // Not waited for: whoever is re-initialising has a request of its own to resend.
        drop(start_get_stream(shared));
    }
    Ok(())
}

/// Read the answer to the replayed `initialize` (JSON or SSE), ignoring anything else.
async fn read_private_answer(
    shared: &Shared,
    resp: reqwest::Response,
    private: &RequestId,
) -> Result<String, String> {
    let limit = shared.options.max_message_bytes;
    let answers = |line: &str| {
        matches!(Message::parse(line),
            Ok(Message::Response(jsonrpc::Response { id, .. }))
            | Ok(Message::Error(jsonrpc::ErrorResponse { id: Some(id), .. })) if id == *private)
    };
    if !is_event_stream(&resp) {
        let text = body::read_limited(resp, limit, shared.options.request_timeout)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(text);
    }
    let mut events = body::events(resp, limit);
    let wait = shared
        .options
        .request_timeout
        .unwrap_or(Duration::from_secs(300));
    let read = async {
        while let Some(item) = events.next().await {
            let ev = item.map_err(|e| e.to_string())?;
            if ev.is_message() && answers(&ev.data) {
                return Ok(ev.data);
            }
        }
        Err("the stream ended before the answer to initialize".to_owned())
    };
    tokio::time::timeout(wait, read)
        .await
        .unwrap_or_else(|_| Err(format!("no answer to initialize within {wait:?}")))
}

/// On close: end the handshake-era session (a 405 means the server does not allow it).
pub(super) async fn delete_session(shared: &Shared) {
    let (mut headers, _, had) = session_headers(shared);
    if !had {
        return;
    }
    headers.remove(LAST_EVENT_ID);
    let wait = shared
        .options
        .request_timeout
        .unwrap_or(Duration::from_secs(5))
        .min(Duration::from_secs(5));
    let fut = auth::send(shared, Method::DELETE, &shared.url, headers, None, None);
    match tokio::time::timeout(wait, fut).await {
        Ok(Ok(resp)) => {
            tracing::debug!(status = %resp.status(), "deleted the session");
        }
        Ok(Err(e)) => tracing::debug!(error = %e, "could not delete the session"),
        Err(_) => tracing::debug!("deleting the session timed out"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use crate::connection::{Inbound, Outgoing};
    use crate::framing::Frame;
    use crate::http::client::{ClientOptions, TransportMode, connect};

    type Log = Arc<Mutex<Vec<String>>>;

    /// One request per connection: read it, note it, answer it (the GET late, then held open).
    async fn serve(mut sock: TcpStream, log: Log) -> std::io::Result<()> {
        let mut buf = Vec::new();
        let head_end = loop {
            let mut chunk = [0u8; 4096];
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut body = buf[head_end + 4..].to_vec();
        while body.len() < len {
            let mut chunk = vec![0u8; len - body.len()];
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        if head.starts_with("get") {
            tokio::time::sleep(Duration::from_millis(300)).await;
            log.lock().expect("log").push("GET answered".to_owned());
            sock.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
            )
            .await?;
            tokio::time::sleep(Duration::from_secs(10)).await;
            return Ok(());
        }
        let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let method = msg["method"].as_str().unwrap_or("").to_owned();
        log.lock().expect("log").push(format!("POST {method}"));
        let reply = match method.as_str() {
            "initialize" => Some(json!({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "serverInfo": {"name": "s", "version": "1"}
            }})),
            _ if msg.get("id").is_none() => None,
            _ => Some(json!({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": []}})),
        };
        let response = match reply {
            Some(v) => {
                let text = v.to_string();
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                )
            }
            None => {
                "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned()
            }
        };
        sock.write_all(response.as_bytes()).await
    }

    async fn answer(inbound: &mut tokio::sync::mpsc::Receiver<Inbound>) -> Value {
        match tokio::time::timeout(Duration::from_secs(5), inbound.recv()).await {
            Ok(Some(Inbound::Frame(Frame::Line(line)))) => {
                serde_json::from_str(&line).expect("JSON")
            }
            other => panic!("no answer: {other:?}"),
        }
    }

    /// A server may send a request outside any of ours (on the standalone stream) as soon as
    /// the session is initialized, and drop it while that stream is not open yet: the request
    /// after `notifications/initialized` waits until the server has answered the GET.
    #[tokio::test]
    async fn the_standalone_stream_is_open_before_the_next_request() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        let log = Log::default();
        let server_log = log.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock, server_log.clone()));
            }
        });
        let options = ClientOptions::default().mode(TransportMode::StreamableHttp);
        let mut conn = connect(&url, options).await.expect("connect");
        let send = |v: Value| Outgoing::new(v.to_string(), None);
        conn.outbound
            .send(send(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "c", "version": "1"}
                }}),
            ))
            .await
            .expect("send");
        assert_eq!(answer(&mut conn.inbound).await["id"], 1);
        conn.outbound
            .send(send(
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            ))
            .await
            .expect("send");
        conn.outbound
            .send(send(
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
            ))
            .await
            .expect("send");
        assert_eq!(answer(&mut conn.inbound).await["id"], 2);
        let log = log.lock().expect("log").clone();
        let at = |what: &str| log.iter().position(|e| e == what);
        assert!(
            at("GET answered") < at("POST tools/list") && at("GET answered").is_some(),
            "{log:?}"
        );
    }
}
