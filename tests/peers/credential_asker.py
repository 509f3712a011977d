"""An upstream written with the official mcp SDK that asks with a raw schema, as real servers do: a field
with `"format": "password"` under a name that says nothing of secrets, and one of a format mcpx does not know.

It reports the PIN it received only as a SHA-256, so the one place the clear value may exist is this server.
"""

import hashlib
import json

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("credential-asker")

SCHEMA = {"type": "object", "properties": {
    "user": {"type": "string", "description": "your user name"},
    "pin": {"type": "string", "format": "password", "description": "the four digits"},
    "shade": {"type": "string", "format": "color", "description": "a colour for your badge"}},
    "required": ["user", "pin"]}


@app.tool()
async def sign_in(ctx: Context) -> str:
    result = await ctx.request_context.session.elicit_form("Sign in to the registry", SCHEMA,
                                                           related_request_id=ctx.request_id)
    content = dict(result.content or {})
    if "pin" in content:
        content["pin"] = "sha256:" + hashlib.sha256(str(content["pin"]).encode()).hexdigest()
    return json.dumps({"action": result.action, "content": content})


if __name__ == "__main__":
    app.run()
