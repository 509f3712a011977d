"""A lean HTTP/1.1 client over a unix socket, for the benchmarks that count what a server costs per request.

aiohttp's client costs about as much CPU per request as an aiohttp server does to answer it (bench/broker.py's
floor row: 0.87 ms of the bench's CPU per durable lifecycle, 0.56 ms of the bare server's), so a bench that drives a
server with it on two shared cores measures mostly itself. This one writes each request as one pre-built byte
string on a kept-alive connection and reads the reply with a protocol of its own: the status, the body by its
Content-Length (or its chunks), nothing else. It speaks exactly what the daemon's /v1 routes and the floor servers
answer on a unix socket (no TLS, no redirects, no cookies, no compression); it is no general client.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


class HttpError(Exception):
    pass


class _Conn(asyncio.Protocol):
    """One kept-alive connection, one request at a time on it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.reply: asyncio.Future[tuple[int, bytes]] | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.reply is not None and not self.reply.done():
            self.reply.set_exception(HttpError(f"the connection closed: {exc}"))

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.reply is None or self.reply.done():
            return
        parsed = _response(self.buf)
        if parsed is not None:
            status, body, used = parsed
            del self.buf[:used]
            self.reply.set_result((status, body))

    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes]]:
        assert self.transport is not None
        self.reply = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.reply


def _response(buf: bytearray) -> tuple[int, bytes, int] | None:
    """(status, body, bytes used) of the response at the start of `buf`, or None while it is incomplete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buf[:end]).lower()
    status = int(head[9:12])
    start = end + 4
    at = head.find(b"\r\ncontent-length:")
    if at >= 0:
        stop = head.find(b"\r\n", at + 2)
        length = int(head[at + 17:stop if stop >= 0 else len(head)])
        if len(buf) < start + length:
            return None
        return status, bytes(buf[start:start + length]), start + length
    if b"\r\ntransfer-encoding: chunked" not in head:
        return status, b"", start  # no body (204)
    body = bytearray()
    pos = start
    while True:
        line_end = buf.find(b"\r\n", pos)
        if line_end < 0:
            return None
        size = int(bytes(buf[pos:line_end]).split(b";")[0], 16)
        if len(buf) < line_end + 2 + size + 2:
            return None
        body += buf[line_end + 2:line_end + 2 + size]
        pos = line_end + 2 + size + 2
        if size == 0:
            return status, bytes(body), pos


class LeanHttp:
    """Requests to one unix socket's HTTP server on kept-alive connections (as many as are in flight at once)."""

    def __init__(self, socket: str, headers: dict[str, str] | None = None) -> None:
        self.socket = socket
        self.extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.idle: list[_Conn] = []

    async def _conn(self) -> _Conn:
        while self.idle:
            conn = self.idle.pop()
            if not conn.lost:
                return conn
        _, conn = await asyncio.get_running_loop().create_unix_connection(_Conn, self.socket)
        return conn

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """(status, body) of one request; the body is sent as JSON."""
        head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n{self.extra}"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        conn = await self._conn()
        try:
            reply = await conn.send(head.encode() + b"\r\n" + (body or b""))
        except BaseException:
            if conn.transport is not None:
                conn.transport.close()  # a reply may still come on it: the connection is not used again
            raise
        self.idle.append(conn)
        return reply

    async def json(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        status, data = await self.request(method, path, None if body is None else json.dumps(body).encode())
        return status, json.loads(data) if data else None

    def close(self) -> None:
        for conn in self.idle:
            if conn.transport is not None:
                conn.transport.close()
        self.idle.clear()
