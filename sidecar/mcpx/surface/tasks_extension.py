"""mcpx's calls as tasks for its own clients: the Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) with
mcpx as the server. The wire shapes are mcp/tasks.py's; this is what mcpx answers with them.

The task is the call: its id is the call's own `tsk-…` (call/record.py's `Call`), and it lives in the
daemon, not in the connection that started it, so any connection of the same session reads it: `/mcp` and
`mcpx serve` alike, and after `mcpx serve` handed its client to a restarted daemon. Its rules:

- The extension is declared on `server/discover` in the 2026-07-28 era on the aggregate surface, never in
  `initialize` (the legacy era has no per-request capabilities to declare it back); on `/mcp/SERVER` where the
  server offers it, and there a call is a task exactly when the server made it one (surface/driver.py).
- A `tools/call` whose `_meta` declares the extension gets a task handle (`handle`) once its call waits on
  anything (a question, a request for the client) or is still running after `elicit.grace`; a call done sooner
  answers with its result, as for any client (surface/driver.py). A request that does not declare it never gets
  a handle, whatever the same client declared before (the spec's MUST NOT).
- `tasks/get` reports the call as a `DetailedTask`: `working`; `input_required` with the requests this
  request's client can take (as the modern retry's input_required would carry them), keyed by mcpx's question
  ids (`elc-…`), which are unique for the task's life as the spec wants (an upstream's own keys may repeat from
  round to round); `completed` with the result as a plain call would have returned it; `failed` with the
  JSON-RPC error it would have raised; `cancelled`. `statusMessage` says whom the call waits on.
- `tasks/update` answers through surface/answers.py, as a retry's `inputResponses` are: `person:mcp-client`;
  keys not outstanding for this client are ignored; content that does not fit leaves the question open, and the
  next report's `statusMessage` names each field's problem (the client has seen the key, and will not show it
  again by itself).
- `tasks/cancel` cancels the call (the upstream call with it: an upstream's own task gets `tasks/cancel`).
- A task is read, answered, cancelled and followed only by its own session; any other id, another session's
  included, is unknown (-32602), so no session learns that another's task exists.
- `follow` pushes `notifications/tasks` (a full DetailedTask) for one task on a `subscriptions/listen`: its
  state when the subscription starts, then at each change (a status, a question opened or answered, the end).
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import Field, ValidationError

from mcpx.broker.broker import Broker
from mcpx.broker.models import TaskDoc, rfc3339, rfc3339_epoch
from mcpx.call.failures import UnknownTask
from mcpx.call.record import DONE_STATES, Call
from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.tasks import EXTENSION, Status, Task, UpdateParams
from mcpx.surface.answers import SLOT, give, problems
from mcpx.surface.client_state import ClientState, shaped
from mcpx.surface.results import finished_result, task_result, waiting_on
from mcpx.upstream.gateway import Gateway

METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
POLL_MS = 1000  # what a handle suggests: a read from memory, and a person answers in seconds at best
FOLLOW_IDLE = 60.0  # a follower's wait between two looks at a quiet call (each change wakes it at once)
REQUIRED: dict[str, Any] = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}

Send = Callable[[dict[str, Any]], Awaitable[None]]
_INLINED = {"input_requests", "result", "error"}  # what a report carries and a handle does not


def missing_extension(what: str) -> RpcError:
    """-32021 for a request that needs the extension and did not declare it (the spec's error, its data)."""
    return RpcError(jsonrpc.MISSING_CAPABILITY, f"Missing required client capability: {what} needs the {EXTENSION} "
                                                "extension declared in this request's "
                                                "_meta['io.modelcontextprotocol/clientCapabilities'].extensions",
                    REQUIRED)


class Report(Task):
    """A DetailedTask as mcpx reports its own call: mcp/tasks.py's `Task`, with the times the spec requires of a
    server (an upstream's own task is read without them). Built with only what it says: `wire` leaves out what
    was not given, as the spec's optional fields are (and keeps `ttlMs: null`, mcpx keeping a task for its life)."""

    created_at: str = Field(alias="createdAt")
    last_updated_at: str = Field(alias="lastUpdatedAt")

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_unset=True)


