//! The network allow-list as data ([`HostPattern`]) and the two decisions the proxy makes
//! with it: may the sandbox ask for this target (a name or an address, and a port), and may
//! the proxy connect to this address (what a name resolved to). Pure: no I/O here.
//!
//! Pattern syntax, one per entry (`HOST[:PORTS]`):
//!
//! | `HOST` | matches |
//! |---|---|
//! | `api.github.com` | that name only (case-insensitive, a trailing dot ignored) |
//! | `*.github.com` | any name below `github.com`, not `github.com` itself |
//! | `*` | any name (never an address: addresses must be listed as addresses) |
//! | `127.0.0.1`, `[::1]` | that address, asked for literally or resolved from an allowed name |
//! | `10.0.0.0/8`, `[fd00::/8]` | any address in that range, likewise |
//!
//! `PORTS` is `*` (any), or a comma-separated list of ports and ranges (`443`, `80,443`,
//! `8000-8100`); without it, 80 and 443.
//!
//! Addresses that are not public (loopback, private, link-local, CGNAT, unspecified,
//! multicast, reserved, documentation, unique-local, and IPv4-mapped or 6to4/NAT64 forms of
//! these) are reached only when an address pattern covers them: an allowed *name* that
//! resolves to `127.0.0.1` is refused, whatever it resolved to a moment ago.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The ports a pattern without `:PORTS` allows.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// One entry of a network allow-list, such as `api.github.com:443`, `*.example.com`,
/// `127.0.0.1:8080` or `10.0.0.0/8:*` (see the syntax in the module docs of `net.rs`, or
/// docs/sandbox.md). Serialized as that string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HostPattern {
    host: HostMatch,
    ports: Ports,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    /// `*`: any name.
    AnyName,
    /// A name, normalized.
    Exact(String),
    /// `*.suffix`: the suffix, normalized, without `*.`.
    Suffix(String),
    /// An address and a prefix length (32 or 128 for one address).
    Net(IpAddr, u8),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ports {
    /// No `:PORTS`: [`DEFAULT_PORTS`].
    Default,
    /// `:*`.
    Any,
    /// Inclusive ranges.
    List(Vec<(u16, u16)>),
}

/// Why a network pattern (or a `--net`/`--allow-net` value) could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("network pattern {pattern:?}: {reason}")]
pub struct PatternError {
    pattern: String,
    reason: String,
}

impl PatternError {
    pub(crate) fn new(pattern: &str, reason: impl Into<String>) -> PatternError {
        PatternError {
            pattern: pattern.to_string(),
            reason: reason.into(),
        }
    }
}

fn perr(pattern: &str, reason: impl Into<String>) -> PatternError {
    PatternError::new(pattern, reason)
}

impl HostPattern {
    /// Reads a comma-separated list of patterns, as given on a command line. A bare port or
    /// range continues the port list of the pattern before it: `github.com:22,443,*.github.io`
    /// is `github.com` on 22 and 443, and `*.github.io` on 80 and 443. Empty entries are
    /// skipped.
    pub fn parse_list(list: &str) -> Result<Vec<HostPattern>, PatternError> {
        let mut entries: Vec<String> = Vec::new();
        for token in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let is_port = token.bytes().all(|b| b.is_ascii_digit() || b == b'-');
            match entries.last_mut() {
                Some(last) if is_port && has_port_list(last) => {
                    last.push(',');
                    last.push_str(token);
                }
                _ if is_port => {
                    return Err(perr(token, "a port needs a host before it (HOST:PORT)"));
                }
                _ => entries.push(token.to_string()),
            }
        }
        entries.iter().map(|e| e.parse()).collect()
    }

    /// Whether this pattern allows `port`.
    fn allows_port(&self, port: u16) -> bool {
        match &self.ports {
            Ports::Default => DEFAULT_PORTS.contains(&port),
            Ports::Any => true,
            Ports::List(ranges) => ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&port)),
        }
    }
}

/// Whether `entry` (one pattern in the making) ends with an explicit port list.
fn has_port_list(entry: &str) -> bool {
    let tail = match entry.rfind(']') {
        Some(i) => &entry[i + 1..],
        None => entry,
    };
    tail.rsplit_once(':')
        .is_some_and(|(_, ports)| ports != "*" && !ports.is_empty())
}

