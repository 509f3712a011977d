"""mcp/tasks.py's `follow`, held at the unit (the server's `tasks/*` replaced by a scripted wire), and the rule
of which calls declare the Tasks extension (`UpstreamConnection.follows_tasks`). The same driver against the real
peer: tests/e2e/test_upstream_tasks.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcpx.config.models import HttpServer, StdioServer
from mcpx.mcp import tasks
from mcpx.mcp.http_client import HttpChannel
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.tasks import POLL_CEILING, POLL_FLOOR, TaskEnded, TaskGone, TaskHandle, follow
from mcpx.upstream.connection import UpstreamConnection
from mcpx.upstream.handshake import ServerFacts
from mcpx.upstream.hooks import Events

ELICIT = {"method": "elicitation/create", "params": {"message": "ok?", "requestedSchema": {"type": "object"}}}


class Wire:
    """Answers tasks/get from a script (the last entry repeats), and records every request."""

    def __init__(self, *script: dict[str, Any]) -> None:
        self.script = list(script)
        self.gets = 0
        self.updates: list[dict[str, Any]] = []
        self.cancelled = False
        self.target, self.reached = 0, asyncio.Event()  # set once `target` polls were answered

    async def get(self, task_id: str) -> dict[str, Any]:
        self.gets += 1
        if self.target and self.gets >= self.target:
            self.reached.set()
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, Exception):
            raise step
        return {"taskId": task_id, "resultType": "complete", "pollIntervalMs": 1, **step}

    async def update(self, task_id: str, responses: dict[str, Any]) -> None:
        self.updates.append(responses)

    async def cancel(self, task_id: str) -> None:
        self.cancelled = True


HANDLE = TaskHandle(task_id="T", poll_interval_ms=1)


def test_the_poll_interval_is_the_servers_within_a_floor_and_a_ceiling() -> None:
    assert TaskHandle(task_id="T", poll_interval_ms=0).interval() == POLL_FLOOR
    assert TaskHandle(task_id="T", poll_interval_ms=3_600_000).interval() == POLL_CEILING
    assert TaskHandle(task_id="T", poll_interval_ms=1500).interval() == 1.5
    assert TaskHandle(task_id="T").interval(0.7) == 0.7  # none named: the caller's


async def test_each_key_is_asked_once_however_often_it_is_listed_and_answered_alone() -> None:
    asked: list[str] = []
    release = asyncio.Event()

    async def ask(key: str, request: Any) -> dict[str, Any]:
        asked.append(key)
        if key == "b":
            await release.wait()
        return {"action": "accept", "content": {"k": key}}

    waiting = {"status": "input_required", "inputRequests": {"a": ELICIT, "b": ELICIT}}
    wire = Wire(*[waiting] * 5, {"status": "input_required", "inputRequests": {"b": ELICIT}})
    wire.target = 8
    driving = asyncio.ensure_future(follow("srv", HANDLE, wire, ask))
    async with asyncio.timeout(5):
        await wire.reached.wait()
    assert asked == ["a", "b"]  # six polls listed both: one question each
    assert wire.updates == [{"a": {"action": "accept", "content": {"k": "a"}}}]  # a went at once, b still open
    wire.script = [{"status": "completed", "result": {"content": [], "isError": False}}]
    release.set()
    async with asyncio.timeout(5):
        assert await driving == {"content": [], "isError": False}
    assert wire.updates[-1] == {"b": {"action": "accept", "content": {"k": "b"}}}


async def test_a_key_dropped_while_unanswered_is_withdrawn() -> None:
    heard: list[str] = []
    cancelled = asyncio.Event()

    async def ask(key: str, request: Any) -> dict[str, Any]:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        raise AssertionError("not reached")

    async def withdrawn(key: str) -> None:
        heard.append(key)
        assert not cancelled.is_set()  # told before its ask is cancelled: the reason comes first

    wire = Wire({"status": "input_required", "inputRequests": {"a": ELICIT}},
                {"status": "working"},  # working lists nothing: not a withdrawal
                {"status": "input_required", "inputRequests": {"c": {"method": "roots/list"}}},
                {"status": "completed", "result": {"content": []}})
    seen: set[str] = set()
    async with asyncio.timeout(5):
        await follow("srv", HANDLE, wire, ask, withdrawn, seen)
    assert heard == ["a"] and cancelled.is_set() and seen == {"a", "c"}


@pytest.mark.parametrize(("step", "raised"), [
    ({"status": "failed", "error": {"code": -32000, "message": "rate limited"}}, RpcError),
    ({"status": "cancelled", "statusMessage": "by someone"}, TaskEnded),
    (RpcError(-32602, "Task T not found"), TaskGone),
])
async def test_how_a_task_ends_without_a_result(step: Any, raised: type[Exception]) -> None:
    async def ask(key: str, request: Any) -> dict[str, Any]:
        raise AssertionError("nothing is asked")

    with pytest.raises(raised) as info:
        async with asyncio.timeout(5):
            await follow("srv", HANDLE, Wire(step), ask)
    if raised is RpcError:
        assert info.value.code == -32000 and "rate limited" in str(info.value)


def test_a_refusal_is_told_by_its_data_not_its_number() -> None:
    named = {"requiredCapabilities": {"extensions": {tasks.EXTENSION: {}}}}
    assert tasks.requires_extension(RpcError(-32021, "missing", named))
    assert tasks.requires_extension(RpcError(-32003, "missing", named))  # the draft's number
    assert not tasks.requires_extension(RpcError(-32021, "missing", {"requiredCapabilities": {"sampling": {}}}))
    assert not tasks.requires_extension(RpcError(-32021, "missing"))


def connection(entry: StdioServer | HttpServer, era: str = "modern", offered: bool = True,
               declared: dict[str, Any] | None = None) -> UpstreamConnection:
    async def nothing() -> None:
        pass

    conn = UpstreamConnection("srv", entry, "s", declared, events=Events(lambda tool, asks: None, lambda: None,
                                                                         nothing))
    caps = {"extensions": {tasks.EXTENSION: {}}} if offered else {}
    conn.facts = ServerFacts("modern" if era == "modern" else "legacy", "2026-07-28", {}, caps)
    if isinstance(entry, HttpServer):
        conn.channel = HttpChannel("srv", entry.url, {})
    return conn


async def test_which_calls_declare_the_extension() -> None:
    http = HttpServer(url="http://127.0.0.1:1/mcp")
    conns = [connection(http), connection(http, offered=False), connection(http, era="legacy"),
             connection(http, declared={"elicitation": {}})]
    try:
        assert conns[0].follows_tasks("any")  # HTTP: every call, the task outlives the daemon
        assert not conns[1].follows_tasks("any")  # the server did not declare it
        assert not conns[2].follows_tasks("any")  # the extension is the modern era's
        assert not conns[3].follows_tasks("any")  # a transparent client's capabilities: its own to declare
    finally:
        for conn in conns:
            await conn.close()
    stdio = connection(StdioServer(command="srv"))
    assert not stdio.follows_tasks("deploy")  # stdio: only what the server refused to run otherwise
    stdio._task_tools.add("deploy")
    assert stdio.follows_tasks("deploy") and not stdio.follows_tasks("quick")
    meta = stdio._params({"name": "deploy"}, None, True)["_meta"]
    assert meta["io.modelcontextprotocol/clientCapabilities"]["extensions"] == {tasks.EXTENSION: {}}
    plain = stdio._params({"name": "quick"})["_meta"]
    assert "extensions" not in plain["io.modelcontextprotocol/clientCapabilities"]
