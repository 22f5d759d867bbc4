//! The host's configuration: which MCP servers to run or reach, how each is sandboxed, and
//! the `[policy]`, `[pins]`, `[audit]`, `[consent]` and `[auth]` settings.
//!
//! [`Config::load`] reads either a `moat.toml` or, as they are, the JSON files MCP clients
//! already have: `{"mcpServers": {...}}` (Claude Desktop's `claude_desktop_config.json`,
//! Claude Code's `.mcp.json`, Cursor's `.cursor/mcp.json`) and `{"servers": {...}}` (VS Code's
//! `.vscode/mcp.json`). A moat.toml can also pull servers from such a file with `import`.
//!
//! Every string that names something to run or reach (`command`, `args`, `env` values,
//! `cwd`, `url`, `headers` values, sandbox paths, `state_dir`, `import`) goes through
//! `${VAR}` / `${VAR:-default}` expansion (`$${` is a literal `${`; `${env:VAR}` is the
//! same as `${VAR}`); an unset variable without a default is an error naming it. Relative
//! paths are resolved against the directory of the file they are written in.
//!
//! Mistakes are reported as `file:line:column: field.path: what is wrong (what to do)`.
//! Unknown keys anywhere in a moat.toml are errors; imported JSON files keep the leniency of
//! the clients that own them (keys moat has no use for, such as `autoApprove`, are ignored).
//!
//! A complete moat.toml, annotated (it is also `tests/fixtures/moat.toml`, loaded by the
//! tests):
//!
#![doc = concat!("```toml\n", include_str!("../../tests/fixtures/moat.toml"), "```")]

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use moat_sandbox::Profile;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use toml::de::DeTable;

use duration::DurationValue;
pub use duration::{DurationError, parse_duration};

pub mod audit;
pub mod auth;
pub mod chat;
pub mod compat;
mod consent;
pub mod console;
mod downstream;
pub mod duration;
mod error;
mod expand;
mod gateway;
mod import;
pub mod pins;
pub mod policy;
mod reach;
pub mod search;
mod server;
mod source;
pub mod store;
pub mod telemetry;

pub use consent::{ConsentConfig, ConsentMode};
pub use error::{ConfigError, Diagnostic};
pub use gateway::GatewayConfig;
pub use server::{
    DownstreamAuth, ExchangeAuth, OAuthAuth, SandboxSetting, SecretValue, ServerConfig,
    ServerTransport, StaticAuth, TrustLabels, UrlTransport, default_profile,
};
pub use source::{Lookup, process_env};
use source::{
    NEITHER_HINT, Ordered, Parts, Source, add_servers, base_dir, build_server, is_json, show,
};

/// The host's whole configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// The file it came from (`None` when built from a string without one).
    pub path: Option<PathBuf>,
    /// The servers, in file order (a moat.toml's own first, then each import's).
    pub servers: Vec<ServerConfig>,
    /// `[policy]`.
    pub policy: policy::PolicyConfig,
    /// `[pins]`.
    pub pins: pins::PinsConfig,
    /// `[audit]`.
    pub audit: audit::AuditConfig,
    /// `[consent]`.
    pub consent: ConsentConfig,
    /// `[tool_search]`.
    pub tool_search: search::ToolSearchConfig,
    /// `[gateway]`.
    pub gateway: GatewayConfig,
    /// `[compat]`.
    pub compat: compat::CompatConfig,
    /// `[auth]`: OAuth access tokens over HTTP (`None`: no issuer configured).
    pub auth: Option<auth::AuthConfig>,
    /// `[telemetry]`.
    pub telemetry: telemetry::TelemetryConfig,
    /// `[console]`: logging in to the web console through an identity provider.
    pub console: console::ConsoleConfig,
    /// `[chat]` (read by `moat chat`; the host itself ignores it).
    pub chat: chat::ChatConfig,
    /// Where the audit store, pins and consent decisions live; `None`: the XDG state
    /// directory.
    pub state_dir: Option<PathBuf>,
    /// `[store]`: the shared store (PostgreSQL) instead of the state directory's files.
    pub store: store::StoreConfig,
    /// The files `import` pulled servers from (absolute), so a watcher can follow them too.
    pub imports: Vec<PathBuf>,
}

