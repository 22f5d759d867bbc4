//! The policy engine end to end: configuration in TOML, decisions for listing and calling, rate
//! limits, labels, and configuration errors.

use std::time::{Duration, Instant};

use moat_host::policy::{
    Decision, Labels, Policy, PolicyConfig, PolicyError, RequestKind, ToolRef, TrustOverride,
    Verdict,
};
use moat_protocol::types::ToolAnnotations;
use serde::Deserialize;
use serde_json::{Map, Value, json};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    policy: PolicyConfig,
}

fn config(toml_text: &str) -> PolicyConfig {
    toml::from_str::<File>(toml_text).unwrap().policy
}

fn policy(toml_text: &str) -> Policy {
    Policy::new(&config(toml_text)).unwrap()
}

fn policy_error(toml_text: &str) -> String {
    let err: PolicyError = Policy::new(&config(toml_text)).unwrap_err();
    err.to_string()
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn call(p: &Policy, server: &str, tool: &str, a: Value) -> Verdict {
    p.evaluate(&ToolRef::new(server, tool), Some(&args(a)))
}

fn decide(p: &Policy, server: &str, tool: &str, a: Value) -> Decision {
    call(p, server, tool, a).decision
}

#[test]
fn deny_by_tool_glob() {
    let p = policy(
        r#"
        [policy]
        default = "allow"
        [[policy.rules]]
        name = "no-shell"
        decision = "deny"
        tool = ["run_*", "spawn"]
        "#,
    );
    let v = call(&p, "exec", "run_command", json!({}));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.rule, "rule 1 (no-shell)");
    assert_eq!(decide(&p, "other", "spawn", json!({})), Decision::Deny);
    assert_eq!(decide(&p, "exec", "list", json!({})), Decision::Allow);
    assert!(!p.visible(&ToolRef::new("exec", "run_command")));
}

#[test]
fn deny_by_server_glob() {
    let p = policy(
        r#"
        [policy]
        default = "allow"
        [[policy.rules]]
        decision = "deny"
        server = "shady-*"
        "#,
    );
    let v = call(&p, "shady-tools", "anything", json!({}));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.rule, "rule 1");
    assert_eq!(decide(&p, "fs", "anything", json!({})), Decision::Allow);
    // The tool glob is on the tool's own name, not on `server__tool`.
    assert_eq!(
        decide(&p, "fs", "shady-tools__x", json!({})),
        Decision::Allow
    );
}

#[test]
fn deny_and_ask_by_annotation() {
    let p = policy(
        r#"
        [policy]
        default = "allow"
        [[policy.rules]]
        decision = "deny"
        annotations = { openWorldHint = true, readOnlyHint = false }
        [[policy.rules]]
        name = "destructive-asks"
        decision = "ask"
        annotations = { destructiveHint = true }
        "#,
    );
    let open = ToolAnnotations {
        open_world_hint: Some(true),
        read_only_hint: Some(false),
        ..Default::default()
    };
    let destructive = ToolAnnotations {
        destructive_hint: Some(true),
        open_world_hint: Some(false),
        ..Default::default()
    };
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        open_world_hint: Some(false),
        ..Default::default()
    };
    fn with(a: &ToolAnnotations) -> ToolRef<'_> {
        ToolRef::new("s", "t").with_annotations(Some(a))
    }
    let empty = Map::new();
    assert_eq!(
        p.evaluate(&with(&open), Some(&empty)).decision,
        Decision::Deny
    );
    let v = p.evaluate(&with(&destructive), Some(&empty));
    assert_eq!(
        (v.decision, v.rule.as_str()),
        (Decision::Ask, "rule 2 (destructive-asks)")
    );
    assert_eq!(
        p.evaluate(&with(&read_only), Some(&empty)).decision,
        Decision::Allow
    );
    // No annotations: the MCP defaults (not read-only, destructive, open world) apply.
    assert_eq!(decide(&p, "s", "t", json!({})), Decision::Deny);
}

const CONFINED: &str = r#"
    [policy]
    default = "allow"
    [[policy.rules]]
    name = "confine"
    decision = "deny"
    server = "fs"
    tool = "read"
    [policy.rules.args]
    path = { outside = ["/home/*/project/**", "/tmp"] }
    [[policy.rules]]
    decision = "deny"
    server = "fs"
    tool = "read_many"
    args = { paths = { outside = "/home/*/project" } }
"#;

