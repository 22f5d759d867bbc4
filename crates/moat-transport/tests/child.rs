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

/// Waits for the end of `conn`'s stream and returns the reason it gave.
async fn ended(conn: &mut moat_transport::Connection) -> String {
    let next = tokio::time::timeout(Duration::from_secs(10), conn.inbound.recv())
        .await
        .expect("the stream should end within 10 s");
    match next {
        Some(Inbound::Ended(why)) => why,
        other => panic!("expected Inbound::Ended, got {other:?}"),
    }
}

#[tokio::test]
async fn the_end_of_the_stream_names_the_exit_status_and_the_last_stderr_lines() {
    // Repeated: the stderr reader and the stdout reader race, and the last words must win
    // every time, not most times.
    for round in 0..20 {
        let (mut conn, child) =
            ChildProcess::spawn(sh("echo starting >&2; echo boom >&2; exit 1")).unwrap();
        let why = ended(&mut conn).await;
        assert_eq!(
            why,
            "server process \"sh\" exited (exit status: 1); its last stderr lines:\n  \
             starting\n  boom",
            "round {round}"
        );
        assert_eq!(child.stderr_tail(), ["starting", "boom"], "round {round}");
    }
}

#[tokio::test]
async fn a_silent_child_ends_with_its_exit_status_alone() {
    let (mut conn, child) = ChildProcess::spawn(sh("exit 4")).unwrap();
    assert_eq!(
        ended(&mut conn).await,
        "server process \"sh\" exited (exit status: 4)"
    );
    assert!(child.stderr_tail().is_empty());
}

#[tokio::test]
async fn the_stderr_tail_stays_bounded_and_keeps_the_newest_lines() {
    // 200 numbered lines, some of them 3000 bytes long, then the last words; a child whose
    // stderr stopped being drained would block long before the end (a pipe holds 64 KiB).
    let script = "i=0; long=$(printf '%3000s' '' | tr ' ' x); \
                  while [ $i -lt 200 ]; do echo \"line $i $long\" >&2; echo \"line $i\" >&2; i=$((i+1)); done; \
                  printf '\\377 not utf-8\\n' >&2; echo 'last words' >&2; exit 2";
    let (mut conn, child) = ChildProcess::spawn(sh(script)).unwrap();
    let why = ended(&mut conn).await;
    assert!(
        why.starts_with("server process \"sh\" exited (exit status: 2); its last stderr lines:\n"),
        "{why}"
    );
    assert!(
        why.ends_with("\n  \u{fffd} not utf-8\n  last words"),
        "{why}"
    );

    let tail = child.stderr_tail();
    assert!(!tail.is_empty() && tail.len() <= 20, "{} lines", tail.len());
    assert!(
        tail.iter().all(|l| l.len() <= 503),
        "a line longer than 500 bytes (+ `…`)"
    );
    let total: usize = tail.iter().map(String::len).sum();
    assert!(total <= 4096, "{total} bytes kept");
    assert_eq!(tail.last().map(String::as_str), Some("last words"));
    assert!(tail.iter().any(|l| l == "line 199"), "{tail:?}");
    assert!(
        tail.iter()
            .filter(|l| l.ends_with('…'))
            .all(|l| l.starts_with("line 1"))
    );
}

#[tokio::test]
async fn the_end_of_the_stream_waits_briefly_for_stderr_to_end() {
    // The server has exited and its stdout is closed, but something it started still holds
    // stderr and has a last word: the reason waits for it, within its half-second budget.
    let (mut conn, _child) =
        ChildProcess::spawn(sh("(exec >&-; sleep 0.1; echo late words >&2) & exit 1")).unwrap();
    let why = ended(&mut conn).await;
    assert!(why.contains("exit status: 1"), "{why}");
    assert!(why.ends_with("\n  late words"), "{why}");

    // One that never lets go of stderr costs the budget, not more.
    let (mut conn, _child) =
        ChildProcess::spawn(sh("(exec >&-; echo lingering >&2; sleep 3) & exit 5")).unwrap();
    let started = Instant::now();
    let why = ended(&mut conn).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        why,
        "server process \"sh\" exited (exit status: 5); its last stderr lines:\n  lingering"
    );
}
