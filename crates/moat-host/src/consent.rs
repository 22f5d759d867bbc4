//! Consent: asking a person whether a call that policy marked `ask` may go ahead.
//!
//! The channel, in order of preference (`[consent] mode = "auto"`): the client, through a
//! form-mode elicitation, when it declared it supports one; else another [`Channel`] the
//! gateway was given (the web console, when a browser has it open); else the controlling terminal,
//! when the host has one (`/dev/tty`: a desktop app that launched the host over stdio
//! usually has none) and is in its foreground process group; else nobody, and the call is
//! refused with a message saying why and how to allow it. `mode = "deny"` asks nobody.
//!
//! A process in the background of its terminal (`moat call … -- moat gateway` puts the
//! gateway in a process group of its own) would be stopped by the kernel (`SIGTTIN`,
//! `SIGTTOU`) the moment it read or wrote there, and the call would never end: such a
//! terminal is not a channel. The question is also read and written with both signals
//! blocked, so a gateway moved to the background while it asks gets an error, not a stop.
//!
//! An answer may last: once, for this session, or always (stored, so it
//! survives restarts; `moat pins reset` does not touch it, removing the rule does not
//! either — the decision names the exposed tool).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use moat::RequestContext;
use moat_protocol::types::{ElicitAction, ElicitRequestFormParams, ElicitValue, RequestedSchema};
use rusqlite::Connection;

use crate::config::ConsentMode;
use crate::error::HostError;

/// How long an answer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Choice {
    /// This call only.
    Once,
    /// Every call to this tool from this client session.
    Session,
    /// Every call to this tool, from now on (stored).
    Always,
    /// Refused.
    Deny,
}

impl Choice {
    const ALL: [(Choice, &'static str); 4] = [
        (Choice::Once, "approve once"),
        (Choice::Session, "approve for this session"),
        (Choice::Always, "always approve"),
        (Choice::Deny, "deny"),
    ];

    fn label(self) -> &'static str {
        Choice::ALL
            .iter()
            .find(|(c, _)| *c == self)
            .map(|(_, l)| *l)
            .unwrap_or("deny")
    }

    fn from_label(label: &str) -> Choice {
        Choice::ALL
            .iter()
            .find(|(_, l)| *l == label)
            .map(|(c, _)| *c)
            .unwrap_or(Choice::Deny)
    }

    /// Whether the call may go ahead.
    pub fn approves(self) -> bool {
        self != Choice::Deny
    }
}

/// What a person is asked.
#[derive(Debug, Clone)]
pub struct Question<'a> {
    /// The tool as the client knows it (`server__tool`).
    pub tool: &'a str,
    /// Why consent is needed: the rule, or the untrusted content seen earlier.
    pub reason: &'a str,
    /// The call's arguments, shown (shortened) so the person knows what they approve.
    pub arguments: &'a serde_json::Value,
}

/// The answer, and how it was obtained (for the audit trail).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Answer {
    /// What was chosen.
    pub choice: Choice,
    /// E.g. "approved once via elicitation", "no consent channel".
    pub how: String,
    /// Set when nobody was asked: why.
    pub unasked: Option<Unasked>,
}

impl Answer {
    fn asked(choice: Choice, how: impl Into<String>) -> Answer {
        Answer {
            choice,
            how: how.into(),
            unasked: None,
        }
    }
}

/// Why nobody was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unasked {
    /// `[consent] mode = "deny"`: the configuration says to ask nobody.
    ModeDeny,
    /// No channel the mode allows was there; the text says which were missing and why.
    NoChannel(String),
}

impl Unasked {
    /// One sentence for a refusal message.
    pub fn explain(&self) -> String {
        match self {
            Unasked::ModeDeny => "The gateway's configuration has [consent] mode = \"deny\", \
                                  which refuses every call that policy says to ask about"
                .to_owned(),
            Unasked::NoChannel(why) => format!("Nobody could be asked: {why}"),
        }
    }
}

/// A place besides the client and the terminal where a person can answer: the web
/// console (`moat gateway --console`). It sits after elicitation and before the terminal.
pub trait Channel: Send + Sync {
    /// Whether someone is there to answer now (a channel nobody watches would only make
    /// the call wait out the timeout).
    fn present(&self) -> bool;

    /// Puts the question to the person and waits for the choice; `None` when the channel
    /// went away before an answer came. Dropping the future withdraws the question.
    fn ask<'a>(
        &'a self,
        ctx: &'a RequestContext,
        question: &'a Question<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Choice>> + Send + 'a>>;

    /// [`Channel::ask`], with who answered when the channel knows (a user signed in to the
    /// web console through the identity provider): the audit trail names them.
    #[allow(clippy::type_complexity)]
    fn ask_who<'a>(
        &'a self,
        ctx: &'a RequestContext,
        question: &'a Question<'a>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Option<(Choice, Option<String>)>> + Send + 'a>,
    > {
        Box::pin(async move { self.ask(ctx, question).await.map(|c| (c, None)) })
    }

