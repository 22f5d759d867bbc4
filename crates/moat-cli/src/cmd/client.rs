//! The client commands: `tools`, `call`, `resources`, `read`, `prompts`, `prompt`.
//!
//! A server that dies explains itself: a launched server's exit status and last stderr
//! lines come with the error (the transport puts them in the reason the connection
//! closed), whether it died before the handshake or during a request.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use moat::client::oauth::{
    Authorizer, LoopbackUserAgent, OAuthClient, OAuthConfig, PreRegisteredClient, Secret,
    open_in_browser,
};
use moat::transport::ChildProcess;
use moat::types::Tool;
use moat::{Client, HttpOptions, HttpTransport, RequestOptions, VersionPreference};
use serde_json::{Value, json};

use crate::Failure;
use crate::cli::{CallArgs, ListArgs, PromptArgs, ReadArgs, Target, ToolsArgs};
use crate::output;

/// Connect to the target: a URL, or a command after `--`.
pub(crate) async fn connect(url: Option<&str>, target: &Target) -> Result<Client, Failure> {
    let preference: VersionPreference = target
        .protocol
        .parse()
        .map_err(|e| Failure::Usage(anyhow!("--protocol: {e}")))?;
    let timeout = target.timeout.max(Duration::from_secs(1));
    if let Some(url) = url {
        if !target.command.is_empty() {
            return Err(Failure::Usage(anyhow!(
                "give either a URL or a command after `--`, not both"
            )));
        }
        let options = http_options(url, target).await?;
        // Logging in may happen on the first request, whichever it is: give a person at a
        // browser the whole timeout, not the short wait for `server/discover`.
        let discover = if target.oauth {
            timeout
        } else {
            timeout.min(Duration::from_secs(5))
        };
        let client = Client::builder()
            .protocol(preference)
            .request_timeout(Some(timeout))
            .discover_timeout(discover)
            .connect_url(url, options)
            .await
            .map_err(|e| match e {
                moat::Error::Http(e) if is_usage(&e) => Failure::Usage(anyhow!(e)),
                e => Failure::Connection(anyhow!(e).context(format!("could not connect to {url}"))),
            })?;
        tracing::info!(
            server = %client.server_info().name,
            version = ?client.protocol_version(),
            "connected"
        );
        return Ok(client);
    }
    if target.command.is_empty() {
        return Err(Failure::Usage(anyhow!(
            "no server given: put its command after `--`, e.g. `moat tools -- npx -y @modelcontextprotocol/server-everything`"
        )));
    }
    let shown = shell_words(&target.command);
    let client = Client::builder()
        .protocol(preference)
        .request_timeout(Some(timeout))
        .discover_timeout(timeout.min(Duration::from_secs(5)))
        .connect_command(target.command.iter().cloned())
        .await
        .map_err(|e| match e {
            // The reason says how the server ended and what it said last (its exit status
            // and stderr): it is the whole story, without the "connection closed" prefix.
            moat::Error::Closed(why) => {
                Failure::Connection(anyhow!("could not connect to `{shown}`: {why}"))
            }
            e => Failure::Connection(anyhow!(e).context(format!("could not connect to `{shown}`"))),
        })?;
    tracing::info!(
        server = %client.server_info().name,
        version = ?client.protocol_version(),
        "connected"
    );
    Ok(client)
}

/// `argv` as a shell would need it, so that the command in a message can be pasted and
/// rerun: `sh -c 'echo hi; exit 1'`, not `sh -c echo hi; exit 1`.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@,+%".contains(&b));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The HTTP settings a target's flags ask for.
async fn http_options(url: &str, target: &Target) -> Result<HttpOptions, Failure> {
    let mut options = HttpOptions::default();
    options.mode = match target.transport.as_str() {
        "streamable" => HttpTransport::StreamableHttp,
        "sse" => HttpTransport::LegacySse,
        _ => HttpTransport::Auto,
    };
    if let Some(token) = &target.token {
        options = options.bearer_token(token.clone());
    }
    for h in &target.headers {
        let Some((name, value)) = h.split_once(':') else {
            return Err(Failure::Usage(anyhow!(
                "--header {h:?}: expected `Name: value`, e.g. --header 'X-Api-Key: abc'"
            )));
        };
        options = options.header(name.trim(), value.trim());
    }
    if target.oauth {
        options = options.authorizer(log_in(url, target).await?);
    }
    Ok(options)
}

