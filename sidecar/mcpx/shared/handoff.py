"""The hand-off between `mcpx serve` and its daemon: the words on the connection, and the descriptors passed on it.

`mcpx serve` connects to the daemon's hand-off socket (serve.sock, beside daemon.sock), sends one
Hello line with its stdin and stdout attached (SCM_RIGHTS), and waits. The daemon serves MCP on
those two descriptors itself, so the host talks to the daemon with no process between them, and
says over the connection, as HandoffMessage lines, only what serve needs to carry on should the daemon go:

    accepted                  the daemon serves the descriptors from now on
    refused                   it will not (why); with `fallback`, serve pumps through the websocket instead
    initialize, initialized   the client's handshake, which serve hands to the next daemon
    waiting, answered         requests still unanswered WAITING_AFTER after they were read, and which of
                              those were answered since: what serve answers itself if the daemon dies
    unread                    (a daemon stopping) the start of a line it had read and not finished
    ended                     the client closed its input and was answered: serve exits with `ended`

The connection closing without `ended` means the daemon went away (stopped, restarted, killed).
Kept apart from the daemon so that `mcpx serve` loads no more than it needs: the daemon's end, which receives on
asyncio, is daemon/handoff_socket.py.
"""

from __future__ import annotations

import base64
import socket
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from mcpx.mcp.jsonrpc import MAX_LINE
from mcpx.shared.errors import McpxError

VERSION = 1
WAITING_AFTER = 0.25  # s: a request unanswered this long is named to serve; quicker ones cost it nothing
MAX_HELLO = 3 * MAX_LINE  # an initialize of MAX_LINE and a line's start of MAX_LINE in base64, with room
MAX_WORD = 2 * MAX_LINE


class HandoffError(McpxError):
    """A hand-off that went wrong on the wire: what was wrong, in words."""


class Hello(BaseModel):
    """What `mcpx serve` says of itself as it hands its stdin and stdout over (the stream endpoint's headers)."""

    model_config = ConfigDict(extra="forbid")

    version: int = VERSION
    server: str | None = None  # `--server`: one upstream under its own tool names
    cwd: str | None = None
    tool_prefix: str = ""  # MCPX_TOOL_PREFIX
    own_tools_only: bool = False  # MCPX_SERVE_TOOLS=mcpx
    session: str | None = None  # MCPX_SESSION_ID, else the host's own session (mcpx/shared/hostenv.py)
    unattended: bool = False  # nobody is at the host to be asked (mcpx/shared/hostenv.py)
    initialize: dict[str, Any] | None = None  # the client's own initialize request, replayed by a new daemon
    initialized: bool = False
    unread: str = ""  # base64: what the daemon before had read of a line and not finished

    @field_validator("unread")
    @classmethod
    def _base64(cls, value: str) -> str:
        base64.b64decode(value, validate=True)  # binascii.Error, a ValueError: the field named as not base64
        return value

    def unread_bytes(self) -> bytes:
        return base64.b64decode(self.unread)


class HandoffMessage(BaseModel):
    """One line from the daemon to `mcpx serve`; only the fields that say something are sent."""

    model_config = ConfigDict(extra="forbid")

    accepted: bool = False
    refused: str | None = None
    fallback: bool = False
    initialize: dict[str, Any] | None = None
    initialized: bool = False
    waiting: list[str | int] = []
    answered: list[str | int] = []
    unread: str = ""
    ended: int | None = None

    def line(self) -> bytes:
        return self.model_dump_json(exclude_defaults=True).encode() + b"\n"

    @classmethod
    def parse(cls, line: bytes) -> HandoffMessage:
        try:
            return cls.model_validate_json(line)
        except ValidationError as exc:
            raise HandoffError(f"the daemon said something mcpx serve does not understand: {exc.errors()[0]['msg']}"
                               ) from None


def encode_unread(data: bytes) -> str:
    return base64.b64encode(data).decode()


def send_hello(sock: socket.socket, hello: Hello, fds: list[int]) -> None:
    """Send the Hello with `fds` attached to its first bytes (blocking)."""
    data = hello.model_dump_json(exclude_defaults=True).encode() + b"\n"
    sent = socket.send_fds(sock, [data], fds)
    if sent < len(data):  # never an empty sendall: once the daemon has read it all it may answer and close,
        sock.sendall(data[sent:])  # and a send of nothing to a closed peer fails (EPIPE) where nothing was lost
