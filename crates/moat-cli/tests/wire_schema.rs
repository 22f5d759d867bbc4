//! Every message `moat serve everything` writes for revision R validates against
//! `$MOAT_SPEC_DIR/R/schema.json` (default: the repository's `spec/`).
//!
//! For each revision the test drives the server over raw stdio through every method it
//! serves: the handshake revisions through `initialize`, 2026-07-28 through requests that
//! carry the revision and the client capabilities in `_meta` (and `server/discover`). It
//! answers the server's own requests (sampling, elicitation, roots) itself, and for
//! 2026-07-28 follows `input_required` results with `inputResponses`. Every line the server
//! writes is checked: the whole envelope against `JSONRPCMessage` and the response,
//! notification or request definition, results against their method's result definition,
//! notifications and server→client requests against theirs.
//!
//! The test prints every violation (revision, method, schema error, offending JSON) and
//! asserts there are none.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod support;
use support::Lines;

const REPLY: Duration = Duration::from_secs(10);
const MODERN: &str = "2026-07-28";

fn spec_dir() -> PathBuf {
    let dir = match std::env::var_os("MOAT_SPEC_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec"),
    };
    assert!(
        dir.join(MODERN).join("schema.json").is_file(),
        "MCP spec directory not found at {} (set MOAT_SPEC_DIR to the directory holding \
         2024-11-05/schema.json … 2026-07-28/schema.json)",
        dir.display()
    );
    dir
}

/// One revision's schema, with validators built on demand per definition.
struct Schema {
    rev: &'static str,
    root: Value,
    key: &'static str,
    validators: HashMap<String, jsonschema::Validator>,
}

impl Schema {
    fn load(rev: &'static str) -> Schema {
        let path = spec_dir().join(rev).join("schema.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let root: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
        let key = if root.get("$defs").is_some() {
            "$defs"
        } else {
            "definitions"
        };
        assert!(root[key].is_object(), "{}: no {key}", path.display());
        Schema {
            rev,
            root,
            key,
            validators: HashMap::new(),
        }
    }

    fn has(&self, def: &str) -> bool {
        self.root[self.key].get(def).is_some()
    }

    /// Schema errors of `instance` against definition `def` (empty when valid).
    fn errors(&mut self, def: &str, instance: &Value) -> Vec<String> {
        if !self.has(def) {
            return vec![format!("revision {} defines no {def}", self.rev)];
        }
        let (root, key, rev) = (&self.root, self.key, self.rev);
        let validator = self.validators.entry(def.to_owned()).or_insert_with(|| {
            let schema = json!({
                "$schema": root["$schema"],
                "$ref": format!("#/{key}/{def}"),
                key: root[key],
            });
            jsonschema::validator_for(&schema)
                .unwrap_or_else(|e| panic!("{rev} {def}: bad schema: {e}"))
        });
        validator
            .iter_errors(instance)
            .map(|e| {
                let at = e.instance_path().to_string();
                let offending = instance
                    .pointer(&at)
                    .map(|v| truncate(&v.to_string(), 400))
                    .unwrap_or_default();
                format!("at {:?}: {e} [offending value: {offending}]", at)
            })
            .collect()
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

/// The result definition of each method.
fn result_def(method: &str) -> &'static str {
    match method {
        "initialize" => "InitializeResult",
        "server/discover" => "DiscoverResult",
        "tools/list" => "ListToolsResult",
        "tools/call" => "CallToolResult",
        "resources/list" => "ListResourcesResult",
        "resources/templates/list" => "ListResourceTemplatesResult",
        "resources/read" => "ReadResourceResult",
        "prompts/list" => "ListPromptsResult",
        "prompts/get" => "GetPromptResult",
        "completion/complete" => "CompleteResult",
        _ => "EmptyResult",
    }
}

/// The definition of each notification a server sends.
fn notification_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "notifications/message" => "LoggingMessageNotification",
        "notifications/progress" => "ProgressNotification",
        "notifications/cancelled" => "CancelledNotification",
        "notifications/resources/updated" => "ResourceUpdatedNotification",
        "notifications/resources/list_changed" => "ResourceListChangedNotification",
        "notifications/tools/list_changed" => "ToolListChangedNotification",
        "notifications/prompts/list_changed" => "PromptListChangedNotification",
        _ => return None,
    })
}

