"""mcpx as an MCP server, for both eras: the door opencode and every other MCP host comes in by.

Transport-agnostic: `mcpx serve` (a stream) and `/mcp` (Streamable HTTP) hand each request
here with a `ClientState` and an `Outbound`. Capabilities are honest: a client is offered
`elicitation` pass-through only if it declared it; a client that cannot ask gets an early,
actionable result while the upstream call keeps running in the daemon.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from mcpx import __version__
from mcpx.answering import waiting_text
from mcpx.broker.errors import AlreadyAnswered, BrokerError, Gone, InvalidContent
from mcpx.broker.models import Elicitation, SessionSource
from mcpx.ids import is_id
from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import Message, RpcError
from mcpx.mcp.outbound import Outbound
from mcpx.mcp.peer import PeerClosed
from mcpx.mcp.protocol import (
    LATEST_LEGACY,
    LEGACY_VERSIONS,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_SESSION,
    META_VERSION,
    MODERN_VERSIONS,
    ClientCapabilities,
    Era,
    InitializeParams,
    versions_with_url_mode,
)
from mcpx.mcp.request_state import RequestStates, binding
from mcpx.mcp.surface_tools import MCPX_TOOLS, SESSION_ARG, listed, text_result
from mcpx.upstream.calls import DONE_STATES, CallRequest, CallTask, Slot, routable
from mcpx.upstream.gateway import UnknownServer, UnknownTask

if TYPE_CHECKING:
    from mcpx.daemon.runtime import Runtime

log = logging.getLogger("mcpx.surface")

SERVER_INFO = {"name": "mcpx", "version": __version__}
ANSWER_WAIT = 45.0  # how long `wait: true` holds a tool call: well inside a host's 60 s MCP timeout
HEARTBEAT = 10.0  # progress notifications keep a host's timeout from firing while a call is honestly busy
FORWARDED = ("resources/list", "resources/templates/list", "resources/read", "resources/subscribe",
             "resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel")
PASSED_CAPABILITIES = ("resources", "prompts", "completions", "logging")
CACHEABLE = ("server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list",
             "resources/read")


@dataclass(eq=False)
class ClientState:
    """What mcpx knows of one client: its era and version, what it declared, where it runs."""

    era: Era = "legacy"
    version: str | None = None
    capabilities: ClientCapabilities = field(default_factory=ClientCapabilities)
    client_info: dict[str, Any] = field(default_factory=dict)
    scope: str | None = None  # one server, passed through under its own names; None: all, as SERVER_TOOL
    env_session: str | None = None  # MCPX_SESSION_ID of `mcpx serve`, or an X-Mcpx-Session header
    env_source: SessionSource = "env"
    cwd: str | None = None
    tool_prefix: str = ""  # how the host names mcpx's tools (opencode: its MCP entry's name and "_")
    own_tools_only: bool = False  # the host offers the servers' tools itself (opencode's plugin, at level ask)
    initialized: bool = False
    push: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None  # notifications outside any request

    def modern(self, meta: dict[str, Any]) -> "ClientState":
        """The state of one modern request: everything it needs rides in its _meta."""
        return ClientState(era="modern", version=meta.get(META_VERSION),
                           capabilities=ClientCapabilities.model_validate(meta.get(META_CAPABILITIES) or {}),
                           client_info=meta.get(META_CLIENT_INFO) or {}, scope=self.scope,
                           env_session=self.env_session, env_source=self.env_source, cwd=self.cwd,
                           tool_prefix=self.tool_prefix, own_tools_only=self.own_tools_only, initialized=True,
                           push=None)

    @property
    def modes(self) -> set[str]:
        modes = self.capabilities.elicitation_modes()
        if self.era == "legacy" and self.version not in ("2025-11-25",):
            modes &= {"form"}  # url mode and `mode` exist from 2025-11-25 on
        return modes


def shaped(q: Elicitation, state: ClientState) -> dict[str, Any]:
    """elicitation/create params for this client: the asker named, `mode` and `elicitationId` as its version has them."""
    params: dict[str, Any] = {"message": f"{q.server} (via mcpx) asks: {q.message}"}
    if q.mode == "url":
        params.update(mode="url", url=q.url)
        if state.era == "legacy":
            params["elicitationId"] = q.upstream_id or q.id
    else:
        params["requestedSchema"] = q.requested_schema
        if state.era == "modern" or (state.version and versions_with_url_mode(state.version)):
            params["mode"] = "form"
    return params


class Surface:
    def __init__(self, runtime: "Runtime", states: RequestStates) -> None:
        self.rt = runtime
        self.states = states
        self._names: dict[str, tuple[str, str]] = {}
        self._sinks: set[ClientState] = set()
        assert runtime.gateway is not None
        self.gateway = runtime.gateway
        self.broker = runtime.broker
        self.gateway.tool_listeners.append(self._tools_changed)

    # ---- notifications outside requests

    def attach(self, state: ClientState) -> None:
        self._sinks.add(state)

    def detach(self, state: ClientState) -> None:
        self._sinks.discard(state)

    def _tools_changed(self) -> None:
        for state in list(self._sinks):
            if state.push is not None and state.initialized:
                asyncio.create_task(self._push(state, "notifications/tools/list_changed", {}))

    async def _push(self, state: ClientState, method: str, params: dict[str, Any]) -> None:
        try:
            assert state.push is not None
            await state.push(method, params)
        except Exception as exc:
            log.debug("could not notify a client: %s", exc)

    # ---- dispatch

    async def handle(self, state: ClientState, msg: Message, out: Outbound) -> dict[str, Any]:
        method = msg["method"]
        params = msg.get("params") or {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        version = meta.get(META_VERSION)
        if version is not None and method in ("initialize", "ping"):
            raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"{method} is not part of 2026-07-28 (no handshake, no ping): "
                                                     "every request carries its own _meta")
        if method == "initialize":
            return await self._initialize(state, params)
        if version is not None or method == "server/discover":
            if version is None:
                raise RpcError(jsonrpc.INVALID_PARAMS, f"_meta[{META_VERSION!r}] is required on every 2026-07-28 "
                                                       "request")
            if version not in MODERN_VERSIONS:
                raise RpcError(jsonrpc.UNSUPPORTED_VERSION, "Unsupported protocol version",
                               {"supported": list(MODERN_VERSIONS), "requested": version})
            if not isinstance(meta.get(META_CAPABILITIES), dict):
                raise RpcError(jsonrpc.INVALID_PARAMS, f"_meta[{META_CAPABILITIES!r}] is required on every "
                                                       "2026-07-28 request")
            result = await self._dispatch(method, params, meta, state.modern(meta), out, msg.get("id"))
            result = {**result, "resultType": result.get("resultType", "complete"),
                      "_meta": {**(result.get("_meta") or {}), META_SERVER_INFO: SERVER_INFO}}
            if method in CACHEABLE and result["resultType"] == "complete":
                # tools come and go with the config, and lists are per session: fresh now, for this caller only
                result.setdefault("ttlMs", 0)
                result.setdefault("cacheScope", "private")
            return result
        if method == "ping":
            return {}
        if not state.initialized and state.version is None:
            raise RpcError(jsonrpc.INVALID_REQUEST, f"send initialize first, or make a 2026-07-28 request with "
                                                    f"_meta[{META_VERSION!r}]")
        result = await self._dispatch(method, params, meta, state, out, msg.get("id"))
        result.pop("resultType", None)
        return result

    async def on_notification(self, state: ClientState, msg: Message) -> None:
        if msg.get("method") == "notifications/initialized":
            state.initialized = True

    async def _dispatch(self, method: str, params: dict[str, Any], meta: dict[str, Any], state: ClientState,
                        out: Outbound, request_id: Any) -> dict[str, Any]:
        if method == "ping":
            return {}
        if method == "server/discover":
            return {"supportedVersions": list(MODERN_VERSIONS), "capabilities": await self._capabilities(state),
                    "instructions": await self._instructions(state)}
        if method == "tools/list":
            return {"tools": await self._tools(state)}
        if method == "tools/call":
            return await self._call(state, params, meta, out)
        if method == "subscriptions/listen" and state.era == "modern":
            return await self._listen(state, params, out, request_id)
        if method in FORWARDED and state.scope is not None:
            return await self._forward(state, method, params, meta)
        raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}")

    # ---- handshake and listing

    async def _initialize(self, state: ClientState, params: dict[str, Any]) -> dict[str, Any]:
        try:
            init = InitializeParams.model_validate(params)
        except ValidationError as exc:
            raise RpcError(jsonrpc.INVALID_PARAMS, f"initialize params are invalid: {exc.errors()[0]['msg']} at "
                                                   f"{'.'.join(map(str, exc.errors()[0]['loc']))}") from None
        state.era = "legacy"
        # never echo what mcpx does not serve
        state.version = init.protocol_version if init.protocol_version in LEGACY_VERSIONS else LATEST_LEGACY
        state.capabilities = init.capabilities
        state.client_info = init.client_info
        return {"protocolVersion": state.version, "capabilities": await self._capabilities(state),
                "serverInfo": SERVER_INFO, "instructions": await self._instructions(state)}

    async def _upstream_facts(self, server: str) -> dict[str, Any]:
        async with self.gateway.pool.lease(server, "*") as conn:
            return conn.facts.capabilities if conn.facts else {}

    async def _capabilities(self, state: ClientState) -> dict[str, Any]:
        caps: dict[str, Any] = {"tools": {"listChanged": True}}
        if state.scope is not None:
            upstream = await self._upstream_facts(state.scope)
            caps.update({k: v for k, v in upstream.items() if k in PASSED_CAPABILITIES})
        return caps

    async def _instructions(self, state: ClientState) -> str:
        text = ("Tools of the MCP servers behind mcpx are named SERVER_TOOL. When one of them asks a question "
                "mid-call and this client cannot ask it, the call returns early with the question; answer it with "
                "mcpx_elicit_answer only if you truly know the answer (decline and say why otherwise — never invent "
                "a value), and collect the call's result with mcpx_task_result. Questions for the person are not "
                "yours to answer.")
        if state.scope is not None:
            text = text.replace("are named SERVER_TOOL", f"of {state.scope!r} keep their own names")
        return text

    async def _tools(self, state: ClientState) -> list[dict[str, Any]]:
        if state.own_tools_only:
            return listed()
        can_ask = bool(state.modes)
        servers = [state.scope] if state.scope is not None else sorted(self.rt.config.servers)
        out: list[dict[str, Any]] = []
        listings = await asyncio.gather(*(self._server_tools(s) for s in servers))
        for server, tools in zip(servers, listings):
            for tool in tools:
                name = tool["name"] if state.scope is not None else f"{server}_{tool['name']}"
                self._names[name] = (server, tool["name"])
                exposed = {**tool, "name": name}
                if not can_ask:
                    # mcpx may answer in the tool's stead (the question, early); an outputSchema would make
                    # strict clients reject that answer
                    exposed.pop("outputSchema", None)
                out.append(exposed)
        return out + listed()

    async def _server_tools(self, server: str) -> list[dict[str, Any]]:
        try:
            return await self.gateway.tools(server)
        except Exception as exc:  # one broken server hides no other
            log.warning("tools of %s are left out of tools/list: %s", server, exc)
            return []

    async def tool_def(self, name: str, state: ClientState) -> dict[str, Any] | None:
        """The upstream tool behind an exposed name (for the headers its arguments must be mirrored in)."""
        try:
            server, tool = await self._resolve(name, state)
            return await self.gateway.tool(server, tool)
        except (RpcError, UnknownServer):
            return None

    async def _resolve(self, name: str, state: ClientState) -> tuple[str, str]:
        if state.scope is not None:
            return state.scope, name
        if name not in self._names:
            await self._tools(state)
        if name in self._names:
            return self._names[name]
        for server in sorted(self.rt.config.servers, key=len, reverse=True):
            if name.startswith(server + "_"):
                return server, name[len(server) + 1:]
        raise RpcError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {name!r} (tools behind mcpx are named SERVER_TOOL; "
                                               "see tools/list)")

    async def _listen(self, state: ClientState, params: dict[str, Any], out: Outbound,
                      request_id: Any) -> dict[str, Any]:
        """subscriptions/listen: a long-lived stream of the notifications asked for, that mcpx can honour.

        mcpx honours toolsListChanged; what it does not support is left out of the acknowledgment.
        """
        wanted = params.get("notifications") if isinstance(params.get("notifications"), dict) else {}
        honoured = {"toolsListChanged": True} if wanted.get("toolsListChanged") else {}
        sub_meta = {"io.modelcontextprotocol/subscriptionId": request_id}
        await out.notify("notifications/subscriptions/acknowledged", {"_meta": sub_meta, "notifications": honoured})
        changed: asyncio.Queue[None] = asyncio.Queue()

        async def push(_method: str, _params: dict[str, Any]) -> None:
            changed.put_nowait(None)

        listener = ClientState(era="modern", initialized=True, push=push)
        if honoured:
            self.attach(listener)
        try:
            while True:
                await changed.get()
                await out.notify("notifications/tools/list_changed", {"_meta": sub_meta})
        finally:
            self.detach(listener)

    # ---- sessions

    def session_for(self, state: ClientState, meta: dict[str, Any], argument: Any) -> tuple[str, SessionSource]:
        if isinstance(meta.get(META_SESSION), str) and meta[META_SESSION]:
            return meta[META_SESSION], "meta"
        if isinstance(argument, str) and argument:
            return argument, "argument"
        if state.env_session:
            return state.env_session, state.env_source
        return self.rt.loaded.fallback_session(state.cwd), "fallback"

    # ---- calls

    async def _call(self, state: ClientState, params: dict[str, Any], meta: dict[str, Any],
                    out: Outbound) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise RpcError(jsonrpc.INVALID_PARAMS, "tools/call needs a tool name")
        arguments = dict(params.get("arguments") or {})
        session, source = self.session_for(state, meta, arguments.pop(SESSION_ARG, None))
        if name in MCPX_TOOLS:
            return await self._mcpx_tool(name, arguments, session, state, out)
        server, tool = await self._resolve(name, state)
        bound = binding(name, arguments, session) if state.era == "modern" else ""  # only modern retries use it
        if state.era == "modern" and "requestState" in params:
            task = await self._take_retry(params, bound, session)
        else:
            task = await self._start(server, tool, arguments, session, source, state, out, meta)
        try:
            return await self._drive(task, state, out, bound, meta.get("progressToken"))
        except asyncio.CancelledError:
            if out.withdrawn():  # the client gave up on this request: notifications/cancelled
                await self.gateway.cancel(task.id, "cancelled by the MCP client")
            else:
                # The client went away (its host stopped `mcpx serve`, its HTTP session ended) or the daemon is
                # stopping: that is not a cancel. The call goes on in the daemon, as if its result had been
                # returned early: the questions it has open, or opens later, stay answerable from every other
                # surface, and its result is kept for `mcpx task result`.
                log.info("the client of %s (%s.%s) went away; the call goes on: mcpx task result %s", task.trace,
                         task.request.server, task.request.tool, task.id)
            raise

    async def _start(self, server: str, tool: str, arguments: dict[str, Any], session: str, source: SessionSource,
                     state: ClientState, out: Outbound, meta: dict[str, Any]) -> CallTask:
        token = meta.get("progressToken")

        async def relay(method: str, params: dict[str, Any]) -> None:
            if method == "notifications/progress" and token is None:
                return
            await out.notify(method, params)

        forwarded = {k: meta[k] for k in ("progressToken", META_LOG_LEVEL) if k in meta}
        try:
            return await self.gateway.start_call(CallRequest(
                server=server, tool=tool, arguments=arguments, session=session, session_source=source,
                cwd=state.cwd, surface="mcp", meta=forwarded or None, relay=relay,
                client_caps=state.capabilities.model_dump(exclude_none=True, by_alias=True),
                transparent=state.scope is not None, era=state.era))
        except UnknownServer as exc:
            raise RpcError(jsonrpc.INVALID_PARAMS, str(exc)) from None

    @staticmethod
    def _finished(doc: dict[str, Any]) -> dict[str, Any]:
        """The upstream's own result, as it came; a call mcpx could not complete is a tool error that says why.

        `doc` is a finished task's document, live (CallTask.doc) or stored: both answer alike.
        """
        if doc.get("state") == "completed" and doc.get("result") is not None:
            result = dict(doc["result"])
            meta = {k: v for k, v in (result.get("_meta") or {}).items() if k != META_SERVER_INFO}
            if meta:
                result["_meta"] = meta  # passed through untouched, but for the upstream's self-description
            else:
                result.pop("_meta", None)
            return result
        upstream_error = (doc.get("result") or {}).get("error")
        if isinstance(upstream_error, dict):
            raise RpcError.from_error(upstream_error)  # the server's own protocol error, passed through
        return text_result(f"mcpx: {doc.get('server')}.{doc.get('tool')} {doc.get('state')}: {doc.get('error', '')}",
                           error=True)

    async def _heartbeat(self, out: Outbound, token: Any, started: float) -> None:
        if token is not None:
            await out.notify("notifications/progress", {"progressToken": token, "progress": time.monotonic() - started,
                                                        "message": "waiting on the upstream server"})

    async def _drive(self, task: CallTask, state: ClientState, out: Outbound, bound: str,
                     token: Any) -> dict[str, Any]:
        """Carry a call to where this client can take it: its result; the questions and requests this client
        can answer (mid-flight for legacy, input_required for modern); or, for what it cannot, after
        elicit.grace, an early result it can act on while the call keeps running."""
        grace = self.rt.config.elicit.grace
        started = time.monotonic()
        stuck_since: float | None = None
        serving: dict[str, asyncio.Task[None]] = {}
        try:
            while True:
                if task.done:
                    return self._finished(task.doc())
                askable = {eid: q for eid, q in task.open.items() if q.mode in state.modes}
                unaskable = [eid for eid in task.open if eid not in askable]
                if state.era == "modern" and (askable or task.slots) and not unaskable:
                    return self._input_required(task, state, askable, bound)
                if state.era == "legacy":
                    for eid, q in askable.items():
                        if eid not in serving:
                            serving[eid] = asyncio.create_task(self._ask_client(q, task, state, out))
                    for key, slot in list(task.slots.items()):
                        if key not in serving:
                            serving[key] = asyncio.create_task(self._serve_slot(slot, out))
                    for key in [k for k, t in serving.items() if k not in task.open and k not in task.slots]:
                        if not serving[key].done():
                            serving[key].cancel()  # answered elsewhere: withdraw the client's dialog
                if unaskable:
                    stuck_since = stuck_since or time.monotonic()
                    left = grace - (time.monotonic() - stuck_since)
                    if left <= 0:
                        return self.waiting_result(task, state.tool_prefix)
                else:
                    stuck_since, left = None, HEARTBEAT
                snapshot = (set(task.open), set(task.slots))

                def moved(seen: tuple[set[str], set[str]] = snapshot) -> bool:
                    return task.done or (set(task.open), set(task.slots)) != seen

                if not await task.wait_for(moved, min(left, HEARTBEAT)):
                    await self._heartbeat(out, token, started)
        finally:
            for t in serving.values():
                t.cancel()

    def waiting_result(self, task: CallTask, prefix: str = "") -> dict[str, Any]:
        questions = []
        for q in task.open.values():
            doc = q.wire()
            doc["secondsLeft"] = q.remaining()
            questions.append(doc)
        r = task.request
        text = waiting_text(r.server, r.tool, task.id, questions, prefix)
        return {**text_result(text), "_meta": {"io.mcpx/inputRequired": {
            "task": task.id, "trace": task.trace, "elicitations": [q["id"] for q in questions]}}}

    # ---- legacy clients: mid-flight requests

    async def _ask_client(self, q: Elicitation, task: CallTask, state: ClientState, out: Outbound) -> None:
        params = shaped(q, state)
        for _attempt in range(3):
            try:
                reply = await out.request("elicitation/create", params, timeout=q.remaining() + 5)
            except (RpcError, TimeoutError, PeerClosed) as exc:
                log.info("client could not answer %s (%s); it stays open for other surfaces", q.id, exc)
                return
            action = reply.get("action")
            if action not in ("accept", "decline", "cancel"):
                log.info("client answered %s with %r; it stays open", q.id, action)
                return
            content = reply.get("content") if action == "accept" and q.mode == "form" else None
            try:
                await self.broker.answer(q.id, action, content, by="person:mcp-client", session=task.request.session)
                return
            except InvalidContent as exc:
                problems = "; ".join(f"{k} {v}" for k, v in exc.fields.items())
                params = {**shaped(q, state), "message": f"{shaped(q, state)['message']} (the last answer was not "
                                                         f"accepted: {problems})"}
            except (AlreadyAnswered, Gone):
                return

    @staticmethod
    async def _serve_slot(slot: Slot, out: Outbound) -> None:
        """roots/list or sampling/createMessage the upstream asked of this client: the client answers it."""
        try:
            result = await out.request(slot.method, slot.params)
        except RpcError as exc:
            if not slot.future.done():
                slot.future.set_exception(exc)
            return
        if not slot.future.done():
            slot.future.set_result(result)

    # ---- modern clients: input_required, answered by the client's retry

    def _input_required(self, task: CallTask, state: ClientState, askable: dict[str, Elicitation],
                        bound: str) -> dict[str, Any]:
        requests: dict[str, Any] = {}
        keys: dict[str, str] = {}
        for eid, q in askable.items():
            key = task.keys.get(eid, eid)  # the upstream's own key, when it gave one
            requests[key] = {"method": "elicitation/create", "params": shaped(q, state)}
            keys[key] = eid
        for key, slot in task.slots.items():
            requests[key] = {"method": slot.method, "params": slot.params}
            keys[key] = f"slot:{key}"
        return {"resultType": "input_required", "inputRequests": requests,
                "requestState": self.states.seal(task.id, len(task.questions), keys, bound)}

    async def _take_retry(self, params: dict[str, Any], bound: str, session: str) -> CallTask:
        data = self.states.open(params.get("requestState"), bound)
        task = self.gateway.task(str(data.get("t")))
        if task is None:
            raise RpcError(jsonrpc.INVALID_PARAMS, "Invalid requestState: its call is gone (finished long ago, or "
                                                   "lost in a restart)")
        responses = params.get("inputResponses") or {}
        if not isinstance(responses, dict):
            raise RpcError(jsonrpc.INVALID_PARAMS, "inputResponses must be an object")
        answered: set[str] = set()
        for key, target in (data.get("q") or {}).items():
            reply = responses.get(key)
            if not isinstance(reply, dict):
                continue  # missing: asked again below
            if target.startswith("slot:"):
                slot = task.slots.get(target[5:])
                if slot is not None and not slot.future.done():
                    slot.future.set_result(reply)  # the client's own result, verbatim
                    answered.add(target[5:])
                continue
            if reply.get("action") not in ("accept", "decline", "cancel"):
                continue
            q = task.open.get(target)
            content = reply.get("content") if reply["action"] == "accept" and q is not None and q.mode == "form" else None
            try:
                await self.broker.answer(target, reply["action"], content, by="person:mcp-client", session=session)
                answered.add(target)
            except InvalidContent:
                pass  # not valid: it stays open and is asked again
            except (AlreadyAnswered, Gone):
                answered.add(target)
        # the call wakes on the answers a moment later; until then they still look open
        await task.wait_for(lambda: task.done or not (answered & (set(task.open) | set(task.slots))), 5.0)
        return task

    # ---- generic pass-through for one server's resources, prompts, completion, logging

    async def _forward(self, state: ClientState, method: str, params: dict[str, Any],
                       meta: dict[str, Any]) -> dict[str, Any]:
        assert state.scope is not None
        session, _ = self.session_for(state, meta, None)
        forwarded = {k: v for k, v in params.items() if k != "_meta"}
        kept_meta = {k: v for k, v in meta.items() if not k.startswith("io.modelcontextprotocol/") and k != META_SESSION}
        if kept_meta:
            forwarded["_meta"] = kept_meta
        caps = routable(state.capabilities.model_dump(exclude_none=True, by_alias=True))
        async with self.gateway.pool.lease(state.scope, session, era=state.era, declared=caps) as conn:
            if state.push is not None:
                push = state.push

                async def relay(msg: Message) -> None:
                    await push(msg["method"], msg.get("params") or {})
                conn.on_other = relay
            return await conn.request(method, forwarded, timeout=60)

    # ---- mcpx's own tools

    async def _mcpx_tool(self, name: str, args: dict[str, Any], session: str, state: ClientState,
                         out: Outbound) -> dict[str, Any]:
        try:
            if name == "mcpx_elicit_list":
                return await self._tool_list(args, session, state.tool_prefix)
            if name == "mcpx_elicit_get":
                return await self._tool_get(args, session, state.tool_prefix)
            if name == "mcpx_elicit_answer":
                return await self._tool_answer(args, session, state)
            return await self._tool_task_result(args, session, state)
        except BrokerError as exc:
            return text_result(f"mcpx: {exc.message}", error=True)

    async def _tool_list(self, args: dict[str, Any], session: str, prefix: str) -> dict[str, Any]:
        state_filter = args.get("state", "pending")
        if state_filter not in ("pending", "answered", "expired", "abandoned", "all"):
            return text_result(f"mcpx: state {state_filter!r} is not one of pending, answered, expired, abandoned, all",
                               error=True)
        questions = await self.broker.list(session=session, state=None if state_filter == "all" else state_filter,
                                           server=args.get("server"))
        docs = [q.wire() for q in questions]
        if not docs:
            return text_result(f"No {state_filter if state_filter != 'all' else ''} questions in your session.".replace(
                "  ", " "), structured={"elicitations": []})
        from mcpx.answering import for_agent

        return text_result("\n\n".join(for_agent(d, prefix + "mcpx_elicit_answer") for d in docs),
                           structured={"elicitations": docs})

    async def _own(self, eid: Any, session: str) -> Elicitation:
        if not isinstance(eid, str):
            raise RpcError(jsonrpc.INVALID_PARAMS, "id is required: the question's id (elc-…)")
        q, _ = await self.broker.get(eid)
        if q.session != session:
            raise BrokerError(f"{eid} belongs to another session; a question is answered only from the session "
                              "that raised it")
        return q

    async def _tool_get(self, args: dict[str, Any], session: str, prefix: str) -> dict[str, Any]:
        from mcpx.answering import for_agent

        q = await self._own(args.get("id"), session)
        _, answer = await self.broker.get(q.id)
        doc = q.wire()
        text = for_agent(doc, prefix + "mcpx_elicit_answer") if q.state == "pending" else (
            f"{q.id} is {q.state}" + (f": {answer.action} by {answer.by}" if answer else "")
            + (f" ({q.state_reason})" if q.state_reason else ""))
        return text_result(text, structured={"elicitation": doc, "answer": answer.wire() if answer else None})

    async def _tool_answer(self, args: dict[str, Any], session: str, state: ClientState) -> dict[str, Any]:
        eid, action = args.get("id"), args.get("action")
        if action not in ("accept", "decline", "cancel"):
            return text_result(f"mcpx: action must be accept, decline or cancel, not {action!r}", error=True)
        content = args.get("content")
        if content is not None and not isinstance(content, dict):
            return text_result("mcpx: content must be an object of field values", error=True)
        if not isinstance(eid, str) or not is_id(eid, "elc"):
            return text_result(f"mcpx: {eid!r} is not a question id (elc- and 16 hex digits)", error=True)
        reason = args.get("reason") if isinstance(args.get("reason"), str) else None
        q, answer = await self.broker.answer(eid, action, content, by="agent:mcp", session=session, reason=reason)
        if answer is None:
            return text_result(f"You declined {eid}; because it asks for free input, it now waits for the person "
                               "instead. Do not answer it again. The call goes on once they answer"
                               + (f"; collect its result with {state.tool_prefix}mcpx_task_result {json.dumps({'task': q.task})}"
                                  if q.task else "") + ".", structured={"escalated": True, "elicitation": q.wire()})
        if args.get("wait") and q.task:
            return await self._task_outcome(q.task, session, state, wait=True)
        return text_result(f"Answered {eid}: {answer.action}. The call it belongs to goes on"
                           + (f"; collect its result with {state.tool_prefix}mcpx_task_result {json.dumps({'task': q.task})}"
                              if q.task else "") + ".", structured={"answer": answer.wire()})

    async def _tool_task_result(self, args: dict[str, Any], session: str, state: ClientState) -> dict[str, Any]:
        tid = args.get("task")
        if not isinstance(tid, str) or not is_id(tid, "tsk"):
            return text_result(f"mcpx: {tid!r} is not a task id (tsk- and 16 hex digits)", error=True)
        return await self._task_outcome(tid, session, state, wait=bool(args.get("wait")))

    async def _task_outcome(self, tid: str, session: str, state: ClientState, wait: bool) -> dict[str, Any]:
        task = self.gateway.task(tid)
        if task is None:  # finished a while ago, or before a restart: the store answers for it
            try:
                doc = await self.gateway.task_doc(tid)
            except UnknownTask:
                return text_result(f"mcpx: there is no task {tid}", error=True)
            if doc.get("session") != session:
                return text_result(f"mcpx: {tid} belongs to another session", error=True)
            if doc.get("state") in DONE_STATES:
                return self._finished(doc)
            return text_result(f"mcpx: {tid} is {doc.get('state')}, but its call is not running in this daemon "
                               "(it was lost in a restart)", error=True)
        if task.request.session != session:
            return text_result(f"mcpx: {tid} belongs to another session", error=True)
        if wait and not task.done:
            # wait for the call to finish or to ask something new (not the questions already answered)
            seen = set(task.questions)
            await task.wait_for(lambda: task.done or bool(set(task.open) - seen), ANSWER_WAIT)
        if task.done:
            return self._finished(task.doc())
        if task.open:
            return self.waiting_result(task, state.tool_prefix)
        return text_result(f"{tid} is still running; ask again with {state.tool_prefix}mcpx_task_result "
                           + json.dumps({"task": tid, "wait": True}), structured={"task": task.doc()})

