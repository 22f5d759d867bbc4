//! What the TOML and JSON loaders share: where a file is and how to point into it, and how
//! a server's fields are expanded, checked and added (`${VAR}` lookups included).

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};

use super::error::{ConfigError, Diagnostic};
use super::expand::{ExpandError, expand};
use super::server::{
    SandboxSetting, ServerConfig, ServerTransport, TrustLabels, UrlTransport, current_dir,
    default_profile,
};

/// What to do when a server names neither a command nor a URL.
pub(crate) const NEITHER_HINT: &str =
    "add `command` (and `args`) to start a program, or `url` to reach a running server";

/// A variable lookup: a name (without the `env:` prefix) to its value.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment, as a [`Lookup`].
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

pub(crate) fn is_json(text: &str, path: Option<&Path>) -> bool {
    match path.and_then(|p| p.extension()).and_then(|e| e.to_str()) {
        Some("json") => true,
        Some("toml") => false,
        _ => text.trim_start().starts_with('{'),
    }
}

/// The directory relative paths in `path` are resolved against.
pub(crate) fn base_dir(path: Option<&Path>) -> PathBuf {
    let Some(path) = path else {
        return current_dir();
    };
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    absolute
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(current_dir)
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Checks a server name: it becomes the `server` in `server__tool`.
pub(crate) fn check_name(name: &str) -> Result<(), (String, String)> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let hint =
        "use 1 to 32 letters, digits, `_` or `-`, without `__`: tools are exposed as SERVER__TOOL";
    if name.is_empty() || name.chars().count() > 32 || !ok_chars {
        return Err((format!("invalid server name {name:?}"), hint.into()));
    }
    if name.contains("__") {
        return Err((
            format!("invalid server name {name:?}: it contains `__`"),
            hint.into(),
        ));
    }
    Ok(())
}

/// Where a file is and how to point into it; shared by the TOML and JSON loaders.
pub(crate) struct Source<'a> {
    pub text: &'a str,
    pub file: Option<&'a Path>,
    /// The directory relative paths are resolved against.
    pub base: PathBuf,
    /// The byte offset of the key at a path (`["servers", "fs", "args"]`), or of the
    /// deepest key of it that exists.
    pub locate: &'a dyn Fn(&[&str]) -> Option<usize>,
    pub lookup: &'a dyn Fn(&str) -> Option<String>,
    /// A better message and hint for an expansion error, where the format has one (VS Code's
    /// `${input:ID}`).
    pub explain: &'a dyn Fn(&ExpandError) -> Option<(String, String)>,
}