/// `--oauth`: an OAuth client for `url` that takes the user through their browser, logged in
/// before the first MCP request when the server's metadata can be found up front, so that no
/// request's deadline runs while the user is at the browser. When it cannot (the server names
/// its metadata only in its 401), the first request's 401 starts the login instead.
async fn log_in(url: &str, target: &Target) -> Result<Arc<dyn Authorizer>, Failure> {
    let browser = LoopbackUserAgent::new()
        .context("--oauth: could not listen on 127.0.0.1 for the authorization redirect")
        .map_err(Failure::Connection)?
        .opener(|url| {
            eprintln!(
                "To authorize moat, open this URL in your browser (opening it now):\n\n  {url}\n"
            );
            // Without a desktop browser the printed URL is the way.
            if let Err(e) = open_in_browser(url) {
                tracing::debug!(error = %e, "could not start the browser");
            }
            Ok(())
        });
    let mut config = OAuthConfig::authorization_code(browser).client_name("moat");
    if let Some(id) = &target.oauth_client_id {
        let secret = std::env::var("MOAT_OAUTH_CLIENT_SECRET")
            .ok()
            .filter(|s| !s.is_empty())
            .map(Secret::new);
        config = config.pre_registered(PreRegisteredClient::new(id.clone(), secret));
    }
    let server = url
        .parse()
        .map_err(|e| Failure::Usage(anyhow!("invalid server URL {url:?}: {e}")))?;
    let oauth =
        OAuthClient::new(server, config).map_err(|e| Failure::Usage(anyhow!("--oauth: {e}")))?;
    if let Err(e) = oauth.authorize_now().await {
        tracing::info!(error = %e, "could not log in before connecting; the server's first 401 will say how");
    }
    Ok(Arc::new(oauth))
}

/// Whether an HTTP setup error is the user's to fix (a malformed URL or header).
fn is_usage(e: &moat::HttpError) -> bool {
    matches!(
        e,
        moat::HttpError::InvalidUrl { .. } | moat::HttpError::InvalidHeader { .. }
    )
}

fn parse_object(flag: &str, text: &str) -> Result<Value, Failure> {
    let value: Value = serde_json::from_str(text)
        .with_context(|| format!("{flag} is not valid JSON: {text}"))
        .map_err(Failure::Usage)?;
    if !value.is_object() {
        return Err(Failure::Usage(anyhow!(
            "{flag} must be a JSON object, like '{{\"key\": \"value\"}}'"
        )));
    }
    Ok(value)
}

pub(crate) fn header(client: &Client) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    map.insert(
        "protocolVersion".into(),
        json!(client.protocol_version().map(|v| v.as_str())),
    );
    map.insert("serverInfo".into(), json!(client.server_info()));
    map
}

/// The outcome of a request made after connecting, as the command's. A launched server
/// that died on the way says how: the connection's reason carries its exit status and last
/// stderr lines when the end of its stdout was seen first, but not when writing to it
/// failed first; then they come from `child` (by now closed and reaped).
pub(crate) async fn settle<T>(
    result: moat::Result<T>,
    child: Option<ChildProcess>,
) -> Result<T, Failure> {
    match (result, child) {
        (Err(moat::Error::Closed(why)), Some(child)) => {
            let end = child.end_reason(Duration::from_millis(500)).await;
            if why.contains(&end) {
                Err(Failure::Connection(anyhow!("connection closed: {why}")))
            } else {
                Err(Failure::Connection(anyhow!(
                    "connection closed: {why}; {end}"
                )))
            }
        }
        (result, _) => result.map_err(Failure::from),
    }
}

pub async fn tools(args: ToolsArgs) -> Result<(), Failure> {
    let ToolsArgs { cost, list: args } = args;
    let client = connect(args.url.as_deref(), &args.target).await?;
    let child = client.child().cloned();
    let result = client.list_all_tools().await;
    let meta = header(&client);
    client.close().await;
    let tools = settle(result, child).await?;
    let cost = cost.then(|| tool_cost(&tools));
    output::to_stdout(|out| {
        if args.json {
            let mut all = meta;
            all.insert("tools".into(), json!(tools));
            if let Some(cost) = cost {
                all.insert("cost".into(), cost);
            }
            output::write_json(out, &Value::Object(all))
        } else {
            output::write_tools(out, &tools)?;
            match cost {
                Some(cost) => write_cost(out, &cost),
                None => Ok(()),
            }
        }
    })
}

/// Tokens of the whole list and of each definition, largest first.
fn tool_cost(tools: &[Tool]) -> Value {
    let defs: Vec<Value> = tools.iter().map(|t| json!(t)).collect();
    let mut each: Vec<(String, usize)> = tools
        .iter()
        .zip(&defs)
        .map(|(t, d)| {
            (
                t.name.clone(),
                moat_search::tokens::tools_cost(std::slice::from_ref(d)),
            )
        })
        .collect();
    each.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    json!({
        "tokenizer": "o200k_base",
        "tools": tools.len(),
        "tokens": moat_search::tokens::tools_cost(&defs),
        "per_tool": each.iter().map(|(n, t)| json!({"name": n, "tokens": t})).collect::<Vec<_>>(),
    })
}