impl Config {
    /// Reads a moat.toml, or an `mcpServers`/`servers` JSON file, expanding variables from
    /// the process environment.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::load_with(path, &process_env)
    }

    /// [`Config::load`] with variables from `lookup`.
    pub fn load_with(path: &Path, lookup: Lookup<'_>) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::from_str_with(&text, Some(path), lookup)
    }

    /// Parses `text` as JSON when `path` ends in `.json` or the text starts with `{`, as
    /// TOML otherwise.
    pub fn from_str_with(
        text: &str,
        path: Option<&Path>,
        lookup: Lookup<'_>,
    ) -> Result<Config, ConfigError> {
        if is_json(text, path) {
            Config::from_json_str_with(text, path, lookup)
        } else {
            Config::from_toml_str_with(text, path, lookup)
        }
    }

    /// Parses a moat.toml (variables from the process environment). `path` is used for
    /// messages and to resolve relative paths (default: the current directory).
    pub fn from_toml_str(text: &str, path: Option<&Path>) -> Result<Config, ConfigError> {
        Config::from_toml_str_with(text, path, &process_env)
    }

    /// [`Config::from_toml_str`] with variables from `lookup`.
    pub fn from_toml_str_with(
        text: &str,
        path: Option<&Path>,
        lookup: Lookup<'_>,
    ) -> Result<Config, ConfigError> {
        load_toml(text, path, lookup)
    }

    /// Parses an `mcpServers`/`servers` JSON file (variables from the process environment).
    pub fn from_json_str(text: &str, path: Option<&Path>) -> Result<Config, ConfigError> {
        Config::from_json_str_with(text, path, &process_env)
    }

    /// [`Config::from_json_str`] with variables from `lookup`.
    pub fn from_json_str_with(
        text: &str,
        path: Option<&Path>,
        lookup: Lookup<'_>,
    ) -> Result<Config, ConfigError> {
        let servers = import::servers_from_json(text, path, lookup)?;
        Ok(Config {
            path: path.map(Path::to_path_buf),
            servers,
            ..Config::default()
        })
    }

    /// The server called `name`.
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|s| s.name == name)
    }
}

const IMPORT_HINT: &str = "import takes a Claude Desktop, Claude Code, Cursor or VS Code MCP \
     configuration (an mcpServers/servers JSON file)";

