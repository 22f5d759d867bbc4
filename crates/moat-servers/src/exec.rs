//! The exec server (`moat serve exec`): one tool, `run_command`, that runs a command in a
//! sandbox of its own and says how it ended.
//!
//! Each call is one [`moat_sandbox`] run of the base [`Profile`] given in [`ExecOptions`]
//! (what the command may read, write and reach), with the call's working directory, its
//! timeout (at most [`ExecOptions::max_timeout`]) and the output cap. The command is an
//! argv, passed to `exec` as it is: a shell (`sh -c '…'`, also behind a wrapper such as
//! `env` or `busybox`) is refused unless [`ExecOptions::allow_shell`] is set. That is a
//! policy about what the model may ask for, not the security boundary: the sandbox confines
//! whatever runs, shell or not.
//!
//! While the command runs, a client that asked for progress gets a notification every
//! [`PROGRESS_INTERVAL`] with the time elapsed and the bytes of output so far (the output
//! itself comes with the result: the sandbox captures it, capped). A cancelled call (or
//! one whose handler is dropped, as the SDK does on `notifications/cancelled`) kills the
//! run's whole process group through [`RunControl`]. The result, as `structuredContent`
//! with an `outputSchema` ([`RunResult`]), says the exit status or signal, whether the
//! timeout or another limit was hit, the output and whether it was truncated.
//!
//! A root supervisor's commands never run as root: the sandbox runs them as uid 65534 (or
//! the profile's `uid`/`gid`; `run_as_root` keeps root), with sensitive system files
//! masked; what they create in a write path belongs on disk to that path's owner.
//!
//! What the sandbox cannot give: stdin (commands read end of file; the sandbox passes no
//! input to captured runs), and the output as it is written (it is counted as it arrives,
//! returned at the end).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use moat::schemars::{self, JsonSchema};
use moat::types::{Tool, ToolAnnotations};
use moat::{Json, RequestContext, Server};
use moat_sandbox::{LimitHit, Net, Profile, RunControl, Sandbox, Termination};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The tool's name.
pub const TOOL: &str = "run_command";

/// How often a running command's progress is reported (to clients that ask for it).
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// Programs refused as a command (or as the program a wrapper runs with `-c`) unless
/// [`ExecOptions::allow_shell`]: they turn a string into commands.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "oksh", "ash", "yash", "fish",
    "csh", "tcsh", "rbash", "posh", "nu", "xonsh", "elvish", "pwsh",
];

/// How the exec server runs commands.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExecOptions {
    /// The sandbox helper binary (one that calls [`moat_sandbox::helper_main`] first in
    /// `main`). `None`: the running binary, as for `moat`.
    pub helper: Option<PathBuf>,
    /// The base profile of every run: read-only and read-write paths, network, environment
    /// and limits. Each call sets its working directory, timeout and output cap over it.
    pub profile: Profile,
    /// Whether a shell may be the command (`sh -c 'a | b'`). Off by default.
    pub allow_shell: bool,
    /// The timeout of a call that names none.
    pub default_timeout: Duration,
    /// The longest timeout a call may ask for.
    pub max_timeout: Duration,
    /// Bytes of stdout plus stderr kept; past this the command is killed and the result
    /// says `truncated`.
    pub output_cap: u64,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            helper: None,
            profile: Profile::default(),
            allow_shell: false,
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(600),
            output_cap: 256 * 1024,
        }
    }
}

/// Why the exec server could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The sandbox helper could not be located.
    #[error("cannot find the sandbox helper: {0}")]
    Helper(#[source] moat_sandbox::Error),
    /// The base profile names a path that does not exist, or a limit of zero.
    #[error("invalid sandbox profile: {0}")]
    Profile(#[source] moat_sandbox::Error),
    /// The timeouts or the output cap make no sense.
    #[error("invalid exec options: {0}")]
    Options(String),
}

/// The arguments of `run_command`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunCommand {
    /// The program and its arguments (described in [`ARGV`]).
    #[schemars(length(min = 1))]
    argv: Vec<String>,
    /// Working directory (filled in by `server`).
    #[serde(default)]
    cwd: Option<String>,
    /// Timeout in seconds (filled in by `server`).
    #[serde(default)]
    timeout_secs: Option<f64>,
}

/// The description of `argv`, on one line (a doc comment's line breaks would reach the
/// schema).
const ARGV: &str = "The program and its arguments, one string each, passed to exec as they \
                    are (no shell parsing: no pipes, globs, variables or quoting), e.g. \
                    [\"ls\", \"-la\", \"/etc\"]. The program is looked up on PATH.";

