"""A question as mcpx passes it to an MCP client (`elicitation/create`'s message: the asker named; its schema as MCP
lets it be), and knowing it again when the client's host hands it back without its id (Claude Code's Elicitation
hook, POST /v1/elicit/passed).
The MCP surface passes it; the /v1 routes find it again: both read it here, neither from the other."""

from __future__ import annotations

from typing import Any

from mcpx.broker.models import Elicitation
from mcpx.presentation.rendering import presence_text

# what MCP lets a form's requestedSchema hold at its top level: a strict client refuses anything else (Codex 0.169.0
# cancels, unseen, a question whose schema has a `title`, as pydantic writes one)
SCHEMA_KEYS = ("$schema", "type", "properties", "required")


def passed_schema(q: Elicitation) -> dict[str, Any]:
    """The question's schema as a client is passed it: the server's, less what MCP does not let its top level hold."""
    return {k: v for k, v in (q.requested_schema or {}).items() if k in SCHEMA_KEYS}


def passed_message(q: Elicitation) -> str:
    """The message a client is passed: the asker named, its words unchanged; for a question only the person's
    passkey accepts, the sentence that says so (its client's accept is refused, and it is asked again)."""
    asks = f"{q.server} (via mcpx) asks: {q.message}"
    if not q.presence:  # most questions: no sentence to add (every question a client is asked is passed here)
        return asks
    return f"{asks}\n\n({presence_text(q.id, q.presence, None)}.)"


def passed_as(q: Elicitation, message: str, mode: str, schema: dict[str, Any] | None, url: str | None) -> bool:
    """Is this what a client was passed of `q`, as its host hands it on (Claude Code's Elicitation hook: the
    message, mode and schema or url, and no id)?"""
    if q.mode != mode or passed_message(q) != message:
        return False
    return q.url == url if q.mode == "url" else schema is None or schema == passed_schema(q)
