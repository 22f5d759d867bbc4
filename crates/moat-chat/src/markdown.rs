//! The model's Markdown, rendered for a terminal as it streams: headings, emphasis, code
//! spans and fenced code blocks, lists, links, block quotes and rules, in ANSI styles.
//!
//! Text arrives in deltas, so rendering goes line by line: a partial line is held until its
//! newline (or the end of the answer), and the only state carried across lines is whether a
//! fenced code block is open. Each line's block syntax (heading, list item, quote, fence,
//! rule) is read here; its inline syntax (emphasis, code spans, links, escapes) is parsed by
//! pulldown-cmark, so the delicate rules of emphasis and code spans are CommonMark's. What
//! spans lines (emphasis broken across a line end, setext headings, tables) is shown as
//! written.
//!
//! Off a terminal (a pipe, `--json`) nothing is held or changed: [`Renderer::plain`] passes
//! every delta through as it came. On one — styled, or [`Renderer::unstyled`] with
//! `NO_COLOR` — what is printed passes through [`sanitize`]: control characters (but tab and
//! newline) and Unicode bidi controls are dropped, so an answer (which may carry a server's
//! injected text) cannot move the cursor, clear the screen, set the clipboard, retitle the
//! window or forge moat's own prompts. The styled renderer sanitizes what the Markdown parser
//! gives back (each text, code span, HTML and link address), not only the raw line: the
//! parser decodes character references, and `&#x1b;` is an ESC.

use pulldown_cmark::{Event as Md, Parser, Tag, TagEnd};

use crate::sanitize::sanitize;

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const NOT_BOLD: &str = "\x1b[22m";
const DIM: &str = "\x1b[2m";
const ITALIC: &str = "\x1b[3m";
const NOT_ITALIC: &str = "\x1b[23m";
const UNDERLINE: &str = "\x1b[4m";
const NOT_UNDERLINE: &str = "\x1b[24m";
const STRIKE: &str = "\x1b[9m";
const NOT_STRIKE: &str = "\x1b[29m";
const CODE: &str = "\x1b[36m";
const DEFAULT_COLOUR: &str = "\x1b[39m";
const HEADING: &str = "\x1b[1;35m";

/// Renders streamed Markdown, one line at a time.
#[derive(Debug, Clone, Default)]
pub struct Renderer {
    /// Whether to style (a terminal); `false` passes text through (sanitized if `safe`).
    style: bool,
    /// Whether an unstyled renderer's text is for a terminal, and so sanitized.
    safe: bool,
    /// The line so far, not yet ended.
    partial: String,
    /// The open fence (its character and length), inside a fenced code block.
    fence: Option<(char, usize)>,
}

impl Renderer {
    /// A renderer that styles with ANSI escapes (for a terminal).
    pub fn styled() -> Renderer {
        Renderer {
            style: true,
            ..Renderer::default()
        }
    }

    /// A renderer that passes text through unchanged (a pipe, a file).
    pub fn plain() -> Renderer {
        Renderer::default()
    }

    /// A renderer for a terminal without colour (`NO_COLOR`): the text as written, but
    /// what a terminal would act on (see [`crate::sanitize`]) dropped.
    pub fn unstyled() -> Renderer {
        Renderer {
            safe: true,
            ..Renderer::default()
        }
    }

    /// Takes a delta; returns what can be printed now (every line it completed).
    pub fn push(&mut self, delta: &str) -> String {
        if !self.style {
            // Character by character, so a delta's end cannot split what is dropped.
            return if self.safe {
                sanitize(delta, true).into_owned()
            } else {
                delta.to_owned()
            };
        }
        self.partial.push_str(delta);
        let mut out = String::new();
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            out.push_str(&self.line(line.trim_end_matches(['\n', '\r'])));
            out.push('\n');
        }
        out
    }

    /// Ends the answer: renders the held partial line (without a newline) and forgets the
    /// open code block, so the next answer starts fresh.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.partial);
        let out = if self.style && !rest.is_empty() {
            self.line(rest.trim_end_matches('\r'))
        } else {
            rest
        };
        self.fence = None;
        out
    }

    /// One whole line.
    fn line(&mut self, raw: &str) -> String {
        // The raw line's control characters go before its block syntax is read; what the
        // inline parser decodes is sanitized again below.
        let line = sanitize(raw, false);
        let indent = line.len() - line.trim_start().len();
        let body = line.trim_start();
        if let Some((c, n)) = self.fence {
            if indent < 4 && is_fence_close(body, c, n) {
                self.fence = None;
                return format!("{DIM}{line}{RESET}");
            }
            return format!("{CODE}{line}{RESET}");
        }
        if indent < 4
            && let Some(fence) = fence_open(body)
        {
            self.fence = Some(fence);
            return format!("{DIM}{line}{RESET}");
        }
        let pad = &line[..indent];
        if let Some((level, text)) = heading(body) {
            let style = if level == 1 {
                format!("{HEADING}{UNDERLINE}")
            } else {
                HEADING.to_owned()
            };
            // The heading's own style comes back after each inline style ends.
            return format!("{pad}{style}{}{RESET}", inline(text, &style));
        }
        if is_rule(body) {
            return format!("{pad}{DIM}{}{RESET}", "─".repeat(40));
        }
        if let Some(text) = body.strip_prefix('>') {
            let text = text.strip_prefix(' ').unwrap_or(text);
            // A quote's content is a line of its own: lists, headings, nested quotes.
            let inner = self.line(text);
            return format!("{pad}{DIM}│{RESET} {ITALIC}{inner}{RESET}");
        }
        if let Some((marker, text)) = list_item(body) {
            return format!("{pad}{BOLD}{marker}{RESET} {}", inline(text, ""));
        }
        format!("{pad}{}", inline(body, ""))
    }
}

