#!/usr/bin/env node
// MCP client built on the official TypeScript SDK: by default the 1.x line
// (@modelcontextprotocol/sdk), or with --sdk v2 the 2.x line
// (@modelcontextprotocol/client), which also speaks 2026-07-28.
//
// Usage:
//   node ts_client.mjs [options] -- CMD [ARGS...]
//   node ts_client.mjs [options] --url URL [--transport streamable|sse]
//
// Spawns CMD over stdio, or connects to the HTTP server at URL with the SDK's
// own HTTP transport (Streamable HTTP by default; --transport sse: the legacy
// 2024-11-05 HTTP+SSE transport, URL being the SSE endpoint). Connects
// (initialize handshake, or server/discover with --sdk v2), then runs a fixed
// script and prints ONE JSON object on stdout:
//
//   { "client": {...}, "protocolVersion": "...", "serverInfo": {...},
//     "capabilities": {...}, "instructions": ...,
//     "tools": ["name", ...], "toolDetails": [Tool, ...],
//     "resources": [Resource, ...] | null, "resourceTemplates": [...] | null,
//     "prompts": [Prompt, ...] | null,
//     "calls":   [{ "name", "arguments", "result": CallToolResult }, ...],
//     "reads":   [{ "uri", "result": ReadResourceResult }, ...],
//     "gets":    [{ "name", "arguments", "result": GetPromptResult }, ...] }
//
// Lists are null when the server does not advertise the capability.
// A tool result with isError:true is reported, not treated as a failure;
// anything else that goes wrong (spawn, handshake, JSON-RPC error, schema
// validation by the SDK, timeout) prints "ts_client: error: ..." on stderr
// and exits 1 (2 for usage errors).
//
// Options:
//   --sdk v1|v2            which SDK line to use (default v1)
//   --protocol REV|auto    pin the revision and fail unless the server agrees
//                          to exactly REV. A handshake revision (2024-11-05 ..
//                          2025-11-25) is offered in initialize; 2026-07-28
//                          (v2 only) pins the stateless era via server/discover.
//                          auto / absent: v1 offers its latest handshake
//                          revision; v2 probes server/discover and falls back
//                          to initialize (versionNegotiation mode 'auto').
//   --call NAME JSONARGS   call a tool (repeatable, in order)
//   --read URI             read a resource (repeatable)
//   --prompt NAME JSONARGS get a prompt (repeatable)
//   --sample TEXT          declare sampling and answer every sampling/createMessage
//                          with an assistant text message TEXT (model "ts-client");
//                          the output gets "samplings": each request's messages
//   --elicit-accept JSON   declare elicitation (form mode) and accept every request
//                          with the content JSON; the output gets "elicitations":
//                          each request's message
//   --timeout SECONDS      overall deadline (default 60)
//   --url URL              connect over HTTP instead of spawning a command
//   --transport KIND       with --url: streamable (default; Streamable HTTP,
//                          URL is the MCP endpoint) or sse (legacy HTTP+SSE,
//                          URL is the SSE endpoint, e.g. http://HOST/sse)
//
// Over HTTP the output also has "transport" ("streamable" | "sse") and, for
// Streamable HTTP, "sessionId" (the Mcp-Session-Id the server assigned, null
// when there is none, as in 2026-07-28). Over stdio both are absent.

import { readFileSync } from 'node:fs';

const SDKS = {
  v1: {
    pkg: '@modelcontextprotocol/sdk',
    load: async () => {
      const [{ Client }, stdio, streamable, sse, types] = await Promise.all([
        import('@modelcontextprotocol/sdk/client/index.js'),
        import('@modelcontextprotocol/sdk/client/stdio.js'),
        import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
        import('@modelcontextprotocol/sdk/client/sse.js'),
        import('@modelcontextprotocol/sdk/types.js'),
      ]);
      return { Client, ...stdio, ...streamable, ...sse, ...types, modern: [] };
    },
  },
  v2: {
    pkg: '@modelcontextprotocol/client',
    load: async () => {
      const [client, stdio] = await Promise.all([
        import('@modelcontextprotocol/client'),
        import('@modelcontextprotocol/client/stdio'),
      ]);
      // SUPPORTED_PROTOCOL_VERSIONS lists the handshake era only; the
      // stateless revisions are negotiated through server/discover.
      // StreamableHTTPClientTransport and SSEClientTransport come from the
      // main entry point.
      return { ...client, ...stdio, modern: ['2026-07-28'] };
    },
  },
};

