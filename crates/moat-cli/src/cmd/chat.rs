//! `moat chat`: the flags and the terminal around [`moat_chat::Session`] — one prompt with
//! `-p` (the answer on stdout, or every event as JSON lines with `--json`), else a prompt
//! loop. The conversation, the providers and the tool loop live in moat-chat.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use anyhow::{Context, anyhow};
use moat_chat::consent::{self, Prompt};
use moat_chat::markdown::Renderer;
use moat_chat::sanitize::sanitize;
use moat_chat::transcript::{self, Transcript};
use moat_chat::{ChatError, ChatSettings, Event, Overrides, Session};
use moat_host::{Config, HostOptions};
use serde_json::json;

use crate::Failure;
use crate::cli::ChatArgs;
use crate::output::dim;

pub mod demo;
mod interactive;

pub async fn run(args: ChatArgs) -> Result<(), Failure> {
    let config = load_config(&args)?;
    let overrides = Overrides {
        provider: args.provider.clone(),
        model: args.model.clone(),
        base_url: args.base_url.clone(),
    };
    let settings = ChatSettings::resolve(&config.chat, &overrides, &|k| std::env::var(k).ok())
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    let provider = settings
        .provider()
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    let state = moat_host::state::state_dir(config.state_dir.as_deref())
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    let dir = transcript::dir(&state);
    let (transcript, history) = match args.resume.as_deref() {
        Some(id) => {
            let id = Some(id).filter(|i| !i.is_empty());
            Transcript::resume(&dir, id).map_err(|e| Failure::Usage(anyhow!(e)))?
        }
        None => (
            Transcript::create(&dir, settings.kind.as_str(), &settings.model)
                .map_err(|e| Failure::Usage(anyhow!(e)))?,
            Vec::new(),
        ),
    };
    let interactive = args.prompt.is_none();
    let consent = consent_prompt(&args, interactive);
    let events = sink(args.json, interactive);
    if args.json {
        print_line(
            &json!({"type": "transcript", "id": transcript.id(), "path": transcript.path()}),
        );
    } else {
        eprintln!(
            "{}",
            dim(&format!(
                "moat chat: {} {} · transcript {} (moat chat --resume {})",
                settings.kind.as_str(),
                settings.model,
                transcript.id(),
                transcript.id()
            ))
        );
    }
    let mut loop_options = settings.loop_options();
    if !args.roots.is_empty() {
        loop_options.roots = args
            .roots
            .iter()
            .map(|r| {
                r.canonicalize()
                    .with_context(|| format!("--root {}", r.display()))
            })
            .collect::<Result<_, _>>()
            .map_err(Failure::Usage)?;
    }
    let helper = std::env::current_exe().context("finding the moat binary (the sandbox helper)")?;
    let mut session = Session::start(
        config,
        HostOptions::default().sandbox_helper(helper),
        provider,
        loop_options,
        consent,
        events,
    )
    .await
    .map_err(|e| Failure::Connection(anyhow!(e)))?;
    for (name, why) in session.host().down_reasons() {
        // Why may quote what the server printed.
        eprintln!(
            "moat chat: server {name} is not running: {}",
            sanitize(&why, false)
        );
    }
    session.restore(history);
    session
        .record(transcript)
        .map_err(|e| Failure::Connection(anyhow!(e)))?;
    let outcome = match &args.prompt {
        Some(prompt) => one_prompt(&mut session, prompt, args.json).await,
        None => interactive::run(&mut session, &state).await,
    };
    session.shutdown().await;
    outcome
}

/// The configuration named, else the one `moat gateway` would find, else none (a chat
/// without tools).
fn load_config(args: &ChatArgs) -> Result<Config, Failure> {
    match crate::cmd::gateway::config_path(args.config.as_deref()) {
        Ok(path) => Config::load(&path).map_err(|e| Failure::Usage(anyhow!(e))),
        Err(_) if args.config.is_none() => Ok(Config::default()),
        Err(e) => Err(Failure::Usage(e)),
    }
}

/// Who answers consent questions: the terminal when there is one; with `-p` and no terminal,
/// stdin lines when asked for, else nobody (refused, with a message saying how to allow).
fn consent_prompt(args: &ChatArgs, interactive: bool) -> Arc<dyn Prompt> {
    let from_stdin =
        args.consent_stdin || std::env::var("MOAT_CHAT_CONSENT").is_ok_and(|v| v == "stdin");
    if !interactive && from_stdin {
        return Arc::new(consent::Lines::new(std::io::BufReader::new(
            std::io::stdin(),
        )));
    }
    if std::io::stdin().is_terminal() && consent::Terminal::available() {
        return Arc::new(consent::Terminal);
    }
    Arc::new(consent::Refuse::default())
}

