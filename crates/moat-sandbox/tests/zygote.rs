//! The zygote (the helper process started once and forked for every run), stressed and
//! attacked: concurrent runs keep their output and status apart, a zygote that dies is
//! replaced, and runs die with the process that supervises them, with or without
//! namespaces.
//!
//! The tests here run one at a time (one of them kills this process's zygote).

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use moat_sandbox::{Outcome, Profile, Sandbox, Termination};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The helper binary: where cargo built it, or `MOAT_SANDBOX_TEST_HELPER` (a copy another
/// user can reach, when CI runs this suite again as uid 65534).
fn helper() -> std::path::PathBuf {
    std::env::var_os("MOAT_SANDBOX_TEST_HELPER").map_or_else(
        || env!("CARGO_BIN_EXE_moat-sandbox-init").into(),
        Into::into,
    )
}

fn sandbox() -> Sandbox {
    Sandbox::with_helper(helper())
}

fn profile(namespaces: bool) -> Profile {
    let mut p = Profile {
        namespaces,
        ..Profile::default()
    };
    p.limits.timeout = Some(Duration::from_secs(30));
    p
}

fn run(namespaces: bool, argv: &[&str]) -> Outcome {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    sandbox()
        .spawn(&profile(namespaces), &argv)
        .expect("sandbox runs")
}

/// Processes whose command line is exactly `argv`, as (pid, parent pid).
fn processes(argv: &[&str]) -> Vec<(i32, i32)> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline != want {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid …: the comm may hold spaces, so split after its ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let zombie = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            == Some("Z");
        if !zombie {
            found.push((pid, ppid));
        }
    }
    found
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn concurrent_runs_keep_their_output_and_status_apart() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let threads: Vec<_> = (0..12)
        .map(|i: i32| {
            std::thread::spawn(move || {
                let namespaces = i % 3 != 0;
                let script = format!("echo out-{i}; echo err-{i} >&2; exit {}", i % 7);
                let o = run(namespaces, &["sh", "-c", &script]);
                assert_eq!(String::from_utf8_lossy(&o.stdout), format!("out-{i}\n"));
                assert_eq!(String::from_utf8_lossy(&o.stderr), format!("err-{i}\n"));
                assert_eq!(o.termination, Termination::Exited(i % 7), "{o:?}");
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn a_zygote_that_dies_is_replaced() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let helper = helper();
    let helper = helper.to_str().expect("a UTF-8 helper path");
    assert!(run(true, &["true"]).success());
    let me = std::process::id() as i32;
    let ours = |z: &(i32, i32)| z.1 == me;
    let before: Vec<i32> = processes(&[helper, "__sandbox-init", "zygote"])
        .into_iter()
        .filter(ours)
        .map(|z| z.0)
        .collect();
    assert_eq!(before.len(), 1, "one zygote per helper: {before:?}");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(before[0], libc::SIGKILL) };
    wait_for("the zygote to die", Duration::from_secs(5), || {
        !processes(&[helper, "__sandbox-init", "zygote"])
            .iter()
            .any(|z| z.0 == before[0])
    });
    for namespaces in [true, false] {
        let o = run(namespaces, &["sh", "-c", "echo again"]);
        assert_eq!(String::from_utf8_lossy(&o.stdout), "again\n", "{o:?}");
    }
    let after: Vec<i32> = processes(&[helper, "__sandbox-init", "zygote"])
        .into_iter()
        .filter(ours)
        .map(|z| z.0)
        .collect();
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, before);
}

/// Set in the environment of this test binary when it plays the supervising process.
const SUPERVISOR: &str = "MOAT_SANDBOX_TEST_SUPERVISOR";

#[test]
fn runs_die_with_the_process_that_supervises_them() {
    if let Ok(how) = std::env::var(SUPERVISOR) {
        // The supervising process: start a long run, and wait to be killed.
        let (namespaces, seconds) = how.split_once(' ').unwrap();
        let o = run(namespaces == "ns", &["sleep", seconds]);
        panic!("the run ended: {o:?}");
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for (i, namespaces) in ["ns", "no-ns"].into_iter().enumerate() {
        // A command line no other process has.
        let seconds = format!("31.{}{i}", std::process::id());
        let mut supervisor = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "runs_die_with_the_process_that_supervises_them",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(SUPERVISOR, format!("{namespaces} {seconds}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the sandboxed sleep", Duration::from_secs(20), || {
            !processes(&["sleep", &seconds]).is_empty()
        });
        supervisor.kill().unwrap();
        supervisor.wait().unwrap();
        wait_for(
            &format!("the sandboxed sleep to die ({namespaces})"),
            Duration::from_secs(5),
            || processes(&["sleep", &seconds]).is_empty(),
        );
    }
}

#[test]
fn the_helper_is_forked_only_from_a_single_threaded_process() {
    // A test binary always has more than one thread (the harness's and the test's): a fork
    // here could copy a lock another thread holds. Refused, and runs still work (the
    // helper is exec'd as usual).
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let err = Sandbox::with_helper("/definitely/not/a/helper")
        .start_here(false)
        .expect_err("refused with threads");
    assert!(
        matches!(err, moat_sandbox::Error::Unsupported(_)),
        "{err:?}"
    );
    assert!(run(true, &["true"]).success());
}
