"""A modern-era server that never stops asking (raw JSON-RPC on stdio), to test mcpx's bound on rounds."""

import json
import sys

for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "server/discover":
        result = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
    elif method == "tools/list":
        result = {"resultType": "complete", "tools": [{"name": "forever", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        n = int(msg["params"].get("requestState") or 0) + 1
        result = {"resultType": "input_required", "requestState": str(n), "inputRequests": {
            f"round{n}": {"method": "elicitation/create", "params": {
                "mode": "form", "message": f"round {n}: which colour?",
                "requestedSchema": {"type": "object", "properties": {"c": {"type": "string", "enum": ["r", "g"]}}}}}}}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
