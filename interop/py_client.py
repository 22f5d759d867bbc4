#!/usr/bin/env python3
"""MCP client built on the official Python SDK (`mcp` 2.x).

Usage:
    interop/.venv/bin/python py_client.py [options] -- CMD [ARGS...]
    interop/.venv/bin/python py_client.py [options] --url URL [--transport streamable|sse]

Spawns CMD over stdio, or connects to the HTTP server at URL with the SDK's own
HTTP transport (`streamable_http_client` by default; `--transport sse`: the
legacy 2024-11-05 HTTP+SSE `sse_client`, URL being the SSE endpoint). Connects
(handshake or `server/discover`), runs a fixed script and prints ONE JSON
object on stdout with the same shape as ts_client.mjs:

    {"client": {...}, "protocolVersion": "...", "serverInfo": {...} | null,
     "capabilities": {...}, "instructions": ...,
     "tools": ["name", ...] | null, "toolDetails": [Tool, ...] | null,
     "resources": [...] | null, "resourceTemplates": [...] | null,
     "prompts": [...] | null,
     "calls": [{"name", "arguments", "result": CallToolResult}, ...],
     "reads": [{"uri", "result": ReadResourceResult}, ...],
     "gets":  [{"name", "arguments", "result": GetPromptResult}, ...]}

Lists are null when the server does not advertise the capability. A tool
result with isError: true is reported, not treated as a failure; anything else
that goes wrong prints "py_client: error: ..." on stderr and exits 1 (2 for
usage errors).

Options:
    --protocol REV|auto    auto (default, the SDK's own policy): probe
                           server/discover at 2026-07-28, fall back to the
                           initialize handshake. 2026-07-28: require the
                           stateless era (discover must succeed). A
                           handshake revision (2024-11-05, 2025-03-26,
                           2025-06-18, 2025-11-25): legacy mode, offering REV in
                           initialize. In every non-auto case the client fails
                           unless the server ends up on REV.
    --call NAME JSONARGS   call a tool (repeatable, in order)
    --retry-call NAME JSONARGS SECONDS
                           call a tool again and again (every 200 ms) until it
                           returns a result without isError or SECONDS have
                           passed; JSON-RPC errors count as failed attempts. Its
                           entry in "calls" holds the last result (or "error")
                           and "attempts". In order with --call.
    --tolerate-errors      a --call that fails with a JSON-RPC error (or a
                           broken connection) is recorded as {"name",
                           "arguments", "error": "..."} instead of ending the
                           run with exit code 1
    --call-log FILE        append "NAME\n" to FILE (flushed) just before each
                           tools/call is sent, so a test can act while it runs
    --elicit ANSWER        declare the elicitation capability and accept every
                           form with {"decision": ANSWER} (the gateway's
                           consent form: "approve once", "approve for this
                           session", "always approve", "deny")
    --elicit-decline       declare elicitation and decline every request
                           Both repeatable: the answers are given in order, one
                           per request, the last one for every request after.
    --sample TEXT          declare sampling and answer every sampling/createMessage
                           with an assistant text message TEXT (model
                           "py-client"); the output gets "samplings": every
                           request's messages, in order
    --root URI             declare roots and offer URI (repeatable); the output
                           gets "rootsRequests": how often roots/list was asked
    --read URI             read a resource (repeatable)
    --prompt NAME JSONARGS get a prompt (repeatable)
    --timeout SECONDS      overall deadline (default 60)
    --url URL              connect over HTTP instead of spawning a command
    --transport KIND       with --url: streamable (default; Streamable HTTP, URL
                           is the MCP endpoint) or sse (legacy HTTP+SSE, URL is
                           the SSE endpoint, e.g. http://HOST/sse)

Every "calls" entry also has "elapsedMs" (how long the call took) and
"endedAtMs" (when it ended, Unix time in milliseconds). With
--elicit or --elicit-decline the output also has "elicitations": every
elicitation request received, in order, as {"message", "requestedSchema",
"mode", "answer"}.

Over HTTP the output also has "transport" ("streamable" | "sse") and, for
Streamable HTTP, "sessionId" (the Mcp-Session-Id the server assigned, null when
there is none, as in 2026-07-28). Over stdio both are absent.
"""