/// The definition of each request a server sends to the client.
fn server_request_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "sampling/createMessage" => "CreateMessageRequest",
        "elicitation/create" => "ElicitRequest",
        "roots/list" => "ListRootsRequest",
        "ping" => "PingRequest",
        _ => return None,
    })
}

/// What this test answers to a server→client request (or an input request).
fn canned_answer(method: &str) -> Option<Value> {
    Some(match method {
        "sampling/createMessage" => json!({
            "role": "assistant",
            "content": {"type": "text", "text": "canned completion"},
            "model": "test-model",
            "stopReason": "endTurn",
        }),
        "elicitation/create" => json!({
            "action": "accept",
            "content": {"username": "tester", "email": "tester@example.com"},
        }),
        "roots/list" => json!({"roots": []}),
        "ping" => json!({}),
        _ => return None,
    })
}

/// Arguments for the tools and prompts that need them.
fn tool_arguments(name: &str) -> Value {
    match name {
        "test_sampling" => json!({"prompt": "Say hi"}),
        "test_elicitation" => json!({"message": "Who are you?"}),
        "json_schema_2020_12_tool" => {
            json!({"name": "n", "contactMethod": "email", "email": "a@example.com"})
        }
        _ => json!({}),
    }
}

fn prompt_arguments(name: &str) -> Value {
    match name {
        "test_prompt_with_arguments" => json!({"arg1": "one", "arg2": "two"}),
        "test_prompt_with_embedded_resource" => json!({"resourceUri": "test://static-text"}),
        _ => json!({}),
    }
}

/// A conversation with one `moat serve everything` process in one revision.
struct Session {
    schema: Schema,
    modern: bool,
    child: Child,
    io: Lines,
    next_id: u64,
    /// Every violation found: one paragraph each.
    violations: Vec<String>,
    /// Things worth knowing that are not schema violations.
    notes: Vec<String>,
    /// Methods of the notifications seen.
    notifications: Vec<String>,
    /// Methods of the server→client requests seen.
    server_requests: Vec<String>,
    /// Lines validated.
    checked: usize,
}

impl Session {
    fn start(rev: &'static str) -> Session {
        let schema = Schema::load(rev);
        let (child, io) = support::serve_everything();
        Session {
            schema,
            modern: rev == MODERN,
            child,
            io,
            next_id: 0,
            violations: Vec::new(),
            notes: Vec::new(),
            notifications: Vec::new(),
            server_requests: Vec::new(),
            checked: 0,
        }
    }