#[test]
fn path_outside_allowed_globs_is_denied() {
    let p = policy(CONFINED);
    let d = |a: Value| decide(&p, "fs", "read", a);
    assert_eq!(
        d(json!({ "path": "/home/u/project/src/lib.rs" })),
        Decision::Allow
    );
    assert_eq!(d(json!({ "path": "/home/u/project" })), Decision::Allow);
    assert_eq!(d(json!({ "path": "/tmp/x" })), Decision::Allow);
    assert_eq!(d(json!({ "path": "/etc/passwd" })), Decision::Deny);
    assert_eq!(d(json!({ "path": "/home/u/projectile" })), Decision::Deny);
    // `..` cannot walk out of the allowed tree.
    assert_eq!(
        d(json!({ "path": "/home/u/project/../../../etc/passwd" })),
        Decision::Deny
    );
    assert_eq!(
        d(json!({ "path": "/home/u/project/a/../b" })),
        Decision::Allow
    );
    // A relative path cannot be proven inside.
    assert_eq!(d(json!({ "path": "src/lib.rs" })), Decision::Deny);
    // Not a string: cannot be read, so the deny rule holds.
    assert_eq!(d(json!({ "path": { "p": "/tmp" } })), Decision::Deny);
    // An absent path would let the server choose one: the confining rule catches it.
    assert_eq!(d(json!({ "paths": ["/home/u/project/a"] })), Decision::Deny);
    assert_eq!(call(&p, "fs", "read", json!({})).rule, "rule 1 (confine)");
}

#[test]
fn path_arrays_are_denied_when_any_element_is_outside() {
    let p = policy(CONFINED);
    let d = |paths: Value| decide(&p, "fs", "read_many", json!({ "paths": paths }));
    assert_eq!(
        d(json!(["/home/a/project/x", "/home/b/project/y"])),
        Decision::Allow
    );
    assert_eq!(
        d(json!(["/home/a/project/x", "/etc/shadow"])),
        Decision::Deny
    );
    assert_eq!(
        d(json!(["/home/a/project/x", "/home/a/project/../.ssh/id"])),
        Decision::Deny
    );
    assert_eq!(d(json!(["/home/a/project/x", 3])), Decision::Deny);
    assert_eq!(d(json!("/home/a/project/x")), Decision::Allow);
    assert_eq!(d(json!([])), Decision::Deny, "an empty list is absent");
}

#[test]
fn allow_inside_needs_every_path_inside() {
    let p = policy(
        r#"
        [policy]
        default = "ask"
        [[policy.rules]]
        decision = "allow"
        tool = "read_*"
        args = { paths = { inside = "/srv/data" } }
        "#,
    );
    let d = |paths: Value| decide(&p, "fs", "read_files", json!({ "paths": paths }));
    assert_eq!(d(json!(["/srv/data/a", "/srv/data/b/c"])), Decision::Allow);
    assert_eq!(d(json!(["/srv/data/a", "/srv/other"])), Decision::Ask);
    assert_eq!(d(json!(["/srv/data/a", "data/b"])), Decision::Ask);
    assert_eq!(d(json!(["/srv/data/../secret"])), Decision::Ask);
    assert_eq!(decide(&p, "fs", "read_files", json!({})), Decision::Ask);
}

#[test]
fn regex_denies_matching_strings() {
    let p = policy(
        r#"
        [policy]
        default = "allow"
        [[policy.rules]]
        name = "no-drop"
        decision = "deny"
        server = "sqlite"
        args = { query = { regex = "(?i)\\bdrop\\b" } }
        [[policy.rules]]
        name = "only-github"
        decision = "deny"
        tool = "fetch"
        args = { url = { not_regex = "^https://github\\.com/" } }
        "#,
    );
    let q = |s: &str| decide(&p, "sqlite", "query", json!({ "query": s }));
    assert_eq!(q("SELECT * FROM t"), Decision::Allow);
    assert_eq!(q("select 1; DROP TABLE t"), Decision::Deny);
    assert_eq!(q("select dropped from t"), Decision::Allow);
    assert_eq!(
        decide(&p, "sqlite", "query", json!({})),
        Decision::Allow,
        "nothing to match"
    );
    let f = |a: Value| decide(&p, "web", "fetch", a);
    assert_eq!(f(json!({ "url": "https://github.com/x" })), Decision::Allow);
    assert_eq!(
        f(json!({ "url": "https://evil.example/?q=github.com" })),
        Decision::Deny
    );
    assert_eq!(
        f(json!({})),
        Decision::Deny,
        "an absent url is not proven allowed"
    );
}

