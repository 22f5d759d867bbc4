#!/usr/bin/env python3
"""A tiny MCP server (Python SDK `MCPServer`, formerly FastMCP) whose tool definitions
come from outside, for the gateway tests (crates/moat-cli/tests/gateway*.rs).

Usage:
    interop/.venv/bin/python py_mutable_server.py

Its tools are read at start-up from the environment variable MOAT_TEST_TOOLS: a JSON
list of {"name": ..., "description": ...}. Every tool takes one string argument,
`text`, and answers "NAME: TEXT". So a test can pin a tool, restart the server with
a changed description (a "rug pull"), or serve a description carrying hidden
instructions or invisible Unicode, and check what the gateway does with it.

Speaks MCP on stdio; exits when stdin closes.
"""

from __future__ import annotations

import json
import os
import sys


def tool_specs() -> list[dict[str, str]]:
    raw = os.environ.get("MOAT_TEST_TOOLS")
    if not raw:
        sys.stderr.write("py_mutable_server: set MOAT_TEST_TOOLS to a JSON list of {name, description}\n")
        sys.exit(2)
    specs = json.loads(raw)
    if not isinstance(specs, list) or not all(isinstance(s, dict) and "name" in s for s in specs):
        sys.stderr.write("py_mutable_server: MOAT_TEST_TOOLS must be a JSON list of {name, description}\n")
        sys.exit(2)
    return specs


def make_tool(name: str):  # noqa: ANN201 - the SDK reads the signature
    async def tool(text: str) -> str:
        return f"{name}: {text}"

    return tool


def main() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("moat-test-mutable")
    for spec in tool_specs():
        server.add_tool(make_tool(spec["name"]), name=spec["name"], description=spec.get("description", ""))
    server.run("stdio")


if __name__ == "__main__":
    main()
