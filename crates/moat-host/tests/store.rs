//! The store, against both engines where it makes sense: SQLite (two handles on one file,
//! as the CLI and a gateway have) and PostgreSQL (two synced copies, as two gateways
//! have), plus PostgreSQL's own parts: migrations, a server that is down, and two gateways
//! in one process sharing pins through the store.
//!
//! PostgreSQL is found through `MOAT_TEST_POSTGRES_URL` (`.ci/run` starts a server and sets
//! it). Each test works in a schema of its own. Under CI a missing variable fails the test;
//! elsewhere the test says why it did not run.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use moat::transport::http::server::HttpServerOptions;
use moat::{Client, HttpOptions, NoArgs, Server};
use moat_host::consent::Decisions;
use moat_host::pins::{PinStatus, PinStore, ServerIdentity};
use moat_host::store::{Mirror, Postgres, StoreConfig, StoreError};
use moat_host::{Config, Host, HostOptions};
use moat_protocol::ErrorObject;
use moat_protocol::types::{ElicitResult, Tool};
use serde_json::json;

/// The server's URL, or `None` (outside CI only) after saying why the test does not run.
fn postgres_url() -> Option<String> {
    match std::env::var("MOAT_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("MOAT_TEST_POSTGRES_URL is not set: CI must run these tests against PostgreSQL")
        }
        _ => {
            eprintln!("MOAT_TEST_POSTGRES_URL is not set: PostgreSQL store test not run");
            None
        }
    }
}

/// A fresh schema on the test server, and a store configuration that works in it.
async fn fresh_schema(url: &str) -> StoreConfig {
    static N: AtomicU32 = AtomicU32::new(0);
    let schema = format!(
        "t_{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        Instant::now().elapsed().subsec_nanos()
    );
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connecting to MOAT_TEST_POSTGRES_URL");
    let driver = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;
    let sep = if url.contains('?') { '&' } else { '?' };
    StoreConfig::with_url(format!("{url}{sep}options=-csearch_path%3D{schema}"))
}

fn tool(description: &str) -> Tool {
    Tool::new("echo", json!({ "type": "object" })).with_description(description)
}

/// Two views of one store: what one process writes, the other must see after `settle`.
// Two of these exist per test: their size does not matter.
#[allow(clippy::large_enum_variant)]
enum Pair {
    Sqlite {
        _dir: tempfile::TempDir,
        pins: (PinStore, PinStore),
        decisions: (Decisions, Decisions),
    },
    Postgres(Mirror, Mirror),
}

impl Pair {
    fn sqlite() -> Pair {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pins.db");
        Pair::Sqlite {
            pins: (
                PinStore::open(&path).unwrap(),
                PinStore::open(&path).unwrap(),
            ),
            decisions: (
                Decisions::open(&path).unwrap(),
                Decisions::open(&path).unwrap(),
            ),
            _dir: dir,
        }
    }

    async fn postgres(cfg: &StoreConfig) -> Pair {
        let a = Mirror::open(Postgres::connect(cfg).await.unwrap())
            .await
            .unwrap();
        let b = Mirror::open(Postgres::connect(cfg).await.unwrap())
            .await
            .unwrap();
        Pair::Postgres(a, b)
    }

    fn pins(&self) -> (&PinStore, &PinStore) {
        match self {
            Pair::Sqlite { pins, .. } => (&pins.0, &pins.1),
            Pair::Postgres(a, b) => (a.pins(), b.pins()),
        }
    }

    fn decisions(&self) -> (&Decisions, &Decisions) {
        match self {
            Pair::Sqlite { decisions, .. } => (&decisions.0, &decisions.1),
            Pair::Postgres(a, b) => (a.decisions(), b.decisions()),
        }
    }

    /// What the background sync does: A sends, then B receives.
    async fn settle(&self) {
        if let Pair::Postgres(a, b) = self {
            a.sync().await.unwrap();
            b.sync().await.unwrap();
        }
    }
}

