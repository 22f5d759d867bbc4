//! The helper's entry. A binary that calls [`helper_main`] first thing in `main` becomes,
//! when started as `<helper> __sandbox-init zygote`, the zygote (see `zygote.rs`): a
//! single-threaded process that forks one child per run (see `child.rs`).

use crate::run::{HELPER_ARG, SETUP_FAILED, is_no_spare_arg, is_zygote_arg};

/// If this process was started as the sandbox helper (first argument [`HELPER_ARG`]),
/// serves as the zygote and never returns. Otherwise returns at once.
///
/// Call it first thing in `main`, before any thread (an async runtime, a logger) is started.
pub fn helper_main() {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(HELPER_ARG)) {
        return;
    }
    if is_zygote_arg(args.next().as_deref()) {
        crate::zygote::serve(!is_no_spare_arg(args.next().as_deref()))
    }
    eprintln!("moat-sandbox-init: started by moat-sandbox only");
    std::process::exit(SETUP_FAILED)
}
