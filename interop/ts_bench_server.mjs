#!/usr/bin/env node
// The TypeScript SDK's bench server for `moat-bench all` (benches/): the same tools as the
// Rust bench servers (benches/src/bin/moat_bench_server.rs), written the way the SDK's own
// documentation writes a server (`McpServer`, tools with zod argument shapes).
//
// Usage:
//   node interop/ts_bench_server.mjs [--catalog] [--http ADDR [--json-response] [--stateless]]
//
// Tools: `echo` (answers its `message`), `echo_progress` (one progress notification when the
// request asks for progress, then the echo), `add` (two integers). `--catalog` adds 100 tools
// shaped like `moat_bench::fixtures::tool` (title, description, three parameters, read-only
// annotations; each answers "ok") and the text resource `bench://blob`: 1 MiB of ASCII
// letters. Without `--http` it speaks MCP on stdio and exits when stdin closes. With
// `--http 127.0.0.1:0` it serves Streamable HTTP at /mcp on that address (port 0: any free
// port) on node:http, and prints `listening on http://ADDR/mcp` on stdout once bound.
// Sessions by default (a server and a transport per session, as the SDK's examples do);
// `--stateless`: a fresh server and transport per request, no sessions; `--json-response`:
// plain answers as one JSON body instead of an SSE stream.

import { randomUUID } from "node:crypto";
import http from "node:http";

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const CATALOG_TOOLS = 100;
const BLOB_URI = "bench://blob";
const BLOB_BYTES = 1 << 20;

const args = process.argv.slice(2);
const catalog = args.includes("--catalog");
const blob = catalog ? "abcdefghijklmnopqrstuvwxyz".repeat(BLOB_BYTES / 26 + 1).slice(0, BLOB_BYTES) : "";

function build() {
  const server = new McpServer({ name: "ts-bench-server", version: "0.0.0" });
  const text = (t) => ({ content: [{ type: "text", text: String(t) }] });
  server.registerTool(
    "echo",
    { description: "Echo the message back", inputSchema: { message: z.string() } },
    async ({ message }) => text(message),
  );
  server.registerTool(
    "echo_progress",
    { description: "Report progress once, then echo the message back", inputSchema: { message: z.string() } },
    async ({ message }, extra) => {
      const progressToken = extra._meta?.progressToken;
      if (progressToken !== undefined) {
        await extra.sendNotification({
          method: "notifications/progress",
          params: { progressToken, progress: 1, total: 1 },
        });
      }
      return text(message);
    },
  );
  server.registerTool(
    "add",
    { description: "Add two integers", inputSchema: { a: z.number().int(), b: z.number().int() } },
    async ({ a, b }) => text(a + b),
  );
  if (catalog) {
    for (let i = 0; i < CATALOG_TOOLS; i++) {
      server.registerTool(
        `tool_${String(i).padStart(2, "0")}`,
        {
          title: `Tool number ${i}`,
          description:
            `Tool ${i} of the benchmark fixture: reads a file and returns some of its lines, ` +
            "with enough prose to look like a real description.",
          inputSchema: {
            path: z.string().describe(`Path of the file tool ${i} works on`),
            limit: z.number().int().min(0).optional().describe("Most lines to return"),
            recursive: z.boolean().default(false),
          },
          annotations: { readOnlyHint: true, openWorldHint: false },
        },
        async () => text("ok"),
      );
    }
    server.registerResource("blob", BLOB_URI, { mimeType: "text/plain" }, async () => ({
      contents: [{ uri: BLOB_URI, mimeType: "text/plain", text: blob }],
    }));
  }
  return server;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function serveHttp(addr, enableJsonResponse, stateless) {
  const at = addr.lastIndexOf(":");
  const host = addr.slice(0, at);
  const port = Number(addr.slice(at + 1));
  const sessions = new Map();
  const fail = (res, status, message) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message } }));
  };
  const httpServer = http.createServer(async (req, res) => {
    try {
      const raw = req.method === "POST" ? await readBody(req) : "";
      const body = raw ? JSON.parse(raw) : undefined;
      if (stateless) {
        const server = build();
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse });
        res.on("close", () => {
          transport.close();
          server.close();
        });
        await server.connect(transport);
        await transport.handleRequest(req, res, body);
        return;
      }
      const id = req.headers["mcp-session-id"];
      let transport = id ? sessions.get(id) : undefined;
      if (!transport) {
        if (id || body?.method !== "initialize") {
          fail(res, id ? 404 : 400, id ? "unknown session" : "no session");
          return;
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          enableJsonResponse,
          onsessioninitialized: (sid) => sessions.set(sid, transport),
        });
        transport.onclose = () => {
          if (transport.sessionId) sessions.delete(transport.sessionId);
        };
        await build().connect(transport);
      }
      await transport.handleRequest(req, res, body);
    } catch (e) {
      if (!res.headersSent) fail(res, 500, String(e));
    }
  });
  // The harness keeps connections idle between its rounds; node's default (5 s) would close them.
  httpServer.keepAliveTimeout = 600_000;
  httpServer.listen(port, host, () => {
    const a = httpServer.address();
    process.stdout.write(`listening on http://${a.address}:${a.port}/mcp\n`);
  });
}

const httpAt = args.indexOf("--http");
if (httpAt >= 0) {
  if (!args[httpAt + 1]) {
    process.stderr.write("ts_bench_server: --http needs an address, e.g. 127.0.0.1:0\n");
    process.exit(2);
  }
  serveHttp(args[httpAt + 1], args.includes("--json-response"), args.includes("--stateless"));
} else {
  await build().connect(new StdioServerTransport());
}
