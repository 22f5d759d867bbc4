//! The network allow-list, attacked: what the list names is reachable through the proxy
//! (HTTP forward, `CONNECT`, SOCKS5, with curl and Python), and nothing else is: not a host
//! the list does not name (403), not the host's loopback directly (another network
//! namespace), not DNS, not a name that resolves, or rebinds, to a private address, not a
//! TLS server name other than the tunnel's, not another host smuggled in a `Host` header or
//! a second request. Every connection shows in the `Outcome`.
//!
//! The allow-list needs user namespaces: where the kernel refuses them, the tests that run
//! a command print `SKIPPED: …` and return, and the refusal itself is tested. A test that
//! needs curl or python3 where they are missing says so the same way. Under CI (`CI` set)
//! a missing feature or tool fails the test instead: CI must run them all.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moat_sandbox::{
    Connection, HostPattern, Net, Outcome, Profile, ProxyProtocol, Sandbox, Verdict,
};

const BODY: &str = "hello from the host\n";

/// The helper binary: where cargo built it, or `MOAT_SANDBOX_TEST_HELPER` (a copy another
/// user can reach, when CI runs this suite again as uid 65534).
fn helper() -> std::path::PathBuf {
    std::env::var_os("MOAT_SANDBOX_TEST_HELPER").map_or_else(
        || env!("CARGO_BIN_EXE_moat-sandbox-init").into(),
        Into::into,
    )
}

fn sandbox() -> Sandbox {
    Sandbox::with_helper(helper())
}

/// Says why a test did not run, on the real stderr (libtest does not capture it), so a
/// skip is seen in any run. Under CI (`CI` set) it fails the test instead.
fn skipped(why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("CI is set, so this test must run, but {why}");
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED ({}): {why}",
        std::thread::current().name().unwrap_or("?")
    );
}

/// Whether this machine can run the allow-list (user namespaces), and has `tools`.
fn can_run(tools: &[&str]) -> bool {
    if !sandbox().namespaces_work() {
        skipped(
            "this machine refuses user namespaces, so the network allow-list cannot be \
             enforced here (it is refused: see without_namespaces_an_allow_list_is_refused)",
        );
        return false;
    }
    for tool in tools {
        let found = std::process::Command::new(tool)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            skipped(&format!("{tool} is not installed here"));
            return false;
        }
    }
    true
}

