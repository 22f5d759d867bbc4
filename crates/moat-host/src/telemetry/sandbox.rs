//! Which sandbox limit a server ran into, for `moat_sandbox_limit_hits_total`.
//!
//! A sandboxed server runs as `moat sandbox --stdio … -- CMD`, and the gateway sees only
//! that process's exit status, which the server chooses as much as the sandbox does. So
//! the sandbox's supervisor writes a report (`--report FILE`, [`moat_sandbox::Report`]):
//! how the command ended and the limit it hit, as the supervisor saw it and as the
//! cgroup's event counters say. The files live in a directory only the gateway's user
//! may enter, made on the first sandboxed start with metrics on and removed with the
//! metrics; with metrics off no report is asked for.

use std::path::{Path, PathBuf};
use std::sync::Weak;
use std::time::Duration;

use crate::inner::Inner;

/// How long after the server went away its report is waited for: the supervisor writes
/// it as soon as the command has ended, but the gateway may notice first (stdout closed).
/// A supervisor that was killed writes none.
const REPORT_WAIT: Duration = Duration::from_secs(5);

/// The report file of one start of a sandboxed server; removed when dropped.
#[derive(Debug)]
pub(crate) struct LimitReport {
    path: PathBuf,
}

impl LimitReport {
    /// A report for the next start of a server, when metrics are on and its sandbox
    /// can write one.
    pub(crate) fn new(
        metrics: Option<&super::metrics::Metrics>,
        sandboxed: bool,
    ) -> Option<LimitReport> {
        if !sandboxed {
            return None;
        }
        let path = metrics?.reports().next_file()?;
        Some(LimitReport { path })
    }

    /// Where the sandbox writes it (`--report`).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The server's process is gone (or going): count the limit it hit, once its
    /// report is there. Waits in a task of its own, so that a restart is not delayed.
    pub(crate) fn collect(self, host: Weak<Inner>, server: String) {
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + REPORT_WAIT;
            let report = loop {
                match moat_sandbox::Report::read(&self.path) {
                    Ok(Some(report)) => break Some(report),
                    Ok(None) if tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Ok(None) => break None,
                    Err(e) => {
                        tracing::debug!(server, error = %e, "sandbox report unreadable");
                        break None;
                    }
                }
            };
            let Some(limit) = report.and_then(|r| r.limit_hit) else {
                return;
            };
            tracing::warn!(
                server,
                limit = limit.as_str(),
                "the server ran into its sandbox limit"
            );
            if let Some(inner) = host.upgrade()
                && let Some(metrics) = inner.metrics()
            {
                metrics.sandbox_limit_hit(&server, limit.as_str());
            }
        });
    }
}

impl Drop for LimitReport {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
