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

/// `moat demo` (the main job): every step of the supervised path behaves, and the trace
/// says so step by step.
#[test]
fn demo_walks_the_supervised_path() {
    let out = Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["demo", "--json"])
        .output()
        .expect("run moat demo");
    let trace: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "JSON trace ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        out.status.success(),
        "trace: {trace:#}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(trace["ok"], true);
    let steps: Vec<&str> = trace["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["step"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        steps,
        [
            "start",
            "negotiate",
            "list tools",
            "allowed call",
            "read-only SQL",
            "policy refuses a write",
            "database refuses a write",
            "an injected instruction arrives",
            "exfiltration held for consent",
            "audit trail",
        ]
    );
    // The token counts are real o200k_base counts: search mode costs exactly the three
    // meta-tools' definitions, and the full list costs more, at a plausible rate per tool.
    let listing = &trace["steps"][2]["detail"];
    let meta: Vec<serde_json::Value> = moat_host::search::meta_tools()
        .iter()
        .map(|t| serde_json::json!(t))
        .collect();
    assert_eq!(
        listing["search_mode_tokens"].as_u64(),
        Some(moat_search::tokens::tools_cost(&meta) as u64),
        "{listing}"
    );
    let tools = listing["tools"].as_array().expect("tool names").len() as u64;
    let tokens = listing["tokens"].as_u64().expect("token count");
    assert!(
        tokens > listing["search_mode_tokens"].as_u64().unwrap_or(u64::MAX),
        "{listing}"
    );
    assert!(
        (50 * tools..=2000 * tools).contains(&tokens),
        "{tokens} tokens for {tools} tools"
    );
    let audit = trace["steps"][9]["detail"]
        .as_array()
        .expect("audit records");
    assert_eq!(audit[5]["rule"], "taint");
    assert_eq!(audit[5]["outcome"], "refused");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains('\x1b'),
        "no colour in JSON"
    );
}
