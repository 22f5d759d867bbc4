//! Fuzz the server's whole read/dispatch path, in process, against the everything server.
//!
//! Input: the first byte picks how the connection starts, the rest is written to the server
//! as raw wire bytes (so the input's own newlines delimit the messages):
//!
//! | first byte | before the fuzz bytes                                         |
//! |------------|---------------------------------------------------------------|
//! | `0`        | nothing (pre-init state; modern-era `_meta` requests work)    |
//! | `1`        | `initialize` 2024-11-05 + `notifications/initialized`         |
//! | `2`        | `initialize` 2025-03-26 + `notifications/initialized` (batches) |
//! | `3`        | `initialize` 2025-06-18 + `notifications/initialized`         |
//! | `4`        | `initialize` 2025-11-25 + `notifications/initialized`         |
//! | other      | byte % 5, as above                                            |
//!
//! After the fuzz bytes (and a newline) comes a `ping` with an id never used before. Any
//! answer to it counts: a connection the input turned modern-era (a request with
//! `_meta["io.modelcontextprotocol/protocolVersion"]`) refuses `ping` by design, and that
//! refusal still shows the connection is serving.
//!
//! Asserted: nothing panics (a panic in any spawned task aborts the process too); every
//! line the server writes is valid JSON and a valid JSON-RPC message (or batch of them);
//! the final ping is answered (the connection keeps serving); and once we close our side,
//! the server closes its side too (the connection shuts down instead of hanging).
//!
//! The runtime runs on paused (virtual) time: the everything server's sleeps (50 ms
//! steps, 100 ms, 3 s ticker, 60 s request timeouts) and our own timeouts cost no wall
//! time, and a timeout that fires means the runtime went idle without an answer.
#![no_main]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use moat::Server;
use moat::transport::{Connection, Limits};
use moat_protocol::RequestId;
use moat_protocol::jsonrpc::{self, Message};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::runtime::Runtime;

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime")
    })
}

fn server() -> &'static Server {
    // The everything server keeps itself alive (its ticker holds a handle): one per process.
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(moat_servers::everything::server)
}

const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Virtual time to wait for the ping answer and for the close.
const PATIENCE: Duration = Duration::from_secs(120);
/// Virtual time to keep reading after the ping answer (the slowest tool sleeps 100 ms).
const LINGER: Duration = Duration::from_millis(250);

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let mode = match mode {
        b'0'..=b'4' => mode - b'0',
        other => other % 5,
    };
    runtime().block_on(run(mode, body));
});

fn prefix(mode: u8) -> String {
    if mode == 0 {
        return String::new();
    }
    let version = VERSIONS[usize::from(mode - 1)];
    format!(
        concat!(
            r#"{{"jsonrpc":"2.0","id":"moat-fuzz-init","method":"initialize","params":{{"#,
            r#""protocolVersion":"{}","capabilities":{{"sampling":{{}},"elicitation":{{}},"roots":{{"listChanged":true}}}},"#,
            r#""clientInfo":{{"name":"moat-fuzz","version":"0"}}}}}}"#,
            "\n",
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#,
            "\n"
        ),
        version
    )
}

async fn run(mode: u8, body: &[u8]) {
    static PINGS: AtomicU64 = AtomicU64::new(0);
    let ping_id = format!(
        "moat-fuzz-final-ping-{}",
        PINGS.fetch_add(1, Ordering::Relaxed)
    );

    let (client, server_io) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server_io);
    let conn = Connection::from_lines(BufReader::new(server_read), server_write, Limits::default());
    let peer = server().start(conn);

    let mut input = prefix(mode).into_bytes();
    input.extend_from_slice(body);
    input.push(b'\n');
    input.extend_from_slice(
        format!(r#"{{"jsonrpc":"2.0","id":"{ping_id}","method":"ping"}}"#).as_bytes(),
    );
    input.push(b'\n');

    let (client_read, mut client_write) = tokio::io::split(client);
    // Write concurrently with reading: the server's answers must be drained or it blocks.
    // The write half is handed back, still open, so the server does not see EOF early.
    let writer = tokio::spawn(async move {
        client_write.write_all(&input).await.expect("the server reads everything");
        client_write.flush().await.expect("flush");
        client_write
    });

    let mut lines = BufReader::new(client_read).lines();
    let mut answered = false;
    while !answered {
        let line = match tokio::time::timeout(PATIENCE, lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => panic!("the server closed the connection before answering the ping"),
            Ok(Err(e)) => panic!("reading from the server failed: {e}"),
            Err(_) => panic!("the final ping was not answered (the connection stopped serving)"),
        };
        answered = check_output(&line, &ping_id);
    }

    // Let the slower handlers finish and check what they write too.
    let linger = tokio::time::sleep(LINGER);
    tokio::pin!(linger);
    loop {
        tokio::select! {
            _ = &mut linger => break,
            next = lines.next_line() => match next {
                Ok(Some(line)) => { check_output(&line, &ping_id); }
                Ok(None) => panic!("the server closed the connection on its own"),
                Err(e) => panic!("reading from the server failed: {e}"),
            },
        }
    }

    // Close our side; the server must notice and close its side.
    let mut client_write = writer.await.expect("the writer task");
    let _ = client_write.shutdown().await;
    drop(client_write);
    loop {
        match tokio::time::timeout(PATIENCE, lines.next_line()).await {
            Ok(Ok(Some(line))) => {
                check_output(&line, &ping_id);
            }
            Ok(Ok(None)) | Ok(Err(_)) => break,
            Err(_) => panic!("the server did not close the connection after the client did"),
        }
    }
    if tokio::time::timeout(PATIENCE, peer.closed()).await.is_err() {
        panic!("the peer did not shut down after the connection closed");
    }
}

/// Check one line the server wrote; returns whether it is the answer to the final ping.
fn check_output(line: &str, ping_id: &str) -> bool {
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(line) {
        panic!("the server wrote invalid JSON ({e}): {line}");
    }
    if jsonrpc::is_batch(line) {
        let items = match Message::parse_batch(line) {
            Ok(items) => items,
            Err(e) => panic!("the server wrote an invalid batch ({e}): {line}"),
        };
        for item in items {
            if let Err(e) = item {
                panic!("the server wrote an invalid message in a batch ({e}): {line}");
            }
        }
        return false;
    }
    match Message::parse(line) {
        Ok(Message::Response(r)) => {
            if r.id == RequestId::from(ping_id) {
                assert_eq!(r.result.get(), "{}", "ping answered with {line}");
                return true;
            }
            false
        }
        // A refusal is an answer too (modern era: no `ping`; see the module docs).
        Ok(Message::Error(e)) => e.id.as_ref() == Some(&RequestId::from(ping_id)),
        Ok(_) => false,
        Err(e) => panic!("the server wrote an invalid JSON-RPC message ({e}): {line}"),
    }
}