/// A limit a run ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Limit {
    /// The timeout: the command was killed.
    Timeout,
    /// The output cap: the command was killed and its output truncated.
    Output,
    /// CPU time.
    Cpu,
    /// Memory.
    Memory,
    /// The number of processes.
    Pids,
    /// A limit this version does not name.
    Other,
}

/// What `run_command` returns as `structuredContent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct RunResult {
    /// The exit status, when the command exited (null when a signal killed it).
    pub exit_code: Option<i32>,
    /// The signal that killed the command, if one did (9 when the sandbox killed it for a
    /// limit).
    pub signal: Option<i32>,
    /// Whether the timeout killed it.
    pub timed_out: bool,
    /// The limit it ran into, if any.
    pub limit_hit: Option<Limit>,
    /// Its standard output (invalid UTF-8 replaced), up to the cap.
    pub stdout: String,
    /// Its standard error (invalid UTF-8 replaced), up to the cap.
    pub stderr: String,
    /// Whether the output was cut at the cap (the command was then killed).
    pub truncated: bool,
    /// Wall-clock time in milliseconds.
    pub wall_ms: u64,
}

/// Everything a call needs, shared by the calls.
struct Exec {
    sandbox: Sandbox,
    /// The base profile, resolved: paths absolute, symlinks followed.
    profile: Profile,
    allow_shell: bool,
    default_timeout: Duration,
    max_timeout: Duration,
    output_cap: u64,
}

/// Builds the exec server. Starts nothing: the sandbox helper is started by the first call.
pub fn server(options: ExecOptions) -> Result<Server, ExecError> {
    let sandbox = match &options.helper {
        Some(path) => Sandbox::with_helper(path),
        None => Sandbox::new().map_err(ExecError::Helper)?,
    };
    let profile = options.profile.resolved().map_err(ExecError::Profile)?;
    if options.default_timeout.is_zero() || options.default_timeout > options.max_timeout {
        return Err(ExecError::Options(format!(
            "default_timeout ({:?}) must be positive and at most max_timeout ({:?})",
            options.default_timeout, options.max_timeout
        )));
    }
    if options.output_cap == 0 {
        return Err(ExecError::Options("output_cap must be at least 1".into()));
    }
    let exec = Arc::new(Exec {
        sandbox,
        profile,
        allow_shell: options.allow_shell,
        default_timeout: options.default_timeout,
        max_timeout: options.max_timeout,
        output_cap: options.output_cap,
    });
    let def = exec.tool();
    Ok(
        Server::new("moat-exec", env!("CARGO_PKG_VERSION")).tool_def(
            def,
            move |ctx: RequestContext, args: RunCommand| {
                let exec = Arc::clone(&exec);
                async move { exec.run(ctx, args).await.map(Json) }
            },
        ),
    )
}

impl Exec {
    /// The tool's definition: the schema's descriptions say this server's actual paths,
    /// timeouts and cap, so the model need not guess them.
    fn tool(&self) -> Tool {
        let p = &self.profile;
        let dirs = self.allowed_dirs();
        let shell = if self.allow_shell {
            "A shell may be the program (e.g. [\"sh\", \"-c\", \"a | b\"])."
        } else {
            "Shells are refused: give the program and its arguments directly."
        };
        let net = match &p.net {
            Net::None => "no network".to_string(),
            Net::Host => "the host's network".to_string(),
            Net::Allow(list) => format!(
                "network only to {}",
                list.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "a restricted network".to_string(),
        };
        let description = format!(
            "Run a command in a sandbox of its own and return its exit status, output and the \
             limits it hit. The command sees the system directories read-only, {ro}, {rw}, \
             {net}, and (where the machine allows) a private /tmp. {shell} Output is capped \
             at {cap} bytes (the command is killed past it); the timeout is {default} s \
             unless given (at most {max} s).",
            ro = describe_paths(&p.ro, "read-only"),
            rw = describe_paths(&p.rw, "read-write"),
            cap = self.output_cap,
            default = self.default_timeout.as_secs_f64(),
            max = self.max_timeout.as_secs_f64(),
        );
        let mut schema = moat::schema::input_schema::<RunCommand>();
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            let cwd = match self.default_cwd() {
                Some(d) => format!(
                    "Working directory: absolute, or relative to {} (the default). Must be \
                     inside {}.",
                    d.display(),
                    dirs
                ),
                None => "Working directory (none may be given: the sandbox has no directory \
                         of its own to work in; the default is /)."
                    .to_string(),
            };
            set_description(props.get_mut("argv"), ARGV);
            set_description(props.get_mut("cwd"), &cwd);
            set_description(
                props.get_mut("timeout_secs"),
                &format!(
                    "Seconds before the command is killed (default {}, at most {}).",
                    self.default_timeout.as_secs_f64(),
                    self.max_timeout.as_secs_f64()
                ),
            );
        }
        Tool::new(TOOL, schema)
            .with_title("Run a command (sandboxed)")
            .with_description(description)
            .with_annotations(ToolAnnotations {
                title: Some("Run a command (sandboxed)".into()),
                read_only_hint: Some(false),
                // It may write, delete or overwrite anything under the read-write paths.
                destructive_hint: Some(true),
                idempotent_hint: Some(false),
                open_world_hint: Some(p.net != Net::None),
            })
    }

