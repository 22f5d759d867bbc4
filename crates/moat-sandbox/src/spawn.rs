//! The supervising side: start the helper, enforce the timeout and the output cap, collect
//! the [`Outcome`].

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

use crate::cgroup::Cgroup;
use crate::helper::{HELPER_ARG, Plan, SETUP_FAILED, SETUP_MARKER};
use crate::outcome::{Enforcement, LimitHit, Outcome, PidsEnforcement, Termination};
use crate::profile::{Net, Profile};
use crate::proxy::{Proxy, Resolve, SystemResolver};
use crate::{Error, Result};

/// Runs commands confined by a [`Profile`], through a helper binary.
#[derive(Clone)]
pub struct Sandbox {
    helper: PathBuf,
    /// Resolves names for the network allow-list's proxy (default: the system's).
    resolver: Arc<dyn Resolve>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("helper", &self.helper)
            .finish_non_exhaustive()
    }
}

enum Event {
    Exited(std::io::Result<ExitStatus>),
    Overflow,
}

impl Sandbox {
    /// A sandbox whose helper is the running binary (which must call
    /// [`crate::helper_main`] first thing in `main`).
    pub fn new() -> Result<Sandbox> {
        let helper = std::env::current_exe().map_err(|error| Error::Helper {
            helper: PathBuf::from("<current executable>"),
            error,
        })?;
        Ok(Sandbox::with_helper(helper))
    }

    /// A sandbox whose helper is `helper` (a binary that calls [`crate::helper_main`], such
    /// as `moat` or `moat-sandbox-init`).
    pub fn with_helper(helper: impl Into<PathBuf>) -> Sandbox {
        Sandbox {
            helper: helper.into(),
            resolver: Arc::new(SystemResolver),
        }
    }

    /// Uses `resolver` for the names the network allow-list's proxy looks up (instead of
    /// the system's `getaddrinfo`). Its answers are checked like any other: non-public
    /// addresses are refused unless the allow-list names them.
    pub fn with_resolver(mut self, resolver: impl Resolve + 'static) -> Sandbox {
        self.resolver = Arc::new(resolver);
        self
    }

    /// What this machine supports, namespaces included (probed with this helper).
    pub fn check(&self) -> crate::Support {
        let mut support = crate::check();
        let namespaces = self.namespaces_work();
        support.namespaces = Some(namespaces);
        support.net_allow = Some(namespaces);
        support
    }

