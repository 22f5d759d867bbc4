//! The zygote: one small single-threaded helper process per supervising process and helper
//! binary, exec'd once (`<helper> __sandbox-init zygote`) and then forked for every run, so
//! that a run pays a `fork` (or a `clone` straight into the new namespaces) instead of an
//! `exec` of the helper binary, and the seccomp programs are built once, not per run.
//!
//! ```text
//!  supervisor (threads) ──control socket──▶ zygote (single-threaded, never execs)
//!        ▲   ▲   ▲                           │ fork / clone(CLONE_NEW*) per run, or the spare
//!        │   └───┴── stdout, stderr pipes ◀── run: PID 1 in new namespaces → command
//!        └────────── run socket ◀──────────── (or, without namespaces, the command itself)
//! ```
//!
//! Per run, the supervisor sends one message on the control socket (`SOCK_SEQPACKET`): the
//! [`Plan`] as JSON, and by `SCM_RIGHTS` exactly five descriptors: stdin (`/dev/null`), the
//! write ends of the stdout and stderr pipes (or, when the caller streams, its own 0, 1
//! and 2 instead of all three), the zygote's end of a fresh run socket
//! (`SOCK_SEQPACKET` pair), and the supervisor's working directory (`O_PATH`). Nothing else
//! crosses: the run keeps only these (as 0, 1, 2, a close-on-exec 3 for reports, and the
//! directory it `fchdir`s to), closing every other descriptor the zygote holds.
//!
//! The spare: a run with namespaces is mostly the kernel making them (the network namespace
//! above all). So the zygote keeps one PID 1 ready in fresh user, PID, network, IPC and UTS
//! namespaces, ids mapped, waiting on a socket of its own; a run with namespaces (and a
//! network of its own) is handed to it with the same message, and the spare then makes its
//! mount namespace (a copy of the host's mount table as it is now) and goes on as any PID 1.
//! A short-lived child of the zygote makes the next spare (`unshare`, then `clone` with
//! `CLONE_PARENT`, so the spare is the zygote's child), so the zygote is never blocked on
//! it. Spares that keep dying stop being made; [`SPARE_ENV`] turns them off.
//!
//! Ids: a root zygote never lets a run keep root unless its plan says so. For a run with
//! namespaces that drops to other ids, the zygote writes the id maps of the run's user
//! namespace itself (a PID 1 can only map its own uid) — right after the `clone`, or, for
//! the spare, just before handing it the run — and says so on the sync pipe; it also hands
//! over each write path as an id-mapped detached tree (`open_tree`, `mount_setattr`), with
//! one user namespace per (owner, run ids) pair made once and kept. The spare of a root
//! zygote is therefore made unmapped. See `namespaces.rs` and `mounts.rs`.
//!
//! On the run socket the supervisor may send [`KILL`]; it receives, in order, at most one
//! [`SETUP_ERROR`](crate::run::SETUP_ERROR) (the run could not be set up; the command never ran), at most one
//! [`STATUS`](crate::run::STATUS) (PID 1 saw the command end: with namespaces and no cgroup, the end of the run
//! for the supervisor), and, last, [`EXITED`] with the wait status of the run's first
//! process once the zygote has reaped it (and killed what was left of its process group).
//!
//! Lifetimes: the zygote ends when the supervising process closes the control socket (it
//! exits or dies); it kills every run still going first, and every run (and the spare) has
//! the zygote as its parent-death signal source (a single-threaded parent, so the signal
//! is exact). A supervisor that drops a run (its run socket) gets that run killed. The
//! zygote sets itself non-dumpable (no same-user `ptrace` or `/proc/<pid>/mem`); its
//! children are dumpable again.
//!
//! A single-threaded supervisor that runs a command or two (the `moat sandbox` command line)
//! may fork the zygote from itself instead of exec'ing the helper ([`start_forked`]): the
//! child of that `fork` takes the control socket as stdin, `/dev/null` as stdout and stderr,
//! an empty environment, and enters the same loop; the supervisor does not wait for it to be
//! ready (its first run is queued on the socket meanwhile). It is then a copy of the
//! supervising process, memory included.
//!
//! The zygote is started with the supervising process's umask, resource limits and
//! scheduling as they are at its first run; later changes to those in the supervising
//! process do not reach sandboxed commands.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

use crate::child::{RunFds, run_child, run_spare};
use crate::run::{
    EXITED, HELPER_ARG, KILL, NO_SPARE_ARG, Plan, Prepared, REPORT_FD, SETUP_FAILED, ZYGOTE_ARG,
    report,
};
use crate::seccomp::Filters;
use crate::{Error, Result};

/// `MOAT_SANDBOX_SPARE=0` in the supervising process's environment, when its zygote starts:
/// no spare PID 1 is kept ready, so every run with namespaces creates them when it starts
/// (slower; for measuring, or for a machine where an idle spare is unwanted).
pub const SPARE_ENV: &str = "MOAT_SANDBOX_SPARE";

/// Zygote → supervisor, on the control socket, once: ready for runs.
const READY: u8 = b'R';
/// Zygote → supervisor, on the control socket, once: could not start (a message follows).
const FAILED: u8 = b'F';

/// A spare's maker → zygote: the spare's pid follows.
const SPARE_PID: u8 = b'P';

