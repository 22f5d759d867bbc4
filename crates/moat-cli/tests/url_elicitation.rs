//! URL-mode elicitation (2025-11-25) through `moat gateway --http`: a downstream server's
//! link reaches the client whose call it served, and the server's later
//! `notifications/elicitation/complete` reaches that client and no other — not another
//! client, not for another server's elicitation of the same id, not twice. A client that
//! did not declare URL mode is never sent a link; a 2026-07-28 client gets the link and no
//! completion (that revision has none). The server is a stdio peer of the test's own
//! (tests/support/url_completion_server.py); the clients are moat's, over Streamable HTTP.

mod support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use moat::client::HttpOptions;
use moat::protocol::ErrorObject;
use moat::types::{ClientCapabilities, ElicitResult};
use moat::{Client, ProtocolVersion, VersionPreference};
use serde_json::{Value, json};

use support::{HttpGateway, MOAT, Ready};

const GATEWAY_START: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a completion that should arrive may take.
const ARRIVES_WITHIN: Duration = Duration::from_secs(10);
/// How long to wait for one that should not, after a later one has arrived.
const SETTLE: Duration = Duration::from_millis(700);

/// One client of the gateway, and what it was asked and told.
struct Peer {
    client: Client,
    /// The elicitations it was sent (their params).
    asked: Arc<Mutex<Vec<Value>>>,
    /// The `elicitationId`s of the completions it was sent, in order.
    completed: Arc<Mutex<Vec<String>>>,
}

