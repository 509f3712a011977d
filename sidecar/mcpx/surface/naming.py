"""The tools behind mcpx under the names a client sees: SERVER_TOOL, or the server's own under /mcp/SERVER."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mcpx.broker.models import SessionSource
from mcpx.config.source import ConfigSource
from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import RpcError
from mcpx.surface.client_state import ClientState
from mcpx.upstream.gateway import Gateway, UnknownServer

log = logging.getLogger("mcpx.surface")


class ToolNames:
    def __init__(self, gateway: Gateway, settings: ConfigSource) -> None:
        self.gateway = gateway
        self.settings = settings
        self._names: dict[str, tuple[str, str]] = {}  # exposed name -> (server, the server's own name)

    async def listing(self, state: ClientState, asker: tuple[str, SessionSource] | None = None
                      ) -> list[dict[str, Any]]:
        """The upstream tools this client sees, each under its exposed name. `asker`: the session a question the
        listing opens belongs to (a server's missing secrets, upstream/secrets.py)."""
        can_ask = bool(state.modes)
        servers = [state.scope] if state.scope is not None else sorted(self.settings.config.servers)
        out: list[dict[str, Any]] = []
        listings = await asyncio.gather(*(self._server_tools(s, asker) for s in servers))
        for server, tools in zip(servers, listings, strict=True):
            for tool in tools:
                name = tool["name"] if state.scope is not None else f"{server}_{tool['name']}"
                self._names[name] = (server, tool["name"])
                exposed = {**tool, "name": name}
                if not can_ask:
                    # mcpx may answer in the tool's stead (the question, early); an outputSchema would make
                    # strict clients reject that answer
                    exposed.pop("outputSchema", None)
                out.append(exposed)
        return out

    async def _server_tools(self, server: str, asker: tuple[str, SessionSource] | None) -> list[dict[str, Any]]:
        try:
            return await self.gateway.tools(server, asker)
        except Exception as exc:  # one broken server hides no other
            log.warning("tools of %s are left out of tools/list: %s", server, exc)
            return []

    def known(self, name: str) -> tuple[str, str] | None:
        """(server, tool) behind an exposed name of the aggregate surface that a listing named; None for any other."""
        return self._names.get(name)

    async def resolve(self, name: str, state: ClientState) -> tuple[str, str]:
        """(server, tool) behind an exposed name; -32602 naming it when there is none."""
        if state.scope is not None:
            return state.scope, name
        if name not in self._names:
            await self.listing(state)
        if name in self._names:
            return self._names[name]
        for server in sorted(self.settings.config.servers, key=len, reverse=True):
            if name.startswith(server + "_"):
                return server, name[len(server) + 1:]
        raise RpcError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {name!r} (tools behind mcpx are named SERVER_TOOL; "
                                               "see tools/list)")

    async def definition(self, name: str, state: ClientState) -> dict[str, Any] | None:
        """The upstream tool behind an exposed name (for the headers its arguments must be mirrored in)."""
        try:
            server, tool = await self.resolve(name, state)
            return await self.gateway.tool(server, tool)
        except (RpcError, UnknownServer):
            return None