from __future__ import annotations

import json
import os
import sys
import time
from importlib import metadata
from typing import Any, NoReturn

PROG = "py_client"
USAGE = (
    "usage: py_client.py [--protocol REV|auto] [--call NAME JSON]... [--read URI]... "
    "[--prompt NAME JSON]... [--retry-call NAME JSON SECS]... [--tolerate-errors] "
    "[--call-log FILE] [--elicit ANSWER | --elicit-decline] [--timeout SECS] (-- CMD [ARGS...] | --url URL [--transport streamable|sse])"
)


def die(msg: str, code: int = 1) -> NoReturn:
    sys.stderr.write(f"{PROG}: error: {msg}\n")
    sys.stderr.flush()
    # os._exit: do not wait for SDK background tasks / the child to wind down.
    os._exit(code)


def usage(msg: str) -> NoReturn:
    die(f"{msg}\n{USAGE}", 2)


def parse_json_obj(flag: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        usage(f"{flag}: invalid JSON {text!r}: {e}")
    if not isinstance(value, dict):
        usage(f"{flag}: arguments must be a JSON object")
    return value


def parse_args(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "protocol": None,
        "calls": [],
        "reads": [],
        "prompts": [],
        "timeout": 60.0,
        "url": None,
        "transport": None,
        "tolerate_errors": False,
        "elicit": [],
        "sample": None,
        "roots": [],
        "call_log": None,
    }
    i = 0

    def need(flag: str, n: int) -> None:
        if i + n >= len(argv):
            usage(f"{flag} needs {n} value(s)")

    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a == "--protocol":
            need(a, 1)
            opts["protocol"] = argv[i + 1]
            i += 2
        elif a == "--call":
            need(a, 2)
            opts["calls"].append((argv[i + 1], parse_json_obj(a, argv[i + 2]), None))
            i += 3
        elif a == "--retry-call":
            need(a, 3)
            try:
                secs = float(argv[i + 3])
            except ValueError:
                usage("--retry-call: SECONDS must be a number")
            opts["calls"].append((argv[i + 1], parse_json_obj(a, argv[i + 2]), secs))
            i += 4
        elif a == "--call-log":
            need(a, 1)
            opts["call_log"] = argv[i + 1]
            i += 2
        elif a == "--tolerate-errors":
            opts["tolerate_errors"] = True
            i += 1
        elif a == "--elicit":
            need(a, 1)
            opts["elicit"].append(("accept", argv[i + 1]))
            i += 2
        elif a == "--elicit-decline":
            opts["elicit"].append(("decline", None))
            i += 1
        elif a == "--sample":
            need(a, 1)
            opts["sample"] = argv[i + 1]
            i += 2
        elif a == "--root":
            need(a, 1)
            opts["roots"].append(argv[i + 1])
            i += 2
        elif a == "--read":
            need(a, 1)
            opts["reads"].append(argv[i + 1])
            i += 2
        elif a == "--prompt":
            need(a, 2)
            opts["prompts"].append((argv[i + 1], parse_json_obj(a, argv[i + 2])))
            i += 3
        elif a == "--timeout":
            need(a, 1)
            try:
                opts["timeout"] = float(argv[i + 1])
            except ValueError:
                usage("--timeout must be a number of seconds")
            if opts["timeout"] <= 0:
                usage("--timeout must be positive")
            i += 2
        elif a == "--url":
            need(a, 1)
            opts["url"] = argv[i + 1]
            i += 2
        elif a == "--transport":
            need(a, 1)
            opts["transport"] = argv[i + 1]
            if opts["transport"] not in ("streamable", "sse"):
                usage("--transport must be streamable or sse")
            i += 2
        elif a in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        else:
            usage(f"unknown option {a!r} (put the server command after --)")
    if opts["protocol"] == "auto":
        opts["protocol"] = None
    if opts["url"] is not None:
        if i < len(argv):
            usage("give either --url or a server command after --, not both")
        if not opts["url"].startswith(("http://", "https://")):
            usage(f"--url: expected an http:// or https:// URL, got {opts['url']!r}")
        if opts["transport"] is None:
            opts["transport"] = "streamable"
        return opts
    if opts["transport"] is not None:
        usage("--transport needs --url")
    if i >= len(argv):
        usage("missing server command after -- (or --url URL)")
    opts["command"] = argv[i]
    opts["args"] = argv[i + 1 :]
    return opts


def dump(model: Any) -> Any:
    if model is None:
        return None
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def list_all(fetch: Any, key: str) -> list[Any]:
    out: list[Any] = []
    cursor = None
    for _ in range(100):
        page = await fetch(cursor=cursor)
        out.extend(dump(item) for item in getattr(page, key))
        cursor = page.next_cursor
        if not cursor:
            return out
    raise RuntimeError(f"{key}: more than 100 pages, giving up")


try:
    _GROUP: type = BaseExceptionGroup  # Python >= 3.11
except NameError:  # pragma: no cover - Python 3.10 (anyio depends on the backport)
    from exceptiongroup import BaseExceptionGroup as _GROUP  # type: ignore[no-redef]


def describe(e: BaseException) -> str:
    # anyio task groups wrap failures in ExceptionGroups; show the leaves.
    if isinstance(e, _GROUP):
        return "; ".join(describe(x) for x in e.exceptions)  # type: ignore[attr-defined]
    error = getattr(e, "error", None)
    code = getattr(error, "code", None)
    suffix = f" (code {code})" if code is not None else ""
    text = f"{type(e).__name__}{suffix}: {e}"
    data = getattr(error, "data", None)
    if data is not None:
        text += f" (data: {json.dumps(data, default=str)})"
    return text


async def step(what: str, coro: Any) -> Any:
    try:
        return await coro
    except Exception as e:  # noqa: BLE001 - reported, then fatal
        raise RuntimeError(f"{what} failed: {describe(e)}") from e


async def run(opts: dict[str, Any]) -> dict[str, Any]:
    import mcp.client.session as client_session
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp_types import Implementation
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_PROTOCOL_VERSION, MODERN_PROTOCOL_VERSIONS

    rev = opts["protocol"]
    if rev is None:
        mode = "auto"
    elif rev in MODERN_PROTOCOL_VERSIONS:
        # "auto" probes server/discover at the newest modern revision (and gets
        # serverInfo/capabilities from it); we then insist it did not fall back.
        mode = "auto"
    elif rev in HANDSHAKE_PROTOCOL_VERSIONS:
        mode = "legacy"
        # The SDK always offers LATEST_HANDSHAKE_VERSION in initialize; pin it.
        client_session.LATEST_HANDSHAKE_VERSION = rev  # type: ignore[misc]
    else:
        die(
            f"protocol revision {rev} is not supported by mcp {sdk_version()} "
            f"(supported: {', '.join((*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS))})",
            2,
        )

    session: dict[str, str | None] = {"id": None}
    server: Any
    if opts["url"] is None:
        server = StdioServerParameters(command=opts["command"], args=opts["args"], env=dict(os.environ))
        target = opts["command"]
    else:
        server = http_transport(opts["url"], opts["transport"], session)
        target = f"{opts['url']} ({opts['transport']})"
    elicitations: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    if opts["elicit"]:
        extra["elicitation_callback"] = elicitation_answerer(opts["elicit"], elicitations)
    samplings: list[Any] = []
    if opts["sample"] is not None:
        extra["sampling_callback"] = sampling_answerer(opts["sample"], samplings)
    roots_asked: list[int] = []
    if opts["roots"]:
        extra["list_roots_callback"] = roots_answerer(opts["roots"], roots_asked)
    client = Client(
        server,
        mode=mode,
        client_info=Implementation(name="moat-interop-py-client", version=sdk_version()),
        read_timeout_seconds=opts["timeout"],
        cache=None,
        **extra,
    )
    try:
        await client.__aenter__()
    except Exception as e:  # noqa: BLE001
        raise RuntimeError(f"connect ({mode}) to {target} failed: {describe(e)}") from e
    try:
        negotiated = client.protocol_version
        if rev is not None and negotiated != rev:
            raise RuntimeError(f"requested protocol {rev} but the connection negotiated {negotiated}")
        caps = client.server_capabilities
        out: dict[str, Any] = {
            "client": {"sdk": "mcp", "version": sdk_version(), "latestProtocolVersion": LATEST_PROTOCOL_VERSION},
            "protocolVersion": negotiated,
            "serverInfo": dump(client.server_info),
            "capabilities": dump(caps),
            "instructions": client.instructions,
            "tools": None,
            "toolDetails": None,
            "resources": None,
            "resourceTemplates": None,
            "prompts": None,
            "calls": [],
            "reads": [],
            "gets": [],
        }
        if opts["url"] is not None:
            out["transport"] = opts["transport"]
            if opts["transport"] == "streamable":
                out["sessionId"] = session["id"]
        if caps.tools is not None:
            out["toolDetails"] = await step("tools/list", list_all(client.list_tools, "tools"))
            out["tools"] = [t["name"] for t in out["toolDetails"]]
        if caps.resources is not None:
            out["resources"] = await step("resources/list", list_all(client.list_resources, "resources"))
            out["resourceTemplates"] = await step(
                "resources/templates/list", list_all(client.list_resource_templates, "resource_templates")
            )
        if caps.prompts is not None:
            out["prompts"] = await step("prompts/list", list_all(client.list_prompts, "prompts"))
        if opts["elicit"]:
            out["elicitations"] = elicitations
        if opts["sample"] is not None:
            out["samplings"] = samplings
        if opts["roots"]:
            out["rootsRequests"] = roots_asked
        for name, arguments, retry_secs in opts["calls"]:
            log_call(opts["call_log"], name)
            if retry_secs is not None:
                out["calls"].append(await retry_call(client, name, arguments, retry_secs))
                continue
            started = time.monotonic()
            entry: dict[str, Any] = {"name": name, "arguments": arguments}
            try:
                entry["result"] = dump(await client.call_tool(name, arguments))
            except Exception as e:  # noqa: BLE001 - fatal unless tolerated
                if not opts["tolerate_errors"]:
                    raise RuntimeError(f"tools/call {name} failed: {describe(e)}") from e
                entry["error"] = describe(e)
            entry["elapsedMs"] = round((time.monotonic() - started) * 1000)
            entry["endedAtMs"] = round(time.time() * 1000)
            out["calls"].append(entry)
        for uri in opts["reads"]:
            result = await step(f"resources/read {uri}", client.read_resource(uri))
            out["reads"].append({"uri": uri, "result": dump(result)})
        for name, arguments in opts["prompts"]:
            str_args = {k: v if isinstance(v, str) else json.dumps(v) for k, v in arguments.items()}
            result = await step(f"prompts/get {name}", client.get_prompt(name, str_args))
            out["gets"].append({"name": name, "arguments": arguments, "result": dump(result)})
        return out
    finally:
        try:
            await client.__aexit__(None, None, None)
        except Exception as e:  # noqa: BLE001 - shutdown noise must not mask the result
            sys.stderr.write(f"{PROG}: warning: shutdown: {describe(e)}\n")


def log_call(path: str | None, name: str) -> None:
    if path is not None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(name + "\n")


async def retry_call(client: Any, name: str, arguments: dict[str, Any], secs: float) -> dict[str, Any]:
    """Calls `name` until a result without isError, or `secs` have passed."""
    import anyio

    started = time.monotonic()
    entry: dict[str, Any] = {"name": name, "arguments": arguments, "attempts": 0}
    while True:
        entry["attempts"] += 1
        try:
            entry["result"] = dump(await client.call_tool(name, arguments))
            entry.pop("error", None)
            if not entry["result"].get("isError"):
                break
        except Exception as e:  # noqa: BLE001 - a failed attempt
            entry.pop("result", None)
            entry["error"] = describe(e)
        if time.monotonic() - started >= secs:
            break
        await anyio.sleep(0.2)
    entry["elapsedMs"] = round((time.monotonic() - started) * 1000)
    entry["endedAtMs"] = round(time.time() * 1000)
    return entry


def elicitation_answerer(answers: list[tuple[str, str | None]], seen: list[dict[str, Any]]) -> Any:
    """An elicitation callback giving `answers` in order (the last one from then on), and
    logging every request."""
    from mcp_types import ElicitResult

    async def answer_it(context: Any, params: Any) -> Any:
        action, answer = answers[min(len(seen), len(answers) - 1)]
        record = dump(params)
        seen.append(
            {
                "message": record.get("message"),
                "requestedSchema": record.get("requestedSchema"),
                "mode": record.get("mode", "form"),
                "answer": answer if action == "accept" else action,
            }
        )
        if action == "accept":
            return ElicitResult(action="accept", content={"decision": answer})
        return ElicitResult(action=action)

    return answer_it


def sampling_answerer(text: str, seen: list[Any]) -> Any:
    """A sampling callback that answers `text` and logs each request's messages."""
    from mcp_types import CreateMessageResult, TextContent

    async def answer_it(context: Any, params: Any) -> Any:
        seen.append(dump(params).get("messages"))
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=text), model="py-client"
        )

    return answer_it