    fn rev(&self) -> &'static str {
        self.schema.rev
    }

    fn send(&mut self, msg: &Value) {
        self.io.send_json(msg);
    }

    /// Check `instance` against each definition; record a violation per failing one.
    fn check(&mut self, context: &str, defs: &[&str], instance: &Value) {
        self.checked += 1;
        for def in defs {
            let errors = self.schema.errors(def, instance);
            if !errors.is_empty() {
                self.violations.push(format!(
                    "[{}] {context}: not a valid {def}:\n    - {}\n    JSON: {}",
                    self.rev(),
                    errors.join("\n    - "),
                    truncate(&instance.to_string(), 3000)
                ));
            }
        }
    }

    fn response_envelope_def(&self, result_def: &str) -> String {
        let specific = format!("{result_def}Response");
        if self.schema.has(&specific) {
            specific
        } else if self.schema.has("JSONRPCResultResponse") {
            "JSONRPCResultResponse".to_owned()
        } else {
            "JSONRPCResponse".to_owned()
        }
    }

    fn error_envelope_def(&self) -> &'static str {
        if self.schema.has("JSONRPCErrorResponse") {
            "JSONRPCErrorResponse"
        } else {
            "JSONRPCError"
        }
    }

    /// Validate a line that is not the answer we are waiting for, answering it if it is a
    /// request. `during` names what we were doing.
    fn on_unsolicited(&mut self, msg: Value, during: &str) {
        let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
        match (method, msg.get("id").cloned()) {
            (Some(method), Some(id)) => {
                let context = format!("server→client request {method} (during {during})");
                self.server_requests.push(method.clone());
                let mut defs = vec!["JSONRPCMessage", "JSONRPCRequest", "ServerRequest"];
                defs.extend(server_request_def(&method));
                self.check(&context, &defs, &msg);
                let answer = match canned_answer(&method) {
                    Some(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    None => json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32601, "message": "Method not found"}}),
                };
                self.send(&answer);
            }
            (Some(method), None) => {
                let context = format!("notification {method} (during {during})");
                self.notifications.push(method.clone());
                let mut defs = vec![
                    "JSONRPCMessage",
                    "JSONRPCNotification",
                    "ServerNotification",
                ];
                defs.extend(notification_def(&method));
                self.check(&context, &defs, &msg);
            }
            (None, _) => {
                let context = format!("unexpected response (during {during})");
                self.check(&context, &["JSONRPCMessage"], &msg);
                self.violations.push(format!(
                    "[{}] {context}: a response to no request of ours: {}",
                    self.rev(),
                    truncate(&msg.to_string(), 1000)
                ));
            }
        }
    }

    fn recv(&mut self, within: Duration, during: &str) -> Option<Value> {
        match self.io.recv(within) {
            Ok(line) => match serde_json::from_str::<Value>(&line) {
                Ok(v) => Some(v),
                Err(e) => {
                    self.violations.push(format!(
                        "[{}] during {during}: a line that is not JSON ({e}): {}",
                        self.rev(),
                        truncate(&line, 1000)
                    ));
                    Some(Value::Null)
                }
            },
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) if !self.io.is_open() => None,
            Err(RecvTimeoutError::Disconnected) => {
                panic!(
                    "[{}] during {during}: the server closed its stdout",
                    self.rev()
                )
            }
        }
    }

    /// Send a request and return its validated answer (result or error).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.request_ctx(method, params, method)
    }

    fn request_ctx(&mut self, method: &str, mut params: Value, context: &str) -> Value {
        if self.modern {
            let meta = params
                .as_object_mut()
                .expect("params are an object")
                .entry("_meta")
                .or_insert_with(|| json!({}));
            meta["io.modelcontextprotocol/protocolVersion"] = json!(MODERN);
            if meta
                .get("io.modelcontextprotocol/clientCapabilities")
                .is_none()
            {
                meta["io.modelcontextprotocol/clientCapabilities"] =
                    json!({"sampling": {}, "elicitation": {}, "roots": {}});
            }
            meta["io.modelcontextprotocol/clientInfo"] =
                json!({"name": "wire-schema-test", "version": "0"});
        }
        self.next_id += 1;
        let id = json!(format!("{}-{}", self.rev(), self.next_id));
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + REPLY;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(msg) = self.recv(left, context) else {
                panic!("[{}] {context}: no answer within {REPLY:?}", self.rev());
            };
            if msg.get("method").is_some() || msg.get("id") != Some(&id) {
                self.on_unsolicited(msg, context);
                continue;
            }
            return self.on_answer(method, params, context, msg);
        }
    }

    fn on_answer(&mut self, method: &str, params: Value, context: &str, msg: Value) -> Value {
        if let Some(result) = msg.get("result") {
            let result = result.clone();
            let input_required = self.modern && result["resultType"] == "input_required";
            let def = if input_required {
                "InputRequiredResult"
            } else {
                result_def(method)
            };
            let envelope = self.response_envelope_def(def);
            let envelope = if input_required {
                "JSONRPCResultResponse".to_owned()
            } else {
                envelope
            };
            self.check(context, &["JSONRPCMessage", &envelope], &msg);
            self.check(&format!("{context} result"), &[def], &result);
            if input_required {
                return self.answer_input_requests(method, params, context, &result);
            }
        } else if msg.get("error").is_some() {
            let envelope = self.error_envelope_def();
            self.check(context, &["JSONRPCMessage", envelope], &msg);
        } else {
            self.check(context, &["JSONRPCMessage"], &msg);
        }
        msg
    }

    /// 2026-07-28: retry a request with answers to the input requests it returned.
    fn answer_input_requests(
        &mut self,
        method: &str,
        mut params: Value,
        context: &str,
        result: &Value,
    ) -> Value {
        let mut responses = serde_json::Map::new();
        if let Some(requests) = result["inputRequests"].as_object() {
            for (key, request) in requests {
                let m = request["method"].as_str().unwrap_or_default().to_owned();
                self.server_requests.push(format!("{m} (input request)"));
                let mut defs = vec!["InputRequest"];
                defs.extend(server_request_def(&m));
                self.check(&format!("{context} input request {key}"), &defs, request);
                if let Some(answer) = canned_answer(&m) {
                    responses.insert(key.clone(), answer);
                }
            }
        }
        params["inputResponses"] = Value::Object(responses);
        if let Some(state) = result.get("requestState") {
            params["requestState"] = state.clone();
        }
        if context.matches("(retry)").count() >= 3 {
            self.violations.push(format!(
                "[{}] {context}: still input_required after 3 rounds",
                self.rev()
            ));
            return json!({"result": result});
        }
        self.request_ctx(method, params, &format!("{context} (retry)"))
    }

    /// Read whatever else arrives within `window`, validating it.
    fn drain(&mut self, window: Duration, during: &str) {
        let deadline = Instant::now() + window;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.recv(left, during) {
                Some(msg) => self.on_unsolicited(msg, during),
                None => break,
            }
        }
    }

    /// Wait up to `within` for a notification with this method, validating everything.
    fn wait_for_notification(&mut self, method: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let seen = |s: &Session| s.notifications.iter().any(|m| m == method);
        while !seen(self) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            match self.recv(left, &format!("waiting for {method}")) {
                Some(msg) => self.on_unsolicited(msg, &format!("waiting for {method}")),
                None => return false,
            }
        }
        true
    }

    fn finish(mut self) -> (Vec<String>, Vec<String>) {
        self.io.close();
        let rev = self.rev();
        self.drain(Duration::from_secs(2), "shutdown");
        match support::wait_exit(&mut self.child, Duration::from_secs(5)) {
            Some(status) if !status.success() => self
                .notes
                .push(format!("exit status after stdin closed: {status}")),
            Some(_) => {}
            None => self.violations.push(format!(
                "[{rev}] the server did not exit after stdin closed"
            )),
        }
        eprintln!(
            "[{rev}] validated {} messages; notifications seen: {:?}; server requests seen: {:?}",
            self.checked, self.notifications, self.server_requests
        );
        (
            std::mem::take(&mut self.violations),
            std::mem::take(&mut self.notes),
        )
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Everything the server serves, after the revision is established.
fn exercise(s: &mut Session) {
    let rev = s.rev();
    s.request("ping", json!({}));
    if !s.modern {
        s.request("logging/setLevel", json!({"level": "debug"}));
    }
    s.request(
        "resources/subscribe",
        json!({"uri": "test://watched-resource"}),
    );

    let tools = s.request("tools/list", json!({}));
    let names: Vec<String> = tools["result"]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        names.len() >= 10,
        "[{rev}] tools/list listed too few tools: {tools}"
    );
    for name in &names {
        let mut params = json!({"name": name, "arguments": tool_arguments(name)});
        if name == "test_tool_with_progress" {
            params["_meta"] = json!({"progressToken": format!("progress-{rev}")});
        }
        if s.modern && name == "test_tool_with_logging" {
            params["_meta"] = json!({"io.modelcontextprotocol/logLevel": "debug"});
        }
        let answer = s.request_ctx("tools/call", params, &format!("tools/call {name}"));
        if answer.get("result").is_none() {
            s.notes
                .push(format!("tools/call {name} answered an error: {answer}"));
        }
    }
    // Errors are messages too.
    s.request_ctx(
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
        "tools/call of an unknown tool",
    );
    s.request_ctx(
        "resources/read",
        json!({"uri": "test://no-such-resource"}),
        "resources/read of an unknown resource",
    );
    s.request_ctx(
        "prompts/get",
        json!({"name": "no_such_prompt"}),
        "prompts/get of an unknown prompt",
    );
    s.request_ctx("no/such/method", json!({}), "an unknown method");

    let resources = s.request("resources/list", json!({}));
    let uris: Vec<String> = resources["result"]["resources"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|r| r["uri"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    assert!(!uris.is_empty(), "[{rev}] no resources: {resources}");
    for uri in &uris {
        s.request_ctx(
            "resources/read",
            json!({"uri": uri}),
            &format!("resources/read {uri}"),
        );
    }
    let templates = s.request("resources/templates/list", json!({}));
    let template_uris: Vec<String> = templates["result"]["resourceTemplates"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["uriTemplate"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !template_uris.is_empty(),
        "[{rev}] no resource templates: {templates}"
    );
    for template in &template_uris {
        let uri = fill_template(template);
        s.request_ctx(
            "resources/read",
            json!({"uri": uri}),
            &format!("resources/read {uri} (template {template})"),
        );
        let var = template
            .split('{')
            .nth(1)
            .and_then(|v| v.split('}').next())
            .unwrap_or("id")
            .trim_start_matches(['+', '#', '/', '.', ';', '?', '&']);
        s.request_ctx(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": template},
                   "argument": {"name": var, "value": "4"}}),
            &format!("completion/complete for template {template}"),
        );
    }

    let prompts = s.request("prompts/list", json!({}));
    let prompt_names: Vec<String> = prompts["result"]["prompts"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    assert!(!prompt_names.is_empty(), "[{rev}] no prompts: {prompts}");
    for name in &prompt_names {
        s.request_ctx(
            "prompts/get",
            json!({"name": name, "arguments": prompt_arguments(name)}),
            &format!("prompts/get {name}"),
        );
    }
    s.request_ctx(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
               "argument": {"name": "arg1", "value": "o"}}),
        "completion/complete for a prompt argument",
    );

    // The watched resource ticks every 3 s once the server has been used.
    if !s.wait_for_notification("notifications/resources/updated", Duration::from_secs(5)) {
        s.notes.push(
            "no notifications/resources/updated arrived within 5 s of subscribing; \
             its shape was not checked"
                .to_owned(),
        );
    }
    s.request(
        "resources/unsubscribe",
        json!({"uri": "test://watched-resource"}),
    );
    s.drain(Duration::from_millis(300), "the end");
}

