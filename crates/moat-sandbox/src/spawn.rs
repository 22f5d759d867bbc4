//! The supervising side: hand the run to the zygote, enforce the timeout and the output
//! cap, collect the [`Outcome`]. A run either has its output captured ([`Sandbox::spawn`])
//! or streams through the caller's own stdin, stdout and stderr ([`Sandbox::spawn_stdio`]).
//! A [`RunControl`] lets another thread stop a captured run and watch its output grow
//! ([`Sandbox::spawn_with`]).

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cgroup::Cgroup;
use crate::outcome::{Enforcement, LimitHit, Outcome, PidsEnforcement, Termination};
use crate::profile::{Net, Profile};
use crate::proxy::{Proxy, Resolve, SystemResolver};
use crate::run::{EXITED, KILL, Plan, SETUP_ERROR, STATUS};
use crate::zygote::{RunEnds, RunIo};
use crate::{Error, Result};

/// Runs commands confined by a [`Profile`], through a helper binary started once per process
/// (the zygote, see `zygote.rs`) and forked for each run.
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

    /// Starts this sandbox's helper (the zygote) now, as a fork of the calling process
    /// rather than an exec of the helper binary. For a short-lived program that runs a
    /// command or two (the `moat sandbox` command line) this takes the helper's own start
    /// (loading and relocating a large binary: 1–2 ms) off the first run, and the zygote
    /// gets ready while the caller goes on. The zygote is then a copy of the calling
    /// process (memory included), so a process that runs many commands, or holds much
    /// memory, is better served by the exec'd helper (the default).
    ///
    /// `spare`: whether the zygote keeps a spare PID 1 ready (see the crate's docs). For one
    /// or two runs it is not worth it: it is made while the first run starts, competing
    /// with it for the CPU. [`crate::SPARE_ENV`] set to `0` turns it off either way.
    ///
    /// Refused ([`Error::Unsupported`]) when the process has more than one thread: call it
    /// before starting any (an async runtime, a logger). Does nothing when this helper's
    /// zygote runs already. Returns without waiting for the zygote: the first run is queued
    /// for it and sent at once.
    pub fn start_here(&self, spare: bool) -> Result<()> {
        let spare = spare && std::env::var_os(crate::SPARE_ENV).is_none_or(|v| v != "0");
        crate::zygote::start_forked(&self.helper, spare)
    }

    /// Whether the helper can enter new namespaces and build the mount tree on this machine
    /// (asked once per process, by a probe run through the zygote, unless a run with
    /// namespaces already showed that they work).
    pub fn namespaces_work(&self) -> bool {
        *NAMESPACES_WORK.get_or_init(|| {
            let plan = Plan {
                profile: Profile::default(),
                argv: vec!["true".into()],
                env: Vec::new(),
                cgroup_procs: Vec::new(),
                cgroup_pids: false,
                namespaces: true,
                probe: true,
                proxy_dir: None,
                run_as: Profile::default().run_as(rustix::process::getuid().as_raw()),
            };
            self.supervise(&plan, &Cgroup::default(), RunIo::Capture, None)
                .is_ok_and(|r| r.termination == Termination::Exited(0))
        })
    }

    /// Runs `argv` confined by `profile`, waits for it (and for the timeout), and reports.
    ///
    /// Blocks the calling thread (one `poll` loop; no thread is started). From async code,
    /// use `spawn_blocking`. If this call is abandoned (the thread unwinds), the run is
    /// killed. The first call in a process starts the helper (the zygote) for this
    /// helper binary; later calls, from any thread and any clone of this `Sandbox`, share
    /// it.
    ///
    /// With a network allow-list, runs the proxy for the time of the run, and refuses
    /// ([`Error::Unsupported`]) where the namespaces are unavailable or turned off: the
    /// allow-list cannot be enforced without a network namespace of its own.
    pub fn spawn(&self, profile: &Profile, argv: &[String]) -> Result<Outcome> {
        self.run(profile, argv, RunIo::Capture, None)
    }

    /// As [`Sandbox::spawn`], with `control` to stop the run from another thread
    /// ([`RunControl::cancel`]: its process group is killed, as at the timeout) and to see
    /// how much output it has written so far ([`RunControl::output_bytes`]).
    ///
    /// For a caller that cannot unwind the blocked thread to abandon the run: an async
    /// caller running this in `spawn_blocking`, say. A cancelled run still returns its
    /// [`Outcome`] (typically [`Termination::Signaled`] with `SIGKILL`, no limit hit); a
    /// `control` cancelled before the call kills the run as soon as it starts.
    pub fn spawn_with(
        &self,
        profile: &Profile,
        argv: &[String],
        control: &RunControl,
    ) -> Result<Outcome> {
        self.run(profile, argv, RunIo::Capture, Some(control))
    }

    /// Runs `argv` confined by `profile` with this process's own stdin, stdout and stderr
    /// (descriptors 0, 1 and 2) as its own, passed as they are: what it writes reaches them
    /// as it writes it, and it reads its input as it arrives. For a long-lived program
    /// spoken to over its standard streams, such as an MCP server on stdio. Waits for it to
    /// end, as [`Sandbox::spawn`] does; a closed descriptor is replaced by `/dev/null`.
    ///
    /// No output cap can apply to output that does not pass through the sandbox:
    /// `limits.output_bytes` must be `None` ([`Error::InvalidLimit`] otherwise; the default
    /// profile sets it). The timeout (the default profile sets 60 s: for a server, set
    /// `limits.timeout` to `None`), CPU, memory, process and open-file limits apply as
    /// usual. The [`Outcome`] reports how the run ended and the limit it hit; its `stdout`
    /// and `stderr` are empty and `truncated` is false.
    ///
    /// The run ends when the program does: typically when its stdin reaches end of file
    /// (nothing of the sandbox keeps a copy of the writing end). It is killed with this
    /// process, or when this call is abandoned, as with [`Sandbox::spawn`]; a network
    /// allow-list is enforced (or refused) as there too.
    pub fn spawn_stdio(&self, profile: &Profile, argv: &[String]) -> Result<Outcome> {
        if profile.limits.output_bytes.is_some() {
            return Err(Error::InvalidLimit(
                "output_bytes cannot apply when the output is passed through (spawn_stdio, \
                 moat sandbox --stdio): set it to none"
                    .into(),
            ));
        }
        self.run(profile, argv, RunIo::PassThrough, None)
    }

    fn run(
        &self,
        profile: &Profile,
        argv: &[String],
        io: RunIo,
        control: Option<&RunControl>,
    ) -> Result<Outcome> {
        if argv.is_empty() {
            return Err(Error::EmptyCommand);
        }
        let profile = profile.resolved()?;
        // Until a run shows whether the namespaces work here, a run that asks for them
        // tries them (rather than waiting for a probe run first); only if its setup fails
        // does the probe decide, and the run is made again without them if they do not
        // work. A run that fails at setup never started its command, so nothing runs twice.
        let untested = profile.namespaces
            && NAMESPACES_WORK.get().is_none()
            && !matches!(profile.net, Net::Allow(_));
        if untested {
            match self.run_once(&profile, argv, io, control, true) {
                // Not the profile's fault: the namespaces are refused here.
                Err(Error::Setup(_)) if !self.namespaces_work() => {}
                Ok((outcome, started)) => {
                    if started {
                        let _ = NAMESPACES_WORK.set(true);
                    }
                    return Ok(outcome);
                }
                Err(e) => return Err(e),
            }
        }
        let namespaces = profile.namespaces && self.namespaces_work();
        self.run_once(&profile, argv, io, control, namespaces)
            .map(|(outcome, _)| outcome)
    }

    /// One run of `argv` under `profile` (resolved), with or without the namespaces; and
    /// whether, with namespaces, PID 1 got as far as starting the command.
    fn run_once(
        &self,
        profile: &Profile,
        argv: &[String],
        io: RunIo,
        control: Option<&RunControl>,
        namespaces: bool,
    ) -> Result<(Outcome, bool)> {
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
        let run_as = profile.run_as(rustix::process::getuid().as_raw());
        if let (Some((uid, gid)), Some(proxy)) = (run_as, &proxy) {
            // PID 1, as the run's uid, connects to the proxy's socket for each connection.
            let dir = proxy.dir();
            for path in [dir.to_path_buf(), dir.join(crate::proxy::SOCKET_NAME)] {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(Error::Proxy)?;
            }
        }
        let cgroup = Cgroup::create(profile.limits.pids, profile.limits.memory_bytes);
        let mut enforcement = enforcement(profile, &cgroup, namespaces);
        crate::outcome::note_ids(&mut enforcement, profile, run_as, namespaces);
        let plan = Plan {
            env: command_env(profile, proxy.is_some()),
            profile: profile.clone(),
            argv: argv.to_vec(),
            cgroup_procs: cgroup.procs_files(),
            cgroup_pids: cgroup.has_pids(),
            namespaces,
            probe: false,
            proxy_dir: proxy.as_ref().map(|p| p.dir().to_path_buf()),
            run_as,
        };
        let run = self.supervise(&plan, &cgroup, io, control)?;
        drop(cgroup);
        let (connections, connections_omitted) = proxy.map(Proxy::finish).unwrap_or_default();
        let outcome = Outcome {
            termination: run.termination,
            limit_hit: run.limit_hit,
            stdout: run.stdout,
            stderr: run.stderr,
            truncated: run.truncated,
            wall_time: run.wall_time,
            enforcement,
            connections,
            connections_omitted,
        };
        Ok((outcome, run.started))
    }

    /// Starts `plan` in the zygote and supervises it: output (captured and capped, unless
    /// passed through), the timeout, the reports on the run socket. One thread, no helper
    /// threads: `poll` on the pipes (if any), the run socket and the control's wake pipe.
    fn supervise(
        &self,
        plan: &Plan,
        cgroup: &Cgroup,
        io: RunIo,
        control: Option<&RunControl>,
    ) -> Result<Supervised> {
        let json = serde_json::to_vec(plan)?;
        let start = Instant::now();
        let RunEnds {
            sock,
            stdout,
            stderr,
        } = crate::zygote::start_run(&self.helper, &json, io)?;
        let limits = &plan.profile.limits;
        let cap = limits.output_bytes.unwrap_or(u64::MAX);
        let mut deadline = limits.timeout.map(|t| start + t);
        let mut streams = [stdout, stderr];
        let mut bufs: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
        let mut used = 0u64;
        let mut truncated = false;
        let mut limit_hit = None;
        let mut setup_error: Option<String> = None;
        let mut reported: Option<Termination> = None;
        // The raw wait status of the run's first process.
        let mut exit_status: Option<i32> = None;
        // When the run ended (or the zygote went away): from then on, only the rest of the
        // output is read, for at most OUTPUT_GRACE (an escaped grandchild may hold a pipe).
        let mut ended: Option<Instant> = None;
        // With namespaces, PID 1's report is the end of the run: PID 1 then only exits, and
        // the kernel tears the namespaces down (everything left in them is killed) without
        // the caller waiting for it, as with bubblewrap. With a cgroup, wait for the exit
        // itself, so that the cgroup is empty when it is checked and removed.
        let early = plan.namespaces && plan.cgroup_procs.is_empty();
        let mut chunk = [0u8; 16 * 1024];
        // Whether the control's cancellation was seen (and the run killed): its wake pipe
        // stays readable, so it is polled only until then.
        let mut cancel_seen = false;
        let kill = |sock: &OwnedFd| {
            let _ = rustix::net::send(
                sock,
                &[KILL],
                rustix::net::SendFlags::NOSIGNAL | rustix::net::SendFlags::DONTWAIT,
            );
            cgroup.kill_all();
        };
        loop {
            let open = streams.iter().any(Option::is_some);
            if let Some(at) = ended
                && (!open || Instant::now() >= at + OUTPUT_GRACE)
            {
                break;
            }
            let wake = match ended {
                Some(at) => Some(at + OUTPUT_GRACE),
                None => deadline,
            };
            let mut pfds: Vec<libc::pollfd> = Vec::with_capacity(3);
            let mut which: Vec<usize> = Vec::with_capacity(3);
            for (i, s) in streams.iter().enumerate() {
                if let Some(fd) = s {
                    pfds.push(pollfd(fd));
                    which.push(i);
                }
            }
            if ended.is_none() {
                pfds.push(pollfd(&sock));
                which.push(2);
            }
            if let Some(c) = control
                && ended.is_none()
                && !cancel_seen
            {
                if c.is_cancelled() {
                    cancel_seen = true;
                    kill(&sock);
                } else {
                    pfds.push(pollfd(&c.inner.wake_read));
                    which.push(3);
                }
            }
            let timeout = match wake {
                Some(w) => {
                    let left = w.saturating_duration_since(Instant::now());
                    i32::try_from(left.as_millis().saturating_add(1)).unwrap_or(i32::MAX)
                }
                None => -1,
            };
            // SAFETY: `pfds` is a valid array of pollfd.
            let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                kill(&sock);
                return Err(Error::Io(e));
            }
            if ended.is_none() && deadline.is_some_and(|d| Instant::now() >= d) {
                limit_hit.get_or_insert(LimitHit::Timeout);
                kill(&sock);
                deadline = None;
            }
            for (pfd, &i) in pfds.iter().zip(&which) {
                if pfd.revents == 0 {
                    continue;
                }
                if i == 3 {
                    // Never drained: the flag says what it means, and the next turn of the
                    // loop acts on it.
                    continue;
                }
                if i == 2 {
                    match read_report(&sock) {
                        Report::Nothing => {}
                        Report::Gone => ended = Some(Instant::now()),
                        Report::SetupError(msg) => setup_error = Some(msg),
                        Report::Status(t) => {
                            reported = Some(t);
                            if early {
                                ended = Some(Instant::now());
                            }
                        }
                        Report::Exited(status) => {
                            exit_status = Some(status);
                            ended = Some(Instant::now());
                        }
                    }
                    continue;
                }
                let Some(fd) = &streams[i] else { continue };
                match rustix::io::read(fd, &mut chunk) {
                    Ok(0) => streams[i] = None,
                    Ok(n) => {
                        let room = usize::try_from(cap.saturating_sub(used)).unwrap_or(usize::MAX);
                        used = used.saturating_add(n as u64);
                        if let Some(c) = control {
                            c.inner.output.store(used, Ordering::Relaxed);
                        }
                        let keep = n.min(room);
                        bufs[i].extend_from_slice(&chunk[..keep]);
                        if keep < n && !truncated {
                            truncated = true;
                            limit_hit.get_or_insert(LimitHit::Output);
                            kill(&sock);
                        }
                    }
                    Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                    Err(_) => streams[i] = None,
                }
            }
        }
        if let Some(msg) = setup_error {
            return Err(Error::Setup(msg));
        }
        let (termination, at) = match (reported, exit_status, ended) {
            (Some(t), _, Some(at)) => (t, at),
            (None, Some(status), Some(at)) => (termination(status), at),
            _ => {
                kill(&sock);
                return Err(Error::Io(std::io::Error::other(
                    "the sandbox helper (zygote) ended during the run",
                )));
            }
        };
        // Nothing of it outlives the run (the zygote killed its process group already).
        cgroup.kill_all();
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
        let [stdout, stderr] = bufs;
        Ok(Supervised {
            started: reported.is_some(),
            termination,
            limit_hit,
            stdout,
            stderr,
            truncated,
            wall_time: at - start,
        })
    }
}