/// Where events go: JSON lines on stdout; else text streamed to stdout (interactive only,
/// its Markdown rendered when stdout is a terminal) and tool calls, decisions and retries on
/// stderr. What the model or a server wrote is [`sanitize`]d in every note, so it cannot
/// drive the terminal (the answer's text is, by the renderer, on a terminal).
fn sink(json: bool, interactive: bool) -> moat_chat::event::EventSink {
    // Whether this turn's text was streamed already (a refusal then only adds its marker).
    let streamed = std::sync::atomic::AtomicBool::new(false);
    let markdown = std::sync::Mutex::new(renderer());
    // Prints what the renderer gives for `delta`, or (with `None`) the line it holds: that
    // goes out before anything else is printed, and the next answer starts fresh.
    let render = move |delta: Option<&str>| {
        let Ok(mut m) = markdown.lock() else {
            return;
        };
        let out = match delta {
            Some(d) => m.push(d),
            None => m.finish(),
        };
        if !out.is_empty() {
            print!("{out}");
            let _ = std::io::stdout().flush();
        }
    };
    Arc::new(move |event: &Event| {
        use std::sync::atomic::Ordering::Relaxed;
        if json {
            if let Ok(value) = serde_json::to_value(event) {
                print_line(&value);
            }
            return;
        }
        if interactive && !matches!(event, Event::Text { .. }) {
            render(None);
        }
        match event {
            Event::Text { delta } if interactive => {
                streamed.store(true, Relaxed);
                render(Some(delta));
            }
            Event::Refusal { text } => {
                let marker = refusal_marker();
                if !interactive {
                    // -p prints the refusal's text on stdout as the answer; the marker goes
                    // where the user looks, beside the other notes.
                    eprintln!("{marker}");
                } else if streamed.load(Relaxed) || text.is_empty() {
                    println!("\n{marker}");
                } else {
                    println!("{marker} {}", sanitize(text, true));
                }
                streamed.store(false, Relaxed);
            }
            Event::Answer { .. } | Event::Error { .. } | Event::Cancelled => {
                streamed.store(false, Relaxed)
            }
            Event::ToolCall {
                name, arguments, ..
            } => {
                // JSON escapes C0 controls but not C1 (U+009B is a CSI) nor bidi controls.
                let args = arguments.to_string();
                let short: String = sanitize(&args, false).chars().take(120).collect();
                eprintln!("{}", dim(&format!("→ {} {short}", sanitize(name, false))));
            }
            Event::ToolResult {
                name, decision, ms, ..
            } => {
                eprintln!(
                    "{}",
                    dim(&format!(
                        "  {}: {} ({ms:.0} ms)",
                        sanitize(name, false),
                        sanitize(decision, false)
                    ))
                );
            }
            Event::Sampled { text } => {
                let short: String = sanitize(text, false).chars().take(120).collect();
                eprintln!(
                    "{}",
                    dim(&format!("  a server's sampling request, answered: {short}"))
                );
            }
            Event::Trimmed {
                results,
                input_tokens,
            } => eprintln!(
                "{}",
                dim(&format!(
                    "  ({input_tokens} input tokens: {results} older tool results cut to keep within the context budget)"
                ))
            ),
            Event::Consent { choice, .. } => eprintln!(
                "{}",
                dim(&format!("  consent: {}", sanitize(choice, false)))
            ),
            Event::UrlElicitation { choice, url, .. } => {
                // The session reports the parsed address; a refused one is the server's own.
                let url = sanitize(url, false);
                let note = match choice.as_str() {
                    "opened" => format!(
                        "  opened {url} in your browser; the call waits for the server (Ctrl-C stops it)"
                    ),
                    "accepted" => format!(
                        "  no browser could be started: open {url} yourself; the call waits for the server (Ctrl-C stops it)"
                    ),
                    other => format!("  link {other}"),
                };
                eprintln!("{}", dim(&note));
            }
            Event::ElicitationComplete { .. } => {
                eprintln!("{}", dim("  the server says the page is done"))
            }
            Event::Retry {
                attempt,
                status,
                wait_ms,
            } => eprintln!(
                "{}",
                dim(&format!(
                    "  the provider answered {status}; retry {attempt} in {wait_ms} ms"
                ))
            ),
            _ => {}
        }
    })
}

/// Markdown styled for a terminal; as written but sanitized for a terminal without colour
/// (NO_COLOR); as it came for anything else (a pipe, a file).
fn renderer() -> Renderer {
    if crate::output::colour() {
        Renderer::styled()
    } else if std::io::stdout().is_terminal() {
        Renderer::unstyled()
    } else {
        Renderer::plain()
    }
}

/// How a refusal is marked: on a terminal in reverse video, so it is not read as an answer.
fn refusal_marker() -> String {
    let text =
        "[refused] the model declined to answer (the prompt is left out of the conversation)";
    if crate::output::colour() {
        format!("\x1b[1;7;33m[refused]\x1b[0m{}", &text["[refused]".len()..])
    } else {
        text.to_owned()
    }
}

fn print_line(value: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

async fn one_prompt(session: &mut Session, prompt: &str, json: bool) -> Result<(), Failure> {
    let prompt = moat_chat::attach::resources(session.client(), prompt)
        .await
        .map_err(failure)?;
    match session.send(&prompt).await {
        Ok(answer) => {
            if !json {
                let mut markdown = renderer();
                let mut out = markdown.push(&answer);
                out.push_str(&markdown.finish());
                println!("{out}");
            }
            Ok(())
        }
        Err(e) => Err(failure(e)),
    }
}

fn failure(e: ChatError) -> Failure {
    match e {
        ChatError::Settings(_) | ChatError::Resume(_) => Failure::Usage(anyhow!(e)),
        other => Failure::Connection(anyhow!(other)),
    }
}