    /// What the answer is said to come through, in the audit trail ("in the web console").
    fn name(&self) -> &'static str;
}

/// Whether the host can ask on its terminal, and if not, why not.
#[derive(Debug)]
enum Terminal {
    /// The controlling terminal, with this process in its foreground.
    Usable(std::fs::File),
    /// No controlling terminal.
    Absent,
    /// A controlling terminal whose foreground is another process group.
    Background,
}

/// Asks through the best channel `mode` allows; `channel` is the web console, when the
/// gateway has one.
pub async fn ask(
    ctx: &RequestContext,
    mode: ConsentMode,
    timeout: Duration,
    question: &Question<'_>,
    channel: Option<&dyn Channel>,
) -> Answer {
    if mode == ConsentMode::Deny {
        return Answer {
            choice: Choice::Deny,
            how: "[consent] mode = deny".into(),
            unasked: Some(Unasked::ModeDeny),
        };
    }
    let elicit_ok = client_can_elicit(ctx);
    let use_elicit = matches!(mode, ConsentMode::Auto | ConsentMode::Elicit) && elicit_ok;
    if use_elicit {
        return match tokio::time::timeout(timeout, by_elicitation(ctx, question)).await {
            Ok(answer) => answer,
            Err(_) => Answer::asked(
                Choice::Deny,
                format!("no answer via elicitation within {}s", timeout.as_secs()),
            ),
        };
    }
    if mode == ConsentMode::Auto
        && let Some(channel) = channel.filter(|c| c.present())
    {
        let name = channel.name();
        match tokio::time::timeout(timeout, channel.ask_who(ctx, question)).await {
            Ok(Some((choice, who))) => {
                let by = who.map_or(String::new(), |w| format!(" by {w}"));
                return Answer::asked(choice, format!("{} {name}{by}", past_tense(choice)));
            }
            // Closed before answering: the next channel may still be there.
            Ok(None) => {}
            Err(_) => {
                return Answer::asked(
                    Choice::Deny,
                    format!("no answer {name} within {}s", timeout.as_secs()),
                );
            }
        }
    }
    let use_terminal = matches!(mode, ConsentMode::Auto | ConsentMode::Terminal);
    let terminal = if use_terminal {
        terminal()
    } else {
        Terminal::Absent
    };
    if let Terminal::Usable(tty) = terminal {
        let text = terminal_text(question);
        let task = tokio::task::spawn_blocking(move || by_terminal(tty, &text));
        return match tokio::time::timeout(timeout, task).await {
            Ok(Ok(answer)) => answer,
            _ => Answer::asked(
                Choice::Deny,
                format!("no answer on the terminal within {}s", timeout.as_secs()),
            ),
        };
    }
    let client = "the client does not support elicitation";
    let tty = match terminal {
        Terminal::Background => {
            "the gateway's terminal is not a channel, because the gateway is not in its \
             foreground (it was started in the background, or by a program such as \
             `moat call … -- moat gateway` that runs it in a process group of its own)"
        }
        _ => "the gateway has no controlling terminal (as when a desktop app starts it)",
    };
    let why = match mode {
        ConsentMode::Elicit => format!("{client}, and [consent] mode = \"elicit\" asks only there"),
        ConsentMode::Terminal => format!("[consent] mode = \"terminal\", and {tty}"),
        _ if channel.is_some() => {
            format!("{client}, no browser has the gateway's web console open, and {tty}")
        }
        _ => format!("{client}, and {tty}"),
    };
    Answer {
        choice: Choice::Deny,
        how: "no consent channel".into(),
        unasked: Some(Unasked::NoChannel(why)),
    }
}

/// Whether the client declared form-mode elicitation (an empty `elicitation` object
/// means form mode).
fn client_can_elicit(ctx: &RequestContext) -> bool {
    ctx.client_capabilities()
        .and_then(|caps| caps.elicitation.as_ref())
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

async fn by_elicitation(ctx: &RequestContext, question: &Question<'_>) -> Answer {
    let labels: Vec<&str> = Choice::ALL.iter().map(|(c, _)| c.label()).collect();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "description": "Whether moat may run this tool call",
                "enum": labels,
                "default": "deny",
            }
        },
        "required": ["decision"],
    });
    let schema: RequestedSchema = match serde_json::from_value(schema) {
        Ok(s) => s,
        Err(e) => {
            return Answer::asked(
                Choice::Deny,
                format!("could not build the consent form: {e}"),
            );
        }
    };
    let message = format!(
        "moat: allow the tool call {}?\nWhy you are asked: {}\nArguments: {}",
        question.tool,
        question.reason,
        shorten(&question.arguments.to_string(), 600)
    );
    let params = ElicitRequestFormParams::new(message, schema);
    match ctx.elicit(params.into()).await {
        Ok(result) => match result.action {
            ElicitAction::Accept => {
                let choice = match result.content.as_ref().and_then(|c| c.get("decision")) {
                    Some(ElicitValue::String(s)) => Choice::from_label(s),
                    _ => Choice::Deny,
                };
                Answer::asked(choice, format!("{} via elicitation", past_tense(choice)))
            }
            ElicitAction::Decline => Answer::asked(Choice::Deny, "declined via elicitation"),
            _ => Answer::asked(Choice::Deny, "dismissed via elicitation"),
        },
        Err(e) => Answer::asked(Choice::Deny, format!("elicitation failed: {e}")),
    }
}