/// Stops a run of [`Sandbox::spawn_with`] from another thread, and shows how much output it
/// has written so far. Cheap to clone; clones share the run. Cancelling is final (a
/// cancelled control given to another run kills that run as it starts).
#[derive(Clone)]
pub struct RunControl {
    inner: Arc<ControlInner>,
}

struct ControlInner {
    cancelled: AtomicBool,
    /// Bytes of stdout plus stderr read so far, kept or not.
    output: AtomicU64,
    /// Becomes readable (one byte, never read) on cancellation, so that the supervising
    /// `poll` wakes at once rather than at its next deadline.
    wake_read: OwnedFd,
    wake_write: OwnedFd,
}

impl std::fmt::Debug for RunControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunControl")
            .field("cancelled", &self.is_cancelled())
            .field("output_bytes", &self.output_bytes())
            .finish()
    }
}

impl RunControl {
    /// A control for one run (a pipe, to wake the supervising thread).
    pub fn new() -> Result<RunControl> {
        let (wake_read, wake_write) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )
        .map_err(std::io::Error::from)?;
        Ok(RunControl {
            inner: Arc::new(ControlInner {
                cancelled: AtomicBool::new(false),
                output: AtomicU64::new(0),
                wake_read,
                wake_write,
            }),
        })
    }

    /// Kills the run (its whole process group, and the cgroup's processes), from any
    /// thread; [`Sandbox::spawn_with`] then returns. Idempotent.
    pub fn cancel(&self) {
        if !self.inner.cancelled.swap(true, Ordering::SeqCst) {
            // Cannot block (non-blocking, and at most one byte is ever written).
            let _ = rustix::io::write(&self.inner.wake_write, &[1]);
        }
    }

    /// Whether [`RunControl::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Bytes of stdout plus stderr the run has written so far (past the cap too, until
    /// it is killed for it).
    pub fn output_bytes(&self) -> u64 {
        self.inner.output.load(Ordering::Relaxed)
    }
}

