//! `moat sandbox`: run one command confined, or `--check` what this machine supports.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, anyhow};
use moat_sandbox::{HostPattern, Net, Profile, Sandbox, Termination, Verdict};

use crate::Failure;
use crate::cli::{SandboxArgs, SandboxNet};

/// Runs the command (or the check) and exits with the command's status.
pub async fn run(args: SandboxArgs) -> Result<(), Failure> {
    if args.check {
        let support = tokio::task::spawn_blocking(|| Sandbox::new().map(|s| s.check()))
            .await
            .context("the sandbox task failed")??;
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
    let json = args.json;
    let command = args.command;
    let outcome = tokio::task::spawn_blocking(move || Sandbox::new()?.spawn(&profile, &command))
        .await
        .context("the sandbox task failed")?;
    let outcome = match outcome {
        Ok(o) => o,
        Err(
            e @ (moat_sandbox::Error::Path { .. }
            | moat_sandbox::Error::InvalidLimit(_)
            | moat_sandbox::Error::Unsupported(_)),
        ) => {
            return Err(Failure::Usage(e.into()));
        }
        Err(e) => return Err(Failure::Connection(e.into())),
    };
    let _ = std::io::stdout().write_all(&outcome.stdout);
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().write_all(&outcome.stderr);
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

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn profile(args: &SandboxArgs) -> anyhow::Result<Profile> {
    let mut p = Profile::default();
    p.ro.clone_from(&args.ro);
    p.rw.clone_from(&args.rw);
    p.net = match (args.net, args.allow_net.is_empty()) {
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
            return Err(anyhow!(
                "--allow-net restricts the network: it cannot be combined with --net host"
            ));
        }
    };
    p.env.extend(args.env.iter().cloned());
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(anyhow!("--timeout must be a positive number of seconds"));
    }
    p.limits.timeout = Some(
        Duration::try_from_secs_f64(args.timeout)
            .map_err(|e| anyhow!("--timeout {}: {e}", args.timeout))?,
    );
    p.limits.memory_bytes = args.memory.as_deref().map(parse_bytes).transpose()?;
    p.limits.pids = args.pids;
    p.limits.cpu_seconds = args.cpu;
    Ok(p)
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
    use super::parse_bytes;

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
