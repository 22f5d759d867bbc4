//! URL-mode elicitation (MCP 2025-11-25): a server — or the gateway brokering a downstream
//! server's OAuth — asks the user to open a link. The link is shown in full with the host
//! it leads to and the server's message, the person is asked, and only then is it opened in
//! the browser; nothing is opened without a yes. The server says when the page is done with
//! `notifications/elicitation/complete`, which the session reports as an event.

use reqwest::Url;

/// A link as it is put to the person: the server's message, the address, and its host
/// (what the person is really trusting), control characters dropped — both come from a
/// server, and an escape sequence could disguise the address.
pub fn question(message: &str, url: &str) -> String {
    let host = Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| "?".into());
    format!(
        "\n{}\n  {}\n  (a page at {})\nOpen it in your browser? [y/N]: ",
        clean(message),
        clean(url),
        clean(&host)
    )
}

/// Maps a typed answer: `y`/`yes` opens, anything else declines.
pub fn parse_answer(line: &str) -> bool {
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Why a link may not be opened at all (`None`: it may be asked about).
pub fn refuse(url: &str) -> Option<String> {
    match Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "https" | "http") && u.host_str().is_some() => None,
        Ok(u) => Some(format!("a {} link is not opened", u.scheme())),
        Err(e) => Some(format!("not a link ({e})")),
    }
}

/// Opens `url` in the browser: `$BROWSER` if set, else the desktop's opener. The address
/// is one argument, never a shell word. `false`: no browser could be started (the person
/// has the address on screen).
pub fn open(url: &str) -> bool {
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
    let mut words = opener.split_whitespace();
    let Some(program) = words.next() else {
        return false;
    };
    let spawned = std::process::Command::new(program)
        .args(words)
        .arg(url)
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

fn clean(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .collect()
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

    #[test]
    fn only_web_links_are_opened() {
        assert_eq!(refuse("https://example.com/x"), None);
        assert!(refuse("file:///etc/passwd").is_some());
        assert!(refuse("javascript:alert(1)").is_some());
        assert!(refuse("not a url").is_some());
    }
}
