"""A conformance fixture for the suite's `tasks-*` server scenarios (0.2.0-alpha.12, the Tasks extension,
SEP-2663 `io.modelcontextprotocol/tasks`): FastMCP with fastmcp-tasks, on Streamable HTTP.

fixture_server.py is the mcp SDK's `MCPServer`, which has no tasks extension, so the ten `tasks-*` scenarios
fail against it (server_baseline.json). They need a server that serves tasks and the tools the scenarios name
in their descriptions (`conformance list`, the suite's dist/index.js); this is one, built on the same FastMCP
and fastmcp-tasks as tests/peers/tasks_server.py (./dev's tasks_peer installs them):

- `greet(name)`: sync only, `Hello, {name}!`.
- `slow_compute(seconds, label)` (task optional): sleeps `seconds`, then says so; cancellable while it sleeps.
- `failing_job()` (task required): a tool error (`isError`) after ~1 s.
- `protocol_error_job()` (task optional): raises a protocol error (`MCPError`, -32603), which fastmcp-tasks
  reports as a `failed` task with the error inlined (any other exception is a tool error: `isError`).
- `confirm_delete(filename)` (task optional): one `elicitation/create` input request, then completes.
- `multi_input()` (task optional): two input requests at once (partial fulfilment).
- `test_tool_with_task()` (task required): the MRTR -> task composition (tasks-mrtr-composition): the first
  call asks `user_name` by a plain InputRequiredResult, no task; the retry that carries the answer is made a
  task, which completes with the name. fastmcp-tasks mints the task on the first call of a task-required tool,
  so `Composing` (below) does the first round itself and hands the answer to the task as the `user_name`
  argument.

The tools' poll interval is 100 ms (the scenarios poll every 200 ms on their own).

Run:  python tests/conformance/tasks_fixture.py PORT      (binds 127.0.0.1; endpoint /mcp)
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

POLL = timedelta(milliseconds=100)



class Composing(TasksExtension):
    """fastmcp-tasks, but `test_tool_with_task` gathers its input by MRTR before it becomes a task."""

    async def intercept_tool_call(self, params: mcp_types.CallToolRequestParams, context: Context,
                                  call_next: Any) -> Any:
        if params.name != "test_tool_with_task":
            return await super().intercept_tool_call(params, context, call_next)
        answer = (params.input_responses or {}).get("user_name")
        if answer is None:
            return mcp_types.InputRequiredResult(input_requests={"user_name": elicit("Your name?", NAME)})
        content = answer.model_dump(by_alias=True, mode="json").get("content") or {}
        retry = params.model_copy(update={"arguments": {**(params.arguments or {}), "user_name": content.get("name")},
                                          "input_responses": None})
        return await super().intercept_tool_call(retry, context, call_next)


app = FastMCP("mcpx-conformance-tasks-fixture")
app.add_extension(Composing())


def elicit(message: str, schema: dict[str, Any]) -> mcp_types.ElicitRequest:
    return mcp_types.ElicitRequest(params=mcp_types.ElicitRequestFormParams(message=message, requested_schema=schema))


def answers(ctx: Context) -> dict[str, Any]:
    return {k: v.model_dump(by_alias=True, mode="json", exclude_none=True)
            for k, v in (ctx.input_responses or {}).items()}


CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@app.tool
async def greet(name: str) -> str:
    return f"Hello, {name}!"


@app.tool(task=TaskConfig(mode="optional", poll_interval=POLL))
async def slow_compute(seconds: float = 1, label: str = "") -> str:
    await asyncio.sleep(seconds)
    return f"computed {label} after {seconds}s"


@app.tool(task=TaskConfig(mode="required", poll_interval=POLL))
async def failing_job() -> str:
    await asyncio.sleep(1)
    raise ToolError("failing_job always fails")


@app.tool(task=TaskConfig(mode="optional", poll_interval=POLL))
async def protocol_error_job() -> str:
    raise MCPError(INTERNAL_ERROR, "protocol_error_job panics")


@app.tool(task=TaskConfig(mode="optional", poll_interval=POLL))
async def confirm_delete(ctx: Context, filename: str = "file.txt") -> Any:
    if not ctx.input_responses:
        return mcp_types.InputRequiredResult(input_requests={"confirm": elicit(f"Delete {filename}?", CONFIRM)})
    return json.dumps({"deleted": filename, "answers": answers(ctx)})


@app.tool(task=TaskConfig(mode="optional", poll_interval=POLL))
async def multi_input(ctx: Context) -> Any:
    given = answers(ctx)
    wanted = {"first": elicit("First?", NAME), "second": elicit("Second?", NAME)}
    missing = {k: v for k, v in wanted.items() if k not in given}
    if missing:
        return mcp_types.InputRequiredResult(input_requests=missing)
    return json.dumps(given)


@app.tool(task=TaskConfig(mode="required", poll_interval=POLL))
async def test_tool_with_task(user_name: str | None = None) -> str:
    return f"Hello, {user_name}!"


if __name__ == "__main__":
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False)
