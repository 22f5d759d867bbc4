//! A run's end, written to a file for the process that started the sandbox's supervisor
//! (`moat sandbox --stdio --report FILE`): how the command ended and the limit it hit.
//!
//! A gateway that runs a server through `moat sandbox --stdio` sees only that process's
//! exit status, which the command chooses (`exit(137)` looks like a kill): the report is
//! what the supervisor itself saw, and what it read from the cgroup's event counters. It
//! is written whole under a temporary name and renamed into place, so a reader sees either
//! nothing or all of it, and whatever was at the path before is replaced.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{LimitHit, Outcome, Termination};

/// What a report file says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Report {
    /// How the command ended.
    pub termination: Termination,
    /// The limit it ran into, if any.
    pub limit_hit: Option<LimitHit>,
    /// Wall time from spawn to exit, in milliseconds.
    pub wall_time_ms: u64,
}

impl Report {
    /// The report of `outcome`.
    pub fn of(outcome: &Outcome) -> Report {
        Report {
            termination: outcome.termination,
            limit_hit: outcome.limit_hit,
            wall_time_ms: u64::try_from(outcome.wall_time.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Writes it to `path`, replacing the file whole (a temporary file beside it, renamed).
    ///
    /// `path` may be in a directory others can write to: the temporary name is
    /// unpredictable, and it is created new, never opened through a symlink or over a file
    /// already there (a name taken is passed over), readable by its owner only. The rename
    /// replaces whatever is at `path` itself, a symlink included, never its target.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        self.write_named(path, random_suffix)
    }

    /// [`write`](Self::write), the temporary names' suffixes drawn from `suffix`.
    fn write_named(&self, path: &Path, mut suffix: impl FnMut() -> u64) -> std::io::Result<()> {
        let json = serde_json::to_vec(self)?;
        let (tmp, mut file) = create_temporary(path, &mut suffix)?;
        let written = file.write_all(&json).and_then(|()| file.sync_all());
        drop(file);
        match written.and_then(|()| std::fs::rename(&tmp, path)) {
            Ok(()) => Ok(()),
            Err(e) => {
                // Ours: created by this call.
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Reads the report at `path`: `Ok(None)` when there is none (yet).
    pub fn read(path: &Path) -> std::io::Result<Option<Report>> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Wall time from spawn to exit.
    pub fn wall_time(&self) -> Duration {
        Duration::from_millis(self.wall_time_ms)
    }
}

/// Names tried for the temporary file before giving up: another taken by chance is next
/// to impossible, so several taken means someone is placing them.
const TEMPORARY_TRIES: usize = 16;

/// Creates a temporary file beside `path`, named `PATH.PID.SUFFIX.tmp`: created new (with
/// `O_EXCL`, which also refuses a symlink there, dangling or not; `O_NOFOLLOW` besides),
/// mode 0600.
fn create_temporary(
    path: &Path,
    suffix: &mut impl FnMut() -> u64,
) -> std::io::Result<(PathBuf, File)> {
    for _ in 0..TEMPORARY_TRIES {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{}.{:016x}.tmp", std::process::id(), suffix()));
        let tmp = PathBuf::from(name);
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp);
        match opened {
            Ok(file) => return Ok((tmp, file)),
            // Someone else's (a file, a symlink): left alone, another name tried.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        ErrorKind::AlreadyExists,
        format!(
            "no free temporary name beside {} after {TEMPORARY_TRIES} tries",
            path.display()
        ),
    ))
}

/// 64 random bits from the kernel; should it fail, the time's nanoseconds (the name is
/// then guessable, but still never opened through a symlink or over another's file).
fn random_suffix() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: `bytes` is valid for writes of its length.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if usize::try_from(n).ok() == Some(bytes.len()) {
        return u64::from_ne_bytes(bytes);
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_limits_name_is_its_serialized_name() {
        for limit in [
            LimitHit::Timeout,
            LimitHit::Output,
            LimitHit::Cpu,
            LimitHit::Memory,
            LimitHit::Pids,
        ] {
            assert_eq!(serde_json::to_value(limit).unwrap(), limit.as_str());
        }
    }

    #[test]
    fn a_report_reads_back_and_replaces_what_was_there() {
        let dir = std::env::temp_dir().join(format!("moat-report-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.json");
        assert_eq!(Report::read(&path).unwrap(), None);
        std::fs::write(&path, b"{\"forged\": true}").unwrap();
        let report = Report {
            termination: Termination::Signaled(libc::SIGXCPU),
            limit_hit: Some(LimitHit::Cpu),
            wall_time_ms: 1200,
        };
        report.write(&path).unwrap();
        assert_eq!(Report::read(&path).unwrap(), Some(report));
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary left"
        );
        std::fs::write(&path, b"not json").unwrap();
        assert!(Report::read(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn report() -> Report {
        Report {
            termination: Termination::Exited(0),
            limit_hit: None,
            wall_time_ms: 5,
        }
    }

    /// A symlink planted at the temporary name, pointing at a file of the victim's (and a
    /// dangling one, at a file not there yet): neither is followed — the write takes the
    /// next name, the targets are untouched (the dangling one not created), the symlinks
    /// are left, and the report is in place, readable by its owner only.
    #[test]
    fn a_symlink_at_the_temporary_name_is_not_followed() {
        let dir = std::env::temp_dir().join(format!("moat-report-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.json");
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let absent = dir.join("absent");
        let name = |n: u64| dir.join(format!("run.json.{}.{n:016x}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, name(1)).unwrap();
        std::os::unix::fs::symlink(&absent, name(2)).unwrap();
        let mut next = 0;
        report()
            .write_named(&path, || {
                next += 1;
                next
            })
            .unwrap();
        assert_eq!(next, 3, "the planted names were passed over");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(
            !absent.exists(),
            "the dangling symlink's target was created"
        );
        assert!(name(1).symlink_metadata().unwrap().is_symlink());
        assert!(name(2).symlink_metadata().unwrap().is_symlink());
        assert!(!name(3).exists(), "the temporary was renamed away");
        assert_eq!(Report::read(&path).unwrap(), Some(report()));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every name taken: the write fails, and touches neither the symlink's target nor
    /// what was at the path.
    #[test]
    fn with_every_temporary_name_taken_the_write_fails_untouched() {
        let dir = std::env::temp_dir().join(format!("moat-report-taken-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.json");
        std::fs::write(&path, b"before").unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let taken = dir.join(format!("run.json.{}.{:016x}.tmp", std::process::id(), 7));
        std::os::unix::fs::symlink(&victim, &taken).unwrap();
        let err = report().write_named(&path, || 7).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(&path).unwrap(), b"before");
        assert!(
            taken.symlink_metadata().unwrap().is_symlink(),
            "not removed"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn temporary_names_differ() {
        assert_ne!(random_suffix(), random_suffix());
    }
}
