//! `moat demo --tour`: a tour of the protocol layer, on built-in defaults and with nothing to
//! install. It launches moat's own `everything` server as a child process and talks to it
//! the way an LLM client would: negotiating each protocol revision, listing and calling
//! tools, reading resources, getting prompts, answering a server's request for user input,
//! and showing that bad input and a crashing server are handled cleanly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use moat::transport::ChildConfig;
use moat::types::{ElicitRequestParams, ElicitResult, ElicitValue};
use moat::{Client, ProtocolVersion, VersionPreference};
use serde_json::{Value, json};

use crate::Failure;
use crate::cli::DemoArgs;
use crate::output::{bold, dim};

fn step(title: &str) {
    println!("\n{}", bold(&format!("▸ {title}")));
}

fn everything() -> anyhow::Result<ChildConfig> {
    let exe = std::env::current_exe().context("cannot find the moat executable")?;
    Ok(ChildConfig::new(exe, ["serve", "everything"]))
}

async fn connect(version: VersionPreference, quiet: bool) -> anyhow::Result<Client> {
    Client::builder()
        .protocol(version)
        .request_timeout(Some(Duration::from_secs(20)))
        .on_elicitation(move |request| async move {
            // Stands in for the user filling in a form.
            let message = match &request {
                ElicitRequestParams::Form(form) => form.message.clone(),
                _ => String::from("(a link)"),
            };
            if !quiet {
                println!("    {} {message}", dim("server asks the user:"));
            }
            let mut content = BTreeMap::new();
            content.insert("username".to_owned(), ElicitValue::String("ada".into()));
            content.insert(
                "email".to_owned(),
                ElicitValue::String("ada@example.org".into()),
            );
            Ok(ElicitResult::accept(content))
        })
        .connect_child(everything()?)
        .await
        .map_err(|e| anyhow!(e).context("could not start moat's everything server"))
}

pub async fn run(args: DemoArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let mut summary = serde_json::Map::new();
    if !args.json {
        println!(
            "{}",
            bold("moat demo — an MCP client and server talking, every protocol revision")
        );
    }

    // 1. Negotiation on every revision, and auto.
    if !args.json {
        step("Negotiating each protocol revision with `moat serve everything`");
    }
    let mut revisions = Vec::new();
    let preferences = ProtocolVersion::ALL
        .into_iter()
        .map(VersionPreference::Exact)
        .chain([VersionPreference::Auto]);
    for preference in preferences {
        let t = Instant::now();
        let client = connect(preference, args.json).await?;
        let tools = client.list_all_tools().await?;
        let agreed = client.protocol_version().map(|v| v.as_str()).unwrap_or("?");
        let asked = match preference {
            VersionPreference::Exact(v) => v.as_str().to_owned(),
            _ => "auto".to_owned(),
        };
        if !args.json {
            println!(
                "    asked {asked:<10} → speaking {agreed} ({} tools, {:.1} ms)",
                tools.len(),
                t.elapsed().as_secs_f64() * 1000.0
            );
        }
        revisions.push(json!({ "asked": asked, "agreed": agreed, "tools": tools.len() }));
        client.close().await;
    }
    summary.insert("revisions".into(), Value::Array(revisions));

    // 2. Tools, resources, prompts, and a server asking the user something.
    let client = connect(VersionPreference::Auto, args.json).await?;
    if !args.json {
        step("Calling tools, reading a resource, getting a prompt");
    }
    let text = client.call_tool("test_simple_text", json!({})).await?;
    let error = client.call_tool("test_error_handling", json!({})).await?;
    let resource = client.read_resource("test://template/42/data").await?;
    let prompt = client
        .get_prompt(
            "test_prompt_with_arguments",
            BTreeMap::from([
                ("arg1".into(), "moat".into()),
                ("arg2".into(), "MCP".into()),
            ]),
        )
        .await?;
    if !args.json {
        println!(
            "    test_simple_text    → {}",
            text.content[0].as_text().unwrap_or("")
        );
        println!(
            "    test_error_handling → isError={} ({})",
            error.is_error(),
            error.content[0].as_text().unwrap_or("")
        );
        println!(
            "    read test://template/42/data → {}",
            json!(resource.contents[0])
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
        );
        println!(
            "    prompt test_prompt_with_arguments → {}",
            json!(prompt.messages[0].content)
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
        );
        step("A tool asks the user for input mid-call (elicitation)");
    }
    let elicited = client
        .call_tool("test_elicitation", json!({ "message": "Who are you?" }))
        .await?;
    if !args.json {
        println!(
            "    result → {}",
            elicited.content[0].as_text().unwrap_or("")
        );
    }
    summary.insert("elicitation".into(), json!(elicited));

    // 3. Bad input: the server answers with the right error and keeps serving.
    if !args.json {
        step("Bad input gets a precise error, and the connection keeps serving");
    }
    let bad = client
        .peer()
        .request::<_, Value>("tools/call", &json!({ "name": 42 }))
        .await;
    let unknown = client
        .peer()
        .request::<_, Value>("no/such/method", &json!({}))
        .await;
    let still = client
        .call_tool("test_simple_text", json!({}))
        .await
        .is_ok();
    for (what, outcome) in [
        ("tools/call with name: 42", bad),
        ("no/such/method", unknown),
    ] {
        let shown = match outcome {
            Err(e) => e
                .remote()
                .map(|r| format!("{} {}", r.code, r.message))
                .unwrap_or(e.to_string()),
            Ok(v) => format!("unexpectedly answered {v}"),
        };
        if !args.json {
            println!("    {what:<26} → {shown}");
        }
    }
    if !args.json {
        println!("    next call still served → {still}");
    }
    client.close().await;

    // 4. A server that dies mid-call: the call fails at once, nothing hangs, nothing leaks.
    if !args.json {
        step("The server is killed in the middle of a call");
    }
    let client = connect(
        VersionPreference::Exact(ProtocolVersion::V2025_11_25),
        args.json,
    )
    .await?;
    let pid = client.child().and_then(|c| c.id());
    let t = Instant::now();
    let call = client.call_tool("test_tool_with_progress", json!({}));
    let killer = async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Some(child) = client.child() {
            child.kill();
        }
    };
    let (outcome, ()) = tokio::join!(call, killer);
    let failed_in = t.elapsed();
    let reaped = pid.is_none_or(|p| !std::path::Path::new(&format!("/proc/{p}")).exists());
    if !args.json {
        match &outcome {
            Err(e) => println!(
                "    pending call failed after {:.0} ms: {e}",
                failed_in.as_secs_f64() * 1000.0
            ),
            Ok(_) => println!("    the call finished before the kill landed"),
        }
        println!("    server process reaped (no zombie) → {reaped}");
    }
    client.close().await;
    summary.insert(
        "crash".into(),
        json!({ "failed_ms": failed_in.as_millis() as u64, "error": outcome.err().map(|e| e.to_string()), "reaped": reaped }),
    );

    if args.json {
        crate::output::print_json(&Value::Object(summary));
    } else {
        println!(
            "\n{} in {:.1} s. Next: `moat tools -- <any MCP server command>`, or `moat --help`.",
            bold("Done"),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