fn past_tense(choice: Choice) -> &'static str {
    match choice {
        Choice::Once => "approved once",
        Choice::Session => "approved for this session",
        Choice::Always => "approved always",
        Choice::Deny => "denied",
    }
}

/// The controlling terminal, if the host has one and is in its foreground. Never stdin:
/// on stdio it is the wire.
fn terminal() -> Terminal {
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return Terminal::Absent;
    };
    // SAFETY: plain queries on a descriptor this function owns and on the process itself.
    let (foreground, own) = unsafe { (libc::tcgetpgrp(tty.as_raw_fd()), libc::getpgrp()) };
    if foreground == -1 {
        return Terminal::Absent;
    }
    if foreground != own {
        return Terminal::Background;
    }
    Terminal::Usable(tty)
}

/// `SIGTTIN` and `SIGTTOU` blocked on this thread while it lives: a read from the
/// terminal by a background process then fails with `EIO` and a write goes through,
/// where either would otherwise stop the whole process.
struct JobControlBlocked {
    previous: libc::sigset_t,
}

impl JobControlBlocked {
    fn new() -> Option<JobControlBlocked> {
        // SAFETY: sigset_t is plain data, initialised by sigemptyset before use; the
        // mask is this thread's own and is restored on drop.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTTIN);
            libc::sigaddset(&mut set, libc::SIGTTOU);
            if libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut previous) != 0 {
                return None;
            }
            Some(JobControlBlocked { previous })
        }
    }
}

