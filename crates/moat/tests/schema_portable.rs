//! Tool schemas from tricky Rust types are in the portable form every model provider's
//! function calling accepts (checked against the rules in `moat::schema::rules`), and a
//! client that sends `null` for an optional argument still gets its result.

use std::collections::{BTreeMap, HashMap};

use moat::schema::rules::check_all;
use moat::schema::{Side, input_schema, output_schema};
use moat::schemars::{self, JsonSchema};
use moat::transport::{Connection, Limits};
use moat::{Client, Json, ProtocolVersion, Server, VersionPreference};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::BufReader;

#[allow(dead_code)]
#[derive(Deserialize, Serialize, JsonSchema)]
struct Inner {
    /// A count.
    x: u32,
    y: Option<String>,
}

#[allow(dead_code)]
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Shape {
    Circle { r: f64 },
    Square { side: f64 },
}

#[allow(dead_code)]
#[derive(Deserialize, Serialize, JsonSchema)]
enum External {
    A(i32),
    B { s: String },
    C,
}

#[allow(dead_code)]
#[derive(Deserialize, Serialize, JsonSchema)]
enum Color {
    Red,
    Green,
}

/// A recursive type.
#[allow(dead_code)]
#[derive(Deserialize, Serialize, JsonSchema)]
struct Tree {
    name: String,
    children: Vec<Tree>,
}

#[allow(dead_code)]
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
enum Loose {
    Number(i64),
    Text(String),
}

#[allow(dead_code)]
#[derive(Deserialize, Serialize, JsonSchema)]
struct Everything {
    /// At most this many.
    limit: Option<u64>,
    inner: Option<Inner>,
    req: Inner,
    shape: Shape,
    ext: External,
    color: Option<Color>,
    map: HashMap<String, i64>,
    sorted: BTreeMap<String, Inner>,
    pair: (i32, String),
    tree: Tree,
    loose: Loose,
    #[serde(default)]
    flag: bool,
    bytes: Vec<u8>,
    nested: Option<Vec<Option<Inner>>>,
}

fn portable_everywhere(schema: &Value, side: Side) {
    let broken = check_all(side, schema);
    assert!(
        broken.is_empty(),
        "{}\n{}",
        broken
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
        serde_json::to_string_pretty(schema).unwrap_or_default()
    );
}

macro_rules! both_sides {
    ($($t:ty),* $(,)?) => {$(
        portable_everywhere(&input_schema::<$t>(), Side::Input);
        portable_everywhere(&output_schema::<$t>(), Side::Output);
    )*};
}

#[test]
fn tricky_types_meet_every_api_rule() {
    both_sides!(
        Everything,
        Inner,
        Shape,
        External,
        Color,
        Tree,
        Loose,
        Option<Inner>,
        HashMap<String, Tree>,
        (u8, String, bool),
        Vec<Shape>,
        i64,
        String,
        moat::NoArgs,
    );
}

#[test]
fn optional_arguments_are_simply_not_required() {
    let s = input_schema::<Everything>();
    let required: Vec<&str> = s["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for optional in ["limit", "inner", "color", "flag", "nested"] {
        assert!(!required.contains(&optional), "{optional} is required");
    }
    for needed in ["req", "shape", "map", "pair", "tree"] {
        assert!(required.contains(&needed), "{needed} is not required");
    }
    assert_eq!(
        s["properties"]["limit"],
        json!({ "type": "integer", "format": "int64", "minimum": 0, "description": "At most this many." })
    );
    // Option<struct>: the struct itself, inlined.
    assert_eq!(s["properties"]["inner"]["type"], "object");
    assert_eq!(s["properties"]["inner"]["required"], json!(["x"]));
    assert_eq!(
        s["properties"]["color"],
        json!({ "type": "string", "enum": ["Red", "Green"] })
    );
    let text = s.to_string();
    assert!(!text.contains("\"null\""), "{text}");
    assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
}