#[test]
fn numeric_bound_denies_out_of_range_values() {
    let p = policy(
        r#"
        [policy]
        default = "allow"
        [[policy.rules]]
        name = "small-pages"
        decision = "deny"
        args = { count = { gt = 100 } }
        "#,
    );
    let d = |c: Value| decide(&p, "db", "list", json!({ "count": c }));
    assert_eq!(d(json!(100)), Decision::Allow);
    assert_eq!(d(json!(101)), Decision::Deny);
    assert_eq!(d(json!(1e9)), Decision::Deny);
    assert_eq!(
        d(json!("5000")),
        Decision::Deny,
        "a quoted number is still a number"
    );
    assert_eq!(d(json!("lots")), Decision::Deny, "unreadable");
    assert_eq!(decide(&p, "db", "list", json!({})), Decision::Allow);
}

#[test]
fn deny_beats_ask_beats_allow_whatever_the_order() {
    let p = policy(
        r#"
        [policy]
        default = "allow"
        [[policy.rules]]
        name = "a"
        decision = "allow"
        tool = "*"
        [[policy.rules]]
        name = "q"
        decision = "ask"
        tool = "w*"
        [[policy.rules]]
        name = "d"
        decision = "deny"
        tool = "wipe"
        "#,
    );
    assert_eq!(call(&p, "s", "wipe", json!({})).rule, "rule 3 (d)");
    assert_eq!(call(&p, "s", "write", json!({})).rule, "rule 2 (q)");
    assert_eq!(call(&p, "s", "read", json!({})).rule, "rule 1 (a)");
    for (tool, decision) in [
        ("wipe", Decision::Deny),
        ("write", Decision::Ask),
        ("read", Decision::Allow),
    ] {
        assert_eq!(decide(&p, "s", tool, json!({})), decision);
    }
}

#[test]
fn default_applies_when_no_rule_matches() {
    for (default, decision) in [
        ("allow", Decision::Allow),
        ("ask", Decision::Ask),
        ("deny", Decision::Deny),
    ] {
        let p = policy(&format!(
            "[policy]\ndefault = \"{default}\"\n[[policy.rules]]\ndecision = \"deny\"\ntool = \"x\""
        ));
        let v = call(&p, "s", "y", json!({}));
        assert_eq!((v.decision, v.rule.as_str()), (decision, "default"));
    }
    let unset = Policy::new(&PolicyConfig::default()).unwrap();
    assert_eq!(decide(&unset, "s", "y", json!({})), Decision::Ask);
    assert_eq!(
        decide(&Policy::default(), "s", "y", json!({})),
        Decision::Ask
    );
}

#[test]
fn listing_and_calling_use_the_same_predicate() {
    let p = policy(
        r#"
        [policy]
        default = "allow"
        [[policy.rules]]
        decision = "deny"
        tool = "rm"
        [[policy.rules]]
        decision = "deny"
        tool = "read"
        args = { path = { outside = "/srv" } }
        "#,
    );
    let rm = ToolRef::new("fs", "rm");
    assert!(!p.visible(&rm));
    for a in [
        json!({}),
        json!({ "path": "/srv/x" }),
        json!({ "path": "/etc" }),
    ] {
        assert_eq!(p.evaluate(&rm, Some(&args(a))).decision, Decision::Deny);
    }
    let read = ToolRef::new("fs", "read");
    assert!(p.visible(&read), "denied only for some arguments");
    assert_eq!(
        decide(&p, "fs", "read", json!({ "path": "/srv/x" })),
        Decision::Allow
    );
    assert_eq!(
        decide(&p, "fs", "read", json!({ "path": "/etc/passwd" })),
        Decision::Deny
    );
}

#[test]
fn a_conditional_allow_keeps_a_tool_listed_under_default_deny() {
    let p = policy(
        r#"
        [policy]
        default = "deny"
        [[policy.rules]]
        name = "project"
        decision = "allow"
        tool = "read"
        args = { path = { inside = "/srv" } }
        [[policy.rules]]
        decision = "ask"
        tool = "write"
        args = { path = { inside = "/srv" } }
        "#,
    );
    let listed = p.evaluate(&ToolRef::new("fs", "read"), None);
    assert_eq!(
        (listed.decision, listed.rule.as_str()),
        (Decision::Allow, "rule 1 (project)")
    );
    assert!(p.visible(&ToolRef::new("fs", "write")));
    assert!(!p.visible(&ToolRef::new("fs", "delete")));
    assert_eq!(
        decide(&p, "fs", "read", json!({ "path": "/srv/a" })),
        Decision::Allow
    );
    assert_eq!(
        decide(&p, "fs", "read", json!({ "path": "/etc" })),
        Decision::Deny
    );
    assert_eq!(
        decide(&p, "fs", "write", json!({ "path": "/srv/a" })),
        Decision::Ask
    );
    assert_eq!(
        decide(&p, "fs", "delete", json!({ "path": "/srv/a" })),
        Decision::Deny
    );
}

