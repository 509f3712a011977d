"""`/mcp` on the daemon: the MCP surface over Streamable HTTP, both eras.

Legacy (after `initialize`): a session per `Mcp-Session-Id`; each request's reply is an SSE
stream that also carries mcpx's own mid-flight requests (elicitation/create) and the call's
notifications; the client POSTs its answers back. Modern (2026-07-28): every POST stands
alone, headers must agree with the body, and questions travel as `input_required` results.
`/mcp/{server}` serves one upstream under its own tool names. Origin and Host are checked
against DNS rebinding; on TCP the bearer token is required like everywhere else.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import logging
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import FrameError, Message, RpcError
from mcpx.mcp.outbound import NoOutbound
from mcpx.mcp.protocol import (
    LEGACY_VERSIONS,
    META_VERSION,
    METHOD_HEADER,
    NAME_HEADER,
    PARAM_HEADER_PREFIX,
    SESSION_ID_HEADER,
    VERSION_HEADER,
    is_modern,
)
from mcpx.shared import sse, wirejson
from mcpx.shared.errors import McpxError
from mcpx.shared.names import MAX_BODY
from mcpx.shared.routes import Routes
from mcpx.shared.shutdown import SHUTDOWN
from mcpx.shared.upstream_errors import UnknownServer
from mcpx.surface.client_state import ClientState
from mcpx.surface.dispatch import Surface
from mcpx.surface.stream_endpoint import client_state, stream_endpoint

log = logging.getLogger("mcpx.surface")

SURFACE: web.AppKey[Surface] = web.AppKey("mcp-surface", Surface)
LOCAL_HOSTS = re.compile(r"^(localhost|127\.0\.0\.1|\[::1\]|mcpx)(:\d+)?$", re.IGNORECASE)
LOCAL_ORIGIN = re.compile(r"^https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$", re.IGNORECASE)
SESSION_IDLE = 3600.0
# the param a request's Mcp-Name header mirrors (the Tasks extension routes its requests on the task's id)
NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/get": "taskId",
            "tasks/update": "taskId", "tasks/cancel": "taskId"}
# JSON-RPC errors that a modern HTTP reply carries with a 4xx status (the transport spec)
STATUS_FOR_ERROR = {jsonrpc.METHOD_NOT_FOUND: 404, jsonrpc.INVALID_PARAMS: 400, jsonrpc.HEADER_MISMATCH: 400,
                    jsonrpc.MISSING_CAPABILITY: 400, jsonrpc.UNSUPPORTED_VERSION: 400,
                    jsonrpc.INVALID_REQUEST: 400, jsonrpc.PARSE_ERROR: 400}


class SseWriter:
    """A request's reply, as JSON when nothing else needs saying, as an SSE stream the moment something does.

    Deciding late means an error found before any notification goes out still gets its proper
    HTTP status (400 for invalid params), as the transport spec asks.
    """

    def __init__(self, request: web.Request, headers: dict[str, str] | None = None) -> None:
        self.request = request
        self.headers = headers or {}
        self.response: web.StreamResponse | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)

    async def send(self, msg: Message) -> None:
        data = wirejson.dumps(msg)
        async with self._lock:
            if self.response is None:
                self.response = _sse_response(self.headers)
                await self.response.prepare(self.request)
            await self.response.write(sse.frame(data, id=next(self._ids), event="message"))

    async def finish(self, reply: Message, status: int = 200) -> web.StreamResponse:
        if self.response is None:
            return _rpc_response(reply, status, self.headers or None)
        await self.send(reply)
        return self.response


@dataclass
class LegacySession:
    id: str
    state: ClientState
    pending: dict[Any, asyncio.Future[Message]] = field(default_factory=dict)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    inflight: dict[Any, asyncio.Task[Any]] = field(default_factory=dict)
    withdrawn: set[Any] = field(default_factory=set)  # in-flight requests the client cancelled (not ended)
    listeners: set[SseWriter] = field(default_factory=set)
    last_seen: float = field(default_factory=time.monotonic)


class SseOutbound:
    """mcpx's requests to a legacy HTTP client go on the stream of the request they belong to."""

    def __init__(self, session: LegacySession, writer: SseWriter, request_id: Any = None) -> None:
        self.session = session
        self.writer = writer
        self.request_id = request_id

    async def request(self, method: str, params: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        return await (await self.send_request(method, params)).reply(timeout)

    async def send_request(self, method: str, params: dict[str, Any]) -> SseAsked:
        rid = next(self.session.ids)
        asked = SseAsked(self, rid, asyncio.get_running_loop().create_future())
        self.session.pending[rid] = asked.future
        try:
            await self.writer.send(jsonrpc.request(rid, method, params))
        except asyncio.CancelledError:
            await asked.withdraw()
            raise
        except BaseException:
            self.session.pending.pop(rid, None)
            raise
        return asked

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.writer.send(jsonrpc.notification(method, params))

    async def cancel(self, method_id: Any, reason: str) -> None:
        await self.notify("notifications/cancelled", {"requestId": method_id, "reason": reason})

    def withdrawn(self) -> bool:
        return self.request_id in self.session.withdrawn


class SseAsked:
    """A request mcpx wrote on a legacy HTTP client's stream (surface's Asked): its reply comes by POST."""

    def __init__(self, out: SseOutbound, rid: int, future: asyncio.Future[Message]) -> None:
        self.out = out
        self.rid = rid
        self.future = future

    async def reply(self, timeout: float | None = None) -> dict[str, Any]:
        try:
            reply = await (asyncio.wait_for(self.future, timeout) if timeout else self.future)
        except asyncio.CancelledError:
            await self.withdraw()
            raise
        finally:
            self.out.session.pending.pop(self.rid, None)
        if "error" in reply:
            raise RpcError.from_error(reply["error"])
        return reply.get("result") or {}

    async def withdraw(self) -> None:
        self.out.session.pending.pop(self.rid, None)
        with contextlib.suppress(Exception):
            await self.out.writer.send(jsonrpc.notification("notifications/cancelled",
                                                            {"requestId": self.rid, "reason": "answered elsewhere"}))

    def abandon(self) -> None:
        if self.out.session.pending.get(self.rid) is not self.future or self.future.done():
            return  # its reply came, or a wait on it withdrew it
        self.out.session.pending.pop(self.rid, None)
        withdrawing = asyncio.create_task(self.withdraw())
        _WITHDRAWING.add(withdrawing)  # held until sent: the loop keeps only weak references
        withdrawing.add_done_callback(_WITHDRAWING.discard)


_WITHDRAWING: set[asyncio.Task[None]] = set()


def _decode_header(value: str) -> str:
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            raise RpcError(jsonrpc.HEADER_MISMATCH, f"a header's base64 value does not decode: {value!r}") from None
    return value


def _header_text(value: Any) -> str:
    """How an argument's value reads in its Mcp-Param header (booleans lowercase, numbers as written)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_param_headers(request: web.Request, tool: dict[str, Any], arguments: dict[str, Any]) -> None:
    """Each x-mcp-header argument present must be mirrored, equal, in its Mcp-Param-{Name} header (SEP-2243)."""
    props = (tool.get("inputSchema") or {}).get("properties") or {}
    for arg, prop in props.items():
        if not isinstance(prop, dict) or "x-mcp-header" not in prop:
            continue
        header = PARAM_HEADER_PREFIX + prop["x-mcp-header"]
        value = arguments.get(arg)
        given = request.headers.get(header)
        if value is None:
            continue
        if given is None:
            raise RpcError(jsonrpc.HEADER_MISMATCH, f"{header} header is missing but the body's {arg!r} argument is "
                                                    "present")
        decoded = _decode_header(given)
        same = decoded == _header_text(value)
        if not same and isinstance(value, int | float) and not isinstance(value, bool):
            try:
                same = float(decoded) == float(value)
            except ValueError:
                same = False
        if not same:
            raise RpcError(jsonrpc.HEADER_MISMATCH, f"Header mismatch: {header} {given!r} does not match the body's "
                                                    f"{arg!r} argument")


def _check_modern_headers(request: web.Request, msg: Message) -> None:
    """Headers that mirror the body must agree with it (2026-07-28): intermediaries route on them."""
    params = msg.get("params") or {}
    body_version = (params.get("_meta") or {}).get(META_VERSION)
    header_version = request.headers.get(VERSION_HEADER)
    if header_version is None:
        raise RpcError(jsonrpc.HEADER_MISMATCH, "the MCP-Protocol-Version header is missing")
    if body_version is not None and header_version != body_version:
        raise RpcError(jsonrpc.HEADER_MISMATCH, f"Header mismatch: MCP-Protocol-Version {header_version!r} does not "
                                                f"match _meta version {body_version!r}")
    if "method" not in msg:
        return
    method_header = request.headers.get(METHOD_HEADER)
    if method_header is None:
        raise RpcError(jsonrpc.HEADER_MISMATCH, "the Mcp-Method header is missing")
    if method_header != msg["method"]:
        raise RpcError(jsonrpc.HEADER_MISMATCH, f"Header mismatch: Mcp-Method {method_header!r} does not match body "
                                                f"method {msg['method']!r}")
    if msg["method"] in NAMED_BY:
        body_name = params.get(NAMED_BY[msg["method"]])
        name_header = request.headers.get(NAME_HEADER)
        if name_header is None:
            raise RpcError(jsonrpc.HEADER_MISMATCH, "the Mcp-Name header is missing")
        if _decode_header(name_header) != body_name:
            raise RpcError(jsonrpc.HEADER_MISMATCH, f"Header mismatch: Mcp-Name {name_header!r} does not match body "
                                                    f"value {body_name!r}")


class Refused(McpxError):
    """A request answered before it reaches the surface, in JSON-RPC's shape like every /mcp reply."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.text)
        self.response = response


class McpEndpoint:
    def __init__(self, surface: Surface) -> None:
        self.surface = surface
        self.sessions: dict[str, LegacySession] = {}

    # ---- guards

    @staticmethod
    def guard(request: web.Request) -> web.Response | None:
        """DNS rebinding: a page in a browser must not reach the daemon through a name that resolves to it."""
        origin = request.headers.get("Origin")
        if origin is not None and not LOCAL_ORIGIN.match(origin):
            return _rpc_response(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, f"Origin {origin!r} is not allowed"), 403)
        host = request.headers.get("Host", "")
        if host and not LOCAL_HOSTS.match(host):
            return _rpc_response(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, f"Host {host!r} is not allowed"), 403)
        return None

    def _state(self, request: web.Request, msg: Message) -> ClientState:
        try:
            return client_state(request, self.surface)
        except UnknownServer as exc:
            raise Refused(_rpc_response(jsonrpc.error(msg.get("id"), jsonrpc.INVALID_PARAMS, str(exc)), 404)) from None

    # ---- POST

    async def post(self, request: web.Request) -> web.StreamResponse:
        if (refused := self.guard(request)) is not None:
            return refused
        try:
            return await self._post(request)
        except Refused as exc:
            return exc.response

    async def _post(self, request: web.Request) -> web.StreamResponse:
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _rpc_response(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, f"the body is larger than the limit of "
                                                                             f"{MAX_BODY} bytes"), 413)
        try:
            msg = jsonrpc.decode(raw)
        except FrameError as exc:
            return _rpc_response(exc.reply, 400)
        params = msg.get("params") or {}
        body_version = (params.get("_meta") or {}).get(META_VERSION) if isinstance(params, dict) else None
        header_version = request.headers.get(VERSION_HEADER)
        if is_modern(header_version) or is_modern(body_version) or (
                "method" in msg and body_version is not None and msg["method"] != "initialize"):
            return await self._modern(request, msg)
        return await self._legacy(request, msg)

    async def _modern(self, request: web.Request, msg: Message) -> web.StreamResponse:
        if jsonrpc.kind(msg) != "request":
            return web.Response(status=202)  # responses and notifications have no meaning without a session here
        state = self._state(request, msg)
        try:
            _check_modern_headers(request, msg)
            params = msg.get("params") or {}
            if msg["method"] == "tools/call" and isinstance(params.get("name"), str):
                tool = await self.surface.tool_def(params["name"], state)
                if tool is not None:
                    check_param_headers(request, tool, params.get("arguments") or {})
        except RpcError as exc:
            return _rpc_response(jsonrpc.error(msg.get("id"), exc.code, exc.message, exc.data), 400)
        writer = SseWriter(request)

        async def notify(method: str, params: dict[str, Any]) -> None:
            await writer.send(jsonrpc.notification(method, params))

        reply = await self._reply(state, msg, NoOutbound(notify))
        return await writer.finish(reply, _status_of(reply))

    async def _answer_json(self, state: ClientState, msg: Message, out: Any) -> web.Response:
        reply = await self._reply(state, msg, out)
        return _rpc_response(reply, _status_of(reply))

    async def _reply(self, state: ClientState, msg: Message, out: Any) -> Message:
        try:
            return jsonrpc.result(msg["id"], await self.surface.handle(state, msg, out))
        except RpcError as exc:
            return jsonrpc.error(msg["id"], exc.code, exc.message, exc.data)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("MCP %s failed", msg.get("method"))
            return jsonrpc.error(msg["id"], jsonrpc.INTERNAL_ERROR, f"mcpx failed handling {msg.get('method')}: {exc}")

    async def _legacy(self, request: web.Request, msg: Message) -> web.StreamResponse:
        kind = jsonrpc.kind(msg)
        if kind == "request" and msg["method"] == "initialize":
            state = self._state(request, msg)
            opened = LegacySession(secrets.token_hex(16), state)

            async def push(method: str, params: dict[str, Any]) -> None:
                for writer in list(opened.listeners):
                    await writer.send(jsonrpc.notification(method, params))

            state.push = push
            reply = await self._reply(state, msg, NoOutbound())
            if "result" in reply:
                self.sessions[opened.id] = opened
                self.surface.attach(state)
                self._reap()
            return _rpc_response(reply, 200, {SESSION_ID_HEADER: opened.id} if "result" in reply else None)
        session = self._session(request, msg)
        if isinstance(session, web.Response):
            return session
        version = request.headers.get(VERSION_HEADER)
        if version is not None and version not in LEGACY_VERSIONS:
            return _rpc_response(jsonrpc.error(msg.get("id"), jsonrpc.INVALID_REQUEST,
                                               f"MCP-Protocol-Version {version!r} is not one this session speaks"), 400)
        if kind in ("response", "error"):
            fut = session.pending.get(msg.get("id"))
            if fut is not None and not fut.done():
                fut.set_result(msg)
            return web.Response(status=202)
        if kind == "notification":
            if msg["method"] == "notifications/cancelled":
                target = (msg.get("params") or {}).get("requestId")
                task = session.inflight.get(target)
                if task is not None:
                    session.withdrawn.add(target)
                    task.cancel()
            else:
                await self.surface.on_notification(session.state, msg)
            return web.Response(status=202)
        writer = SseWriter(request, {SESSION_ID_HEADER: session.id})
        work = asyncio.ensure_future(self._reply(session.state, msg, SseOutbound(session, writer, msg["id"])))
        session.inflight[msg["id"]] = work
        try:
            reply = await work
        except asyncio.CancelledError:
            if work.cancelled():
                reply = jsonrpc.error(msg["id"], jsonrpc.INTERNAL_ERROR, "cancelled by the client")
            else:
                work.cancel()
                raise
        finally:
            session.inflight.pop(msg["id"], None)
            session.withdrawn.discard(msg["id"])
        return await writer.finish(reply)

    def _session(self, request: web.Request, msg: Message) -> LegacySession | web.Response:
        """The request's session, or the response refusing it."""
        sid = request.headers.get(SESSION_ID_HEADER)
        if sid is None:
            return _rpc_response(jsonrpc.error(msg.get("id"), jsonrpc.INVALID_REQUEST,
                                               "Bad Request: send initialize first (no Mcp-Session-Id), or a "
                                               "2026-07-28 request with _meta"), 400)
        session = self.sessions.get(sid)
        if session is None:
            return _rpc_response(jsonrpc.error(msg.get("id"), jsonrpc.INVALID_REQUEST,
                                               "Session not found: initialize again"), 404)
        session.last_seen = time.monotonic()
        return session

    def _reap(self) -> None:
        now = time.monotonic()
        for sid, session in list(self.sessions.items()):
            if now - session.last_seen > SESSION_IDLE and not session.inflight and not session.listeners:
                self._end(sid)

    def _end(self, sid: str) -> None:
        session = self.sessions.pop(sid, None)
        if session is not None:
            self.surface.detach(session.state)
            for task in session.inflight.values():
                task.cancel()

    # ---- GET and DELETE

    async def get(self, request: web.Request) -> web.StreamResponse:
        if (refused := self.guard(request)) is not None:
            return refused
        if is_modern(request.headers.get(VERSION_HEADER)):
            return web.Response(status=405, text="2026-07-28 has no GET stream; use subscriptions/listen")
        session = self._session(request, {})
        if isinstance(session, web.Response):
            return session
        writer = SseWriter(request, {SESSION_ID_HEADER: session.id})
        writer.response = _sse_response({SESSION_ID_HEADER: session.id})
        await writer.response.prepare(request)
        session.listeners.add(writer)
        stopping = request.app[SHUTDOWN]
        try:
            while session.id in self.sessions and not stopping.done():
                await asyncio.wait((stopping,), timeout=15)  # a stopping daemon ends the stream at once
                await writer.response.write(sse.comment("keep-alive"))
        except ConnectionResetError:  # the listener went away; a cancellation (the daemon stopping) goes on up
            pass
        finally:
            session.listeners.discard(writer)
        return writer.response

    async def delete(self, request: web.Request) -> web.StreamResponse:
        if (refused := self.guard(request)) is not None:
            return refused
        session = self._session(request, {})
        if isinstance(session, web.Response):
            return session
        self._end(session.id)
        return web.Response(status=204)


