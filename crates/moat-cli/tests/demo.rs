//! The README's first command: `moat demo` runs on built-in defaults and tells the truth.

use std::process::Command;

#[test]
fn demo_runs_and_reports_every_revision() {
    let out = Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["demo", "--tour", "--json"])
        .output()
        .expect("run moat demo");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    let revisions = summary["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 6);
    for r in &revisions[..5] {
        assert_eq!(r["asked"], r["agreed"], "{r}");
        assert_eq!(r["tools"], 35);
    }
    assert_eq!(
        revisions[5]["agreed"], "2026-07-28",
        "auto prefers the modern era"
    );
    assert!(
        summary["elicitation"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("action=accept")
    );
    let crash = &summary["crash"];
    assert_eq!(crash["reaped"], true);
    assert!(crash["failed_ms"].as_u64().unwrap() < 1000);
    assert!(crash["error"].as_str().unwrap().contains("exited"));
}

#[test]
fn human_output_has_no_colour_when_piped() {
    let out = Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["demo", "--tour"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("speaking 2026-07-28"));
    assert!(!text.contains('\x1b'), "no escape codes on a pipe");
}
