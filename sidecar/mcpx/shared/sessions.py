"""Which session a request belongs to, the same way at every front door (/v1, /mcp, `mcpx serve`).

A question is offered only to the session that caused it, so every door must name sessions
alike. The first of these that is given wins: the MCP request's own `_meta` (io.mcpx/session),
an explicit argument, the X-Mcpx-Session header (or MCPX_SESSION_ID that `mcpx serve` passes
in it), the host's own session as its request names it (Codex's: mcpx/shared/hostenv.py), and last the fallback: one
session per config and working directory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from mcpx.broker.models import SessionSource

HeaderSource = Literal["header", "env"]


def header_source(value: str | None) -> HeaderSource:
    """What X-Mcpx-Session-Source says of the session header: set from MCPX_SESSION_ID ("env"), or by hand."""
    return "env" if value == "env" else "header"


def resolve_session(fallback: Callable[[str | Path | None], str], *, meta: object = None, argument: object = None,
                    header: str | None = None, source: HeaderSource = "header", cwd: str | None = None,
                    host: str | None = None) -> tuple[str, SessionSource]:
    """(session, where it came from). `fallback` is the config's (ConfigSource.fallback_session)."""
    if isinstance(meta, str) and meta:
        return meta, "meta"
    if isinstance(argument, str) and argument:
        return argument, "argument"
    if header:
        return header, source
    if host:
        return host, "meta"
    return fallback(cwd), "fallback"