/// Descriptors per run request: stdin, stdout, stderr, run socket, working directory.
const RUN_FDS: usize = 5;
/// At most this many write paths of a run get an id-mapped tree (the rest are bound as
/// they are).
const MAX_TREES: usize = 8;
/// The largest plan accepted (a `SOCK_SEQPACKET` message must fit the socket buffer anyway).
const MAX_PLAN: usize = 1 << 20;

// ------------------------------------------------------------------ supervisor side

/// A running zygote, as the supervising process sees it.
pub(crate) struct Zygote {
    ctl: OwnedFd,
    process: Mutex<Process>,
    dead: AtomicBool,
}

/// The zygotes of this process, one per helper binary.
static ZYGOTES: Mutex<Vec<(PathBuf, Arc<Zygote>)>> = Mutex::new(Vec::new());

/// Where a run's stdin, stdout and stderr come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunIo {
    /// stdin `/dev/null`; stdout and stderr into pipes the supervisor reads.
    Capture,
    /// The supervising process's own descriptors 0, 1 and 2, passed as they are.
    PassThrough,
}

/// The ends of one run the supervisor keeps.
pub(crate) struct RunEnds {
    pub sock: OwnedFd,
    /// The read ends of the output pipes (`None` when the output is passed through).
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
}

/// Starts a run of `plan` (encoded) in the zygote for `helper`, starting that zygote first if
/// there is none yet, or if the last one died.
pub(crate) fn start_run(helper: &Path, plan: &[u8], io: RunIo) -> Result<RunEnds> {
    // The run's 0, 1, 2 as sent, and the pipes' read ends kept here. What is sent is dropped
    // on return: past the send, no copy of the run's descriptors stays in this process
    // (only the caller's own 0, 1, 2 when passed through), so that end of file arrives.
    let (given, stdout, stderr) = match io {
        RunIo::Capture => {
            let (out_r, out_w) = pipe()?;
            let (err_r, err_w) = pipe()?;
            let null = open_null(rustix::fs::OFlags::RDONLY)?;
            ([null, out_w, err_w], Some(out_r), Some(err_r))
        }
        RunIo::PassThrough => (passed_through()?, None, None),
    };
    let (sock, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(io::Error::from)?;
    let dir_flags =
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC;
    let cwd = rustix::fs::open(".", dir_flags, rustix::fs::Mode::empty())
        .or_else(|_| rustix::fs::open("/", dir_flags, rustix::fs::Mode::empty()))
        .map_err(io::Error::from)?;
    let [stdin_fd, stdout_fd, stderr_fd] = &given;
    let fds = [
        stdin_fd.as_fd(),
        stdout_fd.as_fd(),
        stderr_fd.as_fd(),
        theirs.as_fd(),
        cwd.as_fd(),
    ];
    let mut retried = false;
    loop {
        let zygote = get(helper)?;
        match zygote.send(plan, &fds) {
            Ok(()) => break,
            Err(e) if !retried && peer_gone(&e) => {
                zygote.bury();
                retried = true;
            }
            Err(e) => {
                return Err(Error::Helper {
                    helper: helper.to_path_buf(),
                    error: e,
                });
            }
        }
    }
    Ok(RunEnds {
        sock,
        stdout,
        stderr,
    })
}

/// Close-on-exec copies of this process's descriptors 0, 1 and 2, for the time of the send
/// (`/dev/null` in place of one that is closed).
fn passed_through() -> io::Result<[OwnedFd; 3]> {
    let copy = |fd: RawFd, null: rustix::fs::OFlags| -> io::Result<OwnedFd> {
        // SAFETY: F_DUPFD_CLOEXEC only reads `fd` (EBADF if it is closed).
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        if new < 0 {
            return open_null(null);
        }
        // SAFETY: `new` is a fresh descriptor owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(new) })
    };
    Ok([
        copy(0, rustix::fs::OFlags::RDONLY)?,
        copy(1, rustix::fs::OFlags::WRONLY)?,
        copy(2, rustix::fs::OFlags::WRONLY)?,
    ])
}

fn open_null(access: rustix::fs::OFlags) -> io::Result<OwnedFd> {
    rustix::fs::open(
        "/dev/null",
        access | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(io::Error::from)
}

fn peer_gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPIPE | libc::ECONNRESET | libc::ENOTCONN | libc::ECONNREFUSED)
    )
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(io::Error::from)
}

/// The live zygote for `helper`, started if needed (an exec'd one's first message awaited).
fn get(helper: &Path) -> Result<Arc<Zygote>> {
    let mut all = ZYGOTES.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(_, z)| !z.dead.load(Ordering::Relaxed));
    if let Some((_, z)) = all.iter().find(|(p, _)| p == helper) {
        // One forked by `start_forked` is not waited for: the run is sent at once and
        // queued, so that the zygote, once it runs, finds it without another hand-off. Its
        // first message (ready, or why not) stays unread; if it could not start, its end of
        // the socket is closed and the run ends with "the zygote ended during the run", the
        // next send fails, and an exec'd helper replaces it.
        return Ok(Arc::clone(z));
    }
    let z = Arc::new(Zygote::start(helper)?);
    z.await_ready(helper)?;
    all.push((helper.to_path_buf(), Arc::clone(&z)));
    Ok(z)
}

