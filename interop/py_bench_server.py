#!/usr/bin/env python3
"""The Python SDK's bench server for `moat-bench all` (benches/): the same tools as the Rust
bench servers (benches/src/bin/moat_bench_server.rs), written the way the SDK's own
documentation writes a server (`MCPServer`, formerly FastMCP, tools from typed functions).

Usage:
    interop/.venv/bin/python interop/py_bench_server.py [--catalog] [--http ADDR [--json-response] [--stateless]]

Tools: `echo` (answers its `message`), `echo_progress` (one progress notification when the
request asks for progress, then the echo), `add` (two integers). `--catalog` adds 100 tools
shaped like `moat_bench::fixtures::tool` (title, description, three parameters, read-only
annotations; each answers "ok") and the text resource `bench://blob`: 1 MiB of ASCII
letters. Without `--http` it speaks MCP on stdio and exits when stdin closes. With
`--http 127.0.0.1:0` it serves Streamable HTTP at /mcp on that address (port 0: any free
port) and prints `listening on http://ADDR/mcp` as its first line on stdout once the socket
is bound. `--json-response` answers plain requests with one JSON body instead of an SSE
stream; `--stateless` keeps no sessions.
"""

import sys
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

CATALOG_TOOLS = 100
BLOB_URI = "bench://blob"
BLOB_BYTES = 1 << 20


def blob_text() -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return (letters * (BLOB_BYTES // len(letters) + 1))[:BLOB_BYTES]


def catalog_tool(i: int):  # noqa: ANN201 - the SDK reads the signature
    async def tool(
        path: Annotated[str, Field(description=f"Path of the file tool {i} works on")],
        limit: Annotated[int | None, Field(ge=0, description="Most lines to return")] = None,
        recursive: bool = False,
    ) -> str:
        return "ok"

    return tool


def build(catalog: bool) -> MCPServer:
    server = MCPServer("py-bench-server")

    @server.tool(description="Echo the message back")
    async def echo(message: str) -> str:
        return message

    @server.tool(description="Report progress once, then echo the message back")
    async def echo_progress(message: str, ctx: Context) -> str:
        await ctx.report_progress(1.0, 1.0)
        return message

    @server.tool(description="Add two integers")
    async def add(a: int, b: int) -> int:
        return a + b

    if catalog:
        for i in range(CATALOG_TOOLS):
            server.add_tool(
                catalog_tool(i),
                name=f"tool_{i:02}",
                title=f"Tool number {i}",
                description=f"Tool {i} of the benchmark fixture: reads a file and returns some of its lines, "
                "with enough prose to look like a real description.",
                annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
            )
        text = blob_text()

        @server.resource(BLOB_URI, name="blob", mime_type="text/plain")
        def blob() -> str:
            return text

    return server


def serve_http(server: MCPServer, addr: str, json_response: bool, stateless: bool) -> None:
    import socket

    import anyio
    import uvicorn

    host, _, port = addr.rpartition(":")
    app = server.streamable_http_app(json_response=json_response, stateless_http=stateless, host=host)
    # IPPROTO_TCP named, as uvicorn's own bind does: asyncio sets TCP_NODELAY only on
    # sockets that say they are TCP, and without it every keep-alive answer waits ~40 ms.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    bound = sock.getsockname()
    print(f"listening on http://{bound[0]}:{bound[1]}/mcp", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def main() -> None:
    args = sys.argv[1:]
    server = build("--catalog" in args)
    if "--http" in args:
        at = args.index("--http")
        if at + 1 >= len(args):
            sys.stderr.write("py_bench_server: --http needs an address, e.g. 127.0.0.1:0\n")
            sys.exit(2)
        serve_http(server, args[at + 1], "--json-response" in args, "--stateless" in args)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