def roots_answerer(uris: list[str], asked: list[int]) -> Any:
    """A roots callback offering `uris` and counting the requests."""
    from mcp_types import ListRootsResult, Root

    async def answer_it(context: Any) -> Any:
        asked.append(len(asked) + 1)
        return ListRootsResult(roots=[Root(uri=u) for u in uris])

    return answer_it


def http_transport(url: str, kind: str, session: dict[str, str | None]) -> Any:
    """The SDK's HTTP transport for `url`, as a `Transport` for `Client`.

    Streamable HTTP goes through an httpx2 client of the SDK's own making whose
    response hook records the `Mcp-Session-Id` the server assigns (the SDK keeps
    it private).
    """
    from contextlib import asynccontextmanager

    if kind == "sse":
        from mcp.client.sse import sse_client

        return sse_client(url)

    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def remember_session(response: Any) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid:
            session["id"] = sid

    @asynccontextmanager
    async def transport() -> Any:
        async with create_mcp_http_client() as http:
            http.event_hooks = {"request": [], "response": [remember_session]}
            async with streamable_http_client(url, http_client=http) as streams:
                yield streams

    return transport()


def sdk_version() -> str:
    try:
        return metadata.version("mcp")
    except metadata.PackageNotFoundError:
        return "unknown"


def main() -> None:
    opts = parse_args(sys.argv[1:])
    try:
        import anyio
    except ImportError as e:
        die(f"cannot import the MCP SDK ({e}); run .ci/run or pip install -r interop/requirements.txt")

    async def guarded() -> dict[str, Any]:
        with anyio.fail_after(opts["timeout"]):
            return await run(opts)

    try:
        out = anyio.run(guarded)
    except TimeoutError:
        die(f"timed out after {opts['timeout']}s")
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, SystemExit):
            raise
        die(describe(e))
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