/// One suite, whichever engine: a pin made by one process, a change it holds back, the
/// approval from the other, and lasting decisions per user.
async fn suite(pair: Pair) {
    let id = ServerIdentity::named("s");
    let (a, b) = pair.pins();
    assert_eq!(
        a.observe(&id, "s", "s__echo", &tool("one")).unwrap(),
        PinStatus::New
    );
    pair.settle().await;
    let (a, b) = (a, b);
    assert_eq!(
        b.observe(&id, "s", "s__echo", &tool("one")).unwrap(),
        PinStatus::Pinned
    );
    assert!(
        a.observe(&id, "s", "s__echo", &tool("two"))
            .unwrap()
            .is_held()
    );
    pair.settle().await;
    let version = b.version().unwrap();
    let before = a.version().unwrap();
    let pending = b.get("s__echo").unwrap().unwrap().pending.unwrap();
    b.approve_hash("s__echo", &pending.hash).unwrap();
    assert_ne!(b.version().unwrap(), version);
    if let Pair::Postgres(_, mb) = &pair {
        mb.sync().await.unwrap();
    }
    if let Pair::Postgres(ma, _) = &pair {
        let synced = ma.sync().await.unwrap();
        assert!(synced.received, "{synced:?}");
    }
    assert_ne!(a.version().unwrap(), before, "the approval is noticed");
    assert_eq!(
        a.observe(&id, "s", "s__echo", &tool("two")).unwrap(),
        PinStatus::Pinned
    );
    assert_eq!(a.list().unwrap().len(), 1);

    let (da, db) = pair.decisions();
    da.allow_always_for(Some("alice"), "s__echo").unwrap();
    da.allow_always("fs__write").unwrap();
    pair.settle().await;
    assert!(db.always_allowed_for(Some("alice"), "s__echo"));
    assert!(!db.always_allowed_for(Some("bob"), "s__echo"));
    assert!(db.always_allowed("fs__write"));
    assert_eq!(db.forget(Some("fs__write")).unwrap(), 1);
    if let Pair::Postgres(ma, mb) = &pair {
        mb.sync().await.unwrap();
        ma.sync().await.unwrap();
    }
    assert!(!da.always_allowed("fs__write"));
    assert!(da.always_allowed_for(Some("alice"), "s__echo"));
}

#[tokio::test]
async fn suite_on_sqlite() {
    suite(Pair::sqlite()).await;
}

#[tokio::test]
async fn suite_on_postgres() {
    let Some(url) = postgres_url() else { return };
    let cfg = fresh_schema(&url).await;
    suite(Pair::postgres(&cfg).await).await;
}

/// Two processes pin the same new tool with different definitions: the first to reach the
/// store wins, and the other then holds its definition back as changed.
#[tokio::test]
async fn the_first_writer_wins() {
    let Some(url) = postgres_url() else { return };
    let cfg = fresh_schema(&url).await;
    let Pair::Postgres(a, b) = Pair::postgres(&cfg).await else {
        unreachable!()
    };
    let id = ServerIdentity::named("s");
    a.pins()
        .observe(&id, "s", "s__echo", &tool("from a"))
        .unwrap();
    b.pins()
        .observe(&id, "s", "s__echo", &tool("from b"))
        .unwrap();
    assert_eq!(a.sync().await.unwrap().sent, 1);
    let synced = b.sync().await.unwrap();
    assert_eq!(synced.refused, 1, "{synced:?}");
    assert!(
        b.pins()
            .observe(&id, "s", "s__echo", &tool("from b"))
            .unwrap()
            .is_held()
    );
    b.sync().await.unwrap();
    a.sync().await.unwrap();
    let pin = a.pins().get("s__echo").unwrap().unwrap();
    assert!(
        pin.pending.is_some(),
        "b's definition waits for approval everywhere"
    );
}

