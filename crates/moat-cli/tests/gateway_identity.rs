//! Who is calling, through one `moat gateway --http` with `[auth]`: two users with their
//! own access tokens (from a loopback issuer) get different policy outcomes for the same
//! call, each policy condition (`user`, `group`, `scope`, `claims`) refuses the call it
//! names, what a user is listed matches what they may call, a per-user rate limit counts
//! each user apart, user A's "always approve" does not approve user B's call, a tool in
//! `[auth.tool_scopes]` answers a token without its scope with 403 `insufficient_scope`,
//! and the audit trail names each call's user and client (`moat audit --user`). With
//! several issuers in `[auth]`, each issuer's tokens are checked by its own keys and mapped
//! by its own claims, and a token of an issuer not configured, or signed by one issuer's
//! key while claiming another, is refused.
//!
//! The requests are 2026-07-28 ones, each a POST of its own (consent is an input request
//! answered by retrying), written by hand so the test sees the HTTP status and headers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

mod support;
use support::raw_http::modern_request;
use support::{HttpGateway, MOAT, Ready, TestIssuer};

const RESOURCE: &str = "http://127.0.0.1/mcp";

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A gateway in front of `moat serve everything` (server `ev`), with `[auth]` naming the
/// issuer and `extra` (policy) appended.
struct Setup {
    dir: tempfile::TempDir,
    gateway: HttpGateway,
    issuer: TestIssuer,
}

impl Setup {
    fn new(extra: &str) -> Setup {
        let issuer = TestIssuer::start();
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("moat.toml");
        let text = format!(
            "state_dir = {state}\n\n[servers.ev]\ncommand = {moat}\nargs = [\"serve\", \"everything\"]\n\
             sandbox = false\n\n[auth]\nissuer = {issuer}\nresource = {resource}\nclaims = [\"dept\"]\n\n{extra}\n",
            state = toml_str(&dir.path().join("state").to_string_lossy()),
            moat = toml_str(MOAT),
            issuer = toml_str(&issuer.url),
            resource = toml_str(RESOURCE),
        );
        std::fs::write(&config, text).unwrap();
        let gateway =
            HttpGateway::start(MOAT, &config, &[], Ready::Listed, Duration::from_secs(60));
        Setup {
            dir,
            gateway,
            issuer,
        }
    }

    fn token(&self, user: &str, extra: Value) -> String {
        self.token_with(user, "mcp:tools", extra)
    }

    fn token_with(&self, user: &str, scope: &str, extra: Value) -> String {
        self.issuer
            .token(RESOURCE, user, &format!("client-of-{user}"), scope, extra)
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("moat.toml")
    }

    /// One 2026-07-28 request as `token`: the status, the `WWW-Authenticate` header, the
    /// JSON answer.
    fn request(
        &self,
        token: &str,
        method: &str,
        name: Option<&str>,
        params: Value,
    ) -> (u16, String, Value) {
        let reply = modern_request(&self.gateway.authority, method, name, params, Some(token))
            .expect("the gateway answers");
        let challenge = reply
            .header("www-authenticate")
            .unwrap_or_default()
            .to_owned();
        (reply.status, challenge, reply.json)
    }

    fn call(&self, token: &str, tool: &str, answers: Option<(&Value, &str)>) -> Value {
        let mut params = json!({"name": tool, "arguments": {}});
        if let Some((state, decision)) = answers {
            let key = state["inputRequests"]
                .as_object()
                .unwrap()
                .keys()
                .next()
                .unwrap()
                .clone();
            params["inputResponses"] =
                json!({ key: {"action": "accept", "content": {"decision": decision}} });
            params["requestState"] = state["requestState"].clone();
        }
        let (status, _, v) = self.request(token, "tools/call", Some(tool), params);
        assert_eq!(status, 200, "{v}");
        v["result"].clone()
    }

