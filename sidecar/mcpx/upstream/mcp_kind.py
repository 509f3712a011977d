"""MCP servers as a kind of upstream (upstream/kind.py): stdio and HTTP, in either era, their instances pooled.

A modern-era call waiting for answers is durable: its questions, the pending requestState and
its arguments are in the store, so after a kill -9 the new daemon re-attaches to the questions
and, once they are answered, sends the retry that was due. A call the server made a task is
stored with the task's id, and the new daemon follows the task again: its open questions are
the same ones, and its result is the call's. A legacy call cannot survive its server process;
it remembers nothing, and a restart fails it with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel

from mcpx.broker.broker import Broker
from mcpx.call.deadline import PausableDeadline
from mcpx.call.failures import CallError
from mcpx.call.lean import LeanCall
from mcpx.call.record import Call
from mcpx.call.run import CallRun
from mcpx.config.models import HttpServer, StdioServer
from mcpx.config.source import ConfigSource
from mcpx.mcp import jsonrpc
from mcpx.mcp.http_client import Authorizer
from mcpx.mcp.input_required import RoundsError
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.peer import PeerClosed
from mcpx.mcp.protocol import Era
from mcpx.mcp.stdio import Spawned
from mcpx.mcp.tasks import TaskError, TaskGone
from mcpx.shared.upstream_errors import UpstreamError
from mcpx.upstream.connection import NeedsLegacy, Sending
from mcpx.upstream.hooks import ServerToCall
from mcpx.upstream.kind import CallScope, InstanceInfo, Tool, ToolResult, UpstreamHost
from mcpx.upstream.mcp_call import McpCallHooks, elicit_result, usable
from mcpx.upstream.pool import Lease, Pool, entry_fingerprint
from mcpx.upstream.resume import Resume

log = logging.getLogger("mcpx.upstream")


class McpKind:
    """MCP servers, stdio and HTTP (upstream/kind.py's `UpstreamKind`)."""

    name: str = "mcp"
    entries: tuple[type[BaseModel], ...] = (StdioServer, HttpServer)

    def __init__(self, broker: Broker, settings: ConfigSource, host: UpstreamHost, *, spawned: Spawned | None = None,
                 authorizer: Callable[[str, HttpServer], Authorizer] | None = None) -> None:
        self.broker = broker
        self.settings = settings
        # spawned: where the processes the pool starts are recorded (upstream/children.py); authorizer: an HTTP
        # server's login (oauth/logins.py)
        self.pool = Pool(lambda: settings.config.servers, self._recall_era, self._remember_era, host.tools_changed,
                         spawned=spawned, authorizer=authorizer)

    # ---- the kind's life

    def start(self) -> None:
        self.pool.start()

    async def stop(self) -> None:
        await self.pool.close()

    async def reconfigure(self) -> None:
        await self.pool.reconfigure()

    async def instances(self) -> list[InstanceInfo]:
        return await self.pool.describe()

    # ---- era memory (probed once per server and kept across restarts)

    async def _recall_era(self, server: str, fingerprint: str) -> Era | None:
        value = await self.broker.fact(f"era:{server}:{fingerprint}")
        return value if value in ("legacy", "modern") else None

    async def _remember_era(self, server: str, fingerprint: str, era: Era) -> None:
        await self.broker.set_fact(f"era:{server}:{fingerprint}", era)

    # ---- tools

    async def tools(self, server: str) -> list[Tool]:
        async with self.pool.lease(server, "*") as conn:
            return await conn.list_tools(refresh=True)

    # ---- calls

    async def call(self, scope: CallScope, sent: LeanSend | None = None) -> ToolResult:
        """The call's result. `sent`: its request, sent already on the lean path (`send_plain`): taken on from there."""
        run = _run(scope)
        return await self._said(run.call, self._call_with_era(run, run.entry.timeout, era=None, sent=sent))

    def send_plain(self, lean: LeanCall, entry: StdioServer, lease: Lease, go_on: GoOn) -> LeanSend:
        """A plain call's request, written now on the lean path (call/lean.py) on a stdio server's instance taken
        already: what its runner, should it be promoted, continues from (`go_on`, the gateway's: `call` with it),
        as `_call_with_era` would have sent it. Its hooks and deadline are made only if it needs them."""
        r = lean.request
        sent = LeanSend(self.broker, lean, entry, lease, go_on)
        sent.sending = sent.conn.send_call_now(r.tool, r.arguments, sent.made_hooks, r.meta, r.followed)
        return sent

    async def follow(self, scope: CallScope, state: Mapping[str, Any]) -> ToolResult:
        run = _run(scope)
        return await self._said(run.call, self._redrive(run, Resume.model_validate(dict(state))))

    @staticmethod
    async def _said(call: Call, work: Any) -> ToolResult:
        """The call's result; what went wrong, in words that name the server and the question (CallError)."""
        r = call.request
        try:
            result: ToolResult = await work
            return result
        except (UpstreamError, RoundsError, TaskError) as exc:
            raise CallError(str(exc)) from None
        except PeerClosed as exc:
            named = [*call.abandoned, *call.open]
            which = f" while question {named[-1]} was open" if named else ""
            raise CallError(f"server {r.server!r} went away during {r.tool}{which}: {exc}") from None
        except RpcError as exc:
            raise CallError(f"server {r.server!r} answered {r.tool} with error {exc.code}: {exc.message}",
                             result={"error": exc.to_error()}) from None

    async def _call_with_era(self, scope: CallRun, timeout: float, era: Era | None,
                             sent: LeanSend | None = None) -> ToolResult:
        call, r = scope.call, scope.request
        elicit = self.settings.config.elicit
        lease = sent.lease if sent is not None else self.pool.lease(
            r.server, r.session, era=r.era if r.transparent else era, declared=r.declared, tool=r.tool)
        async with lease as conn:
            if sent is None:
                call.connected(conn.era)
                deadline = PausableDeadline(timeout)
                hooks = McpCallHooks(self.broker, call, conn, deadline, scope.save)
            else:
                deadline, hooks = sent.deadline, sent.hooks
            try:
                return await deadline.run(conn.call_tool(r.tool, r.arguments, hooks, elicit.max_rounds, r.meta,
                                                         r.followed, sending=None if sent is None else sent.sending),
                                          f"{r.server}.{r.tool}", begun=sent is not None)
            except NeedsLegacy as exc:
                if r.transparent:
                    # as if mcpx were not there: the client hears what the server said to its era
                    if exc.error is not None:
                        raise exc.error from None
                    return exc.result or {}
                if era == "legacy":
                    raise
                log.info("server %s answers server/discover but asks over a legacy back-channel; calling it in "
                         "the legacy era from now on", r.server)
                await self.pool.learn_era(r.server, entry_fingerprint(self.pool.entry(r.server)), "legacy")
                self.pool.retire(conn)
        return await self._call_with_era(scope, timeout, era="legacy")

    # ---- after a restart

    async def _redrive(self, scope: CallRun, resume: Resume) -> ToolResult:
        """Wait for the answers that were due, then send the retry the old daemon never got to send."""
        call, r = scope.call, scope.request
        if resume.task is not None:
            return await self._refollow(scope, resume.task)
        entry = self.pool.entry(r.server)
        responses: dict[str, Any] = dict(resume.static)
        waits: dict[str, Any] = {}
        for key, eid in resume.keys.items():
            q, answer = await self.broker.get(eid)
            if answer is not None:
                responses[key] = usable(answer)
            elif q.state == "pending":
                handle = self.broker.handle(eid, q)
                if handle is None:
                    raise CallError(f"{eid} cannot be re-attached after the restart")
                call.asked(q, pending=True, tell=False)
                waits[key] = handle
            else:
                raise CallError(f"{eid} was {q.state} during the restart: {q.state_reason or 'no answer'}")
        call.running("input-required" if waits else "running")
        for key, handle in waits.items():
            answer = await handle.answer()
            call.settled(handle.id)
            responses[key] = elicit_result(answer)
        call.running("running")
        deadline = PausableDeadline(entry.timeout)
        async with self.pool.lease(r.server, r.session, era="modern", declared=r.declared) as conn:
            call.connected(conn.era)
            hooks = McpCallHooks(self.broker, call, conn, deadline, scope.save)
            for eid in resume.keys.values():
                q, _ = await self.broker.get(eid)
                self.broker.mark_resumed(q, {"era": "modern", "round": resume.round, "afterRestart": True})
            try:
                return await deadline.run(conn.resume_modern(
                    r.tool, r.arguments, responses, resume.request_state, hooks,
                    self.settings.config.elicit.max_rounds, resume.round), f"{r.server}.{r.tool}")
            except RpcError as exc:
                if exc.code != jsonrpc.INVALID_PARAMS or hooks.rounds:
                    raise
                raise CallError(forgotten(r.server, r.tool, exc, list(resume.keys.values()))) from None

    async def _refollow(self, scope: CallRun, upstream_task: str) -> ToolResult:
        """Follow again the task the server made of the call: its questions still pending are re-attached as its
        polls list them again, their answers go with tasks/update, and its result is the call's. A task the server
        no longer knows ends the call, its questions abandoned with the reason."""
        call, r = scope.call, scope.request
        entry = self.pool.entry(r.server)
        async with self.pool.lease(r.server, r.session, era="modern", declared=r.declared, tool=r.tool) as conn:
            call.connected(conn.era)
            hooks = McpCallHooks(self.broker, call, conn, scope.deadline, scope.save)
            try:
                return await conn.follow_task(upstream_task, r.tool, hooks)
            except TaskGone as exc:
                why = ("a stdio server's task lives in its process, which ended with the daemon that started it"
                       if isinstance(entry, StdioServer) else "it expired, or the server lost it")
                reason = f"after the mcpx daemon restarted, {exc} ({why})"
                call.note_end_reason(reason)
                for eid in (hooks.resume.keys.values() if hooks.resume else ()):
                    await self.broker.abandon(eid, reason)
                raise CallError(reason) from None


GoOn = Callable[[Call, "LeanSend"], Awaitable[ToolResult]]  # how a promoted lean call goes on (the gateway's)


class LeanSend:
    """A plain call's request sent on the lean path (call/lean.py's `SentCall`): the instance it holds and the request
    in flight, for the runner that continues it if it is promoted; its hooks and deadline, made the first time they
    are needed (its server sends it something, or it is promoted): a call that ends plainly never has them."""

    __slots__ = ("_deadline", "_go_on", "_hooks", "_lean", "broker", "conn", "due", "entry", "era", "lease",
                 "sending", "since")

    def __init__(self, broker: Broker, lean: LeanCall, entry: StdioServer, lease: Lease, go_on: GoOn) -> None:
        self.broker, self._lean, self.entry, self.lease, self._go_on = broker, lean, entry, lease, go_on
        self.conn = lease.conn
        self.era = self.conn.era
        self.since = asyncio.get_running_loop().time()  # the call's deadline runs from its request's writing
        self.due = self.since + entry.timeout
        self.sending: Sending | None = None
        self._deadline: PausableDeadline | None = None
        self._hooks: McpCallHooks | None = None

    @property
    def deadline(self) -> PausableDeadline:
        if self._deadline is None:
            self._deadline = PausableDeadline(self.entry.timeout, since=self.since)
        return self._deadline

    @property
    def hooks(self) -> McpCallHooks:
        """The hooks its server's requests reach (made with its `Call`: what they touch promotes it)."""
        if self._hooks is None:
            self._hooks = McpCallHooks(self.broker, self._lean.call, self.conn, self.deadline, self._lean.save)
        return self._hooks

    def made_hooks(self) -> ServerToCall:
        return self.hooks

    def when_replied(self, heard: Callable[[], None]) -> None:
        assert self.sending is not None
        self.sending.first.when_replied(heard)

    def plain(self) -> dict[str, Any] | None:
        assert self.sending is not None
        result = self.conn.plain_result(self.sending)
        if result is not None:
            self.lease.release()
            # the request in flight let go with the lease: its call on the wire holds this (`made_hooks`)
            self.sending = None
        return result

    def taken_on(self, call: Call) -> Awaitable[ToolResult]:
        return self._go_on(call, self)


def _run(scope: CallScope) -> CallRun:
    """The concrete scope the gateway hands every kind: an MCP server's own questions need the call itself."""
    assert isinstance(scope, CallRun), scope
    return scope


def forgotten(server: str, tool: str, exc: RpcError, questions: list[str]) -> str:
    """A server that refused the retry mcpx re-drove after a restart (`invalid requestState`, -32602): in words."""
    answered = f" (the answers to {', '.join(questions)} are kept: mcpx elicit show ID)" if questions else ""
    return (f"server {server!r} no longer knows this call of {tool}: after the mcpx daemon restarted, mcpx sent the "
            f"retry that was due with the state the server had given it, and the server refused it (error "
            f"{exc.code}: {exc.message}). A server that keeps a call's state in its process, or signs it with a "
            f"key it draws at each start, forgets its calls when it restarts. Run the call again{answered}.")

