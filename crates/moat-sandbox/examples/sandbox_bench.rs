//! Spawn-to-exit time of `/bin/true` and `ls /etc`: plain `std::process`; moat-sandbox
//! with every layer off ("bare": the zygote's fork, session, capabilities dropped,
//! `no_new_privs`, rlimits, which every run pays); each layer alone on top of that (the
//! namespaces with their mount tree, Landlock, seccomp, and a cgroup, made when a `pids` or
//! memory limit asks for one); without namespaces (Landlock, seccomp, rlimits); all layers;
//! all layers with a network allow-list (its proxy and shim); and `bwrap --ro-bind / /
//! --unshare-all --dev /dev --proc /proc` (skipped if `bwrap` is not installed). Rows whose
//! layer this machine lacks are skipped, saying so. One run, rounds interleaved and the
//! variants' order shuffled per round (so that no variant always follows the one whose
//! namespaces the kernel is still tearing down). Then each row's cost over plain and over
//! bare, in medians and minimums.
//!
//! ```sh
//! cargo run --release -p moat-sandbox --example sandbox_bench -- [ROUNDS]
//! cargo run … -- ROUNDS --sequential  # each variant's runs back to back instead
//! MOAT_SANDBOX_SPARE=0 cargo run …     # no spare PID 1: every run makes its namespaces
//! ```
//!
//! This binary is its own sandbox helper (it calls `helper_main` first). The first use of
//! the sandbox in a process (starting the zygote, and the namespace probe) is timed apart.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use moat_sandbox::{Net, PidsEnforcement, Profile, Sandbox};

type Runner = Box<dyn Fn(&[&str]) -> bool>;

/// The row with every layer off, which the per-layer costs are also counted from.
const BARE: &str = "moat: bare (no namespaces, Landlock, seccomp)";
/// The all-layers row, which the bwrap ratio is taken of.
const ALL: &str = "moat: all layers (namespaces + mount tree + Landlock + seccomp + rlimits)";

/// Runs `argv` in `sandbox` under `profile`; true if it succeeded with exactly the layers
/// the profile asks for (so that no row measures less than it says).
fn moat_runner(sandbox: &Sandbox, profile: Profile) -> Runner {
    let sandbox = sandbox.clone();
    let landlock = profile.landlock && moat_sandbox::check().landlock_abi.is_some();
    let pids = if profile.limits.pids.is_some() {
        PidsEnforcement::Cgroup
    } else {
        PidsEnforcement::NotRequested
    };
    Box::new(move |argv: &[&str]| {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        sandbox.spawn(&profile, &argv).is_ok_and(|o| {
            let e = &o.enforcement;
            o.success()
                && e.namespaces == profile.namespaces
                && e.landlock == landlock
                && e.seccomp == profile.seccomp
                && e.pids == pids
        })
    })
}