/// `test://template/{id}/data` → `test://template/42/data`.
fn fill_template(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        match rest[start..].find('}') {
            Some(end) => {
                out.push_str("42");
                rest = &rest[start + end + 1..];
            }
            None => {
                rest = &rest[start..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

fn handshake_revision(rev: &'static str) {
    let mut s = Session::start(rev);
    let mut capabilities = json!({"sampling": {}, "roots": {"listChanged": false}});
    if rev >= "2025-06-18" {
        capabilities["elicitation"] = json!({});
    }
    let init = s.request(
        "initialize",
        json!({
            "protocolVersion": rev,
            "capabilities": capabilities,
            "clientInfo": {"name": "wire-schema-test", "version": "0"},
        }),
    );
    assert_eq!(
        init["result"]["protocolVersion"], rev,
        "[{rev}] initialize: {init}"
    );
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    exercise(&mut s);
    report(rev, s.finish());
}

fn report(rev: &str, (violations, notes): (Vec<String>, Vec<String>)) {
    for note in &notes {
        eprintln!("[{rev}] note: {note}");
    }
    for v in &violations {
        eprintln!("{v}\n");
    }
    assert!(
        violations.is_empty(),
        "{} schema violation(s) in what moat serve everything writes for {rev}:\n\n{}",
        violations.len(),
        violations.join("\n\n")
    );
}

#[test]
fn wire_2024_11_05() {
    handshake_revision("2024-11-05");
}

#[test]
fn wire_2025_03_26() {
    handshake_revision("2025-03-26");
}

#[test]
fn wire_2025_06_18() {
    handshake_revision("2025-06-18");
}

#[test]
fn wire_2025_11_25() {
    handshake_revision("2025-11-25");
}

#[test]
fn wire_2026_07_28() {
    let mut s = Session::start(MODERN);
    let discover = s.request("server/discover", json!({}));
    let versions = &discover["result"]["supportedVersions"];
    assert!(
        versions
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v == MODERN)),
        "[{MODERN}] server/discover: {discover}"
    );
    // Methods 2026-07-28 does not define: whatever moat answers must still be well formed.
    for method in ["ping", "logging/setLevel"] {
        let params = if method == "logging/setLevel" {
            json!({"level": "debug"})
        } else {
            json!({})
        };
        let answer = s.request(method, params);
        if answer.get("result").is_some() {
            s.notes.push(format!(
                "{method} is not a 2026-07-28 method, yet it was answered with a result: {answer}"
            ));
        }
    }
    exercise(&mut s);
    report(MODERN, s.finish());
}
