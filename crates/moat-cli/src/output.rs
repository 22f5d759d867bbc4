//! Human-readable rendering of results. Colour only when stdout is a terminal and
//! `NO_COLOR` is unset; `--json` output never has any.
//!
//! The client commands render into a writer and print through [`to_stdout`], which ends
//! quietly when the reader of stdout has gone away: those commands keep SIGPIPE ignored
//! (see `main`), and `println!` would panic on the EPIPE.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::sync::OnceLock;

use anyhow::anyhow;

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

/// Run `print` against stdout (buffered, flushed at the end). Stdout closed by its reader
/// (EPIPE: `moat tools … | head`) is not a failure: the reader has what it wanted, and the
/// command ends quietly, as a Unix filter does. Any other write error is one.
pub fn to_stdout(
    print: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), crate::Failure> {
    let mut out = BufWriter::new(io::stdout().lock());
    let printed = print(&mut out).and_then(|()| out.flush());
    match printed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            tracing::debug!("stdout was closed by its reader; stopped printing");
            // What the buffer still holds can never be written: drop it, so that nothing
            // tries again on the way out.
            let _ = out.into_parts();
            Ok(())
        }
        Err(e) => Err(crate::Failure::Connection(
            anyhow!(e).context("could not write the result to stdout"),
        )),
    }
}

/// Write a JSON value, pretty, with a final newline.
pub fn write_json(out: &mut dyn Write, value: &Value) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

fn first_line(s: Option<&str>) -> &str {
    s.and_then(|s| s.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("")
        .trim()
}

pub fn write_tools(out: &mut dyn Write, tools: &[Tool]) -> io::Result<()> {
    if tools.is_empty() {
        writeln!(out, "{}", dim("(no tools)"))?;
        return Ok(());
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
        writeln!(
            out,
            "{}({}){}",
            bold(&tool.name),
            crate::schema_text::arguments(&tool.input_schema),
            dim(&hints)
        )?;
        let desc = first_line(tool.description.as_deref());
        if !desc.is_empty() {
            writeln!(out, "    {desc}")?;
        }
    }
    writeln!(out, "{}", dim(&format!("{} tool(s)", tools.len())))
}

pub fn write_resources(
    out: &mut dyn Write,
    resources: &[Resource],
    templates: &[ResourceTemplate],
) -> io::Result<()> {
    if resources.is_empty() && templates.is_empty() {
        writeln!(out, "{}", dim("(no resources)"))?;
        return Ok(());
    }
    for r in resources {
        let mime = r
            .mime_type
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        writeln!(
            out,
            "{}{}  {}",
            bold(&r.uri),
            dim(&mime),
            first_line(r.description.as_deref().or(Some(&r.name)))
        )?;
    }
    for t in templates {
        writeln!(
            out,
            "{}  {}",
            bold(&t.uri_template),
            first_line(t.description.as_deref().or(Some(&t.name)))
        )?;
    }
    Ok(())
}

pub fn write_prompts(out: &mut dyn Write, prompts: &[Prompt]) -> io::Result<()> {
    if prompts.is_empty() {
        writeln!(out, "{}", dim("(no prompts)"))?;
        return Ok(());
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
        writeln!(out, "{}({})", bold(&p.name), args)?;
        let desc = first_line(p.description.as_deref());
        if !desc.is_empty() {
            writeln!(out, "    {desc}")?;
        }
    }
    Ok(())
}

fn write_block(out: &mut dyn Write, block: &ContentBlock) -> io::Result<()> {
    match block {
        ContentBlock::Text(t) => writeln!(out, "{}", t.text),
        ContentBlock::Image(i) => writeln!(
            out,
            "{}",
            dim(&format!(
                "[image {}, {} base64 chars]",
                i.mime_type,
                i.data.len()
            ))
        ),
        ContentBlock::Audio(a) => writeln!(
            out,
            "{}",
            dim(&format!(
                "[audio {}, {} base64 chars]",
                a.mime_type,
                a.data.len()
            ))
        ),
        ContentBlock::ResourceLink(r) => writeln!(out, "{}", dim(&format!("[link {}]", r.uri))),
        ContentBlock::Resource(e) => write_contents(out, std::slice::from_ref(&e.resource)),
        _ => writeln!(
            out,
            "{}",
            dim("[content of a kind this version cannot show]")
        ),
    }
}

pub fn write_call_result(out: &mut dyn Write, result: &CallToolResult) -> io::Result<()> {
    for block in &result.content {
        write_block(out, block)?;
    }
    if result.content.is_empty()
        && let Some(s) = &result.structured_content
    {
        write_json(out, s)?;
    }
    Ok(())
}

pub fn write_contents(out: &mut dyn Write, contents: &[ResourceContents]) -> io::Result<()> {
    for c in contents {
        match c {
            ResourceContents::Text(t) => writeln!(out, "{}", t.text)?,
            ResourceContents::Blob(b) => writeln!(
                out,
                "{}",
                dim(&format!(
                    "[{} {}, {} base64 chars]",
                    b.uri,
                    b.mime_type.as_deref().unwrap_or("binary"),
                    b.blob.len()
                ))
            )?,
            _ => {}
        }
    }
    Ok(())
}

pub fn write_prompt_result(out: &mut dyn Write, result: &GetPromptResult) -> io::Result<()> {
    if let Some(d) = &result.description {
        writeln!(out, "{}", dim(d))?;
    }
    for m in &result.messages {
        writeln!(out, "{}:", bold(&format!("{:?}", m.role).to_lowercase()))?;
        write_block(out, &m.content)?;
    }
    Ok(())
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
