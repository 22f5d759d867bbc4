//! `moat chat` without `-p`: a prompt with line editing and a history file (rustyline), a
//! few slash commands, and Ctrl-C that stops the running turn — the model's stream or the
//! tool call, which the server is told of (`notifications/cancelled`) — and keeps the
//! session.

use moat_chat::sanitize::sanitize;
use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, anyhow};
use moat_chat::Session;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

use crate::Failure;
use crate::output::dim;

const HELP: &str = "type a prompt (@URI attaches a resource); /tools, /servers, /prompt NAME [k=v…], \
/audit, /save FILE, /model NAME, /clear, /exit (Ctrl-C stops a turn, Ctrl-D leaves)";

pub async fn run(session: &mut Session, state: &Path) -> Result<(), Failure> {
    let history = moat_chat::transcript::dir(state).join("history.txt");
    let mut editor = DefaultEditor::new().context("opening the terminal for line editing")?;
    // A first run has no history yet.
    let _ = editor.load_history(&history);
    // From here on Ctrl-C is ours: it stops a turn instead of ending the process.
    let mut interrupts = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("listening for Ctrl-C")?;
    eprintln!("{}", dim(HELP));
    loop {
        let (back, line) = tokio::task::spawn_blocking(move || {
            let line = editor.readline("> ");
            (editor, line)
        })
        .await
        .context("reading the prompt")?;
        editor = back;
        let line = match line {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                eprintln!("{}", dim("(Ctrl-D or /exit to leave)"));
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(Failure::Connection(anyhow!("reading the prompt: {e}"))),
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(line);
        let (command, rest) = line
            .split_once(' ')
            .map_or((line, ""), |(a, b)| (a, b.trim()));
        match command {
            "/exit" | "/quit" => break,
            "/help" => eprintln!("{}", dim(HELP)),
            "/clear" => {
                session.clear();
                eprintln!(
                    "{}",
                    dim("(the conversation is cleared; the transcript keeps it)")
                );
            }
            "/model" if !rest.is_empty() => {
                session.set_model(rest);
                eprintln!("{}", dim(&format!("(model: {rest})")));
            }
            "/tools" => match session.refresh_tools().await {
                Ok(()) => {
                    for tool in session.tools() {
                        // A server's words: nothing in them may drive the terminal.
                        let first = tool.description.lines().next().unwrap_or_default();
                        println!(
                            "{}  {}",
                            sanitize(&tool.name, false),
                            dim(&sanitize(first, false))
                        );
                    }
                }
                Err(e) => eprintln!("error: {e}"),
            },
            "/servers" => servers(session),
            "/audit" => audit(session),
            "/save" => save(session, rest),
            "/prompt" if !rest.is_empty() => {
                let mut words = rest.split_whitespace();
                let name = words.next().unwrap_or_default();
                let args: Vec<&str> = words.collect();
                match moat_chat::attach::prompt(session.client(), name, &args).await {
                    Ok(text) => {
                        eprintln!(
                            "{}",
                            dim(&format!("(prompt {name}: {} characters)", text.len()))
                        );
                        turn(session, &mut interrupts, &text).await;
                    }
                    Err(e) => eprintln!("error: {e}"),
                }
            }
            c if c.starts_with('/') => eprintln!("unknown command {c} ({HELP})"),
            _ => match moat_chat::attach::resources(session.client(), line).await {
                Ok(text) => turn(session, &mut interrupts, &text).await,
                Err(e) => eprintln!("error: {e}"),
            },
        }
    }
    if let Some(dir) = history.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = editor.save_history(&history);
    Ok(())
}

/// One prompt; Ctrl-C stops it and mends the conversation.
async fn turn(session: &mut Session, interrupts: &mut tokio::signal::unix::Signal, text: &str) {
    tokio::select! {
        outcome = session.send(text) => match outcome {
            Ok(_) => println!(),
            Err(e) => eprintln!("\nerror: {e}"),
        },
        _ = interrupts.recv() => {
            session.cancelled();
            eprintln!("\n{}", dim("(cancelled)"));
        }
    }
}

/// The last calls of the audit trail.
fn audit(session: &Session) {
    let Some(audit) = session.host().audit() else {
        eprintln!("(the audit trail is off)");
        return;
    };
    let query = moat_host::audit::AuditQuery {
        limit: Some(20),
        ..Default::default()
    };
    match audit.flush().and_then(|()| audit.query(&query)) {
        Ok(records) => print!(
            "{}",
            moat_host::audit::format_table(&records, crate::output::colour())
        ),
        Err(e) => eprintln!("error: {e}"),
    }
}

/// The conversation so far, as JSON lines (one turn each), to `file`.
fn save(session: &Session, file: &str) {
    if file.is_empty() {
        eprintln!(
            "(/save FILE: the conversation as JSON lines; it is also kept in the transcript)"
        );
        return;
    }
    let mut text = String::new();
    for turn in session.turns() {
        if let Ok(line) = serde_json::to_string(turn) {
            text.push_str(&line);
            text.push('\n');
        }
    }
    match std::fs::write(file, text) {
        Ok(()) => eprintln!(
            "{}",
            dim(&format!(
                "(saved {} turns to {file})",
                session.turns().len()
            ))
        ),
        Err(e) => eprintln!("error: {file}: {e}"),
    }
}

fn servers(session: &Session) {
    let host = session.host();
    let down = host.down_reasons();
    let running: BTreeSet<String> = host
        .listed_tools()
        .iter()
        .filter_map(|t| t.split_once("__").map(|(s, _)| s.to_owned()))
        .collect();
    for name in running {
        println!("{name}: running");
    }
    for (name, why) in down {
        println!("{name}: not running ({})", sanitize(&why, false));
    }
}
