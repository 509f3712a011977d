"""`mcpx serve`'s pump: stdin and stdout carried over the daemon's stream endpoint (a websocket), for a daemon reached
over TCP (MCPX_DAEMON_URL), one that takes no hand-off, or a stdin and stdout that cannot be handed over (a terminal,
a file). Like the hand-off it survives a daemon restart: it reconnects, replays the client's `initialize`, and
answers the requests that were in flight with an error saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from typing import Any

import aiohttp

from mcpx.cli import serve_handoff
from mcpx.cli.serve_handoff import serve_session
from mcpx.daemon.launch import LaunchError, ensure_daemon
from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import FrameError
from mcpx.shared.hostenv import host_of
from mcpx.shared.names import SESSION_HEADER, SESSION_SOURCE_HEADER, UNATTENDED_HEADER
from mcpx.system.paths import StatePaths

MAX_LINE = jsonrpc.MAX_LINE
REPLAY_ID = "mcpx-serve-replayed-initialize"


def pump(paths: StatePaths, server: str | None, initialize: dict[str, Any] | None, initialized: bool) -> int:
    """Pump until the client's input ends; `initialize` and `initialized`: the client's handshake, when a hand-off
    the daemon did not take had already read it. serve's exit code."""
    bridge = Bridge(paths, server)
    bridge.initialize, bridge.initialized = initialize, initialized
    try:
        asyncio.run(bridge.run())
    except serve_handoff.HandoffRefused as exc:
        print(f"mcpx serve: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def _error(rid: Any, code: int, message: str) -> bytes:
    return jsonrpc.encode(jsonrpc.error(rid, code, message))


class Bridge:
    def __init__(self, paths: StatePaths, server: str | None) -> None:
        self.paths = paths
        self.server = server
        self.initialize: dict[str, Any] | None = None  # the client's own, replayed after a daemon restart
        self.initialized = False
        self.in_flight: set[jsonrpc.Id] = set()  # the client's requests the daemon has not answered yet
        self.none_in_flight = asyncio.Event()  # set while in_flight is empty: what _drain waits for
        self.none_in_flight.set()
        self.backlog: asyncio.Queue[str] = asyncio.Queue(maxsize=1000)
        self.out: asyncio.StreamWriter | None = None
        self.closing = False

    def _headers(self) -> dict[str, str]:
        headers = {"X-Mcpx-Cwd": os.getcwd()}
        if prefix := os.environ.get("MCPX_TOOL_PREFIX"):  # how the host names our tools, e.g. opencode's "mcpx_"
            headers["X-Mcpx-Tool-Prefix"] = prefix
        # the host offers the servers' tools itself (opencode's plugin)
        if os.environ.get("MCPX_SERVE_TOOLS") == "mcpx":
            headers["X-Mcpx-Tools"] = "mcpx"
        host = host_of(os.environ)
        if session := serve_session(host):
            headers.update({SESSION_HEADER: session, SESSION_SOURCE_HEADER: "env"})
        if host is not None and host.unattended:
            headers[UNATTENDED_HEADER] = "1"
        return headers

    def _endpoint(self) -> tuple[aiohttp.BaseConnector | None, str, dict[str, str]]:
        suffix = f"/v1/mcp/stream/{self.server}" if self.server else "/v1/mcp/stream"
        base = os.environ.get("MCPX_DAEMON_URL")
        if base:
            token = os.environ.get("MCPX_TOKEN") or (self.paths.token.read_text().strip()
                                                     if self.paths.token.exists() else "")
            return None, base.rstrip("/") + suffix, {"Authorization": f"Bearer {token}"} if token else {}
        return aiohttp.UnixConnector(path=str(self.paths.socket)), "http://mcpx" + suffix, {}

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_LINE)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
        self.out = asyncio.StreamWriter(transport, protocol, None, loop)
        stdin = asyncio.create_task(self._read_stdin(reader))
        try:
            while not self.closing:
                await self._connected_session()
                if not self.closing:
                    await asyncio.sleep(0.2)
        finally:
            stdin.cancel()

    async def _write(self, data: bytes) -> None:
        assert self.out is not None
        self.out.write(data)
        await self.out.drain()

    async def _read_stdin(self, reader: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if exc.partial.strip():
                    await self.backlog.put(exc.partial.decode("utf-8", "replace"))  # a half frame: the daemon says so
                break
            except asyncio.LimitOverrunError:
                await self._skip_long(reader)
                await self._write(_error(None, -32700, f"message larger than {MAX_LINE} bytes; skipped"))
                continue
            text = line.decode("utf-8", "replace").strip()
            if text:
                await self.backlog.put(text)
        self.closing = True
        await self.backlog.put("")  # wakes the sender so it can close

    @staticmethod
    async def _skip_long(reader: asyncio.StreamReader) -> None:
        while True:
            try:
                await reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return

    async def _connected_session(self) -> None:
        connector, url, auth = self._endpoint()
        try:
            async with aiohttp.ClientSession(connector=connector) as http, http.ws_connect(
                    url, headers={**self._headers(), **auth}, max_msg_size=MAX_LINE, heartbeat=30) as ws:
                if self.initialize is not None:
                    await ws.send_str(json.dumps({**self.initialize, "id": REPLAY_ID}))
                    if self.initialized:
                        await ws.send_str(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                sender = asyncio.create_task(self._send(ws))
                try:
                    await self._receive(ws)
                finally:
                    sender.cancel()
        except aiohttp.WSServerHandshakeError as exc:
            if exc.status == 404 and self.server:  # no such server: asking again will not make one
                raise serve_handoff.HandoffRefused(await self._refusal(url, auth)) from None
            if not self.closing:
                await self._restart_daemon(exc)
            return
        except (aiohttp.ClientError, OSError) as exc:
            if not self.closing:
                await self._restart_daemon(exc)
            return
        if not self.closing:
            await self._fail_in_flight()
            await self._restart_daemon(None)

    async def _refusal(self, url: str, auth: dict[str, str]) -> str:
        """The daemon's own words for a stream it would not open: a plain GET says them (the handshake does not)."""
        connector, _, _ = self._endpoint()
        with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError, ValueError):
            async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=10)) as http, \
                    http.get(url, headers=auth) as resp:
                said = await resp.json(content_type=None)
                error = said.get("error") if isinstance(said, dict) else None
                if isinstance(error, dict) and isinstance(error.get("message"), str):
                    return str(error["message"])
        return f"no server {self.server!r} behind mcpx"

    async def _restart_daemon(self, exc: Exception | None) -> None:
        if os.environ.get("MCPX_DAEMON_URL"):
            await asyncio.sleep(1)
            return
        try:
            await asyncio.to_thread(ensure_daemon, self.paths)
        except LaunchError as err:
            print(f"mcpx serve: the daemon is gone and could not be started again: {err}", file=sys.stderr)
            await asyncio.sleep(2)

    async def _fail_in_flight(self) -> None:
        for rid in list(self.in_flight):
            await self._write(_error(rid, -32603, "the mcpx daemon went away during this request (restarting?); "
                                                  "mcpx serve has reconnected — send it again"))
        self.in_flight.clear()
        self.none_in_flight.set()

    async def _send(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        while True:
            text = await self.backlog.get()
            if not text:
                await self._drain()
                await ws.close()
                return
            try:
                msg = jsonrpc.decode(text)
            except FrameError as exc:
                # not JSON-RPC (not JSON, nested past the bound, an id that is an object…): answered here in
                # the daemon's own words, and the next line is read as if nothing happened
                await self._write(jsonrpc.encode(exc.reply))
                continue
            kind = jsonrpc.kind(msg)
            if kind == "request":
                self.in_flight.add(msg["id"])
                self.none_in_flight.clear()
                if msg["method"] == "initialize":
                    self.initialize = msg
            elif kind == "notification" and msg["method"] == "notifications/initialized":
                self.initialized = True
            await ws.send_str(text)

    async def _drain(self, limit: float = 60.0) -> None:
        """At the client's end of input, let what it asked be answered before the stream closes (bounded).
        The bound is what one request may need, not a blink: a tools/list right behind initialize waits for every
        upstream to start, which on a loaded machine took longer than the 5 s this once allowed, and its answer
        was lost. A host that closes our stdin and stops waiting stops us itself (SIGTERM, as MCP says)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.none_in_flight.wait(), limit)

    async def _receive(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for frame in ws:
            if frame.type != aiohttp.WSMsgType.TEXT:
                continue
            with contextlib.suppress(ValueError, RecursionError):  # only read to keep count; passed on whatever it is
                msg = json.loads(frame.data)
                rid = msg.get("id") if isinstance(msg, dict) and "method" not in msg else None
                if rid == REPLAY_ID:
                    continue  # the answer to our replayed initialize: the client already has its own
                if isinstance(rid, str | int):
                    self.in_flight.discard(rid)
                    if not self.in_flight:
                        self.none_in_flight.set()
            await self._write(frame.data.encode() + b"\n")
