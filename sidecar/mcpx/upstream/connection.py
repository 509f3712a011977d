"""One connection to one upstream server instance, in whichever era it speaks.

Legacy: `initialize` offering 2025-11-25; the server asks mid-call with `elicitation/create`,
`ping`, `roots/list`, and may announce `notifications/elicitation/complete`.
Modern (2026-07-28): `server/discover` first; every request carries `_meta`; a call may come
back `input_required` and is retried with `inputResponses` and the `requestState` verbatim, or (from a
server that declared the Tasks extension, when mcpx declared it on the call) as a task, which is followed
with `tasks/get` and answered with `tasks/update` (mcp/tasks.py). Which calls declare it: `follows_tasks`.

A legacy instance may carry several calls at once; which of them a request of the server's belongs
to is `attribution.py`'s rule. What a call offers its server is `hooks.ServerToCall`, implemented
by `mcp_call.McpCallHooks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcpx.config.environment import command_problem, server_environment
from mcpx.config.models import START_FLOOR, HttpServer, ServerConfig, StdioServer
from mcpx.mcp import input_required, jsonrpc, tasks
from mcpx.mcp.http_client import RELATED, Authorizer, HttpChannel
from mcpx.mcp.jsonrpc import Message, RpcError
from mcpx.mcp.peer import Peer, PeerClosed, Sent
from mcpx.mcp.protocol import (
    ElicitParams,
    Era,
    legacy_client_capabilities,
    modern_meta,
)
from mcpx.mcp.stdio import ProcessChannel, Spawned, StartError
from mcpx.shared.upstream_errors import UpstreamError
from mcpx.upstream import secrets
from mcpx.upstream.attribution import Attribution, InFlight, UnattributedRequest
from mcpx.upstream.handshake import ServerFacts, settle_era, start_bound
from mcpx.upstream.headers import param_headers, x_mcp_header_problem
from mcpx.upstream.hooks import ConnectionEvents, ServerToCall
from mcpx.upstream.roots import declared_to, roots_of

log = logging.getLogger("mcpx.upstream")

# How the SDKs say "I can only ask over a legacy back-channel" on a modern request: the mcp SDK
# answers with an error, FastMCP with an isError result. Either way the call is re-driven in the
# legacy era, where the question can be asked.
BACK_CHANNEL = re.compile(r"server-initiated requests.*(back-channel|unavailable)|back-channel for server-initiated",
                          re.IGNORECASE | re.DOTALL)


def asks_over_back_channel(result: dict[str, Any]) -> bool:
    if not result.get("isError"):
        return False
    texts = " ".join(c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict))
    return bool(BACK_CHANNEL.search(texts))


class NeedsLegacy(UpstreamError):
    """A server that answered `server/discover` yet asks over a legacy back-channel (the SDK's plain ctx.elicit)."""

    def __init__(self, message: str, error: RpcError | None = None, result: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.error, self.result = error, result  # what the server said, for a caller that wants it verbatim


class UpstreamConnection:
    def __init__(self, name: str, entry: ServerConfig, session: str, declared: dict[str, Any] | None = None, *,
                 events: ConnectionEvents, spawned: Spawned | None = None, auth: Authorizer | None = None,
                 ) -> None:
        self.name = name
        self.spawned = spawned  # told of its process (upstream/children.py), for a stdio server
        self.auth = auth  # an HTTP server's login: its channel asks it for the Authorization header
        self.entry = entry
        self.session = session
        # what mcpx tells this server it can deliver: its own default, or a transparent client's own capabilities;
        # without roots when its config says it gets none
        self.declared = declared_to(entry, declared if declared is not None else legacy_client_capabilities())
        self._own_caps = declared is None  # mcpx's own capabilities, not a transparent client's (follows_tasks)
        self.channel: ProcessChannel | HttpChannel | None = None
        self.peer: Peer | None = None
        self._facts: ServerFacts | None = None
        self.era: Era | None = None  # facts.era, read on every request of every call: kept, not looked up
        self.attribution = Attribution(name)  # the calls in flight, and whose each request of the server's is
        self._tokens = itertools.count(1)
        self.asking = 0  # requests of the server's that wait for someone (a person, the client) or to be told apart
        self._asked: dict[str, InFlight] = {}  # a url-mode question's elicitationId -> the call it is for
        self._completed: set[str] = set()  # completions announced before their question's owner was known
        self.events = events  # what the pool hears of this instance: what calls did, nothing_pending, its tools changed
        # the clients that forwarded requests through this instance (/mcp/SERVER): who hears its other
        # notifications — resources/updated only whoever subscribed to the resource, the rest everyone listening
        self._listeners: dict[object, _Listener] = {}
        self.tools: list[dict[str, Any]] | None = None
        self.notes: list[str] = []  # what the server was not given (a ${NAME} not set), told with any failure
        self._modern_meta: dict[str, Any] | None = None  # what every modern request's _meta holds; never changed
        self._tasks_meta: dict[str, Any] | None = None  # the same, declaring the Tasks extension
        self._task_tools: set[str] = set()  # tools this server refused to run but as a task (follows_tasks)

    # ---- life

    @property
    def alive(self) -> bool:
        return self.peer is not None and self.peer.alive

    @property
    def pid(self) -> int | None:
        return self.channel.pid if isinstance(self.channel, ProcessChannel) else None

    @property
    def facts(self) -> ServerFacts | None:
        """What the handshake settled: the era, the protocol version, the server's capabilities."""
        return self._facts

    @facts.setter
    def facts(self, facts: ServerFacts | None) -> None:
        self._facts = facts
        self.era = facts.era if facts else None

    @property
    def calls(self) -> list[InFlight]:
        return self.attribution.calls

    def describe(self) -> str:
        return f"`{self.entry.shown}`" if isinstance(self.entry, StdioServer) else self.entry.shown

    async def open(self, era_hint: Era | None = None) -> ServerFacts:
        """Start the server (stdio) or reach it (HTTP), then settle on an era.

        Each request of the handshake waits as long as the start may take (`start_bound`): a
        server that is slow to start is waited for, and silence is a failure, never an era.
        """
        bound = start_bound(self.entry)
        await self._connect()
        try:
            facts = await settle_era(_Handshaking(self, bound), self.name, self.declared, era_hint,
                                     "process" if isinstance(self.entry, StdioServer) else "session")
        except (PeerClosed, RpcError, UpstreamError) as exc:
            reason = self._failure(exc)
            await self.close()
            raise self._failed(reason) from None
        except BaseException:
            await self.close()  # cancelled while it started: the process must not outlive the call that wanted it
            raise
        self.facts = facts
        if isinstance(self.channel, HttpChannel):
            self.channel.protocol_version = facts.version
        log.info("upstream %s: %s era, protocol %s", self.name, facts.era, facts.version)
        return facts

    async def _connect(self) -> None:
        if isinstance(self.entry, StdioServer):
            given = server_environment(self.entry.env, os.environ, await secrets.read(self.name, self.entry))
            self.notes = given.notes(self.name)
            for note in self.notes:
                log.warning("%s", note)
            log.info("upstream %s: starting %s", self.name, self.describe())
            try:
                self.channel = await ProcessChannel.start(self.name, self.entry.command, self.entry.args, given.env,
                                                          self.entry.cwd, self.spawned)
            except StartError as exc:
                # exec's own words are a bare "[Errno 2]" (uvloop names no file): say what is missing, as check does
                why = command_problem(self.entry.command, given.env, self.entry.cwd)
                if why is None:
                    raise self._failed(str(exc)) from None
                key, words = why
                raise self._failed(f"server {self.name!r} could not start {self.describe()}: "
                                   + (f"its cwd {words}" if key == "cwd" else words)) from None
        else:
            assert isinstance(self.entry, HttpServer)
            self.channel = HttpChannel(self.name, self.entry.url, self.entry.headers, auth=self.auth)
        self.peer = Peer(self.channel, self._on_request, self._on_notification, name=f"upstream:{self.name}")
        self.peer.start()

    def _failed(self, reason: str) -> UpstreamError:
        """The error a failed start becomes: logged, with what the server was not given."""
        reason = "\n".join([reason, *self.notes])
        log.warning("upstream %s: %s", self.name, reason)
        return UpstreamError(reason)

    def _failure(self, exc: Exception) -> str:
        if isinstance(exc, PeerClosed) or (self.peer is not None and not self.peer.alive):
            detail = self.channel.describe_exit() if self.channel else str(exc)
            return f"server {self.name!r} did not start: {detail}"
        if isinstance(exc, UpstreamError):
            return str(exc)
        return f"server {self.name!r} ({self.describe()}) refused the handshake: {exc}"

    async def close(self) -> None:
        if self.peer is not None:
            await self.peer.close()
        elif self.channel is not None:
            await self.channel.close()

    # ---- requests to the server

    def _params(self, params: dict[str, Any], meta: dict[str, Any] | None = None, tasks_too: bool = False,
                ) -> dict[str, Any]:
        """Modern requests carry version, capabilities and client info in _meta, every one of them; with
        `tasks_too`, capabilities that declare the Tasks extension (the client declares it per request)."""
        if self.era == "modern":
            if tasks_too:
                if self._tasks_meta is None:
                    self._tasks_meta = modern_meta(tasks.declaring(self.declared))
                base = self._tasks_meta
            else:
                if self._modern_meta is None:
                    self._modern_meta = modern_meta(self.declared)  # the same on every request of this connection
                base = self._modern_meta
            extra = params.get("_meta")
            if extra or meta:
                return {**params, "_meta": {**base, **(extra or {}), **(meta or {})}}
            return {**params, "_meta": base}
        if meta:
            return {**params, "_meta": {**(params.get("_meta") or {}), **meta}}
        return params

    async def request(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = 30.0,
                      ) -> dict[str, Any]:
        assert self.peer is not None
        return await self.peer.request(method, self._params(params or {}), timeout=timeout)

    async def list_tools(self, refresh: bool = False) -> list[dict[str, Any]]:
        if self.tools is not None and not refresh:
            return self.tools
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _page in range(100):  # a paginator that never ends must not hang us
            res = await self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(t for t in res.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str))
            cursor = res.get("nextCursor")
            if not cursor:
                break
        if isinstance(self.channel, HttpChannel):
            tools = [t for t in tools if self._headers_ok(t)]
            self.channel.param_headers = {t["name"]: param_headers(t) for t in tools}
        self.tools = tools
        return tools

    def _headers_ok(self, tool: dict[str, Any]) -> bool:
        problem = x_mcp_header_problem(tool)
        if problem:
            log.warning("upstream %s: tool %r left out: its x-mcp-header annotations are invalid (%s)", self.name,
                        tool.get("name"), problem)
        return problem is None

    async def call_tool(self, tool: str, arguments: dict[str, Any], hooks: ServerToCall, max_rounds: int = 8,
                        meta: dict[str, Any] | None = None, followed: bool = True, sending: Sending | None = None,
                        ) -> dict[str, Any]:
        """The tool's result. Questions go to `hooks`; a modern call is retried until it completes. `sending`: the
        call's first tools/call, written already (`send_call`: a plain call's lean path sent it, and a runner takes
        it on from there); else it is sent now.

        Progress is asked for, under mcpx's own token, when the caller asked for it (it hears it by its own token)
        or someone follows the call apart from its reply (`followed`: the call keeps the last report for `mcpx
        call` on a terminal, GET /v1/tasks); a plain call nobody follows asks the server for nothing more than
        the call (docs/choices.md, "What mcpx asks of an upstream")."""
        if sending is None:
            sending = await self.send_call(tool, arguments, hooks, meta, followed)
        answered = False  # the server answered the call (a result or an error), as opposed to mcpx leaving it
        try:
            if self.era == "legacy":
                result = await sending.first.reply()
            else:
                result = await self._drive(sending.params, hooks, max_rounds, sending.meta, 0, sending.first)
            answered = True
            return result
        except (RpcError, UpstreamError, input_required.RoundsError, tasks.TaskError):
            answered = True  # what the server said ended it: an error reply, or a result mcpx would not take
            raise
        finally:
            self._end(sending.call, answered)

    async def send_call(self, tool: str, arguments: dict[str, Any], hooks: ServerToCall,
                        meta: dict[str, Any] | None = None, followed: bool = True) -> Sending:
        """A call's first tools/call, written: the call is in flight on this connection from now on, and its reply is
        awaited apart (`call_tool` with `sending`, or `plain_result` once it came)."""
        assert self.peer is not None
        if isinstance(self.channel, HttpChannel) and self.era == "modern" and self.tools is None:
            await self.list_tools()  # its x-mcp-header arguments must be mirrored into Mcp-Param-* headers
        call, params, meta = self._begin(tool, arguments, hooks, meta, followed)
        try:
            first = await self.peer.send_request("tools/call", *self._first(call, params, meta))
        except BaseException:
            self._end(call, False)
            raise
        return Sending(call, params, meta, first)

    def send_call_now(self, tool: str, arguments: dict[str, Any], hooks: Callable[[], ServerToCall],
                      meta: dict[str, Any] | None = None, followed: bool = True) -> Sending:
        """`send_call` from a callback, on a stdio server (a plain call's lean path, call/lean.py): written now. Its
        `hooks` are made the first time the server sends the call anything (InFlight's `made`)."""
        assert self.peer is not None and isinstance(self.channel, ProcessChannel)
        call, params, meta = self._begin(tool, arguments, None, meta, followed, hooks)
        try:
            first = self.peer.send_request_now("tools/call", *self._first(call, params, meta))
        except BaseException:
            self._end(call, False)
            raise
        return Sending(call, params, meta, first)

    def _begin(self, tool: str, arguments: dict[str, Any], hooks: ServerToCall | None, meta: dict[str, Any] | None,
               followed: bool, made: Callable[[], ServerToCall] | None = None,
               ) -> tuple[InFlight, dict[str, Any], dict[str, Any] | None]:
        """A call in flight on this connection from now on: its params, and its _meta with mcpx's own progress token
        when the caller asked for progress or the call is followed."""
        call = InFlight(hooks, tool, made=made)
        call.progress = (meta or {}).get("progressToken")
        if call.progress is not None or followed:
            call.wire_token = f"mcpx-{next(self._tokens)}"
            meta = {**(meta or {}), "progressToken": call.wire_token}
        self.attribution.begin(call)
        return call, {"name": tool, "arguments": arguments}, meta

    def _first(self, call: InFlight, params: dict[str, Any], meta: dict[str, Any] | None,
               ) -> tuple[dict[str, Any], Callable[[jsonrpc.Id], None] | None]:
        """The first tools/call's params as this era sends them, and who hears its id (legacy: its attribution)."""
        if self.era == "legacy":
            return self._params(params, meta), call.numbered
        return self._params(params, meta, self.follows_tasks(call.tool)), None

    def plain_result(self, sending: Sending) -> dict[str, Any] | None:
        """The call's result when its first reply, come already, ends it plainly: a result (legacy), a complete one
        (modern: not input_required, not a task, not a back-channel refusal); the call is then over on this
        connection. None for anything else (an error too): `call_tool` takes it on from there, as it would have."""
        first = sending.first
        if not first.future.done() or first.future.cancelled() or first.future.exception() is not None:
            return None
        reply = first.future.result()
        result = reply.get("result")
        if "error" in reply or not isinstance(result, dict):
            return None
        if self.era != "legacy" and (result.get("resultType", "complete") != "complete"
                                     or (result.get("isError") and asks_over_back_channel(result))):
            return None
        first.result()  # the reply taken: it is no longer pending
        self._end(sending.call, True)
        return result

    def _end(self, call: InFlight, answered: bool) -> None:
        self.attribution.end(call, answered)
        if answered and not call.asked and self.era == "legacy":  # a modern call's questions come in its result
            self._learnt(call, asks=False)
        if self._asked:  # a question in hand of some call's (rarely): no list made on every plain call's end
            for eid in [e for e, c in self._asked.items() if c is call]:
                del self._asked[eid]

    async def resume_modern(self, tool: str, arguments: dict[str, Any], responses: dict[str, Any],
                            request_state: str | None, hooks: ServerToCall, max_rounds: int, round_no: int,
                            ) -> dict[str, Any]:
        """Re-drive a modern call after a restart: send the retry that was due, then carry on as usual."""
        params: dict[str, Any] = {"name": tool, "arguments": arguments, "inputResponses": responses}
        if request_state is not None:
            params["requestState"] = request_state
        call = InFlight(hooks, tool)
        self.attribution.begin(call)
        try:
            return await self._drive(params, hooks, max_rounds, None, round_no)
        finally:
            self._end(call, False)  # modern: its questions come back in its own result, none is ever held

    def follows_tasks(self, tool: str) -> bool:
        """Whether a call of `tool` declares the Tasks extension, which lets the server make it a task (mcpx then
        follows it: declared only where followed). Never to a transparent client's server (`/mcp/SERVER`: the
        server sees that client's own capabilities), nor in the legacy era (the extension is the modern era's).

        To a modern server that declared the extension: every call over HTTP, since there a task outlives the
        daemon (a restart finds it again, its questions and its result with it) and the server, which alone
        decides, makes a task only of what it wants run as one. Over stdio only a tool the server refused to run
        otherwise (the refusal names the extension; then the call is sent again declaring it, and so is every
        later call of that tool here): a stdio server's task dies with its process, so it buys no durability, and
        a tool that may run either way answers a plain call at once rather than after a poll interval."""
        if self.era != "modern" or self._facts is None or not self._own_caps:
            return False
        if tool in self._task_tools:
            return True
        return isinstance(self.channel, HttpChannel) and tasks.offered(self._facts.capabilities)

    async def _drive(self, params: dict[str, Any], hooks: ServerToCall, max_rounds: int,
                     meta: dict[str, Any] | None, round_no: int, first: Sent | None = None) -> dict[str, Any]:
        """The call's rounds, through the one driver of them (mcp/input_required.py): its questions go to `hooks`.
        A server that can only ask over a legacy back-channel says so here (NeedsLegacy). A task handle it answers
        with instead is followed to the task's end (`_follow`). `first`: the first round, sent already."""
        tool = params["name"]
        declare = self.follows_tasks(tool)

        async def send(round_params: dict[str, Any]) -> dict[str, Any]:
            nonlocal declare, first
            assert self.peer is not None
            try:
                if first is not None:
                    sent, first = first, None
                    return await sent.reply()
                return await self.peer.request("tools/call", self._params(round_params, meta, declare))
            except RpcError as exc:
                if BACK_CHANNEL.search(exc.message):
                    raise NeedsLegacy(exc.message, error=exc) from None
                if not declare and self._own_caps and tasks.requires_extension(exc):
                    log.info("upstream %s runs %s only as a task: declaring the Tasks extension on its calls",
                             self.name, tool)
                    self._task_tools.add(tool)
                    declare = True
                    return await self.peer.request("tools/call", self._params(round_params, meta, True))
                raise

        res = await input_required.drive(self.name, params, send, hooks.answer_round, max_rounds, round_no)
        if tasks.is_task(res):
            try:
                handle = tasks.TaskHandle.model_validate(res)
            except ValueError as exc:
                raise UpstreamError(f"server {self.name!r} answered {tool} with a task handle mcpx cannot read: "
                                    f"{exc}") from None
            return await self._follow(handle, hooks)
        if asks_over_back_channel(res):
            raise NeedsLegacy(" ".join(c.get("text", "") for c in res.get("content") or []), result=res)
        return res

    async def follow_task(self, task_id: str, tool: str, hooks: ServerToCall) -> dict[str, Any]:
        """Follow again a task a call became before a restart: its result, once it completes."""
        call = InFlight(hooks, tool)
        self.attribution.begin(call)
        try:
            return await self._follow(tasks.TaskHandle(task_id=task_id), hooks)
        finally:
            self._end(call, False)

    async def _follow(self, handle: tasks.TaskHandle, hooks: ServerToCall) -> dict[str, Any]:
        """The task to its end (mcp/tasks.py's `follow`): its requests go to `hooks`, one key at a time. A call that
        stops following for any reason but the task's own end sends `tasks/cancel`, unless the call goes on
        without this daemon (it is stopping; the next one follows the task again)."""
        wire = _TaskWire(self)
        await hooks.following(handle.task_id)
        try:
            return await tasks.follow(self.name, handle, wire, hooks.answer_input, hooks.withdrawn)
        except (tasks.TaskError, RpcError):
            raise  # the server ended the task itself (or refused to say): nothing to cancel
        except BaseException:
            if not hooks.keeps_going() and self.alive:
                # shielded and bounded: a cancelled call still tells its server, without waiting on it for long
                with contextlib.suppress(Exception):
                    await asyncio.shield(asyncio.wait_for(wire.cancel(handle.task_id), 5))
            raise

    # ---- what the server sends us

    def _current(self) -> ServerToCall | None:
        """The call a notification that names none belongs to: the only one in flight; with several, nobody's
        (a log line then goes to the daemon's log rather than to a caller it may not be about)."""
        return self.calls[0].hooks if len(self.calls) == 1 else None

    def _progress_of(self, params: dict[str, Any]) -> tuple[ServerToCall, dict[str, Any]] | None:
        """Whose progress this is (the call whose request carried its token), with the caller's own token back."""
        token = params.get("progressToken")
        for call in self.calls:
            if call.wire_token is not None and call.wire_token == token:
                return call.hooks, {**params, "progressToken": call.progress}
        return None

    def _fixed_answer(self, method: str) -> dict[str, Any] | None:
        """An answer that is the same whichever call asked (mcpx's own roots for every call in flight), or None:
        then nobody need be told apart, and nobody waits."""
        if not self.calls:
            return {"roots": roots_of(self.entry, None)} if method == "roots/list" else None
        answers = [call.hooks.fixed_answer(method) for call in self.calls]
        return answers[0] if answers[0] is not None and all(a == answers[0] for a in answers) else None

    async def _on_request(self, msg: Message) -> dict[str, Any]:
        method = str(msg.get("method"))
        params = msg.get("params") or {}
        if method == "ping":
            return {}
        ask = self._elicitation(params) if method == "elicitation/create" else None
        if ask is None and method not in ("roots/list", "sampling/createMessage"):
            raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}")
        # only roots have an answer that is the same whichever call asked (`CallHooks.fixed_answer`): a question is
        # not asked of every call in flight's hooks first (which would make each one's, and its `Call`)
        fixed = self._fixed_answer(method) if method == "roots/list" else None
        if fixed is not None:
            return fixed
        self.asking += 1
        try:
            call = await self.attribution.owner(method, jsonrpc.id_of(msg.get(RELATED)))
            if call is None:
                if method == "elicitation/create":
                    raise RpcError(jsonrpc.INTERNAL_ERROR, "mcpx has no call in flight to attach this question to")
                raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}")
            self._learnt(call, asks=True)
            if ask is None:
                return await call.hooks.client_request(method, params)
            eid = ask.elicitation_id
            if eid is not None:
                self._asked[eid] = call
                if eid in self._completed:  # announced while its owner was being worked out: the call keeps it
                    self._completed.discard(eid)
                    await call.hooks.complete(eid)
            # its answer may be written from the step that has it (Peer.reply_early), before its record is built
            return await call.hooks.ask(ask, functools.partial(self.peer.reply_early, msg["id"]) if self.peer else None)
        except UnattributedRequest as exc:
            for suspect in exc.suspects:  # one of them asked: each runs alone from now on
                self._learnt(suspect, asks=True)
            raise
        finally:
            self.asking -= 1
            if not self.asking:
                self.events.nothing_pending()

    def _learnt(self, call: InFlight, asks: bool) -> None:
        call.asked = call.asked or asks
        if call.tool:
            self.events.learnt(call.tool, asks)

    @staticmethod
    def _elicitation(params: dict[str, Any]) -> ElicitParams:
        try:
            ask = ElicitParams.model_validate(params)
        except Exception as exc:
            raise RpcError(jsonrpc.INVALID_PARAMS, f"elicitation/create params are invalid: {exc}") from None
        if ask.mode not in (None, "form", "url"):
            raise RpcError(jsonrpc.INVALID_PARAMS, f"elicitation mode {ask.mode!r} was not declared by mcpx "
                                                   "(it declared form and url)")
        if ask.effective_mode == "url" and not ask.url:
            raise RpcError(jsonrpc.INVALID_PARAMS, "a url-mode elicitation needs url")
        return ask

    async def _on_notification(self, msg: Message) -> None:
        method = msg.get("method")
        params = msg.get("params") or {}
        hooks = self._current()
        if method == "notifications/elicitation/complete":
            eid = params.get("elicitationId")
            if isinstance(eid, str):
                owner = self._asked.get(eid)
                target = owner.hooks if owner is not None else hooks
                if target is not None:
                    await target.complete(eid)
                elif self.attribution.held and len(self._completed) < 1000:
                    self._completed.add(eid)  # its question is held: whoever it turns out to be hears it then
        elif method == "notifications/progress":
            if (owner_of := self._progress_of(params)) is not None:
                await owner_of[0].notify(method, owner_of[1])  # belongs to the call that asked for it
        elif method == "notifications/message" and hooks is not None:
            await hooks.notify(method, params)  # belongs to the call in flight: its caller hears it
        elif method == "notifications/tools/list_changed":
            self.tools = None
            await self.events.tools_changed()
        elif method == "notifications/message":
            log.info("upstream %s says: %.500s", self.name, params.get("data"))
        else:
            uri = params.get("uri") if method == "notifications/resources/updated" else None
            for listener in list(self._listeners.values()):
                if uri is None or uri in listener.uris:
                    await listener.relay(msg)

    # ---- clients that listen (one server passed through)

    def listen(self, client: object, relay: Callable[[Message], Awaitable[None]]) -> None:
        """`client` hears this instance's notifications (its subscriptions' resources/updated, the list changes)
        until `unlisten`. Keyed by the client: one forwarding after another replaces nobody."""
        known = self._listeners.get(client)
        self._listeners[client] = _Listener(relay, known.uris if known is not None else set())

    def subscribed(self, client: object, uri: str, on: bool) -> None:
        """`client` subscribed to (or unsubscribed from) `uri` on this instance: its resources/updated go to it."""
        listener = self._listeners.get(client)
        if listener is not None:
            (listener.uris.add if on else listener.uris.discard)(uri)

    def unlisten(self, client: object) -> None:
        self._listeners.pop(client, None)


