"""A call the server made a task (the Tasks extension, SEP-2663, `io.modelcontextprotocol/tasks`): its models,
and the one driver that follows it.

A modern server that declared the extension (in `server/discover`'s capabilities) may answer a `tools/call`
whose `_meta` declared it too with a task handle instead of the result: `resultType: "task"`, a `taskId`, a
status, `ttlMs` and `pollIntervalMs`. The client then polls `tasks/get`, which reports the task's status and,
while it is `input_required`, the server's outstanding requests (`inputRequests`, under keys unique for the
task's life); it answers them with `tasks/update` (`inputResponses` under the same keys, a strict subset of
them allowed) and stops the task with `tasks/cancel`. A `completed` task carries the call's result inlined, a
`failed` one the JSON-RPC error the call would have returned. Acknowledgements of update and cancel are
eventually consistent: a key already answered may still be listed by the next poll. Each `tasks/*` request
carries the extension's declaration too (a server refuses it otherwise).

`follow` is that loop and nothing else, like `input_required.drive` beside it: it reaches the server through a
`TaskWire` and gets each request's answer from a function it is given, so it knows no connection, broker or
deadline (`upstream/connection.py` gives it the wire, `upstream/mcp_call.py`'s `McpCallHooks` the answers). Its
rules:

- poll at the server's `pollIntervalMs` (its latest word: the value may change), never under `POLL_FLOOR`
  nor over `POLL_CEILING`: a server asking for 0 must not have us spin, one asking for an hour must not leave
  a question unseen that long; right after every outstanding answer has been sent, poll at once (the floor
  still holds), since the next question is the one a person is waiting to see;
- each key is handed to `ask` once for the task's life (`seen`), whatever later polls repeat, and its answer is
  sent alone, as soon as it is given: the spec lets a client answer a subset, and a question answered in the
  inbox need not wait for another still open;
- a key an `input_required` task (which then lists every request outstanding) stops listing before it was
  answered is withdrawn: `withdrawn` hears it, then its `ask` is cancelled;
- `completed` returns the result; `failed` raises the task's JSON-RPC error as an `RpcError`; `cancelled`
  (by the server, or by another client) raises `TaskEnded`; a task the server no longer knows, `TaskGone`.

Cancelling the caller does not send `tasks/cancel`: whether a call that stops being followed is cancelled or
goes on without us (the daemon stopping, to follow it again after the restart) is the caller's to say.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

from pydantic import Field, field_validator

from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.protocol import Loose
from mcpx.shared.errors import McpxError

EXTENSION = "io.modelcontextprotocol/tasks"

POLL_FLOOR = 0.05  # seconds: the least pause between two polls, whatever the server says
POLL_CEILING = 30.0  # the longest: a question is seen within this, whatever the server says
POLL_DEFAULT = 2.0  # a server that names no interval (the spec gives none)

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL = ("completed", "failed", "cancelled")


class _TaskFields(Loose):
    """What a task handle and a polled task share: the id, the status, the server's bounds on both."""

    task_id: str = Field(alias="taskId", min_length=1)
    status: str = "working"
    status_message: str | None = Field(default=None, alias="statusMessage")
    ttl_ms: int | None = Field(default=None, alias="ttlMs")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")

    def interval(self, default: float = POLL_DEFAULT) -> float:
        """The pause before the next poll, in seconds: the server's, bounded by the floor and the ceiling."""
        if self.poll_interval_ms is None:
            return default
        return min(max(self.poll_interval_ms / 1000, POLL_FLOOR), POLL_CEILING)


class TaskHandle(_TaskFields):
    """A `CreateTaskResult`: what `tools/call` answers when the server made the call a task. Flat: the task's
    fields beside `resultType: "task"`."""

    result_type: Literal["task"] = Field(default="task", alias="resultType")


class Task(_TaskFields):
    """A `tasks/get` result (a `DetailedTask`, whose own resultType is "complete"): the status, and what goes with
    it."""

    status: Status
    input_requests: dict[str, Any] = Field(default_factory=dict, alias="inputRequests")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @field_validator("input_requests", mode="before")
    @classmethod
    def _none_asked(cls, value: Any) -> Any:
        return value or {}


class UpdateParams(Loose):
    """`tasks/update`'s params: answers under the server's keys."""

    task_id: str = Field(alias="taskId")
    input_responses: dict[str, Any] = Field(alias="inputResponses")


class TaskError(McpxError):
    """A task that ended without a result for the call: the message names the server, the task and why."""


class TaskEnded(TaskError):
    """The server reports the task `cancelled`."""


class TaskGone(TaskError):
    """The server no longer knows the task (it expired, or lived in a process that ended)."""


