"""A call to an upstream tool, as a task with an id, and the way its server's questions reach the broker.

Every question a call raises carries the call's session, trace and task, so it is offered to
the session that caused it and to nobody else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from mcpx.broker.broker import Broker, Handle, InvalidQuestion
from mcpx.broker.errors import QuestionEnded
from mcpx.broker.models import (
    REDACTED,
    Answer,
    Elicitation,
    OpenRequest,
    SessionSource,
    StoredTask,
    TaskDoc,
    TaskState,
    TransparentCall,
)
from mcpx.mcp import jsonrpc, tasks
from mcpx.mcp.input_required import InputRequired
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.protocol import ElicitParams, Era
from mcpx.shared.errors import McpxError
from mcpx.upstream.connection import UpstreamConnection
from mcpx.upstream.deadline import PausableDeadline
from mcpx.upstream.resume import Resume
from mcpx.upstream.roots import per_caller, roots_of

log = logging.getLogger("mcpx.upstream")

DONE_STATES = ("completed", "failed", "cancelled")


def routable(client_caps: dict[str, Any] | None) -> dict[str, Any]:
    """Of a client's capabilities, those mcpx can carry to it from an upstream: its requests, and the Tasks
    extension (mcpx follows the server's task and serves it to the client as its own: surface/tasks.py)."""
    caps = {k: v for k, v in (client_caps or {}).items() if k in ("elicitation", "roots", "sampling")}
    return tasks.declaring(caps) if tasks.offered(client_caps or {}) else caps


@dataclass
class CallRequest:
    server: str
    tool: str
    arguments: dict[str, Any]
    session: str
    session_source: SessionSource
    parent: str | None = None
    cwd: str | None = None
    surface: str = "rest"
    policy_mode: Literal["ask", "auto", "decline", "error"] | None = None
    meta: dict[str, Any] | None = None  # forwarded to the upstream's tools/call (progressToken, logLevel)
    relay: Callable[[str, dict[str, Any]], Awaitable[None]] | None = field(default=None, repr=False)
    # what the calling MCP client declared: it may be asked for roots and sampling itself
    client_caps: dict[str, Any] | None = None
    # /mcp/{server}: the upstream sees the client's own era and capabilities, as if mcpx were not there
    transparent: bool = False
    era: Literal["legacy", "modern"] | None = None

    @property
    def declared(self) -> dict[str, Any] | None:
        """The capabilities to declare upstream: a transparent client's own (what mcpx can route), else mcpx's."""
        return routable(self.client_caps) if self.transparent else None

    def client_serves(self, capability: str) -> bool:
        return isinstance((self.client_caps or {}).get(capability), dict)


@dataclass
class Slot:
    """A request the upstream makes of the calling client itself (roots, sampling): served by the surface."""

    key: str
    method: str
    params: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]


class CallFailed(McpxError):
    """A call that ended without a result; the message names the server and, where one was open, the question."""


