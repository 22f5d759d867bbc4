//! `moat man`: manual pages (roff) for the whole command tree, generated from the grammar
//! the binary parses (`cli.rs`). On stdout, every page one after the other (`moat man |
//! man -l -`); with `--dir`, one file per command, `moat.1`, `moat-serve.1`, …, to install
//! under a `man1` directory.

use anyhow::Context;
use clap::CommandFactory;

use crate::Failure;
use crate::cli::{Cli, ManArgs};
use crate::output;

/// Print the pages, or write them into `--dir`.
pub fn run(args: ManArgs) -> Result<(), Failure> {
    let Some(dir) = args.dir else {
        let mut pages = Vec::new();
        for command in tree() {
            clap_mangen::Man::new(command)
                .render(&mut pages)
                .context("could not render a manual page")?;
        }
        return output::to_stdout(|out| out.write_all(&pages));
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    for command in tree() {
        let page = clap_mangen::Man::new(command);
        let path = dir.join(page.get_filename());
        let mut file = Vec::new();
        page.render(&mut file)
            .context("could not render a manual page")?;
        std::fs::write(&path, file)
            .with_context(|| format!("could not write {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

/// `moat` and every subcommand under it, parents first. Built once, so that each
/// subcommand carries its full name (`moat-pins-approve`) and usage line; `help` is not a
/// page of its own.
fn tree() -> Vec<clap::Command> {
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    let mut pages = Vec::new();
    let mut stack = vec![root];
    while let Some(command) = stack.pop() {
        let children: Vec<_> = command
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .cloned()
            .collect();
        pages.push(command);
        stack.extend(children.into_iter().rev());
    }
    pages
}