/// Starts the zygote for `helper` as a fork of this process (rather than an exec of the
/// helper binary), unless one runs already; returns at once: nothing waits for it to be ready
/// (see [`get`]). Refused when this process has other threads: the zygote's
/// code runs in the child of the `fork`, which must not inherit locks held by threads that
/// do not exist there.
pub(crate) fn start_forked(helper: &Path, spares: bool) -> Result<()> {
    let mut all = ZYGOTES.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(_, z)| !z.dead.load(Ordering::Relaxed));
    if all.iter().any(|(p, _)| p == helper) {
        return Ok(());
    }
    if !single_threaded() {
        return Err(Error::Unsupported(
            "the sandbox helper can be forked only from a single-threaded process".into(),
        ));
    }
    let err = |error: io::Error| Error::Helper {
        helper: helper.to_path_buf(),
        error,
    };
    let (ctl, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| err(e.into()))?;
    let null = open_null(rustix::fs::OFlags::RDWR).map_err(err)?;
    // SAFETY: fork in a single-threaded process (checked above; the lock held is this
    // thread's own, and the child never returns to code that would release it twice).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(err(io::Error::last_os_error()));
    }
    if pid == 0 {
        // What an exec'd helper would have: the control socket as stdin, /dev/null as
        // stdout and stderr (so that nothing waiting for this program's output waits for
        // the zygote too), an empty environment. `serve` closes every other descriptor.
        // SAFETY: descriptor juggling and clearenv in the single-threaded child.
        unsafe {
            if libc::dup2(theirs.as_raw_fd(), 0) < 0
                || libc::dup2(null.as_raw_fd(), 1) < 0
                || libc::dup2(null.as_raw_fd(), 2) < 0
            {
                libc::_exit(SETUP_FAILED);
            }
            libc::clearenv();
        }
        // Never back into the caller's code, whatever happens in the zygote.
        let _ = std::panic::catch_unwind(|| serve(spares));
        // SAFETY: leaving the forked child without running the caller's exit handlers.
        unsafe { libc::_exit(SETUP_FAILED) }
    }
    drop((theirs, null));
    let zygote = Zygote {
        ctl,
        process: Mutex::new(Process::Forked(pid)),
        dead: AtomicBool::new(false),
    };
    all.push((helper.to_path_buf(), Arc::new(zygote)));
    Ok(())
}

/// Whether this process has one thread (`/proc/self/stat`'s `num_threads`).
fn single_threaded() -> bool {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return false;
    };
    // The fields after the command name (which may hold spaces and parentheses): state is
    // the first of them, num_threads the 18th.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(17))
        .is_some_and(|n| n == "1")
}

/// How the zygote was started, to reap it.
enum Process {
    /// Exec'd (`Command`).
    Spawned(Child),
    /// Forked from this process.
    Forked(libc::pid_t),
}

impl Zygote {
    fn start(helper: &Path) -> Result<Zygote> {
        let err = |error: io::Error| Error::Helper {
            helper: helper.to_path_buf(),
            error,
        };
        let (ctl, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| err(e.into()))?;
        let mut cmd = Command::new(helper);
        cmd.arg(HELPER_ARG).arg(ZYGOTE_ARG);
        if std::env::var_os(SPARE_ENV).is_some_and(|v| v == "0") {
            cmd.arg(NO_SPARE_ARG);
        }
        let child = cmd
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(err)?;
        Ok(Zygote {
            ctl,
            process: Mutex::new(Process::Spawned(child)),
            dead: AtomicBool::new(false),
        })
    }

    /// Waits for its first message, which says whether it is ready; a binary that is no
    /// sandbox helper just ends (end of file). Buries it if it is not.
    fn await_ready(&self, helper: &Path) -> Result<()> {
        let err = |error: io::Error| Error::Helper {
            helper: helper.to_path_buf(),
            error,
        };
        let mut buf = [0u8; 4096];
        let n = match recv_timeout(&self.ctl, &mut buf, Duration::from_secs(30)) {
            Ok(n) => n,
            Err(e) => {
                self.bury();
                return Err(err(e));
            }
        };
        match buf[..n].split_first() {
            Some((&READY, _)) => Ok(()),
            Some((&FAILED, msg)) => {
                self.bury();
                Err(Error::Setup(String::from_utf8_lossy(msg).into_owned()))
            }
            _ => {
                self.bury();
                Err(err(io::Error::other(
                    "it did not start as a sandbox helper (does it call \
                     moat_sandbox::helper_main() first thing in main?)",
                )))
            }
        }
    }

    fn send(&self, plan: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        send_with_fds(&self.ctl, plan, fds)
    }

    /// Marks it dead and reaps it (killing it if it still runs).
    fn bury(&self) {
        self.dead.store(true, Ordering::Relaxed);
        let Ok(mut process) = self.process.lock() else {
            return;
        };
        match &mut *process {
            Process::Spawned(child) => {
                if matches!(child.try_wait(), Ok(None)) {
                    let _ = child.kill();
                }
                let _ = child.wait();
            }
            Process::Forked(pid) => {
                let mut status = 0;
                // SAFETY: our own child, not reaped yet (only `bury` reaps it, and marks
                // it reaped by setting the pid to 0).
                unsafe {
                    if *pid > 0 {
                        if libc::waitpid(*pid, &mut status, libc::WNOHANG) == 0 {
                            libc::kill(*pid, libc::SIGKILL);
                            libc::waitpid(*pid, &mut status, 0);
                        }
                        *pid = 0;
                    }
                }
            }
        }
    }
}

