//! The command-line grammar (clap derive). Kept apart from what the commands do.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// moat: a fast, strict Model Context Protocol (MCP) stack.
///
/// Talk to any MCP server from the shell, or run moat's built-in servers.
#[derive(Debug, Parser)]
#[command(name = "moat", version, propagate_version = true, after_help = EXAMPLES)]
pub struct Cli {
    /// More logging on stderr (-v info, -vv debug, -vvv trace). MOAT_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

const EXAMPLES: &str = "\
Examples:
  moat demo
  moat tools -- npx -y @modelcontextprotocol/server-everything
  moat call echo --args '{\"message\":\"hi\"}' -- npx -y @modelcontextprotocol/server-everything
  moat read test://static-text -- moat serve everything
  moat tools --json --protocol 2025-06-18 -- python -m mcp_server_time
  moat sandbox --check
  moat sandbox --ro . --net none --timeout 10 -- ls -la

Exit codes: 0 ok, 1 usage error, 2 connection or protocol failure, 3 the tool returned isError;
`moat sandbox` exits with the command's own status (128+N if signal N killed it).";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// A tour: moat's client and its built-in server, every revision, bad input, a crash.
    Demo(DemoArgs),
    /// Run a built-in MCP server on stdin/stdout, or over HTTP with --http.
    #[command(after_help = "Examples:\n  \
        moat serve everything                          # stdio, for a client that launches it\n  \
        moat serve everything --http 8080              # http://127.0.0.1:8080/mcp, every revision\n  \
        moat serve everything --http 8080 --stateless  # 2026-07-28 only, no sessions\n  \
        moat serve everything --http 0.0.0.0:8080 --token \"$TOKEN\"   # off loopback: a token is required")]
    Serve(ServeArgs),
    /// List a server's tools.
    Tools(ListArgs),
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
    /// Run a command confined by namespaces, Landlock, seccomp and resource limits.
    Sandbox(SandboxArgs),
}

/// Which built-in server to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BuiltinServer {
    /// The conformance fixture: every kind of tool, resource and prompt.
    Everything,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print a JSON summary instead of the tour.
    #[arg(long)]
    pub json: bool,
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
    /// With --http: also accept this host name in Host and Origin (DNS-rebinding
    /// protection accepts only localhost names by default). Repeatable.
    #[arg(long, value_name = "HOST", requires = "http")]
    pub allow_host: Vec<String>,
    /// With --http: also accept requests from this browser origin (e.g.
    /// https://app.example). Repeatable.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub allow_origin: Vec<String>,
    /// With --http: close sessions idle for this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 1800, requires = "http")]
    pub session_idle: u64,
}

/// How to reach the server: a URL, or a command after `--`.
#[derive(Debug, Args)]
pub struct Target {
    /// Protocol revision to speak: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25,
    /// 2026-07-28, or auto (try 2026-07-28, fall back to the newest handshake revision).
    #[arg(long, value_name = "REV", default_value = "auto")]
    pub protocol: String,
    /// Seconds to wait for each answer from the server.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub timeout: u64,
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
    /// The server's command line, after `--` (e.g. `-- npx -y @modelcontextprotocol/server-everything`).
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

/// Network access inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SandboxNet {
    /// No network (only Unix sockets).
    None,
    /// The host's network.
    Host,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Profiles: --profile takes a whole profile as JSON (moat_sandbox::Profile: ro, rw, system_ro,
net, namespaces, env, cwd, limits {timeout_ms, cpu_seconds, memory_bytes, pids, open_files,
output_bytes}), inline if it starts with `{`, else the path of a file holding it. Fields it
leaves out take their defaults. With it, --ro, --rw and --env add to its lists, --timeout,
--memory, --pids and --cpu replace its limits, and --net or --allow-net are refused (say the
network in the profile).

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
    /// Network access (none: loopback only; host: the host's network, unfiltered).
    /// Default: none.
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
    /// Wall-clock limit in seconds. Default: 60, or none with --stdio.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
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
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}
