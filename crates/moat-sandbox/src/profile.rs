//! The [`Profile`]: what a sandboxed command may see and use, as plain serde data.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::net::{HostPattern, PatternError};

/// Network access. In JSON: `"none"`, `"host"`, or `{"allow": ["api.github.com:443", …]}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Net {
    /// No network: a network namespace of its own whose only interface, loopback, is down;
    /// only Unix sockets can be created (seccomp answers `EPERM` for the rest), and TCP
    /// bind/connect are denied by Landlock where the kernel supports it. Nothing is
    /// reachable, not even 127.0.0.1.
    #[default]
    None,
    /// The host's network, unrestricted.
    Host,
    /// Only the hosts these patterns name, through a proxy the supervisor runs outside the
    /// sandbox (see docs/sandbox.md): inside, a network namespace with only loopback, and
    /// `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` pointing at it. Needs the namespaces: where
    /// they are unavailable, [`crate::Sandbox::spawn`] refuses the profile
    /// ([`crate::Error::Unsupported`]).
    Allow(Vec<HostPattern>),
}

impl Net {
    /// Whether the command gets a network namespace of its own (`none` and `allow`).
    pub fn is_isolated(&self) -> bool {
        !matches!(self, Net::Host)
    }
}

/// `none`, `host`, `allow` (nothing allowed, every attempt recorded) or `allow:LIST`, with
/// LIST as in [`HostPattern::parse_list`].
impl FromStr for Net {
    type Err = PatternError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "none" => Ok(Net::None),
            "host" => Ok(Net::Host),
            "allow" => Ok(Net::Allow(Vec::new())),
            other => match other.strip_prefix("allow:") {
                Some(list) => HostPattern::parse_list(list).map(Net::Allow),
                None => Err(PatternError::new(
                    other,
                    "expected none, host, or allow:HOST[:PORTS],...",
                )),
            },
        }
    }
}

/// Resource limits. `None` means "not limited by the sandbox".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock time, after which the whole process group is killed.
    #[serde(with = "opt_duration_ms", rename = "timeout_ms")]
    pub timeout: Option<Duration>,
    /// CPU time in seconds (`RLIMIT_CPU`).
    pub cpu_seconds: Option<u64>,
    /// Address space in bytes (`RLIMIT_AS`; and the cgroup memory limit where available).
    pub memory_bytes: Option<u64>,
    /// Number of processes: a cgroup `pids.max` where one can be created, else `RLIMIT_NPROC`
    /// (which counts every process of the user, and which the kernel ignores for root).
    /// With namespaces the cgroup also counts the sandbox's PID 1 (and its proxy shim thread).
    pub pids: Option<u64>,
    /// Open files (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
    /// Bytes of stdout plus stderr kept; past this the command is killed and the output is
    /// marked truncated. Must be `None` for [`crate::Sandbox::spawn_stdio`], whose output
    /// never passes through the sandbox.
    pub output_bytes: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Some(Duration::from_secs(60)),
            cpu_seconds: None,
            memory_bytes: None,
            pids: None,
            open_files: Some(1024),
            output_bytes: Some(16 * 1024 * 1024),
        }
    }
}

