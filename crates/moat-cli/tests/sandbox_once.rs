//! `moat sandbox -- CMD`, a single command: the sandbox helper is forked from `moat` itself
//! (no second exec of the binary) and ends with it; the command's output, exit status and
//! layers are as with the exec'd helper.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

fn moat_sandbox(args: &[&str]) -> std::process::Output {
    Command::new(MOAT)
        .arg("sandbox")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("moat runs")
}

#[test]
fn output_status_and_layers_of_one_command() {
    let o = moat_sandbox(&["--json", "--", "ls", "/etc"]);
    assert!(o.status.success(), "{o:?}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.lines().any(|l| l == "passwd"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(
        o.stderr
            .split(|&b| b == b'\n')
            .rfind(|l| l.starts_with(b"{"))
            .expect("the --json report on stderr"),
    )
    .expect("JSON");
    let e = &report["enforcement"];
    assert_eq!(e["seccomp"], true, "{report}");
    if std::env::var_os("CI").is_some() {
        // CI machines have user namespaces and Landlock: the whole default profile applies.
        assert_eq!(e["namespaces"], true, "{report}");
        assert_eq!(e["landlock"], true, "{report}");
    }

    let o = moat_sandbox(&["--", "sh", "-c", "echo out; echo err >&2; exit 7"]);
    assert_eq!(o.status.code(), Some(7), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out\n");
    assert!(String::from_utf8_lossy(&o.stderr).contains("err"), "{o:?}");

    // A command that cannot be started is an error, not a silent fallback.
    let o = moat_sandbox(&["--", "/definitely/not/a/program"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("/definitely/not/a/program"),
        "{o:?}"
    );
}

#[test]
fn the_forked_helper_ends_with_moat() {
    // Without namespaces (and Landlock, so that /proc is readable) the command is a child
    // of the helper (the zygote): its parent pid names the helper, which must be a fork of
    // `moat` (moat's own command line, not a second exec with the helper's arguments) and
    // must be gone soon after `moat` exits.
    let o = moat_sandbox(&[
        "--profile",
        r#"{"namespaces": false, "landlock": false}"#,
        "--",
        "sh",
        "-c",
        "echo $PPID; tr '\\0' ' ' < /proc/$PPID/cmdline",
    ]);
    assert!(o.status.success(), "{o:?}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let (pid, cmdline) = stdout.split_once('\n').expect("two lines");
    assert!(
        cmdline.contains("sandbox --profile") && !cmdline.contains("__sandbox-init"),
        "the helper was exec'd, not forked: {cmdline}"
    );
    let zygote: u32 = pid.trim().parse().expect("a pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Gone, or a zombie nobody reaps (reparented in a container without an init).
        let state = std::fs::read_to_string(format!("/proc/{zygote}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim().to_string()));
        match state {
            None => break,
            Some(s) if s.starts_with('Z') => break,
            Some(_) => {
                assert!(Instant::now() < deadline, "the helper outlived moat");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}