/// Whether the namespaces and the mount tree work on this machine, once known: by a probe
/// run, or by a run with namespaces that got as far as its command.
static NAMESPACES_WORK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// How long the output is read after the run ended, at most.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// What a supervised run gave.
struct Supervised {
    /// PID 1 (of a run with namespaces) reported the command's end: it had started it.
    started: bool,
    termination: Termination,
    limit_hit: Option<LimitHit>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    truncated: bool,
    wall_time: Duration,
}

/// One message from the run socket.
enum Report {
    Nothing,
    /// End of file: the zygote is gone.
    Gone,
    SetupError(String),
    Status(Termination),
    Exited(i32),
}

fn read_report(sock: &OwnedFd) -> Report {
    let mut b = [0u8; 4096];
    let n = match rustix::net::recv(sock, &mut b, rustix::net::RecvFlags::DONTWAIT) {
        Ok((n, _)) => n.min(b.len()),
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return Report::Nothing,
        Err(_) => return Report::Gone,
    };
    let int = |at: usize| {
        b.get(at..at + 4)
            .and_then(|s| s.try_into().ok())
            .map(i32::from_ne_bytes)
    };
    match b[..n].split_first() {
        None => Report::Gone,
        Some((&SETUP_ERROR, msg)) => Report::SetupError(String::from_utf8_lossy(msg).into_owned()),
        Some((&STATUS, _)) if n == 9 => match (int(1), int(5)) {
            (Some(1), Some(sig)) => Report::Status(Termination::Signaled(sig)),
            (Some(_), Some(code)) => Report::Status(Termination::Exited(code)),
            _ => Report::Nothing,
        },
        Some((&EXITED, _)) if n == 5 => int(1).map_or(Report::Nothing, Report::Exited),
        _ => Report::Nothing,
    }
}

