# A stdio MCP server (2025-11-25) whose one tool sends the user to a link: URL-mode
# elicitation, then notifications/elicitation/complete, then the answer's action as text.
# A call the client cancels is dropped (a gateway retries a call once its client has
# answered, as 2026-07-28 clients do); the retry asks again and gets the answer.
import json, sys

def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()

caps = {}
pending = {}  # elicitation request id -> the tools/call id it serves
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method is None and mid in pending:
        call = pending.pop(mid)
        action = msg.get("result", {}).get("action", "error")
        if action == "accept":
            send({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                  "params": {"elicitationId": "el-42"}})
        send({"jsonrpc": "2.0", "id": call, "result": {"content": [{"type": "text",
              "text": "action=" + action}]}})
    elif method == "initialize":
        caps = msg["params"].get("capabilities", {})
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "linker", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{"name": "connect_account",
              "description": "Connect your example.com account",
              "inputSchema": {"type": "object", "properties": {}}}]}})
    elif method == "tools/call":
        if "url" not in caps.get("elicitation", {}):
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text",
                  "text": "no url elicitation offered: " + json.dumps(caps)}], "isError": True}})
            continue
        ask = "link-" + str(mid)
        pending[ask] = mid
        send({"jsonrpc": "2.0", "id": ask, "method": "elicitation/create", "params": {
              "mode": "url", "message": "Sign in to example.com to connect your account.",
              "url": "https://auth.example.com/authorize?state=s123", "elicitationId": "el-42"}})
    elif method == "notifications/cancelled":
        gone = msg.get("params", {}).get("requestId")
        pending = {k: v for k, v in pending.items() if v != gone}
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no " + str(method)}})
