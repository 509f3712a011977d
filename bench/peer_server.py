"""The upstream MCP server of bench/gateway.py, written with the official mcp SDK (stdio only).

Two tools:

- `echo(text)`: the trivial call both sides of the plain-call comparison time.
- `ask()`: asks one question with plain `ctx.elicit` (the legacy back-channel) and stamps
  time.monotonic() immediately before asking and immediately after the answer is back. The first
  stamp travels in the question's own message text (`... t0=<float>`), so whoever receives the
  question can read it; both come back in the result text as JSON. CLOCK_MONOTONIC (what
  time.monotonic() reads on Linux) is one clock for every process on the machine, so the bench
  may subtract its own stamps from these. The result also names the process (`pid`) that asked.

- `sleep(seconds)`: a call that takes its time, so that bench/upstreams.py can count the instances
  that many calls in flight hold.

- `need_repo()`: asks for a repository with a schema holding only the keys MCP lets a form's top level hold,
  and reports the answer as JSON (bench/codex.py). Codex CLI 0.169 cancels, unseen, a form whose schema has
  anything else there, such as the `title` pydantic writes for `ctx.elicit`'s model: asked directly, Codex
  could answer no question `ask()` puts.

Run: `python bench/peer_server.py` (stdio), the way mcpx and the direct SDK client both start it.
`--legacy` serves the handshake era only (the SDK's `serve_loop`, as servers built before
2026-07-28 do): `server/discover` gets an error and `initialize` is taken.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

app = MCPServer("bench-peer")

# how the bench finds the stamp in a question's message; bench/gateway.py parses exactly this
T0_MARK = "t0="


class Repo(BaseModel):
    repo: str = Field(description="owner/name")


@app.tool()
def echo(text: str = "") -> str:
    return f"echo: {text}"


@app.tool()
async def ask(ctx: Context) -> str:
    t0 = time.monotonic()  # as close to the question leaving as the tool can get
    result = await ctx.elicit(f"Which repository? {T0_MARK}{t0!r}", Repo)
    t1 = time.monotonic()  # the answer is in the tool's hands
    data = result.data.model_dump() if isinstance(result, AcceptedElicitation) else None
    return json.dumps({"asked": t0, "returned": t1, "action": result.action, "data": data, "pid": os.getpid()})


# Repo's schema as MCP's form allows it: no top-level title (see need_repo)
REPO_FORM = {"type": "object", "properties": {"repo": {"type": "string", "description": "owner/name"}},
             "required": ["repo"]}


@app.tool()
async def need_repo(ctx: Context) -> str:
    result = await ctx.request_context.session.elicit_form("Which repository should this go in?", REPO_FORM,
                                                           related_request_id=ctx.request_id)
    return json.dumps({"action": result.action, "data": result.content})


@app.tool()
async def sleep(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


async def handshake_only() -> None:
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    low = app._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(low, read, write, lifespan_state=state, init_options=low.create_initialization_options())


if __name__ == "__main__":
    if "--legacy" in sys.argv[1:]:
        asyncio.run(handshake_only())
    else:
        app.run()