#[test]
fn an_invisible_tool_is_denied_for_every_argument() {
    let p = policy(
        r#"
        [policy]
        default = "deny"
        [[policy.rules]]
        decision = "allow"
        server = "fs"
        args = { path = { inside = "/srv" } }
        [[policy.rules]]
        decision = "deny"
        tool = "rm*"
        [[policy.rules]]
        decision = "ask"
        server = "exec"
        tool = "run"
        [[policy.rules]]
        decision = "deny"
        args = { n = { gt = 3 } }
        "#,
    );
    let samples = [
        json!({}),
        json!({ "path": "/srv/a" }),
        json!({ "path": "/etc" }),
        json!({ "path": ["/srv/a"], "n": 1 }),
        json!({ "n": 9 }),
    ];
    for server in ["fs", "exec", "web"] {
        for tool in ["rm", "rmdir", "run", "read"] {
            let t = ToolRef::new(server, tool);
            let calls: Vec<Decision> = samples
                .iter()
                .map(|a| p.evaluate(&t, Some(&args(a.clone()))).decision)
                .collect();
            if !p.visible(&t) {
                assert!(
                    calls.iter().all(|d| *d == Decision::Deny),
                    "{server}/{tool}: {calls:?}"
                );
            } else {
                assert!(
                    calls.iter().any(|d| *d != Decision::Deny),
                    "{server}/{tool}: {calls:?}"
                );
            }
        }
    }
}

#[test]
fn rate_limit_trips_and_recovers() {
    let p = policy(
        r#"
        [policy]
        [[policy.rate_limits]]
        name = "fetch"
        server = "fetch"
        per_minute = 30
        burst = 2
        "#,
    );
    let t = ToolRef::new("fetch", "get");
    let t0 = Instant::now();
    assert!(p.check_rate_at(&t, t0).is_ok());
    assert!(p.check_rate_at(&t, t0).is_ok());
    let limited = p.check_rate_at(&t, t0).unwrap_err();
    assert_eq!(limited.rule, "rate limit 1 (fetch)");
    assert_eq!(limited.retry_after, Duration::from_secs(2));
    assert!(
        limited.to_string().contains("retry after 2.0s"),
        "{limited}"
    );
    // Another tool has its own bucket; a tool not matched is not limited.
    assert!(p.check_rate_at(&ToolRef::new("fetch", "head"), t0).is_ok());
    for _ in 0..10 {
        assert!(p.check_rate_at(&ToolRef::new("fs", "read"), t0).is_ok());
    }
    // 30 per minute: one token every two seconds.
    assert!(p.check_rate_at(&t, t0 + Duration::from_secs(1)).is_err());
    assert!(p.check_rate_at(&t, t0 + Duration::from_secs(2)).is_ok());
    assert!(p.check_rate_at(&t, t0 + Duration::from_secs(2)).is_err());
    // A long rest refills to the burst, not beyond.
    let later = t0 + Duration::from_secs(3600);
    assert!(p.check_rate_at(&t, later).is_ok());
    assert!(p.check_rate_at(&t, later).is_ok());
    assert!(p.check_rate_at(&t, later).is_err());
}

#[test]
fn rate_limit_with_real_clock_and_shared_bucket() {
    let p = policy(
        r#"
        [policy]
        [[policy.rate_limits]]
        server = "web"
        per_second = 20
        burst = 1
        shared = true
        "#,
    );
    assert!(p.check_rate(&ToolRef::new("web", "a")).is_ok());
    let limited = p.check_rate(&ToolRef::new("web", "b")).unwrap_err();
    assert!(limited.retry_after <= Duration::from_millis(50));
    std::thread::sleep(Duration::from_millis(60));
    assert!(p.check_rate(&ToolRef::new("web", "b")).is_ok());
}