impl Peer {
    /// A client in `rev` declaring `elicitation` as given, accepting every elicitation.
    async fn connect(url: &str, rev: ProtocolVersion, elicitation: Value) -> Peer {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({ "elicitation": elicitation })).expect("capabilities");
        let builder = Client::builder()
            .protocol(VersionPreference::Exact(rev))
            .request_timeout(Some(REQUEST_TIMEOUT))
            .on_elicitation(move |params| {
                log.lock()
                    .unwrap()
                    .push(serde_json::to_value(&params).expect("params encode"));
                async move {
                    let result: ElicitResult =
                        serde_json::from_value(json!({ "action": "accept" })).expect("a result");
                    Ok::<_, ErrorObject>(result)
                }
            })
            .capabilities(capabilities);
        let mut notes = builder.notifications();
        let completed = Arc::new(Mutex::new(Vec::new()));
        let seen = completed.clone();
        tokio::spawn(async move {
            while let Ok(note) = notes.recv().await {
                if note.method == "notifications/elicitation/complete" {
                    let id = note
                        .params
                        .as_ref()
                        .and_then(|p| p.get("elicitationId"))
                        .and_then(Value::as_str)
                        .unwrap_or("(none)")
                        .to_owned();
                    seen.lock().unwrap().push(id);
                }
            }
        });
        let client = builder
            .connect_url(url, HttpOptions::default())
            .await
            .unwrap_or_else(|e| panic!("a {rev} client connects to {url}: {e}"));
        Peer {
            client,
            asked,
            completed,
        }
    }

    /// Calls `tool` with `args`; the text of its result.
    async fn call(&self, tool: &str, args: Value) -> String {
        let result = self
            .client
            .call_tool(tool, args)
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"));
        let result = serde_json::to_value(&result).expect("result encodes");
        support::json::text_of(&result["content"])
    }

    fn completed(&self) -> Vec<String> {
        self.completed.lock().unwrap().clone()
    }

    fn asked(&self) -> Vec<Value> {
        self.asked.lock().unwrap().clone()
    }

    /// Waits until a completion of `id` has arrived; fails after [`ARRIVES_WITHIN`].
    async fn wait_completed(&self, id: &str, what: &str) {
        let deadline = Instant::now() + ARRIVES_WITHIN;
        while !self.completed().iter().any(|c| c == id) {
            assert!(
                Instant::now() < deadline,
                "{what}: no completion of {id}; got {:?}",
                self.completed()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A gateway running the test server twice, as `alpha` and `beta`.
fn gateway(dir: &Path) -> HttpGateway {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support/url_completion_server.py")
        .to_string_lossy()
        .into_owned();
    let mut servers = String::new();
    for name in ["alpha", "beta"] {
        servers.push_str(&format!(
            "[servers.{name}]\ncommand = \"python3\"\nargs = [{script:?}]\nsandbox = false\nprotocol = \"2025-11-25\"\n\n"
        ));
    }
    let config = format!(
        "state_dir = {state:?}\n\n{servers}[policy]\ndefault = \"allow\"\n\n[tool_search]\nmode = \"off\"\n",
        state = dir.join("state").to_string_lossy(),
    );
    let file: PathBuf = dir.join("moat.toml");
    std::fs::write(&file, config).expect("write moat.toml");
    HttpGateway::start(MOAT, &file, &[], Ready::Listed, GATEWAY_START)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_completion_reaches_only_the_client_its_link_went_to() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gw = gateway(dir.path());
    let both = json!({ "form": {}, "url": {} });
    let a = Peer::connect(&gw.url, ProtocolVersion::V2025_11_25, both.clone()).await;
    let b = Peer::connect(&gw.url, ProtocolVersion::V2025_11_25, both.clone()).await;

    // Both get a link under the same id, from different servers.
    assert_eq!(
        a.call("alpha__connect", json!({ "id": "el-1" })).await,
        "action=accept"
    );
    let asked = a.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["mode"], "url");
    assert_eq!(asked[0]["elicitationId"], "el-1");
    assert_eq!(asked[0]["url"], "https://pages.example.com/finish?id=el-1");
    assert_eq!(
        b.call("beta__connect", json!({ "id": "el-1" })).await,
        "action=accept"
    );
    assert_eq!(b.asked().len(), 1);

    // beta's page is done (whoever's call makes it say so): b is told, a is not.
    assert_eq!(
        a.call("beta__complete", json!({ "id": "el-1" })).await,
        "sent"
    );
    b.wait_completed("el-1", "beta's completion to b").await;
    // alpha's: a is told, b is not.
    assert_eq!(
        b.call("alpha__complete", json!({ "id": "el-1" })).await,
        "sent"
    );
    a.wait_completed("el-1", "alpha's completion to a").await;
    // Again, and of ids nobody was sent: nobody is told.
    for (server, id) in [("alpha", "el-1"), ("beta", "el-1"), ("alpha", "el-9")] {
        assert_eq!(
            b.call(&format!("{server}__complete"), json!({ "id": id }))
                .await,
            "sent"
        );
    }
    // A page completed while the call waits: told on the call's own stream.
    assert_eq!(
        a.call(
            "alpha__connect",
            json!({ "id": "el-2", "complete_now": true })
        )
        .await,
        "action=accept"
    );
    a.wait_completed("el-2", "a completion during the call")
        .await;
    // A server that answers URLElicitationRequiredError (-32042): the error reaches the
    // client as it is, and the completion of the page it names reaches that client alone.
    let refused = a
        .client
        .call_tool("alpha__require", json!({ "id": "el-4" }))
        .await
        .expect_err("the server's error is passed on");
    match refused {
        moat::Error::Remote { error, .. } => assert_eq!(error.code, -32042, "{error:?}"),
        other => panic!("not the server's error: {other:?}"),
    }
    assert_eq!(
        b.call("alpha__complete", json!({ "id": "el-4" })).await,
        "sent"
    );
    a.wait_completed("el-4", "a required page's completion to a")
        .await;
    tokio::time::sleep(SETTLE).await;
    assert_eq!(a.completed(), ["el-1", "el-2", "el-4"], "a's completions");
    assert_eq!(b.completed(), ["el-1"], "b's completions");

    // A client that declared form mode only (an empty `elicitation`) is never sent a link:
    // the server is told the client does not support it.
    let c = Peer::connect(&gw.url, ProtocolVersion::V2025_11_25, json!({})).await;
    let text = c.call("alpha__connect", json!({ "id": "el-3" })).await;
    assert!(
        text.starts_with("error=-32602") && text.contains("url-mode"),
        "{text}"
    );
    assert_eq!(c.asked(), Vec::<Value>::new(), "c was sent a link");
    // A client that declared URL mode only gets its link.
    let url_only = Peer::connect(&gw.url, ProtocolVersion::V2025_11_25, json!({ "url": {} })).await;
    assert_eq!(
        url_only
            .call("alpha__connect", json!({ "id": "el-5" }))
            .await,
        "action=accept"
    );
    assert_eq!(url_only.asked().len(), 1);

    // A 2026-07-28 client gets the link (as an input request) and no completion.
    let d = Peer::connect(&gw.url, ProtocolVersion::V2026_07_28, both.clone()).await;
    assert_eq!(
        d.call(
            "alpha__connect",
            json!({ "id": "el-4", "complete_now": true })
        )
        .await,
        "action=accept"
    );
    let asked = d.asked();
    assert!(
        !asked.is_empty() && asked.iter().all(|q| q["mode"] == "url"),
        "{asked:?}"
    );
    // A later completion that does arrive bounds the wait for el-4's, which must not.
    assert_eq!(
        url_only
            .call("alpha__complete", json!({ "id": "el-5" }))
            .await,
        "sent"
    );
    url_only.wait_completed("el-5", "url-only client's").await;
    tokio::time::sleep(SETTLE).await;
    assert_eq!(d.completed(), Vec::<String>::new(), "d's completions");
    assert_eq!(c.completed(), Vec::<String>::new(), "c's completions");
    assert_eq!(url_only.completed(), ["el-5"], "url-only client's");
    assert_eq!(
        a.completed(),
        ["el-1", "el-2", "el-4"],
        "a's completions, at the end"
    );
    assert_eq!(b.completed(), ["el-1"], "b's completions, at the end");
}

/// Runs the Python SDK's client (`interop/py_url_client.py`) against `url` in the SDK's
/// `mode`, making `calls` (tool, arguments) in order; the report it prints.
async fn python_client(
    peers: &support::interop::Peers,
    url: &str,
    mode: &str,
    calls: &[(&str, Value)],
) -> Value {
    let mut args = vec![
        support::script("py_url_client.py"),
        url.to_owned(),
        mode.to_owned(),
    ];
    for (tool, arguments) in calls {
        args.push((*tool).to_owned());
        args.push(arguments.to_string());
    }
    let python = peers.python();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .args(&args)
            .output()
            .expect("run the Python client")
    })
    .await
    .expect("the Python client's thread");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the Python client's JSON")
}

