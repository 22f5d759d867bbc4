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

/// A gateway in front of two `moat serve everything`s, `docs` and `more`; policy hides
/// `more`'s skill. Run through moat's own client over stdio, in every revision.
mod through_the_gateway {
    use moat::types::{ResourceContents, SkillResources};
    use moat::{Client, ProtocolVersion, VersionPreference};

    use super::MOAT;

    const SKILL: &str = "skill://docs/moat/release-notes/SKILL.md";
    const HIDDEN: &str = "skill://more/moat/release-notes/SKILL.md";

    fn config(dir: &std::path::Path) -> String {
        let text = format!(
            "state_dir = {state:?}\n\
             [servers.docs]\ncommand = {MOAT:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n\
             [servers.more]\ncommand = {MOAT:?}\nargs = [\"serve\", \"everything\"]\nsandbox = false\n\
             [policy]\ndefault = \"allow\"\n\
             [[policy.rules]]\nname = \"no-more-notes\"\ndecision = \"deny\"\nserver = \"more\"\ntool = \"release-notes\"\n",
            state = dir.join("state"),
        );
        let file = dir.join("moat.toml");
        std::fs::write(&file, text).expect("write moat.toml");
        file.to_string_lossy().into_owned()
    }

    async fn connect(config: &str, version: ProtocolVersion) -> Client {
        Client::builder()
            .protocol(VersionPreference::Exact(version))
            .connect_command([MOAT, "gateway", "--config", config])
            .await
            .expect("connect to the gateway")
    }

    fn text_of(contents: &[ResourceContents]) -> &str {
        match contents {
            [ResourceContents::Text(t)] => &t.text,
            other => panic!("one text content expected: {other:?}"),
        }
    }

    #[tokio::test]
    async fn skills_are_namespaced_by_server_filtered_by_policy_and_read_from_their_server() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config(dir.path());
        for version in [ProtocolVersion::V2025_06_18, ProtocolVersion::V2026_07_28] {
            let client = connect(&config, version).await;
            assert!(
                client.offers_skills(),
                "{version}: the gateway declares the extension"
            );

            let skills = client.list_all_skills().await.expect("skills/list");
            let uris: Vec<&str> = skills.iter().map(|s| s.uri.as_str()).collect();
            assert_eq!(
                uris,
                [SKILL],
                "{version}: docs' skill only (more's is denied)"
            );
            let skill = &skills[0];
            assert_eq!(
                skill.name(),
                "release-notes",
                "{version}: the name is the server's"
            );
            let SkillResources::Files(files) = &skill.resources else {
                panic!("{version}: a manifest of files expected");
            };
            assert_eq!(files.len(), 3, "{version}");
            assert!(
                files
                    .iter()
                    .all(|f| f.uri.starts_with("skill://docs/moat/release-notes/")),
                "{version}: {files:?}"
            );

            // skills/get and resources/read go to docs, under its own URIs; the contents
            // come back under the gateway's.
            let got = client.get_skill(SKILL).await.expect("skills/get");
            assert_eq!(&got, skill, "{version}");
            let read = client.read_resource(SKILL).await.expect("resources/read");
            assert!(text_of(&read.contents).starts_with("---\nname: release-notes\n"));
            match &read.contents[0] {
                ResourceContents::Text(t) => assert_eq!(t.uri, SKILL, "{version}"),
                other => panic!("{other:?}"),
            }
            for file in files {
                let read = client
                    .read_resource(&file.uri)
                    .await
                    .expect("a listed file");
                assert_eq!(read.contents.len(), 1, "{version}: {}", file.uri);
            }
            let listing = client
                .read_directory("skill://docs/moat/release-notes")
                .await
                .expect("resources/directory/read");
            let names: Vec<&str> = listing.iter().map(|r| r.uri.as_str()).collect();
            assert!(names.contains(&SKILL), "{version}: {names:?}");
            assert!(
                names
                    .iter()
                    .all(|u| u.starts_with("skill://docs/moat/release-notes/")),
                "{version}: {names:?}"
            );

            // The hidden skill cannot be had by asking for it directly either.
            let err = client.get_skill(HIDDEN).await.expect_err("hidden skill");
            assert!(err.to_string().contains(HIDDEN), "{version}: {err}");
            client
                .read_resource(HIDDEN)
                .await
                .expect_err("hidden SKILL.md");
            client
                .read_resource("skill://more/moat/release-notes/templates/notes.md")
                .await
                .expect_err("a hidden skill's file");
            client
                .read_directory("skill://more/moat/release-notes")
                .await
                .expect_err("a hidden skill's directory");
            // Nor through a server the gateway does not have.
            client
                .read_resource("skill://elsewhere/moat/release-notes/SKILL.md")
                .await
                .expect_err("no such server");
            client.close().await;
        }
    }

    #[tokio::test]
    async fn the_cli_lists_and_prints_skills_through_the_gateway() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config(dir.path());
        let out = super::moat(&[
            "skill",
            "release-notes",
            "--",
            MOAT,
            "gateway",
            "--config",
            &config,
        ]);
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("---\nname: release-notes\n"), "{text}");
        assert!(
            text.contains("skill://docs/moat/release-notes/templates/notes.md"),
            "{text}"
        );
    }

    #[test]
    fn a_rule_naming_a_skill_is_not_reported_as_selecting_nothing_but_a_typo_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config(dir.path());
        let out = super::moat(&["gateway", "--check", "--config", &config]);
        assert!(out.status.success(), "{out:?}");
        let typo = std::fs::read_to_string(&config)
            .expect("read")
            .replace("tool = \"release-notes\"", "tool = \"release-nots\"");
        std::fs::write(&config, typo).expect("write");
        let out = super::moat(&["gateway", "--check", "--config", &config]);
        assert!(!out.status.success(), "{out:?}");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(all.contains("closest: release-notes"), "{all}");
    }
}
