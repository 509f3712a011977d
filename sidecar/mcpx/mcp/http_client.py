"""A Streamable HTTP channel to an upstream server, for both eras.

Every message is its own POST. A request's reply is JSON or an SSE stream carrying the
notifications (and, in the legacy era, the server's own requests) that belong to it,
then the response; all of them come out of `receive()` in order of arrival.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import Message
from mcpx.mcp.protocol import (
    META_VERSION,
    METHOD_HEADER,
    NAME_HEADER,
    PARAM_HEADER_PREFIX,
    SESSION_ID_HEADER,
    VERSION_HEADER,
    is_modern,
)
from mcpx.shared import sse, wirejson
from mcpx.shared.masking import mask_text, shown_url

log = logging.getLogger("mcpx.mcp")

# Set on a request of the server's that came on the response stream of one of ours: the id of ours. The
# transport says which request it relates to (the SDKs send what a tool's handler asks on its call's stream);
# it never goes on the wire.
RELATED = "mcpx/related"


@dataclass
class SseState:
    """Where a stream stands, to resume it: the last event id seen and the server's retry advice."""

    last_id: str | None = None
    retry_ms: int = 1000


AUTH_NEEDED = "authNeeded"  # in the data of the error a request fails with when the server wants a login


class AuthNeeded(ConnectionError):
    """The server wants credentials its authorizer cannot give without the person (a login)."""


class Authorizer(Protocol):
    """What a channel asks about authorization (MCP's, OAuth 2.1), knowing nothing of who provides it.

    `authorization()`: the Authorization header for the next request, or None to send none (it may refresh a
    token about to expire first). `challenged(status, www_authenticate)`: the server answered 401, or 403 with
    insufficient_scope; None to send the request once more (with what `authorization()` gives now), else the
    words the request fails with (a login is needed: the provider knows, and says so).
    """

    async def authorization(self) -> str | None: ...

    async def challenged(self, status: int, www_authenticate: str | None) -> str | None: ...


def challenge_of(status: int, headers: Any) -> str | None:
    """The WWW-Authenticate of a response that asks for (other) credentials: a 401, or a 403 whose error is
    insufficient_scope (a step-up, RFC 6750 §3.1); None for any other response."""
    www = headers.get("WWW-Authenticate")
    if status == 401:
        return str(www or "")
    if status == 403 and www and "insufficient_scope" in www:
        return str(www)
    return None


