//! What a peer may put on the person's terminal. A model's answer (which may repeat text a
//! server injected), a server's messages, links and tool names are all shown in chat; none of
//! them may drive the terminal. An escape sequence (ESC, or the 8-bit CSI U+009B) can move
//! the cursor, clear the screen, retitle the window, set the clipboard (OSC 52) or draw a fake
//! moat prompt; a carriage return can overwrite a line; Unicode's bidirectional controls can
//! make text read differently from what it is (an address, a command). Every such string
//! passes through [`sanitize`] on its way out — after any parsing that could produce new
//! characters, such as Markdown's `&#x1b;` character references.

use std::borrow::Cow;

/// Whether `c` is never shown: a C0 or C1 control character or DEL (tab and newline apart,
/// which [`sanitize`] decides on), or a bidirectional format character — the embeddings and
/// overrides U+202A–U+202E, the isolates U+2066–U+2069, the marks U+200E, U+200F and U+061C.
pub fn is_hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` as it may be shown on a terminal: [`is_hidden`] characters dropped; newlines kept
/// when `lines` is true, else each one shown as a space (a one-line note, where a line of its
/// own could pass for moat's). Tabs are kept. Borrowed when there is nothing to change.
pub fn sanitize(text: &str, lines: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_hidden(c) || (!lines && c == '\n')) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .filter(|c| !is_hidden(*c))
            .map(|c| if c == '\n' && !lines { ' ' } else { c })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_characters_are_dropped() {
        let text = "a\x1b[2Jb\u{9b}31mc\x07d\re\x7ff\u{202E}g\u{2066}h\u{200F}i\u{061C}j\x00k";
        assert_eq!(sanitize(text, true), "a[2Jb31mcdefghijk");
        assert_eq!(sanitize("one\ttwo\nthree", true), "one\ttwo\nthree");
        assert_eq!(sanitize("one\ttwo\nthree", false), "one\ttwo three");
        assert!(matches!(
            sanitize("plain text, ünïcödé", true),
            Cow::Borrowed(_)
        ));
        // What is legitimately shown stays: emoji joined with ZWJ, right-to-left text itself.
        assert_eq!(sanitize("👩\u{200D}💻 שלום", true), "👩\u{200D}💻 שלום");
    }
}
