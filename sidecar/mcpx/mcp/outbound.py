"""How the MCP surface reaches its client while it handles one request.

On a stream (`mcpx serve`) everything goes on the one connection; on Streamable HTTP a
request's notifications and the server's own requests go on that request's SSE stream.
"""

from __future__ import annotations

from typing import Any, Protocol

from mcpx.mcp.peer import Peer


class Asked(Protocol):
    """A request written to the client, its reply awaited apart: by another task than the one that wrote it."""

    async def reply(self, timeout: float | None = None) -> dict[str, Any]:
        """Its result; RpcError for an error reply, PeerClosed (or the stream's error) if it could not be written or
        the client went away. A wait that is cancelled withdraws the request."""
        ...

    def abandon(self) -> None:
        """Nobody will wait for the reply (whoever was to was cancelled before it began): the request is withdrawn,
        unless its reply came or a wait on it withdrew it already."""
        ...


class Outbound(Protocol):
    async def request(self, method: str, params: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """A request to the client, tied to the request being handled."""
        ...

    async def send_request(self, method: str, params: dict[str, Any]) -> Asked:
        """The same request written now, in this step when the stream takes it at once; its reply awaited apart."""
        ...

    async def notify(self, method: str, params: dict[str, Any]) -> None: ...

    async def cancel(self, method_id: Any, reason: str) -> None:
        """Withdraw a request we sent (the question was answered elsewhere)."""
        ...

    def withdrawn(self) -> bool:
        """Did the client withdraw the request being handled (notifications/cancelled)? Not when it went away."""
        ...


class PeerOutbound:
    """Outbound over a whole connection (stdio, websocket), for the request `request_id` on it."""

    def __init__(self, peer: Peer, request_id: Any = None) -> None:
        self.peer = peer
        self.request_id = request_id

    async def request(self, method: str, params: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        return await self.peer.request(method, params, timeout=timeout)

    async def send_request(self, method: str, params: dict[str, Any]) -> Asked:
        return await self.peer.send_request(method, params)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.peer.notify(method, params)

    async def cancel(self, method_id: Any, reason: str) -> None:
        await self.peer.notify("notifications/cancelled", {"requestId": method_id, "reason": reason})

    def withdrawn(self) -> bool:
        return self.request_id in self.peer.withdrawn


class NoOutbound:
    """For modern requests: nothing may be sent to the client but the response (and notifications)."""

    def __init__(self, notify_to: Any = None) -> None:
        self._notify_to = notify_to

    async def request(self, method: str, params: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        raise RuntimeError("a 2026-07-28 request cannot carry server-initiated requests")

    async def send_request(self, method: str, params: dict[str, Any]) -> Asked:
        raise RuntimeError("a 2026-07-28 request cannot carry server-initiated requests")

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self._notify_to is not None:
            await self._notify_to(method, params)

    async def cancel(self, method_id: Any, reason: str) -> None:
        return None

    def withdrawn(self) -> bool:
        return False  # a modern request is never withdrawn by a notification; only a stopping daemon ends it