    /// Whether the helper can enter new namespaces on this machine (asked once per process,
    /// by running the helper in probe mode).
    pub fn namespaces_work(&self) -> bool {
        static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *WORKS.get_or_init(|| {
            let plan = Plan {
                profile: Profile::default(),
                argv: vec!["true".into()],
                parent: rustix::process::getpid().as_raw_nonzero().get(),
                cgroup_procs: Vec::new(),
                namespaces: true,
                probe: true,
                proxy_dir: None,
            };
            let Ok(json) = serde_json::to_string(&plan) else {
                return false;
            };
            Command::new(&self.helper)
                .arg(HELPER_ARG)
                .arg(json)
                .env_clear()
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
    }

    /// Runs `argv` confined by `profile`, waits for it (and for the timeout), and reports.
    ///
    /// Blocks the calling thread, which must outlive the run (the child gets the
    /// parent-death signal when this thread ends). From async code, use `spawn_blocking`.
    ///
    /// With a network allow-list, runs the proxy for the time of the run, and refuses
    /// ([`Error::Unsupported`]) where the namespaces are unavailable or turned off: the
    /// allow-list cannot be enforced without a network namespace of its own.
    pub fn spawn(&self, profile: &Profile, argv: &[String]) -> Result<Outcome> {
        if argv.is_empty() {
            return Err(Error::EmptyCommand);
        }
        let profile = profile.resolved()?;
        let namespaces = profile.namespaces && self.namespaces_work();
        let proxy = match &profile.net {
            Net::Allow(_) if !namespaces => {
                return Err(Error::Unsupported(if profile.namespaces {
                    "the network allow-list needs a network namespace of its own, and this \
                     machine refuses user namespaces; refused rather than run with the \
                     host's network unfiltered (use net none, or host if you accept that)"
                        .into()
                } else {
                    "the network allow-list needs the namespaces, which the profile turns off"
                        .into()
                }));
            }
            Net::Allow(patterns) => Some(
                Proxy::start(patterns.clone(), Arc::clone(&self.resolver)).map_err(Error::Proxy)?,
            ),
            _ => None,
        };
        let cgroup = Cgroup::create(profile.limits.pids, profile.limits.memory_bytes);
        let enforcement = enforcement(&profile, &cgroup, namespaces);
        let plan = Plan {
            profile: profile.clone(),
            argv: argv.to_vec(),
            parent: rustix::process::getpid().as_raw_nonzero().get(),
            cgroup_procs: cgroup.procs_files(),
            namespaces,
            probe: false,
            proxy_dir: proxy.as_ref().map(|p| p.dir().to_path_buf()),
        };
        let mut cmd = Command::new(&self.helper);
        cmd.arg(HELPER_ARG)
            .arg(serde_json::to_string(&plan)?)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for name in &profile.env {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        if proxy.is_some() {
            // After the profile's variables: the caller's own proxy settings do not apply.
            for (name, value) in crate::shim::proxy_env() {
                cmd.env(name, value);
            }
            for name in ["NO_PROXY", "no_proxy"] {
                cmd.env_remove(name);
            }
        }
        let start = Instant::now();
        let mut child = cmd.spawn().map_err(|error| Error::Helper {
            helper: self.helper.clone(),
            error,
        })?;
        let pid = Pid::from_child(&child);
        let (tx, rx) = mpsc::channel();
        let cap = profile.limits.output_bytes.unwrap_or(u64::MAX);
        let used = Arc::new(AtomicU64::new(0));
        let truncated = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let mut buffers = Vec::new();
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let buf = Arc::new(Mutex::new(Vec::new()));
            buffers.push(Arc::clone(&buf));
            let (used, truncated, tx, done) = (
                Arc::clone(&used),
                Arc::clone(&truncated),
                tx.clone(),
                done_tx.clone(),
            );
            std::thread::spawn(move || {
                read_capped(stream, &buf, &used, cap, &truncated, &tx);
                let _ = done.send(());
            });
        }
        drop(done_tx);
        std::thread::spawn(move || {
            let _ = tx.send(Event::Exited(child.wait()));
        });

        let deadline = profile.limits.timeout.map(|t| start + t);
        let mut limit_hit = None;
        let status = loop {
            let event = match deadline {
                Some(d) => match rx.recv_timeout(d.saturating_duration_since(Instant::now())) {
                    Ok(e) => Some(e),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        return Err(Error::Io(std::io::Error::other("waiter thread vanished")));
                    }
                },
                None => Some(
                    rx.recv()
                        .map_err(|_| std::io::Error::other("waiter thread vanished"))?,
                ),
            };
            match event {
                Some(Event::Exited(status)) => break status?,
                Some(Event::Overflow) => {
                    limit_hit.get_or_insert(LimitHit::Output);
                    kill_all(pid, &cgroup);
                }
                None => {
                    limit_hit.get_or_insert(LimitHit::Timeout);
                    kill_all(pid, &cgroup);
                }
            }
        };
        let wall_time = start.elapsed();
        // Nothing of it outlives the run.
        kill_all(pid, &cgroup);
        // Wait for the output, but not forever: an escaped grandchild may hold a pipe.
        let grace = Instant::now() + Duration::from_secs(2);
        for _ in 0..buffers.len() {
            if done_rx
                .recv_timeout(grace.saturating_duration_since(Instant::now()))
                .is_err()
            {
                break;
            }
        }
        let take = |b: &Arc<Mutex<Vec<u8>>>| {
            b.lock()
                .map(|mut v| std::mem::take(&mut *v))
                .unwrap_or_default()
        };
        let stdout = buffers.first().map(take).unwrap_or_default();
        let stderr = buffers.get(1).map(take).unwrap_or_default();
        let termination = termination(status);
        if termination == Termination::Exited(SETUP_FAILED)
            && let Some(msg) = String::from_utf8_lossy(&stderr).strip_prefix(SETUP_MARKER)
        {
            return Err(Error::Setup(msg.trim_end().to_string()));
        }
        if limit_hit.is_none() {
            limit_hit = if termination == Termination::Signaled(libc::SIGXCPU) {
                Some(LimitHit::Cpu)
            } else if cgroup.memory_hit() {
                Some(LimitHit::Memory)
            } else if cgroup.pids_hit() {
                Some(LimitHit::Pids)
            } else {
                None
            };
        }
        drop(cgroup);
        let (connections, connections_omitted) = proxy.map(Proxy::finish).unwrap_or_default();
        Ok(Outcome {
            termination,
            limit_hit,
            stdout,
            stderr,
            truncated: truncated.load(Ordering::Relaxed),
            wall_time,
            enforcement,
            connections,
            connections_omitted,
        })
    }
}

fn read_capped(
    mut stream: Box<dyn Read + Send>,
    buf: &Mutex<Vec<u8>>,
    used: &AtomicU64,
    cap: u64,
    truncated: &AtomicBool,
    tx: &mpsc::Sender<Event>,
) {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let before = used.fetch_add(n as u64, Ordering::Relaxed);
        let room = usize::try_from(cap.saturating_sub(before)).unwrap_or(usize::MAX);
        let keep = n.min(room);
        if let Ok(mut b) = buf.lock() {
            b.extend_from_slice(&chunk[..keep]);
        }
        if keep < n && !truncated.swap(true, Ordering::Relaxed) {
            let _ = tx.send(Event::Overflow);
        }
    }
}

