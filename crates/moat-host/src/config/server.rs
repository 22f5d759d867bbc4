//! One server's configuration (`[servers.NAME]`, or an entry of a client's JSON file):
//! how it is run or reached, confined and labelled.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use moat_sandbox::{Limits, Net, Profile};
use serde::Deserialize;

/// One MCP server the host runs (a command) or reaches (a URL).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The table key: `^[A-Za-z0-9_-]{1,32}$` without `__` (tools are named `server__tool`).
    pub name: String,
    /// How to reach it.
    pub transport: ServerTransport,
    /// The sandbox of a command server ([`SandboxSetting::Off`] for URL servers).
    pub sandbox: SandboxSetting,
    /// `enabled = false` keeps a server configured but not started.
    pub enabled: bool,
    /// The deadline of one `tools/call`; `None`: the host's default.
    pub call_timeout: Option<Duration>,
    /// The server's own say about its tools.
    pub trust: TrustLabels,
    /// What its tools' and prompts' names start with towards the client; `None`: the
    /// default, `NAME__`. `prefix = ""` shows them as the server names them.
    pub prefix: Option<String>,
    /// The revision to speak with it (`protocol = "2025-11-25"`); default `auto`: the
    /// newest both sides speak.
    pub protocol: moat_protocol::version::VersionPreference,
    /// The client's JSON file (an `import`, or the configuration itself) this server was
    /// read from; `None` for a server of moat.toml's own. Launch-spec pins hold an imported
    /// server whose launch changed (see `launch_pins`).
    pub imported_from: Option<PathBuf>,
    /// `[servers.NAME.auth]`: the credentials sent to a URL server (`None`: only its
    /// `headers`).
    pub auth: Option<DownstreamAuth>,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerTransport {
    /// A child process speaking MCP on stdio.
    Command {
        /// The program (looked up on `PATH` when it has no `/`).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it (the host's own environment is not passed on).
        env: BTreeMap<String, String>,
        /// Its working directory (absolute once loaded).
        cwd: Option<PathBuf>,
    },
    /// A server already running at an HTTP URL.
    Url {
        /// `http://` or `https://`.
        url: String,
        /// Headers sent with every request (e.g. `Authorization`).
        headers: BTreeMap<String, String>,
        /// Which HTTP transport to speak.
        transport: UrlTransport,
    },
}

/// The HTTP transport of a URL server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum UrlTransport {
    /// Streamable HTTP, falling back to the legacy HTTP+SSE transport.
    #[default]
    Auto,
    /// Streamable HTTP only (`"http"` is accepted too, as in Claude Code's `.mcp.json`).
    #[serde(alias = "http", alias = "streamable-http")]
    Streamable,
    /// The legacy HTTP+SSE transport of 2024-11-05.
    Sse,
}

/// Whether and how a command server is confined.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
// One per server, built once per load: the size of `Off` does not matter, direct access does.
#[allow(clippy::large_enum_variant)]
pub enum SandboxSetting {
    /// `sandbox = false`: the server runs unconfined.
    Off,
    /// The server runs confined by this profile.
    Profile(Profile),
}

/// A server's own labels for its tools, used by the injection containment. `None`: the
/// server said nothing, and the host decides from the tools. In moat.toml these are plain
/// keys of the server's table: `untrusted = true`, `private = true`, `sink = true`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrustLabels {
    /// Its tools return content from outside (web pages, issues, mail): possible injection.
    pub untrusted: Option<bool>,
    /// Its tools read private data.
    pub private: Option<bool>,
    /// Its tools can send data out or change things.
    pub sink: Option<bool>,
}

impl ServerConfig {
    /// What this server's tool and prompt names start with towards the client.
    pub fn exposed_prefix(&self) -> String {
        match &self.prefix {
            Some(prefix) => prefix.clone(),
            None => format!("{}{}", self.name, crate::naming::SEPARATOR),
        }
    }

    /// A command server with the default sandbox profile (reading the current directory) and
    /// no other settings.
    pub fn command(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        ServerConfig {
            name: name.into(),
            transport: ServerTransport::Command {
                command: command.into(),
                args,
                env: BTreeMap::new(),
                cwd: None,
            },
            sandbox: SandboxSetting::Profile(default_profile(&current_dir(), None)),
            enabled: true,
            call_timeout: None,
            trust: TrustLabels::default(),
            prefix: None,
            protocol: Default::default(),
            imported_from: None,
            auth: None,
        }
    }

