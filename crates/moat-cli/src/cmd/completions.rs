//! `moat completions SHELL`: the shell's completion script for the whole command tree,
//! generated from the same grammar the binary parses (`cli.rs`), so it cannot go stale.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::Failure;
use crate::cli::Cli;
use crate::output;

/// Arguments of `moat completions`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    moat completions bash > ~/.local/share/bash-completion/completions/moat\n  \
    moat completions zsh > ~/.zfunc/_moat        # with fpath+=(~/.zfunc) before compinit\n  \
    moat completions fish > ~/.config/fish/completions/moat.fish")]
pub struct CompletionsArgs {
    /// The shell to write the script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Print the completion script on stdout.
pub fn run(args: CompletionsArgs) -> Result<(), Failure> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "moat", &mut script);
    output::to_stdout(|out| out.write_all(&script))
}
