//! The processes under a pid, read from `/proc`: to find the server a gateway started,
//! to check that nothing is left unreaped, and to end everything a test started (servers
//! run in process groups of their own, so killing one group is not enough).

use std::collections::{BTreeSet, HashMap};

/// One process, as `/proc/PID/stat` and `/proc/PID/cmdline` describe it.
#[derive(Debug, Clone)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    /// `R`, `S`, `Z`, ... (`?` when unreadable).
    pub state: char,
    pub cmdline: Vec<String>,
}

/// Every process on the machine (those that vanish while being read are left out).
pub fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // PID (COMM) STATE PPID ...; COMM may hold spaces and parentheses.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|raw| {
                raw.split(|b| *b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        out.push(Proc {
            pid,
            ppid,
            state,
            cmdline,
        });
    }
    out
}

/// Every descendant of `root` (not `root` itself), parents before their children.
pub fn descendants(root: u32) -> Vec<Proc> {
    let all = processes();
    let mut children: HashMap<u32, Vec<&Proc>> = HashMap::new();
    for p in &all {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        for c in children.get(&pid).into_iter().flatten() {
            out.push((*c).clone());
            todo.push(c.pid);
        }
    }
    out
}

/// The direct children of `pid` (from `/proc/PID/task/*/children`: no scan of `/proc`).
pub fn children(pid: u32) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// `signal` to `pid`.
pub fn kill_pid(pid: u32, signal: i32) {
    // SAFETY: a plain syscall on a process the test started (or its descendant).
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

/// SIGKILL to the process group `pid` leads.
pub fn kill_group(pid: u32) {
    // SAFETY: a plain syscall on a process group the test started.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

/// SIGKILL to `root`'s process group, and to every descendant and the group it may lead
/// (a gateway's servers run in groups of their own).
pub fn kill_tree(root: u32) {
    let below = descendants(root);
    kill_group(root);
    for p in below.iter().rev() {
        kill_group(p.pid);
        kill_pid(p.pid, libc::SIGKILL);
    }
}
