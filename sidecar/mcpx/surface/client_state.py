"""What mcpx knows of one MCP client, and a question shaped the way that client's version takes it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mcpx.broker.models import Elicitation
from mcpx.mcp import tasks
from mcpx.mcp.protocol import (
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_VERSION,
    ClientCapabilities,
    Era,
    versions_with_url_mode,
)
from mcpx.presentation.passing import passed_message, passed_schema
from mcpx.shared.sessions import HeaderSource


@dataclass(eq=False)
class ClientState:
    """What mcpx knows of one client: its era and version, what it declared, where it runs."""

    era: Era = "legacy"
    version: str | None = None
    capabilities: ClientCapabilities = field(default_factory=ClientCapabilities)
    client_info: dict[str, Any] = field(default_factory=dict)
    scope: str | None = None  # one server, passed through under its own names; None: all, as SERVER_TOOL
    env_session: str | None = None  # MCPX_SESSION_ID of `mcpx serve`, or an X-Mcpx-Session header
    env_source: HeaderSource = "env"
    cwd: str | None = None
    tool_prefix: str = ""  # how the host names mcpx's tools (opencode: its MCP entry's name and "_")
    own_tools_only: bool = False  # the host offers the servers' tools itself (opencode's plugin, at level ask)
    # nobody is at the host to be asked: what it answers is nobody's answer (mcpx/shared/hostenv.py)
    unattended: bool = False
    initialized: bool = False
    push: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None  # notifications outside any request
    _declared: tuple[ClientCapabilities, dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    # `modes` of the capabilities, era and version it was worked out for: read once or twice per question asked
    _modes: tuple[ClientCapabilities, str, str | None, frozenset[str]] | None = field(default=None, repr=False,
                                                                                      compare=False)

    def modern(self, meta: dict[str, Any]) -> ClientState:
        """The state of one modern request: everything it needs rides in its _meta."""
        return ClientState(era="modern", version=meta.get(META_VERSION),
                           capabilities=ClientCapabilities.model_validate(meta.get(META_CAPABILITIES) or {}),
                           client_info=meta.get(META_CLIENT_INFO) or {}, scope=self.scope,
                           env_session=self.env_session, env_source=self.env_source, cwd=self.cwd,
                           tool_prefix=self.tool_prefix, own_tools_only=self.own_tools_only,
                           unattended=self.unattended, initialized=True, push=None)

    @property
    def modes(self) -> frozenset[str]:
        """The modes of question it can show: worked out again only once what it depends on changed."""
        known = self._modes
        if known is None or known[0] is not self.capabilities or known[1] != self.era or known[2] != self.version:
            modes = self.capabilities.elicitation_modes()
            if self.era == "legacy" and self.version not in ("2025-11-25",):
                modes &= {"form"}  # url mode and `mode` exist from 2025-11-25 on
            known = self._modes = (self.capabilities, self.era, self.version, frozenset(modes))
        return known[3]

    def can_ask(self, q: Elicitation) -> bool:
        """A question goes to this client if it can show it; to an unattended host (Claude Code's print mode) only
        if it is the person's, which its hook hands to mcpx's other doors and waits on (docs/claude-code.md): the
        agent's and the agent-then-human's wait for the agent's answer through mcpx_elicit_answer instead."""
        return q.mode in self.modes and (not self.unattended or q.audience == "human")

    @property
    def takes_tasks(self) -> bool:
        """A call of this request may be answered with a task (surface/tasks_extension.py): a 2026-07-28 request
        whose _meta declares the Tasks extension. On the aggregate surface mcpx decides when; on /mcp/SERVER the
        server does (`mirrors_tasks`)."""
        return self.era == "modern" and tasks.offered(self.declared())

    @property
    def mirrors_tasks(self) -> bool:
        """/mcp/SERVER: a call is a task exactly when the server made it one, as if mcpx were not there."""
        return self.scope is not None

    def declared(self) -> dict[str, Any]:
        """The capabilities it declared, as it spelt them: dumped once per declaration, not once per call (every
        call carries them), and never to be changed by whoever reads them."""
        if self._declared is None or self._declared[0] is not self.capabilities:
            self._declared = (self.capabilities, self.capabilities.model_dump(exclude_none=True, by_alias=True))
        return self._declared[1]


def shaped(q: Elicitation, state: ClientState) -> dict[str, Any]:
    """elicitation/create params for this client: the asker named, `mode` and `elicitationId` as its version
    has them."""
    params: dict[str, Any] = {"message": passed_message(q)}
    if q.mode == "url":
        params.update(mode="url", url=q.url)
        if state.era == "legacy":
            params["elicitationId"] = q.upstream_id or q.id
    else:
        params["requestedSchema"] = passed_schema(q)
        if state.era == "modern" or (state.version and versions_with_url_mode(state.version)):
            params["mode"] = "form"
    return params
