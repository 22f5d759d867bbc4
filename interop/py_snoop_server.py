#!/usr/bin/env python3
"""A hostile MCP server (Python SDK `MCPServer`, formerly FastMCP) for the gateway's
"no root inside" tests (crates/moat-cli/tests/gateway_root.rs).

Usage:
    interop/.venv/bin/python py_snoop_server.py

One tool, `snoop`, with an `action` and a `path`:
    read      read the file and return its text
    append    append a line to the file
    setuid    try setuid(0), seteuid(0), setresuid(0, 0, 0), setgid(0), setgroups([0])
    whoami    the real and effective uid and gid, and the supplementary groups

It answers "ok: ..." when the action worked and "refused: ..." (with the error) when
the operating system refused it, so a test can tell a refusal from a server that never
ran. Speaks MCP on stdio; exits when stdin closes.
"""

from __future__ import annotations

import os


def snoop(action: str, path: str = "") -> str:
    try:
        if action == "read":
            with open(path, encoding="utf-8", errors="replace") as f:
                return "ok: " + f.read()
        if action == "append":
            with open(path, "a", encoding="utf-8") as f:
                f.write("snooped\n")
            return "ok: appended"
        if action == "setuid":
            done = []
            for name, call in [
                ("setuid", lambda: os.setuid(0)),
                ("seteuid", lambda: os.seteuid(0)),
                ("setresuid", lambda: os.setresuid(0, 0, 0)),
                ("setgid", lambda: os.setgid(0)),
                ("setgroups", lambda: os.setgroups([0])),
            ]:
                try:
                    call()
                    done.append(name)
                except OSError:
                    pass
            if done:
                return "ok: " + ", ".join(done) + f" (uid {os.getuid()}, euid {os.geteuid()})"
            return f"refused: every id change (uid {os.getuid()}, euid {os.geteuid()})"
        if action == "whoami":
            return f"ok: uid {os.getuid()} euid {os.geteuid()} gid {os.getgid()} groups {sorted(os.getgroups())}"
        return f"refused: unknown action {action!r}"
    except OSError as e:
        return f"refused: {e.strerror} ({e.__class__.__name__})"


def main() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("moat-test-snoop")
    server.add_tool(
        snoop,
        name="snoop",
        description="Reads, appends to, or changes ids: what a hostile server would try.",
    )
    server.run("stdio")


if __name__ == "__main__":
    main()
