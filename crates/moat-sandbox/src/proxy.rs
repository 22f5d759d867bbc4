//! The supervisor's side of the network allow-list: a proxy listening on a Unix socket in a
//! private directory (mode 0700), which the sandbox's new root holds read-only at
//! `/run/moat/proxy.sock` and its PID 1 forwards `127.0.0.1:3128` to.
//!
//! Per connection (a thread each, at most [`MAX_ACTIVE`] at once), the first byte says the
//! protocol: `0x05` SOCKS5 (no authentication, `CONNECT` only), anything else HTTP/1.x
//! (`CONNECT host:port`, or a request with an absolute `http://` URI). Then, in order:
//!
//! 1. the target must match the allow-list ([`Policy::allows_target`]), before anything is
//!    resolved (a refused name is never looked up: no DNS exfiltration through the proxy);
//! 2. a name is resolved here, once ([`Resolve`]); only the addresses
//!    [`Policy::allows_address`] accepts are kept (non-public ones need an address pattern),
//!    and the proxy connects to one of *those* addresses, never resolving again: a name that
//!    rebinds to a private address between two connections, or within one answer, is refused;
//! 3. for a tunnel to a name, if the client speaks first with a TLS ClientHello, its server
//!    name (SNI), when present, must be that name (no TLS interception: the rest of the
//!    stream is opaque);
//! 4. bytes are relayed until both sides close or the run ends.
//!
//! Plain HTTP requests are rewritten to origin form with `Host` set from the URI (a proxy
//! must ignore the client's `Host`), `Proxy-*` and hop-by-hop headers dropped and
//! `Connection: close`: one request per connection, so a second request on a kept-alive
//! connection cannot reach a host that was not checked.
//!
//! Every connection becomes a [`Connection`] in the [`crate::Outcome`].

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::net::{HostPattern, Policy, Target};
use crate::outcome::{Connection, ProxyProtocol, Verdict};
use crate::relay::{Pair, poll_step};

/// The socket's name in its directory (`/run/moat/` inside).
pub(crate) const SOCKET_NAME: &str = "proxy.sock";
/// Connections served at once; more are refused.
pub(crate) const MAX_ACTIVE: usize = 128;
/// Connections recorded one by one; more are only counted.
pub(crate) const MAX_RECORDS: usize = 10_000;
/// How long a client may take to send its request (and its TLS ClientHello).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to one address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Addresses of one name tried at most.
const MAX_ADDRESSES: usize = 4;
/// The largest request head read (HTTP).
const MAX_HEAD: usize = 16 * 1024;
/// The largest TLS ClientHello inspected.
const MAX_HELLO: usize = 64 * 1024;

/// Resolves host names for the proxy. The default is the system's resolver
/// (`getaddrinfo`); a host may bring its own (DNS over HTTPS, a fixed table, a test).
/// Whatever it answers, non-public addresses are still refused unless listed.
pub trait Resolve: Send + Sync {
    /// The addresses of `host` (a normalized name, never an address).
    fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>>;
}

impl<F> Resolve for F
where
    F: Fn(&str) -> io::Result<Vec<IpAddr>> + Send + Sync,
{
    fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        self(host)
    }
}

/// The system's resolver (`getaddrinfo`: `/etc/hosts`, then DNS).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        let mut out: Vec<IpAddr> = Vec::new();
        for a in (host, 0u16).to_socket_addrs()? {
            if !out.contains(&a.ip()) {
                out.push(a.ip());
            }
        }
        Ok(out)
    }
}

#[derive(Default)]
struct Log {
    records: Vec<Connection>,
    omitted: u64,
    active: usize,
}

struct Shared {
    policy: Policy,
    resolver: Arc<dyn Resolve>,
    /// Readable (hung up) once the run is over: every poll wakes on it.
    stop: OwnedFd,
    log: Mutex<Log>,
    idle: Condvar,
}

impl Shared {
    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a connection; the index to update it by, if it was recorded.
    fn open(&self, c: Connection) -> Option<usize> {
        let mut log = self.log();
        if log.records.len() >= MAX_RECORDS {
            log.omitted += 1;
            return None;
        }
        log.records.push(c);
        Some(log.records.len() - 1)
    }

    fn update(&self, at: Option<usize>, f: impl FnOnce(&mut Connection)) {
        let Some(i) = at else { return };
        let mut log = self.log();
        if let Some(c) = log.records.get_mut(i) {
            f(c);
        }
    }