@dataclass
class CallTask:
    id: str
    trace: str
    request: CallRequest
    state: TaskState = "running"
    era: str | None = None
    questions: list[str] = field(default_factory=list)
    open: dict[str, Elicitation] = field(default_factory=dict)
    abandoned: list[str] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)  # question id -> the upstream's inputRequests key
    secrets: set[str] = field(default_factory=set)  # credential values handed to the server: never stored
    slots: dict[str, Slot] = field(default_factory=dict)  # requests for the client itself, pending
    # open questions the calling client was given and could not answer (an unattended host's, one it refused): they
    # wait for other surfaces, and that client is not given them again
    passed_over: set[str] = field(default_factory=set)
    result: dict[str, Any] | None = None
    error: str | None = None
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    resume: Resume | None = None  # a modern call's round in flight: what a restart re-drives
    progress: dict[str, Any] | None = None  # the server's last progress report (progress, total, message)
    end_reason: str | None = None
    end_state: TaskState = "cancelled"
    suspended: bool = False  # the daemon is stopping; a modern call stays resumable after the restart
    kept: bool = False  # the store holds a row of it (it asked, or a restart found it): its end must follow soon
    runner: asyncio.Task[None] | None = None
    # who waits for the call to change (wait_for): a future each, woken by touch (False) or its timeout (True).
    # Not a Condition: its lock costs every call a few microseconds on its reply's path and guards nothing
    _waiters: list[asyncio.Future[bool]] = field(default_factory=list, repr=False)

    @property
    def done(self) -> bool:
        return self.state in DONE_STATES

    @property
    def upstream_task(self) -> str | None:
        """The server's own task the call became (its task handle), followed to its end."""
        return self.resume.task if self.resume is not None else None

    async def touch(self, state: TaskState | None = None) -> None:
        if state is not None:
            self.state = state
        self.updated = time.time()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(False)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """True once `predicate` holds, False if it still does not after `timeout` seconds."""
        if predicate():
            return True
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        while True:
            waiter: asyncio.Future[bool] = loop.create_future()
            self._waiters.append(waiter)
            # the timeout wakes the waiter as a touch does: a timer handle, not asyncio.timeout's cancel and
            # uncancel of the waiting task (every call's driver waits here once, for its reply)
            timer = loop.call_at(until, self._expire, waiter)
            try:
                expired = await waiter
            finally:
                timer.cancel()
                if not waiter.done() or waiter.cancelled():  # cancelled: no touch will take it out
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)
            if predicate():
                return True
            if expired:
                return False

    def _expire(self, waiter: asyncio.Future[bool]) -> None:
        if not waiter.done():
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)
            waiter.set_result(True)

    def _shown(self) -> dict[str, Any]:
        r = self.request
        return {"id": self.id, "trace": self.trace, "parent": r.parent, "server": r.server, "tool": r.tool,
                "session": r.session, "session_source": r.session_source, "state": self.state, "era": self.era,
                "questions": list(self.questions), "open": list(self.open),
                "created": datetime.fromtimestamp(self.created, UTC),
                "updated": datetime.fromtimestamp(self.updated, UTC)}

    def doc(self) -> TaskDoc:
        return TaskDoc(**self._shown(), result=self.result, error=self.error,
                       progress=None if self.done else self.progress)

    def scrub(self, value: Any) -> Any:
        """`value` with every credential this call handed its server replaced by [redacted] (a server may echo it)."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            for secret in self.secrets:
                value = value.replace(secret, REDACTED)
            return value
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.scrub(v) for v in value]
        return value

    def stored(self) -> StoredTask:
        """What the tasks table keeps: enough to answer for the task, and to re-drive a modern call.

        What the server said or was given (its result, the error, the arguments, the client's
        capabilities) is kept without the credentials this call handed it.
        """
        r = self.request
        return StoredTask(
            **self._shown(), result=self.scrub(self.result), error=self.scrub(self.error),
            arguments=self.scrub(r.arguments), cwd=r.cwd, surface=r.surface, policy_mode=r.policy_mode,
            transparent=TransparentCall(era=r.era, client_caps=self.scrub(r.client_caps)) if r.transparent else None,
            resume=self.resume.stored() if self.resume is not None else None)

    def stored_with(self, q: Elicitation, pending: bool, resume: Resume | None = None) -> StoredTask:
        """What the tasks table keeps once `q` is open (pending, or settled at once), and with `resume` the
        round it belongs to: stored in q's own commit."""
        stored = self.stored()
        update: dict[str, Any] = {"questions": [*stored.questions, q.id]}
        if pending:
            update.update({"open": [*stored.open, q.id], "state": "input-required"})
        if resume is not None:
            update["resume"] = resume.stored()
        return stored.model_copy(update=update)

    def fail(self, reason: str, state: TaskState = "failed") -> None:
        """End the call now: `failed` loudly (policy `error`, server removed) or `cancelled` (by the client)."""
        self.end_reason = reason
        self.end_state = state
        if self.runner is not None and not self.runner.done():
            self.runner.cancel()


REASON_META = "io.mcpx/reason"


def elicit_result(answer: Answer) -> dict[str, Any]:
    """The ElicitResult an upstream gets: decline stays decline, cancel (and expiry) stays cancel. The reason a
    decline or cancel was given with (the person's words in a dialog, the agent's) goes along in _meta: the protocol
    has no field for it, and a server that reads it can do better than try again blindly."""
    out: dict[str, Any] = {"action": answer.action}
    if answer.action == "accept" and answer.content is not None:
        out["content"] = answer.content
    if answer.action != "accept" and answer.reason:
        out["_meta"] = {REASON_META: answer.reason}
    return out