impl FromStr for HostPattern {
    type Err = PatternError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (host, ports) = if let Some(rest) = s.strip_prefix('[') {
            let Some(end) = rest.find(']') else {
                return Err(perr(s, "unclosed `[`"));
            };
            let after = &rest[end + 1..];
            let ports = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(perr(s, "expected `:PORTS` after `]`")),
            };
            (&s[..end + 2], ports)
        } else if s.matches(':').count() > 1 {
            return Err(perr(s, "an IPv6 address goes in brackets: [::1]:8080"));
        } else {
            match s.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (s, None),
            }
        };
        let host = parse_host_match(host).map_err(|r| perr(s, r))?;
        let ports = match ports {
            None => Ports::Default,
            Some("*") => Ports::Any,
            Some(list) => Ports::List(parse_ports(list).map_err(|r| perr(s, r))?),
        };
        Ok(HostPattern { host, ports })
    }
}

fn parse_host_match(h: &str) -> Result<HostMatch, String> {
    if h == "*" {
        return Ok(HostMatch::AnyName);
    }
    if let Some(suffix) = h.strip_prefix("*.") {
        return Ok(HostMatch::Suffix(normalize_name(suffix)?));
    }
    if h.contains('*') {
        return Err("`*` only as the whole host or as a leading `*.`".into());
    }
    let (addr, prefix, v6) = match h.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        Some(inner) => match inner.split_once('/') {
            Some((a, p)) => (a, Some(p), true),
            None => (inner, None, true),
        },
        None => match h.split_once('/') {
            Some((a, p)) => (a, Some(p), false),
            None => (h, None, false),
        },
    };
    let ip: Option<IpAddr> = if v6 {
        Some(IpAddr::V6(addr.parse::<Ipv6Addr>().map_err(|_| {
            format!("{addr:?} is not an IPv6 address (no zone ids)")
        })?))
    } else {
        addr.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
    };
    let Some(ip) = ip else {
        if prefix.is_some() {
            return Err(format!("{addr:?} is not an IPv4 address"));
        }
        if addr.parse::<Ipv6Addr>().is_ok() {
            return Err("an IPv6 address goes in brackets: [::1]:8080".into());
        }
        return Ok(HostMatch::Exact(normalize_name(addr)?));
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => max,
        Some(p) => p
            .parse::<u8>()
            .ok()
            .filter(|&p| p <= max)
            .ok_or_else(|| format!("prefix length {p:?} is not 0 to {max}"))?,
    };
    // `[::ffff:10.0.0.0/104]` is `10.0.0.0/8`: targets are compared in canonical form.
    if let IpAddr::V6(v6) = ip
        && let Some(v4) = v6.to_ipv4_mapped()
        && prefix >= 96
    {
        return Ok(HostMatch::Net(IpAddr::V4(v4), prefix - 96));
    }
    Ok(HostMatch::Net(ip, prefix))
}

