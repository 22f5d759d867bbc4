//! The child-process transport against real processes: echo, exit, shutdown escalation.

use std::time::{Duration, Instant};

use moat_transport::{ChildConfig, ChildProcess, Frame, Inbound};

fn sh(script: &str) -> ChildConfig {
    ChildConfig::new("sh", ["-c", script]).grace(Duration::from_millis(300))
}

#[tokio::test]
async fn echoes_lines_through_a_real_child() {
    let (mut conn, child) = ChildProcess::spawn(sh("cat")).unwrap();
    conn.outbound
        .send(String::from("{\"hello\":1}").into())
        .await
        .unwrap();
    match conn.inbound.recv().await {
        Some(Inbound::Frame(Frame::Line(l))) => assert_eq!(l, "{\"hello\":1}"),
        other => panic!("{other:?}"),
    }
    // Closing stdin is enough for cat: it exits within the first grace period.
    (conn.closer.take().unwrap())().await;
    assert!(child.exit_status().unwrap().success());
}

#[tokio::test]
async fn an_exiting_child_ends_the_stream_with_a_reason() {
    let (mut conn, child) = ChildProcess::spawn(sh("exit 3")).unwrap();
    match conn.inbound.recv().await {
        Some(Inbound::Ended(why)) => assert!(why.contains("exit status: 3"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(conn.inbound.recv().await.is_none());
    assert_eq!(child.wait().await.unwrap().code(), Some(3));
}

#[tokio::test]
async fn a_child_ignoring_stdin_and_sigterm_is_killed() {
    let (mut conn, child) =
        ChildProcess::spawn(sh("trap '' TERM; while :; do sleep 0.05; done")).unwrap();
    let pid = child.id().unwrap();
    let started = Instant::now();
    (conn.closer.take().unwrap())().await;
    let status = child.exit_status().expect("reaped");
    assert!(!status.success());
    assert!(started.elapsed() < Duration::from_secs(5));
    // Reaped: no zombie left under that pid.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}
