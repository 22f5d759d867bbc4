# A stdio MCP server (2025-11-25) that sends the user to a link and later says the page is
# done, with ids the test chooses, so that a test can tell whose completion is whose.
#
#   connect {id, complete_now?}: a URL-mode elicitation with elicitationId = id; answers
#       "action=ACTION" (or "error=CODE MESSAGE" if the client side refused the request).
#       With complete_now, an accepted page is completed before the answer (on the call's
#       stream, as a server that waits for the page does).
#   complete {id}: notifications/elicitation/complete with that id, then "sent".
#   require {id}: answers URLElicitationRequiredError (-32042) listing a URL elicitation
#       with elicitationId = id (the page to visit before trying again).
import json, sys

def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()

def text(mid, t, error=False):
    send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": t}],
          "isError": error}})

def complete(eid):
    send({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
          "params": {"elicitationId": eid}})

TOOLS = [
    {"name": "connect", "description": "Send the user to a page",
     "inputSchema": {"type": "object", "properties": {"id": {"type": "string"},
                     "complete_now": {"type": "boolean"}}, "required": ["id"]}},
    {"name": "require", "description": "Refuse until a page is visited",
     "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}},
                     "required": ["id"]}},
    {"name": "complete", "description": "Say a page is done",
     "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}},
                     "required": ["id"]}},
]

pending = {}  # our elicitation request id -> (tools/call id, elicitation id, complete_now)
asked = 0
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method is None and mid in pending:
        call, eid, now = pending.pop(mid)
        if "error" in msg:
            err = msg["error"]
            text(call, "error=%s %s" % (err.get("code"), err.get("message")), True)
            continue
        action = msg.get("result", {}).get("action", "none")
        if action == "accept" and now:
            complete(eid)
        text(call, "action=" + action)
    elif method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "pages", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        params = msg["params"]
        args = params.get("arguments") or {}
        eid = str(args.get("id", ""))
        if params["name"] == "complete":
            complete(eid)
            text(mid, "sent")
            continue
        if params["name"] == "require":
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32042,
                  "message": "This request requires more information.",
                  "data": {"elicitations": [{"mode": "url", "elicitationId": eid,
                           "url": "https://pages.example.com/finish?id=" + eid,
                           "message": "Finish on the page."}]}}})
            continue
        asked += 1
        ask = "page-%d" % asked
        pending[ask] = (mid, eid, bool(args.get("complete_now")))
        send({"jsonrpc": "2.0", "id": ask, "method": "elicitation/create", "params": {
              "mode": "url", "message": "Finish on the page.", "elicitationId": eid,
              "url": "https://pages.example.com/finish?id=" + eid}})
    elif method == "notifications/cancelled":
        gone = msg.get("params", {}).get("requestId")
        pending = {k: v for k, v in pending.items() if v[0] != gone}
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no " + str(method)}})
