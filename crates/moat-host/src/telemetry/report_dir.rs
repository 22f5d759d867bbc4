//! The private directory the sandbox writes its reports into (see [`super::sandbox`]):
//! made on first use, readable by the gateway's user alone, removed when dropped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// The directory of the reports, `None` if it could not be made.
#[derive(Debug)]
pub(crate) struct ReportDir {
    path: Option<PathBuf>,
    next: AtomicU64,
}

impl ReportDir {
    pub(crate) fn new() -> ReportDir {
        let path = make_private_dir()
            .inspect_err(|e| {
                tracing::warn!(error = %e, "no directory for sandbox reports: limit hits are not counted");
            })
            .ok();
        ReportDir {
            path,
            next: AtomicU64::new(0),
        }
    }
}

impl Drop for ReportDir {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

fn make_private_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let mut bits = [0u8; 8];
    getrandom::fill(&mut bits).map_err(|e| std::io::Error::other(e.to_string()))?;
    let name = format!(
        "moat-sandbox-reports-{}-{:016x}",
        std::process::id(),
        u64::from_le_bytes(bits)
    );
    let path = std::env::temp_dir().join(name);
    std::fs::DirBuilder::new().mode(0o700).create(&path)?;
    Ok(path)
}

impl ReportDir {
    /// A new file name in the directory, `None` if there is no directory.
    pub(crate) fn next_file(&self) -> Option<PathBuf> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        Some(self.path.as_ref()?.join(format!("{n}.json")))
    }
}
