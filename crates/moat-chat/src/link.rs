//! URL-mode elicitation (MCP 2025-11-25): a server — or the gateway brokering a downstream
//! server's OAuth — asks the user to open a link. The link is shown in full with the host
//! it leads to and the server's message, the person is asked, and only then is it opened in
//! the browser; nothing is opened without a yes. The server says when the page is done with
//! `notifications/elicitation/complete`, which the session reports as an event.

use reqwest::Url;

use crate::sanitize::sanitize;

/// A link as it is put to the person: the server's message, the address, and its host
/// (what the person is really trusting). Both come from a server. The address is shown as
/// parsed — the form [`open`] gives the browser, with newlines gone and anything else
/// percent-encoded, the host in ASCII — so what is shown is what would be opened; the message
/// is [`sanitize`]d, so an escape sequence or a bidi override cannot disguise either.
pub fn question(message: &str, url: &str) -> String {
    let parsed = Url::parse(url).ok();
    let host = parsed
        .as_ref()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| "?".into());
    let shown = match &parsed {
        Some(u) => sanitize(u.as_str(), false).into_owned(),
        None => sanitize(url, false).into_owned(),
    };
    format!(
        "\n{}\n  {}\n  (a page at {})\nOpen it in your browser? [y/N]: ",
        sanitize(message, true),
        shown,
        sanitize(&host, false)
    )
}

/// Maps a typed answer: `y`/`yes` opens, anything else declines.
pub fn parse_answer(line: &str) -> bool {
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// The link parsed, if it may be asked about and opened (a web address with a host); else
/// why not.
pub fn check(url: &str) -> Result<Url, String> {
    match Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "https" | "http") && u.host_str().is_some() => Ok(u),
        Ok(u) => Err(format!("a {} link is not opened", u.scheme())),
        Err(e) => Err(format!("not a link ({e})")),
    }
}

/// Why a link may not be opened at all (`None`: it may be asked about).
pub fn refuse(url: &str) -> Option<String> {
    check(url).err()
}

/// Opens `url` in the browser: `$BROWSER` if set, else the desktop's opener. Only a parsed
/// address is opened, in its normalized form — the one [`question`] showed. `false`: no
/// browser could be started (the person has the address on screen).
pub fn open(url: &Url) -> bool {
    let opener = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| {
            if cfg!(target_os = "macos") {
                "open".into()
            } else {
                "xdg-open".into()
            }
        });
    let Some(mut command) = command(&opener, url) else {
        return false;
    };
    let program = command.get_program().to_string_lossy().into_owned();
    let spawned = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        Ok(mut child) => {
            // Reaped on a thread of its own: a browser may keep running.
            std::thread::spawn(move || child.wait());
            true
        }
        Err(e) => {
            tracing::info!(%program, error = %e, "could not start a browser");
            false
        }
    }
}

/// The opener's command for `url`: the address is one argument, never a shell word, and
/// it is the parsed form. `None`: the opener is empty.
fn command(opener: &str, url: &Url) -> Option<std::process::Command> {
    let mut words = opener.split_whitespace();
    let program = words.next()?;
    let mut command = std::process::Command::new(program);
    command.args(words).arg(url.as_str());
    Some(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_shows_the_address_and_its_host_without_escapes() {
        let q = question(
            "Sign in\x1b[2K",
            "https://auth.example.com/authorize?client_id=x",
        );
        assert!(q.contains("https://auth.example.com/authorize?client_id=x"));
        assert!(q.contains("(a page at auth.example.com)"));
        assert!(!q.contains('\x1b'));
        assert!(
            parse_answer("Y\n") && parse_answer("yes") && !parse_answer("") && !parse_answer("no")
        );
    }

    /// The address shown is the parsed one: a newline or a bidi override the server put in
    /// it cannot split it across lines or make it read as another address.
    #[test]
    fn the_address_shown_is_the_normalized_one() {
        let q = question(
            "Sign in\n\u{202E}please",
            "https://auth.example.com/a\nb\u{202E}c?x=\x1b[2J\r\nAllow? [y/N]",
        );
        assert!(
            q.contains("\n  https://auth.example.com/ab%E2%80%AEc?x=%1B[2JAllow?%20[y/N]\n"),
            "{q:?}"
        );
        assert!(q.contains("Sign in\nplease"), "{q:?}");
        assert!(
            !q.chars()
                .any(|c| crate::sanitize::is_hidden(c) || c == '\r'),
            "{q:?}"
        );
        // Not a link at all: still shown on one line, without escapes.
        let q = question("m", "not\na\x1b[2Jlink");
        assert!(q.contains("\n  not a[2Jlink\n"), "{q:?}");
    }

    /// What is launched is the parsed address (the one shown), not the server's string.
    #[test]
    fn the_browser_is_given_the_normalized_address() {
        let url = check("https://e.com/a\nb\u{202E} c").expect("a web link");
        let launch = command("firefox --new-tab", &url).expect("a command");
        assert_eq!(launch.get_program(), "firefox");
        let args: Vec<_> = launch.get_args().collect();
        assert_eq!(args, ["--new-tab", "https://e.com/ab%E2%80%AE%20c"]);
        assert!(command(" ", &url).is_none());
    }

    #[test]
    fn only_web_links_are_opened() {
        assert!(check("https://example.com/x").is_ok());
        assert_eq!(refuse("https://example.com/x"), None);
        assert!(refuse("file:///etc/passwd").is_some());
        assert!(refuse("javascript:alert(1)").is_some());
        assert!(refuse("not a url").is_some());
    }
}
