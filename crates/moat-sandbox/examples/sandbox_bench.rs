//! Spawn-to-exit time of `/bin/true` and `ls /etc`: plain `std::process`, moat-sandbox
//! without namespaces (Landlock, seccomp, rlimits), moat-sandbox with all layers
//! (namespaces and the mount tree too), the same with a network allow-list (its proxy and
//! shim), and `bwrap --ro-bind / / --unshare-all --dev /dev
//! --proc /proc` (skipped if `bwrap` is not installed), in one run, rounds interleaved.
//!
//! ```sh
//! cargo run --release -p moat-sandbox --example sandbox_bench -- [ROUNDS]
//! ```
//!
//! This binary is its own sandbox helper (it calls `helper_main` first).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use moat_sandbox::{Net, Profile, Sandbox};

type Runner = Box<dyn Fn(&[&str]) -> bool>;

fn main() {
    moat_sandbox::helper_main();
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let sandbox = Sandbox::new().expect("the current executable");
    let ns = sandbox.namespaces_work();
    let bwrap = Command::new("bwrap")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());

    let mut variants: Vec<(String, Runner)> = vec![("plain (std::process)".into(), {
        Box::new(|argv: &[&str]| {
            Command::new(argv[0])
                .args(&argv[1..])
                .stdin(Stdio::null())
                .output()
                .is_ok_and(|o| o.status.success())
        })
    })];
    for namespaces in [false, true] {
        if namespaces && !ns {
            eprintln!("user namespaces refused here: no all-layers row");
            continue;
        }
        let name = if namespaces {
            "moat: all layers (namespaces + mount tree + Landlock + seccomp + rlimits)"
        } else {
            "moat: no namespaces (Landlock + seccomp + rlimits)"
        };
        let sandbox = sandbox.clone();
        let profile = Profile {
            namespaces,
            ..Profile::default()
        };
        variants.push((
            name.into(),
            Box::new(move |argv: &[&str]| {
                let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
                sandbox
                    .spawn(&profile, &argv)
                    .is_ok_and(|o| o.success() && o.enforcement.namespaces == namespaces)
            }),
        ));
    }
    if ns {
        // The same, plus the network allow-list: the proxy outside, loopback up and the shim
        // listening in PID 1 (an empty list: the command makes no connection).
        let sandbox = sandbox.clone();
        let profile = Profile {
            net: Net::Allow(Vec::new()),
            ..Profile::default()
        };
        variants.push((
            "moat: all layers + network allow-list (proxy + shim)".into(),
            Box::new(move |argv: &[&str]| {
                let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
                sandbox
                    .spawn(&profile, &argv)
                    .is_ok_and(|o| o.success() && o.enforcement.namespaces)
            }),
        ));
    }
    if bwrap {
        variants.push((
            "bwrap --ro-bind / / --unshare-all --dev /dev --proc /proc".into(),
            Box::new(|argv: &[&str]| {
                Command::new("bwrap")
                    .args([
                        "--ro-bind",
                        "/",
                        "/",
                        "--unshare-all",
                        "--dev",
                        "/dev",
                        "--proc",
                        "/proc",
                    ])
                    .args(argv)
                    .stdin(Stdio::null())
                    .output()
                    .is_ok_and(|o| o.status.success())
            }),
        ));
    } else {
        eprintln!("bwrap not found: no bubblewrap row");
    }

    println!("{rounds} runs each, rounds interleaved; milliseconds, spawn to exit");
    println!();
    println!("| command | variant | median | mean | p90 | min |");
    println!("|---|---|---:|---:|---:|---:|");
    for argv in [&["/bin/true"][..], &["ls", "/etc"][..]] {
        let mut times = vec![Vec::with_capacity(rounds); variants.len()];
        for (name, run) in &variants {
            // Warm up (and fail early).
            assert!(run(argv), "{name}: {argv:?} failed");
        }
        for _ in 0..rounds {
            for (i, (name, run)) in variants.iter().enumerate() {
                let start = Instant::now();
                let ok = run(argv);
                times[i].push(start.elapsed());
                assert!(ok, "{name}: {argv:?} failed");
            }
        }
        for ((name, _), mut t) in variants.iter().zip(times) {
            t.sort();
            let ms = |d: Duration| d.as_secs_f64() * 1000.0;
            let mean = t.iter().sum::<Duration>() / u32::try_from(t.len()).unwrap_or(1);
            println!(
                "| `{}` | {name} | {:.2} | {:.2} | {:.2} | {:.2} |",
                argv.join(" "),
                ms(t[t.len() / 2]),
                ms(mean),
                ms(t[t.len() * 9 / 10]),
                ms(t[0]),
            );
        }
    }
}
