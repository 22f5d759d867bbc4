//! `${VAR}` expansion in configuration strings.
//!
//! The forms, the same in moat.toml and in imported JSON files:
//!
//! - `${VAR}`: the value of `VAR`; an error when `VAR` is unset (an empty value is a value).
//! - `${VAR:-default}`: the value of `VAR`, or `default` when `VAR` is unset *or empty* (as
//!   in the shell and in Claude Code's `.mcp.json`). The default is literal text up to the
//!   first `}`: defaults do not nest.
//! - `$${`: a literal `${`. Only this sequence is an escape: a `$` anywhere else (`$HOME`,
//!   `$$`, a trailing `$`) is kept as it is, so arguments such as shell snippets or regular
//!   expressions copied from existing client configurations keep their meaning. (A literal
//!   `$` right before an expansion is written `${DOLLAR:-$}${VAR}`.)
//!
//! What a name means is up to the caller's lookup (a closure, not the process environment,
//! so tests need not touch the environment): the loaders map `env:VAR` to `VAR` and give the
//! VS Code names (`workspaceFolder`, `userHome`) their meaning for imported files.

/// Why a string could not be expanded. The caller adds the file, line and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExpandError {
    /// `${NAME}` with `NAME` unset and no default.
    #[error("variable {name} is not set")]
    Unset {
        /// The name inside the braces.
        name: String,
    },
    /// A `${` without its closing `}`.
    #[error("`${{` without a closing `}}`")]
    Unterminated,
    /// `${}` or `${:-x}`.
    #[error("`${{}}` names no variable")]
    EmptyName,
    /// `${A:-${B}}`: defaults are literal text.
    #[error("the default of ${{{name}:-...}} contains `${{`, and defaults do not nest")]
    NestedDefault {
        /// The variable whose default holds the `${`.
        name: String,
    },
}

impl ExpandError {
    /// What the user can do about it.
    pub fn hint(&self) -> String {
        match self {
            ExpandError::Unset { name } => {
                let plain = name.strip_prefix("env:").unwrap_or(name);
                format!(
                    "set the environment variable {plain}, or give a default: ${{{name}:-value}}"
                )
            }
            ExpandError::Unterminated | ExpandError::EmptyName => {
                "write ${NAME} or ${NAME:-default}; for a literal `${` write `$${`".into()
            }
            ExpandError::NestedDefault { .. } => {
                "give a literal default, or set the variable".into()
            }
        }
    }

    /// The text to look for in the file to point at the failing reference.
    pub fn needle(&self) -> String {
        match self {
            ExpandError::Unset { name } | ExpandError::NestedDefault { name } => {
                format!("${{{name}")
            }
            _ => "${".into(),
        }
    }
}

/// Expands every `${...}` in `s` through `lookup`.
pub fn expand(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let at = &rest[i..];
        if let Some(after) = at.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = at.strip_prefix("${") {
            let end = after.find('}').ok_or(ExpandError::Unterminated)?;
            out.push_str(&substitute(&after[..end], lookup)?);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &at[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The value of one `${body}`.
fn substitute(body: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let (name, default) = match body.find(":-") {
        Some(k) => (&body[..k], Some(&body[k + 2..])),
        None => (body, None),
    };
    if name.trim().is_empty() {
        return Err(ExpandError::EmptyName);
    }
    if default.is_some_and(|d| d.contains("${")) {
        return Err(ExpandError::NestedDefault { name: name.into() });
    }
    match (lookup(name), default) {
        (Some(value), Some(default)) if value.is_empty() => Ok(default.into()),
        (Some(value), _) => Ok(value),
        (None, Some(default)) => Ok(default.into()),
        (None, None) => Err(ExpandError::Unset { name: name.into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/ada".into()),
            "EMPTY" => Some(String::new()),
            "env:TOKEN" => Some("t0k".into()),
            _ => None,
        }
    }

    fn x(s: &str) -> Result<String, ExpandError> {
        expand(s, &env)
    }

    #[test]
    fn plain_text_and_lone_dollars_are_kept() {
        assert_eq!(x("npx -y server").unwrap(), "npx -y server");
        assert_eq!(x("$HOME $$ a$ $").unwrap(), "$HOME $$ a$ $");
        assert_eq!(x("").unwrap(), "");
    }

    #[test]
    fn variables_and_defaults() {
        assert_eq!(x("${HOME}/projects").unwrap(), "/home/ada/projects");
        assert_eq!(x("a${HOME}b${HOME}c").unwrap(), "a/home/adab/home/adac");
        assert_eq!(x("${NOPE:-/tmp}").unwrap(), "/tmp");
        assert_eq!(x("${NOPE:-}").unwrap(), "");
        assert_eq!(x("${HOME:-/tmp}").unwrap(), "/home/ada");
        assert_eq!(x("${EMPTY}").unwrap(), "");
        assert_eq!(x("${EMPTY:-fallback}").unwrap(), "fallback");
        assert_eq!(x("Bearer ${env:TOKEN}").unwrap(), "Bearer t0k");
        assert_eq!(x("${NOPE:-a:-b}").unwrap(), "a:-b");
    }

    #[test]
    fn escape_gives_a_literal() {
        assert_eq!(x("$${HOME}").unwrap(), "${HOME}");
        assert_eq!(x("$$${HOME}").unwrap(), "$${HOME}");
        // The last `$$` before a `{` is the escape; `$` before an expansion needs a default.
        assert_eq!(x("$$$${HOME}").unwrap(), "$$${HOME}");
        assert_eq!(x("${D:-$}${HOME}").unwrap(), "$/home/ada");
    }

    #[test]
    fn errors_name_the_variable() {
        let e = x("--token=${GITHUB_TOKEN}").unwrap_err();
        assert_eq!(
            e,
            ExpandError::Unset {
                name: "GITHUB_TOKEN".into()
            }
        );
        assert!(e.to_string().contains("GITHUB_TOKEN"));
        assert!(e.hint().contains("${GITHUB_TOKEN:-value}"));
        assert_eq!(x("${HOME").unwrap_err(), ExpandError::Unterminated);
        assert_eq!(x("${}").unwrap_err(), ExpandError::EmptyName);
        assert_eq!(x("${:-x}").unwrap_err(), ExpandError::EmptyName);
        assert!(matches!(
            x("${A:-${B}}").unwrap_err(),
            ExpandError::NestedDefault { .. }
        ));
    }
}
