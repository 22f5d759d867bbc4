//! `moat gateway --http` and `moat serve --http` under an orchestrator: `/healthz` answers
//! 200 once the gateway's servers have started, `/livez` while it serves, and SIGTERM stops
//! either one cleanly (exit status 0, after draining), as a container runtime or a service
//! manager expects.

use std::process::Command;
use std::time::{Duration, Instant};

use moat_test_support::listening::{Listening, mcp_authority};
use moat_test_support::raw_http::get_status as probe;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");
const WITHIN: Duration = Duration::from_secs(60);

fn start(args: &[&str], banner: &'static str) -> (Listening, String) {
    let mut cmd = Command::new(MOAT);
    cmd.args(args);
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    Listening::start(
        cmd,
        move |line| {
            line.starts_with(banner)
                .then(|| mcp_authority(line))
                .flatten()
        },
        WITHIN,
    )
}

#[test]
fn the_gateway_is_ready_once_its_servers_start_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("moat.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = {:?}\n[servers.docs]\ncommand = {MOAT:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n",
            dir.path().join("state")
        ),
    )
    .expect("write moat.toml");
    let config = config.to_string_lossy().into_owned();
    let (mut gateway, authority) = start(
        &["gateway", "--http", "127.0.0.1:0", "--config", &config],
        "moat gateway: serving on",
    );
    assert_eq!(probe(&authority, "/livez"), Some(200), "{}", gateway.log());
    let deadline = Instant::now() + WITHIN;
    while probe(&authority, "/healthz") != Some(200) {
        assert!(Instant::now() < deadline, "never ready:\n{}", gateway.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = gateway
        .stop_status(libc::SIGTERM, WITHIN)
        .unwrap_or_else(|| panic!("still running after SIGTERM:\n{}", gateway.log()));
    assert!(status.success(), "{status:?}\n{}", gateway.log());
}

#[test]
fn moat_serve_stops_cleanly_on_sigterm() {
    let (mut server, authority) = start(
        &["serve", "everything", "--http", "127.0.0.1:0"],
        "moat: serving ",
    );
    assert_eq!(probe(&authority, "/healthz"), Some(200), "{}", server.log());
    let status = server
        .stop_status(libc::SIGTERM, WITHIN)
        .unwrap_or_else(|| panic!("still running after SIGTERM:\n{}", server.log()));
    assert!(status.success(), "{status:?}\n{}", server.log());
}
