//! `subscriptions/listen` (2026-07-28) and `resources/subscribe` (handshake era): change
//! notifications reach exactly the connections that asked for them.

mod support;
use support::pair;

use std::time::Duration;

use moat::client::Listening;
use moat::types::SubscriptionFilter;
use moat::{Client, NoArgs, ProtocolVersion, Server, ServerNotification, VersionPreference};
use tokio::sync::broadcast;

fn server() -> Server {
    Server::new("listen", "1")
        .tool("a", "A tool", |_: NoArgs| async { Ok::<_, String>("a") })
        .resource("x://watched", "Watched", || async { Ok::<_, String>("v1") })
        .resource("x://other", "Other", || async { Ok::<_, String>("v1") })
}

async fn next(rx: &mut broadcast::Receiver<ServerNotification>) -> Option<ServerNotification> {
    tokio::time::timeout(Duration::from_millis(500), rx.recv())
        .await
        .ok()?
        .ok()
}

#[tokio::test]
async fn listen_streams_deliver_what_was_asked_and_stop_when_dropped() {
    let server = server();
    let (s, c) = pair();
    let _peer = server.start(s);
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
        .connect(c)
        .await
        .unwrap();
    let listening = client
        .listen(SubscriptionFilter {
            tools_list_changed: Some(true),
            prompts_list_changed: Some(true), // no prompts: not honoured
            resource_subscriptions: Some(vec!["x://watched".into()]),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listening.honoured().tools_list_changed, Some(true));
    assert_eq!(listening.honoured().prompts_list_changed, None);
    hears_until_dropped(&server, &client, listening).await;
}

/// What a stream listening for `x://watched` and tool list changes hears: that resource's
/// update alone (tagged with the stream), a change of the tool list, and nothing once the
/// stream is dropped.
async fn hears_until_dropped(server: &Server, client: &Client, listening: Listening) {
    let mut rx = client.notifications();
    server.notify_resource_updated("x://other").await;
    server.notify_resource_updated("x://watched").await;
    let n = next(&mut rx).await.expect("an update");
    assert_eq!(n.method, "notifications/resources/updated");
    let params = n.params.unwrap();
    assert_eq!(params["uri"], "x://watched", "only the subscribed URI");
    assert!(params["_meta"]["io.modelcontextprotocol/subscriptionId"].is_number());

    let _server = server
        .clone()
        .tool("b", "Another", |_: NoArgs| async { Ok::<_, String>("b") });
    let n = next(&mut rx).await.expect("list_changed");
    assert_eq!(n.method, "notifications/tools/list_changed");

    drop(listening);
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.notify_resource_updated("x://watched").await;
    assert!(
        next(&mut rx).await.is_none(),
        "nothing after the stream was cancelled"
    );
}

#[tokio::test]
async fn handshake_subscriptions_deliver_updates() {
    let server = server();
    let (s, c) = pair();
    let _peer = server.start(s);
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_06_18))
        .connect(c)
        .await
        .unwrap();
    let mut rx = client.notifications();
    client.subscribe("x://watched").await.unwrap();
    server.notify_resource_updated("x://watched").await;
    let n = next(&mut rx).await.expect("an update");
    assert_eq!(n.params.unwrap()["uri"], "x://watched");
    client.unsubscribe("x://watched").await.unwrap();
    server.notify_resource_updated("x://watched").await;
    assert!(next(&mut rx).await.is_none());
}

#[tokio::test]
async fn the_subscribe_hook_sees_watchers_come_and_go() {
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let server =
        server().on_subscribe(move |uri, on| log.lock().unwrap().push((uri.to_owned(), on)));

    // Handshake era: subscribe, unsubscribe, subscribe again, then hang up.
    let (s, c) = pair();
    let _peer = server.start(s);
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .connect(c)
        .await
        .unwrap();
    client.subscribe("x://watched").await.unwrap();
    client.subscribe("x://watched").await.unwrap(); // already watching: no second event
    client.unsubscribe("x://watched").await.unwrap();
    client.subscribe("x://other").await.unwrap();
    client.close().await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Modern era: a listen stream naming a URI, then dropped.
    let (s, c) = pair();
    let _peer = server.start(s);
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
        .connect(c)
        .await
        .unwrap();
    let listening = client
        .listen(SubscriptionFilter {
            resource_subscriptions: Some(vec!["x://watched".into()]),
            ..Default::default()
        })
        .await
        .unwrap();
    drop(listening);
    tokio::time::sleep(Duration::from_millis(100)).await;

    let w = |uri: &str, on| (uri.to_owned(), on);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            w("x://watched", true),
            w("x://watched", false),
            w("x://other", true),
            w("x://other", false), // the connection closed
            w("x://watched", true),
            w("x://watched", false), // the stream was cancelled
        ]
    );
    // A weak handle does not keep the server alive.
    let weak = server.downgrade();
    assert!(weak.upgrade().is_some());
}

/// Over Streamable HTTP a 2026-07-28 request has a connection of its own, which the server
/// holds among those notifications reach only while it listens: the stream still gets what
/// it asked for, and nothing after it is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_over_http_gets_its_notifications() {
    use moat::transport::http::server::HttpServerOptions;
    let server = server();
    let http = server
        .bind_http("127.0.0.1:0".parse().unwrap(), HttpServerOptions::default())
        .await
        .unwrap();
    let url = format!("http://{}/mcp", http.local_addr().unwrap());
    tokio::spawn(http.run());
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2026_07_28))
        .connect_url(&url, moat::HttpOptions::default())
        .await
        .unwrap();
    // Stateless requests come and go before and beside the stream.
    client.call_tool("a", serde_json::json!({})).await.unwrap();
    let listening = client
        .listen(SubscriptionFilter {
            tools_list_changed: Some(true),
            resource_subscriptions: Some(vec!["x://watched".into()]),
            ..Default::default()
        })
        .await
        .unwrap();
    client.call_tool("a", serde_json::json!({})).await.unwrap();
    hears_until_dropped(&server, &client, listening).await;
    client.close().await;
}
