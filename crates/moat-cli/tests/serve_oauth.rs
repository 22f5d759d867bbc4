//! `moat serve --http --oauth-issuer URL --resource URL --scope S`, black-box: the server
//! publishes its Protected Resource Metadata and challenges a request without a token with a
//! pointer to it; `--oauth-issuer` without `--resource`, or with `--token`, is a usage error.
//! `moat gateway` takes the same flags.
//! (Token validation itself is covered in moat-transport's resource_server suite.)

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

mod support;
use support::{Listening, MOAT};

/// One HTTP/1.1 exchange on a fresh connection: the response's head and body.
fn exchange(port: u16, request: &str) -> (String, String) {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    tcp.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    tcp.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (head.to_owned(), body.to_owned())
}

#[test]
fn serve_publishes_metadata_and_challenges() {
    let mut cmd = Command::new(MOAT);
    cmd.args([
        "serve",
        "everything",
        "--http",
        "127.0.0.1:0",
        "--oauth-issuer",
        "http://127.0.0.1:9/tenant",
        "--resource",
        "http://127.0.0.1/mcp",
        "--scope",
        "mcp:tools",
    ])
    .env_remove("MOAT_HTTP_TOKEN")
    .process_group(0);
    let (_server, port) = Listening::start(
        cmd,
        |line| {
            line.strip_prefix("moat: serving ")?
                .split_once("http://127.0.0.1:")?
                .1
                .split_once("/mcp")?
                .0
                .parse::<u16>()
                .ok()
        },
        Duration::from_secs(20),
    );

    let (head, body) = exchange(
        port,
        "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let doc: Value = serde_json::from_str(&body).expect("metadata JSON");
    assert_eq!(doc["resource"], "http://127.0.0.1/mcp");
    assert_eq!(doc["authorization_servers"][0], "http://127.0.0.1:9/tenant");
    assert_eq!(doc["scopes_supported"][0], "mcp:tools");

    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let (head, _) = exchange(
        port,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{init}",
            init.len()
        ),
    );
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(
        lower.contains(
            "www-authenticate: bearer resource_metadata=\"http://127.0.0.1/.well-known/oauth-protected-resource/mcp\", scope=\"mcp:tools\""
        ),
        "{head}"
    );
}

#[test]
fn oauth_flags_that_do_not_fit_are_usage_errors() {
    for args in [
        &["--oauth-issuer", "https://idp.example"][..],
        &[
            "--oauth-issuer",
            "https://idp.example",
            "--resource",
            "https://mcp.example/mcp",
            "--token",
            "t",
        ][..],
        &["--resource", "https://mcp.example/mcp"][..],
    ] {
        let out = Command::new(MOAT)
            .args(["serve", "everything", "--http", "127.0.0.1:0"])
            .args(args)
            .env_remove("MOAT_HTTP_TOKEN")
            .output()
            .expect("run moat");
        assert!(!out.status.success(), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Usage: moat serve"), "{args:?}: {stderr}");
    }
}

/// `moat gateway --http … --oauth-issuer URL --resource URL --scope S`: the gateway is a
/// resource server like `moat serve` (no [auth] in its file needed), and an issuer with
/// `--token` is a usage error.
#[test]
fn gateway_takes_the_oauth_flags() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("moat.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = {:?}\n[servers.ev]\ncommand = {MOAT:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n",
            dir.path().join("state")
        ),
    )
    .unwrap();
    let mut cmd = Command::new(MOAT);
    cmd.args(["gateway", "--ephemeral", "--config"])
        .arg(&config)
        .args([
            "--http",
            "127.0.0.1:0",
            "--oauth-issuer",
            "http://127.0.0.1:9/tenant",
            "--resource",
            "http://127.0.0.1/mcp",
            "--scope",
            "mcp:tools",
        ])
        .env_remove("MOAT_HTTP_TOKEN")
        .process_group(0);
    let (_gateway, port) = Listening::start(
        cmd,
        |line| {
            line.strip_prefix("moat gateway: serving on http://127.0.0.1:")?
                .split_once("/mcp")?
                .0
                .parse::<u16>()
                .ok()
        },
        Duration::from_secs(30),
    );
    let (head, body) = exchange(
        port,
        "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let doc: Value = serde_json::from_str(&body).expect("metadata JSON");
    assert_eq!(doc["authorization_servers"][0], "http://127.0.0.1:9/tenant");
    let (head, _) = exchange(
        port,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
    );
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("resource_metadata="),
        "{head}"
    );

    let out = Command::new(MOAT)
        .args(["gateway", "--ephemeral", "--config"])
        .arg(&config)
        .args([
            "--http",
            "127.0.0.1:0",
            "--oauth-issuer",
            "http://127.0.0.1:9/tenant",
            "--resource",
            "http://127.0.0.1/mcp",
            "--token",
            "t",
        ])
        .env_remove("MOAT_HTTP_TOKEN")
        .output()
        .expect("run moat");
    assert!(!out.status.success(), "{out:?}");
}
