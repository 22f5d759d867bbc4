//! One client over stdio, whichever SDK it is: moat's client (against moat's, the
//! TypeScript and the Python bench servers) or rmcp's (against rmcp's), with the workloads
//! of `moat-bench all` — a `tools/call` of `echo`, calls kept N in flight, `tools/list`
//! of the catalog, and a read of the 1 MiB resource. Each answer is checked, so a broken
//! peer fails its row instead of looking fast.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use moat::Client;

use crate::rmcp_side::{self, RmcpClient};
use crate::{BLOB_BYTES, BLOB_URI, CATALOG_TOOLS, moat_side};

/// A connected client.
pub enum StdioClient {
    /// moat's client (boxed: it is several times the size of rmcp's handle).
    Moat(Box<Client>),
    /// rmcp's client (`TokioChildProcess`).
    Rmcp(RmcpClient),
}

/// Which client to connect with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// moat's.
    Moat,
    /// rmcp's.
    Rmcp,
}

impl StdioClient {
    /// Launch `argv` and connect (one `echo` call warms the path).
    pub async fn connect(kind: ClientKind, argv: &[&str]) -> StdioClient {
        match kind {
            ClientKind::Moat => StdioClient::Moat(Box::new(moat_side::connect(argv).await)),
            ClientKind::Rmcp => StdioClient::Rmcp(rmcp_side::connect(argv).await),
        }
    }

    /// Which client, the revision agreed and the server's name, for the record.
    pub fn describe(&self) -> String {
        match self {
            StdioClient::Moat(c) => moat_side::describe(c),
            StdioClient::Rmcp(c) => rmcp_side::describe(c),
        }
    }

    /// One `tools/call` of `echo`.
    pub async fn call(&self) {
        match self {
            StdioClient::Moat(c) => moat_side::call(c).await,
            StdioClient::Rmcp(c) => rmcp_side::call(c).await,
        }
    }

    /// `total` calls of `echo`, `inflight` of them outstanding at any time (a new one goes
    /// out as each answer comes back); the time until the last answer.
    pub async fn pipelined(&self, inflight: usize, total: usize) -> Duration {
        let start = Instant::now();
        futures_util::stream::iter(0..total)
            .map(|_| self.call())
            .buffer_unordered(inflight.max(1))
            .collect::<Vec<()>>()
            .await;
        start.elapsed()
    }

    /// One `tools/list`; panics unless it holds the catalog.
    pub async fn list_tools(&self) {
        let n = match self {
            StdioClient::Moat(c) => c.list_tools(None).await.expect("tools/list").tools.len(),
            StdioClient::Rmcp(c) => c.list_tools(None).await.expect("tools/list").tools.len(),
        };
        assert!(
            n >= CATALOG_TOOLS,
            "tools/list gave {n} tools: is --catalog on?"
        );
    }

    /// One `resources/read` of the 1 MiB resource; panics unless all of it came back.
    pub async fn read_blob(&self) {
        let len = match self {
            StdioClient::Moat(c) => {
                let result = c.read_resource(BLOB_URI).await.expect("resources/read");
                match result.contents.first() {
                    Some(moat::types::ResourceContents::Text(t)) => t.text.len(),
                    _ => 0,
                }
            }
            StdioClient::Rmcp(c) => {
                let params = rmcp::model::ReadResourceRequestParams::new(BLOB_URI);
                let result = c.read_resource(params).await.expect("resources/read");
                match result.contents.first() {
                    Some(rmcp::model::ResourceContents::TextResourceContents { text, .. }) => {
                        text.len()
                    }
                    _ => 0,
                }
            }
        };
        assert_eq!(len, BLOB_BYTES, "resources/read gave {len} bytes");
    }
}
