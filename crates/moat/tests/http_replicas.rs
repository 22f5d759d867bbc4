//! Two replicas of one HTTP server sharing a session directory, over real sockets, with
//! requests sent to either as a load balancer without stickiness would:
//! - a session opened on one is served through the other (forwarded), including a call
//!   that asks the client a question whose answer arrives at the other replica;
//! - a DELETE through either ends the session everywhere;
//! - when the replica that held a session dies, the other takes the session over (same id,
//!   same client info, same log level), the call that was in flight on the dead replica is
//!   answered with an error through the stream it was forwarded on, and a client resuming a
//!   dead replica's stream learns which of its requests failed;
//! - the events of a dead replica's stream that the client had not seen are replayed from
//!   the directory on the replica that took the session over, each once, in order;
//! - a replica that was only cut off while another took its session over drops its stale
//!   copy within seconds, and forwards the session's requests to the new owner.
//!
//! A replica "dies" by having its runtime shut down: its sockets close mid-stream, as when
//! the process is killed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use moat::transport::http::server::{
    HttpServerHandle, HttpServerOptions, MemoryDirectory, Replica, Replication,
};
use moat::{NoArgs, RequestContext, Server};
use moat_protocol::types::{ElicitRequestParams, ElicitResult};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

const WITHIN: Duration = Duration::from_secs(30);
const VERSION: &str = "2025-11-25";

/// The subscriptions a replica's server was asked for, in order (`uri`, subscribed).
type Subscribed = Arc<std::sync::Mutex<Vec<(String, bool)>>>;

fn server(release: Arc<Notify>, subscribed: Subscribed) -> Server {
    let never = release.clone();
    Server::new("replicated", "1.0")
        .resource("x://watched", "Watched", || async { Ok::<_, String>("v1") })
        .on_subscribe(move |uri, on| {
            subscribed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((uri.to_owned(), on));
        })
        .tool_with_context(
            "whoami",
            "The client's name and log level",
            |ctx: RequestContext, _: NoArgs| async move {
                let name = ctx
                    .client_info()
                    .map(|i| i.name.clone())
                    .unwrap_or_default();
                Ok::<_, String>(format!("{name} {:?}", ctx.log_level()))
            },
        )
        .tool_with_context(
            "wait",
            "Say it started, then wait to be released",
            move |ctx: RequestContext, _: NoArgs| {
                let release = release.clone();
                async move {
                    ctx.progress(0.0, None, Some("started".into())).await;
                    release.notified().await;
                    Ok::<_, String>("released")
                }
            },
        )
        .tool_with_context(
            "steps",
            "Five progress steps at once, then wait to be released",
            move |ctx: RequestContext, _: NoArgs| {
                let release = never.clone();
                async move {
                    for step in 1..=5 {
                        ctx.progress(f64::from(step), Some(5.0), None).await;
                    }
                    release.notified().await;
                    Ok::<_, String>("released")
                }
            },
        )
        .tool_with_context(
            "count",
            "Five progress steps, a little apart",
            |ctx: RequestContext, _: NoArgs| async move {
                for step in 1..=5 {
                    ctx.progress(f64::from(step), Some(5.0), None).await;
                    tokio::time::sleep(Duration::from_millis(40)).await;
                }
                Ok::<_, String>("counted")
            },
        )
        .tool_with_context(
            "ask",
            "Ask the client a question",
            |ctx: RequestContext, _: NoArgs| async move {
                let params: ElicitRequestParams = serde_json::from_value(json!({
                    "message": "Name?",
                    "requestedSchema": {"type": "object",
                        "properties": {"name": {"type": "string"}}}
                }))
                .map_err(|e| e.to_string())?;
                let answer: ElicitResult = ctx.elicit(params).await.map_err(|e| e.to_string())?;
                Ok::<_, String>(serde_json::to_string(&answer.content).unwrap_or_default())
            },
        )
}

