//! The `moat` binary: a thin command-line layer over the moat crates.
//!
//! Exit codes: 0 success, 1 usage error, 2 connection or protocol failure,
//! 3 the tool ran and reported an error (`isError`). A command whose stdout is closed
//! before it has printed everything (`moat tools … | head`) stops printing and ends quietly,
//! as Unix filters do, with the code it would have had otherwise.

mod busy_poll;
mod cli;
mod cmd;
mod logging;
mod output;
mod schema_text;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

/// What went wrong, mapped to an exit code.
#[derive(Debug)]
pub enum Failure {
    /// Bad arguments: exit 1.
    Usage(anyhow::Error),
    /// Could not connect, or the peer broke the protocol: exit 2.
    Connection(anyhow::Error),
    /// The tool reported an error: exit 3 (already printed).
    ToolError,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Connection(e.into())
    }
}

fn main() -> ExitCode {
    // `moat __sandbox-init …`: the sandbox helper confines itself and execs; never returns.
    moat_sandbox::helper_main();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if let Command::Sandbox(args) = &cli.command
        && !args.check
    {
        // One command to run: its sandbox helper (the zygote) is forked from this process,
        // still single-threaded here, rather than exec'd (loading this binary again), and
        // gets ready while the rest starts; no spare PID 1 for a single run. If it cannot
        // be, the first run execs the helper as usual.
        let _ = moat_sandbox::Sandbox::new().and_then(|s| s.start_here(false));
    }
    // The gateway's subscriber waits for its configuration's `[telemetry]` (read below).
    let later = matches!(cli.command, Command::Gateway(_));
    logging::init(cli.verbose, cli.log_format, later);
    if let Command::Sandbox(args) = cli.command {
        // No async runtime: the run is supervised on this thread (see cmd::sandbox).
        return exit_code(cmd::sandbox::run(args));
    }
    if dies_of_sigpipe(&cli.command) {
        // `moat audit` and `moat pins` print with `println!` and write to no other pipe:
        // like Unix filters, they end quietly when their reader goes away (`moat audit |
        // head`). Every other command keeps Rust's default, SIGPIPE ignored: the client
        // commands write to a server's stdin too, and a server that died must be an EPIPE
        // the transport reports (with the server's exit status and last words), not a
        // silent death of moat. They handle EPIPE on their own stdout in `output::to_stdout`.
        // SAFETY: called before any thread exists; SIG_DFL is a valid disposition.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let mut builder = if one_peer_over_stdio(&cli.command) {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    // A stdio gateway polls briefly before sleeping (see busy_poll.rs); nothing else does.
    let busy_poll = match &cli.command {
        Command::Gateway(args) if args.http.is_none() && args.busy_poll > 0 => Some(
            busy_poll::BusyPoll::new(std::time::Duration::from_micros(args.busy_poll)),
        ),
        _ => None,
    };
    if let Some(hook) = busy_poll.clone() {
        builder.on_thread_park(move || hook.before_park());
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let traces = if later {
        let telemetry = match &cli.command {
            Command::Gateway(args) => cmd::gateway::telemetry(args),
            _ => None,
        };
        match logging::install(telemetry.as_ref()) {
            Ok(traces) => traces,
            Err(e) => return exit_code(Err(Failure::Usage(e))),
        }
    } else {
        None
    };
    if let Some(busy_poll) = &busy_poll {
        busy_poll.arm();
    }
    let outcome = runtime.block_on(async move {
        let outcome = run(cli.command).await;
        logging::finish(traces).await;
        outcome
    });
    // Do not wait for tasks still blocked on stdin reads.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    exit_code(outcome)
}

/// The exit code of a command's outcome, the error printed.
fn exit_code(outcome: Result<(), Failure>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
        Err(Failure::Connection(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
        Err(Failure::ToolError) => ExitCode::from(3),
    }
}

/// Whether the command serves one peer over stdio: a gateway or a built-in server that a
/// client launched. Their work is moving messages between processes, which one thread does
/// with fewer wake-ups between cores per message and a single malloc arena instead of one
/// per worker thread (see docs/benchmarks.md, the gateway's memory). Over HTTP, with many
/// clients, they keep a worker per core.
fn one_peer_over_stdio(command: &Command) -> bool {
    match command {
        Command::Gateway(args) => args.http.is_none(),
        Command::Serve(args) => args.http.is_none(),
        _ => false,
    }
}

/// Whether the command may simply die of SIGPIPE when its stdout is closed: it prints a
/// result and never writes to another process (the client commands do: see `main`).
fn dies_of_sigpipe(command: &Command) -> bool {
    matches!(command, Command::Audit(_) | Command::Pins(_))
}

async fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Demo(args) if args.chat => cmd::chat::demo::run(args).await,
        Command::Demo(args) => cmd::demo::run(args).await,
        Command::Chat(args) => cmd::chat::run(args).await,
        Command::Serve(args) => cmd::serve::run(args).await,
        Command::Tools(args) => cmd::client::tools(args).await,
        Command::Call(args) => cmd::client::call(args).await,
        Command::Resources(args) => cmd::client::resources(args).await,
        Command::Read(args) => cmd::client::read(args).await,
        Command::Prompts(args) => cmd::client::prompts(args).await,
        Command::Prompt(args) => cmd::client::prompt(args).await,
        Command::Skills(args) => cmd::skills::skills(args).await,
        Command::Skill(args) => cmd::skills::skill(args).await,
        Command::Sandbox(args) => cmd::sandbox::run(args),
        Command::Gateway(args) => cmd::gateway::run(args).await,
        Command::Audit(args) => cmd::state::audit(args).await,
        Command::Pins(args) => cmd::state::pins(args).await,
        Command::Model(args) => cmd::model::run(args).await,
        Command::Completions(args) => cmd::completions::run(args),
        Command::Man(args) => cmd::man::run(args),
    }
}