fn parse_ports(list: &str) -> Result<Vec<(u16, u16)>, String> {
    let port = |p: &str| {
        p.trim()
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("{p:?} is not a port (1 to 65535)"))
    };
    let ranges = list
        .split(',')
        .map(|item| match item.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (port(lo)?, port(hi)?);
                if lo > hi {
                    return Err(format!("empty port range {item:?}"));
                }
                Ok((lo, hi))
            }
            None => port(item).map(|p| (p, p)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if ranges.is_empty() {
        return Err("no ports".into());
    }
    Ok(ranges)
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostMatch::AnyName => f.write_str("*")?,
            HostMatch::Exact(n) => f.write_str(n)?,
            HostMatch::Suffix(s) => write!(f, "*.{s}")?,
            HostMatch::Net(IpAddr::V4(a), 32) => write!(f, "{a}")?,
            HostMatch::Net(IpAddr::V4(a), p) => write!(f, "{a}/{p}")?,
            HostMatch::Net(IpAddr::V6(a), 128) => write!(f, "[{a}]")?,
            HostMatch::Net(IpAddr::V6(a), p) => write!(f, "[{a}/{p}]")?,
        }
        match &self.ports {
            Ports::Default => Ok(()),
            Ports::Any => f.write_str(":*"),
            Ports::List(ranges) => {
                for (i, &(lo, hi)) in ranges.iter().enumerate() {
                    f.write_str(if i == 0 { ":" } else { "," })?;
                    if lo == hi {
                        write!(f, "{lo}")?;
                    } else {
                        write!(f, "{lo}-{hi}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

impl TryFrom<String> for HostPattern {
    type Error = PatternError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<HostPattern> for String {
    fn from(p: HostPattern) -> String {
        p.to_string()
    }
}

/// A host name, lower-cased and without a trailing dot; refuses anything that is not a plain
/// DNS name (no spaces, `%`, `@`, non-ASCII: clients send IDNs as punycode), and names that
/// `inet_aton` would read as a number (`127.1`, `0x7f.1`, `2130706433`).
pub(crate) fn normalize_name(s: &str) -> Result<String, String> {
    let lower = s.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    if name.is_empty() || name.len() > 253 {
        return Err(format!("{s:?} is not a host name"));
    }
    let mut numeric = true;
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!("{s:?} is not a host name"));
        }
        let hex = label
            .strip_prefix("0x")
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
        numeric &= hex || label.bytes().all(|b| b.is_ascii_digit());
    }
    if numeric {
        return Err(format!(
            "{s:?} is a number, not a host name (write addresses as a.b.c.d or [v6])"
        ));
    }
    Ok(name.to_string())
}

/// What the sandbox asked to reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Name(String),
    Ip(IpAddr),
}

impl Target {
    /// A host as sent by a client: a name, a dotted-quad IPv4 address, or an IPv6 address
    /// (bracketed or not). Addresses are canonical (IPv4-mapped IPv6 becomes IPv4).
    pub(crate) fn parse(host: &str) -> Result<Target, String> {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(Target::Ip(ip.to_canonical()));
        }
        normalize_name(host).map(Target::Name)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Name(n) => f.write_str(n),
            Target::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Target::Ip(a) => write!(f, "{a}"),
        }
    }
}

/// The allow-list, as the proxy asks it.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    patterns: Vec<HostPattern>,
}

impl Policy {
    pub(crate) fn new(patterns: Vec<HostPattern>) -> Policy {
        Policy { patterns }
    }

    /// May the sandbox ask for `target` on `port`? Names match name patterns, addresses match
    /// address patterns (an allowed name does not allow its addresses by number).
    pub(crate) fn allows_target(&self, target: &Target, port: u16) -> bool {
        self.patterns.iter().any(|p| {
            p.allows_port(port)
                && match (&p.host, target) {
                    (HostMatch::AnyName, Target::Name(_)) => true,
                    (HostMatch::Exact(e), Target::Name(n)) => e == n,
                    (HostMatch::Suffix(s), Target::Name(n)) => n
                        .strip_suffix(s.as_str())
                        .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                    (HostMatch::Net(net, len), Target::Ip(ip)) => in_net(*ip, *net, *len),
                    _ => false,
                }
        })
    }

    /// May the proxy connect to `ip:port` for an allowed target? Public addresses: yes.
    /// Others only when an address pattern covers them (with the port).
    pub(crate) fn allows_address(&self, ip: IpAddr, port: u16) -> bool {
        let ip = ip.to_canonical();
        is_public(ip)
            || self.patterns.iter().any(|p| {
                p.allows_port(port)
                    && matches!(p.host, HostMatch::Net(net, len) if in_net(ip, net, len))
            })
    }
}

fn in_net(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (ip.to_canonical(), net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            (u32::from(a) ^ u32::from(n))
                .checked_shr(32 - u32::from(len))
                .unwrap_or(0)
                == 0
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            (u128::from(a) ^ u128::from(n))
                .checked_shr(128 - u32::from(len))
                .unwrap_or(0)
                == 0
        }
        _ => false,
    }
}

