//! A scripted model: a local HTTP endpoint that speaks the Anthropic Messages, OpenAI
//! Responses and Chat Completions wire formats (by path: `/v1/messages`, `/v1/responses`,
//! `/v1/chat/completions`) and answers each request with the next [`Step`] of its script.
//!
//! Every request is first checked against the rules the real service enforces
//! ([`validate`]); a request that breaks one is answered with the service's 400 and
//! recorded in [`ScriptedModel::violations`], so a test fails when moat sends what a real
//! provider would refuse. It stands in for a model where none can run: the tests, and a
//! demo that needs no key.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use serde_json::Value;
use tokio::net::TcpListener;

mod encode;
pub mod validate;

/// A wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wire {
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
    /// OpenAI Responses (`/v1/responses`).
    OpenAiResponses,
    /// Chat Completions (`/v1/chat/completions`).
    OpenAiChat,
}

impl Wire {
    fn from_path(path: &str) -> Option<Wire> {
        match path {
            "/v1/messages" => Some(Wire::Anthropic),
            "/v1/responses" => Some(Wire::OpenAiResponses),
            "/v1/chat/completions" => Some(Wire::OpenAiChat),
            _ => None,
        }
    }
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Step {
    /// A plain answer.
    Text(String),
    /// Tool calls (name, arguments), with optional text before them.
    Tools {
        /// Text first (may be empty).
        text: String,
        /// The calls, made together.
        calls: Vec<(String, Value)>,
    },
    /// An error status with the provider's error body (and `retry-after`, if given).
    Status {
        /// The HTTP status.
        status: u16,
        /// Seconds, for `retry-after`.
        retry_after: Option<u64>,
        /// The error message.
        message: String,
    },
    /// The provider's error for a conversation longer than the context window.
    ContextTooLong,
    /// A streamed answer whose connection breaks in the middle of an event.
    Cut(String),
    /// A refusal as each service sends one: Anthropic streams the text and stops with
    /// `stop_reason: "refusal"`; the Responses API streams a `refusal` content part; Chat
    /// Completions streams `delta.refusal`.
    Refusal(String),
}

impl Step {
    /// A plain answer.
    pub fn text(text: &str) -> Step {
        Step::Text(text.to_owned())
    }

    /// One tool call.
    pub fn call(name: &str, arguments: Value) -> Step {
        Step::Tools {
            text: String::new(),
            calls: vec![(name.to_owned(), arguments)],
        }
    }

    /// A refusal.
    pub fn refusal(text: &str) -> Step {
        Step::Refusal(text.to_owned())
    }

    /// An error status.
    pub fn status(status: u16, retry_after: Option<u64>) -> Step {
        Step::Status {
            status,
            retry_after,
            message: format!("scripted failure {status}"),
        }
    }
}

#[derive(Default)]
struct State {
    steps: VecDeque<Step>,
    /// Leave the token counts out of answers (as some local servers do).
    no_usage: bool,
    requests: Vec<Value>,
    violations: Vec<String>,
    served: u64,
}

/// A running scripted model.
#[derive(Clone)]
pub struct ScriptedModel {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl ScriptedModel {
    /// Listens on 127.0.0.1 (a free port) and answers with `steps`, in order.
    pub async fn start(steps: Vec<Step>) -> std::io::Result<ScriptedModel> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            steps: steps.into(),
            ..State::default()
        }));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(answer(&state, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(ScriptedModel { addr, state })
    }

    /// The base URL for `--provider anthropic`.
    pub fn anthropic_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The base URL for `--provider openai` and `openai-chat`.
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// From now on, answers carry no token counts (Responses and Chat Completions), as
    /// some OpenAI-compatible local servers send none.
    pub fn without_usage(self) -> ScriptedModel {
        self.lock().no_usage = true;
        self
    }

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.lock().requests.clone()
    }

    /// Every rule a request broke (empty when moat behaved).
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// Steps not yet used.
    pub fn remaining(&self) -> usize {
        self.lock().steps.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

fn full(
    status: u16,
    content_type: &str,
    body: String,
    extra: Option<(&str, String)>,
) -> Response<Body> {
    let mut response = Response::builder()
        .status(status)
        .header("content-type", content_type);
    if let Some((name, value)) = extra {
        response = response.header(name, value);
    }
    response
        .body(Full::new(Bytes::from(body)).map_err(|e| match e {}).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).map_err(|e| match e {}).boxed()))
}