fn main() {
    moat_sandbox::helper_main();
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    // `--sequential`: each variant's runs back to back (after the others'), not interleaved.
    let sequential = std::env::args().any(|a| a == "--sequential");
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average before: {}", load().trim());
    let sandbox = Sandbox::new().expect("the current executable");
    let first = Instant::now();
    let ns = sandbox.namespaces_work();
    println!(
        "first use (zygote start + namespace probe): {:.2} ms; spare PID 1: {}",
        first.elapsed().as_secs_f64() * 1000.0,
        if std::env::var_os(moat_sandbox::SPARE_ENV).is_some_and(|v| v == "0") {
            "off"
        } else {
            "on"
        }
    );
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
    // Every layer off: what any run pays (the zygote's fork, a new session, capabilities
    // dropped, `no_new_privs`, rlimits); the per-layer rows add one layer to it.
    let bare = Profile {
        namespaces: false,
        landlock: false,
        seccomp: false,
        ..Profile::default()
    };
    let support = moat_sandbox::check();
    let mut rows: Vec<(&str, Profile)> = vec![(BARE, bare.clone())];
    if ns {
        rows.push((
            "moat: namespaces + mount tree alone",
            Profile {
                namespaces: true,
                ..bare.clone()
            },
        ));
    } else {
        eprintln!("user namespaces refused here: no namespace rows");
    }
    if support.landlock_abi.is_some() {
        rows.push((
            "moat: Landlock alone",
            Profile {
                landlock: true,
                ..bare.clone()
            },
        ));
    } else {
        eprintln!("no Landlock here: no Landlock-alone row");
    }
    rows.push((
        "moat: seccomp alone",
        Profile {
            seccomp: true,
            ..bare.clone()
        },
    ));
    if support.cgroup_pids && support.cgroup_memory {
        let mut cgroup = bare.clone();
        cgroup.limits.pids = Some(4096);
        cgroup.limits.memory_bytes = Some(1 << 30);
        rows.push(("moat: cgroup alone (pids + memory limits)", cgroup));
    } else {
        eprintln!("no cgroup can be made here: no cgroup row");
    }
    rows.push((
        "moat: no namespaces (Landlock + seccomp + rlimits)",
        Profile {
            namespaces: false,
            ..Profile::default()
        },
    ));
    if ns {
        rows.push((ALL, Profile::default()));
        // The same, plus the network allow-list: the proxy outside, loopback up and the
        // shim listening in PID 1 (an empty list: the command makes no connection).
        rows.push((
            "moat: all layers + network allow-list (proxy + shim)",
            Profile {
                net: Net::Allow(Vec::new()),
                ..Profile::default()
            },
        ));
    }
    for (name, profile) in rows {
        variants.push((name.into(), moat_runner(&sandbox, profile)));
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

    if sequential {
        println!("{rounds} runs each, each variant's back to back; milliseconds, spawn to exit");
    } else {
        println!(
            "{rounds} runs each, rounds interleaved (order shuffled); milliseconds, spawn to \
             exit"
        );
    }
    println!();
    println!("| command | variant | median | mean | p90 | min |");
    println!("|---|---|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    for argv in [&["/bin/true"][..], &["ls", "/etc"][..]] {
        let mut times = vec![Vec::with_capacity(rounds); variants.len()];
        for (name, run) in &variants {
            // Warm up (and fail early).
            assert!(run(argv), "{name}: {argv:?} failed");
        }
        let mut order: Vec<usize> = (0..variants.len()).collect();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        if sequential {
            for (i, (name, run)) in variants.iter().enumerate() {
                for _ in 0..rounds {
                    let start = Instant::now();
                    let ok = run(argv);
                    times[i].push(start.elapsed());
                    assert!(ok, "{name}: {argv:?} failed");
                }
            }
        }
        for _ in 0..if sequential { 0 } else { rounds } {
            // Fisher-Yates with xorshift: a fixed but varied order per round.
            for k in (1..order.len()).rev() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                order.swap(k, (seed % (k as u64 + 1)) as usize);
            }
            for &i in &order {
                let (name, run) = &variants[i];
                let start = Instant::now();
                let ok = run(argv);
                times[i].push(start.elapsed());
                assert!(ok, "{name}: {argv:?} failed");
            }
        }
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut stats = Vec::new();
        for ((name, _), mut t) in variants.iter().zip(times) {
            t.sort();
            let mean = t.iter().sum::<Duration>() / u32::try_from(t.len()).unwrap_or(1);
            let (median, min) = (ms(t[t.len() / 2]), ms(t[0]));
            println!(
                "| `{}` | {name} | {median:.2} | {:.2} | {:.2} | {min:.2} |",
                argv.join(" "),
                ms(mean),
                ms(t[t.len() * 9 / 10]),
            );
            stats.push((name.clone(), median, min));
        }
        ratios.push((argv.join(" "), stats));
    }
    println!();
    println!("What each row adds (ms; median and min, over plain and over bare moat):");
    println!();
    println!("| command | variant | median − plain | min − plain | median − bare | min − bare |");
    println!("|---|---|---:|---:|---:|---:|");
    for (command, stats) in &ratios {
        let find = |name: &str| stats.iter().find(|(n, _, _)| n == name);
        let (Some(plain), Some(bare)) = (find("plain (std::process)"), find(BARE)) else {
            continue;
        };
        for (name, median, min) in stats.iter().filter(|(n, _, _)| n.starts_with("moat")) {
            println!(
                "| `{command}` | {name} | {:+.2} | {:+.2} | {:+.2} | {:+.2} |",
                median - plain.1,
                min - plain.2,
                median - bare.1,
                min - bare.2
            );
        }
    }
    println!();
    for (command, stats) in ratios {
        let find = |prefix: &str| stats.iter().find(|(n, _, _)| n.starts_with(prefix));
        if let (Some(all), Some(bwrap)) = (find(ALL), find("bwrap")) {
            println!(
                "`{command}`: all layers / bwrap = {:.2} (median), {:.2} (min)",
                all.1 / bwrap.1,
                all.2 / bwrap.2
            );
        }
    }
    println!("load average after: {}", load().trim());
}