impl Source<'_> {
    pub fn error_at(
        &self,
        offset: Option<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> ConfigError {
        let (line, column) = match offset {
            Some(o) => {
                let (l, c) = line_col(self.text, o);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        ConfigError::Invalid(Box::new(Diagnostic {
            file: self.file.map(Path::to_path_buf),
            line,
            column,
            field: field.into(),
            message: message.into(),
            hint,
        }))
    }

    /// An error at the key `at`, shown as `at` joined with dots.
    pub fn error(
        &self,
        at: &[&str],
        message: impl Into<String>,
        hint: Option<String>,
    ) -> ConfigError {
        self.error_at((self.locate)(at), at.join("."), message, hint)
    }

    /// Expands `value`, found under the key `at`; `shown` is the field path to report.
    pub fn expand(&self, at: &[&str], shown: &str, value: &str) -> Result<String, ConfigError> {
        expand(value, self.lookup).map_err(|e| self.expand_error(at, shown, &e))
    }

    fn expand_error(&self, at: &[&str], shown: &str, e: &ExpandError) -> ConfigError {
        let key = (self.locate)(at);
        let needle = e.needle();
        let offset = key
            .and_then(|k| self.text[k..].find(&needle).map(|i| k + i))
            .or(key);
        let (message, hint) = (self.explain)(e).unwrap_or_else(|| (e.to_string(), e.hint()));
        self.error_at(offset, shown, message, Some(hint))
    }

    /// Expands a path and makes it absolute against [`Source::base`].
    pub fn path(&self, at: &[&str], shown: &str, value: &str) -> Result<PathBuf, ConfigError> {
        Ok(self.base.join(self.expand(at, shown, value)?))
    }
}

/// A server's transport fields, as written, before expansion and checks.
#[derive(Default)]
pub(crate) struct Parts {
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub transport: Option<UrlTransport>,
}

/// Expands and checks a server's fields; `root` is the key the servers are under. The
/// result has the default sandbox for a command server.
pub(crate) fn build_server(
    src: &Source<'_>,
    root: &str,
    name: &str,
    parts: Parts,
) -> Result<ServerConfig, ConfigError> {
    let at = |key: &'static str| [root, name, key];
    let shown = |key: &str| format!("{root}.{name}.{key}");
    if let Err((message, hint)) = check_name(name) {
        return Err(src.error(&[root, name], message, Some(hint)));
    }
    let transport = match (parts.command, parts.url) {
        (Some(_), Some(_)) => {
            return Err(src.error(
                &at("url"),
                "a server has either `command` or `url`, not both",
                Some(
                    "keep `command` to start a program, or `url` to reach a running server".into(),
                ),
            ));
        }
        (None, None) => {
            return Err(src.error(
                &[root, name],
                "the server has neither `command` nor `url`",
                Some(NEITHER_HINT.into()),
            ));
        }
        (Some(command), None) => {
            for (key, given) in [
                ("headers", !parts.headers.is_empty()),
                ("transport", parts.transport.is_some()),
            ] {
                if given {
                    return Err(src.error(
                        &at(key),
                        format!("`{key}` applies to url servers, and this one has a `command`"),
                        None,
                    ));
                }
            }
            let command = src.expand(&at("command"), &shown("command"), &command)?;
            if command.trim().is_empty() {
                return Err(src.error(&at("command"), "the command is empty", None));
            }
            let args = parts
                .args
                .iter()
                .enumerate()
                .map(|(i, a)| src.expand(&at("args"), &format!("{root}.{name}.args[{i}]"), a))
                .collect::<Result<_, _>>()?;
            let env = parts
                .env
                .iter()
                .map(|(k, v)| {
                    let value = src.expand(
                        &[root, name, "env", k],
                        &format!("{root}.{name}.env.{k}"),
                        v,
                    )?;
                    Ok((k.clone(), value))
                })
                .collect::<Result<_, ConfigError>>()?;
            let cwd = match &parts.cwd {
                Some(c) => Some(src.path(&at("cwd"), &shown("cwd"), c)?),
                None => None,
            };
            ServerTransport::Command {
                command,
                args,
                env,
                cwd,
            }
        }
        (None, Some(url)) => {
            for (key, given) in [
                ("args", !parts.args.is_empty()),
                ("env", !parts.env.is_empty()),
                ("cwd", parts.cwd.is_some()),
            ] {
                if given {
                    return Err(src.error(
                        &at(key),
                        format!("`{key}` applies to command servers, and this one has a `url`"),
                        None,
                    ));
                }
            }
            let url = src.expand(&at("url"), &shown("url"), &url)?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(src.error(
                    &at("url"),
                    format!("{url:?} is not an http:// or https:// URL"),
                    None,
                ));
            }
            let headers = parts
                .headers
                .iter()
                .map(|(k, v)| {
                    let value = src.expand(
                        &[root, name, "headers", k],
                        &format!("{root}.{name}.headers.{k}"),
                        v,
                    )?;
                    Ok((k.clone(), value))
                })
                .collect::<Result<_, ConfigError>>()?;
            ServerTransport::Url {
                url,
                headers,
                transport: parts.transport.unwrap_or_default(),
            }
        }
    };
    let sandbox = match &transport {
        ServerTransport::Command { cwd, .. } => {
            SandboxSetting::Profile(default_profile(&src.base, cwd.as_deref()))
        }
        ServerTransport::Url { .. } => SandboxSetting::Off,
    };
    Ok(ServerConfig {
        name: name.to_string(),
        transport,
        sandbox,
        enabled: true,
        call_timeout: None,
        trust: TrustLabels::default(),
        prefix: None,
        protocol: Default::default(),
        imported_from: None,
        auth: None,
    })
}

/// Adds `servers` from `origin` to `all`, refusing a name defined twice.
pub(crate) fn add_servers(
    all: &mut Vec<(ServerConfig, Option<PathBuf>)>,
    servers: Vec<ServerConfig>,
    origin: Option<&Path>,
    conflict: &dyn Fn(&str, Option<&Path>) -> ConfigError,
) -> Result<(), ConfigError> {
    for server in servers {
        if let Some((_, first)) = all.iter().find(|(s, _)| s.name == server.name) {
            return Err(conflict(&server.name, first.as_deref()));
        }
        all.push((server, origin.map(Path::to_path_buf)));
    }
    Ok(())
}

/// Shows a file for messages.
pub(crate) fn show(file: Option<&Path>) -> String {
    file.map_or_else(|| "<config>".into(), |p| p.display().to_string())
}

// ---------------------------------------------------------------------------------------

/// A map kept in the order its deserializer gives it (file order for JSON; TOML's is
/// sorted afterwards by position).
pub(crate) struct Ordered<T>(pub Vec<(String, T)>);

impl<T> Default for Ordered<T> {
    fn default() -> Self {
        Ordered(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of servers by name")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, T>()? {
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}