/// What a sandboxed command may see and use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Profile {
    /// Paths readable (and executable) beneath, nothing written.
    pub ro: Vec<PathBuf>,
    /// Paths readable and writable beneath.
    pub rw: Vec<PathBuf>,
    /// Add the usual system directories (`/usr`, `/bin`, `/lib`…, `/etc`, some of `/dev`)
    /// read-only, so ordinary programs can start.
    pub system_ro: bool,
    /// Network access.
    pub net: Net,
    /// Run in new user, mount, PID, IPC and UTS namespaces (and network, with `net` `none`
    /// or `allow`)
    /// with a new root holding only the paths above, a fresh `/tmp` and `/proc` and a
    /// minimal `/dev`, where the kernel allows; without, where it does not (the
    /// [`crate::Outcome`] says which).
    pub namespaces: bool,
    /// Apply Landlock in the command's process (filesystem rules for the paths above, TCP
    /// denial with `net` `none` or `allow`, signal and abstract-socket scoping), as far as
    /// the kernel's ABI allows. Off: none of it; with the namespaces off too, paths are not
    /// confined at all (the [`crate::Outcome`] says so).
    pub landlock: bool,
    /// Install the seccomp deny-list in the command's process (see docs/sandbox.md: ptrace,
    /// io_uring, bpf, the mount API, namespace creation, `TIOCSTI`, socket families the
    /// network setting does not allow…). Off: no filter at all (PID 1's own hardening, with
    /// an allow-list, stays).
    pub seccomp: bool,
    /// Names of environment variables passed through from the caller; nothing else is.
    pub env: Vec<String>,
    /// The working directory of the command (default: the caller's).
    pub cwd: Option<PathBuf>,
    /// Resource limits.
    pub limits: Limits,
    /// The user id the command runs as when the supervising process is root (uid 0); default
    /// [`NOBODY`]. Ignored otherwise: an unprivileged supervisor's commands run as itself.
    pub uid: Option<u32>,
    /// The group id the command runs as when the supervising process is root; default
    /// [`NOBODY`]. Supplementary groups are always cleared.
    pub gid: Option<u32>,
    /// Keep root: when the supervising process is root, run the command as root too (inside
    /// user namespaces, with every capability dropped, but with root's file permissions on
    /// everything the profile shows). Off by default; callers should warn when it is set.
    pub run_as_root: bool,
    /// Paths hidden even where the profile shows their directory: each becomes an empty
    /// read-only file (a directory: an empty read-only directory) in the mount tree. A `*` in
    /// the last component matches any name there (`/etc/ssh/*_key`). Default: [`MASKED`];
    /// a profile that sets it replaces that list (`[]`: nothing masked).
    pub mask: Vec<String>,
}

/// The uid and gid a command runs as under a root supervisor, unless the profile says
/// otherwise (`nobody`/`nogroup` on most distributions).
pub const NOBODY: u32 = 65534;

