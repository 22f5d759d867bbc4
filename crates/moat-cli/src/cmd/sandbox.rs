//! `moat sandbox`: run one command confined, or `--check` what this machine supports. With
//! `--stdio` the command is spoken to live over this process's stdin and stdout (a
//! sandboxed MCP server); otherwise its output is captured, then printed.

use std::io::Write;

use anyhow::{Context, anyhow, bail};
use moat_sandbox::{HostPattern, Net, Profile, Sandbox, Termination, Verdict};

use crate::Failure;
use crate::cli::{SandboxArgs, SandboxNet};

/// Runs the command (or the check) and exits with the command's status. Synchronous, on the
/// calling thread: `main` calls it before starting an async runtime (nothing here needs one,
/// and a thread to hand the run to would only delay it).
pub fn run(args: SandboxArgs) -> Result<(), Failure> {
    if args.check {
        let support = Sandbox::new()?.check();
        let abi = support
            .landlock_abi
            .map_or("unavailable".to_string(), |v| format!("ABI {v}"));
        println!("landlock:       {abi}");
        println!("seccomp:        {}", yes(support.seccomp));
        println!(
            "namespaces:     {}",
            match support.namespaces {
                Some(true) =>
                    "yes (user, mount, PID, IPC, UTS, network; new root with fresh /tmp, /proc, /dev)",
                Some(false) =>
                    "no (user namespaces or the mount tree unavailable: Landlock + seccomp + rlimits only)",
                None => "unknown",
            }
        );
        println!(
            "net allow-list: {}",
            match support.net_allow {
                Some(true) => "yes (proxy on a Unix socket; own network namespace)",
                Some(false) => "no (needs user namespaces: --allow-net is refused here)",
                None => "unknown",
            }
        );
        println!("cgroup pids:    {}", yes(support.cgroup_pids));
        println!("cgroup memory:  {}", yes(support.cgroup_memory));
        println!("running as root: {}", yes(support.root));
        let (uid, gid) = support.run_as;
        println!(
            "sandbox runs as: uid {uid}, gid {gid} ({})",
            if support.root {
                "moat runs as root, its commands do not: uid/gid in the profile choose the ids; \
                 --as-root or run_as_root = true keeps root"
            } else {
                "moat's own ids"
            }
        );
        for layer in &support.not_built {
            println!("not built yet:  {layer}");
        }
        return Ok(());
    }
    if args.command.is_empty() {
        return Err(Failure::Usage(anyhow!(
            "no command: put it after `--`, e.g. moat sandbox --ro . -- ls"
        )));
    }
    let profile = profile(&args).map_err(Failure::Usage)?;
    if profile.run_as_root && running_as_root() {
        eprintln!(
            "moat sandbox: warning: the command runs as root (--as-root or run_as_root): \
             every capability is dropped, but it reads and writes whatever root may among \
             the paths it is shown"
        );
    }
    let json = args.json;
    let stdio = args.stdio;
    let command = args.command;
    // With --stdio nothing here reads stdin or writes stdout: the command has them.
    let outcome = Sandbox::new().and_then(|sandbox| {
        if stdio {
            sandbox.spawn_stdio(&profile, &command)
        } else {
            sandbox.spawn(&profile, &command)
        }
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(
            e @ (moat_sandbox::Error::Path { .. }
            | moat_sandbox::Error::InvalidLimit(_)
            | moat_sandbox::Error::InvalidProfile(_)
            | moat_sandbox::Error::Unsupported(_)),
        ) => {
            return Err(Failure::Usage(e.into()));
        }
        Err(e) => return Err(Failure::Connection(e.into())),
    };
    if let Some(path) = &args.report
        && let Err(e) = moat_sandbox::Report::of(&outcome).write(path)
    {
        eprintln!(
            "moat sandbox: the report could not be written to {}: {e}",
            path.display()
        );
    }
    if !stdio {
        let _ = std::io::stdout().write_all(&outcome.stdout);
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().write_all(&outcome.stderr);
    }
    if json {
        eprintln!(
            "{}",
            serde_json::json!({
                "termination": outcome.termination,
                "limit_hit": outcome.limit_hit,
                "truncated": outcome.truncated,
                "wall_time_ms": outcome.wall_time.as_millis(),
                "enforcement": outcome.enforcement,
                "connections": outcome.connections,
                "connections_omitted": outcome.connections_omitted,
            })
        );
    } else {
        for c in &outcome.connections {
            if c.verdict != Verdict::Allowed {
                eprintln!(
                    "moat sandbox: {} {}:{} ({:?}): {}",
                    if c.verdict == Verdict::Refused {
                        "refused"
                    } else {
                        "failed"
                    },
                    c.host,
                    c.port,
                    c.protocol,
                    c.reason.as_deref().unwrap_or("-")
                );
            }
        }
        if let Some(limit) = outcome.limit_hit {
            eprintln!("moat sandbox: limit hit: {limit:?}");
        }
        if outcome.truncated {
            eprintln!("moat sandbox: output truncated");
        }
    }
    let code = match outcome.termination {
        Termination::Exited(c) => c,
        Termination::Signaled(s) => 128 + s,
        _ => 1,
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code)
}

/// Whether this process runs as root (then commands run as another uid unless told).
fn running_as_root() -> bool {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() == 0 }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The profile: `--profile`'s (or the default), with the flags added.
fn profile(args: &SandboxArgs) -> anyhow::Result<Profile> {
    let mut p = match &args.profile {
        Some(text) => {
            if args.net.is_some() || !args.allow_net.is_empty() {
                bail!(
                    "--net and --allow-net cannot be combined with --profile: say the network \
                     in the profile (\"net\": \"none\", \"host\" or {{\"allow\": [...]}})"
                );
            }
            load_profile(text, args.stdio)?
        }
        None => {
            let mut p = Profile {
                net: net(args)?,
                ..Profile::default()
            };
            if args.stdio {
                p.limits.timeout = None;
                p.limits.output_bytes = None;
            }
            p
        }
    };
    if args.as_root {
        p.run_as_root = true;
    }
    p.ro.extend(args.ro.iter().cloned());
    p.rw.extend(args.rw.iter().cloned());
    p.env.extend(args.env.iter().cloned());
    if let Some(timeout) = args.timeout {
        if timeout.is_zero() {
            bail!("--timeout must be longer than zero");
        }
        p.limits.timeout = Some(timeout);
    }
    if let Some(bytes) = &args.memory {
        p.limits.memory_bytes = Some(parse_bytes(bytes)?);
    }
    if let Some(n) = args.pids {
        p.limits.pids = Some(n);
    }
    if let Some(secs) = args.cpu {
        p.limits.cpu_seconds = Some(secs);
    }
    Ok(p)
}

/// `--net` and `--allow-net` as a [`Net`].
fn net(args: &SandboxArgs) -> anyhow::Result<Net> {
    Ok(
        match (
            args.net.unwrap_or(SandboxNet::None),
            args.allow_net.is_empty(),
        ) {
            (SandboxNet::None, true) => Net::None,
            (SandboxNet::Host, true) => Net::Host,
            (SandboxNet::None, false) => {
                let mut patterns = Vec::new();
                for list in &args.allow_net {
                    patterns.extend(
                        HostPattern::parse_list(list).map_err(|e| anyhow!("--allow-net: {e}"))?,
                    );
                }
                Net::Allow(patterns)
            }
            (SandboxNet::Host, false) => {
                bail!("--allow-net restricts the network: it cannot be combined with --net host")
            }
        },
    )
}

/// `--profile`: inline JSON if it starts with `{`, else a file. For a streaming run, the
/// timeout and output cap it does not name are none (not the defaults meant for one-shot
/// commands), so that a long-lived server is not killed after a minute.
fn load_profile(arg: &str, stdio: bool) -> anyhow::Result<Profile> {
    let text = if arg.trim_start().starts_with('{') {
        arg.to_string()
    } else {
        std::fs::read_to_string(arg).with_context(|| format!("--profile {arg}"))?
    };
    let mut profile: Profile =
        serde_json::from_str(&text).context("--profile: not a valid sandbox profile")?;
    if stdio {
        let value: serde_json::Value = serde_json::from_str(&text)?;
        let named = |field: &str| value.get("limits").and_then(|l| l.get(field)).is_some();
        if !named("timeout_ms") {
            profile.limits.timeout = None;
        }
        if !named("output_bytes") {
            profile.limits.output_bytes = None;
        }
    }
    Ok(profile)
}

fn parse_bytes(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let (digits, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| anyhow!("--memory {s:?}: expected bytes, e.g. 268435456 or 256M"))
}

#[cfg(test)]
mod tests {
    use super::{load_profile, parse_bytes, profile};
    use crate::cli::SandboxArgs;
    use clap::Parser;
    use moat_sandbox::Net;
    use std::time::Duration;

    fn args(argv: &[&str]) -> SandboxArgs {
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            args: SandboxArgs,
        }
        let argv = std::iter::once("moat-sandbox").chain(argv.iter().copied());
        Wrap::try_parse_from(argv).unwrap().args
    }

    #[test]
    fn timeouts_default_to_a_minute_but_to_none_when_streaming() {
        let p = profile(&args(&["--", "true"])).unwrap();
        assert_eq!(p.limits.timeout, Some(Duration::from_secs(60)));
        assert!(p.limits.output_bytes.is_some());
        let p = profile(&args(&["--stdio", "--", "true"])).unwrap();
        assert_eq!((p.limits.timeout, p.limits.output_bytes), (None, None));
        let p = profile(&args(&["--stdio", "--timeout", "2.5", "--", "true"])).unwrap();
        assert_eq!(p.limits.timeout, Some(Duration::from_millis(2500)));
        assert!(profile(&args(&["--timeout", "0", "--", "true"])).is_err());
    }

    #[test]
    fn profiles_come_inline_or_from_a_file_and_flags_add_to_them() {
        let inline = r#"{"ro":["/srv"],"net":"host","limits":{"pids":7}}"#;
        let p = profile(&args(&["--profile", inline, "--ro", "/opt", "--pids", "9"])).unwrap();
        assert_eq!(p.ro, vec![std::path::PathBuf::from("/srv"), "/opt".into()]);
        assert_eq!(p.net, Net::Host);
        assert_eq!(p.limits.pids, Some(9));
        assert_eq!(p.limits.timeout, Some(Duration::from_secs(60)));

        let file = std::env::temp_dir().join(format!("moat-profile-{}.json", std::process::id()));
        std::fs::write(&file, inline).unwrap();
        let p = load_profile(file.to_str().unwrap(), true).unwrap();
        std::fs::remove_file(&file).unwrap();
        assert_eq!(p.limits.pids, Some(7));
        // Streaming: what the profile does not name is unlimited; what it names stays.
        assert_eq!((p.limits.timeout, p.limits.output_bytes), (None, None));
        let p = load_profile(r#"{"limits":{"timeout_ms":1000,"output_bytes":5}}"#, true).unwrap();
        assert_eq!(p.limits.timeout, Some(Duration::from_secs(1)));
        assert_eq!(p.limits.output_bytes, Some(5));

        assert!(profile(&args(&["--profile", inline, "--net", "none", "--", "x"])).is_err());
        assert!(profile(&args(&["--profile", "{\"rox\":[]}", "--", "x"])).is_err());
        assert!(
            profile(&args(&[
                "--profile",
                "/definitely/not/here.json",
                "--",
                "x"
            ]))
            .is_err()
        );
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_bytes("1024").unwrap(), 1024);
        assert_eq!(parse_bytes("256M").unwrap(), 256 << 20);
        assert_eq!(parse_bytes("2g").unwrap(), 2 << 30);
        assert!(parse_bytes("12X").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("99999999999999999999G").is_err());
    }
}