fn kill_all(pid: Pid, cgroup: &Cgroup) {
    let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    let _ = rustix::process::kill_process(pid, Signal::KILL);
    cgroup.kill_all();
}

fn termination(status: ExitStatus) -> Termination {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Termination::Exited(code),
        (None, Some(sig)) => Termination::Signaled(sig),
        (None, None) => Termination::Exited(-1),
    }
}

/// What this run gets, given the kernel and the cgroup made for it.
fn enforcement(profile: &Profile, cgroup: &Cgroup, namespaces: bool) -> Enforcement {
    let abi = crate::landlock_layer::kernel_abi();
    let mut not = Vec::new();
    match abi {
        None => not.push(
            "Landlock unavailable: no filesystem confinement, no TCP denial by Landlock, no \
             signal scoping"
                .to_string(),
        ),
        Some(v) => {
            if v < 2 {
                not.push("Landlock ABI < 2: linking or renaming across directories".into());
            }
            if v < 3 {
                not.push("Landlock ABI < 3: truncate".into());
            }
            if v < 4 && profile.net == Net::None {
                not.push(
                    "Landlock ABI < 4: TCP bind/connect (seccomp still denies sockets)".into(),
                );
            }
            if v < 4 && matches!(profile.net, Net::Allow(_)) {
                not.push(
                    "Landlock ABI < 4: TCP bind/connect other than to the proxy shim (the \
                     network namespace still holds only loopback)"
                        .into(),
                );
            }
            if v < 5 {
                not.push("Landlock ABI < 5: device ioctls".into());
            }
            if v < 6 {
                not.push("Landlock ABI < 6: signal and abstract Unix socket scoping".into());
            }
        }
    }
    if !namespaces {
        not.push(if profile.namespaces {
            "namespaces: unavailable here (user namespaces refused, or the new root could not \
             be built); other processes are visible and the network namespace is the host's"
                .into()
        } else {
            "namespaces: turned off by the profile".into()
        });
        not.push(
            "mount tree (needs the namespaces): no fresh /tmp or /dev, paths outside the \
             profile are visible (Landlock alone denies them); chmod, chown and timestamps \
             outside the write paths are not prevented"
                .into(),
        );
    }
    let pids = match profile.limits.pids {
        None => PidsEnforcement::NotRequested,
        Some(_) if cgroup.has_pids() => PidsEnforcement::Cgroup,
        Some(_) => {
            if rustix::process::getuid().is_root() {
                not.push(
                    "pids: no cgroup could be created and RLIMIT_NPROC does not bind root".into(),
                );
            }
            PidsEnforcement::Rlimit
        }
    };
    Enforcement {
        landlock_abi: abi,
        namespaces,
        seccomp: true,
        pids,
        memory_cgroup: cgroup.has_memory(),
        not_enforced: not,
    }
}