async fn answer(state: &Mutex<State>, req: Request<Incoming>) -> Response<Body> {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let Some(wire) = Wire::from_path(req.uri().path()) else {
        let path = req.uri().path().to_owned();
        lock()
            .violations
            .push(format!("POST to an unknown path {path}"));
        return full(
            404,
            "application/json",
            encode::error(Wire::OpenAiChat, 404, &format!("no route {path}"), None),
            None,
        );
    };
    let headers = req.headers().clone();
    let bytes = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return full(400, "text/plain", e.to_string(), None),
    };
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            let message = format!("the request body is not JSON: {e}");
            lock().violations.push(message.clone());
            return full(
                400,
                "application/json",
                encode::error(wire, 400, &message, None),
                None,
            );
        }
    };
    let problems = validate::check(wire, &headers, &body);
    let (step, n, usage) = {
        let mut s = lock();
        s.requests.push(body);
        let usage = !s.no_usage;
        if !problems.is_empty() {
            s.violations.extend(problems.iter().cloned());
            (None, 0, usage)
        } else {
            s.served += 1;
            let n = s.served;
            (Some(s.steps.pop_front()), n, usage)
        }
    };
    let step = match step {
        None => {
            return full(
                400,
                "application/json",
                encode::error(wire, 400, &problems.join("; "), None),
                None,
            );
        }
        Some(None) => {
            lock()
                .violations
                .push("a request after the script ended".into());
            return full(
                500,
                "application/json",
                encode::error(wire, 500, "the scripted model has no more answers", None),
                None,
            );
        }
        Some(Some(step)) => step,
    };
    let sse = "text/event-stream";
    match step {
        Step::Text(text) => full(200, sse, encode::stream(wire, &text, &[], n, usage), None),
        Step::Refusal(text) => full(200, sse, encode::refusal(wire, &text, n), None),
        Step::Tools { text, calls } => {
            let calls: Vec<encode::Call<'_>> = calls
                .iter()
                .enumerate()
                .map(|(k, (name, arguments))| encode::Call {
                    id: match wire {
                        Wire::Anthropic => format!("toolu_{n:04}_{k}"),
                        _ => format!("call_{n:04}_{k}"),
                    },
                    name,
                    arguments,
                })
                .collect();
            full(
                200,
                sse,
                encode::stream(wire, &text, &calls, n, usage),
                None,
            )
        }
        Step::Status {
            status,
            retry_after,
            message,
        } => full(
            status,
            "application/json",
            encode::error(wire, status, &message, None),
            retry_after.map(|s| ("retry-after", s.to_string())),
        ),
        Step::ContextTooLong => {
            let (message, code) = match wire {
                Wire::Anthropic => ("prompt is too long: 215000 tokens > 200000 maximum", None),
                _ => (
                    "Your input exceeds the context window of this model. Please adjust your input and try again.",
                    Some("context_length_exceeded"),
                ),
            };
            full(
                400,
                "application/json",
                encode::error(wire, 400, message, code),
                None,
            )
        }
        Step::Cut(text) => {
            let whole = encode::stream(wire, &text, &[], n, usage);
            // Up to the middle of the event that carries the text's second half.
            let cut = whole
                .find(&text[text.len() / 2..])
                .map_or(whole.len() / 2, |at| at + 1);
            let head = Bytes::from(whole[..cut].to_owned());
            // The break comes after the head has gone out, as a dropped connection would.
            let frames = futures_util::stream::unfold(Some(Some(head)), |state| async move {
                match state? {
                    Some(head) => Some((Ok(Frame::data(head)), Some(None))),
                    None => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        Some((Err(std::io::Error::other("connection cut")), None))
                    }
                }
            });
            Response::builder()
                .status(200)
                .header("content-type", sse)
                .body(BodyExt::boxed(StreamBody::new(frames)))
                .unwrap_or_else(|_| {
                    Response::new(Full::new(Bytes::new()).map_err(|e| match e {}).boxed())
                })
        }
    }
}
