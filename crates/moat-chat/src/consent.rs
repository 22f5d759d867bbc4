//! Asking a person whether a tool call may run. The gateway puts the question as the same
//! elicitation form every MCP client sees (a `decision` among `approve once`,
//! `approve for this session`, `always approve` and `deny`); a [`Prompt`] answers it — on
//! the terminal, from lines of a script, or by refusing.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Mutex;

use moat::types::ElicitValue;

pub use futures_util::future::BoxFuture;

/// One question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// What the gateway asks (tool, why, arguments).
    pub message: String,
    /// The choices, as the form names them; the last is `deny`.
    pub choices: Vec<String>,
}

/// Something that answers consent questions.
pub trait Prompt: Send + Sync {
    /// One of `question.choices`, or `None` to decline.
    fn ask<'a>(&'a self, question: &'a Question) -> BoxFuture<'a, Option<String>>;

    /// Fills a server's elicitation form (`schema` is its requested schema); `None`
    /// declines it. By default every form is declined.
    fn form<'a>(
        &'a self,
        message: &'a str,
        schema: &'a serde_json::Value,
    ) -> BoxFuture<'a, Option<BTreeMap<String, ElicitValue>>> {
        let _ = (message, schema);
        Box::pin(async { None })
    }

    /// Asks whether to open a server's link (URL-mode elicitation; `message` is the server's,
    /// see [`crate::link::question`]). `Some(true)`: open it; `Some(false)`: declined;
    /// `None`: no answer (the request is cancelled). By default every link is declined.
    fn link<'a>(&'a self, message: &'a str, url: &'a str) -> BoxFuture<'a, Option<bool>> {
        let _ = (message, url);
        Box::pin(async { Some(false) })
    }
}

/// Maps a typed answer to a choice: the first letter or the whole label of one
/// (`o`/`once`, `s`/`session`, `a`/`always`, anything else is deny).
pub fn parse_answer(line: &str, choices: &[String]) -> Option<String> {
    let answer = line.trim().to_ascii_lowercase();
    if answer.is_empty() {
        return None;
    }
    choices
        .iter()
        .find(|c| {
            let k = keyword(c);
            answer == c.as_str() || answer == k || (answer.len() == 1 && k.starts_with(&answer))
        })
        .cloned()
}

/// The word a choice is typed as.
fn keyword(choice: &str) -> &str {
    match choice {
        "approve once" => "once",
        "approve for this session" => "session",
        "always approve" => "always",
        other => other,
    }
}

/// The question as the terminal shows it. Its message names a tool and its arguments (the
/// model's) and may quote a server, so it is [`crate::sanitize`]d.
fn render(question: &Question) -> String {
    format!(
        "\n{}\n[o]nce, [s]ession, [a]lways, [N]o: ",
        crate::sanitize::sanitize(&question.message, true)
    )
}

/// Asks on the controlling terminal (`/dev/tty`), which works even when stdin and stdout are
/// redirected.
#[derive(Debug, Default)]
pub struct Terminal;

impl Terminal {
    /// Whether there is a terminal to ask on.
    pub fn available() -> bool {
        std::fs::File::open("/dev/tty").is_ok() || std::io::stdin().is_terminal()
    }
}

impl Prompt for Terminal {
    fn ask<'a>(&'a self, question: &'a Question) -> BoxFuture<'a, Option<String>> {
        let text = render(question);
        let choices = question.choices.clone();
        Box::pin(async move {
            let line = tokio::task::spawn_blocking(move || -> std::io::Result<String> {
                let mut tty = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/tty")?;
                tty.write_all(text.as_bytes())?;
                tty.flush()?;
                let mut line = String::new();
                std::io::BufReader::new(tty).read_line(&mut line)?;
                Ok(line)
            })
            .await
            .ok()?
            .ok()?;
            parse_answer(&line, &choices)
        })
    }

    fn form<'a>(
        &'a self,
        message: &'a str,
        schema: &'a serde_json::Value,
    ) -> BoxFuture<'a, Option<BTreeMap<String, ElicitValue>>> {
        let (message, schema) = (message.to_owned(), schema.clone());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let tty = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/tty")
                    .ok()?;
                let mut writer = tty.try_clone().ok()?;
                let mut reader = std::io::BufReader::new(tty);
                crate::form::fill(&message, &schema, &mut |prompt| {
                    writer.write_all(prompt.as_bytes()).ok()?;
                    writer.flush().ok()?;
                    let mut line = String::new();
                    (reader.read_line(&mut line).ok()? > 0).then_some(line)
                })
            })
            .await
            .ok()?
        })
    }

    fn link<'a>(&'a self, message: &'a str, url: &'a str) -> BoxFuture<'a, Option<bool>> {
        let text = crate::link::question(message, url);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || -> Option<bool> {
                let mut tty = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/tty")
                    .ok()?;
                tty.write_all(text.as_bytes()).ok()?;
                tty.flush().ok()?;
                let mut line = String::new();
                let n = std::io::BufReader::new(tty).read_line(&mut line).ok()?;
                (n > 0).then(|| crate::link::parse_answer(&line))
            })
            .await
            .ok()?
        })
    }
}

