"""A legacy-era MCP server on plain HTTP whose tool results are nested 100 000 deep: garbage from upstream.

Run: `python deep_http_server.py --http PORT`. It speaks just enough JSON-RPC to be connected to.
"""

import json
import sys

from aiohttp import web

DEEP = "[" * 100_000 + "]" * 100_000


async def mcp(request: web.Request) -> web.StreamResponse:
    msg = await request.json()
    if "id" not in msg:
        return web.Response(status=202)
    rid, method = msg["id"], msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "deep", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "deep", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        return web.Response(text=f'{{"jsonrpc": "2.0", "id": {json.dumps(rid)}, "result": {{"content": {DEEP}}}}}',
                            content_type="application/json")
    else:
        return web.json_response({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
    return web.json_response({"jsonrpc": "2.0", "id": rid, "result": result})


if __name__ == "__main__":
    app = web.Application(client_max_size=1 << 20)
    app.router.add_post("/mcp", mcp)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[2]), print=None)
