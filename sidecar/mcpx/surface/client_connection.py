"""One MCP client on a channel that carries MCP both ways: the websocket `mcpx serve` pumps through, or the
stdin and stdout `mcpx serve` handed over. Its requests go to the surface; mcpx's own go back on the channel."""

from __future__ import annotations

import functools
import re
from typing import Any

from mcpx.mcp.jsonrpc import Message
from mcpx.mcp.outbound import PeerOutbound
from mcpx.mcp.peer import Channel, Peer
from mcpx.shared.sessions import HeaderSource
from mcpx.surface.client_state import ClientState
from mcpx.surface.dispatch import Surface


def connection_state(surface: Surface, *, scope: str | None, session: str | None, source: HeaderSource,
                     cwd: str | None, tool_prefix: str, own_tools_only: bool, unattended: bool = False,
                     ) -> ClientState:
    """Who is on the other end, from what `mcpx serve` says of itself; UnknownServer for a scope no server has."""
    if scope is not None:
        surface.gateway.proxied(scope)  # an unknown server, or one that is not MCP, is refused here, by name
    if not re.fullmatch(r"[A-Za-z0-9_.-]{0,64}", tool_prefix):
        tool_prefix = ""
    return ClientState(scope=scope, env_session=session or None, env_source=source, cwd=cwd, tool_prefix=tool_prefix,
                       own_tools_only=own_tools_only, unattended=unattended)


class ClientConnection:
    def __init__(self, surface: Surface, state: ClientState, channel: Channel) -> None:
        self.surface = surface
        self.state = state
        # a plain call is taken in the turn its request is read, on a channel that writes from a callback
        self.peer = Peer(channel, self._on_request, self._on_notification, name="mcp-client",
                         take_now=functools.partial(surface.take_now, state))
        state.push = self.peer.notify

    async def _on_request(self, msg: Message) -> dict[str, Any]:
        # mcpx's own requests to this client go back on the same connection, on behalf of this request
        return await self.surface.handle(self.state, msg, PeerOutbound(self.peer, msg.get("id")))

    async def _on_notification(self, msg: Message) -> None:
        await self.surface.on_notification(self.state, msg)

    async def serve(self) -> None:
        """Until the channel closes (or this is cancelled); the client's requests still running are ended then."""
        self.surface.attach(self.state)
        self.peer.start()
        try:
            await self.peer.closed.wait()
        finally:
            self.surface.detach(self.state)
            await self.peer.close()