#[tokio::test]
async fn an_old_schema_is_upgraded_and_a_newer_one_refused() {
    let Some(url) = postgres_url() else { return };
    let cfg = fresh_schema(&url).await;
    let old = Postgres::connect_to(&cfg, Some(1)).await.unwrap();
    assert_eq!(old.schema_version().await.unwrap(), 1);
    let mirror = Mirror::open(old).await.unwrap();
    mirror.decisions().allow_always("kept__tool").unwrap();
    mirror.sync().await.unwrap();

    let new = Postgres::connect(&cfg).await.unwrap();
    let known = i64::from(moat_host::store::postgres::known_version());
    assert_eq!(new.schema_version().await.unwrap(), known);
    let mirror = Mirror::open(new).await.unwrap();
    assert!(mirror.decisions().always_allowed("kept__tool"));

    // A newer moat migrated it further.
    let url = cfg.url.clone().unwrap();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    client
        .execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
             VALUES (999, 'from_the_future', '2030-01-01T00:00:00Z', '0')",
            &[],
        )
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;
    let err = Postgres::connect(&cfg).await.unwrap_err();
    assert!(
        matches!(err, StoreError::FutureSchema { found: 999, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("newer than this moat knows"),
        "{err}"
    );
}

/// Nothing listens: the error names the store, never its password.
#[tokio::test]
async fn a_store_that_is_down_at_start_is_a_clear_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let cfg = StoreConfig::with_url(format!(
        "postgres://moat:hunter2@127.0.0.1:{port}/moat?sslmode=disable"
    ));
    let err = Postgres::connect(&cfg).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Connect { .. }), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(!text.contains("hunter2"), "{text}");

    // And the gateway does not start.
    let toml = format!(
        "[store]\nurl = \"postgres://moat:hunter2@127.0.0.1:{port}/moat?sslmode=disable\"\n"
    );
    let config = Config::from_toml_str(&toml, None).unwrap();
    let Err(err) = Host::start(config, HostOptions::default().ephemeral(true)).await else {
        panic!("no gateway without its store");
    };
    assert!(
        err.to_string().contains("cannot connect to the store"),
        "{err}"
    );
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

async fn serve(server: Server) -> String {
    let http = server
        .bind_http("127.0.0.1:0".parse().unwrap(), HttpServerOptions::default())
        .await
        .unwrap();
    let url = format!("http://{}/mcp", http.local_addr().unwrap());
    tokio::spawn(http.run());
    url
}

async fn tool_names(client: &Client) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect()
}

