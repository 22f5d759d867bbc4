"""The Python SDK's client, accepting URL-mode elicitations and recording completions.

    interop/.venv/bin/python py_url_client.py URL MODE TOOL JSONARGS [TOOL JSONARGS ...]

Connects to the MCP server at URL over Streamable HTTP with the SDK's `mode=` MODE ("legacy":
the initialize handshake, 2025-11-25; "auto": 2026-07-28 when the server speaks it), calls
each TOOL with its JSON arguments in order, and accepts every URL-mode elicitation without
opening it (declining forms). After the calls it waits up to a few seconds for a
`notifications/elicitation/complete` of each elicitation it accepted.

Prints one JSON object: {"protocolVersion", "elicitations": [{"mode", "url",
"elicitationId"}], "completions": ["elicitationId", ...], "results": [text, ...]}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


async def run(url: str, mode: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import ElicitResult

    seen: list[dict[str, Any]] = []
    completions: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            return
        if getattr(message, "method", None) == "notifications/elicitation/complete":
            params = message.params.model_dump(by_alias=True, mode="json", exclude_none=True)
            completions.append(params.get("elicitationId"))

    async def answer(context: Any, params: Any) -> Any:
        record = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        entry = {"mode": record.get("mode", "form"), "url": record.get("url"),
                 "elicitationId": record.get("elicitationId")}
        seen.append(entry)
        return ElicitResult(action="accept" if entry["mode"] == "url" else "decline")

    client = Client(streamable_http_client(url), mode=mode, elicitation_callback=answer,
                    message_handler=on_message, read_timeout_seconds=30, cache=None)
    results: list[str] = []
    async with client:
        for tool, args in calls:
            result = await client.call_tool(tool, args)
            results.append("\n".join(getattr(c, "text", "") for c in result.content))
        wanted = {e["elicitationId"] for e in seen if e["elicitationId"]}
        for _ in range(30):
            if wanted <= set(completions):
                break
            await asyncio.sleep(0.1)
        return {"protocolVersion": client.protocol_version, "elicitations": seen,
                "completions": completions, "results": results}


def main() -> None:
    args = sys.argv[1:]
    if len(args) < 4 or len(args) % 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    calls = [(args[i], json.loads(args[i + 1])) for i in range(2, len(args), 2)]
    print(json.dumps(asyncio.run(run(args[0], args[1], calls))))


if __name__ == "__main__":
    main()