const USAGE =
  'usage: node ts_client.mjs [--sdk v1|v2] [--protocol REV|auto] [--call NAME JSON]... ' +
  '[--read URI]... [--prompt NAME JSON]... [--timeout SECS] ' +
  '(-- CMD [ARGS...] | --url URL [--transport streamable|sse])';

// The spawned server: its transport is closed (stdin EOF, then signals) and
// the child killed if still alive before we exit, so no server outlives us.
let activeTransport = null;
let serverProcess = null;

function die(msg, code = 1) {
  process.stderr.write(`ts_client: error: ${msg}\n`);
  const t = activeTransport;
  activeTransport = null;
  const finish = () => {
    const child = serverProcess;
    if (child && child.exitCode === null && child.signalCode === null) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
    process.exit(code);
  };
  if (!t) finish();
  const bail = setTimeout(finish, 1500);
  Promise.resolve()
    .then(() => t.close())
    .catch(() => {})
    .finally(() => {
      clearTimeout(bail);
      finish();
    });
}

function usage(msg) {
  die(`${msg}\n${USAGE}`, 2);
}

function parseJsonArg(flag, text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    usage(`${flag}: invalid JSON ${JSON.stringify(text)}: ${e.message}`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) usage(`${flag}: arguments must be a JSON object`);
  return v;
}

function parseArgs(argv) {
  const opts = {
    sdk: 'v1',
    protocol: null,
    calls: [],
    reads: [],
    prompts: [],
    timeout: 60,
    command: null,
    args: [],
    url: null,
    transport: null,
    sample: null,
    elicit: null,
  };
  let i = 0;
  const need = (flag, n) => {
    if (i + n >= argv.length) usage(`${flag} needs ${n} value(s)`);
  };
  for (; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      i++;
      break;
    }
    switch (a) {
      case '--sdk':
        need(a, 1);
        opts.sdk = argv[++i];
        if (!SDKS[opts.sdk]) usage('--sdk must be v1 or v2');
        break;
      case '--protocol':
        need(a, 1);
        opts.protocol = argv[++i];
        break;
      case '--call':
        need(a, 2);
        opts.calls.push({ name: argv[i + 1], arguments: parseJsonArg(a, argv[i + 2]) });
        i += 2;
        break;
      case '--read':
        need(a, 1);
        opts.reads.push(argv[++i]);
        break;
      case '--prompt':
        need(a, 2);
        opts.prompts.push({ name: argv[i + 1], arguments: parseJsonArg(a, argv[i + 2]) });
        i += 2;
        break;
      case '--sample':
        need(a, 1);
        opts.sample = argv[++i];
        break;
      case '--elicit-accept':
        need(a, 1);
        opts.elicit = parseJsonArg(a, argv[++i]);
        break;
      case '--timeout':
        need(a, 1);
        opts.timeout = Number(argv[++i]);
        if (!(opts.timeout > 0)) usage('--timeout must be a positive number of seconds');
        break;
      case '--url':
        need(a, 1);
        opts.url = argv[++i];
        break;
      case '--transport':
        need(a, 1);
        opts.transport = argv[++i];
        if (opts.transport !== 'streamable' && opts.transport !== 'sse') {
          usage('--transport must be streamable or sse');
        }
        break;
      case '-h':
      case '--help':
        process.stdout.write(`${USAGE}\n(see the header of ts_client.mjs)\n`);
        process.exit(0);
        break;
      default:
        usage(`unknown option ${JSON.stringify(a)} (put the server command after --)`);
    }
  }
  if (opts.protocol === 'auto') opts.protocol = null;
  if (opts.url !== null) {
    if (i < argv.length) usage('give either --url or a server command after --, not both');
    try {
      opts.url = new URL(opts.url);
    } catch (e) {
      usage(`--url: invalid URL ${JSON.stringify(opts.url)}: ${e.message}`);
    }
    opts.transport ??= 'streamable';
    return opts;
  }
  if (opts.transport !== null) usage('--transport needs --url');
  if (i >= argv.length) usage('missing server command after -- (or --url URL)');
  opts.command = argv[i];
  opts.args = argv.slice(i + 1);
  return opts;
}