#[test]
fn a_refused_call_takes_no_token_from_other_limits() {
    let p = policy(
        r#"
        [policy]
        [[policy.rate_limits]]
        per_second = 10
        burst = 2
        [[policy.rate_limits]]
        name = "tight"
        tool = "t"
        per_hour = 1
        "#,
    );
    let t0 = Instant::now();
    let (t, u) = (ToolRef::new("s", "t"), ToolRef::new("s", "u"));
    assert!(p.check_rate_at(&t, t0).is_ok());
    let limited = p.check_rate_at(&t, t0).unwrap_err();
    assert_eq!(limited.rule, "rate limit 2 (tight)");
    assert_eq!(limited.retry_after, Duration::from_secs(3600));
    // The refused call left the general bucket of `t` with one token.
    assert!(p.check_rate_at(&u, t0).is_ok());
    assert!(p.check_rate_at(&u, t0).is_ok());
    assert!(p.check_rate_at(&u, t0).is_err());
}

#[test]
fn rate_limits_hold_across_threads() {
    let p = policy("[policy]\n[[policy.rate_limits]]\nper_hour = 50\n");
    let t0 = Instant::now();
    let accepted: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    (0..20)
                        .filter(|_| p.check_rate_at(&ToolRef::new("s", "t"), t0).is_ok())
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(accepted, 50);
}

fn labels(p: &Policy, server: &str, a: Option<&ToolAnnotations>, trust: TrustOverride) -> Labels {
    p.labels(&ToolRef::new(server, "tool").with_annotations(a), &trust)
}

fn labelled(untrusted_source: bool, private_data: bool, sink: bool) -> Labels {
    let mut l = Labels::default();
    l.untrusted_source = untrusted_source;
    l.private_data = private_data;
    l.sink = sink;
    l
}

#[test]
fn labels_come_from_annotations() {
    let p = Policy::default();
    let none = TrustOverride::default();
    let open = ToolAnnotations {
        open_world_hint: Some(true),
        read_only_hint: Some(true),
        ..Default::default()
    };
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    let destructive = ToolAnnotations {
        read_only_hint: Some(true),
        destructive_hint: Some(true),
        ..Default::default()
    };
    assert_eq!(
        labels(&p, "s", Some(&open), none),
        labelled(true, false, true)
    );
    assert_eq!(
        labels(&p, "s", Some(&read_only), none),
        labelled(false, false, false)
    );
    assert_eq!(
        labels(&p, "s", Some(&destructive), none),
        labelled(false, false, true)
    );
    assert_eq!(
        labels(&p, "s", None, none),
        labelled(false, false, true),
        "may modify"
    );
}

#[test]
fn label_overrides_apply_server_trust_then_entries_in_order() {
    let p = policy(
        r#"
        [policy]
        [[policy.labels]]
        server = "mail"
        private = true
        untrusted = true
        [[policy.labels]]
        server = "mail"
        tool = "tool"
        untrusted = false
        [[policy.labels]]
        server = "notes"
        sink = false
        "#,
    );
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    let ro = Some(&read_only);
    let none = TrustOverride::default();
    assert_eq!(labels(&p, "mail", ro, none), labelled(false, true, false));
    let trusted_sink = TrustOverride {
        untrusted: Some(true),
        sink: Some(true),
        ..Default::default()
    };
    // The server override applies; the later entries still win over it.
    assert_eq!(
        labels(&p, "other", ro, trusted_sink),
        labelled(true, false, true)
    );
    assert_eq!(
        labels(&p, "mail", ro, trusted_sink),
        labelled(false, true, true)
    );
    assert_eq!(
        labels(&p, "notes", None, trusted_sink),
        labelled(true, false, false)
    );
}

