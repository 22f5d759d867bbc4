//! A stream dropped in the middle of a long tool call is resumed by our client, against our
//! own HTTP server, without losing or repeating a message: the server hangs up twice
//! (2025-11-25 SSE polling), the client comes back each time with `Last-Event-ID`.

use std::time::Duration;

use moat::transport::http::server::HttpServerOptions;
use moat::types::ProgressNotificationParams;
use moat::{
    Client, HttpOptions, HttpTransport, NoArgs, ProtocolVersion, RequestContext, RequestOptions,
    Server, VersionPreference,
};
use serde_json::json;
use tokio::sync::mpsc;

fn server() -> Server {
    Server::new("resume-test", "1.0").tool_with_context(
        "long_job",
        "Reports progress 1..=12, hanging up its stream after 4 and 8",
        |ctx: RequestContext, _: NoArgs| async move {
            for step in 1..=12u32 {
                ctx.progress(f64::from(step), Some(12.0), Some(format!("step {step}")))
                    .await;
                if step % 4 == 0 && step < 12 {
                    ctx.close_stream().await;
                    // Work on while nobody listens: these must be replayed, not lost.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Ok::<_, String>("all 12 steps done".to_owned())
        },
    )
}

#[tokio::test]
async fn a_long_call_survives_two_hang_ups_with_every_message_once() {
    let mut options = HttpServerOptions::default();
    options.sse_retry = Duration::from_millis(50);
    let http = server()
        .bind_http("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", http.local_addr().unwrap());
    tokio::spawn(http.run());

    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .connect_url(
            &url,
            HttpOptions::default().mode(HttpTransport::StreamableHttp),
        )
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel::<ProgressNotificationParams>();
    let result = tokio::time::timeout(
        Duration::from_secs(20),
        client.call_tool_with(
            "long_job",
            json!({}),
            RequestOptions::default().progress(tx),
        ),
    )
    .await
    .expect("the call hung after a hang-up")
    .unwrap();
    assert_eq!(result.content[0].as_text(), Some("all 12 steps done"));
    let mut seen = Vec::new();
    while let Ok(p) = rx.try_recv() {
        seen.push(p.progress as u32);
    }
    assert_eq!(
        seen,
        (1..=12).collect::<Vec<_>>(),
        "lost or repeated progress"
    );
    client.close().await;
}
