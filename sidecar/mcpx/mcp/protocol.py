"""The parts of MCP that mcpx interprets: versions, eras, `_meta` keys, and models of a few methods.

Models allow extra fields: whatever mcpx does not interpret passes through as it came.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcpx import __version__

LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # newest first
MODERN_VERSIONS = ("2026-07-28",)
LATEST_LEGACY = LEGACY_VERSIONS[0]
LATEST_MODERN = MODERN_VERSIONS[0]
SUPPORTED_VERSIONS = (*MODERN_VERSIONS, *LEGACY_VERSIONS)

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SESSION = "io.mcpx/session"

# Streamable HTTP's headers, the same on both ends of a connection
SESSION_ID_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
PARAM_HEADER_PREFIX = "Mcp-Param-"

Era = Literal["legacy", "modern"]
CLIENT_INFO = {"name": "mcpx", "version": __version__}


def is_modern(version: str | None) -> bool:
    return version in MODERN_VERSIONS


def versions_with_url_mode(version: str) -> bool:
    """URL-mode elicitation (and `mode`, `elicitationId`) exist from 2025-11-25 on."""
    return version in ("2025-11-25", *MODERN_VERSIONS)


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ElicitationCapability(Loose):
    form: dict[str, Any] | None = None
    url: dict[str, Any] | None = None

    def modes(self) -> set[str]:
        """An empty `elicitation: {}` means form only (the spec's backwards-compatible reading)."""
        declared = {m for m in ("form", "url") if getattr(self, m) is not None}
        return declared or {"form"}


class ClientCapabilities(Loose):
    elicitation: ElicitationCapability | None = None
    roots: dict[str, Any] | None = None
    sampling: dict[str, Any] | None = None

    def elicitation_modes(self) -> set[str]:
        return self.elicitation.modes() if self.elicitation is not None else set()


class ToolAnnotations(Loose):
    """What a server says of a tool's effects (a Tool's `annotations`): the hints mcpx reads."""

    read_only_hint: bool | None = Field(default=None, alias="readOnlyHint")
    destructive_hint: bool | None = Field(default=None, alias="destructiveHint")

    @property
    def may_change_things(self) -> bool:
        """A tool changes things unless its server says otherwise (read-only, or not destructive)."""
        return not (self.read_only_hint is True or self.destructive_hint is False)


class InitializeParams(Loose):
    protocol_version: str = Field(alias="protocolVersion")
    capabilities: ClientCapabilities = ClientCapabilities()
    client_info: dict[str, Any] = Field(default_factory=dict, alias="clientInfo")


class ElicitParams(Loose):
    """elicitation/create params, form or url; `mode` absent means form."""

    mode: Literal["form", "url"] | None = None
    message: str
    requested_schema: dict[str, Any] | None = Field(default=None, alias="requestedSchema")
    url: str | None = None
    elicitation_id: str | None = Field(default=None, alias="elicitationId")
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")

    @property
    def effective_mode(self) -> Literal["form", "url"]:
        return self.mode or ("url" if self.url and self.requested_schema is None else "form")


def legacy_client_capabilities() -> dict[str, Any]:
    """What mcpx can deliver to an upstream: questions in both modes (to people, agents, scripts) and roots."""
    return {"elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": False}}


def modern_meta(capabilities: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {
        META_VERSION: LATEST_MODERN,
        META_CAPABILITIES: capabilities if capabilities is not None else legacy_client_capabilities(),
        META_CLIENT_INFO: CLIENT_INFO,
    }
    if extra:
        meta.update(extra)
    return meta
