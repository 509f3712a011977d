"""How the MCP surface reaches its client while it handles one request.

On a stream (`mcpx serve`) everything goes on the one connection; on Streamable HTTP a
request's notifications and the server's own requests go on that request's SSE stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from mcpx.mcp.peer import Peer


class Outbound(Protocol):
    async def request(self, method: str, params: dict[str, Any], timeout: float | None = None,
                      sent: Callable[[], object] | None = None) -> dict[str, Any]:
        """A request to the client, tied to the request being handled; `sent` hears when it is written."""
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

    async def request(self, method: str, params: dict[str, Any], timeout: float | None = None,
                      sent: Callable[[], object] | None = None) -> dict[str, Any]:
        return await self.peer.request(method, params, timeout=timeout, sent=sent)

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

    async def request(self, method: str, params: dict[str, Any], timeout: float | None = None,
                      sent: Callable[[], object] | None = None) -> dict[str, Any]:
        raise RuntimeError("a 2026-07-28 request cannot carry server-initiated requests")

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self._notify_to is not None:
            await self._notify_to(method, params)

    async def cancel(self, method_id: Any, reason: str) -> None:
        return None

    def withdrawn(self) -> bool:
        return False  # a modern request is never withdrawn by a notification; only a stopping daemon ends it