def _report(tid: str, created: str, updated: str, status: Status, message: str | None = None, **inlined: Any
            ) -> Report:
    """A report of task `tid`; `message`, and what goes with `status` (`input_requests`, `result`, `error`), only
    when there is one."""
    report = Report(task_id=tid, created_at=created, last_updated_at=updated, ttl_ms=None, poll_interval_ms=POLL_MS,
                    status=status, **inlined)
    if message is not None:
        report.status_message = message  # set, so `wire` carries it
    return report


def _ending(tid: str, created: str, updated: str, render: Callable[[], dict[str, Any]], state: str,
            error: str | None) -> Report:
    """A finished task's report: what the plain tools/call would have answered, as the spec maps it (a result,
    an isError one included, is `completed`; a JSON-RPC error is `failed`)."""
    if state == "cancelled":
        return _report(tid, created, updated, "cancelled", error or "cancelled")
    try:
        result = render()
    except RpcError as exc:
        return _report(tid, created, updated, "failed", exc.message, error=exc.to_error())
    return _report(tid, created, updated, "completed", error or None, result=result)


class TasksExtension:
    """The Tasks extension's side of the surface: handles, the three tasks/* requests, and followers."""

    def __init__(self, gateway: Gateway, broker: Broker) -> None:
        self.gateway = gateway
        self.broker = broker
        # a slot's key for the life of its task: the upstream's own may repeat, and the spec wants it unique
        self._slot_keys: weakref.WeakKeyDictionary[asyncio.Future[dict[str, Any]], str] = \
            weakref.WeakKeyDictionary()
        self._serial = itertools.count(1)
        self._refused: dict[str, dict[str, str]] = {}  # task -> question -> why its last update's content did not fit

    # ---- what a task says

    def handle(self, task: Call, state: ClientState) -> dict[str, Any]:
        """The CreateTaskResult for a call: its status as tasks/get would say it now, nothing inlined."""
        return self.report(task, state).model_dump(by_alias=True, exclude_unset=True, exclude=_INLINED) | {
            "resultType": "task"}

    def detailed(self, task: Call, state: ClientState) -> dict[str, Any]:
        """A live call as a DetailedTask, for this request's client, as the wire carries it."""
        return self.report(task, state).wire()

    def report(self, task: Call, state: ClientState) -> Report:
        """A live call's report, for this request's client."""
        created, updated = rfc3339_epoch(task.created), rfc3339_epoch(task.updated)
        if task.done:
            self._refused.pop(task.id, None)
            return _ending(task.id, created, updated, lambda: task_result(task), task.state, task.error)
        requests = {key: request for key, (_, request) in self._outstanding(task, state).items()}
        refused = self._refused.get(task.id, {})
        notes = [f"the answer to {eid} was not accepted: {why}" for eid, why in refused.items() if eid in task.open]
        message = "; ".join([waiting_on(task), *notes])
        if requests:
            return _report(task.id, created, updated, "input_required", message, input_requests=requests)
        return _report(task.id, created, updated, "working", message)

    @staticmethod
    def stored(doc: TaskDoc) -> dict[str, Any]:
        """A call the daemon no longer holds in memory, as the store has it."""
        created, updated = rfc3339(doc.created), rfc3339(doc.updated)
        if doc.state in DONE_STATES:
            return _ending(doc.id, created, updated, lambda: finished_result(doc), doc.state, doc.error).wire()
        why = f"{doc.id} is {doc.state}, but its call is not running in this daemon (it was lost in a restart)"
        return _report(doc.id, created, updated, "failed", why,
                       error={"code": jsonrpc.INTERNAL_ERROR, "message": why}).wire()

    def _outstanding(self, task: Call, state: ClientState) -> dict[str, tuple[str, dict[str, Any]]]:
        """Each request of the call this client can take, under its key: what a response to it answers, and the
        request as inputRequests carries it."""
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        for eid, q in task.open.items():
            if eid not in task.passed_over and state.can_ask(q):
                out[eid] = (eid, {"method": "elicitation/create", "params": shaped(q, state)})
        for key, slot in task.slots.items():
            out[self._slot_key(slot.future, slot.method)] = (SLOT + key, {"method": slot.method,
                                                                          "params": slot.params})
        return out

    def _slot_key(self, future: asyncio.Future[dict[str, Any]], method: str) -> str:
        key = self._slot_keys.get(future)
        if key is None:
            key = self._slot_keys[future] = f"{method}#{next(self._serial)}"
        return key

    # ---- the requests

    async def find(self, tid: Any, session: str) -> Call | TaskDoc:
        """The session's task `tid`, live or stored; -32602 naming it for any other."""
        if not isinstance(tid, str) or not tid:
            raise RpcError(jsonrpc.INVALID_PARAMS, "taskId is required: the task's id (tsk-…), from the task handle")
        unknown = RpcError(jsonrpc.INVALID_PARAMS, f"Task not found: mcpx has no task {tid!r} in this session")
        live = self.gateway.task(tid)
        if live is not None:
            if live.request.session != session:
                raise unknown
            return live
        try:
            doc = await self.gateway.task_doc(tid)
        except UnknownTask:
            raise unknown from None
        if doc.session != session:
            raise unknown
        return doc

    async def request(self, method: str, params: dict[str, Any], state: ClientState, session: str
                      ) -> dict[str, Any]:
        """One of METHODS, from a request that declared the extension."""
        if method == "tasks/update":
            return await self._update(params, state, session)
        found = await self.find(params.get("taskId"), session)
        if method == "tasks/cancel":
            if isinstance(found, Call):
                await self.gateway.cancel(found.id, "cancelled by the MCP client (tasks/cancel)")
            return {}
        return self.detailed(found, state) if isinstance(found, Call) else self.stored(found)

    async def _update(self, params: dict[str, Any], state: ClientState, session: str) -> dict[str, Any]:
        try:
            update = UpdateParams.model_validate(params)
        except ValidationError:
            raise RpcError(jsonrpc.INVALID_PARAMS, "tasks/update needs taskId and inputResponses (an object of "
                                                   "responses under the keys tasks/get gave)") from None
        task = await self.find(update.task_id, session)
        if not isinstance(task, Call) or task.done:
            return {}  # nothing is outstanding: every key is ignored
        keys = self._outstanding(task, state)
        replies = {keys[key][0]: reply for key, reply in update.input_responses.items() if key in keys}
        given = await give(self.broker, task, replies, session, state.unattended)
        refused = self._refused.setdefault(task.id, {})
        for eid in given.answered:
            refused.pop(eid, None)
        refused.update({eid: problems(exc) for eid, exc in given.refused.items()})
        self._refused = {tid: r for tid, r in self._refused.items() if r and self.gateway.task(tid) is not None}
        if given.refused:
            task.report_changed()  # followers hear why
        return {}

    # ---- notifications/tasks

    async def owned(self, ids: Any, session: str) -> list[str]:
        """Of the ids a subscriptions/listen names, the session's own, each once (the others are left out of its
        acknowledgement)."""
        kept: list[str] = []
        for tid in ids if isinstance(ids, list) else []:
            if isinstance(tid, str) and tid not in kept:
                try:
                    await self.find(tid, session)
                except RpcError:
                    continue
                kept.append(tid)
        return kept

    async def follow(self, tid: str, state: ClientState, session: str, send: Send) -> None:
        """`send` the task as it is now, then again at each change, until it ends."""
        found = await self.find(tid, session)
        if not isinstance(found, Call):
            await send(self.stored(found))
            return
        task = found
        sent: tuple[Any, ...] | None = None
        with task.watch() as watch:
            while True:
                now = self._looks(task)
                if now != sent:
                    await send(self.detailed(task, state))
                    sent = now
                if task.done:
                    return
                await watch.until(self._changed(task, sent), FOLLOW_IDLE)

    def _changed(self, task: Call, sent: tuple[Any, ...]) -> Callable[[], bool]:
        return lambda: self._looks(task) != sent

    def _looks(self, task: Call) -> tuple[Any, ...]:
        """What a report of the call is made of, but its clock: a change here is a notification."""
        return (task.state, tuple(task.open), tuple(task.slots), frozenset(task.passed_over),
                tuple(self._refused.get(task.id, {}).items()))
