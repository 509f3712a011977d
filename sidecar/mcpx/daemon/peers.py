"""Who is on the other end of a /v1 request: its pid, its session, which surface it answers for."""

from __future__ import annotations

import socket
import struct

from aiohttp import web

from mcpx.daemon.api import ApiError

SESSION_HEADER = "X-Mcpx-Session"
ANSWERER_HEADER = "X-Mcpx-Answerer"
CWD_HEADER = "X-Mcpx-Cwd"
PID_HEADER = "X-Mcpx-Pid"

# surfaces a /v1 caller may answer as; policy:*, expiry and upstream are mcpx's own
CLAIMABLE = ("person:cli", "person:rest", "person:opencode", "agent:mcp", "agent:cli", "agent:opencode")


def peer_pid(request: web.Request) -> int | None:
    """The caller's pid from the kernel (SO_PEERCRED) on the unix socket; on TCP, what it says of itself."""
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is not None and getattr(sock, "family", None) == socket.AF_UNIX and hasattr(socket, "SO_PEERCRED"):
        try:
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid, _uid, _gid = struct.unpack("3i", creds)
            return pid or None
        except OSError:
            pass
    claimed = request.headers.get(PID_HEADER)
    return int(claimed) if claimed and claimed.isdigit() else None


def is_unix(request: web.Request) -> bool:
    sock = request.transport.get_extra_info("socket") if request.transport else None
    return sock is not None and getattr(sock, "family", None) == socket.AF_UNIX


def session_of(request: web.Request) -> str | None:
    value = request.headers.get(SESSION_HEADER)
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > 200:
        raise ApiError(400, "bad_session", f"{SESSION_HEADER} must be 1 to 200 characters")
    return value


def answerer_of(request: web.Request) -> str:
    value = request.headers.get(ANSWERER_HEADER, "person:rest").strip()
    if value not in CLAIMABLE:
        raise ApiError(400, "bad_answerer",
                       f"{ANSWERER_HEADER} {value!r} is not one of {', '.join(CLAIMABLE)} "
                       "(policy, expiry and upstream answers are mcpx's own)")
    return value
