//! A throw-away cgroup per run, where one can be created: `pids.max` and the memory limit
//! (cgroup v2 where the controllers are delegated, v1 otherwise). Best effort: when no cgroup
//! can be made, the caller falls back to rlimits and says so.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// One controller's directory for this run.
#[derive(Debug)]
struct Dir {
    path: PathBuf,
    /// The file whose `max` count (v1 pids, v2) or `failcnt` (v1 memory) says the limit was hit.
    events: PathBuf,
    version: u8,
}

/// The cgroup directories of one run; removed (after killing what is left) on drop.
#[derive(Debug, Default)]
pub(crate) struct Cgroup {
    pids: Option<Dir>,
    memory: Option<Dir>,
    /// Directories (v2: one shared) to remove, deepest first.
    created: Vec<PathBuf>,
}

/// Where the current process sits in each hierarchy: (controllers, path).
fn own_cgroups() -> Vec<(String, String)> {
    let Ok(text) = fs::read_to_string("/proc/self/cgroup") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let _id = parts.next()?;
            Some((parts.next()?.to_string(), parts.next()?.to_string()))
        })
        .collect()
}

fn unique_name() -> String {
    format!(
        "moat-sandbox-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

impl Cgroup {
    /// Creates what it can for these limits. Never fails: what could not be made is `None`.
    pub(crate) fn create(pids: Option<u64>, memory: Option<u64>) -> Cgroup {
        let mut cg = Cgroup::default();
        if pids.is_none() && memory.is_none() {
            return cg;
        }
        let own = own_cgroups();
        let name = unique_name();
        // cgroup v1: a hierarchy per controller.
        for (controller, limit, file, events) in [
            ("pids", pids, "pids.max", "pids.events"),
            ("memory", memory, "memory.limit_in_bytes", "memory.failcnt"),
        ] {
            let Some(limit) = limit else { continue };
            let Some((_, path)) = own
                .iter()
                .find(|(c, _)| c.split(',').any(|c| c == controller))
            else {
                continue;
            };
            let base = Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(path.trim_start_matches('/'));
            let dir = base.join(&name);
            if fs::create_dir(&dir).is_err() {
                continue;
            }
            cg.created.push(dir.clone());
            if fs::write(dir.join(file), limit.to_string()).is_ok() {
                let d = Dir {
                    events: dir.join(events),
                    path: dir,
                    version: 1,
                };
                if controller == "pids" {
                    cg.pids = Some(d);
                } else {
                    cg.memory = Some(d);
                }
            }
        }
        if cg.pids.is_some() || cg.memory.is_some() {
            return cg;
        }
        // cgroup v2: one unified hierarchy, controllers enabled in the parent's subtree.
        let Some((_, path)) = own.iter().find(|(c, _)| c.is_empty()) else {
            return cg;
        };
        let root = Path::new("/sys/fs/cgroup");
        if !root.join("cgroup.controllers").exists() {
            return cg;
        }
        let parent = root.join(path.trim_start_matches('/'));
        let subtree = parent.join("cgroup.subtree_control");
        let enabled = |c: &str| {
            fs::read_to_string(&subtree)
                .map(|s| s.split_whitespace().any(|w| w == c))
                .unwrap_or(false)
        };
        for c in ["pids", "memory"] {
            if !enabled(c) {
                let _ = fs::write(&subtree, format!("+{c}"));
            }
        }
        let dir = parent.join(&name);
        if fs::create_dir(&dir).is_err() {
            return cg;
        }
        cg.created.push(dir.clone());
        if let Some(limit) = pids
            && enabled("pids")
            && fs::write(dir.join("pids.max"), limit.to_string()).is_ok()
        {
            cg.pids = Some(Dir {
                path: dir.clone(),
                events: dir.join("pids.events"),
                version: 2,
            });
        }
        if let Some(limit) = memory
            && enabled("memory")
            && fs::write(dir.join("memory.max"), limit.to_string()).is_ok()
        {
            let _ = fs::write(dir.join("memory.swap.max"), "0");
            cg.memory = Some(Dir {
                path: dir.clone(),
                events: dir.join("memory.events"),
                version: 2,
            });
        }
        cg
    }

    /// Whether `pids.max` is in force.
    pub(crate) fn has_pids(&self) -> bool {
        self.pids.is_some()
    }

    /// Whether the memory limit is in force.
    pub(crate) fn has_memory(&self) -> bool {
        self.memory.is_some()
    }

    /// The `cgroup.procs` files a run is moved into (by the zygote, or by itself).
    pub(crate) fn procs_files(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for d in [&self.pids, &self.memory].into_iter().flatten() {
            let f = d.path.join("cgroup.procs");
            if !out.contains(&f) {
                out.push(f);
            }
        }
        out
    }

    /// Whether `fork` failed on `pids.max` during the run.
    pub(crate) fn pids_hit(&self) -> bool {
        self.pids
            .as_ref()
            .is_some_and(|d| count(&d.events, "max") > 0)
    }

    /// Whether the memory limit was reached during the run.
    pub(crate) fn memory_hit(&self) -> bool {
        self.memory.as_ref().is_some_and(|d| {
            if d.version == 1 {
                fs::read_to_string(&d.events)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .unwrap_or(0)
                    > 0
            } else {
                count(&d.events, "oom_kill") > 0 || count(&d.events, "max") > 0
            }
        })
    }

    /// Kills every process still in the cgroup.
    pub(crate) fn kill_all(&self) {
        for _ in 0..50 {
            let mut any = false;
            for f in self.procs_files() {
                let Ok(text) = fs::read_to_string(&f) else {
                    continue;
                };
                for pid in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                        any = true;
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                    }
                }
            }
            if !any {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

/// The number after `key` in a flat-keyed file such as `pids.events`.
fn count(file: &Path, key: &str) -> u64 {
    fs::read_to_string(file)
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                let mut it = l.split_whitespace();
                (it.next() == Some(key)).then(|| it.next()?.parse().ok())?
            })
        })
        .unwrap_or(0)
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill_all();
        for dir in self.created.iter().rev() {
            // A cgroup is removable once its last process has been reaped; give it a moment.
            for _ in 0..50 {
                if fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}
