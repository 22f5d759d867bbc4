//! No root inside: when moat runs as root (as gateways do in most containers), neither
//! `moat sandbox` nor a server behind `moat gateway` gets root's file permissions. Each
//! attack must be refused: reading `/etc/shadow` (masked: an empty file; unmasked, still
//! unreadable to uid 65534), reading a root-only file in a read-only path, writing a
//! root-owned file beside a write path, `setuid(0)` and friends. `--as-root` keeps root,
//! and says so.
//!
//! Through the gateway the attacker is a real Python SDK server (`interop/py_snoop_server.py`)
//! called by the official Python SDK client (`interop/py_client.py`); missing peers skip
//! that test, except under CI. Run as another user than root, the attacks are refused by
//! that user's own permissions and the root-only checks are not made.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

mod support;
use support::{Leftovers, Run, run};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");
const TIMEOUT: Duration = Duration::from_secs(90);
const PIPE_GRACE: Duration = Duration::from_secs(10);
const VENV_PYTHON: &str = ".venv/bin/python";

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A victim tree (real path): `ro/` (0755) with `public` (0644) and `root-only` (0600),
/// `rw/` (0755), and `beside` (0644) next to `rw/`.
struct Victim {
    _guard: tempfile::TempDir,
    dir: PathBuf,
}

impl Victim {
    fn new() -> Victim {
        let guard = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(guard.path()).unwrap();
        for d in ["ro", "rw"] {
            std::fs::create_dir(dir.join(d)).unwrap();
            set_mode(&dir.join(d), 0o755);
        }
        std::fs::write(dir.join("ro/public"), "public text\n").unwrap();
        set_mode(&dir.join("ro/public"), 0o644);
        std::fs::write(dir.join("ro/root-only"), "ROOT-ONLY SECRET\n").unwrap();
        set_mode(&dir.join("ro/root-only"), 0o600);
        std::fs::write(dir.join("beside"), "untouched\n").unwrap();
        set_mode(&dir.join("beside"), 0o644);
        Victim { _guard: guard, dir }
    }

    fn s(&self, rel: &str) -> String {
        self.dir.join(rel).to_string_lossy().into_owned()
    }
}

fn moat_sandbox(args: &[&str]) -> Run {
    let mut argv = vec![MOAT.to_owned(), "sandbox".to_owned()];
    argv.extend(args.iter().map(|a| a.to_string()));
    run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail)
}

