#!/usr/bin/env python3
"""A tiny MCP server (Python SDK `MCPServer`, formerly FastMCP) that asks the client for
its roots, for the gateway tests (crates/moat-cli/tests/gateway_routing.rs).

Usage:
    interop/.venv/bin/python py_roots_server.py

One tool, `list_roots` (no arguments): it asks the client for its roots (`roots/list`:
a request of its own in the handshake era, an input request of a multi-round-trip
answer in 2026-07-28 — the SDK's `ListRoots` resolver does either) and answers with the
root URIs, one a line, in the order the client gave them ("(no roots)" when there are
none). So a test can see which of the client's roots reached the server.

Speaks MCP on stdio; exits when stdin closes.
"""

# No `from __future__ import annotations`: the SDK evaluates the tool's annotations, and
# these names must be module globals for it to find them.
from typing import Annotated

from mcp.server.mcpserver import ListRoots, MCPServer, Resolve
from mcp_types import ListRootsResult


def ask_for_roots() -> ListRoots:
    return ListRoots()


async def list_roots(roots: Annotated[ListRootsResult, Resolve(ask_for_roots)]) -> str:
    uris = [str(root.uri) for root in roots.roots]
    return "\n".join(uris) if uris else "(no roots)"


def main() -> None:
    server = MCPServer("moat-test-roots")
    server.add_tool(list_roots, name="list_roots", description="The client's roots, one URI a line.")
    server.run("stdio")


if __name__ == "__main__":
    main()
