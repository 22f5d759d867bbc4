#!/usr/bin/env python3
"""A tiny MCP server (Python SDK `MCPServer`) that stops answering without exiting, for the
gateway's health-check test (crates/moat-cli/tests/gateway_health.rs).

Usage:
    MOAT_TEST_STARTS=FILE [MOAT_TEST_HANG_STARTS=N] interop/.venv/bin/python py_hang_server.py

Every start appends one line, "pid PID", to FILE, so a test can count how often a
supervisor started it; the start's number K is the count of lines then. One tool,
`echo(text)`, answers "start K: TEXT".

On the first N starts (MOAT_TEST_HANG_STARTS, default 1), once the answer to its first
tools/call is written, the server hangs: its event loop sleeps, so it reads nothing more
from stdin and answers nothing (not `ping`, not `server/discover`), yet stays alive until
it is killed (SIGTERM's default action). Later starts behave.

Speaks MCP on stdio; exits when stdin closes (unless it hangs).
"""

from __future__ import annotations

import os
import sys
import time


def record_start() -> int:
    path = os.environ.get("MOAT_TEST_STARTS")
    if not path:
        sys.stderr.write("py_hang_server: set MOAT_TEST_STARTS to a file to count starts in\n")
        sys.exit(2)
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"pid {os.getpid()}\n")
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def hang(start: int) -> None:
    sys.stderr.write(f"py_hang_server: start {start}: hanging (no longer reading stdin)\n")
    sys.stderr.flush()
    while True:
        time.sleep(3600)


def main() -> None:
    import asyncio

    from mcp.server.mcpserver import MCPServer

    start = record_start()
    hangs = start <= int(os.environ.get("MOAT_TEST_HANG_STARTS", "1"))
    answered = 0
    server = MCPServer("moat-test-hang")

    @server.tool(description="Echoes TEXT, prefixed with which start of the server answered.")
    async def echo(text: str) -> str:
        nonlocal answered
        answered += 1
        if hangs and answered == 1:
            # Block the whole event loop a moment from now: the answer below is written
            # first (the writer task is ready at once), then nothing is read or answered.
            asyncio.get_running_loop().call_later(0.5, hang, start)
        return f"start {start}: {text}"

    server.run("stdio")


if __name__ == "__main__":
    main()
