"""Who is on the other end of a /v1 request: its pid, its session, which surface it answers for."""

from __future__ import annotations

import functools
import socket
import struct
import weakref

from aiohttp import web

from mcpx import agentshell
from mcpx.daemon.api import RouteError
from mcpx.keys import ANSWERER_HEADER, SESSION_HEADER

# surfaces a /v1 caller may answer as; policy:*, expiry and upstream are mcpx's own
CLAIMABLE = ("person:cli", "person:rest", "person:opencode", "person:tui", "agent:mcp", "agent:cli", "agent:opencode")


# whether a connection is on the unix socket, asked of every request (the auth check) and twice more of an answer:
# a socket's family is fixed, and reading it goes through an enum conversion each time
_on_unix: weakref.WeakKeyDictionary[object, bool] = weakref.WeakKeyDictionary()


def _unix_socket(request: web.Request) -> socket.socket | None:
    transport = request.transport
    if transport is None:
        return None
    sock = transport.get_extra_info("socket")
    unix = _on_unix.get(transport)
    if unix is None:
        unix = _on_unix[transport] = sock is not None and getattr(sock, "family", None) == socket.AF_UNIX
    return sock if unix else None


@functools.cache
def _proc_available() -> bool:
    """/proc is there for the daemon's whole life or not at all: looked at once, not at every answer."""
    return agentshell.proc_available()


def peer_pid(request: web.Request) -> int | None:
    """The caller's pid from the kernel (SO_PEERCRED) on the unix socket; None on TCP, whatever it claims.

    A header naming a pid (X-Mcpx-Pid) is never believed: anyone can write any number there.
    """
    sock = _unix_socket(request)
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid, _uid, _gid = struct.unpack("3i", creds)
    return pid or None  # 0: a peer in another pid namespace


# The verdict on a connection's peer, for as long as the connection lives. SO_PEERCRED names the process that
# connected, fixed for the connection; its ancestors' environments are what they were started with. Walking
# /proc up the parents is two reads a generation: done once a connection, not once an answer (a script that
# answers many questions over one keep-alive connection was spending half the daemon's time there).
_verdicts: weakref.WeakKeyDictionary[object, agentshell.Marked | None] = weakref.WeakKeyDictionary()


def _lineage_of(request: web.Request, pid: int) -> agentshell.Marked | None:
    transport = request.transport
    if transport is not None and transport in _verdicts:
        return _verdicts[transport]
    marked = agentshell.marked_lineage(pid)  # ProcessUnseen is not remembered: it is asked again
    if transport is not None:
        _verdicts[transport] = marked
    return marked


def is_unix(request: web.Request) -> bool:
    return _unix_socket(request) is not None


def refuse_agent_as_person(request: web.Request, by: str) -> None:
    """403 for a person's answer sent from an agent's shell or anything it started (docs/choices.md).

    Only the unix socket knows its peer; on TCP the bearer token is all there is. Reading /proc is a
    few small reads of kernel memory, done inline.
    """
    if not by.startswith("person:") or not is_unix(request) or not _proc_available():
        return
    pid = peer_pid(request)
    try:
        if pid is None:
            raise agentshell.ProcessUnseen("the kernel named no process")
        marked = _lineage_of(request, pid)
    except agentshell.ProcessUnseen:
        raise RouteError(403, "peer_unseen",
                       f"mcpx cannot see the process that sent this answer as {by} (pid {pid or 'unknown'}: gone, or "
                       "in another pid namespace), so it cannot tell it is not an agent's; answer from a process "
                       "mcpx can see, or over TCP with the token") from None
    if marked is not None:
        raise RouteError(403, "agent_not_person",
                       f"an answer as {by} came from an agent's shell: {marked.describe()}, which agent hosts such as "
                       f"opencode set for the commands their agent runs. Only the person answers as {by}: from their "
                       "own terminal (mcpx elicit answer …) or opencode's dialog. An agent answers as agent:* "
                       "(the mcpx CLI does so by itself when it sees the mark), and never a question that is the "
                       "person's.", pid=pid, markedPid=marked.pid, mark=marked.mark)


def session_of(request: web.Request) -> str | None:
    value = request.headers.get(SESSION_HEADER)
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > 200:
        raise RouteError(400, "bad_session", f"{SESSION_HEADER} must be 1 to 200 characters")
    return value


def answerer_of(request: web.Request) -> str:
    value = request.headers.get(ANSWERER_HEADER, "person:rest").strip()
    if value not in CLAIMABLE:
        raise RouteError(400, "bad_answerer",
                       f"{ANSWERER_HEADER} {value!r} is not one of {', '.join(CLAIMABLE)} "
                       "(policy, expiry and upstream answers are mcpx's own)")
    return value
