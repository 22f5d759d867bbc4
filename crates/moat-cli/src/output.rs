//! Human-readable rendering of results. Colour only when stdout is a terminal and
//! `NO_COLOR` is unset; `--json` output never has any.

use std::io::IsTerminal;
use std::sync::OnceLock;

use moat::types::{
    CallToolResult, ContentBlock, GetPromptResult, Prompt, Resource, ResourceContents,
    ResourceTemplate, Tool,
};
use serde_json::Value;

/// Whether stdout gets colour: a terminal, and `NO_COLOR` unset.
pub fn colour() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none())
}

pub fn bold(s: &str) -> String {
    if colour() {
        format!("\x1b[1m{s}\x1b[0m")
    } else {
        s.to_owned()
    }
}

pub fn dim(s: &str) -> String {
    if colour() {
        format!("\x1b[2m{s}\x1b[0m")
    } else {
        s.to_owned()
    }
}

/// Print a JSON value, pretty, to stdout.
pub fn print_json(value: &Value) {
    match serde_json::to_string_pretty(value) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("error: could not print JSON: {e}"),
    }
}

fn first_line(s: Option<&str>) -> &str {
    s.and_then(|s| s.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("")
        .trim()
}

fn arguments_summary(schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return String::new();
    };
    props
        .iter()
        .map(|(name, p)| {
            let ty = p.get("type").and_then(Value::as_str).unwrap_or("any");
            if required.contains(&name.as_str()) {
                format!("{name}: {ty}")
            } else {
                format!("{name}?: {ty}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn print_tools(tools: &[Tool]) {
    if tools.is_empty() {
        println!("{}", dim("(no tools)"));
        return;
    }
    for tool in tools {
        let mut hints = Vec::new();
        if let Some(a) = &tool.annotations {
            if a.read_only_hint == Some(true) {
                hints.push("read-only");
            }
            if a.destructive_hint == Some(true) {
                hints.push("destructive");
            }
        }
        let hints = if hints.is_empty() {
            String::new()
        } else {
            format!(" [{}]", hints.join(", "))
        };
        println!(
            "{}({}){}",
            bold(&tool.name),
            arguments_summary(&tool.input_schema),
            dim(&hints)
        );
        let desc = first_line(tool.description.as_deref());
        if !desc.is_empty() {
            println!("    {desc}");
        }
    }
    println!("{}", dim(&format!("{} tool(s)", tools.len())));
}

pub fn print_resources(resources: &[Resource], templates: &[ResourceTemplate]) {
    if resources.is_empty() && templates.is_empty() {
        println!("{}", dim("(no resources)"));
        return;
    }
    for r in resources {
        let mime = r
            .mime_type
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        println!(
            "{}{}  {}",
            bold(&r.uri),
            dim(&mime),
            first_line(r.description.as_deref().or(Some(&r.name)))
        );
    }
    for t in templates {
        println!(
            "{}  {}",
            bold(&t.uri_template),
            first_line(t.description.as_deref().or(Some(&t.name)))
        );
    }
}

pub fn print_prompts(prompts: &[Prompt]) {
    if prompts.is_empty() {
        println!("{}", dim("(no prompts)"));
        return;
    }
    for p in prompts {
        let args = p
            .arguments
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|a| {
                if a.required == Some(true) {
                    a.name.clone()
                } else {
                    format!("{}?", a.name)
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        println!("{}({})", bold(&p.name), args);
        let desc = first_line(p.description.as_deref());
        if !desc.is_empty() {
            println!("    {desc}");
        }
    }
}

fn print_block(block: &ContentBlock) {
    match block {
        ContentBlock::Text(t) => println!("{}", t.text),
        ContentBlock::Image(i) => println!(
            "{}",
            dim(&format!(
                "[image {}, {} base64 chars]",
                i.mime_type,
                i.data.len()
            ))
        ),
        ContentBlock::Audio(a) => println!(
            "{}",
            dim(&format!(
                "[audio {}, {} base64 chars]",
                a.mime_type,
                a.data.len()
            ))
        ),
        ContentBlock::ResourceLink(r) => println!("{}", dim(&format!("[link {}]", r.uri))),
        ContentBlock::Resource(e) => print_contents(std::slice::from_ref(&e.resource)),
        _ => println!("{}", dim("[content of a kind this version cannot show]")),
    }
}

pub fn print_call_result(result: &CallToolResult) {
    for block in &result.content {
        print_block(block);
    }
    if result.content.is_empty()
        && let Some(s) = &result.structured_content
    {
        print_json(s);
    }
}

pub fn print_contents(contents: &[ResourceContents]) {
    for c in contents {
        match c {
            ResourceContents::Text(t) => println!("{}", t.text),
            ResourceContents::Blob(b) => println!(
                "{}",
                dim(&format!(
                    "[{} {}, {} base64 chars]",
                    b.uri,
                    b.mime_type.as_deref().unwrap_or("binary"),
                    b.blob.len()
                ))
            ),
            _ => {}
        }
    }
}

pub fn print_prompt_result(result: &GetPromptResult) {
    if let Some(d) = &result.description {
        println!("{}", dim(d));
    }
    for m in &result.messages {
        println!("{}:", bold(&format!("{:?}", m.role).to_lowercase()));
        print_block(&m.content);
    }
}

/// One line of progress: "[=====>    ] 50/100 message", or a count when the total is unknown.
pub fn progress_line(p: &moat::types::ProgressNotificationParams) -> String {
    let message = p.message.as_deref().unwrap_or("");
    match p.total {
        Some(total) if total > 0.0 => {
            let width = 24usize;
            let done = ((p.progress / total).clamp(0.0, 1.0) * width as f64).round() as usize;
            format!(
                "[{}{}] {}/{} {message}",
                "=".repeat(done),
                " ".repeat(width - done),
                p.progress,
                total
            )
        }
        _ => format!("{} {message}", p.progress),
    }
}