/// Receives one message, waiting at most `timeout`; 0 bytes is end of file.
fn recv_timeout(fd: &OwnedFd, buf: &mut [u8], timeout: Duration) -> io::Result<usize> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd.
    match unsafe { libc::poll(&mut pfd, 1, ms) } {
        0 => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no answer from the sandbox helper",
        )),
        n if n < 0 => Err(io::Error::last_os_error()),
        _ => Ok(rustix::net::recv(fd, buf, RecvFlags::empty())?.0),
    }
}

// ------------------------------------------------------------------ zygote side

/// A run in progress, in the zygote.
struct Run {
    pid: libc::pid_t,
    sock: OwnedFd,
    /// The supervisor closed its end: nothing more to read or report.
    hung_up: bool,
}

/// A spare PID 1: cloned ahead into new user, PID, network, IPC and UTS namespaces, ids
/// mapped, waiting on `sock` for a run (see [`spare_main`]).
struct Spare {
    pid: libc::pid_t,
    sock: OwnedFd,
}

/// The zygote's state.
struct State {
    prepared: Prepared,
    runs: Vec<Run>,
    spare: Option<Spare>,
    /// A spare being made: the socket on which its maker sends the spare's pid.
    pending: Option<OwnedFd>,
    /// Spares that died unused, or could not be made, in a row: past a few, none is made
    /// any more.
    spare_failures: u32,
    /// User namespaces that map a write path's owner to a run's ids (owner uid and gid,
    /// run's uid and gid), for id-mapped mounts; made once each.
    idmaps: Vec<([u32; 4], OwnedFd)>,
}

/// Spares that may die unused in a row before the zygote stops making them.
const MAX_SPARE_FAILURES: u32 = 3;

/// The write end of the zygote's `SIGCHLD` self-pipe.
static SIGCHLD_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_sigchld(_: libc::c_int) {
    // SAFETY: write(2) and errno access are async-signal-safe.
    unsafe {
        let errno = *libc::__errno_location();
        let fd = SIGCHLD_PIPE.load(Ordering::Relaxed);
        let _ = libc::write(fd, [0u8].as_ptr().cast(), 1);
        *libc::__errno_location() = errno;
    }
}

