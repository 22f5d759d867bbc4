//! `moat skills` and `moat skill NAME` against `moat serve everything`, which offers one
//! skill (the Skills extension), in both eras.

use std::process::Command;

use serde_json::Value;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

fn moat(args: &[&str]) -> std::process::Output {
    Command::new(MOAT).args(args).output().expect("run moat")
}

#[test]
fn skills_are_listed_and_one_is_printed_in_both_eras() {
    for protocol in ["2026-07-28", "2025-06-18"] {
        let out = moat(&[
            "skills",
            "--json",
            "--protocol",
            protocol,
            "--",
            MOAT,
            "serve",
            "everything",
        ]);
        assert!(out.status.success(), "{out:?}");
        let listed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let skills = listed["skills"].as_array().expect("skills");
        assert_eq!(skills.len(), 1, "{listed}");
        assert_eq!(skills[0]["uri"], "skill://moat/release-notes/SKILL.md");
        assert_eq!(skills[0]["frontmatter"]["name"], "release-notes");
        assert_eq!(skills[0]["resources"].as_array().map(Vec::len), Some(3));

        let out = moat(&[
            "skill",
            "release-notes",
            "--protocol",
            protocol,
            "--",
            MOAT,
            "serve",
            "everything",
        ]);
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("---\nname: release-notes\n"), "{text}");
        assert!(
            text.contains("skill://moat/release-notes/templates/notes.md"),
            "{text}"
        );
    }
}

#[test]
fn an_unknown_skill_is_a_usage_error_naming_the_list_command() {
    let out = moat(&["skill", "nope", "--", MOAT, "serve", "everything"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no skill is called \"nope\""), "{err}");
    assert!(err.contains("moat skills"), "{err}");
}

#[test]
fn a_server_without_skills_says_so() {
    let out = moat(&["skills", "--", MOAT, "serve", "exec"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("(no skills)"));
    let out = moat(&["skill", "x", "--", MOAT, "serve", "exec"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("offers no skills"));
}
