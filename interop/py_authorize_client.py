"""The Python SDK's client, sent to authorize by a URL-mode elicitation.

    interop/.venv/bin/python py_authorize_client.py URL TOKEN TOOL USER [MODE]

Connects to the MCP server at URL over Streamable HTTP with `Authorization: Bearer TOKEN`
(the SDK's own negotiation: 2026-07-28 when the server speaks it), calls TOOL with no
arguments, and answers every URL-mode elicitation by "opening" its link: a browser of a
few lines that follows redirects by hand, keeps cookies, signs in as USER at the test
issuer's login (`/_test/interaction/UID?user=USER`, interop/oidc_issuer.mjs) and ends at
wherever the authorization server redirects (the gateway's callback), then accepts.
MODE is the SDK's `mode=`: "auto" (the default) or "legacy" (the initialize handshake,
2025-11-25), where the server may tell it the authorization ended with
`notifications/elicitation/complete`.

Prints one JSON object: {"protocolVersion", "elicitations": [{"mode", "url",
"elicitationId", "message", "landed"}], "notifications": [{"method", "params"}], "result"}.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201
        return None


def browse(url: str, user: str) -> tuple[int, str]:
    """GET `url` and the redirects after it, as USER; the last page's status and text."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(NoRedirect(), urllib.request.HTTPCookieProcessor(jar))
    for _ in range(12):
        try:
            with opener.open(url, timeout=30) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            if e.code not in (301, 302, 303, 307, 308):
                return e.code, e.read().decode("utf-8", "replace")
            url = urllib.parse.urljoin(url, e.headers["Location"])
            if urllib.parse.urlparse(url).path.startswith("/_test/interaction/"):
                url += ("&" if "?" in url else "?") + urllib.parse.urlencode({"user": user})
    raise RuntimeError(f"too many redirects from {url}")


async def run(url: str, token: str, tool: str, user: str, mode: str = "auto") -> dict[str, Any]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp_types import ElicitResult
    from contextlib import asynccontextmanager

    seen: list[dict[str, Any]] = []
    notifications: list[dict[str, Any]] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            return
        params = getattr(message, "params", None)
        notifications.append({
            "method": getattr(message, "method", None),
            "params": params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else None,
        })

    async def answer(context: Any, params: Any) -> Any:
        record = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        entry = {"mode": record.get("mode", "form"), "url": record.get("url"),
                 "elicitationId": record.get("elicitationId"), "message": record.get("message")}
        seen.append(entry)
        if entry["mode"] != "url":
            return ElicitResult(action="decline")
        status, page = await asyncio.to_thread(browse, entry["url"], user)
        entry["landed"] = {"status": status, "page": page}
        return ElicitResult(action="accept")

    @asynccontextmanager
    async def transport() -> Any:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http_client:
            async with streamable_http_client(url, http_client=http_client) as streams:
                yield streams

    client = Client(transport(), mode=mode, elicitation_callback=answer, message_handler=on_message,
                    read_timeout_seconds=60, cache=None)
    async with client:
        result = await client.call_tool(tool, {})
        # A notification sent before the result may still be on its way to the handler.
        for _ in range(20):
            if not seen or any(n["method"] == "notifications/elicitation/complete" for n in notifications):
                break
            await asyncio.sleep(0.1)
        return {
            "protocolVersion": client.protocol_version,
            "elicitations": seen,
            "notifications": notifications,
            "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
        }


def main() -> None:
    if len(sys.argv) not in (5, 6):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out = asyncio.run(run(*sys.argv[1:]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
