//! `moat completions SHELL`: the shell's completion script for the whole command tree,
//! generated from the same grammar the binary parses (`cli.rs`), so it cannot go stale.

use clap::CommandFactory;

use crate::Failure;
use crate::cli::{Cli, CompletionsArgs};
use crate::output;

/// Print the completion script on stdout.
pub fn run(args: CompletionsArgs) -> Result<(), Failure> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "moat", &mut script);
    output::to_stdout(|out| out.write_all(&script))
}
