//! Busy polling for a stdio gateway: before its runtime goes to sleep, watch for the next
//! event for a short while instead.
//!
//! A gateway sits in the middle of a request/response chain: it forwards a call to a
//! server and the answer comes back tens of microseconds later; it answers the client and
//! the client's next call often follows as quickly. Sleeping in between means being woken
//! up, and on a virtual machine waking a sleeping vCPU costs as much as the gateway's own
//! work on a call or more (an exit to the hypervisor and an interrupt); measured on a
//! 2-vCPU VM, the gateway's added median latency fell from 68–122 µs to 7–23 µs with a
//! 200 µs window (docs/benchmarks.md). What it costs is CPU: at most the window each time
//! the runtime runs out of work, and only right after it has had some; and a timer that
//! falls due while it polls fires up to the window late (the hook does not see the timer
//! wheel; every timer in a gateway is seconds long).
//!
//! The runtime's readiness is its epoll instance, which tokio does not expose: the process's
//! epoll descriptors are found in `/proc/self/fd` once the runtime is built (tokio's, and
//! the duplicate it keeps for its signal driver) and polled with a zero timeout; polling an
//! epoll descriptor reports whether it has events without taking them. Between polls the
//! thread yields, so a process woken onto this CPU runs at once rather than waiting for the
//! window to end. With fewer than two CPUs available it stays off: spinning would take the
//! CPU the other side needs to answer. Where there is no `/proc/self/fd` (not Linux) it
//! finds nothing to poll and stays off too.

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
        let mut fds = if self.window.is_zero() {
            Vec::new()
        } else {
            epoll_fds()
        };
        if fds.len() > MAX_FDS {
            fds.clear();
        }
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
        let watched = fds.len().min(MAX_FDS);
        let started = Instant::now();
        loop {
            // SAFETY: `polled` is a valid array of MAX_FDS ≥ `watched` pollfds, and a zero
            // timeout never blocks. Descriptors set to -1 are ignored by poll(2).
            let ready = unsafe { libc::poll(polled.as_mut_ptr(), watched as libc::nfds_t, 0) };
            if ready != 0 || started.elapsed() >= self.window {
                return;
            }
            // SAFETY: sched_yield takes no arguments and cannot fail on Linux.
            unsafe { libc::sched_yield() };
        }
    }
}

/// The process's epoll descriptors.
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
    fds
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An epoll instance watching one end of a socket pair, and the other end.
    struct Watched {
        epfd: libc::c_int,
        ends: [libc::c_int; 2],
    }

    impl Watched {
        fn new() -> Self {
            let mut ends = [-1; 2];
            // SAFETY: plain syscalls on descriptors this test owns; every result is checked.
            unsafe {
                let epfd = libc::epoll_create1(libc::EPOLL_CLOEXEC);
                assert!(epfd >= 0, "epoll_create1");
                let made = libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, ends.as_mut_ptr());
                assert_eq!(made, 0, "socketpair");
                let mut event = libc::epoll_event {
                    // Edge-triggered, as tokio registers its descriptors.
                    events: (libc::EPOLLIN | libc::EPOLLET) as u32,
                    u64: 7,
                };
                let added = libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, ends[0], &mut event);
                assert_eq!(added, 0, "epoll_ctl");
                Watched { epfd, ends }
            }
        }

        fn send(&self) {
            // SAFETY: writes one byte from a live buffer to a descriptor this test owns.
            let sent = unsafe { libc::write(self.ends[1], b"x".as_ptr().cast(), 1) };
            assert_eq!(sent, 1);
        }

        fn poller(&self, window: Duration) -> BusyPoll {
            let poll = BusyPoll {
                window,
                fds: Arc::new(OnceLock::new()),
            };
            let _ = poll.fds.set(vec![self.epfd]);
            poll
        }
    }

    impl Drop for Watched {
        fn drop(&mut self) {
            // SAFETY: closes descriptors this test opened, once.
            unsafe {
                libc::close(self.epfd);
                libc::close(self.ends[0]);
                libc::close(self.ends[1]);
            }
        }
    }

    #[test]
    fn finds_the_epoll_descriptors_of_the_process() {
        let watched = Watched::new();
        assert!(epoll_fds().contains(&watched.epfd));
        assert!(
            !epoll_fds().contains(&watched.ends[0]),
            "a socket is no epoll"
        );
    }

    #[test]
    fn returns_as_soon_as_an_event_is_ready() {
        let watched = Watched::new();
        watched.send();
        let started = Instant::now();
        // A window far longer than polling takes: returning early shows the event ended it.
        watched.poller(Duration::from_secs(10)).before_park();
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn the_event_is_still_there_for_the_runtime_afterwards() {
        let watched = Watched::new();
        watched.send();
        watched.poller(Duration::from_secs(10)).before_park();
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // SAFETY: `events` is a live array of 4; zero timeout.
        let n = unsafe { libc::epoll_wait(watched.epfd, events.as_mut_ptr(), 4, 0) };
        assert_eq!(
            n, 1,
            "polling the epoll descriptor must not consume its event"
        );
        let token = events[0].u64;
        assert_eq!(token, 7);
    }

    #[test]
    fn gives_up_when_the_window_has_passed() {
        let watched = Watched::new();
        let window = Duration::from_millis(5);
        let started = Instant::now();
        watched.poller(window).before_park();
        assert!(
            started.elapsed() >= window,
            "returned before the window with nothing ready"
        );
    }

    #[test]
    fn does_nothing_without_descriptors() {
        let poll = BusyPoll::new(Duration::from_secs(10));
        let _ = poll.fds.set(Vec::new());
        let started = Instant::now();
        poll.before_park();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "it polled nothing for the window"
        );
    }

    #[test]
    fn stays_off_with_a_zero_window() {
        let poll = BusyPoll::new(Duration::ZERO);
        let _watched = Watched::new();
        poll.arm();
        assert_eq!(poll.fds.get(), Some(&Vec::new()));
    }
}