/// Whether `ip` is a public unicast address: not loopback, private, link-local, CGNAT,
/// unspecified, broadcast, multicast, reserved, benchmarking or documentation, and (IPv6)
/// not unique-local, site-local, discard-only, an IETF assignment (Teredo included), or an
/// IPv4-mapped, IPv4-compatible, 6to4 or NAT64 form of a non-public IPv4 address.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(a) => is_public_v4(a),
        IpAddr::V6(a) => is_public_v6(a),
    }
}

fn is_public_v4(a: Ipv4Addr) -> bool {
    const NOT_PUBLIC: &[([u8; 4], u8)] = &[
        ([0, 0, 0, 0], 8),       // "this network": 0.0.0.0 reaches the local host
        ([10, 0, 0, 0], 8),      // private
        ([100, 64, 0, 0], 10),   // CGNAT
        ([127, 0, 0, 0], 8),     // loopback
        ([169, 254, 0, 0], 16),  // link-local (cloud metadata services)
        ([172, 16, 0, 0], 12),   // private
        ([192, 0, 0, 0], 24),    // IETF protocol assignments
        ([192, 0, 2, 0], 24),    // documentation
        ([192, 88, 99, 0], 24),  // 6to4 relay anycast
        ([192, 168, 0, 0], 16),  // private
        ([198, 18, 0, 0], 15),   // benchmarking
        ([198, 51, 100, 0], 24), // documentation
        ([203, 0, 113, 0], 24),  // documentation
        ([224, 0, 0, 0], 4),     // multicast
        ([240, 0, 0, 0], 4),     // reserved, broadcast
    ];
    !NOT_PUBLIC
        .iter()
        .any(|&(net, len)| in_net(IpAddr::V4(a), IpAddr::V4(Ipv4Addr::from(net)), len))
}

