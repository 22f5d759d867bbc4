//! `--state-key-file`: two `moat serve everything --http --stateless` instances (replicas
//! behind a load balancer) share the keys sealing 2026-07-28 `requestState`, so a
//! `tools/call` that asked for input on one is completed by a retry sent to the other; with
//! different keys the retry is refused; after a rotation the old key, kept on the second
//! line, still opens what it sealed. A bad key file is a usage error.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use moat_test_support::listening::{Listening, mcp_authority};
use moat_test_support::raw_http::modern_request;
use serde_json::{Value, json};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");
const OLD: &str = "old-secret-old-secret-old-secret-old";
const NEW: &str = "new-secret-new-secret-new-secret-new";

fn replica(keys: &Path) -> (Listening, String) {
    let mut cmd = Command::new(MOAT);
    cmd.args([
        "serve",
        "everything",
        "--http",
        "127.0.0.1:0",
        "--stateless",
    ])
    .arg("--state-key-file")
    .arg(keys);
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    Listening::start(
        cmd,
        |line| {
            line.starts_with("moat: serving ")
                .then(|| mcp_authority(line))
                .flatten()
        },
        Duration::from_secs(60),
    )
}

/// `tools/call test_elicitation` at `authority`, with `extra` merged into its params; the
/// answer.
fn call(authority: &str, extra: Value) -> Value {
    let mut params = json!({
        "name": "test_elicitation",
        "arguments": {"message": "Who are you?"},
    });
    if let (Some(p), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(extra.clone());
    }
    let reply = modern_request(
        authority,
        "tools/call",
        Some("test_elicitation"),
        params,
        None,
    )
    .expect("an answer");
    assert!(!reply.json.is_null(), "no JSON in {reply:?}");
    reply.json
}

/// The retry of `asked` (an input-required result) with the user's answer.
fn answer(asked: &Value) -> Value {
    let result = &asked["result"];
    let key = result["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .unwrap_or_else(|| panic!("an input request expected: {asked}"));
    json!({
        "inputResponses": { key: {"action": "accept", "content": {"username": "ada", "email": "ada@example.org"}} },
        "requestState": result["requestState"].clone(),
    })
}

fn keys(dir: &Path, name: &str, lines: &[&str]) -> std::path::PathBuf {
    let file = dir.join(name);
    std::fs::write(&file, lines.join("\n")).expect("write keys");
    file
}

#[test]
fn replicas_sharing_keys_take_each_others_retries_and_a_rotation_keeps_old_states() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_a, at_a) = replica(&keys(dir.path(), "a", &["# replica keys", OLD]));
    let (_b, at_b) = replica(&keys(dir.path(), "b", &[OLD]));
    let (_c, at_c) = replica(&keys(dir.path(), "c", &[NEW]));
    let (_d, at_d) = replica(&keys(dir.path(), "d", &[NEW, OLD]));

    let asked = call(&at_a, json!({}));
    let retry = answer(&asked);

    let done = call(&at_b, retry.clone());
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("action=accept") && text.contains("ada"),
        "{done}"
    );

    let refused = call(&at_c, retry.clone());
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("failed verification"),
        "{refused}"
    );

    // Rotated: sealed with the new key, and still opening states of the old one.
    let done = call(&at_d, retry);
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("ada"),
        "{done}"
    );
    let asked = call(&at_d, json!({}));
    let done = call(&at_c, answer(&asked));
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("ada"),
        "{done}"
    );
}

#[test]
fn a_short_key_is_a_usage_error_naming_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = keys(dir.path(), "k", &[NEW, "short"]);
    let out = Command::new(MOAT)
        .args([
            "serve",
            "everything",
            "--http",
            "127.0.0.1:0",
            "--state-key-file",
        ])
        .arg(&file)
        .output()
        .expect("run moat");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 2") && err.contains("32 characters"),
        "{err}"
    );
}
