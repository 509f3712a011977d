"""How a call ends without a result, and an id that names no call."""

from __future__ import annotations

from typing import Any

from mcpx.shared.errors import McpxError


class CallError(McpxError):
    """A call that ended without a result; the message names the server and, where one was open, the question.
    `result`: what the call keeps as its result all the same (a server's own protocol error, passed on to a
    client that called it as if mcpx were not there)."""

    def __init__(self, message: str, result: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.result = result


class UnknownTask(McpxError):
    """No call has this id (`tsk-…`), live or stored."""
