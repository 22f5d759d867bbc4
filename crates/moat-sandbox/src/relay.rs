//! Moving bytes both ways between two sockets with `poll`, many pairs in one thread: the
//! shim inside the sandbox (PID 1, one pair per connection, one thread) and the proxy
//! outside (one pair per connection thread) both use it. No parsing here: bytes in, bytes
//! out, a half-close passed on as a half-close, bounded buffers (one chunk per direction).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

/// Bytes read at once, and so buffered per direction.
const CHUNK: usize = 16 * 1024;
/// Chunks one direction moves per wake-up, so that a fast pair does not starve the others.
const BURST: usize = 8;

/// A connected stream socket, already non-blocking.
pub(crate) trait Duplex: Read + Write + AsRawFd + Send {
    fn shutdown_write(&self);
}

impl Duplex for TcpStream {
    fn shutdown_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

impl Duplex for UnixStream {
    fn shutdown_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

/// One direction: bytes read from one side and not yet written to the other.
#[derive(Default)]
struct Flow {
    buf: Vec<u8>,
    pos: usize,
    /// The source said end of file.
    eof: bool,
    /// The end of file was passed on (the destination's write side is shut).
    shut: bool,
    /// Bytes written to the destination.
    moved: u64,
}

impl Flow {
    fn pending(&self) -> bool {
        self.pos < self.buf.len()
    }

    /// Moves what it can without blocking; an error means the pair is broken.
    fn run(&mut self, src: &mut dyn Duplex, dst: &mut dyn Duplex) -> io::Result<()> {
        let mut reads = 0;
        loop {
            if self.pending() {
                match dst.write(&self.buf[self.pos..]) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => {
                        self.pos += n;
                        self.moved += n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
                continue;
            }
            if self.eof {
                if !self.shut {
                    dst.shutdown_write();
                    self.shut = true;
                }
                return Ok(());
            }
            if reads == BURST {
                return Ok(());
            }
            reads += 1;
            self.buf.resize(CHUNK, 0);
            self.pos = 0;
            match src.read(&mut self.buf) {
                Ok(0) => {
                    self.buf.clear();
                    self.eof = true;
                }
                Ok(n) => self.buf.truncate(n),
                Err(e) => {
                    self.buf.clear();
                    match e.kind() {
                        io::ErrorKind::WouldBlock => return Ok(()),
                        io::ErrorKind::Interrupted => {}
                        _ => return Err(e),
                    }
                }
            }
        }
    }
}

/// Two connected sockets and the bytes between them.
pub(crate) struct Pair {
    a: Box<dyn Duplex>,
    b: Box<dyn Duplex>,
    ab: Flow,
    ba: Flow,
    broken: bool,
}

impl Pair {
    /// `a` and `b` must be non-blocking. `to_b` is sent to `b` first (bytes already read
    /// from `a`, or a rewritten request head).
    pub(crate) fn new(a: Box<dyn Duplex>, b: Box<dyn Duplex>, to_b: Vec<u8>) -> Pair {
        Pair {
            a,
            b,
            ab: Flow {
                buf: to_b,
                ..Flow::default()
            },
            ba: Flow::default(),
            broken: false,
        }
    }

    /// Both directions ended (or one side failed): drop it.
    pub(crate) fn done(&self) -> bool {
        self.broken || (self.ab.shut && self.ba.shut)
    }

    /// Bytes written to `b` (from `a`, preload included) and to `a` (from `b`).
    pub(crate) fn moved(&self) -> (u64, u64) {
        (self.ab.moved, self.ba.moved)
    }

    /// The events to wait for on `a` and on `b`.
    fn interest(&self) -> (i16, i16) {
        let (mut a, mut b) = (0, 0);
        if self.ab.pending() {
            b |= libc::POLLOUT;
        } else if !self.ab.eof {
            a |= libc::POLLIN;
        }
        if self.ba.pending() {
            a |= libc::POLLOUT;
        } else if !self.ba.eof {
            b |= libc::POLLIN;
        }
        (a, b)
    }

    fn step(&mut self) {
        let ok = self.ab.run(&mut *self.a, &mut *self.b).is_ok()
            && self.ba.run(&mut *self.b, &mut *self.a).is_ok();
        if !ok {
            self.broken = true;
        }
    }
}

fn pollfd(fd: RawFd, events: i16) -> libc::pollfd {
    libc::pollfd {
        // A negative descriptor is skipped, so a hang-up we are not waiting for does not
        // wake us again and again.
        fd: if events == 0 { -1 } else { fd },
        events,
        revents: 0,
    }
}

/// Waits (up to `timeout_ms`, -1 for ever) until a pair or one of `watch` is ready, moves
/// what can move, and says which of `watch` were ready (readable, or hung up). The caller
/// drops the pairs that are [`Pair::done`].
pub(crate) fn poll_step(
    pairs: &mut [Pair],
    watch: &[RawFd],
    timeout_ms: i32,
) -> io::Result<Vec<bool>> {
    let mut fds: Vec<libc::pollfd> = watch.iter().map(|&fd| pollfd(fd, libc::POLLIN)).collect();
    for p in pairs.iter() {
        let (a, b) = p.interest();
        fds.push(pollfd(p.a.as_raw_fd(), a));
        fds.push(pollfd(p.b.as_raw_fd(), b));
    }
    let nfds = libc::nfds_t::try_from(fds.len()).map_err(io::Error::other)?;
    // SAFETY: `fds` is a live array of `nfds` pollfd structures.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), nfds, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; watch.len()]);
        }
        return Err(e);
    }
    for (i, p) in pairs.iter_mut().enumerate() {
        let at = watch.len() + 2 * i;
        if fds[at].revents != 0 || fds[at + 1].revents != 0 {
            p.step();
        }
    }
    Ok(fds[..watch.len()].iter().map(|f| f.revents != 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_half_closes_cross_in_both_directions() {
        let (a_out, a_in) = UnixStream::pair().unwrap();
        let (b_in, b_out) = UnixStream::pair().unwrap();
        a_in.set_nonblocking(true).unwrap();
        b_in.set_nonblocking(true).unwrap();
        let mut pairs = vec![Pair::new(Box::new(a_in), Box::new(b_in), b"pre:".to_vec())];
        let big = vec![7u8; 300_000];
        let writer = {
            let mut a_out = a_out.try_clone().unwrap();
            let big = big.clone();
            std::thread::spawn(move || {
                a_out.write_all(&big).unwrap();
                a_out.shutdown(Shutdown::Write).unwrap();
            })
        };
        let reader = {
            let mut b_out = b_out.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                b_out.read_to_end(&mut got).unwrap();
                b_out.write_all(b"answer").unwrap();
                b_out.shutdown(Shutdown::Write).unwrap();
                got
            })
        };
        while !pairs[0].done() {
            poll_step(&mut pairs, &[], 5000).unwrap();
        }
        writer.join().unwrap();
        let got = reader.join().unwrap();
        assert_eq!(&got[..4], b"pre:");
        assert_eq!(got.len(), 4 + big.len());
        let mut answer = String::new();
        (&a_out).read_to_string(&mut answer).unwrap();
        assert_eq!(answer, "answer");
        assert_eq!(pairs[0].moved(), (4 + big.len() as u64, 6));
    }
}