fn pollfd(fd: &OwnedFd) -> libc::pollfd {
    libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }
}

/// The command's environment: the profile's variables, as this process has them, and with
/// an allow-list the proxy variables (over the caller's own) and no `NO_PROXY`.
fn command_env(profile: &Profile, proxy: bool) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for name in &profile.env {
        if let Some(value) = std::env::var_os(name)
            && !env.iter().any(|(k, _)| k == name.as_str())
        {
            env.push((name.into(), value));
        }
    }
    if proxy {
        let vars = crate::shim::proxy_env();
        env.retain(|(k, _)| {
            !vars.iter().any(|(name, _)| k == name) && k != "NO_PROXY" && k != "no_proxy"
        });
        env.extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
    }
    env
}

/// A raw wait status as a [`Termination`].
fn termination(status: i32) -> Termination {
    if libc::WIFSIGNALED(status) {
        Termination::Signaled(libc::WTERMSIG(status))
    } else if libc::WIFEXITED(status) {
        Termination::Exited(libc::WEXITSTATUS(status))
    } else {
        Termination::Exited(-1)
    }
}

/// What this run gets, given the kernel, the profile's switches and the cgroup made for it.
fn enforcement(profile: &Profile, cgroup: &Cgroup, namespaces: bool) -> Enforcement {
    let abi = crate::landlock_layer::kernel_abi();
    let landlock = profile.landlock && abi.is_some();
    let mut not = if profile.landlock {
        landlock_gaps(profile, abi)
    } else {
        vec![
            "Landlock: turned off by the profile: no filesystem rules, no TCP denial by \
             Landlock, no signal or abstract socket scoping"
                .to_string(),
        ]
    };
    if !namespaces {
        not.extend(namespace_gaps(profile, landlock));
    }
    if !profile.seccomp {
        not.push(
            "seccomp: turned off by the profile: ptrace, process_vm_*, io_uring, bpf, the \
             mount API, keyrings, namespace creation, TIOCSTI and socket families are not \
             filtered"
                .into(),
        );
    }
    if profile.net == Net::None && !namespaces && !profile.seccomp {
        not.push(if landlock && abi.is_some_and(|v| v >= 4) {
            "network none: without the namespaces and seccomp only Landlock's TCP bind/connect \
             denial holds: UDP and other socket families reach the host's network"
                .into()
        } else {
            "network none: not enforced (no network namespace, seccomp or Landlock TCP rules): \
             the host's network is reachable"
                .into()
        });
    }
    let pids = match profile.limits.pids {
        None => PidsEnforcement::NotRequested,
        Some(_) if cgroup.has_pids() => PidsEnforcement::Cgroup,
        Some(_) => {
            if rustix::process::getuid().is_root() && profile.run_as_root {
                not.push(
                    "pids: no cgroup could be created and RLIMIT_NPROC does not bind root".into(),
                );
            }
            PidsEnforcement::Rlimit
        }
    };
    Enforcement {
        landlock_abi: abi,
        landlock,
        namespaces,
        seccomp: profile.seccomp,
        pids,
        memory_cgroup: cgroup.has_memory(),
        not_enforced: not,
        uid: 0,
        gid: 0,
    }
}

