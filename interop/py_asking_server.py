#!/usr/bin/env python3
"""A handshake-era MCP server in plain Python (no SDK) whose one tool asks the client a
question, for the gateway tests (crates/moat-cli/tests/gateway_routing.rs).

Usage:
    python3 py_asking_server.py

Speaks MCP 2025-11-25 (and older handshake revisions) on stdio, one JSON-RPC message a
line; `server/discover` is answered "method not found", so a client falls back to
`initialize`. Exits when stdin closes.

Its tool `ask` (no arguments) numbers each call it receives (1, 2, ...), sends the
client `elicitation/create` with the message "question N" (a form with one string
field, `answer`), waits for the answer (20 s at most), and returns one text:

    call N: question N was answered {"answer": ...} (accept)

or "call N: question N got no answer (...)". So a test sees how many times the tool was
run, and which question the answer it got was given to.

Its tool `roots_then_fail` (no arguments) sends the client `roots/list`, as a server
may at any time, waits for whatever comes back, and then fails for a reason of its own:
an error result (`isError`) whose text is "failed; roots/list got: <the response>". So
a test sees a call that fails by itself while a roots request crossed it.
"""

import itertools
import json
import os
import sys
import threading

SUPPORTED = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]

_out = threading.Lock()
_pending = {}  # our request id -> (threading.Event, slot dict)
_pending_lock = threading.Lock()
_calls = itertools.count(1)
_ids = itertools.count(1)


def send(message):
    with _out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def answer(req_id, result):
    send({"jsonrpc": "2.0", "id": req_id, "result": result})


def fail(req_id, code, message):
    send({"jsonrpc": "2.0", "id": req_id, "error": {"code": code, "message": message}})


def ask_client(params, timeout=20.0, method="elicitation/create"):
    """Sends `method` (`elicitation/create`) and waits for the client's response message."""
    rid = f"ask-{next(_ids)}"
    done = threading.Event()
    slot = {}
    with _pending_lock:
        _pending[rid] = (done, slot)
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    done.wait(timeout)
    with _pending_lock:
        _pending.pop(rid, None)
    return slot.get("message")


def run_ask(req_id):
    n = next(_calls)
    reply = ask_client(
        {
            "message": f"question {n}",
            "requestedSchema": {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"],
            },
        }
    )
    if reply is None or "result" not in reply:
        text = f"call {n}: question {n} got no answer ({json.dumps(reply)})"
    else:
        result = reply["result"]
        text = (
            f"call {n}: question {n} was answered "
            f"{json.dumps(result.get('content'), sort_keys=True)} ({result.get('action')})"
        )
    answer(req_id, {"content": [{"type": "text", "text": text}]})


def run_roots_then_fail(req_id):
    reply = ask_client({}, method="roots/list")
    text = f"failed; roots/list got: {json.dumps(reply, sort_keys=True)}"
    answer(req_id, {"content": [{"type": "text", "text": text}], "isError": True})


TOOLS = [
    {
        "name": "ask",
        "description": "Asks the client a numbered question and reports the answer.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "roots_then_fail",
        "description": "Asks the client for its roots, then fails for a reason of its own.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]
RUNS = {"ask": run_ask, "roots_then_fail": run_roots_then_fail}


def handle(message):
    method = message.get("method")
    req_id = message.get("id")
    if method is None:
        # A response to one of our requests.
        with _pending_lock:
            waiting = _pending.get(req_id)
        if waiting is not None:
            waiting[1]["message"] = message
            waiting[0].set()
        return
    if req_id is None:
        return  # notifications: initialized, cancelled, ...
    if method == "initialize":
        asked = (message.get("params") or {}).get("protocolVersion")
        answer(
            req_id,
            {
                "protocolVersion": asked if asked in SUPPORTED else SUPPORTED[0],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "moat-test-asking", "version": "1.0.0"},
            },
        )
    elif method == "ping":
        answer(req_id, {})
    elif method == "tools/list":
        answer(req_id, {"tools": TOOLS})
    elif method == "tools/call" and (message.get("params") or {}).get("name") in RUNS:
        run = RUNS[message["params"]["name"]]
        threading.Thread(target=run, args=(req_id,), daemon=True).start()
    elif method == "tools/call":
        fail(req_id, -32602, "Unknown tool")
    else:
        fail(req_id, -32601, f"Method not found: {method}")


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(message, dict):
            handle(message)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
