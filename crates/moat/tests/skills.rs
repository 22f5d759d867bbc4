//! The Skills extension end to end, SDK server to SDK client, in every revision: the
//! server declares it (with `directoryRead`) and `resources`; `skills/list` pages whole
//! skills with digests and sizes that match what `resources/read` returns;
//! `skills/get` finds a skill by its SKILL.md; `resources/directory/read` lists direct
//! children; unknown skills and directories are -32602.

mod support;

use moat::server::{SkillBundle, SkillError};
use moat::types::{ResourceContents, SkillResources};
use moat::{ClientBuilder, ProtocolVersion, Server, VersionPreference};
use sha2::{Digest, Sha256};
use support::pair;

const GIT_MD: &str = "---\nname: git-workflow\ndescription: Follow the team's Git conventions\n---\nBranch from main.\n";
const REFUNDS_MD: &str = "---\nname: refunds\ndescription: Process refund requests\nlicense: Apache-2.0\nmetadata:\n  version: \"2.1\"\n---\nSee examples/email.md.\n";

fn server() -> Server {
    let git = SkillBundle::from_files([("SKILL.md", GIT_MD)]).expect("git-workflow");
    let refunds = SkillBundle::from_files([
        ("SKILL.md", REFUNDS_MD.as_bytes().to_vec()),
        ("examples/email.md", b"Dear customer,".to_vec()),
        ("examples/regional/eu.md", b"EU rules".to_vec()),
    ])
    .expect("refunds")
    .with_prefix("acme/billing");
    Server::new("skills", "1.0")
        .page_size(1)
        .skill(git)
        .skill(refunds)
}

#[tokio::test]
async fn skills_are_listed_fetched_and_read_in_every_revision() {
    for version in ProtocolVersion::ALL {
        let (s, c) = pair();
        let _peer = server().start(s);
        let client = ClientBuilder::new("probe", "1")
            .protocol(VersionPreference::Exact(version))
            .connect(c)
            .await
            .expect("connect");
        assert_eq!(
            client.skills_settings().map(|s| s.directory_read),
            Some(true),
            "{version}"
        );
        assert!(
            client.server_capabilities().resources.is_some(),
            "{version}"
        );

        // Page size 1: two pages, each one whole skill.
        let first = client.list_skills(None).await.expect("skills/list");
        assert_eq!(first.skills.len(), 1, "{version}");
        assert!(first.next_cursor.is_some(), "{version}");
        assert_eq!(
            first.ttl_ms.is_some(),
            version == ProtocolVersion::V2026_07_28,
            "{version}: caching hints only in 2026-07-28"
        );
        let skills = client.list_all_skills().await.expect("every page");
        let names: Vec<&str> = skills.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["git-workflow", "refunds"], "{version}");

        let refunds = &skills[1];
        assert_eq!(refunds.uri, "skill://acme/billing/refunds/SKILL.md");
        assert_eq!(refunds.frontmatter["license"], "Apache-2.0");
        assert_eq!(refunds.frontmatter["metadata"]["version"], "2.1");
        let SkillResources::Files(files) = &refunds.resources else {
            panic!("{version}: a manifest")
        };
        assert_eq!(files.len(), 3, "{version}");
        for file in files {
            let read = client
                .read_resource(&file.uri)
                .await
                .expect("resources/read");
            let bytes = match &read.contents[0] {
                ResourceContents::Text(t) => t.text.clone().into_bytes(),
                other => panic!("{version}: text expected, got {other:?}"),
            };
            assert_eq!(bytes.len() as u64, file.size, "{version} {}", file.uri);
            assert_eq!(
                file.digest,
                format!("sha256:{:x}", Sha256::digest(&bytes)),
                "{version} {}",
                file.uri
            );
        }

        let got = client.get_skill(&refunds.uri).await.expect("skills/get");
        assert_eq!(&got, refunds, "{version}");

        let root = client
            .read_directory("skill://acme/billing/refunds")
            .await
            .expect("the skill's root");
        let listed: Vec<(&str, Option<&str>)> = root
            .iter()
            .map(|r| (r.name.as_str(), r.mime_type.as_deref()))
            .collect();
        assert_eq!(
            listed,
            [
                ("examples", Some("inode/directory")),
                ("SKILL.md", Some("text/markdown"))
            ],
            "{version}"
        );
        let examples = client
            .read_directory("skill://acme/billing/refunds/examples")
            .await
            .expect("examples/, over two pages");
        let names: Vec<&str> = examples.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["regional", "email.md"], "{version}");

        for bad in [
            client.get_skill("skill://nope/SKILL.md").await.err(),
            client
                .get_skill("skill://acme/billing/refunds/examples/email.md")
                .await
                .err(),
            client
                .read_directory("skill://acme/billing/refunds/nope")
                .await
                .err(),
            client
                .read_directory("skill://acme/billing/refunds/SKILL.md")
                .await
                .err(),
        ] {
            let e = bad.expect("refused");
            assert_eq!(e.remote().map(|e| e.code), Some(-32602), "{version}: {e}");
        }
        client.close().await;
    }
}

#[tokio::test]
async fn a_server_without_skills_declares_nothing_and_knows_no_skills_methods() {
    let (s, c) = pair();
    let _peer = Server::new("plain", "1").start(s);
    let client = ClientBuilder::new("probe", "1")
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .connect(c)
        .await
        .expect("connect");
    assert!(!client.offers_skills());
    assert!(client.server_capabilities().resources.is_none());
    let e = client.list_skills(None).await.expect_err("no skills here");
    assert_eq!(e.remote().map(|e| e.code), Some(-32601), "{e}");
}

#[test]
fn skills_are_read_from_a_directory_of_skill_directories() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write("git-workflow/SKILL.md", GIT_MD);
    write("refunds/SKILL.md", REFUNDS_MD);
    write("refunds/examples/email.md", "Dear customer,");
    write("not-a-skill/notes.md", "nothing here");
    let skills = moat::server::skills::skills_in(dir.path()).expect("two skills");
    let names: Vec<&str> = skills.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["git-workflow", "refunds"]);
    let SkillResources::Files(files) = skills[1].describe().resources else {
        panic!("a manifest")
    };
    assert_eq!(files.len(), 2);

    write("broken/SKILL.md", "no frontmatter");
    let e = Server::new("s", "1").skills_from(dir.path()).err();
    assert!(matches!(e, Some(SkillError::Frontmatter(_))), "{e:?}");
}
