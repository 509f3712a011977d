"""mcpx as an MCP server, for both eras: a request to its handler, the handshake, and notifications out.

Transport-agnostic: `mcpx serve` (a stream) and `/mcp` (Streamable HTTP) hand each request
here with a `ClientState` and an `Outbound`. Capabilities are honest: a client is offered
`elicitation` pass-through only if it declared it; a client that cannot ask gets an early,
actionable result while the upstream call keeps running in the daemon.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from pydantic import ValidationError

from mcpx import __version__
from mcpx.broker.broker import Broker
from mcpx.broker.models import SessionSource
from mcpx.call.request import routable
from mcpx.config.source import ConfigSource
from mcpx.mcp import jsonrpc, tasks
from mcpx.mcp.jsonrpc import Message, RpcError
from mcpx.mcp.outbound import Outbound
from mcpx.mcp.peer import Peer
from mcpx.mcp.protocol import (
    LATEST_LEGACY,
    LEGACY_VERSIONS,
    META_CAPABILITIES,
    META_SERVER_INFO,
    META_SESSION,
    META_VERSION,
    MODERN_VERSIONS,
    InitializeParams,
)
from mcpx.mcp.tasks import EXTENSION
from mcpx.shared.hostenv import Host, call_host
from mcpx.shared.sessions import resolve_session
from mcpx.surface.client_state import ClientState
from mcpx.surface.driver import CallDriver
from mcpx.surface.naming import ToolNames
from mcpx.surface.own_tools import MCPX_TOOLS, SESSION_ARG, OwnTools, listed
from mcpx.surface.plain_call import PlainCall
from mcpx.surface.request_state import RequestStates
from mcpx.surface.tasks_extension import METHODS as TASK_METHODS
from mcpx.surface.tasks_extension import TasksExtension, missing_extension
from mcpx.upstream.connection import UpstreamConnection
from mcpx.upstream.gateway import Gateway

log = logging.getLogger("mcpx.surface")

SERVER_INFO = {"name": "mcpx", "version": __version__}
FORWARDED = ("resources/list", "resources/templates/list", "resources/read", "resources/subscribe",
             "resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel")
PASSED_CAPABILITIES = ("resources", "prompts", "completions", "logging")
CACHEABLE = ("server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list",
             "resources/read")


def serves_tasks(upstream: dict[str, Any] | None) -> bool:
    """The Tasks extension is mcpx's to serve on the aggregate surface (`upstream` None), and on /mcp/SERVER where
    the server offers it (the calls it makes tasks are mcpx's tasks there: mcpx follows the server's)."""
    return upstream is None or tasks.offered(upstream)


class Surface:
    def __init__(self, gateway: Gateway, broker: Broker, settings: ConfigSource, states: RequestStates) -> None:
        self.gateway = gateway
        self.settings = settings  # read at each use: a reload replaces the config whole
        self.names = ToolNames(gateway, settings)
        self.tasks = TasksExtension(gateway, broker)
        self.driver = CallDriver(gateway, broker, settings, states, self.tasks)
        self.own_tools = OwnTools(broker, gateway)
        self._sinks: set[ClientState] = set()
        self._listening: dict[ClientState, set[UpstreamConnection]] = {}  # instances a client hears (/mcp/SERVER)
        self._pushing: set[asyncio.Task[None]] = set()  # notifications on their way out, kept until sent
        self.gateway.tool_listeners.append(self._tools_changed)

    # ---- notifications outside requests

    def attach(self, state: ClientState) -> None:
        self._sinks.add(state)

    def detach(self, state: ClientState) -> None:
        """The client went: it hears nothing more, from mcpx or from any instance it forwarded requests through."""
        self._sinks.discard(state)
        for conn in self._listening.pop(state, ()):
            conn.unlisten(state)

    def _tools_changed(self) -> None:
        for state in list(self._sinks):
            if state.push is not None and state.initialized:
                task = asyncio.create_task(self._push(state, "notifications/tools/list_changed", {}))
                self._pushing.add(task)
                task.add_done_callback(self._pushing.discard)

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
        meta: dict[str, Any] = found if isinstance(found := params.get("_meta"), dict) else {}
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

    def take_now(self, state: ClientState, msg: Message, peer: Peer) -> PlainCall | None:
        """A legacy client's tools/call taken in the turn it is read, with no task (surface/plain_call.py): a plain
        call of a tool it named before, on the aggregate surface. None for anything else, which goes the usual way
        (`handle`, which also says what is wrong with a request)."""
        params = msg.get("params")
        if (msg.get("method") != "tools/call" or state.era != "legacy" or not state.initialized
                or state.scope is not None or not isinstance(params, dict)):
            return None
        name, given, meta = params.get("name"), params.get("arguments"), params.get("_meta") or {}
        found = self.names.known(name) if isinstance(name, str) and name not in MCPX_TOOLS else None
        if found is None or not isinstance(given, dict | None) or not isinstance(meta, dict) or META_VERSION in meta:
            return None
        host = call_host(state.client_info, meta)
        if host is not None and host.unattended and not state.unattended:
            return None  # nobody is at this request's host: `_call` says so on its state
        arguments = dict(given or {})
        session, source = self._session(state, meta, arguments.pop(SESSION_ARG, None), host)
        return self.driver.take_now(state, *found, arguments, session, source, meta, msg, peer)

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
            servers_tools = [] if state.own_tools_only else await self.names.listing(
                state, self.session_for(state, meta, None))  # a question a listing opens is this session's
            return {"tools": servers_tools + listed()}
        if method == "tools/call":
            return await self._call(state, params, meta, out)
        if method == "subscriptions/listen" and state.era == "modern":
            return await self._listen(state, params, meta, out, request_id)
        if method in TASK_METHODS and state.era == "modern" and serves_tasks(await self._scope_facts(state)):
            if not state.takes_tasks:
                raise missing_extension(method)
            session, _ = self.session_for(state, meta, None)
            return await self.tasks.request(method, params, state, session)
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
        async with self.gateway.mcp.pool.lease(server, "*") as conn:
            return conn.facts.capabilities if conn.facts else {}

    async def _scope_facts(self, state: ClientState) -> dict[str, Any] | None:
        """The capabilities of the server behind /mcp/SERVER; None on the aggregate surface."""
        return None if state.scope is None else await self._upstream_facts(state.scope)

    async def _capabilities(self, state: ClientState) -> dict[str, Any]:
        caps: dict[str, Any] = {"tools": {"listChanged": True}}
        upstream = await self._scope_facts(state)
        if state.era == "modern" and serves_tasks(upstream):
            caps["extensions"] = {EXTENSION: {}}  # a call lives in the daemon: any connection may follow it
        if upstream is not None:
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

    async def _listen(self, state: ClientState, params: dict[str, Any], meta: dict[str, Any], out: Outbound,
                      request_id: Any) -> dict[str, Any]:
        """subscriptions/listen: a long-lived stream of the notifications asked for, that mcpx can honour.

        mcpx honours toolsListChanged, and taskIds (notifications/tasks: surface/tasks_extension.py) for the session's
        own tasks from a request that declared the Tasks extension (-32021 otherwise, as the extension says); what it
        does not support, or another session's task, is left out of the acknowledgment.
        """
        wanted: dict[str, Any] = found if isinstance(found := params.get("notifications"), dict) else {}
        honoured: dict[str, Any] = {"toolsListChanged": True} if wanted.get("toolsListChanged") else {}
        followed: list[str] = []
        session, _ = self.session_for(state, meta, None)
        if "taskIds" in wanted:
            served = serves_tasks(await self._scope_facts(state))
            if not state.takes_tasks and served:
                raise missing_extension("subscriptions/listen for taskIds")
            followed = await self.tasks.owned(wanted["taskIds"], session) if served else []
            honoured["taskIds"] = followed
        sub_meta = {"io.modelcontextprotocol/subscriptionId": request_id}
        await out.notify("notifications/subscriptions/acknowledged", {"_meta": sub_meta, "notifications": honoured})
        outgoing: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()

        async def push(_method: str, _params: dict[str, Any]) -> None:
            outgoing.put_nowait(("notifications/tools/list_changed", {}))

        async def task_changed(detail: dict[str, Any]) -> None:
            outgoing.put_nowait(("notifications/tasks", detail))

        listener = ClientState(era="modern", initialized=True, push=push)
        if honoured.get("toolsListChanged"):
            self.attach(listener)
        followers = [asyncio.create_task(self.tasks.follow(tid, state, session, task_changed),
                                         name=f"mcpx-follow-{tid}") for tid in followed]
        try:
            while True:
                method, sent = await outgoing.get()
                await out.notify(method, {**sent, "_meta": sub_meta})
        finally:
            self.detach(listener)
            for follower in followers:
                follower.cancel()
            await asyncio.gather(*followers, return_exceptions=True)

    # ---- sessions

    def session_for(self, state: ClientState, meta: dict[str, Any], argument: Any) -> tuple[str, SessionSource]:
        return self._session(state, meta, argument, call_host(state.client_info, meta))

    def _session(self, state: ClientState, meta: dict[str, Any], argument: Any, host: Host | None,
                 ) -> tuple[str, SessionSource]:
        """`session_for`, of a request whose host was read already (a plain call's: `take_now`)."""
        # the loaded config's own fallback, not ConfigSource's (which passes it on): a call less on every call's way
        return resolve_session(self.settings.loaded.fallback_session, meta=meta.get(META_SESSION), argument=argument,
                               header=state.env_session, source=state.env_source, cwd=state.cwd,
                               host=host.session if host is not None else None)

    # ---- calls

    async def _call(self, state: ClientState, params: dict[str, Any], meta: dict[str, Any],
                    out: Outbound) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise RpcError(jsonrpc.INVALID_PARAMS, "tools/call needs a tool name")
        arguments = dict(params.get("arguments") or {})
        session, source = self.session_for(state, meta, arguments.pop(SESSION_ARG, None))
        if name in MCPX_TOOLS:
            return await self.own_tools.call(name, arguments, session, state)
        server, tool = await self.names.resolve(name, state)
        host = call_host(state.client_info, meta)
        if host is not None and host.unattended and not state.unattended:
            # this request's host has nobody at it (`codex exec`): what it replies is nobody's answer
            # (mcpx/shared/hostenv.py)
            state = dataclasses.replace(state, unattended=True)
        return await self.driver.call(state, name, server, tool, arguments, session, source, params, meta, out)

    async def tool_def(self, name: str, state: ClientState) -> dict[str, Any] | None:
        """The upstream tool behind an exposed name (for the headers its arguments must be mirrored in)."""
        return await self.names.definition(name, state)

    # ---- generic pass-through for one server's resources, prompts, completion, logging

    async def _forward(self, state: ClientState, method: str, params: dict[str, Any],
                       meta: dict[str, Any]) -> dict[str, Any]:
        assert state.scope is not None
        session, _ = self.session_for(state, meta, None)
        forwarded = {k: v for k, v in params.items() if k != "_meta"}
        kept_meta = {k: v for k, v in meta.items()
                     if not k.startswith("io.modelcontextprotocol/") and k != META_SESSION}
        if kept_meta:
            forwarded["_meta"] = kept_meta
        caps = routable(state.declared())
        async with self.gateway.mcp.pool.lease(state.scope, session, era=state.era, declared=caps) as conn:
            if state.push is not None:
                push = state.push

                async def relay(msg: Message) -> None:
                    await push(msg["method"], msg.get("params") or {})
                conn.listen(state, relay)
                self._listening.setdefault(state, set()).add(conn)
            result = await conn.request(method, forwarded, timeout=60)
            if method in ("resources/subscribe", "resources/unsubscribe") and isinstance(params.get("uri"), str):
                conn.subscribed(state, params["uri"], method == "resources/subscribe")
            return result
