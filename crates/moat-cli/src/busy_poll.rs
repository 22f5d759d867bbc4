//! Busy polling for a stdio gateway: before its runtime goes to sleep, watch for the next
//! event for a short while instead.
//!
//! A gateway sits in the middle of a request/response chain: it forwards a call to a
//! server and the answer comes back tens of microseconds later; it answers the client and
//! the client's next call often follows as quickly. Sleeping in between means being woken
//! up, and on a virtual machine waking a sleeping vCPU costs as much as the gateway's own
//! work on a call or more (an exit to the hypervisor and an interrupt); measured on a
//! 2-vCPU VM, the gateway's added median latency fell from 68–121 µs to 7–23 µs with a
//! 200 µs window (docs/benchmarks.md). What it costs is CPU: at most the window each time
//! the runtime runs out of work, and only right after it has had some.
//!
//! The runtime's readiness is its epoll instance, which tokio does not expose: the process's
//! epoll descriptors are found in `/proc/self/fd` once the runtime is built (tokio's, and
//! the duplicate it keeps for its signal driver) and polled with a zero timeout; polling an
//! epoll descriptor reports whether it has events without taking them. Between polls the
//! thread yields, so a process woken onto this CPU runs at once rather than waiting for the
//! window to end. With fewer than two CPUs available it stays off: spinning would take the
//! CPU the other side needs to answer.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// At most this many epoll descriptors are watched; more means something unexpected
/// created them, and busy polling stays off.
const MAX_FDS: usize = 4;

/// The runtime's park hook and what it watches.
#[derive(Clone)]
pub struct BusyPoll {
    window: Duration,
    /// The epoll descriptors, found by [`BusyPoll::arm`]; empty: off.
    fds: Arc<OnceLock<Vec<libc::c_int>>>,
}

impl BusyPoll {
    /// Polls for up to `window` before each park, if the process may use two CPUs.
    pub fn new(window: Duration) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        BusyPoll {
            window: if cpus >= 2 { window } else { Duration::ZERO },
            fds: Arc::new(OnceLock::new()),
        }
    }

    /// Finds the runtime's epoll descriptors; call once, right after building it.
    pub fn arm(&self) {
        let fds = if self.window.is_zero() {
            Vec::new()
        } else {
            epoll_fds()
        };
        if !fds.is_empty() {
            tracing::debug!(window = ?self.window, ?fds, "busy polling before sleeping");
        }
        let _ = self.fds.set(fds);
    }

    /// The park hook: returns when the runtime has an event or the window has passed.
    pub fn before_park(&self) {
        let Some(fds) = self.fds.get().filter(|fds| !fds.is_empty()) else {
            return;
        };
        let mut polled = [libc::pollfd {
            fd: -1,
            events: libc::POLLIN,
            revents: 0,
        }; MAX_FDS];
        for (slot, fd) in polled.iter_mut().zip(fds) {
            slot.fd = *fd;
        }
        let started = Instant::now();
        loop {
            // SAFETY: `polled` is a valid array of `fds.len()` ≤ MAX_FDS pollfds, and a zero
            // timeout never blocks. Descriptors set to -1 are ignored by poll(2).
            let ready = unsafe { libc::poll(polled.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
            if ready != 0 || started.elapsed() >= self.window {
                return;
            }
            // SAFETY: sched_yield takes no arguments and cannot fail on Linux.
            unsafe { libc::sched_yield() };
        }
    }
}

/// The process's epoll descriptors, or none if there are more than [`MAX_FDS`].
fn epoll_fds() -> Vec<libc::c_int> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut fds = Vec::new();
    for entry in dir.flatten() {
        let is_epoll = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.as_os_str() == "anon_inode:[eventpoll]");
        if is_epoll && let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
            fds.push(fd);
        }
    }
    if fds.len() > MAX_FDS {
        return Vec::new();
    }
    fds
}