/// The zygote's main loop. Entered from [`crate::helper_main`], single-threaded, with the
/// control socket as stdin; never returns.
pub(crate) fn serve(spares: bool) -> ! {
    // SAFETY: fd 0 is the control socket the supervisor handed over; it is owned here.
    let ctl = unsafe { OwnedFd::from_raw_fd(0) };
    let prepared = match prepare() {
        Ok(p) => p,
        Err(e) => exit_with(&ctl, &e),
    };
    let (wake_r, wake_w) = match rustix::pipe::pipe_with(
        rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
    ) {
        Ok(p) => p,
        Err(e) => exit_with(&ctl, &format!("pipe: {e}")),
    };
    SIGCHLD_PIPE.store(wake_w.as_raw_fd(), Ordering::Relaxed);
    // SAFETY: installing an async-signal-safe handler; the zygote has no other threads.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigchld as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART | libc::SA_NOCLDSTOP;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGCHLD, &sa, std::ptr::null_mut()) != 0 {
            exit_with(&ctl, &format!("sigaction: {}", io::Error::last_os_error()));
        }
    }
    if rustix::net::send(&ctl, &[READY], SendFlags::NOSIGNAL).is_err() {
        std::process::exit(0);
    }
    let mut z = State {
        prepared,
        runs: Vec::new(),
        spare: None,
        pending: None,
        spare_failures: if spares { 0 } else { MAX_SPARE_FAILURES },
        idmaps: Vec::new(),
    };
    z.make_spare();
    let mut buf = vec![0u8; MAX_PLAN];
    loop {
        let mut pfds = vec![
            libc::pollfd {
                fd: ctl.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake_r.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let watched: Vec<usize> = (0..z.runs.len()).filter(|&i| !z.runs[i].hung_up).collect();
        pfds.extend(watched.iter().map(|&i| libc::pollfd {
            fd: z.runs[i].sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        let pending_at = pfds.len();
        if let Some(p) = &z.pending {
            pfds.push(libc::pollfd {
                fd: p.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // SAFETY: `pfds` is a valid array of pollfd.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            z.shutdown();
        }
        // Run sockets first: `watched` holds indices into `runs`, which reaping reorders.
        for (k, &i) in watched.iter().enumerate() {
            if pfds[2 + k].revents != 0 {
                on_run_socket(&mut z.runs[i]);
            }
        }
        if pfds.get(pending_at).is_some_and(|p| p.revents != 0) {
            z.spare_made();
        }
        if pfds[1].revents != 0 {
            let mut sink = [0u8; 64];
            while matches!(rustix::io::read(&wake_r, &mut sink), Ok(n) if n > 0) {}
            z.reap();
        }
        if pfds[0].revents != 0 {
            match receive(&ctl, &mut buf) {
                Ok(Some((len, fds))) => z.start(&buf[..len], fds),
                Ok(None) => z.shutdown(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => z.shutdown(),
            }
        }
    }
}

fn exit_with(ctl: &OwnedFd, msg: &str) -> ! {
    let msg = [&[FAILED][..], msg.as_bytes()].concat();
    let _ = rustix::net::send(ctl, &msg, SendFlags::NOSIGNAL);
    std::process::exit(SETUP_FAILED)
}

/// Once, before any run: a session of its own (no terminal signals), no descriptor but the
/// control socket and stdio, not dumpable, `/` as working directory, the seccomp programs.
fn prepare() -> Result<Prepared, String> {
    let _ = rustix::process::setsid();
    // SAFETY: close_range on descriptors this process does not use.
    unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    let _ = std::env::set_current_dir("/");
    let pid = rustix::process::getpid();
    Ok(Prepared {
        uid: rustix::process::getuid().as_raw(),
        gid: rustix::process::getgid().as_raw(),
        pid: pid.as_raw_nonzero().get(),
        pidfd: rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok(),
        filters: Filters::compile()?,
        landlock_abi: crate::landlock_layer::kernel_abi(),
    })
}

fn kill_run(pid: libc::pid_t) {
    // SAFETY: signals only; `pid` is a child not yet reaped, so it names that child (and
    // its process group, once it has made one).
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
        libc::kill(pid, libc::SIGKILL);
    }
}

/// A message (or hang-up) from a run's supervisor.
fn on_run_socket(run: &mut Run) {
    let mut b = [0u8; 16];
    match rustix::net::recv(&run.sock, &mut b, RecvFlags::DONTWAIT) {
        Ok((n, _)) if n > 0 => {
            if b[0] == KILL {
                kill_run(run.pid);
            }
        }
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {}
        // End of file or an error: the supervisor dropped the run.
        _ => {
            run.hung_up = true;
            kill_run(run.pid);
        }
    }
}

/// One request (from the control socket, or to a spare): the plan's length and its
/// descriptors, or `None` at end of file.
fn receive(sock: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<(usize, Vec<OwnedFd>)>> {
    let mut space =
        [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(RUN_FDS + 1 + MAX_TREES))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = rustix::net::recvmsg(
        sock,
        &mut [IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = m {
            fds.extend(rights);
        }
    }
    if msg.bytes == 0 && fds.is_empty() {
        return Ok(None);
    }
    Ok(Some((msg.bytes.min(buf.len()), fds)))
}

/// Reports a setup error on a run socket.
fn setup_error(sock: &OwnedFd, msg: &str) {
    let _ = rustix::net::send(
        sock,
        &crate::run::setup_error(msg),
        SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
    );
}

/// Reports that a run is over (`status`: a raw wait status).
fn exited(sock: &OwnedFd, status: i32) {
    let mut msg = [0u8; 5];
    msg[0] = EXITED;
    msg[1..].copy_from_slice(&status.to_ne_bytes());
    let _ = rustix::net::send(sock, &msg, SendFlags::NOSIGNAL | SendFlags::DONTWAIT);
}

/// A fork-like `clone` into new namespaces: the child continues on a copy of this
/// (single-threaded) process. Returns the child's pid, 0 in the child.
fn clone_into(flags: libc::c_int) -> io::Result<libc::pid_t> {
    // SAFETY: no new stack and no shared memory: fork semantics, with namespace flags, from
    // a single-threaded process.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid as libc::pid_t)
}

/// The namespaces of a run that has its own network namespace, but its mount namespace,
/// which a spare makes only when it gets its run (so that it copies the host's mount table
/// as it is then, not as it was when the spare was made).
const SPARE_NAMESPACES: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;

/// First thing in a fresh child of the zygote: default `SIGCHLD` disposition, dumpable
/// again, and the parent-death signal (the zygote is single-threaded, so it fires when the
/// zygote ends); if the zygote already ended, leave. Runs before any descriptor is moved
/// (the zygote's pidfd is still where it was).
fn child_defaults(prepared: &Prepared, in_pid_namespace: bool) {
    // SAFETY: restoring default dispositions and dumpability in a fresh child.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
    }
    let sig = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    if sig.is_err() || zygote_gone(prepared, in_pid_namespace) {
        // SAFETY: leaving a forked child without running the zygote's exit handlers.
        unsafe { libc::_exit(SETUP_FAILED) }
    }
}

/// Whether the zygote ended before the parent-death signal was set.
fn zygote_gone(prepared: &Prepared, in_pid_namespace: bool) -> bool {
    if !in_pid_namespace {
        return rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) != Some(prepared.pid);
    }
    // PID 1 sees no parent (it is outside the namespace): ask the zygote's pidfd.
    let Some(pidfd) = &prepared.pidfd else {
        return false;
    };
    let mut pfd = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no waiting.
    unsafe { libc::poll(&mut pfd, 1, 0) == 1 }
}

impl State {
    /// Kills every run and ends the zygote (the supervisor is gone).
    fn shutdown(&self) -> ! {
        for run in &self.runs {
            kill_run(run.pid);
        }
        // A spare dies of its parent-death signal (its pid may be reaped already).
        std::process::exit(0)
    }

    /// Starts making a spare PID 1 if there is none (and spares work here). A short-lived
    /// child of the zygote makes the namespaces (the network namespace above all: most of
    /// a run's setup time), maps the ids, and clones the spare into them as the zygote's
    /// own child (`CLONE_PARENT`), then sends its pid. The zygote only forks: it stays free
    /// for runs meanwhile, and runs with namespaces find the spare ready when they come.
    fn make_spare(&mut self) {
        if self.spare.is_some()
            || self.pending.is_some()
            || self.spare_failures >= MAX_SPARE_FAILURES
        {
            return;
        }
        let Ok((ours, theirs)) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        ) else {
            self.spare_failures += 1;
            return;
        };
        // SAFETY: fork in a single-threaded process.
        match unsafe { libc::fork() } {
            0 => {
                child_defaults(&self.prepared, false);
                make_spare(&self.prepared, theirs.as_raw_fd())
            }
            -1 => self.spare_failures += 1,
            _ => self.pending = Some(ours),
        }
    }

    /// Id-mapped detached copies of the profile's write paths, for a run as `run_as`: each
    /// path's owner on disk appears as the run's ids (see `mounts.rs`). A path already the
    /// run's, or one whose file system cannot be id-mapped, gets none (it is bound as is).
    fn trees(&mut self, profile: &crate::Profile, run_as: (u32, u32)) -> Vec<(usize, OwnedFd)> {
        use std::os::unix::fs::MetadataExt;
        let mut out = Vec::new();
        for (i, path) in profile.rw.iter().enumerate().take(MAX_TREES) {
            let Ok(meta) = std::fs::metadata(path) else {
                continue;
            };
            let key = [meta.uid(), meta.gid(), run_as.0, run_as.1];
            if (key[0], key[1]) == run_as {
                continue;
            }
            let userns = match self.idmaps.iter().find(|(k, _)| *k == key) {
                Some((_, fd)) => fd.as_raw_fd(),
                None => match idmap_userns(key) {
                    Ok(fd) => {
                        let raw = fd.as_raw_fd();
                        self.idmaps.push((key, fd));
                        raw
                    }
                    Err(_) => continue,
                },
            };
            if let Ok(tree) = idmapped_tree(path, userns) {
                out.push((i, tree));
            }
        }
        out
    }

    /// The spare's maker sent its pid, or ended without a spare.
    fn spare_made(&mut self) {
        let Some(sock) = self.pending.take() else {
            return;
        };
        let mut b = [0u8; 8];
        match rustix::net::recv(&sock, &mut b, RecvFlags::DONTWAIT) {
            Ok((5, _)) if b[0] == SPARE_PID => {
                let pid = i32::from_ne_bytes([b[1], b[2], b[3], b[4]]);
                self.spare = Some(Spare { pid, sock });
            }
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => self.pending = Some(sock),
            // No user namespaces here (or no more processes): runs take the direct way.
            _ => self.spare_failures += 1,
        }
    }

    /// Reaps every child that ended and reports it to its supervisor.
    fn reap(&mut self) {
        loop {
            let mut status = 0;
            // SAFETY: waits for any child of ours without blocking.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            if self.spare.as_ref().is_some_and(|s| s.pid == pid) {
                self.spare = None;
                self.spare_failures += 1;
                continue;
            }
            let Some(i) = self.runs.iter().position(|r| r.pid == pid) else {
                continue;
            };
            let run = self.runs.swap_remove(i);
            // What the command left in its process group goes with it.
            // SAFETY: a signal to a process group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            exited(&run.sock, status);
        }
        self.make_spare();
    }

    /// Starts a run: hands it to the spare when it can, else forks (or clones into new
    /// namespaces) its first process. An unusable request is reported on its run socket,
    /// if it has one.
    fn start(&mut self, plan_bytes: &[u8], fds: Vec<OwnedFd>) {
        let Ok::<[OwnedFd; RUN_FDS], _>([stdin, stdout, stderr, sock, cwd]) = fds.try_into() else {
            return;
        };
        let fail = |sock: &OwnedFd, msg: &str| {
            setup_error(sock, msg);
            exited(sock, SETUP_FAILED << 8);
        };
        let plan: Plan = match serde_json::from_slice(plan_bytes) {
            Ok(p) => p,
            Err(e) => return fail(&sock, &format!("bad plan: {e}")),
        };
        // With a cgroup and namespaces the zygote moves PID 1 into the cgroup from outside,
        // and PID 1 waits for that before it starts the command; with ids to drop to, the
        // zygote writes PID 1's id maps, and PID 1 waits for them before anything else.
        let drops = plan.namespaces && plan.run_as.is_some();
        let sync = if plan.namespaces && (!plan.cgroup_procs.is_empty() || drops) {
            match pipe() {
                Ok(p) => Some(p),
                Err(e) => return fail(&sock, &format!("pipe: {e}")),
            }
        } else {
            None
        };
        let trees = match plan.run_as {
            Some(ids) if drops => self.trees(&plan.profile, ids),
            _ => Vec::new(),
        };
        let mut pid = None;
        if plan.namespaces
            && plan.profile.net.is_isolated()
            && let Some(spare) = self.spare.take()
        {
            // A root zygote maps the spare's ids now that it knows the run's.
            let mapped = self.prepared.uid != 0
                || crate::namespaces::write_maps(spare.pid, plan.run_as).is_ok();
            let mut passed = vec![
                stdin.as_fd(),
                stdout.as_fd(),
                stderr.as_fd(),
                sock.as_fd(),
                cwd.as_fd(),
            ];
            if let Some((r, _)) = &sync {
                passed.push(r.as_fd());
            }
            passed.extend(trees.iter().map(|(_, fd)| fd.as_fd()));
            // After the plan: the trees' indices in `rw`, and their count.
            let mut message = plan_bytes.to_vec();
            message.extend(trees.iter().map(|&(i, _)| i as u8));
            message.push(trees.len() as u8);
            if mapped && send_with_fds(&spare.sock, &message, &passed).is_ok() {
                pid = Some(spare.pid);
                self.spare_failures = 0;
            } else {
                kill_run(spare.pid);
            }
            // Else it is gone (its pid may be reaped already: not signalled); this run takes
            // the direct way.
        }
        let pid = match pid {
            Some(p) => p,
            None => {
                let forked = if plan.namespaces {
                    let mut flags = SPARE_NAMESPACES | libc::CLONE_NEWNS;
                    if !plan.profile.net.is_isolated() {
                        flags &= !libc::CLONE_NEWNET;
                    }
                    clone_into(flags)
                } else {
                    // SAFETY: fork in a single-threaded process.
                    match unsafe { libc::fork() } {
                        -1 => Err(io::Error::last_os_error()),
                        p => Ok(p),
                    }
                };
                match forked {
                    Ok(0) => {
                        // The run's first process. Nothing of the zygote's loop is used
                        // from here on, and every descriptor but the run's own is closed
                        // before anything else.
                        child_defaults(&self.prepared, plan.namespaces);
                        let fds = RunFds {
                            stdin: stdin.as_raw_fd(),
                            stdout: stdout.as_raw_fd(),
                            stderr: stderr.as_raw_fd(),
                            report: sock.as_raw_fd(),
                            cwd: cwd.as_raw_fd(),
                            sync: sync.as_ref().map(|(r, _)| r.as_raw_fd()),
                            trees: trees.iter().map(|(i, fd)| (*i, fd.as_raw_fd())).collect(),
                        };
                        run_child(&self.prepared, &plan, fds)
                    }
                    Ok(p) => {
                        if drops && let Err(e) = crate::namespaces::write_maps(p, plan.run_as) {
                            kill_run(p);
                            setup_error(&sock, &e);
                        }
                        p
                    }
                    Err(e) => {
                        let what = if plan.namespaces {
                            "clone into new namespaces"
                        } else {
                            "fork"
                        };
                        return fail(&sock, &format!("{what}: {e}"));
                    }
                }
            }
        };
        drop((stdin, stdout, stderr, cwd, trees));
        if let Some((r, w)) = sync {
            drop(r);
            if drops {
                // The maps are written (or the run killed, and this byte goes nowhere).
                let _ = rustix::io::write(&w, &[1]);
            }
            let me = pid.to_string();
            for procs in &plan.cgroup_procs {
                if let Err(e) = std::fs::write(procs, &me) {
                    kill_run(pid);
                    setup_error(&sock, &format!("joining cgroup {}: {e}", procs.display()));
                    break;
                }
            }
            let _ = rustix::io::write(&w, &[1]);
        }
        self.runs.push(Run {
            pid,
            sock,
            hung_up: false,
        });
        self.make_spare();
    }
}

/// A user namespace mapping `key`'s owner uid and gid (inside) to the run's (outside), to
/// id-map a mount with: a child cloned into a new user namespace, its maps written from
/// here, its namespace opened, then killed.
fn idmap_userns(key: [u32; 4]) -> io::Result<OwnedFd> {
    let [owner_uid, owner_gid, uid, gid] = key;
    let pid = clone_into(libc::CLONE_NEWUSER)?;
    if pid == 0 {
        // SAFETY: waiting to be killed; nothing of the zygote runs here.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            loop {
                libc::pause();
            }
        }
    }
    let opened = (|| {
        std::fs::write(
            format!("/proc/{pid}/uid_map"),
            format!("{owner_uid} {uid} 1\n"),
        )?;
        std::fs::write(
            format!("/proc/{pid}/gid_map"),
            format!("{owner_gid} {gid} 1\n"),
        )?;
        rustix::fs::open(
            format!("/proc/{pid}/ns/user"),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(io::Error::from)
    })();
    // SAFETY: our own child, not yet reaped: kill and reap it here (the SIGCHLD loop then
    // finds nothing).
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    opened
}

/// A detached recursive copy of the mount tree at `path`, id-mapped by `userns`, `nosuid`
/// and `nodev`.
fn idmapped_tree(path: &Path, userns: RawFd) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    const MOUNT_ATTR_NOSUID: u64 = 0x2;
    const MOUNT_ATTR_NODEV: u64 = 0x4;
    const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("NUL in path"))?;
    // SAFETY: open_tree reads a NUL-terminated path; it returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns as u64,
    };
    // SAFETY: mount_setattr reads `attr` (of the size passed) and an empty path.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(tree)
}

