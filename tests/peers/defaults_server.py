"""An upstream written with the mcp SDK that asks a form whose fields have defaults of every kind.

The schema is sent as written (a multi-select default is a list), so a client shows defaults as the
server gave them. Run: `python defaults_server.py` (stdio).
"""

import json

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("defaults-peer")

TRIAGE = {"type": "object", "properties": {
    "labels": {"type": "array", "items": {"type": "string", "enum": ["bug", "docs", "api"]}, "default": ["bug", "api"]},
    "owner": {"type": "string", "default": "octo"},
    "notify": {"type": "boolean", "default": True},
}}


@app.tool()
async def triage(ctx: Context) -> str:
    result = await ctx.request_context.session.elicit_form("Triage it", TRIAGE, related_request_id=ctx.request_id)
    return json.dumps({"action": result.action, "content": result.content})


if __name__ == "__main__":
    app.run()
