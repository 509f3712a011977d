"""An upstream written with FastMCP and fastmcp-tasks whose tools run as tasks (SEP-2663,
`io.modelcontextprotocol/tasks`) and ask through the task: each leg returns an InputRequiredResult and reads the
answers (`ctx.input_responses`) when `tasks/update` re-runs it. `ctx.elicit()` is refused inside a task, so
this is how a FastMCP task asks.

Run: `python tasks_server.py` (stdio) or `python tasks_server.py --http PORT` (Streamable HTTP). The task
backend is FastMCP's default (memory://): a task lives in this process, and dies with it.

Tools:
- `deploy(env)` (task required): asks a confirmation; if confirmed, a form (region, replicas) and a url
  consent together; then completes with every answer it was given, as JSON.
- `confirm_only(what)` (task optional): asks a confirmation and completes with the action.
- `quick(x)` (task optional): completes without asking.
- `plain(x)`: never a task.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

POLL = timedelta(milliseconds=200)  # the interval the handle names: tests wait on polls, not on 5 s defaults

app = FastMCP("tasks-peer")
app.add_extension(TasksExtension())


def elicit(message: str, schema: dict[str, Any]) -> mcp_types.ElicitRequest:
    return mcp_types.ElicitRequest(params=mcp_types.ElicitRequestFormParams(message=message, requested_schema=schema))


def consent(message: str, url: str, eid: str) -> mcp_types.ElicitRequest:
    return mcp_types.ElicitRequest(params=mcp_types.ElicitRequestURLParams(message=message, url=url,
                                                                           elicitation_id=eid))


def answers(ctx: Context) -> dict[str, Any]:
    return {k: v.model_dump(by_alias=True, mode="json", exclude_none=True)
            for k, v in (ctx.input_responses or {}).items()}


CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean", "title": "Go ahead"}},
           "required": ["confirm"]}
FORM = {"type": "object", "properties": {"region": {"type": "string", "enum": ["eu", "us"]},
                                         "replicas": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["region", "replicas"]}


@app.tool(task=TaskConfig(mode="required", poll_interval=POLL))
async def deploy(env: str, ctx: Context) -> Any:
    state = json.loads(ctx.request_state) if ctx.request_state else {"leg": 0, "given": {}}
    given = {**state["given"], **answers(ctx)}
    if state["leg"] == 0:
        return mcp_types.InputRequiredResult(
            input_requests={"confirm": elicit(f"Deploy to {env}?", CONFIRM)},
            request_state=json.dumps({"leg": 1, "given": given}))
    if state["leg"] == 1:
        ok = given.get("confirm", {})
        if ok.get("action") != "accept" or not (ok.get("content") or {}).get("confirm"):
            return json.dumps({"deployed": False, "given": given})
        return mcp_types.InputRequiredResult(
            input_requests={"form": elicit("Where, and how many?", FORM),
                            "consent": consent("Sign in to the registry", "https://registry.example/login",
                                               "reg-1")},
            request_state=json.dumps({"leg": 2, "given": given}))
    return json.dumps({"deployed": True, "env": env, "given": given})


@app.tool(task=TaskConfig(mode="optional", poll_interval=POLL))
async def confirm_only(what: str, ctx: Context) -> Any:
    if ctx.input_responses is None:
        return mcp_types.InputRequiredResult(input_requests={"ok": elicit(f"Really {what}?", CONFIRM)})
    return json.dumps(answers(ctx))


@app.tool(task=TaskConfig(mode="optional", poll_interval=POLL))
async def quick(x: int) -> str:
    return f"quick {x}"


@app.tool
async def plain(x: int) -> str:
    return f"plain {x}"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False)
    else:
        app.run(show_banner=False)
