//! `Server::batch`: several registry changes reach a connected client as one
//! `list_changed` per list kind, none when nothing changed, and the order a batch sets is
//! the order `tools/list` answers in.

use std::time::Duration;

use moat::protocol::types::{Prompt, Resource, Tool};
use moat::transport::{Connection, Limits};
use moat::{Client, ProtocolVersion, Server, VersionPreference};
use serde_json::{Value, json};
use tokio::io::BufReader;

fn tool(name: &str) -> Tool {
    Tool::new(name, json!({"type": "object"})).with_description(format!("the {name} tool"))
}

async fn connect(server: &Server) -> (moat::Peer, Client) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (ar, aw) = tokio::io::split(a);
    let peer = server.start(Connection::from_lines(
        BufReader::new(ar),
        aw,
        Limits::default(),
    ));
    let (br, bw) = tokio::io::split(b);
    let client = Client::builder()
        .protocol(VersionPreference::Exact(ProtocolVersion::V2025_11_25))
        .connect(Connection::from_lines(
            BufReader::new(br),
            bw,
            Limits::default(),
        ))
        .await
        .expect("connect");
    // A round trip: the server has taken `notifications/initialized` by its answer.
    client.ping().await.expect("ping");
    (peer, client)
}

/// The notifications that arrive within a moment, by method.
async fn notifications_for(
    rx: &mut tokio::sync::broadcast::Receiver<moat::ServerNotification>,
) -> Vec<String> {
    let mut seen = Vec::new();
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await {
        seen.push(n.method);
    }
    seen
}

#[tokio::test]
async fn a_batch_is_one_notification_per_list_and_sets_the_order() {
    let server = Server::new("batch", "1");
    let (_peer, client) = connect(&server).await;
    let mut rx = client.notifications();

    server.batch(|b| {
        for name in ["c", "a", "d", "b", "e"] {
            b.tool_def(tool(name), |_ctx, _: Value| async { Ok::<_, String>("ok") });
        }
        b.remove_tool("d");
        b.resource_def(Resource::new("test://one", "one"), |_req| async {
            Ok::<_, String>("1")
        });
        b.prompt_def(Prompt::new("p"), |_ctx, _: moat::NoArgs| async {
            Ok::<_, String>("hi")
        });
        b.sort_tools_by_key(|t| t.name.clone());
    });
    let mut seen = notifications_for(&mut rx).await;
    seen.sort();
    assert_eq!(
        seen,
        [
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed",
            "notifications/tools/list_changed",
        ]
    );
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["a", "b", "c", "e"]);

    // Nothing changes: nothing is said.
    server.batch(|b| {
        b.remove_tool("absent");
        b.sort_tools_by_key(|t| t.name.clone());
    });
    assert!(notifications_for(&mut rx).await.is_empty());

    // A new order alone is a change.
    server.batch(|b| b.sort_tools_by_key(|t| std::cmp::Reverse(t.name.clone())));
    assert_eq!(
        notifications_for(&mut rx).await,
        ["notifications/tools/list_changed"]
    );
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["e", "c", "b", "a"]);
    // A replaced tool keeps its place.
    server.batch(|b| {
        b.tool_def(
            tool("c").with_description("changed"),
            |_ctx, _: Value| async { Ok::<_, String>("ok") },
        );
    });
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["e", "c", "b", "a"]);
}
