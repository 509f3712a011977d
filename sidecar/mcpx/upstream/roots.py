"""What a server is told of roots, by its config's `roots` (README, "Putting servers behind mcpx").

- "caller" (the default): the calling client's working directory, or the client's own roots when it is an MCP
  client on /mcp/SERVER that declared them. A legacy instance then serves one session (pool.py): the roots a
  server listed are the connection's;
- a fixed list: those directories, whoever calls. A server such as server-filesystem replaces the directories it
  was started with by the roots it is given, so a fixed list (or none) is how its own configuration holds;
- false: none. mcpx does not declare the roots capability to the server (and answers an empty list if it asks).

With a fixed list or none, nothing of the server's connection depends on who calls: its legacy instances are shared
by every session, as modern ones always are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcpx.config.models import ROOTS_CALLER, ServerConfig


def roots_for(cwd: str | None) -> list[dict[str, Any]]:
    """The roots of a caller in directory `cwd` (the daemon's own when None)."""
    return [_root(Path(cwd or "."))]


def _root(path: Path) -> dict[str, Any]:
    path = path.expanduser().resolve()
    return {"uri": path.as_uri(), "name": path.name or str(path)}


def per_caller(entry: ServerConfig) -> bool:
    """Whether the server's roots are its caller's: then its connection is its caller's own (legacy)."""
    return entry.roots == ROOTS_CALLER


def declared_to(entry: ServerConfig, declared: dict[str, Any]) -> dict[str, Any]:
    """The capabilities declared to the server: without roots when its config says it gets none."""
    if entry.roots is False:
        return {name: value for name, value in declared.items() if name != "roots"}
    return declared


def roots_of(entry: ServerConfig, cwd: str | None) -> list[dict[str, Any]]:
    """mcpx's answer to the server's roots/list for a caller in `cwd`: its fixed list, none (a server that asks though
    roots were not declared to it hears of none), or the caller's directory."""
    if entry.roots is False:
        return []
    if isinstance(entry.roots, list):
        return [_root(Path(directory)) for directory in entry.roots]
    return roots_for(cwd)
