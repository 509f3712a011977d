"""The MCP host that started `mcpx serve`, as its environment says: whose session this is, and whether anybody is
at it to be asked.

Claude Code starts its MCP servers (and its hooks) with `CLAUDECODE=1`, `CLAUDE_CODE_SESSION_ID` (its session) and
`CLAUDE_CODE_ENTRYPOINT`: `cli` for its TUI, where a person sees its form; `sdk-cli` for print mode (`claude -p`),
which cancels every question by itself about 6 ms after it arrives; `sdk-ts` and `sdk-py` for the Agent SDKs,
which answer decline when nobody was shown the question (Claude Code issue #89858). Seen in 2.1.332; the facts are in
../shared/opencode-e2e/README.md. What an unattended host answers is nobody's answer, so mcpx never records it
(surface/driver.py): the question waits for a person elsewhere (docs/claude-code.md).

Codex CLI (0.169.0) gives its MCP servers a fixed few variables and none of its own, so its environment says nothing;
each request does instead (`call_host`): its client is `codex-mcp-client`, and every tools/call's `_meta` carries
Codex's session (`sessionId`, the same as `threadId`: the conversation `codex resume` goes on with) and
`x-codex-turn-metadata`, whose `turn_trigger` is "exec" for `codex exec`, which answers every question `decline`
within milliseconds, shown to nobody (../shared/host-facts/codex-gemini.md; docs/codex.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

SESSION_PREFIX = "claude-"  # an mcpx session named after Claude Code's own, so both name it alike
CODEX_CLIENT = "codex-mcp-client"  # Codex's clientInfo.name
CODEX_PREFIX = "codex-"
CODEX_TURN = "x-codex-turn-metadata"


class Host(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    session: str | None = None  # the host's own session id, as mcpx names sessions
    unattended: bool = False  # nobody is at the host to see a question it is passed


def claude_session(session_id: str) -> str:
    """The mcpx session of a Claude Code session (its MCP servers' and its hooks' alike)."""
    return SESSION_PREFIX + session_id


def unattended_entrypoint(entrypoint: str | None) -> bool:
    """Print mode and the Agent SDKs: nobody sees Claude Code's form there."""
    return (entrypoint or "").startswith("sdk-")


def host_of(env: Mapping[str, str]) -> Host | None:
    """The host, when its environment says which (Claude Code); None for any other."""
    if env.get("CLAUDECODE") != "1":
        return None
    session = env.get("CLAUDE_CODE_SESSION_ID") or None
    return Host(name="claude-code", session=claude_session(session) if session else None,
                unattended=unattended_entrypoint(env.get("CLAUDE_CODE_ENTRYPOINT")))


def call_host(client_info: Mapping[str, Any], meta: Mapping[str, Any]) -> Host | None:
    """The host of one request, when the request says which (Codex, in each tools/call's _meta); None otherwise."""
    if client_info.get("name") != CODEX_CLIENT:
        return None
    found = meta.get(CODEX_TURN)
    turn: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    session = meta.get("sessionId") or turn.get("session_id")
    return Host(name="codex", session=CODEX_PREFIX + session if isinstance(session, str) and session else None,
                unattended=turn.get("turn_trigger") == "exec")
