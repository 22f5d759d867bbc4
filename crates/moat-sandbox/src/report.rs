//! A run's end, written to a file for the process that started the sandbox's supervisor
//! (`moat sandbox --stdio --report FILE`): how the command ended and the limit it hit.
//!
//! A gateway that runs a server through `moat sandbox --stdio` sees only that process's
//! exit status, which the command chooses (`exit(137)` looks like a kill): the report is
//! what the supervisor itself saw, and what it read from the cgroup's event counters. It
//! is written whole under a temporary name and renamed into place, so a reader sees either
//! nothing or all of it, and whatever was at the path before is replaced.

use std::io::Write;
use std::path::Path;
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
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec(self)?;
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{}.tmp", std::process::id()));
        let tmp = std::path::PathBuf::from(name);
        let written = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(&json)?;
            file.sync_all()
        })();
        match written.and_then(|()| std::fs::rename(&tmp, path)) {
            Ok(()) => Ok(()),
            Err(e) => {
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

#[cfg(test)]
mod tests {
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
}
