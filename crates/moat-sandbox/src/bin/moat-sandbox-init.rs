//! A stand-alone sandbox helper: what `moat __sandbox-init` does, for users of the library
//! that do not ship the `moat` binary (and for this crate's tests).

fn main() {
    moat_sandbox::helper_main();
    eprintln!("moat-sandbox-init: run by moat-sandbox, not by hand");
    std::process::exit(2);
}