/// Sends one message with descriptors.
fn send_with_fds(sock: &OwnedFd, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut space =
        [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(RUN_FDS + 1 + MAX_TREES))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("ancillary buffer too small"));
    }
    let n = rustix::net::sendmsg(
        sock,
        &[IoSlice::new(bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    if n != bytes.len() {
        return Err(io::Error::other("message sent in part"));
    }
    Ok(())
}

/// The spare's maker (a child of the zygote): keep only the spare's socket (as fd 3), make
/// new user, PID, network, IPC and UTS namespaces, map the ids, then clone the spare into
/// them as a child of the zygote and send its pid. Never returns.
fn make_spare(prepared: &Prepared, sock: RawFd) -> ! {
    // SAFETY: leaving a forked child without running the zygote's exit handlers.
    let leave = |code| -> ! { unsafe { libc::_exit(code) } };
    // Only the spare's socket (as fd 3) and harmless stdio (/dev/null in the zygote), so
    // that neither this process nor the spare holds the control socket or any run's.
    // SAFETY: descriptor juggling on our own descriptors; then close everything else.
    unsafe {
        let high = libc::fcntl(sock, libc::F_DUPFD_CLOEXEC, 16);
        if high < 0 || libc::dup3(high, REPORT_FD, libc::O_CLOEXEC) < 0 || libc::dup2(1, 0) < 0 {
            leave(SETUP_FAILED);
        }
        libc::syscall(
            libc::SYS_close_range,
            (REPORT_FD + 1) as u32,
            u32::MAX,
            0u32,
        );
    }
    // SAFETY: unshare takes flags only; this process is single-threaded. A root zygote
    // maps the spare's ids when it hands it a run (they depend on the run).
    if unsafe { libc::unshare(SPARE_NAMESPACES) } != 0
        || (prepared.uid != 0 && crate::namespaces::map_ids(prepared).is_err())
    {
        leave(SETUP_FAILED);
    }
    // SAFETY: a fork-like clone whose child is the zygote's (CLONE_PARENT); in the new PID
    // namespace it is PID 1.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_PARENT | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid == 0 {
        // Die with the zygote (now the parent). Had it ended already, its end of the
        // socket is closed and the spare leaves at its first read.
        let _ =
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
        spare_main(prepared)
    }
    if pid > 0 {
        let mut msg = [0u8; 5];
        msg[0] = SPARE_PID;
        msg[1..].copy_from_slice(&(pid as i32).to_ne_bytes());
        report(REPORT_FD, &msg);
    }
    leave(0)
}

/// A spare PID 1, waiting for its run on fd 3: ids mapped, a session of its own, the
/// parent-death signal set; on its run, a mount namespace of its own, then what any run's
/// PID 1 does. If the zygote goes away first, its socket ends and so does the spare. Never
/// returns.
fn spare_main(prepared: &Prepared) -> ! {
    let _ = rustix::process::setsid();
    // SAFETY: REPORT_FD is the spare's socket, owned here.
    let sock = unsafe { OwnedFd::from_raw_fd(REPORT_FD) };
    let mut buf = vec![0u8; MAX_PLAN];
    let (len, fds) = loop {
        match receive(&sock, &mut buf) {
            Ok(Some(got)) => break got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Retired, or the zygote is gone.
            // SAFETY: leaving a forked child without running the zygote's exit handlers.
            _ => unsafe { libc::_exit(0) },
        }
    };
    let report = fds.get(3).map(|fd| fd.as_raw_fd());
    let fail = |msg: &str| -> ! {
        if let Some(fd) = report {
            crate::run::report(fd, &crate::run::setup_error(msg));
        }
        // SAFETY: as above.
        unsafe { libc::_exit(SETUP_FAILED) }
    };
    // The message: the plan, the trees' indices in `rw`, their count.
    let Some((&count, rest)) = buf[..len].split_last() else {
        fail("bad request")
    };
    let count = usize::from(count);
    if fds.len() < RUN_FDS + count || rest.len() < count {
        fail("bad request");
    }
    let (plan_bytes, indices) = rest.split_at(rest.len() - count);
    let plan: Plan = match serde_json::from_slice(plan_bytes) {
        Ok(p) => p,
        Err(e) => fail(&format!("bad plan: {e}")),
    };
    let has_sync = fds.len() == RUN_FDS + count + 1;
    let first_tree = RUN_FDS + usize::from(has_sync);
    let trees = indices
        .iter()
        .zip(&fds[first_tree..])
        .map(|(&i, fd)| (usize::from(i), fd.as_raw_fd()))
        .collect();
    // SAFETY: unshare takes flags only; this process is single-threaded.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        fail(&format!(
            "unshare (mount namespace): {}",
            io::Error::last_os_error()
        ));
    }
    let run_fds = RunFds {
        stdin: fds[0].as_raw_fd(),
        stdout: fds[1].as_raw_fd(),
        stderr: fds[2].as_raw_fd(),
        report: fds[3].as_raw_fd(),
        cwd: fds[4].as_raw_fd(),
        sync: has_sync.then(|| fds[5].as_raw_fd()),
        trees,
    };
    // The spare's own socket (fd 3) is replaced by the run's report socket there.
    std::mem::forget(sock);
    run_spare(prepared, &plan, run_fds)
}