/// What Landlock, asked for, cannot give on this kernel.
fn landlock_gaps(profile: &Profile, abi: Option<u32>) -> Vec<String> {
    let Some(v) = abi else {
        return vec![
            "Landlock unavailable: no filesystem confinement, no TCP denial by Landlock, no \
             signal scoping"
                .into(),
        ];
    };
    let mut not = Vec::new();
    if v < 2 {
        not.push("Landlock ABI < 2: linking or renaming across directories".into());
    }
    if v < 3 {
        not.push("Landlock ABI < 3: truncate".into());
    }
    if v < 4 && profile.net == Net::None {
        not.push(if profile.seccomp {
            "Landlock ABI < 4: TCP bind/connect (seccomp still denies sockets)".into()
        } else {
            "Landlock ABI < 4: TCP bind/connect".into()
        });
    }
    if v < 4 && matches!(profile.net, Net::Allow(_)) {
        not.push(
            "Landlock ABI < 4: TCP bind/connect other than to the proxy shim (the network \
             namespace still holds only loopback)"
                .into(),
        );
    }
    if v < 5 {
        not.push("Landlock ABI < 5: device ioctls".into());
    }
    if v < 6 {
        not.push("Landlock ABI < 6: signal and abstract Unix socket scoping".into());
    }
    not
}

/// What is lost without the namespaces (and their mount tree), given whether Landlock
/// still confines the paths.
fn namespace_gaps(profile: &Profile, landlock: bool) -> [String; 2] {
    let why = if profile.namespaces {
        "namespaces: unavailable here (user namespaces refused, or the new root could not be \
         built); other processes are visible and the network namespace is the host's"
    } else {
        "namespaces: turned off by the profile"
    };
    let paths = if landlock {
        "mount tree (needs the namespaces): no fresh /tmp or /dev, paths outside the profile \
         are visible (Landlock alone denies them); chmod, chown and timestamps outside the \
         write paths are not prevented"
    } else {
        "mount tree (needs the namespaces): no fresh /tmp or /dev, and with Landlock off or \
         unavailable too, paths are not confined at all: everything this user can read or \
         write, the command can"
    };
    [why.into(), paths.into()]
}