impl Drop for JobControlBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new` on the same thread.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.previous, std::ptr::null_mut());
        }
    }
}

fn terminal_text(question: &Question<'_>) -> String {
    format!(
        "\nmoat: allow the tool call {}?\n  why: {}\n  arguments: {}\n[o]nce, [s]ession, [a]lways, [N]o: ",
        question.tool,
        question.reason,
        shorten(&question.arguments.to_string(), 600)
    )
}

/// Only one terminal question at a time: two interleaved prompts would be unanswerable.
static TERMINAL: Mutex<()> = Mutex::new(());

fn by_terminal(tty: std::fs::File, text: &str) -> Answer {
    let _turn = TERMINAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(_blocked) = JobControlBlocked::new() else {
        return Answer::asked(Choice::Deny, "the terminal could not be used safely");
    };
    let mut out = &tty;
    if out
        .write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        return Answer::asked(Choice::Deny, "the terminal could not be written");
    }
    let mut line = String::new();
    if BufReader::new(&tty).read_line(&mut line).is_err() {
        return Answer::asked(Choice::Deny, "the terminal could not be read");
    }
    let choice = match line.trim().to_ascii_lowercase().as_str() {
        "o" | "once" | "y" | "yes" => Choice::Once,
        "s" | "session" => Choice::Session,
        "a" | "always" => Choice::Always,
        _ => Choice::Deny,
    };
    Answer::asked(choice, format!("{} on the terminal", past_tense(choice)))
}

fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} bytes)", &text[..cut], text.len())
}

/// Lasting ("always") decisions, in SQLite next to the pins.
pub struct Decisions {
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Decisions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Decisions")
    }
}

impl Decisions {
    /// Opens (creating) the store at `path`.
    pub fn open(path: &Path) -> Result<Decisions, HostError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| HostError::State {
                path: dir.to_path_buf(),
                detail: e.to_string(),
            })?;
        }
        let conn = Connection::open(path).map_err(|e| state_error(path, e))?;
        Decisions::init(conn).map_err(|e| state_error(path, e))
    }

    /// A store that lives as long as the value (tests, `--ephemeral`).
    pub fn in_memory() -> Result<Decisions, HostError> {
        let conn =
            Connection::open_in_memory().map_err(|e| state_error(Path::new(":memory:"), e))?;
        Decisions::init(conn).map_err(|e| state_error(Path::new(":memory:"), e))
    }

    fn init(conn: Connection) -> rusqlite::Result<Decisions> {
        conn.busy_timeout(Duration::from_secs(5))?;
        crate::sqlite::use_wal(&conn)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS consent_always (
                tool TEXT PRIMARY KEY,
                decided_at INTEGER NOT NULL
            );
            CREATE TABLE IF NOT EXISTS consent_always_user (
                user TEXT NOT NULL,
                tool TEXT NOT NULL,
                decided_at INTEGER NOT NULL,
                PRIMARY KEY (user, tool)
            )",
        )?;
        Ok(Decisions {
            conn: Mutex::new(conn),
        })
    }

    /// The connection (the shared store's copy reads and writes the tables directly).
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `user` approved `tool` for good: a user's "always" is theirs alone. `None`
    /// is the gateway's own user (stdio, or HTTP without OAuth): [`always_allowed`](Self::always_allowed).
    pub fn always_allowed_for(&self, user: Option<&str>, tool: &str) -> bool {
        let Some(user) = user else {
            return self.always_allowed(tool);
        };
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        conn.query_row(
            "SELECT 1 FROM consent_always_user WHERE user = ?1 AND tool = ?2",
            [user, tool],
            |_| Ok(()),
        )
        .is_ok()
    }

    /// Remember that `user` approved `tool` for good (`None`: the gateway's own user).
    pub fn allow_always_for(&self, user: Option<&str>, tool: &str) -> Result<(), HostError> {
        let Some(user) = user else {
            return self.allow_always(tool);
        };
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        conn.execute(
            "INSERT OR REPLACE INTO consent_always_user (user, tool, decided_at)
             VALUES (?1, ?2, ?3)",
            rusqlite::params![user, tool, unix_now()],
        )
        .map_err(|e| state_error(Path::new("consent_always_user"), e))?;
        Ok(())
    }

    /// Whether `tool` (an exposed name) was approved for good.
    pub fn always_allowed(&self, tool: &str) -> bool {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        conn.query_row(
            "SELECT 1 FROM consent_always WHERE tool = ?1",
            [tool],
            |_| Ok(()),
        )
        .is_ok()
    }

    /// Remember that `tool` is approved for good.
    pub fn allow_always(&self, tool: &str) -> Result<(), HostError> {
        let now = unix_now();
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        conn.execute(
            "INSERT OR REPLACE INTO consent_always (tool, decided_at) VALUES (?1, ?2)",
            rusqlite::params![tool, now],
        )
        .map_err(|e| state_error(Path::new("consent_always"), e))?;
        Ok(())
    }

    /// Forget lasting decisions, every user's: one tool's, or all. Returns how many were
    /// forgotten.
    pub fn forget(&self, tool: Option<&str>) -> Result<usize, HostError> {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let mut forgotten = 0;
        for table in ["consent_always", "consent_always_user"] {
            let n = match tool {
                Some(t) => conn.execute(&format!("DELETE FROM {table} WHERE tool = ?1"), [t]),
                None => conn.execute(&format!("DELETE FROM {table}"), []),
            };
            forgotten += n.map_err(|e| state_error(Path::new(table), e))?;
        }
        Ok(forgotten)
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn state_error(path: &Path, e: rusqlite::Error) -> HostError {
    HostError::State {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip_and_unknown_answers_deny() {
        for (choice, label) in Choice::ALL {
            assert_eq!(Choice::from_label(label), choice);
            assert_eq!(choice.label(), label);
        }
        assert_eq!(Choice::from_label("yes please"), Choice::Deny);
        assert!(!Choice::Deny.approves());
    }

    #[test]
    fn always_decisions_are_stored_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pins.db");
        let d = Decisions::open(&path).unwrap();
        assert!(!d.always_allowed("fs__write"));
        d.allow_always("fs__write").unwrap();
        let again = Decisions::open(&path).unwrap();
        assert!(again.always_allowed("fs__write"));
        assert_eq!(again.forget(None).unwrap(), 1);
        assert!(!d.always_allowed("fs__write"));
    }

    #[test]
    fn a_users_always_is_theirs_alone() {
        let d = Decisions::in_memory().unwrap();
        d.allow_always_for(Some("alice"), "db__drop").unwrap();
        assert!(d.always_allowed_for(Some("alice"), "db__drop"));
        assert!(!d.always_allowed_for(Some("bob"), "db__drop"));
        assert!(!d.always_allowed_for(None, "db__drop"));
        d.allow_always_for(None, "fs__write").unwrap();
        assert!(!d.always_allowed_for(Some("alice"), "fs__write"));
        assert_eq!(d.forget(Some("db__drop")).unwrap(), 1);
        assert!(!d.always_allowed_for(Some("alice"), "db__drop"));
    }

    #[test]
    fn long_arguments_are_shortened_on_a_boundary() {
        let s = shorten(&"é".repeat(400), 601);
        assert!(s.contains("bytes)"));
    }
}