#[test]
fn bad_globs_and_regexes_name_the_rule_and_field() {
    let e = policy_error(
        "[policy]\n[[policy.rules]]\ndecision = \"deny\"\n[[policy.rules]]\nname = \"x\"\ndecision = \"deny\"\ntool = \"a[\"\n",
    );
    assert!(
        e.contains("rule 2 (x)") && e.contains("`tool`") && e.contains("a["),
        "{e}"
    );
    let e = policy_error("[policy]\n[[policy.rules]]\ndecision = \"ask\"\nserver = \"{a\"\n");
    assert!(e.contains("rule 1") && e.contains("`server`"), "{e}");
    let e = policy_error(
        "[policy]\n[[policy.rules]]\nname = \"q\"\ndecision = \"deny\"\nargs = { query = { regex = \"(unclosed\" } }\n",
    );
    assert!(
        e.contains("rule 1 (q)") && e.contains("args.query.regex"),
        "{e}"
    );
    let e = policy_error(
        "[policy]\n[[policy.rules]]\ndecision = \"deny\"\nargs = { path = { outside = \"relative/**\" } }\n",
    );
    assert!(
        e.contains("rule 1") && e.contains("args.path.outside"),
        "{e}"
    );
    let e = policy_error("[policy]\n[[policy.rules]]\ndecision = \"deny\"\ntool = []\n");
    assert!(e.contains("rule 1") && e.contains("empty"), "{e}");
    let e = policy_error("[policy]\n[[policy.labels]]\ntool = \"[\"\n");
    assert!(e.contains("label 1") && e.contains("`tool`"), "{e}");
}

#[test]
fn bad_rate_limits_name_the_entry() {
    let e = policy_error("[policy]\n[[policy.rate_limits]]\ntool = \"x\"\n");
    assert!(e.contains("rate limit 1") && e.contains("one of"), "{e}");
    let e = policy_error(
        "[policy]\n[[policy.rate_limits]]\nname = \"r\"\nper_second = 1\nper_minute = 2\n",
    );
    assert!(
        e.contains("rate limit 1 (r)") && e.contains("only one"),
        "{e}"
    );
    let e = policy_error("[policy]\n[[policy.rate_limits]]\nper_minute = 0\n");
    assert!(e.contains("`per_minute`"), "{e}");
    let e = policy_error("[policy]\n[[policy.rate_limits]]\nper_minute = 3\nburst = 0\n");
    assert!(e.contains("`burst`"), "{e}");
}

#[test]
fn unknown_fields_are_refused_with_their_place() {
    let text = "[policy]\n[[policy.rules]]\ndecision = \"deny\"\n[[policy.rules]]\ndecision = \"deny\"\ntools = \"x\"\n";
    let de = toml::Deserializer::parse(text).unwrap();
    let err = serde_path_to_error::deserialize::<_, File>(de)
        .err()
        .unwrap();
    assert_eq!(err.path().to_string(), "policy.rules[1].tools");
    assert!(err.to_string().contains("tools"), "{err}");
    for bad in [
        "[policy]\nmode = \"ask\"\n",
        "[policy]\n[[policy.rules]]\ndecision = \"deny\"\nannotations = { destructive = true }\n",
        "[policy]\n[[policy.rules]]\ndecision = \"deny\"\nargs = { n = { max = 3 } }\n",
        "[policy]\n[[policy.rules]]\ndecision = \"maybe\"\n",
        "[policy]\n[[policy.rate_limits]]\nper_day = 3\n",
        "[policy]\n[[policy.labels]]\ntrusted = true\n",
    ] {
        assert!(toml::from_str::<File>(bad).is_err(), "{bad}");
    }
}

#[test]
fn decisions_parse_print_and_deserialize() {
    for (text, d) in [
        ("allow", Decision::Allow),
        ("ask", Decision::Ask),
        ("deny", Decision::Deny),
    ] {
        assert_eq!(text.parse::<Decision>().unwrap(), d);
        assert_eq!(d.to_string(), text);
        assert_eq!(serde_json::to_value(d).unwrap(), json!(text));
        assert_eq!(serde_json::from_value::<Decision>(json!(text)).unwrap(), d);
    }
    assert!("Allow".parse::<Decision>().is_err());
    assert_eq!(Decision::default(), Decision::Ask);
}

#[test]
fn policy_is_shareable_across_tasks() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Policy>();
}

#[test]
fn requests_from_servers_deny_beats_ask_beats_allow_by_server_glob() {
    let p = policy(
        r#"
        [policy]
        [[policy.requests]]
        sampling = "ask"

        [[policy.requests]]
        server = "web*"
        sampling = "deny"
        elicitation = "deny"

        [[policy.requests]]
        server = ["web-ok", "fs"]
        sampling = "allow"
        roots = "deny"
        "#,
    );
    let decide = |server, kind| p.request(server, kind).decision;
    // Nothing said about a kind: allowed.
    assert_eq!(decide("fs", RequestKind::Elicitation), Decision::Allow);
    assert_eq!(p.request("fs", RequestKind::Elicitation).rule, "default");
    // Every matching entry has its say; the strictest wins, whatever the order.
    assert_eq!(decide("fs", RequestKind::Sampling), Decision::Ask);
    assert_eq!(decide("web-ok", RequestKind::Sampling), Decision::Deny);
    assert_eq!(decide("web", RequestKind::Elicitation), Decision::Deny);
    assert_eq!(decide("fs", RequestKind::Roots), Decision::Deny);
    assert_eq!(decide("other", RequestKind::Roots), Decision::Allow);
    assert_eq!(
        p.request("web-x", RequestKind::Sampling).rule,
        "request rule 2"
    );
}

