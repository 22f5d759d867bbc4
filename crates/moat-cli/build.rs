//! Links `moat` with packed relative relocations (`DT_RELR`) where the C library that will
//! load it understands them.
//!
//! `moat` is a position-independent executable with about 50,000 pointers to fix up at
//! load time. As classic `RELA` entries (24 bytes each) they take over a megabyte, which
//! the loader reads in full and which then stays resident in every moat process (the
//! gateway and each built-in server it supervises). Packed, they take about 20 KB. glibc learnt the format in 2.36;
//! an older loader would ignore it and run with unrelocated pointers, so the flag is only
//! passed when building natively against glibc 2.36 or newer. Cross builds and other C
//! libraries keep the classic format.

use std::ffi::CStr;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let native = var("HOST") == var("TARGET");
    if native
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && glibc_at_least(2, 36)
    {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
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
