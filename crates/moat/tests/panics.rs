//! A handler that panics ends its own request with an internal error, and nothing else:
//! over stdio the connection goes on, and over HTTP a 2026-07-28 request (whose handler runs
//! on its connection's reading task) is answered, and the server keeps serving.

mod support;

use moat::{Client, NoArgs, Server};
use moat_test_support::raw_http::modern_request;
use serde_json::json;

fn server() -> Server {
    Server::new("fragile", "1.0")
        .tool("boom", "Panics", |_: NoArgs| async move {
            if std::hint::black_box(true) {
                panic!("the handler's bug");
            }
            Ok::<_, String>("unreachable")
        })
        .tool("fine", "Answers", |_: NoArgs| async move {
            Ok::<_, String>("still here")
        })
}

#[tokio::test]
async fn a_panic_over_stdio_fails_its_request_only() {
    let (a, b) = support::pair();
    let _served = server().start(a);
    let client = Client::builder().connect(b).await.expect("connect");
    let err = client
        .call_tool("boom", json!({}))
        .await
        .expect_err("the panicking call fails");
    match err {
        moat::Error::Remote { error, .. } => assert_eq!(error.code, -32603, "{error:?}"),
        other => panic!("not an error answer: {other:?}"),
    }
    let ok = client
        .call_tool("fine", json!({}))
        .await
        .expect("then a call works");
    assert_eq!(ok.is_error, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_2026_request_over_http_is_answered() {
    let http = server()
        .bind_http(
            "127.0.0.1:0".parse().expect("addr"),
            moat::transport::http::server::HttpServerOptions::default(),
        )
        .await
        .expect("bind");
    let authority = http.local_addr().expect("addr").to_string();
    tokio::spawn(http.run());
    let call = |tool: &'static str| {
        let authority = authority.clone();
        tokio::task::spawn_blocking(move || {
            modern_request(
                &authority,
                "tools/call",
                Some(tool),
                json!({"name": tool, "arguments": {}}),
                None,
            )
        })
    };
    let reply = tokio::time::timeout(std::time::Duration::from_secs(30), call("boom"))
        .await
        .expect("answered, not left hanging")
        .expect("joined")
        .expect("a reply");
    assert_eq!(reply.json["error"]["code"], -32603, "{}", reply.json);
    let reply = call("fine").await.expect("joined").expect("a reply");
    assert_eq!(
        reply.json["result"]["content"][0]["text"], "still here",
        "{}",
        reply.json
    );
}