fn patterns(list: &[String]) -> Vec<HostPattern> {
    list.iter()
        .map(|p| p.parse().unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

fn profile(allow: &[String]) -> Profile {
    let mut p = Profile {
        net: Net::Allow(patterns(allow)),
        ..Profile::default()
    };
    p.limits.timeout = Some(Duration::from_secs(40));
    p
}

fn run_with(sandbox: &Sandbox, profile: &Profile, argv: &[&str]) -> Outcome {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    sandbox.spawn(profile, &argv).expect("sandbox runs")
}

fn sh(profile: &Profile, script: &str) -> Outcome {
    run_with(&sandbox(), profile, &["sh", "-c", script])
}

fn py(profile: &Profile, code: &str) -> Outcome {
    run_with(&sandbox(), profile, &["python3", "-c", code])
}

fn out(o: &Outcome) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A plain HTTP server on the host that answers every request with [`BODY`] and keeps what
/// it was sent (hanging up after a TLS ClientHello).
struct Server {
    addr: SocketAddr,
    /// Every connection's bytes, as received.
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    fn start(ip: Ipv4Addr, port: u16) -> std::io::Result<Server> {
        let listener = TcpListener::bind((ip, port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (Arc::clone(&seen), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => {
                        let seen = Arc::clone(&seen2);
                        std::thread::spawn(move || serve_one(s, &seen));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(Server { addr, seen, stop })
    }

    fn any() -> Server {
        Server::start(Ipv4Addr::LOCALHOST, 0).expect("a loopback server")
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn connections(&self) -> Vec<Vec<u8>> {
        // Let the server threads finish reading.
        std::thread::sleep(Duration::from_millis(100));
        self.seen.lock().unwrap().clone()
    }

    fn texts(&self) -> Vec<String> {
        self.connections()
            .iter()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_one(mut s: TcpStream, seen: &Mutex<Vec<Vec<u8>>>) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let index = {
        let mut seen = seen.lock().unwrap();
        seen.push(Vec::new());
        seen.len() - 1
    };
    let mut buf = [0u8; 4096];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let (head_done, tls) = {
            let mut seen = seen.lock().unwrap();
            seen[index].extend_from_slice(&buf[..n]);
            (
                seen[index].windows(4).any(|w| w == b"\r\n\r\n"),
                seen[index].first() == Some(&0x16),
            )
        };
        if tls {
            // A TLS ClientHello: kept, and hung up on (this server speaks no TLS).
            return;
        }
        if head_done {
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
                BODY.len()
            );
            return;
        }
    }
}

fn find<'a>(o: &'a Outcome, host: &str, port: u16) -> Vec<&'a Connection> {
    o.connections
        .iter()
        .filter(|c| c.host == host && c.port == port)
        .collect()
}

// ---------------------------------------------------------------- what is listed works

#[test]
fn curl_and_python_reach_an_allowed_server_through_the_proxy() {
    if !can_run(&["curl", "python3"]) {
        return;
    }
    let server = Server::any();
    let p = server.port();
    let profile = profile(&[format!("127.0.0.1:{p}")]);
    let script = format!(
        "set -e\n\
         curl -sS --max-time 10 http://127.0.0.1:{p}/plain\n\
         curl -sS --max-time 10 -p http://127.0.0.1:{p}/tunnel\n\
         curl -sS --max-time 10 -x \"$ALL_PROXY\" http://127.0.0.1:{p}/socks\n\
         python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{p}/py', timeout=10).read().decode(), end='')\"\n"
    );
    let o = sh(&profile, &script);
    assert!(o.success(), "{o:?}");
    assert_eq!(out(&o), BODY.repeat(4), "{o:?}");
    let texts = server.texts();
    assert_eq!(texts.len(), 4, "{texts:?}");
    for path in ["/plain", "/tunnel", "/socks", "/py"] {
        let req = texts
            .iter()
            .find(|t| t.starts_with(&format!("GET {path} HTTP/1.1\r\n")))
            .unwrap_or_else(|| panic!("no request for {path} in {texts:?}"));
        assert!(
            req.contains(&format!("\r\nHost: 127.0.0.1:{p}\r\n")),
            "{req:?}"
        );
        assert!(!req.to_ascii_lowercase().contains("proxy-"), "{req:?}");
    }
    // Every connection is in the outcome: how, where, and the bytes.
    let conns = find(&o, "127.0.0.1", p);
    assert_eq!(conns.len(), 4, "{:?}", o.connections);
    let protocols: Vec<ProxyProtocol> = conns.iter().map(|c| c.protocol).collect();
    assert_eq!(
        protocols,
        [
            ProxyProtocol::Http,
            ProxyProtocol::Connect,
            ProxyProtocol::Socks5,
            ProxyProtocol::Http
        ]
    );
    for c in conns {
        assert_eq!(c.verdict, Verdict::Allowed, "{c:?}");
        assert_eq!(c.address, Some(server.addr), "{c:?}");
        assert!(c.bytes_received > BODY.len() as u64, "{c:?}");
        assert!(c.bytes_sent > 20, "{c:?}");
    }
    assert_eq!(o.connections_omitted, 0);
}

#[test]
fn inside_the_proxy_variables_are_set_and_the_socket_is_read_only() {
    if !can_run(&[]) {
        return;
    }
    let o = sh(
        &profile(&[]),
        "echo \"$http_proxy $HTTPS_PROXY $ALL_PROXY ${NO_PROXY:-unset}\"; \
         test -S /run/moat/proxy.sock && echo socket; \
         touch /run/moat/x 2>/dev/null || echo read-only",
    );
    assert_eq!(
        out(&o),
        "http://127.0.0.1:3128 http://127.0.0.1:3128 socks5h://127.0.0.1:3128 unset\n\
         socket\nread-only\n",
        "{o:?}"
    );
}

#[test]
fn pid_1_which_forwards_the_bytes_holds_no_privilege() {
    if !can_run(&[]) {
        return;
    }
    let o = sh(
        &profile(&[]),
        "grep -E '^(CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/1/status",
    );
    assert_eq!(
        out(&o),
        "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n\
         CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n\
         NoNewPrivs:\t1\nSeccomp:\t2\n",
        "{o:?}"
    );
}

// ---------------------------------------------------------------- what is not listed fails

#[test]
fn a_host_not_listed_is_refused_and_never_looked_up() {
    if !can_run(&["curl"]) {
        return;
    }
    let allowed = Server::any();
    let other = Server::any();
    let looked_up = Arc::new(Mutex::new(Vec::<String>::new()));
    let sandbox = {
        let looked_up = Arc::clone(&looked_up);
        sandbox().with_resolver(move |host: &str| {
            looked_up.lock().unwrap().push(host.to_string());
            Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
        })
    };
    let (a, b) = (allowed.port(), other.port());
    let wrong_port = a % 65535 + 1;
    let profile = profile(&[format!("127.0.0.1:{a}"), "*.allowed.test:443".into()]);
    let script = format!(
        "curl -s -o /dev/null -w 'http %{{http_code}}\\n' --max-time 10 http://127.0.0.1:{b}/\n\
         curl -s -o /dev/null -w 'port %{{http_code}}\\n' --max-time 10 http://127.0.0.1:{wrong_port}/\n\
         curl -s -o /dev/null -w 'connect %{{http_connect}} ' --max-time 10 https://exfil.example.com/; echo \"exit $?\"\n\
         curl -s -o /dev/null -w 'apex %{{http_connect}} ' --max-time 10 https://allowed.test/; echo \"exit $?\"\n\
         curl -s -o /dev/null --max-time 10 -x \"$ALL_PROXY\" http://127.0.0.1:{b}/; echo \"socks exit $?\"\n"
    );
    let o = run_with(&sandbox, &profile, &["sh", "-c", &script]);
    assert_eq!(
        out(&o),
        "http 403\nport 403\nconnect 403 exit 56\napex 403 exit 56\nsocks exit 97\n",
        "{o:?}"
    );
    assert!(
        other.connections().is_empty(),
        "the unlisted server was reached"
    );
    assert!(allowed.connections().is_empty());
    // Refused before any lookup: a name cannot leak through the proxy's DNS.
    assert!(looked_up.lock().unwrap().is_empty(), "{looked_up:?}");
    for (host, port, protocol) in [
        ("127.0.0.1", b, ProxyProtocol::Http),
        ("127.0.0.1", wrong_port, ProxyProtocol::Http),
        ("exfil.example.com", 443, ProxyProtocol::Connect),
        ("allowed.test", 443, ProxyProtocol::Connect),
        ("127.0.0.1", b, ProxyProtocol::Socks5),
    ] {
        let c = find(&o, host, port)
            .into_iter()
            .find(|c| c.protocol == protocol)
            .unwrap_or_else(|| panic!("no record of {host}:{port}: {:?}", o.connections));
        assert_eq!(c.verdict, Verdict::Refused, "{c:?}");
        assert_eq!(c.address, None);
        assert_eq!((c.bytes_sent, c.bytes_received), (0, 0));
        assert!(
            c.reason
                .as_deref()
                .unwrap_or_default()
                .contains("allow-list"),
            "{c:?}"
        );
    }
}

#[test]
fn direct_connections_to_the_host_are_impossible() {
    if !can_run(&["python3"]) {
        return;
    }
    // Listening on every address of the host, and allowed: only the proxy may reach it.
    let server = Server::start(Ipv4Addr::UNSPECIFIED, 0).expect("a server");
    let p = server.port();
    // The host's own non-loopback address, if it has one.
    let host_ip = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|u| u.connect("192.0.2.1:9").map(|()| u))
        .and_then(|u| u.local_addr())
        .map(|a| a.ip().to_string())
        .unwrap_or_else(|_| "127.0.0.1".into());
    let code = format!(
        "import errno, socket\n\
         def t(name, f):\n\
         \x20   try:\n\
         \x20       f(); print(name, 'ok')\n\
         \x20   except OSError as e:\n\
         \x20       print(name, errno.errorcode.get(e.errno, e))\n\
         t('loopback', lambda: socket.create_connection(('127.0.0.1', {p}), timeout=3))\n\
         t('host', lambda: socket.create_connection(('{host_ip}', {p}), timeout=3))\n\
         t('inet6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM))\n\
         t('netlink', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))\n\
         t('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))\n\
         t('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))\n\
         t('bind', lambda: socket.socket().bind(('127.0.0.1', 8080)))\n"
    );
    let o = py(&profile(&[format!("127.0.0.1:{p}")]), &code);
    let text = out(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{o:?}");
    // Landlock (ABI 4+) allows TCP connect to the shim's port only: EACCES. Below it, the
    // network namespace: nothing listens on its loopback, and it has no other interface.
    if o.enforcement.landlock_abi.is_some_and(|v| v >= 4) {
        assert_eq!(&lines[..2], ["loopback EACCES", "host EACCES"], "{o:?}");
    } else {
        assert_eq!(lines[0], "loopback ECONNREFUSED", "{o:?}");
        assert!(
            ["host ENETUNREACH", "host ECONNREFUSED"].contains(&lines[1]),
            "{o:?}"
        );
    }
    assert_eq!(
        &lines[2..5],
        ["inet6 EPERM", "netlink EPERM", "packet EPERM"],
        "{o:?}"
    );
    assert!(lines[5] == "raw EPERM" || lines[5] == "raw EACCES", "{o:?}");
    if o.enforcement.landlock_abi.is_some_and(|v| v >= 4) {
        assert_eq!(lines[6], "bind EACCES", "{o:?}");
    }
    assert!(
        server.connections().is_empty(),
        "a direct connection got out"
    );
}

#[test]
fn dns_lookups_inside_fail() {
    if !can_run(&["python3"]) {
        return;
    }
    let nameservers: Vec<String> = std::fs::read_to_string("/etc/resolv.conf")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("nameserver"))
        .map(|s| s.trim().to_string())
        .filter(|s| s.parse::<Ipv4Addr>().is_ok())
        .chain(["8.8.8.8".to_string(), "1.1.1.1".to_string()])
        .collect();
    let code = format!(
        "import socket\n\
         try:\n\
         \x20   socket.getaddrinfo('example.com', 443); print('resolved')\n\
         except socket.gaierror:\n\
         \x20   print('no resolution')\n\
         q = b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01'\n\
         for ns in {nameservers:?}:\n\
         \x20   try:\n\
         \x20       s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)\n\
         \x20       s.sendto(q, (ns, 53)); s.recvfrom(512); print(ns, 'answered')\n\
         \x20   except OSError:\n\
         \x20       print(ns, 'no answer')\n"
    );
    let o = py(&profile(&["*:443".into()]), &code);
    let text = out(&o);
    assert!(text.starts_with("no resolution\n"), "{o:?}");
    assert!(!text.contains("answered"), "{o:?}");
    assert_eq!(text.lines().count(), 1 + nameservers.len(), "{o:?}");
}

#[test]
fn a_name_resolving_to_loopback_is_refused_unless_the_address_is_listed() {
    if !can_run(&["curl"]) {
        return;
    }
    let server = Server::any();
    let p = server.port();
    let script =
        format!("curl -s -o /dev/null -w '%{{http_code}}\\n' --max-time 10 http://localhost:{p}/");
    // The system's resolver: `localhost` is 127.0.0.1 (and ::1) in /etc/hosts.
    let o = sh(&profile(&[format!("localhost:{p}")]), &script);
    assert_eq!(out(&o), "403\n", "{o:?}");
    assert!(server.connections().is_empty());
    let c = find(&o, "localhost", p);
    assert_eq!(c.len(), 1, "{:?}", o.connections);
    assert_eq!(c[0].verdict, Verdict::Refused);
    assert!(
        c[0].reason
            .as_deref()
            .unwrap_or_default()
            .contains("non-public"),
        "{c:?}"
    );
    // A name under a wildcard whose DNS points at 127.0.0.1 (a resolver of our own here).
    let to_loopback = sandbox().with_resolver(|_: &str| Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]));
    let wild = format!(
        "curl -s -o /dev/null -w '%{{http_connect}}\\n' --max-time 10 -p http://internal.corp.test:{p}/"
    );
    let o = run_with(
        &to_loopback,
        &profile(&[format!("*.corp.test:{p}")]),
        &["sh", "-c", &wild],
    );
    assert_eq!(out(&o), "403\n", "{o:?}");
    assert!(server.connections().is_empty());

    // Listed as an address too: allowed.
    let o = sh(
        &profile(&[format!("localhost:{p}"), format!("127.0.0.1:{p}")]),
        &script,
    );
    assert_eq!(out(&o), "200\n", "{o:?}");
    assert_eq!(server.connections().len(), 1);
    assert_eq!(find(&o, "localhost", p)[0].verdict, Verdict::Allowed);
}

#[test]
fn an_allowed_name_that_rebinds_to_a_private_address_is_refused() {
    if !can_run(&["curl"]) {
        return;
    }
    // The legitimate server at 127.0.0.2 (listed), the victim at 127.0.0.1 on the same port.
    let (good, victim) = (0..20)
        .find_map(|_| {
            let good = Server::start(Ipv4Addr::new(127, 0, 0, 2), 0).ok()?;
            let victim = Server::start(Ipv4Addr::LOCALHOST, good.port()).ok()?;
            Some((good, victim))
        })
        .expect("two servers on one port");
    let p = good.port();
    let answers = Arc::new(Mutex::new(0u32));
    let rebinding = {
        let answers = Arc::clone(&answers);
        sandbox().with_resolver(move |_: &str| {
            let mut n = answers.lock().unwrap();
            *n += 1;
            // First the listed address; from then on, the private victim.
            let last = if *n == 1 { 2 } else { 1 };
            Ok(vec![IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))])
        })
    };
    let profile = profile(&[format!("rebind.test:{p}"), format!("127.0.0.2:{p}")]);
    let script = format!(
        "for i in 1 2 3; do curl -s -o /dev/null -w '%{{http_code}}\\n' --max-time 10 http://rebind.test:{p}/; done\n\
         curl -s -o /dev/null -w '%{{http_connect}}\\n' --max-time 10 -p http://rebind.test:{p}/\n"
    );
    let o = run_with(&rebinding, &profile, &["sh", "-c", &script]);
    assert_eq!(out(&o), "200\n403\n403\n403\n", "{o:?}");
    assert_eq!(good.connections().len(), 1);
    assert!(
        victim.connections().is_empty(),
        "the rebinding reached 127.0.0.1"
    );
    let records = find(&o, "rebind.test", p);
    assert_eq!(records.len(), 4, "{:?}", o.connections);
    assert_eq!(records[0].address, Some(good.addr));
    for r in &records[1..] {
        assert_eq!(r.verdict, Verdict::Refused, "{r:?}");
        assert!(
            r.reason
                .as_deref()
                .unwrap_or_default()
                .contains("127.0.0.1"),
            "{r:?}"
        );
    }
}