#[test]
fn requests_ask_only_for_sampling() {
    let err = policy_error(
        r#"
        [policy]
        [[policy.requests]]
        elicitation = "ask"
        "#,
    );
    assert!(err.contains("elicitation"), "{err}");
}

// ---------------------------------------------------------------------------
// The name clients see, globs that select nothing, advice that works
// ---------------------------------------------------------------------------

/// `files` with the default prefix and `gh` shown as `github_…`.
fn with_servers(toml_text: &str) -> Policy {
    policy(toml_text).with_servers([
        ("files".to_owned(), "files__".to_owned()),
        ("gh".to_owned(), "github_".to_owned()),
        ("exec".to_owned(), "exec__".to_owned()),
    ])
}

#[test]
fn a_tool_glob_matches_the_own_name_and_the_name_clients_see() {
    for rule in [
        r#"tool = "files__delete_file""#,
        r#"server = "files"
        tool = "delete_file""#,
        r#"tool = "files__*""#,
    ] {
        let p = with_servers(&format!(
            "[policy]\ndefault = \"allow\"\n[[policy.rules]]\ndecision = \"deny\"\n{rule}\n"
        ));
        let delete = ToolRef::new("files", "delete_file");
        let v = p.evaluate(&delete, Some(&Map::new()));
        assert_eq!(v.decision, Decision::Deny, "{rule}");
        assert!(!p.visible(&delete), "{rule}");
        assert_eq!(
            decide(&p, "exec", "delete_file", json!({})),
            if rule.contains("server") || rule.contains("files__") {
                Decision::Allow
            } else {
                Decision::Deny
            },
            "{rule}"
        );
    }
    // A configured prefix is the name clients see; the default one is then no name at all.
    let p = with_servers(
        "[policy]\ndefault = \"allow\"\n[[policy.rules]]\ndecision = \"deny\"\n\
         tool = [\"github_create_issue\", \"gh__merge\"]\n",
    );
    assert_eq!(decide(&p, "gh", "create_issue", json!({})), Decision::Deny);
    assert_eq!(decide(&p, "gh", "merge", json!({})), Decision::Allow);
    // Without the servers, the default prefix is assumed.
    let bare = policy(
        "[policy]\ndefault = \"allow\"\n[[policy.rules]]\ndecision = \"deny\"\ntool = \"gh__merge\"\n",
    );
    assert_eq!(decide(&bare, "gh", "merge", json!({})), Decision::Deny);
    assert_eq!(bare.exposed_name(&ToolRef::new("gh", "merge")), "gh__merge");
    assert_eq!(p.exposed_name(&ToolRef::new("gh", "merge")), "github_merge");
}

#[test]
fn labels_and_rate_limits_match_the_name_clients_see_too() {
    let p = with_servers(
        r#"
        [policy]
        default = "allow"
        [[policy.labels]]
        tool = "exec__run"
        untrusted = true
        [[policy.rate_limits]]
        tool = "github_search"
        per_minute = 1
        "#,
    );
    let none = TrustOverride::default();
    assert!(
        p.labels(&ToolRef::new("exec", "run"), &none)
            .untrusted_source
    );
    assert!(
        !p.labels(&ToolRef::new("files", "run"), &none)
            .untrusted_source
    );
    let search = ToolRef::new("gh", "search");
    let now = Instant::now();
    assert!(p.check_rate_at(&search, now).is_ok());
    assert!(p.check_rate_at(&search, now).is_err());
}

