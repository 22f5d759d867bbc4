//! Every tool of every built-in server has input and output schemas that meet the schema
//! rules of Gemini, OpenAI and Anthropic (`moat::schema::rules`), so a client can hand them
//! to any model provider as they are.

use moat::protocol::types::Tool;
use moat::schema::Side;
use moat::schema::portable::portable_input;
use moat::schema::rules::check_all;
use moat::transport::{Connection, Limits};
use moat::{Client, ProtocolVersion, Server, VersionPreference};
use tokio::io::BufReader;

/// The everything server's conformance fixtures whose schemas carry what the portable form
/// leaves out on purpose, for the conformance suite to see it arrive: JSON Schema 2020-12
/// features (`$defs`, `$ref`, `if`/`then`) and the `x-mcp-header` annotation. A gateway in
/// `portable` mode rewrites them; their rewrite is checked instead.
const DELIBERATELY_RAW: [&str; 2] = ["json_schema_2020_12_tool", "test_custom_header"];

async fn tools_of(server: &Server) -> Vec<Tool> {
    let (a, b) = tokio::io::duplex(1 << 20);
    let (ar, aw) = tokio::io::split(a);
    let _peer = server.start(Connection::from_lines(
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
    client.list_all_tools().await.expect("tools/list")
}

fn broken_rules(server: &str, tools: &[Tool]) -> Vec<String> {
    let mut broken = Vec::new();
    for tool in tools {
        let input = if DELIBERATELY_RAW.contains(&tool.name.as_str()) {
            portable_input(&tool.input_schema)
        } else {
            tool.input_schema.clone()
        };
        for v in check_all(Side::Input, &input) {
            broken.push(format!("{server}/{} inputSchema: {v}", tool.name));
        }
        if let Some(output) = &tool.output_schema {
            for v in check_all(Side::Output, output) {
                broken.push(format!("{server}/{} outputSchema: {v}", tool.name));
            }
        }
    }
    broken
}

#[tokio::test]
async fn every_built_in_tool_meets_every_api_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = moat_servers::fs::server(dir.path().to_path_buf()).expect("fs server");
    let exec = moat_servers::exec::server(moat_servers::exec::ExecOptions::default())
        .expect("exec server");
    // An empty file is an empty SQLite database.
    std::fs::write(dir.path().join("db.sqlite"), b"").expect("database file");
    let sqlite = moat_servers::sqlite::server(
        dir.path().join("db.sqlite"),
        moat_servers::sqlite::SqliteOptions::default(),
    )
    .expect("sqlite server");
    let everything = moat_servers::everything::server();

    let mut broken = Vec::new();
    let mut counted = 0;
    for (name, server) in [
        ("fs", &fs),
        ("exec", &exec),
        ("sqlite", &sqlite),
        ("everything", &everything),
    ] {
        let tools = tools_of(server).await;
        assert!(!tools.is_empty(), "{name} lists no tools");
        counted += tools.len();
        broken.extend(broken_rules(name, &tools));
    }
    assert!(counted > 30, "only {counted} tools checked");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[tokio::test]
async fn optional_arguments_of_built_in_tools_are_not_nullable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = moat_servers::fs::server(dir.path().to_path_buf()).expect("fs server");
    let tools = tools_of(&fs).await;
    let read = tools
        .iter()
        .find(|t| t.name == "read_file")
        .expect("read_file");
    let text = read.input_schema.to_string();
    assert!(!text.contains("null"), "{text}");
    assert_eq!(read.input_schema["required"], serde_json::json!(["path"]));
}