#[test]
fn a_tls_server_name_other_than_the_tunnels_host_is_refused() {
    if !can_run(&["python3"]) {
        return;
    }
    let server = Server::any();
    let p = server.port();
    let sandbox = sandbox().with_resolver(|_: &str| Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]));
    let profile = profile(&[format!("front.test:{p}"), format!("127.0.0.1:{p}")]);
    // A CONNECT to an allowed name, then a TLS handshake naming another (domain fronting).
    let code = format!(
        "import socket, ssl\n\
         for sni in ('evil.test', 'front.test'):\n\
         \x20   s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n\
         \x20   s.sendall(b'CONNECT front.test:{p} HTTP/1.1\\r\\nHost: front.test:{p}\\r\\n\\r\\n')\n\
         \x20   print(sni, s.recv(64).split(b'\\r\\n')[0].decode())\n\
         \x20   try:\n\
         \x20       ssl.create_default_context().wrap_socket(s, server_hostname=sni)\n\
         \x20   except (OSError, ssl.SSLError):\n\
         \x20       pass\n"
    );
    let o = run_with(&sandbox, &profile, &["python3", "-c", &code]);
    assert_eq!(
        out(&o),
        "evil.test HTTP/1.1 200 Connection established\n\
         front.test HTTP/1.1 200 Connection established\n",
        "{o:?}"
    );
    let seen = server.connections();
    // The fronted hello never reached the server; the honest one did.
    assert!(
        !seen.iter().any(|c| c.windows(9).any(|w| w == b"evil.test")),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|c| c.first() == Some(&0x16) && c.windows(10).any(|w| w == b"front.test")),
        "{seen:?}"
    );
    let records = find(&o, "front.test", p);
    assert_eq!(records.len(), 2, "{:?}", o.connections);
    assert_eq!(records[0].verdict, Verdict::Refused);
    assert!(
        records[0]
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("evil.test"),
        "{:?}",
        records[0]
    );
    assert_eq!(records[0].bytes_sent, 0);
    assert_eq!(records[1].verdict, Verdict::Allowed);
}