    async fn run(&self, ctx: RequestContext, args: RunCommand) -> Result<RunResult, String> {
        if args.argv.is_empty() {
            return Err("argv is empty: give the program and its arguments, e.g. \
                        [\"ls\", \"-la\"]"
                .into());
        }
        if !self.allow_shell
            && let Some(shell) = shell_in(&args.argv)
        {
            return Err(format!(
                "refused: {shell} is a shell, and this server runs argv only (no shell \
                 strings). Run the program directly, e.g. [\"ls\", \"-la\", \"/etc\"] rather \
                 than [\"sh\", \"-c\", \"ls -la /etc\"]; split pipelines into separate calls."
            ));
        }
        let timeout = self.timeout(args.timeout_secs)?;
        let cwd = self.cwd(args.cwd.as_deref())?;
        let mut profile = self.profile.clone();
        profile.cwd = Some(cwd);
        profile.limits.timeout = Some(timeout);
        profile.limits.output_bytes = Some(self.output_cap);

        let control = RunControl::new().map_err(|e| format!("could not start the run: {e}"))?;
        // The SDK drops this future when the client cancels: the guard then kills the run,
        // which the blocking thread would otherwise wait out.
        let _kill = KillOnDrop(control.clone());
        let sandbox = self.sandbox.clone();
        let argv = args.argv;
        let theirs = control.clone();
        tracing::debug!(?argv, cwd = ?profile.cwd, ?timeout, "run_command");
        let mut task =
            tokio::task::spawn_blocking(move || sandbox.spawn_with(&profile, &argv, &theirs));
        let start = Instant::now();
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + PROGRESS_INTERVAL,
            PROGRESS_INTERVAL,
        );
        let joined = loop {
            tokio::select! {
                joined = &mut task => break joined,
                () = ctx.cancelled(), if !control.is_cancelled() => control.cancel(),
                _ = tick.tick() => {
                    let elapsed = start.elapsed().as_secs_f64();
                    let message = format!(
                        "{} bytes of output so far, {elapsed:.0} s elapsed",
                        control.output_bytes()
                    );
                    ctx.progress(elapsed, Some(timeout.as_secs_f64()), Some(message)).await;
                }
            }
        };
        let outcome = match joined {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "run_command could not run");
                return Err(format!("the command could not be run: {e}"));
            }
            Err(e) => return Err(format!("the run's supervisor failed: {e}")),
        };
        let (exit_code, signal) = match outcome.termination {
            Termination::Exited(code) => (Some(code), None),
            Termination::Signaled(sig) => (None, Some(sig)),
            _ => (None, None),
        };
        let limit_hit = outcome.limit_hit.map(|l| match l {
            LimitHit::Timeout => Limit::Timeout,
            LimitHit::Output => Limit::Output,
            LimitHit::Cpu => Limit::Cpu,
            LimitHit::Memory => Limit::Memory,
            LimitHit::Pids => Limit::Pids,
            _ => Limit::Other,
        });
        Ok(RunResult {
            exit_code,
            signal,
            timed_out: limit_hit == Some(Limit::Timeout),
            limit_hit,
            stdout: String::from_utf8_lossy(&outcome.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&outcome.stderr).into_owned(),
            truncated: outcome.truncated,
            wall_ms: u64::try_from(outcome.wall_time.as_millis()).unwrap_or(u64::MAX),
        })
    }

    fn timeout(&self, secs: Option<f64>) -> Result<Duration, String> {
        let Some(secs) = secs else {
            return Ok(self.default_timeout);
        };
        let max = self.max_timeout.as_secs_f64();
        if !secs.is_finite() || secs <= 0.0 || secs > max {
            return Err(format!(
                "timeout_secs must be more than 0 and at most {max} (got {secs}); leave it out \
                 for the default of {} s",
                self.default_timeout.as_secs_f64()
            ));
        }
        // At least a millisecond: the sandbox takes whole milliseconds, and zero is refused.
        Ok(Duration::from_secs_f64(secs).max(Duration::from_millis(1)))
    }

    /// Where a call works when it names no directory: the profile's own, else the first
    /// read-write path, else the first read-only one.
    fn default_cwd(&self) -> Option<&Path> {
        let p = &self.profile;
        p.cwd
            .as_deref()
            .or(p.rw.first().map(PathBuf::as_path))
            .or(p.ro.first().map(PathBuf::as_path))
    }

    /// The call's working directory, which must lie in the profile's paths: a directory the
    /// command cannot see would fail anyway, later and less clearly.
    fn cwd(&self, asked: Option<&str>) -> Result<PathBuf, String> {
        let base = self.default_cwd();
        let Some(asked) = asked else {
            return Ok(base.map_or_else(|| PathBuf::from("/"), Path::to_path_buf));
        };
        let joined = match base {
            Some(base) => base.join(asked),
            None => PathBuf::from(asked),
        };
        let refuse = || {
            format!(
                "cwd {asked} is not a directory inside {}: choose one there",
                self.allowed_dirs()
            )
        };
        // Resolved as the profile's paths are (symlinks followed), so `..` and links out are
        // judged by where they land.
        let real = std::fs::canonicalize(&joined).map_err(|_| refuse())?;
        let inside = self
            .profile
            .ro
            .iter()
            .chain(&self.profile.rw)
            .any(|root| real.starts_with(root));
        if !inside || !real.is_dir() {
            return Err(refuse());
        }
        Ok(real)
    }

    fn allowed_dirs(&self) -> String {
        let all: Vec<String> = self
            .profile
            .ro
            .iter()
            .chain(&self.profile.rw)
            .map(|p| p.display().to_string())
            .collect();
        if all.is_empty() {
            "no directory (this sandbox has none of its own)".into()
        } else {
            all.join(", ")
        }
    }
}

