"""The MCP surface over a stream: the daemon's end of `mcpx serve` (a websocket on the unix socket).

The stream carries newline-free JSON-RPC messages exactly as stdio does; a frame that is not
JSON-RPC is answered with a JSON-RPC error and the connection keeps serving.
"""

from __future__ import annotations

import logging

from aiohttp import WSMsgType, web

from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import FrameError, Message
from mcpx.shared import wirejson
from mcpx.shared.names import (
    CWD_HEADER,
    SESSION_HEADER,
    SESSION_SOURCE_HEADER,
    TOOL_PREFIX_HEADER,
    TOOLS_HEADER,
    UNATTENDED_HEADER,
)
from mcpx.shared.sessions import header_source
from mcpx.surface.client_connection import ClientConnection, connection_state
from mcpx.surface.client_state import ClientState
from mcpx.surface.dispatch import Surface

log = logging.getLogger("mcpx.surface")


class WebSocketChannel:
    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws

    async def send(self, msg: Message) -> None:
        await self.ws.send_str(wirejson.dumps(msg))

    async def receive(self) -> Message | None:
        while True:
            frame = await self.ws.receive()
            if frame.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return None
            if frame.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                continue
            try:
                return jsonrpc.decode(frame.data)
            except FrameError as exc:
                await self.send(exc.reply)  # say what was wrong, and keep serving

    async def close(self) -> None:
        await self.ws.close()

    async def wait_exited(self) -> None:
        return None

    def describe_exit(self) -> str:
        return "the client closed the stream"


def client_state(request: web.Request, surface: Surface) -> ClientState:
    """Who is on the other end, from what `mcpx serve` (or an HTTP client) says of itself."""
    return connection_state(surface, scope=request.match_info.get("server") or request.query.get("server") or None,
                            session=request.headers.get(SESSION_HEADER),
                            source=header_source(request.headers.get(SESSION_SOURCE_HEADER)),
                            cwd=request.headers.get(CWD_HEADER),
                            tool_prefix=request.headers.get(TOOL_PREFIX_HEADER, ""),
                            own_tools_only=request.headers.get(TOOLS_HEADER) == "mcpx",
                            unattended=request.headers.get(UNATTENDED_HEADER) == "1")


async def stream_endpoint(request: web.Request, surface: Surface) -> web.StreamResponse:
    state = client_state(request, surface)
    ws = web.WebSocketResponse(max_msg_size=jsonrpc.MAX_LINE, heartbeat=30)
    await ws.prepare(request)
    await ClientConnection(surface, state, WebSocketChannel(ws)).serve()
    return ws
