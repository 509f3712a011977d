"""A question as mcpx passes it to an MCP client (`elicitation/create`'s message: the asker named), and knowing it
again when the client's host hands it back without its id (Claude Code's Elicitation hook, POST /v1/elicit/passed).
The MCP surface passes it; the /v1 routes find it again: both read it here, neither from the other."""

from __future__ import annotations

from typing import Any

from mcpx.broker.models import Elicitation


def passed_message(q: Elicitation) -> str:
    """The message a client is passed: the asker named, its words unchanged."""
    return f"{q.server} (via mcpx) asks: {q.message}"


def passed_as(q: Elicitation, message: str, mode: str, schema: dict[str, Any] | None, url: str | None) -> bool:
    """Is this what a client was passed of `q`, as its host hands it on (Claude Code's Elicitation hook: the
    message, mode and schema or url, and no id)?"""
    if q.mode != mode or passed_message(q) != message:
        return False
    return q.url == url if q.mode == "url" else schema is None or schema == q.requested_schema