/// Kills the run when the call's future goes away (cancellation, connection closed).
struct KillOnDrop(RunControl);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

fn set_description(prop: Option<&mut Value>, text: &str) {
    if let Some(obj) = prop.and_then(Value::as_object_mut) {
        obj.insert("description".into(), Value::String(text.into()));
    }
}

fn describe_paths(paths: &[PathBuf], how: &str) -> String {
    if paths.is_empty() {
        format!("no other {how} paths")
    } else {
        let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        format!("{} {how}", list.join(", "))
    }
}

/// The shell `argv` runs, if any: as the program itself, or after a wrapper (`env sh -c`,
/// `busybox sh -c`, `timeout 5 bash -c`, `find … -exec sh -c`) with a `-c`-style option.
fn shell_in(argv: &[String]) -> Option<&str> {
    let is_shell = |arg: &str| {
        let name = Path::new(arg)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(arg);
        SHELLS.contains(&name)
    };
    // `-c`, `-lc`, `-ec`, `--command`, `-Command` (pwsh).
    let runs_string = |arg: &str| {
        arg == "--command"
            || arg.eq_ignore_ascii_case("-command")
            || (arg.len() > 1
                && arg.starts_with('-')
                && !arg.starts_with("--")
                && arg[1..].chars().all(|c| c.is_ascii_alphabetic())
                && arg.contains('c'))
    };
    let (first, rest) = argv.split_first()?;
    if is_shell(first) {
        return Some(first);
    }
    rest.iter().enumerate().find_map(|(i, arg)| {
        (is_shell(arg) && rest[i + 1..].iter().any(|a| runs_string(a))).then_some(arg.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shells_are_found_as_the_program_or_behind_a_wrapper() {
        for refused in [
            &["sh", "-c", "id"][..],
            &["/bin/sh", "-c", "id"],
            &["/usr/bin/bash", "-lc", "id"],
            &["dash"],
            &["zsh", "script.zsh"],
            &["env", "sh", "-c", "id"],
            &["busybox", "sh", "-c", "id"],
            &["timeout", "5", "bash", "-ec", "id"],
            &["find", ".", "-exec", "sh", "-c", "id", ";"],
            &["env", "FOO=1", "/bin/dash", "-c", "id"],
        ] {
            assert!(shell_in(&argv(refused)).is_some(), "{refused:?}");
        }
        for allowed in [
            &["ls", "-la", "/etc"][..],
            &["grep", "-c", "sh", "file"],
            &["echo", "sh"],
            &["python3", "-c", "print(1)"],
            &["shellcheck", "x.sh"],
        ] {
            assert!(shell_in(&argv(allowed)).is_none(), "{allowed:?}");
        }
    }
}