/// The Python SDK's client, in 2025-11-25, is sent its links and then their completions
/// (after the call, and during it), and another client that has a link of the same server
/// pending sees none of them; in 2026-07-28 it gets the link and no completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_gets_its_links_completions_and_no_one_else_does() {
    let Some(peers) = support::peers(&[".venv/bin/python"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let gw = gateway(dir.path());
    let other = Peer::connect(
        &gw.url,
        ProtocolVersion::V2025_11_25,
        json!({ "form": {}, "url": {} }),
    )
    .await;
    assert_eq!(
        other.call("alpha__connect", json!({ "id": "py-0" })).await,
        "action=accept"
    );

    let report = python_client(
        &peers,
        &gw.url,
        "legacy",
        &[
            ("alpha__connect", json!({ "id": "py-1" })),
            ("alpha__complete", json!({ "id": "py-1" })),
            (
                "alpha__connect",
                json!({ "id": "py-2", "complete_now": true }),
            ),
        ],
    )
    .await;
    assert_eq!(report["protocolVersion"], "2025-11-25", "{report}");
    let asked: Vec<&Value> = report["elicitations"]
        .as_array()
        .expect("list")
        .iter()
        .collect();
    assert_eq!(asked.len(), 2, "{report}");
    assert!(asked.iter().all(|e| e["mode"] == "url"), "{report}");
    assert_eq!(asked[0]["elicitationId"], "py-1", "{report}");
    assert_eq!(asked[1]["elicitationId"], "py-2", "{report}");
    assert_eq!(report["completions"], json!(["py-1", "py-2"]), "{report}");
    assert_eq!(
        report["results"],
        json!(["action=accept", "sent", "action=accept"]),
        "{report}"
    );

    let report = python_client(
        &peers,
        &gw.url,
        "auto",
        &[(
            "alpha__connect",
            json!({ "id": "py-3", "complete_now": true }),
        )],
    )
    .await;
    assert_eq!(report["protocolVersion"], "2026-07-28", "{report}");
    assert_eq!(report["results"], json!(["action=accept"]), "{report}");
    assert!(
        report["elicitations"]
            .as_array()
            .is_some_and(|e| !e.is_empty() && e.iter().all(|e| e["mode"] == "url")),
        "{report}"
    );
    assert_eq!(report["completions"], json!([]), "{report}");

    // The other client's own link completes for it, and it was told nothing else.
    assert_eq!(
        other.call("alpha__complete", json!({ "id": "py-0" })).await,
        "sent"
    );
    other.wait_completed("py-0", "the other client's").await;
    tokio::time::sleep(SETTLE).await;
    assert_eq!(
        other.completed(),
        ["py-0"],
        "the other client's completions"
    );
}
