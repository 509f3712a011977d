"""A modern-era (2026-07-28) upstream with the SDK's resolver pattern: it asks by input_required.

The requestState key is fixed, so a restarted instance can still open a retry sealed by the first one; with
RESOLVER_KEY=ephemeral in its environment it draws a key per process, as the SDK's default does, and a restarted
instance refuses the retries its predecessor sealed.
Run: `python sdk_resolver.py` (stdio) or `python sdk_resolver.py --http PORT`.
"""

import asyncio
import json
import os
import sys
from typing import Annotated

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.request_state import RequestStateSecurity
from pydantic import BaseModel, Field

KEY = "mcpx-tests-fixed-request-state-key-0123456789abcdef"
SECURITY = (RequestStateSecurity.ephemeral() if os.environ.get("RESOLVER_KEY") == "ephemeral"
            else RequestStateSecurity(keys=[KEY]))
app = MCPServer("resolver-peer", request_state_security=SECURITY)


class Repo(BaseModel):
    repo: str = Field(description="owner/name")


class Region(BaseModel):
    region: str = Field(description="where to deploy")


def ask_repo() -> Elicit[Repo]:
    return Elicit("Which repository should this go in?", Repo)


def ask_region() -> Elicit[Region]:
    return Elicit("Which region?", Region)


def report(answer) -> dict:
    data = getattr(answer, "data", None)
    return {"action": answer.action, "data": data.model_dump() if data is not None else None}


@app.tool()
async def need_repo(answer: Annotated[ElicitationResult[Repo], Resolve(ask_repo)]) -> str:
    return json.dumps(report(answer))


@app.tool()
async def two_questions(repo: Annotated[ElicitationResult[Repo], Resolve(ask_repo)],
                        region: Annotated[ElicitationResult[Region], Resolve(ask_region)]) -> str:
    return json.dumps([report(repo), report(region)])


@app.tool()
def echo(text: str = "") -> str:
    return f"echo: {text}"


@app.tool()
async def count(ctx: Context, label: str, n: int = 3) -> str:
    """Reports progress `label i/n` n times, a moment apart, then answers with the label."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"{label} {i}/{n}")
        await asyncio.sleep(0.3)
    return label


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