def header_value(value: Any) -> str:
    """A value for Mcp-Name / Mcp-Param-*: plain when header-safe, else the spec's base64 sentinel."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    safe = all(0x20 <= ord(c) <= 0x7E for c in text) and text == text.strip()
    if safe and not (text.startswith("=?base64?") and text.endswith("?=")):
        return text
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


class HttpChannel:
    def __init__(self, name: str, url: str, headers: dict[str, str] | None = None, timeout: float = 30.0,
                 auth: Authorizer | None = None) -> None:
        self.name = name
        self.url = url
        self.headers = dict(headers or {})
        self.auth = auth
        self.protocol_version: str | None = None  # set once negotiated; modern requests carry it per request
        self.session_id: str | None = None
        self.param_headers: dict[str, dict[str, str]] = {}  # tool -> {argument: header name} (x-mcp-header)
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, connect=timeout,
                                                                         sock_connect=timeout))
        self._incoming: asyncio.Queue[Message | None] = asyncio.Queue()
        self._posts: dict[jsonrpc.Id, asyncio.Task[None]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._closed = False
        self.last_error = ""

    def _headers_for(self, msg: Message) -> dict[str, str]:
        h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **self.headers}
        version = self.protocol_version
        params = msg.get("params") or {}
        meta_version = (params.get("_meta") or {}).get(META_VERSION) if isinstance(params, dict) else None
        if meta_version:
            version = meta_version
        if version:
            h[VERSION_HEADER] = version
        if self.session_id and not is_modern(version):
            h[SESSION_ID_HEADER] = self.session_id
        if is_modern(version) and "method" in msg:
            h[METHOD_HEADER] = msg["method"]
            name = params.get("name") if msg["method"] in ("tools/call", "prompts/get") else params.get("uri")
            if msg["method"] in ("tasks/get", "tasks/update", "tasks/cancel"):
                name = params.get("taskId")  # the Tasks extension routes by task: whoever holds it answers
            if msg["method"] in ("tools/call", "prompts/get", "resources/read", "tasks/get", "tasks/update",
                                 "tasks/cancel") and name is not None:
                h[NAME_HEADER] = header_value(name)
            if msg["method"] == "tools/call":
                args = params.get("arguments") or {}
                for arg, header in self.param_headers.get(str(name), {}).items():
                    if args.get(arg) is not None:
                        h[PARAM_HEADER_PREFIX + header] = header_value(args[arg])
        return h

    async def send(self, msg: Message) -> None:
        if self._closed:
            raise ConnectionError(f"{self.name}: channel closed")
        if msg.get("method") == "notifications/cancelled" and is_modern(self.protocol_version):
            # modern HTTP: closing the request's stream is the cancellation
            target = jsonrpc.id_of((msg.get("params") or {}).get("requestId"))
            task = self._posts.get(target) if target is not None else None
            if task is not None:
                task.cancel()
            return
        if jsonrpc.kind(msg) == "request":
            self._posts[msg["id"]] = asyncio.create_task(self._post_request(msg))
            return
        async with self._post(msg) as resp:
            if resp.status not in (200, 202, 204):
                body = await resp.text()
                raise ConnectionError(f"{self.name}: POST of a {jsonrpc.kind(msg)} got HTTP {resp.status}: "
                                      f"{body[:300]}")

    @contextlib.asynccontextmanager
    async def _post(self, msg: Message) -> AsyncIterator[aiohttp.ClientResponse]:
        """POST one message, with the authorizer's header. Asked for credentials (a 401, a step-up's 403), the
        authorizer gets them and the message goes once more; when it cannot (a login is needed), or the server
        refuses what it got, the request fails with its words (AuthNeeded)."""
        body = json.dumps(msg)
        for _attempt in range(2):
            headers = self._headers_for(msg)
            if self.auth is not None and (authorization := await self.auth.authorization()) is not None:
                headers["Authorization"] = authorization
            async with self._http.post(self.url, data=body, headers=headers) as resp:
                www = challenge_of(resp.status, resp.headers) if self.auth is not None else None
                if www is None:
                    yield resp
                    return
            assert self.auth is not None
            refused = await self.auth.challenged(resp.status, www)
            if refused is not None:
                raise AuthNeeded(f"{self.name}: {refused}")
        raise AuthNeeded(f"{self.name}: {shown_url(self.url)} refused the credentials it asked for (HTTP "
                         f"{resp.status})")

    async def _post_request(self, msg: Message) -> None:
        rid = msg["id"]
        try:
            async with self._post(msg) as resp:
                if sid := resp.headers.get(SESSION_ID_HEADER):
                    self.session_id = sid
                ctype = resp.headers.get("Content-Type", "")
                if resp.status == 404 and self.session_id and not is_modern(self.protocol_version):
                    self.last_error = f"{self.name}: the server ended the session (HTTP 404)"
                    self._incoming.put_nowait(None)
                    return
                if ctype.startswith("text/event-stream"):
                    stream = SseState()
                    if await self._read_sse(resp, stream, rid):
                        return
                    await self._resume(stream, rid)  # the stream ended before our response did
                    return
                text = await resp.text()
                problem = f"HTTP {resp.status} without a JSON-RPC reply: {text[:300]}"
                try:
                    reply = wirejson.loads(text, "its reply") if text.strip() else None
                except wirejson.JsonRefused as exc:
                    reply = None
                    if exc.too_deep:  # the first 300 characters of that say nothing
                        problem = str(exc)
                if isinstance(reply, dict) and ("result" in reply or "error" in reply):
                    if reply.get("id") is None:  # an error the server could not attribute: it is ours
                        reply["id"] = rid
                    reply.setdefault("jsonrpc", "2.0")
                    self._incoming.put_nowait(reply)
                else:
                    self._incoming.put_nowait(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, f"{self.name}: {problem}",
                                                            {"httpStatus": resp.status}))
        except AuthNeeded as exc:
            self._incoming.put_nowait(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, str(exc), {AUTH_NEEDED: True}))
        except asyncio.CancelledError:
            raise  # withdrawn (modern HTTP: closing the stream is the cancel), or the channel closes
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            self._incoming.put_nowait(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR,
                                                    f"{self.name}: {shown_url(self.url)} could not be reached: "
                                                    f"{mask_text(str(exc))}"))
        finally:
            self._posts.pop(rid, None)

    async def _resume(self, stream: SseState, rid: jsonrpc.Id) -> None:
        """A request's stream closed without its response: resume it with GET and Last-Event-ID (legacy
        resumability), a few times; when there is nothing to resume from, the request fails at once."""
        for _attempt in range(5):
            if stream.last_id is None or self._closed or is_modern(self.protocol_version):
                break
            await asyncio.sleep(min(stream.retry_ms, 5000) / 1000)
            headers = {**await self._get_headers(), "Last-Event-ID": stream.last_id}
            try:
                async with self._http.get(self.url, headers=headers) as resp:
                    if resp.status != 200 or not resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                        break
                    if await self._read_sse(resp, stream, rid):
                        return
            except (aiohttp.ClientError, OSError, TimeoutError):
                continue
        self._incoming.put_nowait(jsonrpc.error(
            rid, jsonrpc.INTERNAL_ERROR, f"{self.name}: the server closed the response stream before answering"))

    async def _get_headers(self) -> dict[str, str]:
        h = {"Accept": "text/event-stream", **self.headers}
        if self.auth is not None and (authorization := await self.auth.authorization()) is not None:
            h["Authorization"] = authorization
        if self.protocol_version:
            h[VERSION_HEADER] = self.protocol_version
        if self.session_id:
            h[SESSION_ID_HEADER] = self.session_id
        return h

    def listen(self) -> None:
        """Open the legacy GET stream, where a server sends what belongs to no request of ours.

        Some servers (the TypeScript SDK among them) send their own requests there when they cannot
        tie them to a POST; without this stream such a question would never arrive.
        """
        if self._listener is None and not is_modern(self.protocol_version):
            self._listener = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        stream = SseState()
        failures = 0
        while not self._closed and failures < 5:
            headers = await self._get_headers()
            if stream.last_id is not None:
                headers["Last-Event-ID"] = stream.last_id
            try:
                async with self._http.get(self.url, headers=headers) as resp:
                    if resp.status == 405:
                        return  # the server offers no such stream
                    if resp.status != 200 or not resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                        failures += 1
                    else:
                        failures = 0
                        await self._read_sse(resp, stream, None)
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                log.debug("%s: the server's stream broke off (%s); listening again", self.name, exc)
                failures += 1
            await asyncio.sleep(min(stream.retry_ms, 5000) / 1000 * (1 + failures))

    async def _read_sse(self, resp: aiohttp.ClientResponse, stream: SseState, rid: jsonrpc.Id | None) -> bool:
        """Feed one SSE stream's messages in; True once the response to `rid` has gone by."""
        answered = False
        async for event in sse.read(resp.content, partial=True):
            if event.id is not None:
                stream.last_id = event.id
            if event.retry is not None:
                stream.retry_ms = event.retry
            if event.data is None or not event.data.strip():
                continue  # an event with empty data only primes the stream (its id)
            msg = self._push_text(event.data, rid)
            if msg is not None and rid is not None and msg.get("id") == rid and "method" not in msg:
                answered = True
        return answered

    def _push_text(self, text: str, related: jsonrpc.Id | None = None) -> Message | None:
        try:
            msg = jsonrpc.check(wirejson.loads(text))
        except (wirejson.JsonRefused, jsonrpc.FrameError) as exc:
            log.warning("%s: ignoring an SSE event that is not JSON-RPC (%s)", self.name, exc)
            return None
        if related is not None and jsonrpc.kind(msg) == "request":
            msg[RELATED] = related
        self._incoming.put_nowait(msg)
        return msg

    async def receive(self) -> Message | None:
        if self._closed and self._incoming.empty():
            return None
        return await self._incoming.get()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for task in [*self._posts.values(), *([self._listener] if self._listener else [])]:
            task.cancel()
        if self.session_id and not is_modern(self.protocol_version):
            with contextlib.suppress(Exception):
                async with self._http.delete(self.url, headers={SESSION_ID_HEADER: self.session_id, **self.headers},
                                             timeout=aiohttp.ClientTimeout(total=2)):
                    pass
        await self._http.close()
        self._incoming.put_nowait(None)

    async def wait_exited(self) -> None:
        return None

    def describe_exit(self) -> str:
        return self.last_error or f"the connection to {self.name!r} at {shown_url(self.url)} closed"
