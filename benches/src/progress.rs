//! The progress display of `moat-bench all`: on stderr, a bar redrawn in place when stderr
//! is a terminal, plain `[step/total] what` lines otherwise (logs, CI), so stdout stays
//! the table or the JSON alone.

use std::io::{IsTerminal, Write};
use std::time::Instant;

/// Counts steps towards a known total and shows where the run is.
pub struct Progress {
    total: usize,
    done: usize,
    tty: bool,
    start: Instant,
}

const WIDTH: usize = 30;

impl Progress {
    /// A display for `total` steps.
    pub fn new(total: usize) -> Progress {
        Progress {
            total: total.max(1),
            done: 0,
            tty: std::io::stderr().is_terminal(),
            start: Instant::now(),
        }
    }

    /// Start the next step, described by `what` (the previous one is counted done).
    pub fn step(&mut self, what: &str) {
        self.draw(what);
        self.done = (self.done + 1).min(self.total);
    }

    /// A line of its own (a skipped row, a warning), above the bar.
    pub fn note(&mut self, text: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K");
        }
        let _ = writeln!(err, "{text}");
    }

    /// Clear the bar and say how long it all took.
    pub fn finish(&mut self) {
        self.done = self.total;
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K");
        }
        let _ = writeln!(err, "done in {:.0} s", self.start.elapsed().as_secs_f64());
    }

    fn draw(&self, what: &str) {
        let secs = self.start.elapsed().as_secs();
        let mut err = std::io::stderr().lock();
        if self.tty {
            let filled = self.done * WIDTH / self.total;
            let _ = write!(
                err,
                "\r\x1b[2K[{}{}] {:>3}/{} {:>2}:{:02} {what}",
                "#".repeat(filled),
                "-".repeat(WIDTH - filled),
                self.done,
                self.total,
                secs / 60,
                secs % 60
            );
            let _ = err.flush();
        } else {
            let _ = writeln!(err, "[{}/{}] {what}", self.done + 1, self.total);
        }
    }
}