function sdkVersion(pkgName) {
  try {
    const pkg = new URL(`./node_modules/${pkgName}/package.json`, import.meta.url);
    return JSON.parse(readFileSync(pkg, 'utf8')).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

// The 1.x SDK always offers LATEST_PROTOCOL_VERSION and does not expose the
// negotiated revision, so wrap the transport: rewrite the initialize request's
// protocolVersion (when pinned) and remember the server's answer.
class HandshakeTap {
  constructor(inner, pin) {
    this.inner = inner;
    this.pin = pin;
    this.initId = undefined;
    this.negotiated = undefined;
    inner.onmessage = (msg, extra) => {
      if (this.initId !== undefined && msg && msg.id === this.initId && msg.result) {
        this.negotiated = msg.result.protocolVersion;
      }
      this.onmessage?.(msg, extra);
    };
    inner.onclose = () => this.onclose?.();
    inner.onerror = (e) => this.onerror?.(e);
  }
  start() {
    return this.inner.start();
  }
  send(msg, options) {
    if (msg && msg.method === 'initialize') {
      this.initId = msg.id;
      if (this.pin) msg = { ...msg, params: { ...msg.params, protocolVersion: this.pin } };
    }
    return this.inner.send(msg, options);
  }
  close() {
    return this.inner.close();
  }
  get sessionId() {
    return this.inner.sessionId;
  }
  setProtocolVersion(v) {
    this.inner.setProtocolVersion?.(v);
  }
}

async function listAll(fn, key) {
  const out = [];
  let cursor;
  for (let page = 0; page < 100; page++) {
    const res = await fn(cursor === undefined ? {} : { cursor });
    out.push(...(res[key] ?? []));
    cursor = res.nextCursor;
    if (!cursor) return out;
  }
  throw new Error(`${key}: more than 100 pages, giving up`);
}

async function step(what, fn) {
  try {
    return await fn();
  } catch (e) {
    const code = e && e.code !== undefined ? ` (code ${e.code})` : '';
    throw new Error(`${what} failed${code}: ${e && e.message ? e.message : String(e)}`);
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const timer = setTimeout(() => die(`timed out after ${opts.timeout}s`), opts.timeout * 1000);
  timer.unref();

  const sdk = SDKS[opts.sdk];
  let api;
  try {
    api = await sdk.load();
  } catch (e) {
    die(`cannot load ${sdk.pkg} (${e.message}); run .ci/run or npm install in interop/`);
  }
  const version = sdkVersion(sdk.pkg);
  const rev = opts.protocol;
  const pinModern = rev !== null && api.modern.includes(rev);
  if (rev !== null && !pinModern && !api.SUPPORTED_PROTOCOL_VERSIONS.includes(rev)) {
    die(
      `protocol revision ${rev} is not supported by ${sdk.pkg} ${version} ` +
        `(supported: ${[...api.SUPPORTED_PROTOCOL_VERSIONS, ...api.modern].join(', ')})`,
      2,
    );
  }

  let inner;
  let target;
  if (opts.url !== null) {
    target = `${opts.url.href} (${opts.transport})`;
    inner =
      opts.transport === 'sse'
        ? new api.SSEClientTransport(opts.url)
        : new api.StreamableHTTPClientTransport(opts.url);
  } else {
    target = opts.command;
    inner = new api.StdioClientTransport({
      command: opts.command,
      args: opts.args,
      env: { ...api.getDefaultEnvironment(), ...process.env },
      stderr: 'inherit',
    });
    const start = inner.start.bind(inner);
    inner.start = async () => {
      await start();
      serverProcess = inner._process ?? null; // private, but the only handle on the child
    };
  }
  activeTransport = inner;
  const clientOptions = { capabilities: {} };
  let transport = inner;
  let tap = null;
  if (opts.sdk === 'v1') {
    // v1 has no knob for the offered revision and does not expose the
    // negotiated one: tap the transport.
    transport = tap = new HandshakeTap(inner, rev);
  } else if (pinModern) {
    clientOptions.versionNegotiation = { mode: { pin: rev } };
  } else if (rev !== null) {
    // The legacy handshake offers the first handshake-era entry of this list.
    clientOptions.versionNegotiation = { mode: 'legacy' };
    clientOptions.supportedProtocolVersions = [rev];
  } else {
    clientOptions.versionNegotiation = { mode: 'auto' };
  }
  if (opts.sample !== null) clientOptions.capabilities.sampling = {};
  if (opts.elicit !== null) clientOptions.capabilities.elicitation = { form: {} };
  const client = new api.Client({ name: 'moat-interop-ts-client', version }, clientOptions);
  // What the server asks of the client, answered as the options say and recorded.
  const samplings = [];
  const elicitations = [];
  const onSample = async (request) => {
    samplings.push(request.params.messages);
    return { role: 'assistant', content: { type: 'text', text: opts.sample }, model: 'ts-client' };
  };
  const onElicit = async (request) => {
    elicitations.push(request.params.message);
    return { action: 'accept', content: opts.elicit };
  };
  // v1 names a request by its schema, v2 by its method.
  const handle = (schema, method, handler) =>
    opts.sdk === 'v1' ? client.setRequestHandler(api[schema], handler) : client.setRequestHandler(method, handler);
  if (opts.sample !== null) handle('CreateMessageRequestSchema', 'sampling/createMessage', onSample);
  if (opts.elicit !== null) handle('ElicitRequestSchema', 'elicitation/create', onElicit);
  let closing = false;
  client.onerror = (e) => {
    // Closing an HTTP transport aborts its open requests (e.g. the SSE GET); not news.
    if (closing) return;
    process.stderr.write(`ts_client: transport error: ${e && e.message ? e.message : e}\n`);
  };

  const reqOpts = { timeout: opts.timeout * 1000 };
  await step(`connect (${target})`, () => client.connect(transport, reqOpts));

  const negotiated = tap ? tap.negotiated : client.getNegotiatedProtocolVersion();
  if (rev && negotiated !== rev) {
    throw new Error(`requested protocol ${rev} but server negotiated ${negotiated}`);
  }
  const caps = client.getServerCapabilities() ?? {};
  const out = {
    client: { sdk: sdk.pkg, version, latestProtocolVersion: api.LATEST_PROTOCOL_VERSION },
    protocolVersion: negotiated,
    serverInfo: client.getServerVersion() ?? null,
    capabilities: caps,
    instructions: client.getInstructions() ?? null,
    tools: null,
    toolDetails: null,
    resources: null,
    resourceTemplates: null,
    prompts: null,
    calls: [],
    reads: [],
    gets: [],
  };
  if (opts.url !== null) {
    out.transport = opts.transport;
    if (opts.transport === 'streamable') out.sessionId = inner.sessionId ?? null;
  }

  if (caps.tools) {
    out.toolDetails = await step('tools/list', () => listAll((p) => client.listTools(p, reqOpts), 'tools'));
    out.tools = out.toolDetails.map((t) => t.name);
  }
  if (caps.resources) {
    out.resources = await step('resources/list', () => listAll((p) => client.listResources(p, reqOpts), 'resources'));
    out.resourceTemplates = await step('resources/templates/list', () =>
      listAll((p) => client.listResourceTemplates(p, reqOpts), 'resourceTemplates'),
    );
  }
  if (caps.prompts) {
    out.prompts = await step('prompts/list', () => listAll((p) => client.listPrompts(p, reqOpts), 'prompts'));
  }
  if (opts.sample !== null) out.samplings = samplings;
  if (opts.elicit !== null) out.elicitations = elicitations;
  for (const c of opts.calls) {
    const params = { name: c.name, arguments: c.arguments };
    const result = await step(`tools/call ${c.name}`, () =>
      opts.sdk === 'v1' ? client.callTool(params, undefined, reqOpts) : client.callTool(params, reqOpts),
    );
    out.calls.push({ name: c.name, arguments: c.arguments, result });
  }
  for (const uri of opts.reads) {
    const result = await step(`resources/read ${uri}`, () => client.readResource({ uri }, reqOpts));
    out.reads.push({ uri, result });
  }
  for (const p of opts.prompts) {
    const result = await step(`prompts/get ${p.name}`, () =>
      client.getPrompt({ name: p.name, arguments: p.arguments }, reqOpts),
    );
    out.gets.push({ name: p.name, arguments: p.arguments, result });
  }

  closing = true;
  await client.close().catch(() => {});
  activeTransport = null;
  clearTimeout(timer);
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(
  () => process.exit(0),
  (e) => die(e && e.message ? e.message : String(e)),
);
