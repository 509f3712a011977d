"""What a call is asked to do: the tool, its arguments, who called and from where, and what the caller can take."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from mcpx.broker.models import SessionSource
from mcpx.mcp import tasks


def routable(client_caps: dict[str, Any] | None) -> dict[str, Any]:
    """Of a client's capabilities, those mcpx can carry to it from an upstream: its requests, and the Tasks
    extension (mcpx follows the server's task and serves it to the client as its own: surface/tasks_extension.py)."""
    caps = {k: v for k, v in (client_caps or {}).items() if k in ("elicitation", "roots", "sampling")}
    return tasks.declaring(caps) if tasks.offered(client_caps or {}) else caps


@dataclass
class CallRequest:
    server: str
    tool: str
    arguments: dict[str, Any]
    session: str
    session_source: SessionSource
    parent: str | None = None
    cwd: str | None = None
    surface: str = "rest"
    policy_mode: Literal["ask", "auto", "decline", "error"] | None = None
    meta: dict[str, Any] | None = None  # forwarded to the upstream's tools/call (progressToken, logLevel)
    # someone follows the call apart from its reply (`mcpx call` on a terminal, GET /v1/tasks, a task's client):
    # the upstream is asked for progress even when the caller gave no token, and the call keeps the last report
    followed: bool = True
    relay: Callable[[str, dict[str, Any]], Awaitable[None]] | None = field(default=None, repr=False)
    # what the calling MCP client declared: it may be asked for roots and sampling itself
    client_caps: dict[str, Any] | None = None
    # /mcp/{server}: the upstream sees the client's own era and capabilities, as if mcpx were not there
    transparent: bool = False
    era: Literal["legacy", "modern"] | None = None

    @property
    def declared(self) -> dict[str, Any] | None:
        """The capabilities to declare upstream: a transparent client's own (what mcpx can route), else mcpx's."""
        return routable(self.client_caps) if self.transparent else None

    def client_serves(self, capability: str) -> bool:
        return isinstance((self.client_caps or {}).get(capability), dict)


@dataclass
class Slot:
    """A request the upstream makes of the calling client itself (roots, sampling): served by the surface."""

    key: str
    method: str
    params: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]
