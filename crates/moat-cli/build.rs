//! Two link settings that keep each moat process small.
//!
//! **Hot functions together.** The kernel maps a binary's code in 64 KiB windows around
//! each page that runs. A gateway runs about 3 MB of moat's 20 MB of code, but spread over
//! the binary that touches most windows (12-13 MB resident); `hot-symbols.txt` (written by
//! `scripts/hot-symbols.py` from a profile of a gateway and a server) lists those functions
//! and the release link places them side by side. Only with `rust-lld`, the default linker
//! of x86_64 Linux since Rust 1.90, unless the build names another; names the list has but
//! the build does not (another toolchain, upgraded dependencies) are skipped quietly.
//!
//! **Packed relocations.** `moat` is a position-independent executable with about 50,000
//! pointers to fix up at load time. As classic `RELA` entries (24 bytes each) they take
//! over a megabyte, which the loader reads in full and which then stays resident in every
//! moat process (the gateway and each built-in server it supervises). Packed (`DT_RELR`),
//! they take about 20 KB. glibc learnt the format in 2.36; an older loader would ignore it
//! and run with unrelocated pointers, so the flag is only passed when building natively
//! against glibc 2.36 or newer. Cross builds and other C libraries keep the classic format.
//!
//! It also sets `MOAT_VERSION`, what `moat --version` prints: with the commit and its date
//! in a git checkout (see `build/version.rs`).

use std::ffi::CStr;
use std::path::Path;
use std::process::Command;

#[path = "build/version.rs"]
mod version;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=hot-symbols.txt");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let checkout = version::checkout(Path::new(&var("CARGO_MANIFEST_DIR")));
    for file in checkout.iter().flat_map(|c| &c.watch) {
        println!("cargo::rerun-if-changed={}", file.display());
    }
    let described = version::describe(&var("CARGO_PKG_VERSION"), checkout.as_ref());
    println!("cargo::rustc-env=MOAT_VERSION={described}");
    let hot = Path::new(&var("CARGO_MANIFEST_DIR")).join("hot-symbols.txt");
    // Debug builds name their functions differently; the list is for the release profile.
    if var("PROFILE") == "release" && hot.exists() && links_with_rust_lld() {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            hot.display()
        );
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
    let native = var("HOST") == var("TARGET");
    if native
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && glibc_at_least(2, 36)
    {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether the link will use `rust-lld`: the target's default since Rust 1.90, and no
/// linker named in Cargo's configuration or the flags.
fn links_with_rust_lld() -> bool {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("TARGET") != "x86_64-unknown-linux-gnu"
        || std::env::var_os("RUSTC_LINKER").is_some()
        || var("CARGO_ENCODED_RUSTFLAGS").contains("link")
    {
        return false;
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("--version").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&out.stdout);
    let mut numbers = version
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    found >= (1, 90)
}

/// Whether the glibc this build script runs on (the one `moat` will be linked against,
/// as the build is native) is at least `major.minor`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_at_least(major: u32, minor: u32) -> bool {
    // SAFETY: gnu_get_libc_version returns a pointer to a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(libc::gnu_get_libc_version()) };
    let mut parts = version
        .to_str()
        .unwrap_or("")
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_at_least(_major: u32, _minor: u32) -> bool {
    false
}
