//! The floor of every round trip: read a line from stdin, write it to stdout, flush (each line).
//! Nothing else, so a round trip through it costs two pipe hops and two wake-ups.

use std::io::{BufRead, Write};

fn main() {
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, stdin);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if stdout.write_all(&line).is_err() {
            return;
        }
        if stdout.flush().is_err() {
            return;
        }
    }
}