fn is_public_v6(a: Ipv6Addr) -> bool {
    let bits = u128::from(a);
    let v6 = |s: &str| {
        s.parse::<Ipv6Addr>()
            .map(IpAddr::V6)
            .unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED))
    };
    let within = |net: &str, len: u8| in_net(IpAddr::V6(a), v6(net), len);
    // Forms that carry an IPv4 address: judged by it.
    if within("64:ff9b::", 96) {
        return is_public_v4(Ipv4Addr::from(bits as u32));
    }
    if within("2002::", 16) {
        return is_public_v4(Ipv4Addr::from((bits >> 80) as u32));
    }
    const NOT_PUBLIC: &[(&str, u8)] = &[
        ("::", 96),          // unspecified, loopback, IPv4-compatible (deprecated)
        ("64:ff9b:1::", 48), // local-use NAT64
        ("100::", 64),       // discard-only
        ("2001::", 23),      // IETF protocol assignments (Teredo included)
        ("2001:db8::", 32),  // documentation
        ("3fff::", 20),      // documentation
        ("5f00::", 16),      // SRv6 SIDs
        ("fc00::", 7),       // unique local
        ("fe80::", 10),      // link-local
        ("fec0::", 10),      // site-local (deprecated)
        ("ff00::", 8),       // multicast
    ];
    !NOT_PUBLIC.iter().any(|&(net, len)| within(net, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> HostPattern {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    fn name(n: &str) -> Target {
        Target::parse(n).unwrap()
    }

    #[test]
    fn patterns_parse_and_print_back() {
        for s in [
            "api.github.com",
            "api.github.com:443",
            "*.example.com:80,443,8000-8100",
            "*",
            "*:443",
            "127.0.0.1:8080",
            "10.0.0.0/8:*",
            "[::1]:8080",
            "[fd00::/8]",
        ] {
            assert_eq!(p(s).to_string(), s);
        }
        assert_eq!(p("API.GitHub.com.:443").to_string(), "api.github.com:443");
        assert_eq!(p("[::ffff:10.0.0.0/104]").to_string(), "10.0.0.0/8");
        for bad in [
            "",
            "a..b",
            "exa mple.com",
            "*.com*",
            "foo.*.com",
            "host:0",
            "host:70000",
            "host:9-3",
            "host:",
            "::1",
            "[::1",
            "[fe80::1%eth0]",
            "10.0.0.0/33",
            "127.1",
            "0x7f.0.0.1",
            "2130706433",
            "user@host",
            "bücher.de",
        ] {
            assert!(bad.parse::<HostPattern>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn lists_continue_port_lists() {
        let list = HostPattern::parse_list("github.com:22,443, *.github.io ,[::1]:80,81,").unwrap();
        let shown: Vec<String> = list.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["github.com:22,443", "*.github.io", "[::1]:80,81"]);
        assert!(HostPattern::parse_list("443").is_err());
        assert!(HostPattern::parse_list("a.com,443").is_err());
        assert!(HostPattern::parse_list("a.com:*,443").is_err());
    }

    #[test]
    fn serde_uses_the_string_form() {
        let json = serde_json::to_string(&p("*.example.com:443")).unwrap();
        assert_eq!(json, r#""*.example.com:443""#);
        assert_eq!(
            serde_json::from_str::<HostPattern>(&json).unwrap(),
            p("*.example.com:443")
        );
        assert!(serde_json::from_str::<HostPattern>(r#""a b""#).is_err());
    }

    #[test]
    fn targets_match_names_suffixes_ports_and_addresses() {
        let pol = Policy::new(vec![
            p("api.github.com:443"),
            p("*.example.com"),
            p("127.0.0.1:8080"),
            p("10.0.0.0/8:22"),
        ]);
        assert!(pol.allows_target(&name("api.github.com"), 443));
        assert!(pol.allows_target(&name("API.GITHUB.COM."), 443));
        assert!(!pol.allows_target(&name("api.github.com"), 80));
        assert!(!pol.allows_target(&name("github.com"), 443));
        assert!(!pol.allows_target(&name("evil-api.github.com"), 443));
        assert!(pol.allows_target(&name("a.b.example.com"), 80));
        assert!(pol.allows_target(&name("www.example.com"), 443));
        assert!(!pol.allows_target(&name("example.com"), 443));
        assert!(!pol.allows_target(&name("badexample.com"), 443));
        assert!(!pol.allows_target(&name("www.example.com"), 8080));
        assert!(pol.allows_target(&name("127.0.0.1"), 8080));
        assert!(pol.allows_target(&name("[::ffff:127.0.0.1]"), 8080));
        assert!(!pol.allows_target(&name("127.0.0.1"), 8081));
        assert!(!pol.allows_target(&name("localhost"), 8080));
        assert!(pol.allows_target(&name("10.1.2.3"), 22));
        assert!(!pol.allows_target(&name("11.1.2.3"), 22));
        // An allowed name does not allow addresses by number, nor `*` any address.
        let any = Policy::new(vec![p("*:443")]);
        assert!(any.allows_target(&name("anything.test"), 443));
        assert!(!any.allows_target(&name("1.1.1.1"), 443));
    }

    #[test]
    fn non_public_addresses_need_an_address_pattern() {
        let pol = Policy::new(vec![
            p("*.example.com"),
            p("127.0.0.1:8080"),
            p("[fd00::/8]:443"),
        ]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(pol.allows_address(ip("93.184.215.14"), 443));
        assert!(pol.allows_address(ip("2606:4700::1111"), 443));
        for private in [
            "127.0.0.1",
            "127.0.0.2",
            "0.0.0.0",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "fe80::1",
            "fc00::1",
            "ff02::1",
        ] {
            assert!(!is_public(ip(private)), "{private} is public?");
            assert!(!pol.allows_address(ip(private), 443), "{private}");
        }
        assert!(is_public(ip("64:ff9b::808:808")));
        assert!(is_public(ip("2002:808:808::")));
        assert!(pol.allows_address(ip("127.0.0.1"), 8080));
        assert!(pol.allows_address(ip("::ffff:127.0.0.1"), 8080));
        assert!(!pol.allows_address(ip("127.0.0.1"), 443));
        assert!(pol.allows_address(ip("fd12::1"), 443));
        // A rebinding: the same allowed name, first public, then private.
        assert!(pol.allows_target(&name("www.example.com"), 443));
        assert!(pol.allows_address(ip("93.184.215.14"), 443));
        assert!(!pol.allows_address(ip("127.0.0.1"), 443));
    }
}
