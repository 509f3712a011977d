"""What trouble with a server behind mcpx raises, for whoever called it to read; and the rule for a SERVER.TOOL that
names no tool: refused naming the server's tools and the nearest match, in place of the server's own raw error
(`MCP error -32602: Tool nosuch not found`).

Below every layer because two sides say it in the same words: the gateway, which refuses a call to a tool its server
lacks (upstream/gateway.py), and the CLI, which checks a tool against a listing it fetched (`mcpx tools SERVER.TOOL`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcpx.shared.errors import McpxError

SHOWN = 40  # tool names listed at most: a server with hundreds is named by its nearest match and a count


class UpstreamError(McpxError):
    """Something about an upstream the caller should read: which server, what happened."""


class UnknownServer(UpstreamError):
    """No such server behind mcpx (the message names those there are)."""


class UnknownTool(UnknownServer):
    """No such tool on a known server. An UnknownServer too: every door that refuses an unknown SERVER.TOOL by its
    server refuses it by its tool the same way (a /v1 404, an MCP invalid-params error)."""


def refuse_unknown_tool(server: str, tool: str, tools: Sequence[Mapping[str, Any]] | None) -> None:
    """UnknownTool when `tools` (the server's listing; None while it is not known) has no `tool`."""
    if tools is None or any(t.get("name") == tool for t in tools):  # every call's check: no sorted listing for it
        return
    names = sorted({t["name"] for t in tools if isinstance(t.get("name"), str)})
    if tool in names:
        return
    import difflib  # here, not at the top: only a call to a tool its server lacks needs it, not a daemon's start

    near = difflib.get_close_matches(tool, names, n=1)
    listed = ", ".join(names[:SHOWN]) + (f", … ({len(names)} in all)" if len(names) > SHOWN else "")
    raise UnknownTool(f"server {server!r} has no tool {tool!r}" + (f"; did you mean {near[0]!r}?" if near else "")
                      + f" (its tools: {listed or 'none'})")