/// Reads one answer line per question from a reader (stdin, for scripts: `moat chat -p …
/// --consent-stdin`), writing the question to stderr.
pub struct Lines<R> {
    reader: Mutex<R>,
}

impl<R: BufRead + Send> Lines<R> {
    /// Answers read from `reader`.
    pub fn new(reader: R) -> Self {
        Lines {
            reader: Mutex::new(reader),
        }
    }
}

impl<R: BufRead + Send + 'static> Prompt for Lines<R> {
    fn ask<'a>(&'a self, question: &'a Question) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            eprint!("{}", render(question));
            let mut line = String::new();
            // One short blocking read: questions come one at a time (the host serialises
            // them per call) and the answer is already in the pipe or never comes.
            let read = match self.reader.lock() {
                Ok(mut r) => r.read_line(&mut line).ok(),
                Err(_) => None,
            };
            eprintln!("{}", line.trim());
            read.filter(|n| *n > 0)?;
            parse_answer(&line, &question.choices)
        })
    }

    fn form<'a>(
        &'a self,
        message: &'a str,
        schema: &'a serde_json::Value,
    ) -> BoxFuture<'a, Option<BTreeMap<String, ElicitValue>>> {
        Box::pin(async move {
            let mut reader = self.reader.lock().ok()?;
            crate::form::fill(message, schema, &mut |prompt| {
                eprint!("{prompt}");
                let mut line = String::new();
                let n = reader.read_line(&mut line).ok()?;
                eprintln!("{}", line.trim());
                (n > 0).then_some(line)
            })
        })
    }

    fn link<'a>(&'a self, message: &'a str, url: &'a str) -> BoxFuture<'a, Option<bool>> {
        Box::pin(async move {
            eprint!("{}", crate::link::question(message, url));
            let mut line = String::new();
            let n = self.reader.lock().ok()?.read_line(&mut line).ok()?;
            eprintln!("{}", line.trim());
            (n > 0).then(|| crate::link::parse_answer(&line))
        })
    }
}

/// Refuses every question, saying once on stderr why and what to do.
#[derive(Debug, Default)]
pub struct Refuse {
    told: std::sync::atomic::AtomicBool,
    /// The sentence to print (default: about `--consent-stdin`).
    pub why: Option<String>,
}

impl Prompt for Refuse {
    fn ask<'a>(&'a self, question: &'a Question) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            if !self.told.swap(true, std::sync::atomic::Ordering::SeqCst) {
                let why = self.why.clone().unwrap_or_else(|| {
                    "moat chat: a tool call needs consent, but there is no terminal to ask on; \
                     it is denied. Pass --consent-stdin (or set MOAT_CHAT_CONSENT=stdin) to read \
                     answers from stdin, or allow the tool in [policy]."
                        .to_owned()
                });
                eprintln!("{why}");
            }
            tracing::info!(question = %question.message, "consent refused: no channel");
            question
                .choices
                .iter()
                .find(|c| c.as_str() == "deny")
                .cloned()
        })
    }

    fn link<'a>(&'a self, message: &'a str, url: &'a str) -> BoxFuture<'a, Option<bool>> {
        Box::pin(async move {
            // The address is still worth having: the person can open it and call again.
            eprintln!(
                "moat chat: a server asks you to open a link, and there is no terminal to ask on, \
                 so it is not opened: {}",
                crate::link::question(message, url)
                    .trim_end_matches("Open it in your browser? [y/N]: ")
                    .trim()
            );
            Some(false)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choices() -> Vec<String> {
        [
            "approve once",
            "approve for this session",
            "always approve",
            "deny",
        ]
        .map(String::from)
        .to_vec()
    }

    /// The question carries a tool's name and arguments (the model's) and a server's text.
    #[test]
    fn the_question_shown_has_no_escapes_or_bidi_controls() {
        let q = Question {
            message: "Allow \x1b[2Jrm\u{202E}fdp.exe\r on \u{9b}31mdisk?\nreally".into(),
            choices: choices(),
        };
        let shown = render(&q);
        assert!(
            shown.contains("Allow [2Jrmfdp.exe on 31mdisk?\nreally"),
            "{shown:?}"
        );
        assert!(!shown.chars().any(crate::sanitize::is_hidden), "{shown:?}");
    }

    #[test]
    fn answers_map_to_the_forms_choices() {
        let c = choices();
        assert_eq!(parse_answer("o\n", &c).as_deref(), Some("approve once"));
        assert_eq!(
            parse_answer("Session", &c).as_deref(),
            Some("approve for this session")
        );
        assert_eq!(parse_answer("a", &c).as_deref(), Some("always approve"));
        assert_eq!(parse_answer("n", &c), None);
        assert_eq!(parse_answer("deny", &c).as_deref(), Some("deny"));
        assert_eq!(parse_answer("", &c), None);
        assert_eq!(parse_answer("yes please", &c), None);
    }
}