class CallContext:
    """The hooks a call offers its server (hooks.ServerToCall): questions go to the broker."""

    def __init__(self, broker: Broker, task: CallTask, conn: UpstreamConnection, deadline: PausableDeadline,
                 save: Callable[[CallTask], Any]) -> None:
        self.broker = broker
        self.task = task
        self.conn = conn
        self.deadline = deadline
        self._save = save
        # completions the server announced for a question still being opened (they come on their own task)
        self._completed_early: set[str] = set()
        self._following = False  # the call became a task: its deadline stands still (following)
        self._opening = asyncio.Lock()  # a task's questions are opened one at a time (answer_input)
        self._withdrawn: dict[str, str] = {}  # a task's questions the server stopped asking: why they end

    def roots(self) -> list[dict[str, Any]]:
        return roots_of(self.conn.entry, self.task.request.cwd)

    def client_roots(self) -> bool:
        """Whether roots/list goes to the calling client: it declared roots, and the server's roots are its caller's."""
        return self.task.request.client_serves("roots") and per_caller(self.conn.entry)

    def fixed_answer(self, method: str) -> dict[str, Any] | None:
        if method == "roots/list" and not self.client_roots():
            return {"roots": self.roots()}
        return None

    async def client_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        r = self.task.request
        serves = self.client_roots() if method == "roots/list" else r.client_serves("sampling")
        if serves:
            return await self.via_client(f"{method}#{len(self.task.slots) + len(self.task.questions)}", method, params)
        if (fixed := self.fixed_answer(method)) is not None:
            return fixed
        raise RpcError(jsonrpc.METHOD_NOT_FOUND, "mcpx offers no sampling to this call (its caller did not declare it)")

    def add_slot(self, key: str, method: str, params: dict[str, Any]) -> Slot:
        slot = Slot(key, method, params, asyncio.get_running_loop().create_future())
        self.task.slots[key] = slot
        return slot

    async def await_slot(self, slot: Slot) -> dict[str, Any]:
        self.deadline.pause()  # the client may be asking a model or a person: that time is not the server's
        try:
            return await slot.future
        finally:
            self.deadline.resume()
            self.task.slots.pop(slot.key, None)

    async def via_client(self, key: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Hand a request to the calling client (the surface serves task.slots) and wait for its answer."""
        slot = self.add_slot(key, method, params)
        await self.task.touch()
        return await self.await_slot(slot)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """A notification the server sent about this call (progress, log messages): relayed to whoever called.

        Progress does not move our deadline: it only proves the server is alive. The last report is kept on the
        task, for whoever follows the call without a relay (`mcpx call` on a terminal, GET /v1/tasks/{id}).
        """
        if method == "notifications/progress":
            self.task.progress = {k: params[k] for k in ("progress", "total", "message") if k in params}
            if params.get("progressToken") is None:
                return  # the caller asked for no progress: kept on the task only
        relay = self.task.request.relay
        if relay is not None:
            try:
                await relay(method, params)
            except Exception as exc:  # the caller went away; the call goes on
                log.debug("relaying %s for %s failed: %s", method, self.task.id, exc)

    def _open_request(self, params: ElicitParams, upstream_id: str | None) -> OpenRequest:
        r = self.task.request
        mode = params.effective_mode
        return OpenRequest(
            session=r.session, session_source=r.session_source, server=r.server, tool=r.tool,
            mode=mode,
            message=params.message, requested_schema=params.requested_schema if mode == "form" else None,
            url=params.url if mode == "url" else None, upstream_id=upstream_id or params.elicitation_id,
            trace=self.task.trace,
            parent=r.parent, task=self.task.id, meta=params.meta, pid=self.conn.pid, policy_mode=r.policy_mode,
        )

    async def open(self, params: ElicitParams, era: Era,
                   round_record: Callable[[Elicitation, bool], StoredTask] | None = None,
                   upstream_id: str | None = None) -> Handle:
        """Open the server's question through the broker, as its era needs. Broker.open's arguments, and why:

        - legacy (`ask`): the call's task is stored with the question, in its commit (`task`), and the call's
          waiters are told at once, so a restart knows what was promised before anyone is told. The answer may
          reach the server before it commits (`eager`): nothing re-drives a legacy call, so nothing could re-send
          what its server was told. When the call's own MCP client can answer questions, that client is asked
          first (`committing`: the call's driver is given two loop turns before the question's commit is queued,
          which then runs while the client reads it; docs/architecture.md, "What is written when").
        - modern (`answer_round`): never eager, since a restart re-drives the call with the answer the store
          holds. The round's last question is stored with `round_record` (the task with the round's Resume); the
          waiters are told once the whole round is open. A task's question (`answer_input`) is opened the same
          way, its key the question's `upstream_id` and `round_record` the task's Resume with that key.
        """
        legacy = era == "legacy"
        r = self.task.request
        client_first = legacy and r.surface == "mcp" and r.client_serves("elicitation")
        told: Handle | None = None

        async def committing(handle: Handle) -> None:
            nonlocal told
            told = handle
            self._opened(handle)
            await self.task.touch()
            # the call's driver (surface/driver.py) wakes on the next loop turn and asks its client on the one after:
            # both before broker.open queues the question's commit, which then runs while the client reads it
            for _turn in range(2):
                await asyncio.sleep(0)

        # Shielded: a call that ends while its question is being stored (its server went away, its client
        # cancelled) would otherwise leave that question committed and pending with nobody to hear its answer.
        opening = asyncio.ensure_future(self.broker.open(self._open_request(params, upstream_id),
                                                         self.task.stored_with if legacy else round_record,
                                                         committing if client_first else None, eager=legacy))
        try:
            handle = await asyncio.shield(opening)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                handle = await opening
                if told is None:
                    self.task.questions.append(handle.id)
                self.task.open.pop(handle.id, None)
                if not handle.done() and not self.task.suspended:
                    self.task.abandoned.append(handle.id)
                    await self.broker.abandon(handle.id, self.abandon_reason(handle.id))
            raise
        except InvalidQuestion as exc:
            raise RpcError(jsonrpc.INVALID_PARAMS, f"mcpx refused this elicitation: {exc.message}") from None
        except Exception:
            if told is not None:  # it could not be stored: the client asked meanwhile has that request withdrawn
                self.task.questions.remove(told.id)
                self.task.open.pop(told.id, None)
                await self.task.touch("running" if not self.task.open else None)
            raise
        if told is None:
            self._opened(handle)
        if legacy:
            self.task.kept = True
            if told is None:
                await self.task.touch()
        if params.elicitation_id is not None and params.elicitation_id in self._completed_early:
            await self.complete(params.elicitation_id)
        return handle

    def _opened(self, handle: Handle) -> None:
        self.task.questions.append(handle.id)
        if not handle.done():
            self.task.open[handle.id] = handle.elicitation
            self.task.state = "input-required"

    async def wait(self, handle: Handle) -> Answer:
        """Wait for a person (the deadline stands still meanwhile); abandon the question if the call ends first."""
        self.deadline.pause()
        try:
            answer = await handle.answer()
            for name in handle.elicitation.secret_fields:
                value = (answer.content or {}).get(name)
                if isinstance(value, str) and len(value) >= 4:
                    self.task.secrets.add(value)
            return answer
        except QuestionEnded as ended:
            # policy `error`: the call fails loudly, naming the question (and the other questions it leaves)
            reason = (f"{self.task.request.server}.{self.task.request.tool} needed an answer to {handle.id} "
                      f"({handle.elicitation.message!r}) and none may be given: {ended.reason}")
            self.task.end_reason = reason
            raise CallFailed(reason) from None
        except asyncio.CancelledError:
            if not self.task.suspended:
                self.task.abandoned.append(handle.id)
                await self.broker.abandon(handle.id, self.abandon_reason(handle.id))
            raise
        finally:
            self.deadline.resume()
            self.task.open.pop(handle.id, None)
            if not self.task.open and self.task.state == "input-required":
                await self.task.touch("running")

    def abandon_reason(self, eid: str) -> str:
        if eid in self._withdrawn:
            return self._withdrawn[eid]
        if self.task.end_reason:
            return self.task.end_reason
        peer = self.conn.peer
        if peer is not None and not peer.alive:
            return f"server {self.conn.name!r} went away while {eid} was open: {peer.close_reason}"
        return f"the call {self.task.trace} ended before {eid} was answered"

    async def ask(self, params: ElicitParams) -> dict[str, Any]:
        """A legacy server's elicitation/create, on its own request: the call itself runs on in the runner.

        An MCP client that can answer questions is asked while the question commits, and the server is handed
        the answer while the answer commits: a legacy call does not outlive its daemon, so nothing re-drives it,
        nor could re-send what the server was told; the client's answer commits after the question."""
        handle = await self.open(params, "legacy")
        try:
            answer = await self.wait(handle)
        except CallFailed as exc:
            self.task.fail(str(exc))  # the runner waits for the server's result: the call ends there, failed
            raise RpcError(jsonrpc.INTERNAL_ERROR, str(exc)) from None
        self.broker.mark_resumed(handle.elicitation, {"action": answer.action, "era": "legacy"})
        return elicit_result(answer)

    async def complete(self, elicitation_id: str) -> None:
        """notifications/elicitation/complete: the server saw the out-of-band step finish."""
        for eid, q in list(self.task.open.items()):
            if q.mode == "url" and q.upstream_id == elicitation_id:
                try:
                    await self.broker.answer(eid, "accept", by="upstream", reason="the server reported completion")
                except Exception as exc:  # already answered: the person got there first
                    log.debug("completion for %s ignored: %s", eid, exc)
                return
        # A server may announce completion right behind its request, before mcpx has finished opening the
        # question (the two are handled on separate tasks): kept, and applied once the question is open.
        log.debug("completion for elicitationId %r before its question is open: kept for it", elicitation_id)
        self._completed_early.add(elicitation_id)

    def _planned(self, key: str, req: Any) -> tuple[str, Any]:
        """One of inputRequests, checked: its method and params (an elicitation's as ElicitParams); CallFailed for
        a request that is invalid or that mcpx did not declare (sampling, unless the calling client serves it)."""
        method = req.get("method") if isinstance(req, dict) else None
        if method == "elicitation/create":
            try:
                return method, ElicitParams.model_validate(req.get("params") or {})
            except Exception as exc:
                raise CallFailed(f"server {self.conn.name!r} sent an invalid elicitation in inputRequests"
                                 f"[{key!r}]: {exc}") from None
        if method == "roots/list" or (method == "sampling/createMessage"
                                      and self.task.request.client_serves("sampling")):
            return method, req.get("params") or {}
        raise CallFailed(f"server {self.conn.name!r} asked for {method!r} in inputRequests[{key!r}], which "
                         "mcpx did not declare to it")

    async def answer_round(self, asked: InputRequired, round_no: int) -> dict[str, Any]:
        """One broker question per elicitation in inputRequests, roots and sampling to the client (or roots
        from mcpx); once all are answered, the retry's inputResponses, under the server's own keys."""
        requests = asked.input_requests or {}
        planned = [(key, *self._planned(key, req)) for key, req in requests.items()]  # all checked before any acts
        static: dict[str, Any] = {}
        handles: dict[str, Handle] = {}
        slots: dict[str, Slot] = {}
        asks: list[tuple[str, ElicitParams]] = []
        for key, method, params in planned:  # all of them registered before the caller is told of any
            if method == "elicitation/create":
                asks.append((key, params))
            elif method == "roots/list" and not self.client_roots():
                static[key] = {"roots": self.roots()}
            else:
                slots[key] = self.add_slot(key, method, params)

        def resume(last: tuple[str, str] | None = None) -> Resume:
            """The round so far; `last`: the key and id of the question being opened, which has no handle yet."""
            keys = {k: h.id for k, h in handles.items()} | (dict([last]) if last is not None else {})
            return Resume(round=round_no, request_state=asked.request_state, keys=keys, static=static)

        for i, (key, params) in enumerate(asks):
            # the last question carries the round's resume state in its own commit: what a restart re-drives
            # from is stored exactly when the last question is
            with_round = (lambda q, pending, k=key: self.task.stored_with(q, pending, resume((k, q.id)))
                          ) if i == len(asks) - 1 else None
            handles[key] = await self.open(params, "modern", with_round)
            self.task.keys[handles[key].id] = key
        self.task.resume = resume()
        if asks:
            self.task.kept = True
        else:
            await self._save(self.task)
        await self.task.touch()
        waits = [asyncio.ensure_future(self.wait(h)) for h in handles.values()]
        try:
            answers = await asyncio.gather(*waits)
        except BaseException:
            for other in waits:  # one failed, or the call is cancelled: the other questions are not waited for
                other.cancel()
            raise
        responses = dict(static)
        for key, slot in slots.items():
            responses[key] = await self.await_slot(slot)
        for (key, handle), answer in zip(handles.items(), answers, strict=True):
            responses[key] = elicit_result(answer)
            self.broker.mark_resumed(handle.elicitation, {"action": answer.action, "era": "modern", "round": round_no})
        return responses

    # ---- a call the server made a task (mcp/tasks.py follows it; these are its hooks)

    async def following(self, task_id: str) -> None:
        """The task's id is stored with the call at once (the spec asks clients to persist it): a restart follows
        the task again. The call's own timeout stops here for good: the server answers each poll (each bounded on
        its own), and the task's ttl is the server's backstop for work that runs long by design."""
        if not self._following:
            self._following = True
            self.deadline.pause()
        if self.task.resume is None or self.task.resume.task != task_id:
            self.task.resume = Resume(round=0, task=task_id)
            await self._save(self.task)
            await self.task.touch()  # a transparent client's call is a task from now on (surface/driver.py)

    def keeps_going(self) -> bool:
        return self.task.suspended

    async def answer_input(self, key: str, request: Any) -> dict[str, Any]:
        """One of the task's inputRequests: an elicitation is one broker question (the key its upstreamId; a key
        a restart finds stored is that same question, re-attached), roots and sampling go as in a round. The
        response, once given: what tasks/update carries under `key`."""
        method, params = self._planned(key, request)
        if method == "roots/list" and not self.client_roots():
            return {"roots": self.roots()}
        if method != "elicitation/create":
            return await self.via_client(key, method, params)
        resume = self.task.resume
        assert resume is not None and resume.task is not None  # following() came first
        stored = resume.keys.get(key)
        if stored is not None:
            return await self._reattached(stored)

        def record(q: Elicitation, pending: bool) -> StoredTask:
            resume.keys[key] = q.id  # in this commit and every later one: each question's commit holds them all
            return self.task.stored_with(q, pending, resume)

        async with self._opening:  # one at a time: each commit's keys include every question opened before it
            handle = await self.open(params, "modern", record, upstream_id=key)
        self.task.keys[handle.id] = key
        self.task.kept = True
        await self.task.touch()
        answer = await self.wait(handle)
        self.broker.mark_resumed(handle.elicitation, {"action": answer.action, "era": "modern", "task": resume.task})
        return elicit_result(answer)

    async def _reattached(self, eid: str) -> dict[str, Any]:
        """A question a daemon before this one opened for the task: its answer if it has one (sent again: the
        server ignores an answer to what it no longer asks), else it is waited for like any."""
        q, answer = await self.broker.get(eid)
        if answer is None and q.state == "pending":
            handle = self.broker.handle(eid, q)
            if handle is None:
                raise CallFailed(f"{eid} cannot be re-attached after the restart")
            self._opened(handle)
            await self.task.touch()
            answer = await self.wait(handle)
        if answer is None:  # it ended without an answer (abandoned): the server is not left waiting for it
            return {"action": "cancel"}
        self.broker.mark_resumed(q, {"action": answer.action, "era": "modern", "afterRestart": True})
        return usable(answer)

    async def withdrawn(self, key: str) -> None:
        """Said before the question's wait is cancelled: the abandonment that follows gives this reason."""
        for eid, k in self.task.keys.items():
            if k == key:
                self._withdrawn[eid] = (f"server {self.conn.name!r} no longer asks it: its task went on without "
                                        "this answer")


def usable(answer: Answer) -> dict[str, Any]:
    """A stored answer as the ElicitResult to send after a restart: never one whose credential was redacted."""
    if answer.content and REDACTED in answer.content.values():
        raise CallFailed(f"the answer to {answer.id} held a credential, which mcpx never stores; after the "
                         "restart the call cannot be re-driven with it — run the call again")
    return elicit_result(answer)
