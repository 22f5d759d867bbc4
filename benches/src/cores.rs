//! Splitting the machine's cores between the servers and the load generator
//! (`moat-bench http --split-cores`).
//!
//! On a small machine the load generator shares the cores with the server it loads, so a
//! throughput ratio between two servers is squeezed toward 1: each call costs the server's
//! CPU plus the generator's, and the generator's part is the same for both. With the cores
//! split, each side has its own, and the servers' ratio is what the servers do.

use std::io;

use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// Which cores the servers run on and which the load generator keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    pub server: Vec<usize>,
    pub generator: Vec<usize>,
}

impl Split {
    /// The cores this process may use, halved: the servers get the upper half (the smaller
    /// one on an odd count: the generator must keep up with the fastest server), the load
    /// generator the rest. `None` with fewer than two cores.
    pub fn of_this_process() -> io::Result<Option<Split>> {
        Ok(Split::halves(&this_threads_cores()?))
    }

    fn halves(cores: &[usize]) -> Option<Split> {
        if cores.len() < 2 {
            return None;
        }
        let (generator, server) = cores.split_at(cores.len() - cores.len() / 2);
        Some(Split {
            server: server.to_vec(),
            generator: generator.to_vec(),
        })
    }
}

/// The cores the calling thread may run on.
fn this_threads_cores() -> io::Result<Vec<usize>> {
    let set = sched_getaffinity(None)?;
    Ok((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// Restricts the calling thread to `cores`; threads and processes it starts afterwards
/// inherit the restriction. Panics, naming `--split-cores`, if the system refuses.
pub fn pin_this_thread(cores: &[usize]) {
    let mut set = CpuSet::new();
    for &c in cores {
        set.set(c);
    }
    if let Err(e) = sched_setaffinity(None, &set) {
        panic!(
            "--split-cores: cannot pin to cores {}: {e}",
            describe(cores)
        );
    }
}

/// `0-3` or `0,2,5`: a list of cores as people write them.
pub fn describe(cores: &[usize]) -> String {
    let contiguous = cores.windows(2).all(|w| w[1] == w[0] + 1);
    match cores {
        [] => "none".to_owned(),
        [one] => one.to_string(),
        [first, .., last] if contiguous => format!("{first}-{last}"),
        _ => cores
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_get_the_upper_half_and_the_generator_keeps_the_rest() {
        assert_eq!(Split::halves(&[0]), None);
        let two = Split::halves(&[0, 1]).expect("two cores");
        assert_eq!((two.server, two.generator), (vec![1], vec![0]));
        let three = Split::halves(&[0, 1, 2]).expect("three cores");
        assert_eq!((three.server, three.generator), (vec![2], vec![0, 1]));
        let gaps = Split::halves(&[1, 3, 4, 6]).expect("four cores");
        assert_eq!((gaps.server, gaps.generator), (vec![4, 6], vec![1, 3]));
    }

    #[test]
    fn core_lists_read_as_people_write_them() {
        assert_eq!(describe(&[]), "none");
        assert_eq!(describe(&[1]), "1");
        assert_eq!(describe(&[0, 1, 2, 3]), "0-3");
        assert_eq!(describe(&[0, 2, 5]), "0,2,5");
    }

    #[test]
    fn a_pinned_thread_reports_its_cores() {
        let Some(split) = Split::of_this_process().expect("affinity") else {
            return;
        };
        std::thread::spawn(move || {
            pin_this_thread(&split.server);
            assert_eq!(this_threads_cores().expect("affinity"), split.server);
        })
        .join()
        .expect("the pinned thread");
    }
}