    fn listed(&self, token: &str) -> Vec<String> {
        let (status, _, v) = self.request(token, "tools/list", None, json!({}));
        assert_eq!(status, 200, "{v}");
        v["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }
}

const TOOL: &str = "ev__test_simple_text";

fn ran(result: &Value) -> bool {
    result["content"][0]["text"] == "This is a simple text response for testing."
}

fn refused_by(result: &Value, rule: &str) -> bool {
    result["isError"] == true
        && result["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains(rule))
}

#[test]
fn each_identity_condition_refuses_the_call_it_names_and_only_that() {
    let setup = Setup::new(
        r#"[policy]
default = "allow"

[[policy.rules]]
name = "no-mallory"
decision = "deny"
tool = "ev__test_simple_text"
user = "mallory"

[[policy.rules]]
name = "no-interns"
decision = "deny"
tool = "ev__test_simple_text"
group = "interns"

[[policy.rules]]
name = "no-readonly"
decision = "deny"
tool = "ev__test_simple_text"
scope = "mcp:readonly"

[[policy.rules]]
name = "no-sales"
decision = "deny"
tool = "ev__test_simple_text"
claims = { dept = "sales*" }
"#,
    );
    let alice = setup.token("alice", json!({"groups": ["eng"], "dept": "engineering"}));
    assert!(ran(&setup.call(&alice, TOOL, None)), "alice is refused");
    assert!(setup.listed(&alice).contains(&TOOL.to_owned()));

    let cases = [
        (setup.token("mallory", json!({})), "no-mallory"),
        (
            setup.token("ivan", json!({"groups": ["eng", "interns"]})),
            "no-interns",
        ),
        (
            setup.token_with("rita", "mcp:tools mcp:readonly", json!({})),
            "no-readonly",
        ),
        (
            setup.token("sam", json!({"dept": "sales-emea"})),
            "no-sales",
        ),
    ];
    for (token, rule) in &cases {
        let result = setup.call(token, TOOL, None);
        assert!(refused_by(&result, rule), "{rule}: {result}");
        // Listing and calling are one predicate: what is refused is not listed.
        let listed = setup.listed(token);
        assert!(
            !listed.contains(&TOOL.to_owned()),
            "{rule}: listed {listed:?}"
        );
        assert!(
            listed.iter().any(|t| t == "ev__test_image_content"),
            "{listed:?}"
        );
    }
}

#[test]
fn two_users_one_call_two_outcomes_and_an_always_is_one_users() {
    let setup = Setup::new(
        r#"[policy]
default = "deny"

[[policy.rules]]
name = "ops-may-ask"
decision = "ask"
tool = "ev__test_simple_text"
group = "ops"

[[policy.rate_limits]]
name = "per-user"
tool = "ev__test_image_content"
per_hour = 1
per_user = true

[[policy.rules]]
name = "images"
decision = "allow"
tool = "ev__test_image_content"

[auth.tool_scopes]
"ev__test_audio_content" = ["media:audio"]

[[policy.rules]]
name = "audio"
decision = "allow"
tool = "ev__test_audio_content"
"#,
    );
    let alice = setup.token("alice", json!({"groups": ["ops"]}));
    let bob = setup.token("bob", json!({"groups": ["ops"]}));
    let carol = setup.token("carol", json!({"groups": ["dev"]}));

    // Same call, different users: carol is denied by default, alice is asked.
    assert!(refused_by(&setup.call(&carol, TOOL, None), "default"));
    let asked = setup.call(&alice, TOOL, None);
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    // Alice approves for good: her next call is not asked.
    assert!(ran(&setup.call(
        &alice,
        TOOL,
        Some((&asked, "always approve"))
    )));
    assert!(ran(&setup.call(&alice, TOOL, None)), "alice asked again");
    // Bob is asked all the same: alice's "always" is hers.
    let bob_asked = setup.call(&bob, TOOL, None);
    assert_eq!(
        bob_asked["resultType"], "input_required",
        "bob was not asked: {bob_asked}"
    );

    // A per-user rate limit: one call an hour each, counted apart.
    assert!(setup.call(&alice, "ev__test_image_content", None)["isError"] != true);
    assert!(setup.call(&bob, "ev__test_image_content", None)["isError"] != true);
    let again = setup.call(&alice, "ev__test_image_content", None);
    assert!(refused_by(&again, "per-user"), "{again}");

    // Step-up for one tool's scope: 403 with the scope to ask for.
    let (status, challenge, v) = setup.request(
        &alice,
        "tools/call",
        Some("ev__test_audio_content"),
        json!({"name": "ev__test_audio_content", "arguments": {}}),
    );
    assert_eq!(status, 403, "{v}");
    assert!(
        challenge.contains(r#"error="insufficient_scope""#),
        "{challenge}"
    );
    assert!(challenge.contains("media:audio"), "{challenge}");
    let audio = setup.token_with("alice", "mcp:tools media:audio", json!({"groups": ["ops"]}));
    assert!(setup.call(&audio, "ev__test_audio_content", None)["isError"] != true);

    // The audit trail names each call's user and client.
    let records = audit(&setup.config(), &["--user", "bob"]);
    assert!(!records.is_empty());
    for r in &records {
        assert_eq!(r["subject"], "bob", "{r}");
        assert_eq!(r["client_id"], "client-of-bob", "{r}");
    }
    let carols = audit(&setup.config(), &["--user", "carol"]);
    assert_eq!(carols.len(), 1, "{carols:?}");
    assert_eq!(carols[0]["decision"], "deny");
}

/// `moat audit --json ARGS` on the gateway's store, the records.
fn audit(config: &Path, args: &[&str]) -> Vec<Value> {
    // The gateway writes its trail in batches: wait until what is asked for is there.
    for _ in 0..50 {
        let out = std::process::Command::new(MOAT)
            .args(["audit", "--json", "--config"])
            .arg(config)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let records: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        if !records.is_empty() {
            return records;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Vec::new()
}

#[test]
fn several_issuers_each_with_its_keys_and_claims() {
    let a = TestIssuer::start();
    let b = TestIssuer::start_other();
    // Not configured; it signs with A's key, so only its `iss` tells it apart.
    let stranger = TestIssuer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("moat.toml");
    let text = format!(
        "state_dir = {state}\n\n[servers.ev]\ncommand = {moat}\nargs = [\"serve\", \"everything\"]\n\
         sandbox = false\n\n[auth]\nresource = {resource}\n\n\
         [[auth.issuers]]\nissuer = {a}\n\n\
         [[auth.issuers]]\nissuer = {b}\nuser_claim = \"email\"\n\n\
         [policy]\ndefault = \"allow\"\n\n[[policy.rules]]\nname = \"no-bob\"\n\
         decision = \"deny\"\ntool = {tool}\nuser = \"bob@b.example\"\n\n\
         [[policy.rate_limits]]\nname = \"per-user\"\ntool = \"ev__test_image_content\"\n\
         per_hour = 1\nper_user = true\n",
        state = toml_str(&dir.path().join("state").to_string_lossy()),
        moat = toml_str(MOAT),
        resource = toml_str(RESOURCE),
        a = toml_str(&a.url),
        b = toml_str(&b.url),
        tool = toml_str(TOOL),
    );
    std::fs::write(&config, text).unwrap();
    let gateway = HttpGateway::start(MOAT, &config, &[], Ready::Listed, Duration::from_secs(60));
    let call = |token: &str| {
        let reply = modern_request(
            &gateway.authority,
            "tools/call",
            Some(TOOL),
            json!({"name": TOOL, "arguments": {}}),
            Some(token),
        )
        .expect("the gateway answers");
        let challenge = reply
            .header("www-authenticate")
            .unwrap_or_default()
            .to_owned();
        (reply.status, challenge, reply.json)
    };
    let token = |issuer: &TestIssuer, sub: &str, extra: Value| {
        issuer.token(RESOURCE, sub, "client", "mcp:tools", extra)
    };

    // Both issuers' tokens are taken, each user named by the claim of their issuer.
    let (status, _, v) = call(&token(&a, "alice", json!({})));
    assert_eq!(status, 200, "{v}");
    assert!(ran(&v["result"]), "{v}");
    let (status, _, v) = call(&token(&b, "b-1", json!({"email": "carol@b.example"})));
    assert_eq!(status, 200, "{v}");
    assert!(ran(&v["result"]), "{v}");
    let (status, _, v) = call(&token(&b, "b-2", json!({"email": "bob@b.example"})));
    assert_eq!(status, 200, "{v}");
    assert!(refused_by(&v["result"], "no-bob"), "{v}");
    // Issuer A names users by `sub`: an A user whose email is bob's is not bob.
    let (_, _, v) = call(&token(&a, "alice", json!({"email": "bob@b.example"})));
    assert!(ran(&v["result"]), "{v}");

    // Two issuers' users who carry one name are two users to per-user state: B's "dana"
    // does not take from the rate-limit bucket of A's "dana".
    let image = |token: &str| {
        modern_request(
            &gateway.authority,
            "tools/call",
            Some("ev__test_image_content"),
            json!({"name": "ev__test_image_content", "arguments": {}}),
            Some(token),
        )
        .expect("the gateway answers")
        .json
    };
    let served = |v: &Value| v["result"]["content"][0]["type"] == "image";
    let v = image(&token(&a, "dana", json!({})));
    assert!(served(&v), "{v}");
    let v = image(&token(&b, "b-3", json!({"email": "dana"})));
    assert!(served(&v), "B's dana has a bucket of her own: {v}");
    let v = image(&token(&a, "dana", json!({})));
    assert!(refused_by(&v["result"], "per-user"), "{v}");

    // The metadata names both.
    let reply = moat_test_support::raw_http::exchange(
        &gateway.authority,
        &format!(
            "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            gateway.authority
        ),
    )
    .expect("the metadata");
    assert_eq!(reply.status, 200, "{}", reply.head);
    assert_eq!(
        reply.json["authorization_servers"],
        json!([a.url, b.url]),
        "{}",
        reply.json
    );

    // A token of an issuer not configured is refused, though signed by a key A uses.
    let (status, challenge, v) = call(&token(&stranger, "alice", json!({})));
    assert_eq!(status, 401, "{v}");
    assert!(challenge.contains("another issuer"), "{challenge}");
    // Signed by A's key, claiming to be B's: B's keys do not verify it.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let forged = a.sign(&json!({"iss": b.url, "aud": RESOURCE, "sub": "b-1",
        "email": "carol@b.example", "scope": "mcp:tools", "iat": now, "exp": now + 600}));
    let (status, challenge, v) = call(&forged);
    assert_eq!(status, 401, "{v}");
    assert!(
        challenge.contains(r#"error="invalid_token""#),
        "{challenge}"
    );
    // Nothing of the refused ones ran or was audited: the trail holds the seven calls that
    // got through to the gateway's policy (the rate-limited one among them), and no more.
    for _ in 0..50 {
        if audit(&config, &[]).len() >= 7 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(1));
    let records = audit(&config, &[]);
    assert_eq!(records.len(), 7, "{records:?}");
}