#[test]
fn a_host_header_or_a_second_request_cannot_reach_another_host() {
    if !can_run(&["python3"]) {
        return;
    }
    let allowed = Server::any();
    let other = Server::any();
    let (a, b) = (allowed.port(), other.port());
    // A forged Host header, then a second request pipelined on the same connection.
    let code = format!(
        "import socket\n\
         s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n\
         s.sendall(b'GET http://127.0.0.1:{a}/first HTTP/1.1\\r\\nHost: 127.0.0.1:{b}\\r\\n\\r\\n'\n\
         \x20         b'GET http://127.0.0.1:{b}/second HTTP/1.1\\r\\nHost: 127.0.0.1:{b}\\r\\n\\r\\n')\n\
         data = b''\n\
         while True:\n\
         \x20   chunk = s.recv(4096)\n\
         \x20   if not chunk: break\n\
         \x20   data += chunk\n\
         print(data.count(b'HTTP/1.1 200'))\n"
    );
    let o = py(&profile(&[format!("127.0.0.1:{a}")]), &code);
    assert_eq!(out(&o), "1\n", "{o:?}");
    assert!(
        other.connections().is_empty(),
        "the second host was reached"
    );
    // The allowed server got the first request with its Host set from the URI, and
    // `Connection: close`; whatever the client pipelined after it went to that same server
    // (the only address this connection was allowed to reach), never to the other.
    let texts = allowed.texts();
    assert_eq!(texts.len(), 1);
    let first = texts[0].split("\r\n\r\n").next().unwrap_or_default();
    assert_eq!(
        first,
        format!("GET /first HTTP/1.1\r\nHost: 127.0.0.1:{a}\r\nConnection: close"),
        "{texts:?}"
    );
}