#[test]
fn server_globs_that_select_no_configured_server_are_reported() {
    let p = with_servers(
        r#"
        [policy]
        [[policy.rules]]
        name = "no-delete"
        decision = "deny"
        server = ["fles", "files"]
        [[policy.rate_limits]]
        server = "exec*"
        per_second = 1
        [[policy.labels]]
        server = "github"
        untrusted = true
        [[policy.requests]]
        server = "nowhere"
        sampling = "deny"
        "#,
    );
    let found: Vec<String> = p
        .unmatched_servers()
        .iter()
        .map(|u| u.to_string())
        .collect();
    assert_eq!(
        found,
        [
            r#"rule 1 (no-delete): server = "fles" matches no configured server (closest: files)"#,
            r#"label 1: server = "github" matches no configured server"#,
            r#"request rule 1: server = "nowhere" matches no configured server"#,
        ],
        "{found:#?}"
    );
    // Built without its servers, a policy cannot tell.
    assert!(
        policy("[policy]\n[[policy.rules]]\ndecision = \"deny\"\nserver = \"x\"\n")
            .unmatched_servers()
            .is_empty()
    );
}

#[test]
fn tool_globs_that_select_no_listed_tool_are_reported() {
    let p = with_servers(
        r#"
        [policy]
        [[policy.rules]]
        name = "typo"
        decision = "deny"
        tool = "files__delete_fil"
        [[policy.rules]]
        name = "wrong-server"
        decision = "deny"
        server = "exec"
        tool = "delete_file"
        [[policy.rules]]
        name = "fine"
        decision = "deny"
        tool = ["files__delete_file", "write_*"]
        [[policy.rules]]
        name = "unknown-yet"
        decision = "deny"
        server = "gh"
        tool = "anything"
        "#,
    );
    let tools = [
        ("files", "delete_file"),
        ("files", "write_file"),
        ("exec", "run_command"),
    ];
    // gh has listed no tools at all.
    let found = p.unmatched_tools(&tools, &["files", "exec", "gh"]);
    let text: Vec<String> = found.iter().map(|u| u.to_string()).collect();
    assert_eq!(found.len(), 3, "{text:#?}");
    assert_eq!(found[0].item, "rule 1 (typo)");
    assert_eq!(found[0].field, "tool");
    assert_eq!(found[0].closest[0], "files__delete_file", "{text:#?}");
    assert_eq!(
        text[1],
        r#"rule 2 (wrong-server): tool = "delete_file" matches no tool of server exec (closest: files__delete_file)"#
    );
    assert_eq!(found[2].item, "rule 4 (unknown-yet)");
    // Until gh has listed its tools, no entry that selects it is judged.
    let found = p.unmatched_tools(&tools, &["files", "exec"]);
    let items: Vec<&str> = found.iter().map(|u| u.item.as_str()).collect();
    assert_eq!(items, ["rule 2 (wrong-server)"]);
}

#[test]
fn advice_for_an_ask_that_cannot_be_asked_is_one_that_works() {
    let p = with_servers(
        r#"
        [policy]
        default = "ask"
        [[policy.rules]]
        name = "destructive-asks"
        decision = "ask"
        annotations = { destructiveHint = true }
        [[policy.rules]]
        name = "big-reads"
        decision = "ask"
        tool = "read_*"
        args = { length = { gt = 1000 } }
        [[policy.rules]]
        decision = "allow"
        server = "files"
        "#,
    );
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    // The default asks: an allow rule is the way, and it is spelled out.
    let list = ToolRef::new("exec", "list").with_annotations(Some(&read_only));
    let advice = p.advice_to_allow(&list, &Map::new());
    assert!(
        advice.contains(r#"default = "ask""#)
            && advice.contains(
                "[[policy.rules]]\ndecision = \"allow\"\nserver = \"exec\"\ntool = \"list\"\n"
            ),
        "{advice}"
    );
    // Rules ask: an allow rule cannot win, so the advice is about them.
    let write = ToolRef::new("files", "write_file");
    let advice = p.advice_to_allow(&write, &Map::new());
    assert!(
        advice.contains("rule 1 (destructive-asks)")
            && advice.contains("would not help")
            && advice.contains("files__write_file"),
        "{advice}"
    );
    let read = ToolRef::new("files", "read_file").with_annotations(Some(&read_only));
    let long = args(json!({ "length": 5000 }));
    assert_eq!(
        p.matching_rules(&read, &long, Decision::Ask),
        ["rule 2 (big-reads)"]
    );
    assert!(
        p.matching_rules(&read, &Map::new(), Decision::Ask)
            .is_empty()
    );
    let both = ToolRef::new("files", "read_file");
    let advice = p.advice_to_allow(&both, &long);
    assert!(
        advice.contains("rule 1 (destructive-asks) and rule 2 (big-reads)")
            && advice.contains("narrow those rules so they no longer select this tool"),
        "{advice}"
    );
}
