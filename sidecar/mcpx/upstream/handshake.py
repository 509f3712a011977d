"""The start of a conversation with an upstream server: which era it speaks, and what it says of itself.

Without a hint, `server/discover` is probed first. A modern answer (or the -32022 refusal that lists a
modern version mcpx speaks) settles the modern era; any other answer is a legacy server's, which is then
sent `initialize`. A server that settles its era on the first request it reads (the SDK's dual-era loop)
refuses `initialize` after a discover, or goes away: a fresh process (or HTTP session) is asked instead.
With the hint `legacy` (the era remembered for this server), `initialize` is sent at once.

The rule is `settle_era`, over a `HandshakeWire` that `upstream/connection.py` gives it (the bounded
request, the `initialized` notification, a fresh start): tests/unit/mcp/test_handshake.py drives it without a process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcpx.config.models import START_FLOOR, ServerConfig
from mcpx.mcp import jsonrpc
from mcpx.mcp.http_client import AUTH_NEEDED
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.peer import PeerClosed
from mcpx.mcp.protocol import CLIENT_INFO, LATEST_LEGACY, LEGACY_VERSIONS, MODERN_VERSIONS, Era, modern_meta
from mcpx.shared.upstream_errors import UpstreamError

log = logging.getLogger("mcpx.upstream")


@dataclass
class ServerFacts:
    era: Era
    version: str
    server_info: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    instructions: str | None = None


def start_bound(entry: ServerConfig) -> float:
    """How long one start of a server may take, handshake included: its `timeout`, never under START_FLOOR."""
    return max(entry.timeout, START_FLOOR)


class HandshakeWire(Protocol):
    """What the handshake needs of a connection being opened."""

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request, bounded by the start's own bound (a server slow to start is waited for)."""
        ...

    async def initialized(self, version: str) -> None:
        """The legacy era is settled on `version`: send notifications/initialized (and listen, over HTTP)."""
        ...

    async def restart(self) -> None:
        """Close this process (or HTTP session) and start a fresh one."""
        ...


async def settle_era(wire: HandshakeWire, name: str, declared: dict[str, Any], era_hint: Era | None,
                     fresh: str) -> ServerFacts:
    """The server's era and facts. `fresh`: what a restart starts, in words ("process", "session")."""
    if era_hint == "legacy":
        return await initialize(wire, name, declared)
    modern = await probe_modern(wire, declared)
    if modern is not None:
        return modern
    try:
        return await initialize(wire, name, declared)
    except (RpcError, PeerClosed) as exc:
        log.info("upstream %s answered server/discover as a legacy server, then refused initialize (%s); "
                 "asking a fresh %s", name, exc, fresh)
    await wire.restart()
    return await initialize(wire, name, declared)


async def probe_modern(wire: HandshakeWire, declared: dict[str, Any]) -> ServerFacts | None:
    """The server's modern facts, or None when its answer says it is legacy (an error is such an answer)."""
    try:
        res = await wire.request("server/discover", {"_meta": modern_meta(declared)})
    except RpcError as exc:
        if isinstance(exc.data, dict) and exc.data.get(AUTH_NEEDED):
            raise UpstreamError(exc.message) from None  # it wants a login: that says nothing of its era
        if exc.code == jsonrpc.UNSUPPORTED_VERSION and isinstance(exc.data, dict):
            ours = [v for v in exc.data.get("supported", []) if v in MODERN_VERSIONS]
            if ours:
                return ServerFacts("modern", ours[0])
        return None  # any other error: a legacy server
    supported = res.get("supportedVersions") or []
    ours = [v for v in supported if v in MODERN_VERSIONS]
    if not ours:
        return None
    info = (res.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
    return ServerFacts("modern", ours[0], info, res.get("capabilities") or {}, res.get("instructions"))


async def initialize(wire: HandshakeWire, name: str, declared: dict[str, Any]) -> ServerFacts:
    res = await wire.request("initialize", {
        "protocolVersion": LATEST_LEGACY, "capabilities": declared, "clientInfo": CLIENT_INFO})
    version = res.get("protocolVersion")
    if version not in LEGACY_VERSIONS:
        raise UpstreamError(f"server {name!r} answered initialize with protocolVersion {version!r}, "
                            f"which mcpx does not speak (it speaks {', '.join(LEGACY_VERSIONS)})")
    await wire.initialized(version)
    return ServerFacts("legacy", version, res.get("serverInfo") or {}, res.get("capabilities") or {},
                       res.get("instructions"))