#[test]
fn malformed_requests_are_refused_and_recorded() {
    if !can_run(&["python3"]) {
        return;
    }
    let code = "import socket\n\
         for req in (b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n',\n\
         \x20           b'GET ftp://x.test/ HTTP/1.1\\r\\n\\r\\n',\n\
         \x20           b'GET http://user@x.test/ HTTP/1.1\\r\\n\\r\\n',\n\
         \x20           b'CONNECT 127.1:80 HTTP/1.1\\r\\n\\r\\n',\n\
         \x20           b'GET http://x.test/a\\nHost: y HTTP/1.1\\r\\n\\r\\n',\n\
         \x20           b'\\x04\\x01\\x00\\x50\\x7f\\x00\\x00\\x01\\x00'):\n\
         \x20   s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n\
         \x20   s.sendall(req)\n\
         \x20   print(s.recv(64).split(b'\\r\\n')[0].decode())\n";
    let o = py(&profile(&["*".into()]), code);
    assert_eq!(out(&o), "HTTP/1.1 400 Bad Request\n".repeat(6), "{o:?}");
    assert_eq!(o.connections.len(), 6, "{:?}", o.connections);
    assert!(
        o.connections
            .iter()
            .all(|c| c.verdict == Verdict::Refused && c.address.is_none())
    );
}

// ---------------------------------------------------------------- where it cannot be enforced

#[test]
fn without_namespaces_an_allow_list_is_refused() {
    let mut p = profile(&["example.com:443".into()]);
    p.namespaces = false;
    let err = sandbox()
        .spawn(&p, &["true".to_string()])
        .expect_err("an allow-list without a network namespace must be refused");
    assert!(matches!(err, moat_sandbox::Error::Unsupported(_)), "{err}");
    assert!(err.to_string().contains("allow-list"), "{err}");
    // And where the kernel refuses user namespaces, the same profile with them on.
    if !sandbox().namespaces_work() {
        let err = sandbox()
            .spawn(&profile(&[]), &["true".to_string()])
            .expect_err("refused here");
        assert!(matches!(err, moat_sandbox::Error::Unsupported(_)), "{err}");
    }
}