def is_task(result: dict[str, Any]) -> bool:
    return result.get("resultType") == "task"


def offered(capabilities: dict[str, Any]) -> bool:
    """The server declared the extension (server/discover's `capabilities.extensions`)."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def declaring(capabilities: dict[str, Any]) -> dict[str, Any]:
    """`capabilities` with the extension declared in its `extensions` (per request, in `_meta`)."""
    extensions = capabilities.get("extensions")
    return {**capabilities, "extensions": {**(extensions if isinstance(extensions, dict) else {}), EXTENSION: {}}}


def requires_extension(error: RpcError) -> bool:
    """A refusal for want of the extension: its data names it among `requiredCapabilities.extensions`. Read from
    the data, not the code: the SDK and FastMCP say -32021, the draft spec -32003, and either number means other
    things elsewhere."""
    data = error.data if isinstance(error.data, dict) else {}
    required = data.get("requiredCapabilities")
    extensions = required.get("extensions") if isinstance(required, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


class TaskWire(Protocol):
    """The three requests a followed task needs, each with the extension declared (and, over HTTP, `Mcp-Name`)."""

    async def get(self, task_id: str) -> dict[str, Any]: ...

    async def update(self, task_id: str, responses: dict[str, Any]) -> None: ...

    async def cancel(self, task_id: str) -> None: ...


Ask = Callable[[str, Any], Awaitable[dict[str, Any]]]  # a key and its request -> the response
Withdrawn = Callable[[str], Awaitable[None]]


async def follow(server: str, handle: TaskHandle, wire: TaskWire, ask: Ask, withdrawn: Withdrawn | None = None,
                 seen: set[str] | None = None) -> dict[str, Any]:
    """The task's result, once it completes. `ask`: one key's response (a question answered); `withdrawn`: a key
    the server stopped listing before its answer was sent; `seen`: keys handed out already (kept by the caller
    if it wants them)."""
    seen = set() if seen is None else seen
    tid = handle.task_id
    interval = handle.interval()
    asking: dict[str, asyncio.Task[None]] = {}

    async def answer(key: str, request: Any) -> None:
        response = await ask(key, request)
        await wire.update(tid, {key: response})

    try:
        while True:
            await _pause(interval, asking)
            try:
                task = Task.model_validate(await wire.get(tid))
            except RpcError as exc:
                if exc.code == jsonrpc.INVALID_PARAMS:  # the spec's answer for a task it does not know
                    raise TaskGone(f"server {server!r} no longer knows task {tid}: {exc.message}") from None
                raise
            except ValueError as exc:
                raise TaskError(f"server {server!r} answered tasks/get for {tid} with what is not a task: "
                                f"{exc}") from None
            interval = task.interval(interval)
            if task.status == "completed":
                if task.result is None:
                    raise TaskError(f"server {server!r} reports task {tid} completed without a result")
                return task.result
            if task.status == "failed":
                error = task.error or {}
                raise RpcError(int(error.get("code", jsonrpc.INTERNAL_ERROR)),
                               str(error.get("message") or task.status_message or f"task {tid} failed"),
                               error.get("data"))
            if task.status == "cancelled":
                raise TaskEnded(f"server {server!r} reports task {tid} cancelled"
                                + (f": {task.status_message}" if task.status_message else ""))
            for key, request in task.input_requests.items():
                if key not in seen:
                    seen.add(key)
                    asking[key] = asyncio.create_task(answer(key, request), name=f"mcpx-task-{tid}-{key}")
            gone = [k for k, t in asking.items() if not t.done() and k not in task.input_requests]
            for key in gone if task.status == "input_required" else []:  # only then does it list all outstanding
                # listed once, now gone while unanswered: the server went on without it (or completed it itself)
                if withdrawn is not None:
                    await withdrawn(key)  # before the cancel, which ends the question with the reason said here
                asking.pop(key).cancel()
            for key, t in list(asking.items()):
                if t.done():
                    del asking[key]
                    t.result()  # an answer that could not be given or sent ends the follow, loudly
    finally:
        for t in asking.values():
            t.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*asking.values(), return_exceptions=True)


async def _pause(interval: float, asking: dict[str, asyncio.Task[None]]) -> None:
    """Until the next poll: `interval`, or less once every answer outstanding has been sent (or one failed)."""
    pending = [t for t in asking.values() if not t.done()]
    if not pending:
        await asyncio.sleep(interval)
        return
    await asyncio.wait(pending, timeout=interval, return_when=asyncio.FIRST_EXCEPTION)
    await asyncio.sleep(POLL_FLOOR)  # the server's acknowledgement is eventually consistent: a moment for it