/// A replica on a runtime of its own, so that it can die with its sockets.
struct ReplicaProcess {
    runtime: Option<tokio::runtime::Runtime>,
    addr: SocketAddr,
    subscribed: Subscribed,
    /// The replica as the directory knows it.
    replica: Replica,
    handle: HttpServerHandle,
}

impl ReplicaProcess {
    async fn start(directory: Arc<MemoryDirectory>) -> ReplicaProcess {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        // Calls to `wait` are never released: they are in flight when the replica dies.
        let for_server = Arc::new(Notify::new());
        let subscribed = Subscribed::default();
        let for_hook = subscribed.clone();
        let (tx, rx) = oneshot::channel();
        runtime.spawn(async move {
            // The replica's URL is known once bound: bind a port first, then serve on it.
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
            let addr = probe.local_addr().expect("addr");
            drop(probe);
            let replica = Replica::new(format!("http://{addr}"));
            let mut options = HttpServerOptions::default();
            options.replication = Some(Replication {
                replica: replica.clone(),
                directory,
            });
            let http = server(for_server, for_hook)
                .bind_http(addr, options)
                .await
                .expect("bind");
            let _ = tx.send((addr, replica, http.handle()));
            let _ = http.run().await;
        });
        let (addr, replica, handle) = tokio::time::timeout(WITHIN, rx)
            .await
            .expect("bound in time")
            .expect("bound");
        ReplicaProcess {
            runtime: Some(runtime),
            addr,
            subscribed,
            replica,
            handle,
        }
    }

    /// Dies at once: every task and socket of the replica goes.
    fn kill(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for ReplicaProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn post(addr: SocketAddr, session: Option<&str>, body: Value) -> reqwest::RequestBuilder {
    let mut r = reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .body(body.to_string());
    if let Some(id) = session {
        r = r.header("mcp-session-id", id);
    }
    r
}

/// A GET of the session's stream (add `last-event-id` to resume one).
fn get(addr: SocketAddr, session: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .get(format!("http://{addr}/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", VERSION)
}

async fn initialize(addr: SocketAddr) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "roaming-client", "version": "3"}}});
    let r = post(addr, None, init).send().await.expect("initialize");
    assert_eq!(r.status(), StatusCode::OK);
    let id = r.headers()["mcp-session-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let r = post(
        addr,
        Some(&id),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .send()
    .await
    .expect("initialized");
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    id
}

fn call(id: i64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": {}, "_meta": {"progressToken": id}}})
}

/// An SSE (or JSON) answer, read event by event.
struct Events {
    response: reqwest::Response,
    buffer: String,
    json: bool,
}

/// One SSE event: its id and its data.
#[derive(Debug)]
struct Event {
    id: Option<String>,
    data: Option<Value>,
}

impl Events {
    fn new(response: reqwest::Response) -> Events {
        let json = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        Events {
            response,
            buffer: String::new(),
            json,
        }
    }

    /// The next event, or `None` at the end of the stream.
    async fn next(&mut self) -> Option<Event> {
        if self.json {
            self.json = false;
            let text = tokio::time::timeout(WITHIN, self.response.chunk())
                .await
                .expect("an answer in time")
                .ok()??;
            return Some(Event {
                id: None,
                data: serde_json::from_slice(&text).ok(),
            });
        }
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let mut parsed = Event {
                    id: None,
                    data: None,
                };
                for line in event.lines() {
                    if let Some(id) = line.strip_prefix("id:") {
                        parsed.id = Some(id.trim().to_owned());
                    }
                    if let Some(data) = line.strip_prefix("data:") {
                        parsed.data = serde_json::from_str(data.trim()).ok();
                    }
                }
                if parsed.id.is_some() || parsed.data.is_some() {
                    return Some(parsed);
                }
                continue;
            }
            let chunk = tokio::time::timeout(WITHIN, self.response.chunk())
                .await
                .expect("an event in time")
                .ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The answer to request `id` (skipping other events), or `None` if the stream ends.
    async fn answer(&mut self, id: i64) -> Option<Value> {
        let answer = async {
            while let Some(e) = self.next().await {
                if let Some(data) = e.data
                    && data["id"] == id
                    && (data.get("result").is_some() || data.get("error").is_some())
                {
                    return Some(data);
                }
            }
            None
        };
        tokio::time::timeout(WITHIN, answer)
            .await
            .expect("an answer in time")
    }
}

fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_served_by_either_replica() {
    let directory = Arc::new(MemoryDirectory::default());
    let a = ReplicaProcess::start(directory.clone()).await;
    let b = ReplicaProcess::start(directory.clone()).await;
    let session = initialize(a.addr).await;
    assert_eq!(directory.len(), 1, "the session is recorded");

    // Through B, forwarded to A.
    let r = post(b.addr, Some(&session), call(2, "whoami"))
        .send()
        .await
        .expect("call through B");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.headers()["mcp-session-id"].to_str().ok(),
        Some(session.as_str())
    );
    let answer = Events::new(r).answer(2).await.expect("answered");
    assert_eq!(text_of(&answer), "roaming-client None");

    // A question asked on a call made through B, answered through A.
    let r = post(b.addr, Some(&session), call(3, "ask"))
        .send()
        .await
        .expect("ask through B");
    let mut events = Events::new(r);
    let question = loop {
        let e = events.next().await.expect("the question comes");
        if let Some(d) = e.data
            && d["method"] == "elicitation/create"
        {
            break d;
        }
    };
    let reply = json!({"jsonrpc": "2.0", "id": question["id"],
                       "result": {"action": "accept", "content": {"name": "Ada"}}});
    let r = post(a.addr, Some(&session), reply)
        .send()
        .await
        .expect("reply through A");
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let answer = events.answer(3).await.expect("answered");
    assert_eq!(text_of(&answer), r#"{"name":"Ada"}"#);

    // The standalone GET stream through B, forwarded.
    let r = get(b.addr, &session).send().await.expect("GET through B");
    assert_eq!(r.status(), StatusCode::OK);
    drop(r);

    // Ended through B: gone on A too, and from the directory.
    let r = reqwest::Client::new()
        .delete(format!("http://{}/mcp", b.addr))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", VERSION)
        .send()
        .await
        .expect("DELETE through B");
    assert_eq!(r.status(), StatusCode::OK);
    let r = post(a.addr, Some(&session), call(4, "whoami"))
        .send()
        .await
        .expect("after DELETE");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert!(directory.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_resumed_through_another_replica_has_no_gap_and_no_duplicate() {
    let directory = Arc::new(MemoryDirectory::default());
    let a = ReplicaProcess::start(directory.clone()).await;
    let b = ReplicaProcess::start(directory.clone()).await;
    let session = initialize(a.addr).await;
    let r = post(a.addr, Some(&session), call(2, "count"))
        .send()
        .await
        .expect("count on A");
    let mut first = Events::new(r);
    // Read two progress events, then lose the connection.
    let mut seen = Vec::new();
    let mut last_id = None;
    while seen.len() < 2 {
        let e = first.next().await.expect("an event");
        if let Some(d) = &e.data {
            seen.push(d["params"]["progress"].as_f64());
        }
        last_id = e.id.or(last_id);
    }
    drop(first);
    let r = get(b.addr, &session)
        .header("last-event-id", last_id.expect("event ids"))
        .send()
        .await
        .expect("resume through B");
    assert_eq!(r.status(), StatusCode::OK);
    let mut rest = Events::new(r);
    let answer = loop {
        let e = rest.next().await.expect("the rest of the stream");
        let Some(d) = e.data else { continue };
        if d.get("result").is_some() {
            break d;
        }
        seen.push(d["params"]["progress"].as_f64());
    };
    let expected: Vec<Option<f64>> = (1..=5).map(|n| Some(f64::from(n))).collect();
    assert_eq!(seen, expected, "every step once, in order");
    assert_eq!(text_of(&answer), "counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_session_is_taken_over_and_its_calls_fail_visibly() {
    let directory = Arc::new(MemoryDirectory::default());
    let mut a = ReplicaProcess::start(directory.clone()).await;
    let b = ReplicaProcess::start(directory.clone()).await;
    let session = initialize(a.addr).await;
    let r = post(
        b.addr,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
               "params": {"level": "error"}}),
    )
    .send()
    .await
    .expect("setLevel through B");
    assert_eq!(r.status(), StatusCode::OK);
    for (id, method, uri) in [
        (20, "resources/subscribe", "x://watched"),
        (21, "resources/subscribe", "x://gone"),
        (22, "resources/unsubscribe", "x://gone"),
    ] {
        let r = post(
            b.addr,
            Some(&session),
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"uri": uri}}),
        )
        .send()
        .await
        .expect("subscription through B");
        assert_eq!(r.status(), StatusCode::OK, "{method} {uri}");
    }
    assert_eq!(a.subscribed.lock().unwrap().len(), 3, "A served them");
    assert!(b.subscribed.lock().unwrap().is_empty());

    // One call in flight on A through B, one straight on A (the client keeps its event id).
    let through_b = post(b.addr, Some(&session), call(3, "wait"))
        .send()
        .await
        .expect("wait through B");
    let mut through_b = Events::new(through_b);
    let direct = post(a.addr, Some(&session), call(4, "wait"))
        .send()
        .await
        .expect("wait on A");
    let mut direct = Events::new(direct);
    let mut last_event = None;
    while let Some(e) = direct.next().await {
        last_event = e.id.or(last_event);
        if e.data
            .is_some_and(|d| d["method"] == "notifications/progress")
        {
            break;
        }
    }
    let last_event = last_event.expect("the events have ids");
    // Both calls are under way on A (B relays the progress of its call).
    let started = through_b.next().await.expect("B relays A's events");
    assert!(started.id.is_some() || started.data.is_some());

    a.kill();

    // The call forwarded through B fails, on the stream it was on.
    let failed = through_b
        .answer(3)
        .await
        .expect("an answer to the dead call");
    assert!(
        failed["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("stopped before answering")),
        "{failed}"
    );

    // The session goes on, on B: same client, same log level.
    let r = post(b.addr, Some(&session), call(5, "whoami"))
        .send()
        .await
        .expect("call after the takeover");
    assert_eq!(r.status(), StatusCode::OK);
    let answer = Events::new(r).answer(5).await.expect("answered");
    assert_eq!(text_of(&answer), "roaming-client Some(Error)");
    // B's server was asked for the subscription the client still has, and only that one.
    assert_eq!(
        *b.subscribed.lock().unwrap(),
        vec![("x://watched".to_owned(), true)]
    );

    // The client of the direct call resumes on B and learns that call failed.
    let r = get(b.addr, &session)
        .header("last-event-id", &last_event)
        .send()
        .await
        .expect("resume on B");
    assert_eq!(r.status(), StatusCode::OK);
    let failed = Events::new(r).answer(4).await.expect("the failed call");
    assert!(failed["error"].is_object(), "{failed}");

    // And a new stream of the session is served on B, whose replica it now is.
    let r = get(b.addr, &session).send().await.expect("GET on B");
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_unseen_events_are_replayed_then_its_call_fails() {
    use moat::transport::http::server::SessionDirectory;
    let directory = Arc::new(MemoryDirectory::default());
    let mut a = ReplicaProcess::start(directory.clone()).await;
    let b = ReplicaProcess::start(directory.clone()).await;
    let session = initialize(a.addr).await;
    let r = post(a.addr, Some(&session), call(2, "steps"))
        .send()
        .await
        .expect("steps on A");
    let mut events = Events::new(r);
    // The first step, then the connection is lost.
    let last_id = loop {
        let e = events.next().await.expect("an event");
        if e.data
            .is_some_and(|d| d["params"]["progress"].as_f64() == Some(1.0))
        {
            break e.id.expect("events have ids");
        }
    };
    drop(events);
    // A writes its stream's events to the directory: wait until all five are there.
    let (prefix, _) = last_id.rsplit_once('.').expect("an id of ours");
    let written = async {
        while directory.events(&session, prefix).await.unwrap().len() < 5 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(WITHIN, written)
        .await
        .expect("the events are written");
    // An answer kept beyond a gap (events 5 to 9 are not in the directory): the replay
    // stops at the gap, and the answer the client never gets does not count as given.
    directory
        .append_events(&[moat::transport::http::server::StoredEvent::new(
            session.clone(),
            prefix,
            10,
            true,
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[]}}"#,
        )])
        .await
        .expect("append");

    a.kill();

    let r = get(b.addr, &session)
        .header("last-event-id", &last_id)
        .send()
        .await
        .expect("resume on B");
    assert_eq!(r.status(), StatusCode::OK);
    let mut rest = Events::new(r);
    let mut steps = Vec::new();
    let mut ids = Vec::new();
    let failed = loop {
        let e = rest.next().await.expect("the rest of the stream");
        let Some(d) = e.data else { continue };
        if d.get("error").is_some() {
            break d;
        }
        steps.push(d["params"]["progress"].as_f64());
        ids.push(e.id);
    };
    assert_eq!(
        steps,
        vec![Some(2.0), Some(3.0), Some(4.0), Some(5.0)],
        "every unseen step once, in order"
    );
    let expected: Vec<Option<String>> = (1..=4).map(|n| Some(format!("{prefix}.{n}"))).collect();
    assert_eq!(ids, expected, "each with the id it had");
    assert_eq!(failed["id"], 2);
    assert!(
        failed["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("stopped before answering")),
        "{failed}"
    );
    assert!(rest.next().await.is_none(), "and the stream ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_session_was_taken_over_drops_its_copy() {
    use moat::transport::http::server::SessionDirectory;
    let directory = Arc::new(MemoryDirectory::default());
    let a = ReplicaProcess::start(directory.clone()).await;
    let b = ReplicaProcess::start(directory.clone()).await;
    let session = initialize(a.addr).await;
    assert_eq!(a.handle.live_sessions(), 1);
    // B took the session over while A could not be reached (a partition, as B saw it).
    let claimed = directory
        .claim(&session, &a.replica.id, &b.replica)
        .await
        .expect("claim");
    assert!(claimed);
    let dropped = async {
        while a.handle.live_sessions() > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), dropped)
        .await
        .expect("A drops its copy of the session");
    // A request reaching A goes to B, which serves the session now.
    let r = post(a.addr, Some(&session), call(2, "whoami"))
        .send()
        .await
        .expect("call through A");
    assert_eq!(r.status(), StatusCode::OK);
    let answer = Events::new(r).answer(2).await.expect("answered");
    assert_eq!(text_of(&answer), "roaming-client None");
    assert_eq!(b.handle.live_sessions(), 1, "B serves it");
    assert_eq!(a.handle.live_sessions(), 0, "and A does not");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_unknown_to_the_directory_is_not_found_on_any_replica() {
    let directory = Arc::new(MemoryDirectory::default());
    let a = ReplicaProcess::start(directory.clone()).await;
    let r = post(a.addr, Some("no-such-session"), call(1, "whoami"))
        .send()
        .await
        .expect("call");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // A forged forwarding mark does not conjure a session either.
    let r = post(a.addr, Some("no-such-session"), call(1, "whoami"))
        .header("moat-forwarded", "someone")
        .send()
        .await
        .expect("call");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}