@dataclass
class Sending:
    """A call's first tools/call, written (`UpstreamConnection.send_call`): the call in flight, its reply to come."""

    call: InFlight
    params: dict[str, Any]
    meta: dict[str, Any] | None
    first: Sent


class _TaskWire:
    """A followed task's requests (mcp/tasks.TaskWire), each declaring the Tasks extension (the server refuses
    them otherwise) and bounded by the server's `timeout`: each answer is the server's own, and quick."""

    def __init__(self, conn: UpstreamConnection) -> None:
        self.conn = conn

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        conn = self.conn
        assert conn.peer is not None
        return await conn.peer.request(method, conn._params(params, None, True), timeout=max(conn.entry.timeout, 1))

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self._request("tasks/get", {"taskId": task_id})

    async def update(self, task_id: str, responses: dict[str, Any]) -> None:
        params = tasks.UpdateParams(task_id=task_id, input_responses=responses)
        await self._request("tasks/update", params.model_dump(by_alias=True))

    async def cancel(self, task_id: str) -> None:
        await self._request("tasks/cancel", {"taskId": task_id})


@dataclass
class _Listener:
    relay: Callable[[Message], Awaitable[None]]
    uris: set[str]


class _Handshaking:
    """The handshake's wire (handshake.HandshakeWire): the connection being opened, each request bounded by the
    start's own bound."""

    def __init__(self, conn: UpstreamConnection, bound: float) -> None:
        self.conn = conn
        self.bound = bound

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        conn = self.conn
        assert conn.peer is not None
        try:
            return await conn.peer.request(method, params, timeout=self.bound)
        except TimeoutError:
            tail = conn.channel.tail() if isinstance(conn.channel, ProcessChannel) else ""
            raise UpstreamError(
                f"server {conn.name!r} ({conn.describe()}) did not answer {method} within {self.bound:g}s (its "
                f"`timeout`, and at least {START_FLOOR:g}s, is how long a start may take)"
                + (f"; its stderr ends:\n{tail}" if tail else "")) from None

    async def initialized(self, version: str) -> None:
        channel, peer = self.conn.channel, self.conn.peer
        assert peer is not None
        if isinstance(channel, HttpChannel):
            channel.protocol_version = version
        await peer.notify("notifications/initialized")
        if isinstance(channel, HttpChannel):
            channel.listen()

    async def restart(self) -> None:
        await self.conn.close()
        await self.conn._connect()


async def open_connection(name: str, entry: ServerConfig, session: str, era_hint: Era | None,
                          declared: dict[str, Any] | None = None, *, events: ConnectionEvents,
                          spawned: Spawned | None = None, auth: Authorizer | None = None) -> UpstreamConnection:
    conn = UpstreamConnection(name, entry, session, declared, events=events, spawned=spawned, auth=auth)
    await conn.open(era_hint)
    return conn