/// A fence that opens a code block: three or more backticks or tildes (and an info string;
/// a backtick fence's may not contain a backtick).
fn fence_open(body: &str) -> Option<(char, usize)> {
    let c = body.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = body.chars().take_while(|x| *x == c).count();
    if n < 3 || (c == '`' && body[n..].contains('`')) {
        return None;
    }
    Some((c, n))
}

/// A fence that closes the open block: the same character, at least as many, nothing after.
fn is_fence_close(body: &str, c: char, n: usize) -> bool {
    let run = body.chars().take_while(|x| *x == c).count();
    run >= n && body[run..].trim().is_empty()
}

/// `# text` to `###### text`: the level and the text (closing `#`s dropped).
fn heading(body: &str) -> Option<(usize, &str)> {
    let level = body.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &body[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let text = rest.trim();
    let text = text.trim_end_matches('#');
    // A closing sequence needs a space before it; `# C#` keeps its `#`.
    let text = if text.len() < rest.trim().len() && !text.is_empty() && !text.ends_with(' ') {
        rest.trim()
    } else {
        text.trim_end()
    };
    Some((level, text))
}

/// `***`, `---`, `___` (three or more, spaces between allowed).
fn is_rule(body: &str) -> bool {
    let Some(c) = body.chars().next().filter(|c| matches!(c, '*' | '-' | '_')) else {
        return false;
    };
    body.chars().all(|x| x == c || x == ' ' || x == '\t')
        && body.chars().filter(|x| *x == c).count() >= 3
}

/// A list item: its marker as shown (`•` for bullets, `3.` for numbers) and its text.
fn list_item(body: &str) -> Option<(String, &str)> {
    for bullet in ['-', '*', '+'] {
        if let Some(text) = body.strip_prefix(bullet)
            && (text.starts_with([' ', '\t']) || text.is_empty())
        {
            let text = text.trim_start();
            // A task list item keeps its box, shown as one.
            if let Some(t) = text.strip_prefix("[ ] ") {
                return Some(("• ☐".into(), t));
            }
            if let Some(t) = text.strip_prefix("[x] ").or(text.strip_prefix("[X] ")) {
                return Some(("• ☑".into(), t));
            }
            return Some(("•".into(), text));
        }
    }
    let digits = body.chars().take_while(char::is_ascii_digit).count();
    if (1..=9).contains(&digits) {
        let rest = &body[digits..];
        for delim in ['.', ')'] {
            if let Some(text) = rest.strip_prefix(delim)
                && (text.starts_with([' ', '\t']) || text.is_empty())
            {
                return Some((format!("{}{delim}", &body[..digits]), text.trim_start()));
            }
        }
    }
    None
}

/// A line's inline Markdown in ANSI styles; `base` is the style to return to after each.
fn inline(text: &str, base: &str) -> String {
    // A leading marker the line syntax above did not take (`1986. A year`, `+1`) would be
    // read as a block by the parser; escaped, it stays text.
    let escaped;
    let source = match text.chars().next() {
        Some('#' | '>' | '-' | '+' | '*' | '=' | '|') | Some('0'..='9') => {
            escaped = if text.starts_with(|c: char| c.is_ascii_digit()) {
                escape_number(text)
            } else if text.starts_with('*') && !is_rule(text) {
                text.to_owned()
            } else {
                format!("\\{text}")
            };
            escaped.as_str()
        }
        _ => text,
    };
    let mut out = String::new();
    // Where each open link goes, shown after its text when the text is not the address.
    let mut links: Vec<(String, usize)> = Vec::new();
    let options = pulldown_cmark::Options::ENABLE_STRIKETHROUGH;
    for event in Parser::new_ext(source, options) {
        match event {
            // Every piece of the parser's output is sanitized: it decodes `&#x1b;`.
            Md::Text(t) => out.push_str(&sanitize(&t, false)),
            Md::Code(c) => {
                out.push_str(CODE);
                out.push_str(&sanitize(&c, false));
                out.push_str(DEFAULT_COLOUR);
            }
            Md::Html(h) | Md::InlineHtml(h) => out.push_str(&sanitize(&h, false)),
            Md::SoftBreak | Md::HardBreak => out.push(' '),
            Md::FootnoteReference(r) => out.push_str(&format!("[^{}]", sanitize(&r, false))),
            Md::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            Md::Start(Tag::Emphasis) => out.push_str(ITALIC),
            Md::End(TagEnd::Emphasis) => {
                out.push_str(NOT_ITALIC);
                out.push_str(base);
            }
            Md::Start(Tag::Strong) => out.push_str(BOLD),
            Md::End(TagEnd::Strong) => {
                out.push_str(NOT_BOLD);
                out.push_str(base);
            }
            Md::Start(Tag::Strikethrough) => out.push_str(STRIKE),
            Md::End(TagEnd::Strikethrough) => out.push_str(NOT_STRIKE),
            Md::Start(Tag::Link { dest_url, .. }) => {
                links.push((sanitize(&dest_url, false).into_owned(), out.len()));
                out.push_str(UNDERLINE);
            }
            Md::End(TagEnd::Link) => {
                out.push_str(NOT_UNDERLINE);
                if let Some((url, at)) = links.pop() {
                    let shown = &out[at + UNDERLINE.len()..out.len() - NOT_UNDERLINE.len()];
                    if !url.is_empty() && shown != url && shown.trim_start_matches("mailto:") != url
                    {
                        out.push_str(&format!(" {DIM}({url}){NOT_BOLD}{base}"));
                    }
                }
            }
            Md::Start(Tag::Image { dest_url, .. }) => {
                out.push_str(&format!("{DIM}[image: {NOT_BOLD}{base}"));
                links.push((sanitize(&dest_url, false).into_owned(), out.len()));
            }
            Md::End(TagEnd::Image) => {
                if let Some((url, _)) = links.pop() {
                    out.push_str(&format!("{DIM} ({url})]{NOT_BOLD}{base}"));
                }
            }
            _ => {}
        }
    }
    out
}

/// `1986. A year` → `1986\. A year`, so a number that starts a sentence is not a list.
fn escape_number(text: &str) -> String {
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    match text[digits..].chars().next() {
        Some('.' | ')') => format!("{}\\{}", &text[..digits], &text[digits..]),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text with escapes removed, and the escapes found.
    fn strip(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    fn render(text: &str) -> String {
        let mut r = Renderer::styled();
        let mut out = r.push(text);
        out.push_str(&r.finish());
        out
    }

    #[test]
    fn plain_passes_everything_through_at_once() {
        let mut r = Renderer::plain();
        assert_eq!(r.push("# Title\n**bo"), "# Title\n**bo");
        assert_eq!(r.push("ld**"), "ld**");
        assert_eq!(r.finish(), "");
    }

    #[test]
    fn inline_styles() {
        let out = render("Some **bold**, *italic*, `code` and ~~gone~~ text.");
        assert_eq!(strip(&out), "Some bold, italic, code and gone text.");
        assert!(out.contains(&format!("{BOLD}bold{NOT_BOLD}")), "{out:?}");
        assert!(
            out.contains(&format!("{ITALIC}italic{NOT_ITALIC}")),
            "{out:?}"
        );
        assert!(
            out.contains(&format!("{CODE}code{DEFAULT_COLOUR}")),
            "{out:?}"
        );
        assert!(
            out.contains(&format!("{STRIKE}gone{NOT_STRIKE}")),
            "{out:?}"
        );
        // CommonMark's rules, not a regex's: no emphasis inside code, none for a lone star.
        let out = render("`a *b* c` and 2 * 3 * 4");
        assert_eq!(strip(&out), "a *b* c and 2 * 3 * 4");
        assert!(!out.contains(ITALIC), "{out:?}");
    }

    #[test]
    fn headings_lists_quotes_rules_and_links() {
        let out = render(
            "# Title #\n## Sub *part*\n- one\n  * two\n3. three\n> quoted **x**\n---\n\
             See [the docs](https://example.com/d) or <https://example.com>.\n- [ ] todo\n",
        );
        let lines: Vec<String> = out.lines().map(strip).collect();
        assert_eq!(
            lines,
            [
                "Title",
                "Sub part",
                "• one",
                "  • two",
                "3. three",
                "│ quoted x",
                &"─".repeat(40),
                "See the docs (https://example.com/d) or https://example.com.",
                "• ☐ todo",
            ]
        );
        assert!(
            out.starts_with(&format!("{HEADING}{UNDERLINE}Title")),
            "{out:?}"
        );
        // After the italic part, the heading's style comes back.
        assert!(out.contains(&format!("{NOT_ITALIC}{HEADING}")), "{out:?}");
    }

    #[test]
    fn fenced_code_is_kept_verbatim_across_deltas() {
        let mut r = Renderer::styled();
        let mut out = String::new();
        for delta in [
            "Here:\n``",
            "`rust\nlet x = *p; // **not bold**\n",
            "# not a heading\n``",
            "`\nDone *now*.",
        ] {
            out.push_str(&r.push(delta));
        }
        assert!(!out.contains("Done"), "a partial line is held: {out:?}");
        out.push_str(&r.finish());
        let lines: Vec<String> = out.lines().map(strip).collect();
        assert_eq!(
            lines,
            [
                "Here:",
                "```rust",
                "let x = *p; // **not bold**",
                "# not a heading",
                "```",
                "Done now."
            ]
        );
        assert!(
            out.contains(&format!("{CODE}let x = *p; // **not bold**{RESET}")),
            "{out:?}"
        );
        // An unclosed block ends with the answer.
        assert_eq!(strip(&render("```\ncode")), "```\ncode");
        assert_eq!(strip(&r.push("# after\n")), "after\n");
    }

    #[test]
    fn text_that_only_looks_like_syntax_stays_text() {
        assert_eq!(strip(&render("1986. A fine year")), "1986. A fine year");
        assert_eq!(strip(&render("#hashtag and C#")), "#hashtag and C#");
        assert_eq!(strip(&render("+1 to that")), "+1 to that");
        assert_eq!(strip(&render("## C#")), "C#");
    }

    /// Whether `out` has a control character other than moat's own styles' ESC (each
    /// followed by `[`, digits and `;`, and `m`), a newline or a tab, or a bidi control.
    fn foreign_controls(out: &str) -> Vec<char> {
        let mut found = Vec::new();
        let mut rest = out;
        while let Some(c) = rest.chars().next() {
            if c == '\x1b' {
                let sgr = rest[1..].strip_prefix('[').and_then(|r| {
                    let n = r
                        .chars()
                        .take_while(|c| c.is_ascii_digit() || *c == ';')
                        .count();
                    r[n..].starts_with('m').then_some(n + 3)
                });
                match sgr {
                    Some(len) => {
                        rest = &rest[len..];
                        continue;
                    }
                    None => found.push(c),
                }
            } else if crate::sanitize::is_hidden(c) {
                found.push(c);
            }
            rest = &rest[c.len_utf8()..];
        }
        found
    }

    /// Character references are decoded by the Markdown parser, after the raw line's own
    /// control characters are gone; what the parser gives back must be clean too.
    #[test]
    fn character_references_do_not_become_escape_sequences() {
        let hostile = [
            "&#x1b;[2Jcleared",
            "&#27;]52;c;ZWNobyBwd25lZA==&#7; clipboard",
            "&#x9b;2J and &#155;31m",
            "*&#x1b;[31m* `&#x1b;` [x&#x1b;[2J](https://e.com/&#x1b;[2J) ![i](&#x9b;2J)",
            "# &#x1b;]0;title&#x7;",
            "- &#x1b;[1A&#13;moat: allow? [y/N]",
            "> &#8238;txt.exe",
            "raw \x1b[2J and \u{9b}2J and \u{202E}gnp.exe and \u{2066}x\u{2069} \u{200F}\u{061C}",
            "<span>&#x1b;[2J</span> &#x202e; &#x2067; &#x200e;",
        ];
        for text in hostile {
            let out = render(&format!("{text}\n"));
            assert_eq!(
                foreign_controls(&out),
                [] as [char; 0],
                "{text:?} gave {out:?}"
            );
            let mut plain = Renderer::unstyled();
            let mut out = plain.push(text);
            out.push_str(&plain.finish());
            assert_eq!(
                foreign_controls(&out),
                [] as [char; 0],
                "{text:?} gave {out:?}"
            );
            assert!(!out.contains('\x1b'), "{out:?}");
        }
        // The text around them is still shown, and the link's address is clean.
        let out = render("[x](https://e.com/&#x1b;[2J) &#x1b;[2Jcleared");
        assert_eq!(strip(&out), "x (https://e.com/[2J) [2Jcleared");
    }

    #[test]
    fn control_characters_from_the_model_are_dropped() {
        let out = render("safe\x1b]0;pwned\x07 \x1b[2Jtext\r\n");
        assert_eq!(strip(&out), "safe]0;pwned [2Jtext\n");
        assert!(!out.contains("\x1b]"), "{out:?}");
        assert!(!out.contains("\x1b[2J"), "{out:?}");
    }
}