def _status_of(reply: Message) -> int:
    return STATUS_FOR_ERROR.get(reply["error"]["code"], 200) if "error" in reply else 200


def _sse_response(headers: dict[str, str] | None = None) -> web.StreamResponse:
    return web.StreamResponse(headers={**sse.HEADERS, **(headers or {})})


def _rpc_response(msg: Message, status: int, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(msg, status=status, headers=headers)


def install_mcp_endpoint(app: web.Application, surface: Surface, routes: Routes) -> None:
    endpoint = McpEndpoint(surface)
    app[SURFACE] = surface
    for path in ("/mcp", "/mcp/{server}"):
        routes.add_post(path, endpoint.post)
        routes.add_get(path, endpoint.get)
        routes.add_delete(path, endpoint.delete)

    async def stream(request: web.Request) -> web.StreamResponse:
        if (refused := endpoint.guard(request)) is not None:
            return refused
        try:
            return await stream_endpoint(request, surface)
        except UnknownServer as exc:  # returned, not raised: a raised 404 would be said as "no route"
            return _rpc_response(jsonrpc.error(None, jsonrpc.INVALID_PARAMS, str(exc)), 404)

    routes.add_get("/v1/mcp/stream", stream)
    routes.add_get("/v1/mcp/stream/{server}", stream)
