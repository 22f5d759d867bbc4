#!/usr/bin/env python3
"""A tiny MCP server (Python SDK `MCPServer`) that asks its client for an LLM completion
whether or not the client declared sampling, for the gateway tests
(crates/moat-cli/tests/gateway_passthrough.rs): a gateway whose policy denies a server
sampling offers it none, and must still refuse, and record, a server that asks anyway.

Usage:
    interop/.venv/bin/python py_sampling_server.py

Its one tool, `ask_llm(prompt)`, sends `sampling/createMessage` with the prompt and answers
"sampled: TEXT" with the client's text, or "refused: MESSAGE" when the request fails.
Speaks MCP on stdio; exits when stdin closes.
"""

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import SamplingMessage, TextContent


def main() -> None:
    server = MCPServer("moat-test-sampling")

    @server.tool()
    async def ask_llm(prompt: str, ctx: Context) -> str:
        try:
            result = await ctx.session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
                max_tokens=20,
            )
        except Exception as e:  # noqa: BLE001 - the error is the answer
            return f"refused: {e}"
        content = result.content
        return f"sampled: {getattr(content, 'text', content)}"

    server.run("stdio")


if __name__ == "__main__":
    main()