/// Sensitive system files masked by default (see [`Profile::mask`]): password and group
/// hashes, sudo rules, SSH host keys, old passwords, TLS private keys, Kerberos keytabs,
/// systemd credentials.
pub const MASKED: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/*_key",
    "/etc/security/opasswd",
    "/etc/ssl/private",
    "/etc/pki/tls/private",
    "/etc/krb5.keytab",
    "/etc/credstore",
    "/etc/credstore.encrypted",
];

impl Default for Profile {
    fn default() -> Self {
        Profile {
            ro: Vec::new(),
            rw: Vec::new(),
            system_ro: true,
            net: Net::None,
            namespaces: true,
            landlock: true,
            seccomp: true,
            env: vec!["PATH".into(), "LANG".into(), "TERM".into()],
            cwd: None,
            limits: Limits::default(),
            uid: None,
            gid: None,
            run_as_root: false,
            mask: MASKED.iter().map(|m| m.to_string()).collect(),
        }
    }
}

/// System paths added read-only when [`Profile::system_ro`] is set (missing ones are skipped).
pub(crate) const SYSTEM_RO: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
    "/dev/full",
    "/proc/self",
];

/// System paths added read-write when [`Profile::system_ro`] is set.
pub(crate) const SYSTEM_RW: &[&str] = &["/dev/null"];

impl Profile {
    /// Whether `path` lies in the system directories [`Profile::system_ro`] adds read-only.
    pub fn is_system_path(path: &Path) -> bool {
        SYSTEM_RO.iter().any(|system| path.starts_with(system))
    }

    /// The uid and gid a command of this profile runs as under a supervisor whose uid is
    /// `supervisor_uid`: `None` when it keeps the supervisor's own ids (an unprivileged
    /// supervisor, or [`Profile::run_as_root`]).
    pub fn run_as(&self, supervisor_uid: u32) -> Option<(u32, u32)> {
        if supervisor_uid != 0 || self.run_as_root {
            return None;
        }
        Some((self.uid.unwrap_or(NOBODY), self.gid.unwrap_or(NOBODY)))
    }

    /// Checks the profile: every named path exists, limits are non-zero. Returns the profile
    /// with its paths made absolute and symlinks resolved (Landlock rules follow the real
    /// directories).
    pub fn resolved(&self) -> crate::Result<Profile> {
        let canon = |p: &Path| {
            std::fs::canonicalize(p).map_err(|error| crate::Error::Path {
                path: p.to_path_buf(),
                error,
            })
        };
        let mut out = self.clone();
        out.ro = self.ro.iter().map(|p| canon(p)).collect::<Result<_, _>>()?;
        out.rw = self.rw.iter().map(|p| canon(p)).collect::<Result<_, _>>()?;
        if let Some(cwd) = &self.cwd {
            out.cwd = Some(canon(cwd)?);
        }
        let l = &self.limits;
        for (name, value) in [
            ("cpu_seconds", l.cpu_seconds),
            ("memory_bytes", l.memory_bytes),
            ("pids", l.pids),
            ("open_files", l.open_files),
        ] {
            if value == Some(0) {
                return Err(crate::Error::InvalidLimit(format!(
                    "{name} must be at least 1"
                )));
            }
        }
        if !self.run_as_root && (self.uid == Some(0) || self.gid == Some(0)) {
            return Err(crate::Error::InvalidProfile(
                "uid and gid 0 are root: set run_as_root = true to keep root (not advised)".into(),
            ));
        }
        for m in &self.mask {
            if !m.starts_with('/') || m.contains('\0') {
                return Err(crate::Error::InvalidProfile(format!(
                    "mask: {m:?} is not an absolute path"
                )));
            }
        }
        if l.timeout == Some(Duration::ZERO) {
            return Err(crate::Error::InvalidLimit(
                "timeout must be positive".into(),
            ));
        }
        Ok(out)
    }
}

mod opt_duration_ms {
    //! `Option<Duration>` as whole milliseconds.
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_round_trip_and_refuse_unknown_fields() {
        let p = Profile::default();
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Profile>(&json).unwrap(), p);
        let p: Profile =
            serde_json::from_str(r#"{"ro":["/usr"],"net":"host","limits":{"timeout_ms":1500}}"#)
                .unwrap();
        assert_eq!(p.net, Net::Host);
        assert_eq!(p.limits.timeout, Some(Duration::from_millis(1500)));
        assert!(p.namespaces);
        assert!(serde_json::from_str::<Profile>(r#"{"rox":[]}"#).is_err());
        assert!(serde_json::from_str::<Profile>(r#"{"net":"proxy"}"#).is_err());
    }

    #[test]
    fn allow_lists_are_plain_data() {
        let p: Profile = serde_json::from_str(
            r#"{"net":{"allow":["api.github.com:443","*.example.com","127.0.0.1:8080"]}}"#,
        )
        .unwrap();
        let Net::Allow(list) = &p.net else {
            panic!("{:?}", p.net)
        };
        assert_eq!(list.len(), 3);
        assert_eq!(list[1].to_string(), "*.example.com");
        let json = serde_json::to_string(&p).unwrap();
        assert!(
            json.contains(r#""net":{"allow":["api.github.com:443","#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Profile>(&json).unwrap(), p);
        assert!(serde_json::from_str::<Profile>(r#"{"net":{"allow":["a b"]}}"#).is_err());
        assert!(serde_json::from_str::<Profile>(r#"{"net":{"allow":"x.com"}}"#).is_err());

        assert_eq!("none".parse::<Net>().unwrap(), Net::None);
        assert_eq!("host".parse::<Net>().unwrap(), Net::Host);
        assert_eq!("allow".parse::<Net>().unwrap(), Net::Allow(Vec::new()));
        let Net::Allow(list) = "allow:github.com:22,443,*.github.io"
            .parse::<Net>()
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(list.len(), 2);
        assert!("proxy".parse::<Net>().is_err());
        assert!("allow:a b".parse::<Net>().is_err());
        assert!(Net::None.is_isolated() && Net::Allow(vec![]).is_isolated());
        assert!(!Net::Host.is_isolated());
    }

    #[test]
    fn resolving_checks_paths_and_limits() {
        let mut p = Profile {
            ro: vec!["/definitely/not/here".into()],
            ..Profile::default()
        };
        assert!(matches!(p.resolved(), Err(crate::Error::Path { .. })));
        p.ro = vec!["/".into()];
        p.limits.pids = Some(0);
        assert!(matches!(p.resolved(), Err(crate::Error::InvalidLimit(_))));
    }
}
