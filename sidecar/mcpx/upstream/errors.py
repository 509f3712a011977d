"""What an upstream's trouble raises, for whoever called it to read."""

from __future__ import annotations

from mcpx.shared.errors import McpxError


class UpstreamError(McpxError):
    """Something about an upstream the caller should read: which server, what happened."""