#[test]
fn enums_maps_tuples_and_recursion_have_documented_fallbacks() {
    let s = input_schema::<Everything>();
    let p = &s["properties"];
    // An internally tagged enum: anyOf of its variants, each tagged by a one-value enum.
    let variants = p["shape"]["anyOf"].as_array().expect("variants");
    assert_eq!(variants.len(), 2);
    assert_eq!(variants[0]["properties"]["kind"]["enum"], json!(["circle"]));
    // A map: an object whose description says what its values are.
    assert_eq!(p["map"]["type"], "object");
    assert!(
        p["map"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("each value: integer")),
        "{}",
        p["map"]
    );
    // A tuple: an array of its members' union, its length kept.
    assert_eq!(p["pair"]["type"], "array");
    assert_eq!(p["pair"]["minItems"], 2);
    assert_eq!(p["pair"]["maxItems"], 2);
    assert_eq!(
        p["pair"]["items"]["anyOf"].as_array().map(Vec::len),
        Some(2)
    );
    // Recursion: expanded once, the inner occurrence an object saying whose shape it has.
    let child = &p["tree"]["properties"]["children"]["items"];
    assert_eq!(child["type"], "object");
    assert!(
        child["description"]
            .as_str()
            .is_some_and(|d| d.contains("same shape as Tree")),
        "{child}"
    );
}

#[test]
fn an_enum_as_the_whole_argument_is_flattened() {
    let s = input_schema::<Shape>();
    assert_eq!(s["type"], "object");
    assert!(s.get("anyOf").is_none());
    assert_eq!(s["properties"]["kind"]["enum"], json!(["circle", "square"]));
    assert!(s["properties"]["r"].is_object() && s["properties"]["side"].is_object());
    assert_eq!(s["required"], json!(["kind"]));
}

#[test]
fn nullable_outputs_keep_null_so_results_validate() {
    let s = output_schema::<Inner>();
    assert_eq!(
        s["properties"]["y"],
        json!({ "anyOf": [{ "type": "string" }, { "type": "null" }] })
    );
}

#[derive(Deserialize, JsonSchema)]
struct ListArgs {
    /// How many.
    limit: Option<u32>,
    filter: Option<Inner>,
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
    (peer, client)
}

#[tokio::test]
async fn null_for_an_optional_argument_still_gets_a_result() {
    let server = Server::new("nulls", "1").tool(
        "list",
        "Lists up to `limit` things.",
        |args: ListArgs| async move {
            Ok::<_, String>(Json(Inner {
                x: args.limit.unwrap_or(7),
                y: args.filter.and_then(|f| f.y),
            }))
        },
    );
    let (_peer, client) = connect(&server).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let def = tools.iter().find(|t| t.name == "list").expect("listed");
    portable_everywhere(&def.input_schema, Side::Input);
    assert!(def.input_schema.get("required").is_none());

    for args in [
        json!({ "limit": null, "filter": null }),
        json!({ "limit": null }),
        json!({}),
    ] {
        let result = client.call_tool("list", args.clone()).await.expect("call");
        assert_ne!(result.is_error, Some(true), "{args}: {result:?}");
        assert_eq!(
            result.structured_content,
            Some(json!({ "x": 7, "y": null })),
            "{args}"
        );
    }
    let result = client
        .call_tool("list", json!({ "limit": 3 }))
        .await
        .expect("call");
    assert_eq!(
        result.structured_content,
        Some(json!({ "x": 3, "y": null }))
    );
}

/// Arguments with a default (not an `Option`): `null` means "left out" too.
#[derive(Debug, Deserialize, JsonSchema)]
struct Defaulted {
    #[serde(default)]
    recursive: bool,
    #[serde(default = "three")]
    depth: u32,
    path: String,
}

fn three() -> u32 {
    3
}

#[tokio::test]
async fn null_for_an_argument_with_a_default_means_the_default() {
    let server =
        Server::new("defaults", "1").tool("walk", "Walks a tree.", |args: Defaulted| async move {
            Ok::<_, String>(format!("{} {} {}", args.path, args.recursive, args.depth))
        });
    let (_peer, client) = connect(&server).await;
    let text = |r: &moat_protocol::types::CallToolResult| {
        serde_json::to_value(&r.content).expect("content")[0]["text"].clone()
    };
    let result = client
        .call_tool(
            "walk",
            json!({ "path": "/a", "recursive": null, "depth": null }),
        )
        .await
        .expect("call");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text(&result), json!("/a false 3"));
    // A required argument sent as `null` is still refused.
    let result = client
        .call_tool("walk", json!({ "path": null }))
        .await
        .expect("call");
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(
        format!("{result:?}").contains("Invalid arguments for tool walk"),
        "{result:?}"
    );
}