/// Two gateways on one store: a tool whose definition changed is held on both; approved
/// through the store (as `moat pins approve --store` does), both publish it again. A rate
/// limit of 3 a minute allows 3 calls across both gateways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_share_pins_and_rate_limits() {
    let Some(url) = postgres_url() else { return };
    let cfg = fresh_schema(&url).await;
    let store_url = cfg.url.clone().unwrap();
    let down = serve(
        Server::new("down", "1").tool("ok", "Answers", |_: NoArgs| async {
            Ok::<_, String>("fine")
        }),
    )
    .await;
    let toml = format!(
        r#"
        [servers.down]
        url = "{down}"
        [policy]
        default = "allow"
        [[policy.rate_limits]]
        tool = "ok"
        per_minute = 3
        [store]
        url = "{store_url}"
        "#
    );
    let config = Config::from_toml_str(&toml, None).unwrap();

    // The approved definition differs from what the server shows now.
    let seed = Mirror::open(Postgres::connect(&cfg).await.unwrap())
        .await
        .unwrap();
    let identity = ServerIdentity::of(&config.servers[0]);
    let old = Tool::new("ok", json!({ "type": "object" })).with_description("Old words");
    seed.pins()
        .observe(&identity, "down", "down__ok", &old)
        .unwrap();
    seed.sync().await.unwrap();

    let mut clients = Vec::new();
    let mut hosts = Vec::new();
    for _ in 0..2 {
        let host = Host::start(config.clone(), HostOptions::default().ephemeral(true))
            .await
            .unwrap();
        host.ready().await;
        let upstream = serve(host.server().clone()).await;
        let client = Client::builder()
            .connect_url(&upstream, HttpOptions::default())
            .await
            .unwrap();
        assert!(
            !tool_names(&client).await.contains(&"down__ok".to_owned()),
            "held"
        );
        clients.push(client);
        hosts.push(host);
    }

    // The gateways send what they hold back at their next sync.
    let deadline = Instant::now() + Duration::from_secs(10);
    let pending = loop {
        seed.sync().await.unwrap();
        if let Some(pending) = seed.pins().get("down__ok").unwrap().unwrap().pending {
            break pending;
        }
        assert!(
            Instant::now() < deadline,
            "the held change never reached the store"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    seed.pins().approve_hash("down__ok", &pending.hash).unwrap();
    let approved = Instant::now();
    let synced = seed.sync().await.unwrap();
    assert_eq!(synced.sent, 1, "{synced:?}");
    eprintln!(
        "the approval reached the store after {:?}",
        approved.elapsed()
    );
    for (i, client) in clients.iter().enumerate() {
        loop {
            if tool_names(client).await.contains(&"down__ok".to_owned()) {
                eprintln!(
                    "gateway {i}: the approval took effect after {:?}",
                    approved.elapsed()
                );
                break;
            }
            assert!(
                approved.elapsed() < Duration::from_secs(10),
                "gateway {i} never released the tool"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    let mut answered = 0;
    let mut limited = 0;
    for round in 0..2 {
        for client in &clients {
            let result = client.call_tool("down__ok", json!({})).await.unwrap();
            let text = result.content[0].as_text().unwrap_or_default().to_owned();
            if result.is_error == Some(true) {
                assert!(text.contains("called too often"), "round {round}: {text}");
                limited += 1;
            } else {
                answered += 1;
            }
        }
    }
    assert_eq!(
        (answered, limited),
        (3, 1),
        "3 a minute across both gateways"
    );
    for host in &hosts {
        host.audit().unwrap().flush().unwrap();
    }

    // Each call once in the shared trail, whichever gateway served it, in one chain.
    let pg = Postgres::connect(&cfg).await.unwrap();
    let records = moat_host::audit::shared::query(&pg, &Default::default())
        .await
        .unwrap();
    let calls: Vec<_> = records
        .iter()
        .filter(|r| r.exposed_name == "down__ok")
        .collect();
    assert_eq!(calls.len(), 4, "{records:#?}");
    assert_eq!(calls.iter().filter(|r| r.outcome == "ok").count(), 3);
    let report = moat_host::audit::shared::verify(&pg, Vec::new())
        .await
        .unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.chained, records.len() as u64);
    for host in &hosts {
        host.shutdown().await;
    }
}

/// A TCP relay in front of the test server, that can be cut (every connection dropped,
/// new ones refused) and restored: PostgreSQL lost and back, without stopping the server
/// other tests use.
struct Relay {
    url: String,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    live: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Relay {
    async fn start(cfg: &StoreConfig) -> Relay {
        let url = cfg.url.clone().unwrap();
        let at = url
            .find('@')
            .expect("MOAT_TEST_POSTGRES_URL names user@host:port")
            + 1;
        let end = at + url[at..].find('/').unwrap();
        let target = url[at..end].to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let local = listener.local_addr().unwrap();
        let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let live = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (up2, live2) = (up.clone(), live.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !up2.load(Ordering::SeqCst) {
                    continue;
                }
                let target = target.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                live2.lock().unwrap().push(task.abort_handle());
            }
        });
        Relay {
            url: format!("{}{local}{}", &url[..at], &url[end..]),
            up,
            live,
        }
    }

    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for task in self.live.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

/// The store lost while a gateway runs: a rate-limited call fails saying so, a call that
/// needs no store still works (pins and decisions are served from the gateway's copy) and
/// its record waits; when the store is back, calls work again and the trail has every
/// record once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_lost_and_back() {
    let Some(url) = postgres_url() else { return };
    let cfg = fresh_schema(&url).await;
    let relay = Relay::start(&cfg).await;
    let down = serve(
        Server::new("down", "1")
            .tool("limited", "Under a limit", |_: NoArgs| async {
                Ok::<_, String>("fine")
            })
            .tool("free", "Under no limit", |_: NoArgs| async {
                Ok::<_, String>("fine")
            }),
    )
    .await;
    let toml = format!(
        r#"
        [servers.down]
        url = "{down}"
        [policy]
        default = "allow"
        [[policy.rate_limits]]
        tool = "limited"
        per_minute = 100
        [store]
        url = "{}"
        "#,
        relay.url
    );
    let config = Config::from_toml_str(&toml, None).unwrap();
    let host = Host::start(config, HostOptions::default().ephemeral(true))
        .await
        .unwrap();
    host.ready().await;
    let upstream = serve(host.server().clone()).await;
    let client = Client::builder()
        .connect_url(&upstream, HttpOptions::default())
        .await
        .unwrap();
    let call = |tool: &'static str| {
        let client = &client;
        async move {
            let r = client.call_tool(tool, json!({})).await.unwrap();
            (
                r.is_error == Some(true),
                r.content[0].as_text().unwrap_or_default().to_owned(),
            )
        }
    };
    assert_eq!(call("down__limited").await, (false, "fine".to_owned()));
    let audit = host.audit().unwrap().clone();
    tokio::task::spawn_blocking({
        let audit = audit.clone();
        move || audit.flush()
    })
    .await
    .unwrap()
    .unwrap();

    relay.cut();
    let (failed, text) = call("down__limited").await;
    assert!(failed, "{text}");
    assert!(text.contains("cannot be reached"), "{text}");
    assert!(
        !text.contains(":moat_test@"),
        "no password in messages: {text}"
    );
    assert_eq!(call("down__free").await, (false, "fine".to_owned()));
    let waiting = tokio::task::spawn_blocking({
        let audit = audit.clone();
        move || audit.flush()
    })
    .await
    .unwrap();
    assert!(
        matches!(waiting, Err(moat_host::audit::AuditError::Waiting { .. })),
        "{waiting:?}"
    );

    relay.restore();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (failed, text) = call("down__limited").await;
        if !failed {
            break;
        }
        assert!(Instant::now() < deadline, "never recovered: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    loop {
        let flushed = tokio::task::spawn_blocking({
            let audit = audit.clone();
            move || audit.flush()
        })
        .await
        .unwrap();
        if flushed.is_ok() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "records never written: {flushed:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pg = Postgres::connect(&cfg).await.unwrap();
    let records = moat_host::audit::shared::query(&pg, &Default::default())
        .await
        .unwrap();
    let names: Vec<(&str, &str)> = records
        .iter()
        .map(|r| (r.exposed_name.as_str(), r.outcome.as_str()))
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(names[0], ("down__limited", "ok"));
    assert_eq!(names[2], ("down__free", "ok"));
    assert_eq!(names[3], ("down__limited", "ok"));
    assert!(
        moat_host::audit::shared::verify(&pg, Vec::new())
            .await
            .unwrap()
            .ok()
    );
    host.shutdown().await;
}

/// A client that answers every consent question with `answer`, counting the questions.
async fn asking_client(url: &str, answer: &'static str, asked: Arc<AtomicU32>) -> Client {
    Client::builder()
        .on_elicitation(move |_params| {
            asked.fetch_add(1, Ordering::SeqCst);
            async move {
                let result: ElicitResult = serde_json::from_value(json!({
                    "action": "accept",
                    "content": { "decision": answer },
                }))
                .expect("an elicitation result");
                Ok::<_, ErrorObject>(result)
            }
        })
        .connect_url(url, HttpOptions::default())
        .await
        .unwrap()
}

/// "Always approve" given through one gateway: the other stops asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consent_always_on_one_gateway_applies_on_the_other() {
    let Some(url) = postgres_url() else { return };
    let cfg = fresh_schema(&url).await;
    let store_url = cfg.url.clone().unwrap();
    let down = serve(
        Server::new("down", "1").tool("asky", "Needs consent", |_: NoArgs| async {
            Ok::<_, String>("done")
        }),
    )
    .await;
    let toml = format!(
        r#"
        [servers.down]
        url = "{down}"
        [policy]
        default = "ask"
        [consent]
        mode = "elicit"
        [store]
        url = "{store_url}"
        "#
    );
    let config = Config::from_toml_str(&toml, None).unwrap();
    let mut upstreams = Vec::new();
    let mut hosts = Vec::new();
    for _ in 0..2 {
        let host = Host::start(config.clone(), HostOptions::default().ephemeral(true))
            .await
            .unwrap();
        host.ready().await;
        upstreams.push(serve(host.server().clone()).await);
        hosts.push(host);
    }
    let asked_a = Arc::new(AtomicU32::new(0));
    let asked_b = Arc::new(AtomicU32::new(0));
    let a = asking_client(&upstreams[0], "always approve", asked_a.clone()).await;
    let b = asking_client(&upstreams[1], "deny", asked_b.clone()).await;

    let result = a.call_tool("down__asky", json!({})).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(asked_a.load(Ordering::SeqCst), 1);
    let given = Instant::now();
    loop {
        let before = asked_b.load(Ordering::SeqCst);
        let result = b.call_tool("down__asky", json!({})).await.unwrap();
        if result.is_error != Some(true) && asked_b.load(Ordering::SeqCst) != before {
            // The approval reached this gateway while b was being asked: a 2026-07-28 call
            // asks in one round and decides in the retry that carries the answer, by which
            // time "always" applied. The next call must not ask at all.
            assert!(
                given.elapsed() < Duration::from_secs(10),
                "still asked after the approval applied"
            );
            continue;
        }
        if result.is_error != Some(true) {
            assert_eq!(asked_b.load(Ordering::SeqCst), before, "not asked again");
            eprintln!(
                "the \"always\" applied on the other gateway after {:?}",
                given.elapsed()
            );
            break;
        }
        assert!(
            given.elapsed() < Duration::from_secs(10),
            "never applied: {result:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = a.call_tool("down__asky", json!({})).await.unwrap();
    assert_ne!(again.is_error, Some(true));
    assert_eq!(
        asked_a.load(Ordering::SeqCst),
        1,
        "a gateway's own always holds too"
    );
    for host in &hosts {
        host.shutdown().await;
    }
}

/// The HTTP session directory's contract, on any engine.
async fn directory_suite(
    directory: &dyn moat::transport::http::server::directory::SessionDirectory,
) {
    use moat::transport::http::server::directory::{
        Replica, SessionChange, SessionRecord, SessionUser,
    };
    let a = Replica::new("http://10.0.0.1:8080");
    let b = Replica::new("http://10.0.0.2:8080");
    let c = Replica::new("http://10.0.0.3:8080");
    let mut record = SessionRecord::new("s1", a.clone());
    record.version = "2025-11-25".into();
    record.initialize = r#"{"protocolVersion":"2025-11-25","capabilities":{}}"#.into();
    record.user = Some(SessionUser {
        issuer: Some("https://idp".into()),
        subject: None,
    });
    directory.register(&record).await.unwrap();
    assert_eq!(directory.find("s1").await.unwrap(), Some(record.clone()));
    assert_eq!(directory.find("s2").await.unwrap(), None);

    // Changes the client makes; subscribing twice keeps one entry.
    for change in [
        SessionChange::LogLevel("error".into()),
        SessionChange::Subscribe("file:///a".into()),
        SessionChange::Subscribe("file:///b".into()),
        SessionChange::Subscribe("file:///a".into()),
        SessionChange::Unsubscribe("file:///b".into()),
    ] {
        directory.update("s1", &change).await.unwrap();
    }
    let found = directory.find("s1").await.unwrap().unwrap();
    assert_eq!(found.log_level.as_deref(), Some("error"));
    assert_eq!(found.subscriptions, vec!["file:///a".to_owned()]);

    // Two replicas take it over from A at once: one wins, and the other learns who.
    let (won_b, won_c) = tokio::join!(
        directory.claim("s1", &a.id, &b),
        directory.claim("s1", &a.id, &c)
    );
    let (won_b, won_c) = (won_b.unwrap(), won_c.unwrap());
    assert!(won_b ^ won_c, "exactly one takeover wins");
    let owner = directory.find("s1").await.unwrap().unwrap().owner;
    assert_eq!(owner, if won_b { b.clone() } else { c.clone() });

    // Touched records stay; the rest go once stale.
    let other = SessionRecord::new("s2", a.clone());
    directory.register(&other).await.unwrap();
    // A touches both: s2 is its own, s1 was taken over (A must drop its copy).
    let elsewhere = directory
        .touch(
            &["s1".to_owned(), "s2".to_owned(), "s3".to_owned()],
            &a.id,
            Duration::from_secs(3600),
        )
        .await
        .unwrap();
    assert_eq!(elsewhere, vec!["s1".to_owned()]);
    assert!(directory.find("s2").await.unwrap().is_some());
    // A replica whose copy expired does not take the record from the one that owns it.
    directory.remove("s1", Some(&a.id)).await.unwrap();
    assert!(directory.find("s1").await.unwrap().is_some());
    directory.remove("s1", Some(&owner.id)).await.unwrap();
    assert_eq!(directory.find("s1").await.unwrap(), None);
    directory.remove("s2", None).await.unwrap();
    assert_eq!(directory.find("s2").await.unwrap(), None);

    events_suite(directory).await;
}

/// The events of resumable streams: kept in order, once; bounded; gone with the session.
async fn events_suite(directory: &dyn moat::transport::http::server::directory::SessionDirectory) {
    use moat::transport::http::server::directory::{
        KEPT_EVENTS, Replica, SessionRecord, StoredEvent,
    };
    let owner = Replica::new("http://10.0.0.1:8080");
    directory
        .register(&SessionRecord::new("e1", owner.clone()))
        .await
        .unwrap();
    let event = |seq: u64, answers: bool| {
        StoredEvent::new("e1", "t_1_MQ", seq, answers, format!("{{\"n\":{seq}}}"))
    };
    // Two batches, the second repeating an event of the first (a re-sent batch).
    directory
        .append_events(&[event(0, false), event(1, false)])
        .await
        .unwrap();
    directory
        .append_events(&[
            event(1, false),
            event(2, true),
            StoredEvent::new("e1", "t_2", 0, false, "{}"),
        ])
        .await
        .unwrap();
    let kept = directory.events("e1", "t_1_MQ").await.unwrap();
    assert_eq!(kept, vec![event(0, false), event(1, false), event(2, true)]);
    assert_eq!(directory.events("e1", "t_2").await.unwrap().len(), 1);
    assert!(directory.events("e1", "t_3").await.unwrap().is_empty());

    // A long stream keeps its latest events, and its answers whatever their age.
    let long: Vec<StoredEvent> = (3..KEPT_EVENTS + 103).map(|n| event(n, false)).collect();
    for chunk in long.chunks(64) {
        directory.append_events(chunk).await.unwrap();
    }
    let kept = directory.events("e1", "t_1_MQ").await.unwrap();
    let newest = KEPT_EVENTS + 102;
    assert_eq!(
        kept.len() as u64,
        KEPT_EVENTS + 1,
        "the bound, and the answer"
    );
    assert_eq!(kept[0], event(2, true));
    assert_eq!(kept[1].seq, newest + 1 - KEPT_EVENTS);
    assert_eq!(kept.last().map(|e| e.seq), Some(newest));

    // A replica whose copy expired leaves the events of a session it no longer owns.
    directory
        .claim("e1", &owner.id, &Replica::new("http://10.0.0.2:8080"))
        .await
        .unwrap();
    directory.remove("e1", Some(&owner.id)).await.unwrap();
    assert!(!directory.events("e1", "t_2").await.unwrap().is_empty());
    directory.remove("e1", None).await.unwrap();
    assert!(directory.events("e1", "t_1_MQ").await.unwrap().is_empty());
    assert!(directory.events("e1", "t_2").await.unwrap().is_empty());
}

#[tokio::test]
async fn session_directory_in_memory() {
    let directory = moat::transport::http::server::MemoryDirectory::default();
    directory_suite(&directory).await;
}

#[tokio::test]
async fn session_directory_on_postgres() {
    let Some(url) = postgres_url() else { return };
    let cfg = fresh_schema(&url).await;
    let pg = Postgres::connect(&cfg).await.unwrap();
    let directory = moat_host::store::PostgresDirectory::new(pg.clone());
    directory_suite(&directory).await;

    // A record nobody touches goes after `stale`.
    use moat::transport::http::server::directory::{Replica, SessionDirectory, SessionRecord};
    let r = SessionRecord::new("old", Replica::new("http://10.0.0.9:1"));
    directory.register(&r).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    directory
        .touch(&[], "nobody", Duration::from_millis(10))
        .await
        .unwrap();
    assert_eq!(directory.find("old").await.unwrap(), None);
}
