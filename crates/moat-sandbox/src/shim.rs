//! Inside the sandbox, with a network allow-list: the network namespace's loopback is brought
//! up, and PID 1 forwards every TCP connection to `127.0.0.1:3128` (where `HTTP_PROXY`,
//! `HTTPS_PROXY` and `ALL_PROXY` point) to the proxy's Unix socket at
//! `/run/moat/proxy.sock`. The shim parses nothing: it moves bytes (see `relay.rs`), one
//! thread for all connections, so what the command sends is read only by the proxy,
//! outside.

use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use crate::relay::{Pair, poll_step};

/// The port of the shim on the sandbox's own loopback.
pub(crate) const PORT: u16 = 3128;
/// Where the proxy's directory is mounted in the new root (read-only).
pub(crate) const SOCKET_DIR: &str = "/run/moat";
/// Connections forwarded at once; more wait in the listen backlog.
const MAX_PAIRS: usize = 256;

/// The environment a sandboxed command gets with an allow-list: every proxy variable,
/// in both cases (curl reads only the lower-case `http_proxy`), and no `NO_PROXY`.
pub(crate) fn proxy_env() -> Vec<(&'static str, String)> {
    let http = format!("http://127.0.0.1:{PORT}");
    let socks = format!("socks5h://127.0.0.1:{PORT}");
    vec![
        ("HTTP_PROXY", http.clone()),
        ("http_proxy", http.clone()),
        ("HTTPS_PROXY", http.clone()),
        ("https_proxy", http),
        ("ALL_PROXY", socks.clone()),
        ("all_proxy", socks),
    ]
}

/// Brings the loopback interface of the new network namespace up (it starts down).
pub(crate) fn loopback_up() -> Result<(), String> {
    // SAFETY: a plain socket call; the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the ifreq passed.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) != 0 {
            return Err(format!("SIOCGIFFLAGS lo: {}", io::Error::last_os_error()));
        }
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr) != 0 {
            return Err(format!("SIOCSIFFLAGS lo: {}", io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// The shim's listening socket, made before the command starts (so its first connection
/// finds it).
pub(crate) fn listen() -> Result<TcpListener, String> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, PORT))
        .map_err(|e| format!("listening on 127.0.0.1:{PORT}: {e}"))?;
    l.set_nonblocking(true)
        .map_err(|e| format!("shim listener: {e}"))?;
    Ok(l)
}

/// Forwards connections until the process ends (PID 1 exits when the command does).
pub(crate) fn serve(listener: TcpListener) {
    let socket = format!("{SOCKET_DIR}/{}", crate::proxy::SOCKET_NAME);
    let mut pairs: Vec<Pair> = Vec::new();
    loop {
        let watch: &[i32] = if pairs.len() < MAX_PAIRS {
            &[listener.as_raw_fd()]
        } else {
            &[]
        };
        let ready = match poll_step(&mut pairs, watch, -1) {
            Ok(r) => r,
            Err(_) => return,
        };
        pairs.retain(|p| !p.done());
        if ready.first() != Some(&true) {
            continue;
        }
        while pairs.len() < MAX_PAIRS {
            let tcp = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            // A connection the proxy cannot take now is closed, not waited for.
            let Ok(unix) = connect(&socket) else { continue };
            if tcp.set_nonblocking(true).is_ok() {
                pairs.push(Pair::new(Box::new(tcp), Box::new(unix), Vec::new()));
            }
        }
    }
}

/// Connects to the proxy without blocking (a full backlog is an error, not a wait).
fn connect(path: &str) -> io::Result<UnixStream> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::connect(&fd, &SocketAddrUnix::new(path)?)?;
    Ok(UnixStream::from(fd))
}