    /// A URL server (transport `auto`, no headers).
    pub fn url(name: impl Into<String>, url: impl Into<String>) -> Self {
        ServerConfig {
            name: name.into(),
            transport: ServerTransport::Url {
                url: url.into(),
                headers: BTreeMap::new(),
                transport: UrlTransport::Auto,
            },
            sandbox: SandboxSetting::Off,
            enabled: true,
            call_timeout: None,
            trust: TrustLabels::default(),
            prefix: None,
            protocol: Default::default(),
            imported_from: None,
            auth: None,
        }
    }

    /// The sandbox profile to start this server with: `None` for URL servers and for
    /// `sandbox = false`.
    pub fn profile(&self) -> Option<Profile> {
        match (&self.transport, &self.sandbox) {
            (ServerTransport::Command { .. }, SandboxSetting::Profile(p)) => Some(p.clone()),
            _ => None,
        }
    }
}

/// The profile of a command server that says nothing about its sandbox: the system
/// directories and `cwd` (else `base`, the config file's directory) read-only, no network,
/// namespaces, the sandbox's default environment pass-through. Unlike a one-shot command, a
/// server lives as long as the host, and its stdout is the protocol: no wall-clock limit and
/// no output cap.
pub fn default_profile(base: &Path, cwd: Option<&Path>) -> Profile {
    Profile {
        ro: vec![cwd.unwrap_or(base).to_path_buf()],
        system_ro: true,
        net: Net::None,
        namespaces: true,
        cwd: cwd.map(Path::to_path_buf),
        limits: Limits {
            timeout: None,
            output_bytes: None,
            ..Limits::default()
        },
        ..Profile::default()
    }
}

/// The process's working directory (`.` when it cannot be read).
pub(crate) fn current_dir() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

/// `[servers.NAME.auth]`: the credentials the gateway sends to a URL server. The caller's
/// own access token is never one of them (the MCP authorization spec forbids passing it
/// through): the server sees a secret of the gateway's ([`DownstreamAuth::Static`]) or a
/// token of the calling user's made for it ([`DownstreamAuth::Exchange`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DownstreamAuth {
    /// `mode = "static"`: one secret, sent as a header with every request.
    Static(StaticAuth),
    /// `mode = "exchange"`: each user's access token exchanged (RFC 8693) for one whose
    /// audience is this server.
    Exchange(ExchangeAuth),
    /// `mode = "oauth"`: the gateway is each user's OAuth client of this server; a user
    /// without a token is sent to authorize.
    OAuth(OAuthAuth),
}

impl DownstreamAuth {
    /// Whether each user gets credentials (and a connection) of their own.
    pub fn per_user(&self) -> bool {
        !matches!(self, DownstreamAuth::Static(_))
    }
}

/// A secret read from the environment or a file when the configuration loads; its `Debug`
/// shows no part of it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// The secret `value`.
    pub fn new(value: impl Into<String>) -> SecretValue {
        SecretValue(value.into())
    }

    /// The secret itself, for the request that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// `mode = "static"`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StaticAuth {
    /// The header's name (`Authorization` by default).
    pub header: String,
    /// What comes before the secret in the header's value: `Bearer ` for `Authorization`
    /// unless `scheme` says otherwise, nothing for another header.
    pub prefix: String,
    /// The secret.
    pub secret: SecretValue,
}

impl StaticAuth {
    /// The header's value.
    pub fn value(&self) -> String {
        format!("{}{}", self.prefix, self.secret.expose())
    }
}

/// `mode = "exchange"`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ExchangeAuth {
    /// The authorization server that exchanges: its metadata names the token endpoint.
    pub issuer: Option<String>,
    /// The token endpoint, when given rather than discovered.
    pub token_endpoint: Option<String>,
    /// The gateway's client at that server.
    pub client_id: String,
    /// Its secret.
    pub client_secret: SecretValue,
    /// `audience` of the exchange (none by default).
    pub audience: Option<String>,
    /// `resource` of the exchange (RFC 8707): by default the server's URL.
    pub resource: String,
    /// `scope` to ask for (none by default: what the server grants).
    pub scope: Option<String>,
    /// How long a user's own connection may go unused before it is closed.
    pub idle_timeout: std::time::Duration,
}

/// `mode = "oauth"`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OAuthAuth {
    /// The redirect URI: the gateway listens on its host and port for the authorization
    /// server's redirect back.
    pub callback: String,
    /// A client registered ahead of time (else the server's CIMD or DCR).
    pub client_id: Option<String>,
    /// Its secret; with it, the server's shared connection uses the client credentials
    /// grant.
    pub client_secret: Option<SecretValue>,
    /// The key of the tokens at rest, from the environment (64 hex digits).
    pub key: Option<SecretValue>,
    /// The key file (default: `downstream-tokens/key` in the state directory).
    pub key_file: Option<PathBuf>,
    /// How long a user's own connection may go unused before it is closed.
    pub idle_timeout: std::time::Duration,
}