// moat.toml

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFile {
    #[serde(default)]
    servers: Ordered<TomlServer>,
    #[serde(default)]
    policy: policy::PolicyConfig,
    #[serde(default)]
    pins: pins::PinsConfig,
    #[serde(default)]
    audit: audit::AuditConfig,
    #[serde(default)]
    consent: TomlConsent,
    #[serde(default)]
    tool_search: TomlToolSearch,
    #[serde(default)]
    gateway: TomlGateway,
    #[serde(default)]
    compat: compat::CompatConfig,
    auth: Option<auth::TomlAuth>,
    #[serde(default)]
    telemetry: telemetry::TelemetryConfig,
    #[serde(default)]
    console: console::TomlConsole,
    #[serde(default)]
    chat: chat::ChatConfig,
    #[serde(default)]
    store: store::StoreConfig,
    state_dir: Option<String>,
    import: Option<OneOrMany>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    transport: Option<UrlTransport>,
    sandbox: Option<TomlSandbox>,
    enabled: Option<bool>,
    call_timeout: Option<DurationValue>,
    untrusted: Option<bool>,
    private: Option<bool>,
    sink: Option<bool>,
    prefix: Option<String>,
    protocol: Option<String>,
    auth: Option<downstream::TomlServerAuth>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlGateway {
    startup_timeout: Option<DurationValue>,
    health_interval: Option<DurationValue>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlConsent {
    #[serde(default)]
    mode: ConsentMode,
    timeout: Option<DurationValue>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlToolSearch {
    #[serde(default)]
    mode: search::SearchMode,
    max_tools: Option<usize>,
    max_tokens: Option<usize>,
    #[serde(default)]
    always: Vec<String>,
    model: Option<String>,
    limit: Option<usize>,
}

fn tool_search(
    src: &Source<'_>,
    raw: TomlToolSearch,
) -> Result<search::ToolSearchConfig, ConfigError> {
    let default = search::ToolSearchConfig::default();
    let config = search::ToolSearchConfig {
        mode: raw.mode,
        max_tools: raw.max_tools.unwrap_or(default.max_tools),
        max_tokens: raw.max_tokens.unwrap_or(default.max_tokens),
        always: raw.always,
        model: match &raw.model {
            Some(dir) => Some(src.path(&["tool_search", "model"], "tool_search.model", dir)?),
            None => None,
        },
        limit: match raw.limit {
            Some(0) => {
                return Err(src.error(
                    &["tool_search", "limit"],
                    "must be at least 1",
                    Some("e.g. 8".into()),
                ));
            }
            Some(n) => n.min(50),
            None => default.limit,
        },
    };
    if let Err(e) = config.always_set() {
        return Err(src.error(
            &["tool_search", "always"],
            format!("not a valid glob: {e}"),
            Some("e.g. [\"fs__read_*\", \"git__status\"]".into()),
        ));
    }
    Ok(config)
}

fn load_toml(text: &str, path: Option<&Path>, lookup: Lookup<'_>) -> Result<Config, ConfigError> {
    let plain = |offset: Option<usize>, field: String, message: String| {
        let src = Source {
            text,
            file: path,
            base: PathBuf::new(),
            locate: &|_| None,
            lookup,
            explain: &|_| None,
        };
        src.error_at(offset, field, message, None)
    };
    let root = DeTable::parse(text).map_err(|e| {
        plain(
            e.span().map(|s| s.start),
            String::new(),
            e.message().to_string(),
        )
    })?;
    let locate = |at: &[&str]| toml_locate(root.get_ref(), at);
    let raw: TomlFile = serde_path_to_error::deserialize(toml::Deserializer::from(root.clone()))
        .map_err(|e| {
            let field = field_path(e.path());
            let offset = e
                .inner()
                .span()
                .map(|s| s.start)
                .or_else(|| locate(&field.split('.').collect::<Vec<_>>()));
            plain(offset, field, e.inner().message().to_string())
        })?;
    let src = Source {
        text,
        file: path,
        base: base_dir(path),
        locate: &locate,
        lookup: &|name| lookup(name.strip_prefix("env:").unwrap_or(name)),
        explain: &|_| None,
    };
    let mut own = raw.servers.0;
    own.sort_by_key(|(name, _)| locate(&["servers", name]));
    let has_import = raw.import.is_some();
    let import_files = import_paths(&src, raw.import)?;
    // What no server's command line may make writable (reach.rs): this file and its imports.
    let protected: Vec<&Path> = path
        .into_iter()
        .chain(import_files.iter().map(|(_, p)| p.as_path()))
        .collect();
    let mut servers = Vec::new();
    // With `import`, a table with neither `command` nor `url` adjusts the imported server
    // of that name (its sandbox, labels, timeout), once the imports are read.
    let mut adjustments = Vec::new();
    for (name, server) in own {
        if has_import && server.command.is_none() && server.url.is_none() {
            adjustments.push((name, server));
        } else {
            servers.push(toml_server(&src, &name, server, &protected)?);
        }
    }
    let mut all = Vec::new();
    let conflict_own = |name: &str, _: Option<&Path>| {
        src.error(
            &["servers", name],
            format!("server {name:?} is defined twice"),
            None,
        )
    };
    add_servers(&mut all, servers, path, &conflict_own)?;
    let imports = toml_imports(&src, &import_files, &protected, &mut all)?;
    for (name, adjustment) in adjustments {
        let imported = all
            .iter_mut()
            .find(|(server, origin)| server.name == name && origin.as_deref() != path);
        let Some((server, _)) = imported else {
            return Err(src.error(
                &["servers", &name],
                format!(
                    "the server has neither `command` nor `url`, and no imported file defines a server {name:?}"
                ),
                Some(format!(
                    "{NEITHER_HINT}, or use the name of a server in an imported file to adjust it"
                )),
            ));
        };
        adjust_imported(&src, &name, server, adjustment)?;
    }
    let consent = ConsentConfig {
        mode: raw.consent.mode,
        timeout: match raw.consent.timeout {
            Some(t) => positive(&src, &["consent", "timeout"], t.0)?,
            None => ConsentConfig::default().timeout,
        },
    };
    let tool_search = tool_search(&src, raw.tool_search)?;
    let gateway = GatewayConfig {
        startup_timeout: match raw.gateway.startup_timeout {
            Some(t) => Some(positive(&src, &["gateway", "startup_timeout"], t.0)?),
            None => None,
        },
        health_interval: match raw.gateway.health_interval {
            Some(t) => Some(positive(&src, &["gateway", "health_interval"], t.0)?),
            None => None,
        },
    };
    let auth = match raw.auth {
        Some(a) => Some(auth::auth(&src, a)?),
        None => None,
    };
    let console = console::console(&src, raw.console, auth.as_ref())?;
    let state_dir = match &raw.state_dir {
        Some(dir) => Some(src.path(&["state_dir"], "state_dir", dir)?),
        None => None,
    };
    Ok(Config {
        path: path.map(Path::to_path_buf),
        servers: all.into_iter().map(|(s, _)| s).collect(),
        policy: raw.policy,
        pins: raw.pins,
        audit: raw.audit,
        consent,
        tool_search,
        gateway,
        compat: raw.compat,
        auth,
        telemetry: raw.telemetry,
        console,
        chat: raw.chat,
        state_dir,
        store: raw.store,
        imports,
    })
}

fn positive(src: &Source<'_>, at: &[&str], d: Duration) -> Result<Duration, ConfigError> {
    if d.is_zero() {
        return Err(src.error(at, "must be more than zero", Some("e.g. \"30s\"".into())));
    }
    Ok(d)
}

/// A server the moat.toml defines: built, its default sandbox widened by what its command
/// line names (reach.rs; `protected` are the configuration files), then its own settings.
fn toml_server(
    src: &Source<'_>,
    name: &str,
    mut raw: TomlServer,
    protected: &[&Path],
) -> Result<ServerConfig, ConfigError> {
    let parts = Parts {
        command: raw.command.take(),
        args: std::mem::take(&mut raw.args),
        env: std::mem::take(&mut raw.env),
        cwd: raw.cwd.take(),
        url: raw.url.take(),
        headers: std::mem::take(&mut raw.headers),
        transport: raw.transport.take(),
    };
    let mut server = build_server(src, "servers", name, parts)?;
    reach::widen_server(&mut server, src.lookup, protected);
    apply_settings(src, name, &mut server, raw)?;
    Ok(server)
}

/// `[servers.NAME]` for a server an imported file defines: only what moat adds to a server
/// (`sandbox`, `enabled`, `call_timeout`, the labels); how to start it stays the file's.
/// Its `sandbox` table works as for any server: `ro` and `rw` add to the imported server's
/// paths, other keys replace.
fn adjust_imported(
    src: &Source<'_>,
    name: &str,
    server: &mut ServerConfig,
    mut raw: TomlServer,
) -> Result<(), ConfigError> {
    for (key, given) in [
        ("args", !raw.args.is_empty()),
        ("env", !raw.env.is_empty()),
        ("cwd", raw.cwd.is_some()),
        ("headers", !raw.headers.is_empty()),
        ("transport", raw.transport.is_some()),
    ] {
        if given {
            return Err(src.error(
                &["servers", name, key],
                format!(
                    "{name:?} is a server of an imported file: moat.toml can adjust its sandbox, \
                     enabled, call_timeout, prefix, protocol and labels, not `{key}`"
                ),
                Some(format!(
                    "change `{key}` in the imported file, or define the server here in full (with \
                     `command` or `url`) under another name"
                )),
            ));
        }
    }
    // Unset keys keep what the import said.
    raw.enabled = raw.enabled.or(Some(server.enabled));
    apply_settings(src, name, server, raw)
}

/// The keys of `[servers.NAME]` that are moat's own (sandbox, enabled, call_timeout, the
/// labels), applied to a built server; how to reach it was taken out of `raw` before.
fn apply_settings(
    src: &Source<'_>,
    name: &str,
    server: &mut ServerConfig,
    raw: TomlServer,
) -> Result<(), ConfigError> {
    server.enabled = raw.enabled.unwrap_or(true);
    server.call_timeout = match raw.call_timeout {
        Some(t) => Some(positive(src, &["servers", name, "call_timeout"], t.0)?),
        None => None,
    };
    server.trust = TrustLabels {
        untrusted: raw.untrusted,
        private: raw.private,
        sink: raw.sink,
    };
    if let Some(prefix) = raw.prefix {
        // Tool names are `[A-Za-z0-9_.-]` in the spec's advice (2025-11-25); a prefix
        // outside it would make every name of the server one clients may refuse.
        if prefix.len() > 32
            || !prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err(src.error(
                &["servers", name, "prefix"],
                format!("prefix {prefix:?} is not a valid start of a tool name"),
                Some(
                    "use at most 32 of the characters A-Z a-z 0-9 _ - . (or \"\" for none)".into(),
                ),
            ));
        }
        server.prefix = Some(prefix);
    }
    if let Some(protocol) = raw.protocol {
        server.protocol = protocol.parse().map_err(|_| {
            src.error(
                &["servers", name, "protocol"],
                format!("{protocol:?} is not a protocol revision"),
                Some(format!(
                    "use \"auto\" or one of {}",
                    moat_protocol::ProtocolVersion::ALL
                        .iter()
                        .map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            )
        })?;
    }
    let is_command = matches!(server.transport, ServerTransport::Command { .. });
    if let Some(auth) = raw.auth {
        let ServerTransport::Url { url, .. } = &server.transport else {
            return Err(src.error(
                &["servers", name, "auth"],
                "`auth` applies to url servers; a command server gets its secrets in `env`",
                Some("remove it".into()),
            ));
        };
        server.auth = Some(downstream::downstream_auth(src, name, url, auth)?);
    }
    match raw.sandbox {
        None => {}
        Some(TomlSandbox::Bool(false)) => server.sandbox = SandboxSetting::Off,
        Some(_) if !is_command => {
            return Err(src.error(
                &["servers", name, "sandbox"],
                "`sandbox` applies to command servers; a url server runs outside the host",
                Some("remove it".into()),
            ));
        }
        Some(TomlSandbox::Bool(true)) => {}
        Some(TomlSandbox::Table(overlay)) => {
            let SandboxSetting::Profile(base) = &server.sandbox else {
                return Ok(());
            };
            server.sandbox = SandboxSetting::Profile(sandbox_table(src, name, base, overlay)?);
        }
    }
    Ok(())
}

/// A `[servers.NAME.sandbox]` table over the server's profile (the default, widened by what
/// its command line names): `ro` and `rw` add to its paths (replacing them would take away
/// the program and the folders the command line names), `limits` is merged key by key, the
/// other keys it gives replace the profile's.
fn sandbox_table(
    src: &Source<'_>,
    name: &str,
    base: &Profile,
    overlay: serde_json::Value,
) -> Result<Profile, ConfigError> {
    let at = ["servers", name, "sandbox"];
    let given = |key: &str| overlay.get(key).is_some();
    let extended = [("ro", given("ro")), ("rw", given("rw"))];
    let mut merged = serde_json::to_value(base)
        .map_err(|e| src.error(&at, format!("cannot build the profile: {e}"), None))?;
    merge(&mut merged, overlay);
    let mut profile: Profile = serde_path_to_error::deserialize(merged).map_err(|e| {
        let inner = field_path(e.path());
        let mut key: Vec<&str> = at.to_vec();
        key.extend(
            inner
                .split('.')
                .filter(|s| !s.is_empty() && !s.contains('[')),
        );
        let shown = if inner.is_empty() {
            at.join(".")
        } else {
            format!("{}.{inner}", at.join("."))
        };
        src.error_at((src.locate)(&key), shown, e.inner().to_string(), None)
    })?;
    let shown = |key: &str, i: usize| format!("servers.{name}.sandbox.{key}[{i}]");
    let lists = [(&mut profile.ro, &base.ro), (&mut profile.rw, &base.rw)];
    for ((key, given), (list, before)) in extended.into_iter().zip(lists) {
        if !given {
            continue; // the profile's own, as they are
        }
        let added = std::mem::replace(list, before.clone());
        for (i, p) in added.into_iter().enumerate() {
            let p = match p.to_str() {
                Some(s) => src.path(&["servers", name, "sandbox", key], &shown(key, i), s)?,
                None => p,
            };
            if !list.contains(&p) {
                list.push(p);
            }
        }
    }
    if let Some(s) = profile
        .cwd
        .as_ref()
        .and_then(|p| p.to_str())
        .map(str::to_owned)
    {
        let shown = format!("servers.{name}.sandbox.cwd");
        profile.cwd = Some(src.path(&["servers", name, "sandbox", "cwd"], &shown, &s)?);
    }
    Ok(profile)
}

fn merge(base: &mut serde_json::Value, overlay: serde_json::Value) {
    match (base, overlay) {
        (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

/// The files `import` names, absolute, each with the field to report it as.
fn import_paths(
    src: &Source<'_>,
    import: Option<OneOrMany>,
) -> Result<Vec<(String, PathBuf)>, ConfigError> {
    let files = match import {
        None => return Ok(Vec::new()),
        Some(OneOrMany::One(f)) => vec![f],
        Some(OneOrMany::Many(fs)) => fs,
    };
    let many = files.len() > 1;
    files
        .iter()
        .enumerate()
        .map(|(i, file)| {
            let shown = if many {
                format!("import[{i}]")
            } else {
                "import".to_string()
            };
            let path = src.path(&["import"], &shown, file)?;
            Ok((shown, path))
        })
        .collect()
}

/// Reads the servers of each imported file into `all`; `protected` are the configuration
/// files (this one and every import), which no imported server may write.
fn toml_imports(
    src: &Source<'_>,
    files: &[(String, PathBuf)],
    protected: &[&Path],
    all: &mut Vec<(ServerConfig, Option<PathBuf>)>,
) -> Result<Vec<PathBuf>, ConfigError> {
    let mut imported = Vec::new();
    for (shown, path) in files.iter().cloned() {
        let text = std::fs::read_to_string(&path).map_err(|e| {
            src.error_at(
                (src.locate)(&["import"]),
                shown.clone(),
                format!("cannot read {}: {e}", path.display()),
                None,
            )
        })?;
        if !is_json(&text, Some(&path)) {
            return Err(src.error_at(
                (src.locate)(&["import"]),
                shown,
                format!("{} is not a JSON file", path.display()),
                Some(IMPORT_HINT.into()),
            ));
        }
        let mut servers = import::servers_from_json(&text, Some(&path), src.lookup)?;
        // The imported file was read alone: it knew nothing of the moat.toml importing it.
        for server in &mut servers {
            reach::protect(server, protected);
        }
        let conflict = |name: &str, first: Option<&Path>| {
            let at_key = (src.locate)(&["servers", name]).or_else(|| (src.locate)(&["import"]));
            src.error_at(
                at_key,
                shown.clone(),
                format!(
                    "server {name:?} is defined in both {} and {}",
                    show(first),
                    path.display()
                ),
                Some("rename one of them, or remove one".into()),
            )
        };
        add_servers(all, servers, Some(&path), &conflict)?;
        imported.push(path);
    }
    Ok(imported)
}

/// The offset of the key at `at` in a parsed TOML document, or of the deepest key of it
/// that exists.
fn toml_locate(root: &DeTable<'_>, at: &[&str]) -> Option<usize> {
    let mut table = root;
    let mut found = None;
    for seg in at {
        let Some((key, value)) = table.get_key_value(*seg) else {
            break;
        };
        found = Some(key.span().start);
        match value.get_ref().as_table() {
            Some(t) => table = t,
            None => break,
        }
    }
    found
}

/// serde_path_to_error's path, with `.` (its name for the root) as empty.
fn field_path(path: &serde_path_to_error::Path) -> String {
    let s = path.to_string();
    if s == "." { String::new() } else { s }
}

// ---------------------------------------------------------------------------------------
// Shared serde helpers

/// `import = "a.json"` or `import = ["a.json", "b.json"]`.
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a file name or a list of file names")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(OneOrMany::One(v.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    out.push(s);
                }
                Ok(OneOrMany::Many(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// `sandbox = true|false` or a table (kept as JSON, merged over the default profile).
enum TomlSandbox {
    Bool(bool),
    Table(serde_json::Value),
}

impl<'de> Deserialize<'de> for TomlSandbox {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TomlSandbox;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false, or a table of sandbox settings")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(TomlSandbox::Bool(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(TomlSandbox::Table(value))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::source::{check_name, line_col};
    use super::*;
    use moat_sandbox::Net;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/ada".into()),
            "TOKEN" => Some("t0k".into()),
            _ => None,
        }
    }

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str_with(text, Some(Path::new("/etc/moat/moat.toml")), &env)
    }

    #[test]
    fn names() {
        for ok in ["fs", "git-hub", "a_b", "X9", &"a".repeat(32)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a__b", "a b", "a.b", "ü", &"a".repeat(33)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn line_and_column() {
        let text = "ab\ncdé\nf";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 3), (2, 1));
        assert_eq!(line_col(text, 7), (2, 4));
        assert_eq!(line_col(text, 99), (3, 2));
    }

    #[test]
    fn a_minimal_server_gets_the_default_profile() {
        let c = load("[servers.fs]\ncommand = \"moat\"\nargs = [\"serve\", \"fs\"]\n").unwrap();
        let s = &c.servers[0];
        assert!(s.enabled && s.call_timeout.is_none());
        let p = s.profile().unwrap();
        assert_eq!(p.ro, vec![PathBuf::from("/etc/moat")]);
        assert!(p.system_ro && p.namespaces && p.net == Net::None);
        assert_eq!(p.limits.timeout, None);
        assert_eq!(c.consent, ConsentConfig::default());
        assert_eq!(c.consent.timeout, Duration::from_secs(120));
    }

    #[test]
    fn servers_keep_file_order() {
        let c = load(
            "[servers.zeta]\ncommand = \"z\"\n[servers.alpha]\ncommand = \"a\"\n\
             [servers.mid]\nurl = \"http://127.0.0.1:1/mcp\"\n",
        )
        .unwrap();
        let names: Vec<_> = c.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["zeta", "alpha", "mid"]);
    }

    #[test]
    fn sandbox_tables_overlay_the_default() {
        let c = load(
            r#"
[servers.a]
command = "a"
cwd = "work"
sandbox = false

[servers.b]
command = "b"
cwd = "work"

[servers.b.sandbox]
rw = ["data", "/var/tmp"]
net = { allow = ["api.github.com:443"] }
limits = { memory_bytes = 1000000 }
"#,
        )
        .unwrap();
        assert_eq!(c.servers[0].sandbox, SandboxSetting::Off);
        assert_eq!(c.servers[0].profile(), None);
        let p = c.servers[1].profile().unwrap();
        assert_eq!(p.ro, vec![PathBuf::from("/etc/moat/work")]);
        assert_eq!(p.cwd, Some(PathBuf::from("/etc/moat/work")));
        assert_eq!(
            p.rw,
            vec![PathBuf::from("/etc/moat/data"), PathBuf::from("/var/tmp")]
        );
        assert!(matches!(p.net, Net::Allow(ref l) if l.len() == 1));
        assert_eq!(p.limits.memory_bytes, Some(1_000_000));
        assert_eq!(p.limits.timeout, None, "the server default stays");
        assert_eq!(p.limits.open_files, Some(1024));
        // Ids and masks: as in any profile (a root gateway's servers run as 65534 unless
        // these say otherwise).
        assert_eq!((p.uid, p.gid, p.run_as_root), (None, None, false));
        assert_eq!(p.mask.len(), moat_sandbox::MASKED.len());
        let c = load(
            "[servers.c]\ncommand = \"c\"\n\n[servers.c.sandbox]\nuid = 1500\ngid = 1600\n\
             mask = [\"/etc/shadow\"]\n\n[servers.d]\ncommand = \"d\"\n\
             sandbox = { run_as_root = true }\n",
        )
        .unwrap();
        let p = c.servers[0].profile().unwrap();
        assert_eq!(
            (p.uid, p.gid, p.run_as_root),
            (Some(1500), Some(1600), false)
        );
        assert_eq!(p.mask, vec!["/etc/shadow".to_string()]);
        assert!(c.servers[1].profile().unwrap().run_as_root);
    }

    #[test]
    fn sandbox_errors_are_located() {
        let e = load("[servers.b]\ncommand = \"b\"\n\n[servers.b.sandbox]\nnet = \"proxy\"\n")
            .unwrap_err();
        assert_eq!(e.line(), Some(5), "{e}");
        assert_eq!(e.field(), Some("servers.b.sandbox.net"), "{e}");
        let e = load("[servers.b]\ncommand = \"b\"\nsandbox = { rox = [] }\n").unwrap_err();
        assert!(e.to_string().contains("rox"), "{e}");
        assert_eq!(e.line(), Some(3), "{e}");
        let e = load("[servers.u]\nurl = \"https://x.example/mcp\"\nsandbox = true\n").unwrap_err();
        assert_eq!(e.field(), Some("servers.u.sandbox"), "{e}");
    }

    #[test]
    fn shape_errors_name_the_server() {
        let e = load("[servers.x]\ncommand = \"a\"\nurl = \"http://h/mcp\"\n").unwrap_err();
        assert_eq!(
            (e.line(), e.field()),
            (Some(3), Some("servers.x.url")),
            "{e}"
        );
        let e = load("\n[servers.x]\nenabled = true\n").unwrap_err();
        assert_eq!(e.line(), Some(2), "{e}");
        assert!(e.to_string().contains("neither"), "{e}");
        let e = load("[servers.x]\nurl = \"http://h/mcp\"\nargs = [\"a\"]\n").unwrap_err();
        assert_eq!(e.field(), Some("servers.x.args"), "{e}");
        let e = load("[servers.x]\ncommand = \"a\"\nheaders = { A = \"b\" }\n").unwrap_err();
        assert_eq!(e.field(), Some("servers.x.headers"), "{e}");
        let e = load("[servers.x]\nurl = \"ftp://h\"\n").unwrap_err();
        assert!(e.to_string().contains("ftp://h"), "{e}");
        let e = load("[servers.\"a__b\"]\ncommand = \"a\"\n").unwrap_err();
        assert_eq!(e.line(), Some(1), "{e}");
        assert!(e.to_string().contains("__"), "{e}");
        let e = load("[servers.x]\ncommand = \"a\"\ncall_timeout = 0\n").unwrap_err();
        assert_eq!(e.field(), Some("servers.x.call_timeout"), "{e}");
    }

    #[test]
    fn consent_and_state_dir() {
        let c = load(
            "state_dir = \"${HOME}/.moat\"\n[consent]\nmode = \"terminal\"\ntimeout = \"45s\"\n",
        )
        .unwrap();
        assert_eq!(c.state_dir, Some(PathBuf::from("/home/ada/.moat")));
        assert_eq!(c.consent.mode, ConsentMode::Terminal);
        assert_eq!(c.consent.timeout, Duration::from_secs(45));
        let e = load("[consent]\nmode = \"maybe\"\n").unwrap_err();
        assert_eq!(
            (e.line(), e.field()),
            (Some(2), Some("consent.mode")),
            "{e}"
        );
    }

    #[test]
    fn display_without_a_file_or_line() {
        let d = Diagnostic {
            file: None,
            line: None,
            column: None,
            field: "servers.a".into(),
            message: "bad".into(),
            hint: Some("fix it".into()),
        };
        assert_eq!(d.to_string(), "<config>: servers.a: bad (fix it)");
    }
}
