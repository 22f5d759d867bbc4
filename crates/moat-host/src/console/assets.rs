//! The page, its style and its script, embedded in the binary.

/// The page; `{{CSRF}}` is replaced by the session's CSRF token.
pub(crate) const INDEX: &str = include_str!("assets/index.html");
/// Its style.
pub(crate) const CSS: &str = include_str!("assets/app.css");
/// Its script.
pub(crate) const JS: &str = include_str!("assets/app.js");
