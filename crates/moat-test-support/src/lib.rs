//! What moat's black-box test suites share, so that each suite keeps only what is its own:
//!
//! - [`run`](mod@run): a command run with a deadline in a process group (or session) of its own,
//!   its output captured, so that a failure shows the command line, exit code and streams;
//! - [`lines`]: a raw JSON-lines driver for a process's stdio, with reads that time out;
//! - [`procs`]: the process tree under a pid (to find a server, check for zombies, and
//!   kill everything a test started);
//! - [`interop`]: where the interop peers (the TypeScript and Python SDKs) are installed,
//!   and their clients' command lines;
//! - [`json`]: reading the JSON the SDK clients print;
//! - [`listening`]: a server started for a test, ready once its stderr says where it
//!   listens;
//! - [`gateway`]: `moat gateway --http` started for a test and ended with everything it ran;
//! - [`issuer`]: a loopback OAuth issuer that signs access tokens for the users a test names;
//! - [`raw_http`]: HTTP requests written by hand (health probes, 2026-07-28 requests).
//!
//! A dev-dependency only (`publish = false`). It does not depend on `moat`, so the SDK's
//! own suites can use it too; the `moat` binary's path is passed in by each suite
//! (`env!("CARGO_BIN_EXE_moat")` exists only in the crate that builds it).

pub mod gateway;
pub mod interop;
pub mod issuer;
pub mod json;
pub mod lines;
pub mod listening;
pub mod procs;
pub mod raw_http;
pub mod run;

pub use gateway::{HttpGateway, Ready};
pub use interop::{Peers, interop_dir, peers, script};
pub use issuer::TestIssuer;
pub use lines::Lines;
pub use listening::{Listening, mcp_authority};
pub use procs::{alive, children, descendants, kill_group, kill_pid, kill_tree};
pub use run::{
    Leftovers, Run, Running, collect_output, command_line, detach, run, shell_quote, spawn_reader,
    truncate,
};