#[test]
fn moat_sandbox_run_by_root_refuses_what_only_root_may() {
    let v = Victim::new();
    let root = is_root();
    let (ro, rw) = (v.s("ro"), v.s("rw"));
    let paths = ["--ro", ro.as_str(), "--rw", rw.as_str()];

    // The uid it runs as, said by --check and seen inside.
    let check = moat_sandbox(&["--check"]);
    assert_eq!(check.code, Some(0), "{}", check.describe());
    let id = moat_sandbox(&["--", "id", "-u"]);
    if root {
        assert!(
            check
                .stdout
                .contains("sandbox runs as: uid 65534, gid 65534"),
            "{}",
            check.describe()
        );
        assert_eq!(id.stdout, "65534\n", "{}", id.describe());
    }

    // /etc/shadow: masked (empty) by default; unmasked, still unreadable.
    let shadow = moat_sandbox(&["--", "cat", "/etc/shadow"]);
    assert_eq!(shadow.stdout, "", "{}", shadow.describe());
    if Path::new("/etc/shadow").exists() {
        assert_eq!(shadow.code, Some(0), "masked: {}", shadow.describe());
        let unmasked = moat_sandbox(&["--profile", r#"{"mask":[]}"#, "--", "cat", "/etc/shadow"]);
        assert_ne!(unmasked.code, Some(0), "{}", unmasked.describe());
        assert_eq!(unmasked.stdout, "", "{}", unmasked.describe());
    }

    // A root-only file in a read path; the public one next to it reads.
    let public = v.s("ro/public");
    let o = moat_sandbox(&[paths[0], paths[1], "--", "cat", public.as_str()]);
    assert_eq!(o.stdout, "public text\n", "{}", o.describe());
    let secret = v.s("ro/root-only");
    let o = moat_sandbox(&[paths[0], paths[1], "--", "cat", secret.as_str()]);
    if root {
        assert_ne!(o.code, Some(0), "{}", o.describe());
        assert!(!o.stdout.contains("ROOT-ONLY"), "{}", o.describe());
    }

    // A root-owned file beside a write path; the write path itself is writable.
    let script = format!(
        "echo x >> {beside}; echo \"beside $?\"; echo made > {rw}/made; echo \"rw $?\"",
        beside = v.s("beside"),
        rw = rw
    );
    let mut args = paths.to_vec();
    args.extend(["--", "sh", "-c", script.as_str()]);
    let o = moat_sandbox(&args);
    assert!(o.stdout.contains("rw 0\n"), "{}", o.describe());
    assert!(!o.stdout.contains("beside 0"), "{}", o.describe());
    assert_eq!(
        std::fs::read_to_string(v.dir.join("beside")).unwrap(),
        "untouched\n"
    );
    assert_eq!(
        std::fs::read_to_string(v.dir.join("rw/made")).unwrap(),
        "made\n"
    );
    // Made by the sandbox, owned on disk by the write path's owner (here: this user).
    use std::os::unix::fs::MetadataExt;
    let made = std::fs::metadata(v.dir.join("rw/made")).unwrap();
    let dir = std::fs::metadata(v.dir.join("rw")).unwrap();
    assert_eq!((made.uid(), made.gid()), (dir.uid(), dir.gid()));

    // No way back to root.
    let o = moat_sandbox(&[
        "--",
        "python3",
        "-c",
        "import os\nfor f in (lambda: os.setuid(0), lambda: os.seteuid(0), \
         lambda: os.setresuid(0, 0, 0), lambda: os.setgid(0), lambda: os.setgroups([0])):\n\
         \x20   try:\n\
         \x20       f(); print('gained')\n\
         \x20   except OSError:\n\
         \x20       print('refused')\n",
    ]);
    assert_eq!(o.stdout, "refused\n".repeat(5), "{}", o.describe());

    // --as-root keeps root, and warns.
    if root {
        let o = moat_sandbox(&["--as-root", "--", "id", "-u"]);
        assert_eq!(o.stdout, "0\n", "{}", o.describe());
        assert!(o.stderr.contains("warning"), "{}", o.describe());
        let o = moat_sandbox(&["--", "id", "-u"]);
        assert!(!o.stderr.contains("warning"), "{}", o.describe());
    }
}

fn path(dir: &Path, rel: &str) -> String {
    dir.join(rel).to_string_lossy().into_owned()
}

/// The hostile server: in the repository's interop/ (a source file, not an installed peer).
fn snoop_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/py_snoop_server.py")
}

/// The text of call `i`, and whether it failed.
fn outcome(out: &Value, i: usize) -> (bool, String) {
    let result = &out["calls"][i]["result"];
    let failed = out["calls"][i].get("error").is_some() || result["isError"] == true;
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    (failed, text.to_owned())
}

#[test]
fn a_server_behind_a_root_gateway_cannot_read_or_write_what_only_root_may() {
    let Some(peers) = support::interop_dir(&[VENV_PYTHON, "py_client.py"]) else {
        return;
    };
    let root = is_root();
    let v = Victim::new();
    let server = std::fs::canonicalize(snoop_server()).unwrap();
    let config = v.dir.join("moat.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = {state:?}\n\n\
             [servers.snoop]\ncommand = {python:?}\nargs = [{server:?}]\n\n\
             [servers.snoop.sandbox]\nro = [{ro:?}]\nrw = [{rw:?}]\n\n\
             [policy]\ndefault = \"allow\"\n\n[tool_search]\nmode = \"off\"\n",
            state = v.s("state"),
            python = path(&peers, VENV_PYTHON),
            server = server.to_string_lossy(),
            ro = v.s("ro"),
            rw = v.s("rw"),
        ),
    )
    .unwrap();
    let calls = [
        json!({"action": "whoami"}),
        json!({"action": "read", "path": "/etc/shadow"}),
        json!({"action": "read", "path": v.s("ro/public")}),
        json!({"action": "read", "path": v.s("ro/root-only")}),
        json!({"action": "append", "path": v.s("beside")}),
        json!({"action": "append", "path": v.s("rw/notes")}),
        json!({"action": "setuid"}),
        json!({"action": "read", "path": "/etc/gshadow"}),
    ];
    let mut argv: Vec<String> = vec![
        path(&peers, VENV_PYTHON),
        path(&peers, "py_client.py"),
        "--timeout".into(),
        "60".into(),
        "--tolerate-errors".into(),
    ];
    for c in &calls {
        argv.extend(["--call".into(), "snoop__snoop".into(), c.to_string()]);
    }
    argv.extend([
        "--".to_owned(),
        MOAT.to_owned(),
        "gateway".to_owned(),
        "--config".to_owned(),
        config.to_string_lossy().into_owned(),
    ]);
    let run = run(&argv, TIMEOUT, PIPE_GRACE, Leftovers::Fail);
    let out = run.json(0);
    let shown = run.describe();
    let text = |i| outcome(&out, i).1;

    if root {
        assert!(
            text(0).starts_with("ok: uid 65534 euid 65534 gid 65534 groups []"),
            "{shown}"
        );
    }
    // /etc/shadow and /etc/gshadow: masked, so an empty read.
    for i in [1, 7] {
        assert!(
            text(i) == "ok: " || text(i).starts_with("refused:"),
            "call {i}: {shown}"
        );
    }
    assert_eq!(text(2), "ok: public text\n", "{shown}");
    if root {
        assert!(text(3).starts_with("refused:"), "{shown}");
    }
    assert!(!run.stdout.contains("ROOT-ONLY"), "{shown}");
    assert!(text(4).starts_with("refused:"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(v.dir.join("beside")).unwrap(),
        "untouched\n"
    );
    assert_eq!(
        text(5),
        "ok: appended",
        "the write path is writable: {shown}"
    );
    assert_eq!(
        std::fs::read_to_string(v.dir.join("rw/notes")).unwrap(),
        "snooped\n"
    );
    assert!(text(6).starts_with("refused: every id change"), "{shown}");
}