    fn stopped(&self) -> bool {
        let mut fds = [libc::pollfd {
            fd: self.stop.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: one live pollfd.
        unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) > 0 }
    }
}

/// Counts a connection thread out when it ends, however it ends.
struct Active<'a>(&'a Shared);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        let mut log = self.0.log();
        log.active -= 1;
        if log.active == 0 {
            self.0.idle.notify_all();
        }
    }
}

/// The running proxy of one sandboxed run. Dropping it stops it and removes its directory.
pub(crate) struct Proxy {
    dir: PathBuf,
    /// The write end of the stop pipe: dropping it stops everything.
    stop: Option<OwnedFd>,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Creates the directory and the socket, and starts accepting.
    pub(crate) fn start(
        patterns: Vec<HostPattern>,
        resolver: Arc<dyn Resolve>,
    ) -> io::Result<Proxy> {
        let dir = private_dir()?;
        let started = (|| {
            let path = dir.join(SOCKET_NAME);
            let listener = UnixListener::bind(&path)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            listener.set_nonblocking(true)?;
            let (stop_r, stop_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
            let shared = Arc::new(Shared {
                policy: Policy::new(patterns),
                resolver,
                stop: stop_r,
                log: Mutex::new(Log::default()),
                idle: Condvar::new(),
            });
            let acceptor = {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name("moat-sandbox-proxy".into())
                    .spawn(move || accept_loop(&listener, &shared))?
            };
            Ok::<_, io::Error>((stop_w, shared, acceptor))
        })();
        match started {
            Ok((stop, shared, acceptor)) => Ok(Proxy {
                dir,
                stop: Some(stop),
                shared,
                acceptor: Some(acceptor),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// The directory holding the socket (bind-mounted at `/run/moat` inside).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops the proxy (open connections are cut) and returns what it recorded, and how many
    /// connections it only counted.
    pub(crate) fn finish(mut self) -> (Vec<Connection>, u64) {
        self.stop_now();
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut log = self.shared.log();
        while log.active > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            log = self
                .shared
                .idle
                .wait_timeout(log, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        (std::mem::take(&mut log.records), log.omitted)
    }

    fn stop_now(&mut self) {
        self.stop.take();
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop_now();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh directory, mode 0700, under the temporary directory (or `/tmp` when that path
/// is too long for a Unix socket address).
fn private_dir() -> io::Result<PathBuf> {
    static N: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    let base = if base.as_os_str().len() > 60 {
        PathBuf::from("/tmp")
    } else {
        base
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last = None;
    for _ in 0..16 {
        let dir = base.join(format!(
            "moat-net-{}-{}-{nanos:08x}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        // Never an existing path (a planted directory or symlink is not reused).
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            // The helper finds it under the old root: no symbolic link on the way.
            Ok(()) => {
                return std::fs::canonicalize(&dir).inspect_err(|_| {
                    let _ = std::fs::remove_dir(&dir);
                });
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no fresh directory")))
}

fn accept_loop(listener: &UnixListener, shared: &Arc<Shared>) {
    let watch = [listener.as_raw_fd(), shared.stop.as_raw_fd()];
    loop {
        let ready = match poll_step(&mut [], &watch, -1) {
            Ok(r) => r,
            Err(_) => return,
        };
        if ready[1] {
            return;
        }
        if !ready[0] {
            continue;
        }
        loop {
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            {
                let mut log = shared.log();
                if log.active >= MAX_ACTIVE {
                    drop(log);
                    shared.open(Connection {
                        protocol: ProxyProtocol::Unknown,
                        host: String::new(),
                        port: 0,
                        verdict: Verdict::Refused,
                        reason: Some(format!("more than {MAX_ACTIVE} connections at once")),
                        address: None,
                        bytes_sent: 0,
                        bytes_received: 0,
                    });
                    continue;
                }
                log.active += 1;
            }
            let for_thread = Arc::clone(shared);
            let spawned = std::thread::Builder::new()
                .name("moat-sandbox-proxy-conn".into())
                .spawn(move || {
                    let _active = Active(&for_thread);
                    handle(&for_thread, stream);
                });
            if spawned.is_err() {
                let _active = Active(shared);
            }
        }
    }
}

/// What a client asked for.
struct Request {
    protocol: ProxyProtocol,
    /// As asked (for the record).
    host: String,
    target: Target,
    port: u16,
    /// Plain HTTP: the rewritten head to send first. Tunnels: `None`.
    head: Option<Vec<u8>>,
    /// Bytes the client sent after its request (a body, or the start of the tunnel).
    extra: Vec<u8>,
}

/// A request that could not be served before it reached the allow-list.
struct Bad {
    protocol: ProxyProtocol,
    host: String,
    port: u16,
    reason: String,
    /// Whether the client was already answered (SOCKS5 replies with specific codes).
    answered: bool,
}

impl Bad {
    fn new(protocol: ProxyProtocol, reason: impl Into<String>) -> Bad {
        Bad {
            protocol,
            host: String::new(),
            port: 0,
            reason: reason.into(),
            answered: false,
        }
    }
}

/// How a refusal or failure is answered, per protocol.
#[derive(Clone, Copy)]
enum Answer {
    BadRequest,
    Forbidden,
    BadGateway,
}

fn answer(client: &mut UnixStream, protocol: ProxyProtocol, answer: Answer, why: &str) {
    let bytes = match protocol {
        ProxyProtocol::Socks5 => {
            let code = match answer {
                Answer::BadRequest => 0x01,
                Answer::Forbidden => 0x02,
                Answer::BadGateway => 0x04,
            };
            vec![5, code, 0, 1, 0, 0, 0, 0, 0, 0]
        }
        // HTTP, or something that did not parse: an HTTP answer is the likeliest to be read.
        _ => {
            let status = match answer {
                Answer::BadRequest => "400 Bad Request",
                Answer::Forbidden => "403 Forbidden",
                Answer::BadGateway => "502 Bad Gateway",
            };
            let body = format!("moat sandbox proxy: {why}\n");
            format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
    };
    let _ = client.write_all(&bytes);
}

fn handle(shared: &Shared, mut client: UnixStream) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = client.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut first = [0u8; 1];
    let request = match client.read(&mut first) {
        Ok(1) if first[0] == 5 => socks5(&mut client),
        Ok(1) if first[0] == 4 => Err(Bad::new(
            ProxyProtocol::Unknown,
            "SOCKS4 is not supported (use SOCKS5 or HTTP)",
        )),
        Ok(1) => http(&mut client, first[0]),
        _ => return,
    };
    let req = match request {
        Ok(r) => r,
        Err(bad) => {
            if !bad.answered {
                answer(&mut client, bad.protocol, Answer::BadRequest, &bad.reason);
            }
            shared.open(Connection {
                protocol: bad.protocol,
                host: bad.host,
                port: bad.port,
                verdict: Verdict::Refused,
                reason: Some(bad.reason),
                address: None,
                bytes_sent: 0,
                bytes_received: 0,
            });
            return;
        }
    };
    serve(shared, client, req);
}

fn serve(shared: &Shared, mut client: UnixStream, req: Request) {
    let Request {
        protocol,
        host,
        target,
        port,
        head,
        extra,
    } = req;
    let allowed = shared.policy.allows_target(&target, port);
    let at = shared.open(Connection {
        protocol,
        host,
        port,
        verdict: if allowed {
            Verdict::Allowed
        } else {
            Verdict::Refused
        },
        reason: (!allowed).then(|| "not in the network allow-list".to_string()),
        address: None,
        bytes_sent: 0,
        bytes_received: 0,
    });
    let outcome = |verdict: Verdict, reason: String| {
        shared.update(at, |c| {
            c.verdict = verdict;
            c.reason = Some(reason);
        });
    };
    if !allowed {
        answer(
            &mut client,
            protocol,
            Answer::Forbidden,
            &format!("{target}:{port} is not in the network allow-list"),
        );
        return;
    }
    let addresses = match &target {
        Target::Ip(ip) => vec![*ip],
        Target::Name(name) => match shared.resolver.resolve(name) {
            Ok(a) if !a.is_empty() => a,
            Ok(_) => {
                let why = format!("{name} has no addresses");
                answer(&mut client, protocol, Answer::BadGateway, &why);
                return outcome(Verdict::Failed, why);
            }
            Err(e) => {
                let why = format!("could not resolve {name}: {e}");
                answer(&mut client, protocol, Answer::BadGateway, &why);
                return outcome(Verdict::Failed, why);
            }
        },
    };
    let (usable, refused): (Vec<IpAddr>, Vec<IpAddr>) = addresses
        .into_iter()
        .map(|ip| ip.to_canonical())
        .partition(|ip| shared.policy.allows_address(*ip, port));
    if usable.is_empty() {
        let list: Vec<String> = refused.iter().map(ToString::to_string).collect();
        let why = format!(
            "{target} resolves only to non-public addresses not in the allow-list ({})",
            list.join(", ")
        );
        answer(&mut client, protocol, Answer::Forbidden, &why);
        return outcome(Verdict::Refused, why);
    }
    let mut upstream = None;
    let mut errors = Vec::new();
    for ip in usable.into_iter().take(MAX_ADDRESSES) {
        if shared.stopped() {
            break;
        }
        let addr = SocketAddr::new(ip, port);
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => {
                upstream = Some((s, addr));
                break;
            }
            Err(e) => errors.push(format!("{addr}: {e}")),
        }
    }
    let Some((upstream, addr)) = upstream else {
        let why = if errors.is_empty() {
            "the run ended".to_string()
        } else {
            format!("could not connect: {}", errors.join("; "))
        };
        answer(&mut client, protocol, Answer::BadGateway, &why);
        return outcome(Verdict::Failed, why);
    };
    shared.update(at, |c| c.address = Some(addr));
    let reply: &[u8] = match protocol {
        ProxyProtocol::Connect => b"HTTP/1.1 200 Connection established\r\n\r\n",
        ProxyProtocol::Socks5 => &[5, 0, 0, 1, 0, 0, 0, 0, 0, 0],
        _ => b"",
    };
    if client.write_all(reply).is_err() {
        return;
    }
    let mut preload = head.unwrap_or_default();
    let tunnel = protocol != ProxyProtocol::Http;
    let mut first = extra;
    if tunnel
        && let Target::Name(name) = &target
        && let Err(why) = check_sni(&mut client, &upstream, &mut first, name, shared)
    {
        return outcome(Verdict::Refused, why);
    }
    preload.extend_from_slice(&first);
    if client.set_nonblocking(true).is_err() || upstream.set_nonblocking(true).is_err() {
        return;
    }
    let mut pairs = [Pair::new(Box::new(client), Box::new(upstream), preload)];
    let stop = [shared.stop.as_raw_fd()];
    loop {
        match poll_step(&mut pairs, &stop, -1) {
            Ok(ready) if ready[0] => break,
            Ok(_) if pairs[0].done() => break,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let (sent, received) = pairs[0].moved();
    shared.update(at, |c| {
        c.bytes_sent = sent;
        c.bytes_received = received;
    });
}

// ---------------------------------------------------------------- HTTP

fn http(client: &mut UnixStream, first: u8) -> Result<Request, Bad> {
    let proto = ProxyProtocol::Unknown;
    let mut buf = vec![first];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(Bad::new(proto, "request head over 16 KiB"));
        }
        let mut chunk = [0u8; 4096];
        match client.read(&mut chunk) {
            Ok(0) => return Err(Bad::new(proto, "closed before the end of the request head")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Bad::new(proto, format!("reading the request: {e}"))),
        }
    };
    let extra = buf.split_off(end);
    let Ok(text) = std::str::from_utf8(&buf[..end - 4]) else {
        return Err(Bad::new(proto, "the request head is not UTF-8"));
    };
    let mut lines = text.split("\r\n");
    if text
        .split("\r\n")
        .any(|l| l.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0))
    {
        return Err(Bad::new(proto, "a bare CR, LF or NUL in the request head"));
    }
    let line = lines.next().unwrap_or_default();
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, uri, version] = parts[..] else {
        return Err(Bad::new(proto, "malformed request line"));
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(Bad::new(proto, "not an HTTP/1.x request"));
    }
    if method.is_empty() || !method.bytes().all(is_token) {
        return Err(Bad::new(proto, "malformed method"));
    }
    let mut headers = Vec::new();
    for h in lines {
        let Some((name, value)) = h.split_once(':') else {
            return Err(Bad::new(proto, "malformed header line"));
        };
        if name.is_empty() || !name.bytes().all(is_token) {
            return Err(Bad::new(
                proto,
                "malformed header name (or obsolete line folding)",
            ));
        }
        headers.push((name, value.trim()));
    }
    if method == "CONNECT" {
        let proto = ProxyProtocol::Connect;
        let (host, port) = authority(uri, None).map_err(|r| Bad::new(proto, r))?;
        let target = Target::parse(host).map_err(|r| Bad::new(proto, r))?;
        return Ok(Request {
            protocol: proto,
            host: host.to_string(),
            target,
            port,
            head: None,
            extra,
        });
    }
    let proto = ProxyProtocol::Http;
    let scheme_end = uri.find("://").unwrap_or(0);
    let scheme = &uri[..scheme_end];
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(Bad::new(
            proto,
            if scheme_end == 0 {
                "not a proxy request (expected an absolute http:// URI, or CONNECT)".to_string()
            } else {
                format!("scheme {scheme:?} is not proxied (use CONNECT for https)")
            },
        ));
    }
    let rest = &uri[scheme_end + 3..];
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(split);
    let path = path.split('#').next().unwrap_or_default();
    let path = match path.chars().next() {
        None => "/".to_string(),
        Some('?') => format!("/{path}"),
        Some(_) => path.to_string(),
    };
    if auth.contains('@') {
        return Err(Bad::new(
            proto,
            "user information in the URI is not proxied",
        ));
    }
    let (host, port) = authority(auth, Some(80)).map_err(|r| Bad::new(proto, r))?;
    let target = Target::parse(host).map_err(|r| Bad::new(proto, r))?;
    let mut head = format!("{method} {path} {version}\r\nHost: {auth}\r\n");
    for (name, value) in headers {
        let hop = [
            "host",
            "connection",
            "proxy-connection",
            "proxy-authorization",
            "proxy-authenticate",
            "keep-alive",
        ];
        if !hop.iter().any(|h| name.eq_ignore_ascii_case(h)) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str("Connection: close\r\n\r\n");
    Ok(Request {
        protocol: proto,
        host: host.to_string(),
        target,
        port,
        head: Some(head.into_bytes()),
        extra,
    })
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `host:port` (IPv6 in brackets); the port may be left out when there is a default.
fn authority(a: &str, default: Option<u16>) -> Result<(&str, u16), String> {
    let (host, port) = if a.starts_with('[') {
        let end = a.find(']').ok_or("unclosed `[` in the authority")?;
        match &a[end + 1..] {
            "" => (&a[..=end], None),
            p => (
                &a[..=end],
                Some(
                    p.strip_prefix(':')
                        .ok_or("junk after `]` in the authority")?,
                ),
            ),
        }
    } else {
        match a.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (a, None),
        }
    };
    if host.is_empty() {
        return Err("no host in the authority".into());
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("bad port {p:?}"))?,
        None => default.ok_or("CONNECT needs host:port")?,
    };
    Ok((host, port))
}

// ---------------------------------------------------------------- SOCKS5

fn socks5(client: &mut UnixStream) -> Result<Request, Bad> {
    let proto = ProxyProtocol::Socks5;
    let bad = |r: &str| Bad::new(proto, r);
    let mut n = [0u8; 1];
    client
        .read_exact(&mut n)
        .map_err(|_| bad("truncated greeting"))?;
    let mut methods = vec![0u8; usize::from(n[0])];
    client
        .read_exact(&mut methods)
        .map_err(|_| bad("truncated greeting"))?;
    if !methods.contains(&0) {
        let _ = client.write_all(&[5, 0xFF]);
        return Err(Bad {
            answered: true,
            ..bad("no acceptable authentication method (only none)")
        });
    }
    client.write_all(&[5, 0]).map_err(|_| bad("closed"))?;
    let mut head = [0u8; 4];
    client
        .read_exact(&mut head)
        .map_err(|_| bad("truncated request"))?;
    let [ver, cmd, _, atyp] = head;
    if ver != 5 {
        return Err(bad("bad SOCKS version in the request"));
    }
    let host = match atyp {
        1 => {
            let mut a = [0u8; 4];
            client
                .read_exact(&mut a)
                .map_err(|_| bad("truncated address"))?;
            std::net::Ipv4Addr::from(a).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            client
                .read_exact(&mut len)
                .map_err(|_| bad("truncated name"))?;
            let mut name = vec![0u8; usize::from(len[0])];
            client
                .read_exact(&mut name)
                .map_err(|_| bad("truncated name"))?;
            String::from_utf8(name).map_err(|_| bad("the name is not UTF-8"))?
        }
        4 => {
            let mut a = [0u8; 16];
            client
                .read_exact(&mut a)
                .map_err(|_| bad("truncated address"))?;
            format!("[{}]", std::net::Ipv6Addr::from(a))
        }
        _ => {
            let _ = client.write_all(&[5, 8, 0, 1, 0, 0, 0, 0, 0, 0]);
            return Err(Bad {
                answered: true,
                ..bad("unknown address type")
            });
        }
    };
    let mut port = [0u8; 2];
    client
        .read_exact(&mut port)
        .map_err(|_| bad("truncated port"))?;
    let port = u16::from_be_bytes(port);
    if cmd != 1 {
        let _ = client.write_all(&[5, 7, 0, 1, 0, 0, 0, 0, 0, 0]);
        return Err(Bad {
            protocol: proto,
            host,
            port,
            reason: "only CONNECT is supported (no BIND, no UDP ASSOCIATE)".into(),
            answered: true,
        });
    }
    let target = Target::parse(&host).map_err(|r| Bad {
        protocol: proto,
        host: host.clone(),
        port,
        reason: r,
        answered: false,
    })?;
    if port == 0 {
        return Err(Bad {
            protocol: proto,
            host,
            port,
            reason: "port 0".into(),
            answered: false,
        });
    }
    Ok(Request {
        protocol: proto,
        host,
        target,
        port,
        head: None,
        extra: Vec::new(),
    })
}

// ---------------------------------------------------------------- TLS server name

/// Waits for the tunnel's first bytes. If the client speaks first with a TLS ClientHello
/// whose server name is present, it must be `host`. `first` holds what the client sent
/// (and is sent on to the server).
fn check_sni(
    client: &mut UnixStream,
    upstream: &TcpStream,
    first: &mut Vec<u8>,
    host: &str,
    shared: &Shared,
) -> Result<(), String> {
    if first.is_empty() {
        let mut fds = [
            libc::pollfd {
                fd: client.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: upstream.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: shared.stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            // SAFETY: three live pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 3, -1) };
            if n >= 0 {
                break;
            }
            if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return Ok(());
            }
        }
        // The server speaks first (not TLS), or the run is over: nothing to check.
        if fds[0].revents == 0 || fds[2].revents != 0 {
            return Ok(());
        }
    }
    loop {
        match client_hello(first) {
            Hello::NotTls | Hello::NoName => return Ok(()),
            Hello::Name(name) => {
                let name = name.to_ascii_lowercase();
                let name = name.strip_suffix('.').unwrap_or(&name);
                return if name == host {
                    Ok(())
                } else {
                    Err(format!(
                        "TLS server name {name:?} does not match the tunnel's host {host:?}"
                    ))
                };
            }
            Hello::Malformed => return Err("malformed TLS ClientHello".into()),
            Hello::Incomplete if first.len() > MAX_HELLO => {
                return Err("TLS ClientHello too large to check".into());
            }
            Hello::Incomplete => {
                let mut chunk = [0u8; 4096];
                match client.read(&mut chunk) {
                    Ok(0) => return Ok(()),
                    Ok(n) => first.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("reading the TLS ClientHello: {e}")),
                }
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Hello {
    NotTls,
    Incomplete,
    Malformed,
    NoName,
    Name(String),
}

/// Reads the server name from a TLS ClientHello at the start of `buf` (possibly spread over
/// several records).
fn client_hello(buf: &[u8]) -> Hello {
    match buf.first() {
        None => return Hello::Incomplete,
        Some(&0x16) => {}
        Some(_) => return Hello::NotTls,
    }
    let mut hs = Vec::new();
    let mut at = 0;
    loop {
        if hs.len() >= 4 {
            if hs[0] != 1 {
                return Hello::Malformed;
            }
            let need =
                4 + (usize::from(hs[1]) << 16 | usize::from(hs[2]) << 8 | usize::from(hs[3]));
            if hs.len() >= need {
                return match server_name(&hs[4..need]) {
                    Some(Some(name)) => Hello::Name(name),
                    Some(None) => Hello::NoName,
                    None => Hello::Malformed,
                };
            }
        }
        let Some(header) = buf.get(at..at + 5) else {
            return Hello::Incomplete;
        };
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if header[0] != 0x16 || header[1] != 3 || len == 0 || len > 1 << 14 {
            return Hello::Malformed;
        }
        let Some(fragment) = buf.get(at + 5..at + 5 + len) else {
            return Hello::Incomplete;
        };
        hs.extend_from_slice(fragment);
        at += 5 + len;
    }
}

/// The `host_name` of a ClientHello body's `server_name` extension: `None` if malformed,
/// `Some(None)` if absent.
fn server_name(body: &[u8]) -> Option<Option<String>> {
    struct Cur<'a>(&'a [u8]);
    impl<'a> Cur<'a> {
        fn take(&mut self, n: usize) -> Option<&'a [u8]> {
            if self.0.len() < n {
                return None;
            }
            let (a, b) = self.0.split_at(n);
            self.0 = b;
            Some(a)
        }
        fn u8(&mut self) -> Option<usize> {
            self.take(1).map(|b| usize::from(b[0]))
        }
        fn u16(&mut self) -> Option<usize> {
            self.take(2)
                .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        }
        fn vec8(&mut self) -> Option<&'a [u8]> {
            let n = self.u8()?;
            self.take(n)
        }
        fn vec16(&mut self) -> Option<&'a [u8]> {
            let n = self.u16()?;
            self.take(n)
        }
    }
    let mut c = Cur(body);
    c.take(2 + 32)?; // version, random
    c.vec8()?; // session id
    c.vec16()?; // cipher suites
    c.vec8()?; // compression methods
    if c.0.is_empty() {
        return Some(None);
    }
    let mut exts = Cur(c.vec16()?);
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let data = exts.vec16()?;
        if kind != 0 {
            continue;
        }
        let mut list = Cur(Cur(data).vec16()?);
        while !list.0.is_empty() {
            let name_type = list.u8()?;
            let name = list.vec16()?;
            if name_type == 0 {
                let name = std::str::from_utf8(name).ok()?;
                return Some(Some(name.to_string()));
            }
        }
        return Some(None);
    }
    Some(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ClientHello with `name` as its server name, in records of `split` bytes.
    pub(crate) fn hello(name: Option<&str>, split: usize) -> Vec<u8> {
        let mut exts = Vec::new();
        if let Some(name) = name {
            let n = name.len() as u16;
            exts.extend_from_slice(&[0, 0]);
            exts.extend_from_slice(&(n + 5).to_be_bytes());
            exts.extend_from_slice(&(n + 3).to_be_bytes());
            exts.push(0);
            exts.extend_from_slice(&n.to_be_bytes());
            exts.extend_from_slice(name.as_bytes());
        }
        exts.extend_from_slice(&[0, 43, 0, 3, 2, 3, 4]); // supported_versions
        let mut body = vec![3, 3];
        body.extend_from_slice(&[0xAA; 32]);
        body.push(0);
        body.extend_from_slice(&[0, 2, 0x13, 0x01]);
        body.extend_from_slice(&[1, 0]);
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(&exts);
        let mut hs = vec![1];
        hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        hs.extend_from_slice(&body);
        let mut out = Vec::new();
        for chunk in hs.chunks(split) {
            out.extend_from_slice(&[0x16, 3, 1]);
            out.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
            out.extend_from_slice(chunk);
        }
        out
    }

    #[test]
    fn client_hello_server_names_are_read_across_records() {
        let h = hello(Some("api.github.com"), 1000);
        assert_eq!(client_hello(&h), Hello::Name("api.github.com".into()));
        let h = hello(Some("evil.example"), 7);
        assert_eq!(client_hello(&h), Hello::Name("evil.example".into()));
        assert_eq!(client_hello(&h[..h.len() - 1]), Hello::Incomplete);
        assert_eq!(client_hello(&hello(None, 1000)), Hello::NoName);
        assert_eq!(client_hello(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
        assert_eq!(client_hello(&[0x16, 3, 1, 0, 0]), Hello::Malformed);
        let mut h = hello(Some("x.test"), 1000);
        h[5] = 2; // a ServerHello
        assert_eq!(client_hello(&h), Hello::Malformed);
        let mut h = hello(Some("x.test"), 1000);
        h[4] -= 10; // the record ends inside an extension
        assert!(matches!(
            client_hello(&h),
            Hello::Incomplete | Hello::Malformed
        ));
    }

    #[test]
    fn authorities() {
        assert_eq!(authority("example.com:443", None), Ok(("example.com", 443)));
        assert_eq!(authority("[::1]:8080", None), Ok(("[::1]", 8080)));
        assert_eq!(authority("example.com", Some(80)), Ok(("example.com", 80)));
        assert!(authority("example.com", None).is_err());
        assert!(authority("example.com:0", None).is_err());
        assert!(authority(":80", None).is_err());
        assert!(authority("[::1]x", None).is_err());
    }
}