fn write_cost(out: &mut dyn Write, cost: &Value) -> std::io::Result<()> {
    let total = cost["tokens"].as_u64().unwrap_or(0);
    let n = cost["tools"].as_u64().unwrap_or(0);
    writeln!(out)?;
    writeln!(
        out,
        "{n} tool definitions: {total} tokens in the model's context (o200k_base)"
    )?;
    let largest: Vec<String> = cost["per_tool"]
        .as_array()
        .map(|a| {
            a.iter()
                .take(5)
                .map(|t| format!("{} {}", t["name"].as_str().unwrap_or("?"), t["tokens"]))
                .collect()
        })
        .unwrap_or_default();
    if n > 1 && !largest.is_empty() {
        writeln!(out, "largest: {}", largest.join(", "))?;
    }
    if n > 40 {
        writeln!(
            out,
            "{}",
            output::dim(
                "behind `moat gateway`, [tool_search] lists 3 meta-tools instead (see docs/gateway.md)"
            )
        )?;
    }
    Ok(())
}

pub async fn call(args: CallArgs) -> Result<(), Failure> {
    let arguments = parse_object("--args", &args.args)?;
    let client = connect(args.url.as_deref(), &args.target).await?;
    let child = client.child().cloned();
    // Long tools report progress: show it on a terminal (stderr, so stdout stays the result).
    let mut options = RequestOptions::default();
    let mut shown = None;
    if std::io::stderr().is_terminal() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        options = options.progress(tx);
        shown = Some(tokio::spawn(async move {
            let mut any = false;
            while let Some(p) = rx.recv().await {
                any = true;
                eprint!("\r\x1b[2K{}", output::progress_line(&p));
            }
            if any {
                eprintln!();
            }
        }));
    }
    let result = client.call_tool_with(&args.tool, arguments, options).await;
    client.close().await;
    if let Some(task) = shown {
        let _ = task.await;
    }
    let result = settle(result, child).await?;
    output::to_stdout(|out| {
        if args.json {
            output::write_json(out, &json!(result))
        } else {
            output::write_call_result(out, &result)
        }
    })?;
    if result.is_error() {
        if !args.json {
            eprintln!("error: tool {} reported an error", args.tool);
        }
        return Err(Failure::ToolError);
    }
    Ok(())
}

pub async fn resources(args: ListArgs) -> Result<(), Failure> {
    let client = connect(args.url.as_deref(), &args.target).await?;
    let child = client.child().cloned();
    let has_resources = client.server_capabilities().resources.is_some();
    let listed = if has_resources {
        match client.list_all_resources().await {
            Ok(r) => Ok((
                r,
                client
                    .list_all_resource_templates()
                    .await
                    .unwrap_or_default(),
            )),
            Err(e) => Err(e),
        }
    } else {
        Ok((Vec::new(), Vec::new()))
    };
    let meta = header(&client);
    client.close().await;
    let (resources, templates) = settle(listed, child).await?;
    output::to_stdout(|out| {
        if args.json {
            let mut all = meta;
            all.insert("resources".into(), json!(resources));
            all.insert("resourceTemplates".into(), json!(templates));
            output::write_json(out, &Value::Object(all))
        } else {
            output::write_resources(out, &resources, &templates)
        }
    })
}

pub async fn read(args: ReadArgs) -> Result<(), Failure> {
    let client = connect(args.url.as_deref(), &args.target).await?;
    let child = client.child().cloned();
    let result = client.read_resource(&args.uri).await;
    client.close().await;
    let result = settle(result, child).await?;
    output::to_stdout(|out| {
        if args.json {
            output::write_json(out, &json!(result))
        } else {
            output::write_contents(out, &result.contents)
        }
    })
}

pub async fn prompts(args: ListArgs) -> Result<(), Failure> {
    let client = connect(args.url.as_deref(), &args.target).await?;
    let child = client.child().cloned();
    let listed = if client.server_capabilities().prompts.is_some() {
        client.list_all_prompts().await
    } else {
        Ok(Vec::new())
    };
    let meta = header(&client);
    client.close().await;
    let prompts = settle(listed, child).await?;
    output::to_stdout(|out| {
        if args.json {
            let mut all = meta;
            all.insert("prompts".into(), json!(prompts));
            output::write_json(out, &Value::Object(all))
        } else {
            output::write_prompts(out, &prompts)
        }
    })
}

pub async fn prompt(args: PromptArgs) -> Result<(), Failure> {
    let value = parse_object("--args", &args.args)?;
    let mut arguments = BTreeMap::new();
    if let Value::Object(map) = value {
        for (k, v) in map {
            // Prompt arguments are strings on the wire; accept other scalars for convenience.
            let s = match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            arguments.insert(k, s);
        }
    }
    let client = connect(args.url.as_deref(), &args.target).await?;
    let child = client.child().cloned();
    let result = client.get_prompt(&args.name, arguments).await;
    client.close().await;
    let result = settle(result, child).await?;
    output::to_stdout(|out| {
        if args.json {
            output::write_json(out, &json!(result))
        } else {
            output::write_prompt_result(out, &result)
        }
    })
}
