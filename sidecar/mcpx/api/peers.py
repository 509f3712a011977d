"""Who is on the other end of a /v1 request: its pid, its session, which surface it answers for."""

from __future__ import annotations

import functools
import socket
import struct
import weakref

from aiohttp import web

from mcpx.api.table import RouteError
from mcpx.broker.models import Answerer
from mcpx.shared.names import ANSWERER_HEADER, SESSION_HEADER
from mcpx.system import agentshell

# surfaces a /v1 caller may answer as; policy:*, expiry and upstream are mcpx's own
CLAIMABLE = ("person:cli", "person:rest", "person:opencode", "person:tui", "agent:mcp", "agent:cli", "agent:opencode")


class _Connection:
    """What is fixed for a connection's whole life, looked at once each: whether it is on the unix socket (its
    family is fixed, and reading it goes through an enum conversion each time), its peer's pid (SO_PEERCRED names
    the process that connected), and the verdict on that peer's lineage (its ancestors' environments are what they
    started with). Walking /proc up the parents is two reads a generation: done once a connection, not once an
    answer (a script that answers many questions over one keep-alive connection was spending half the daemon's
    time there)."""

    __slots__ = ("judged", "marked", "pid", "pid_read", "sock")

    def __init__(self, sock: socket.socket | None) -> None:
        self.sock = sock  # the unix socket; None on TCP
        self.pid: int | None = None
        self.pid_read = False
        self.marked: agentshell.Marked | None = None
        self.judged = False


# asked of every request (the auth check), and of a question's open and an answer more than once: by a weak
# reference to its transport, each forgotten as its transport goes (what a WeakKeyDictionary does, without its
# Python `get` around the lookup: a call each look, several a request)
_connections: dict[weakref.ref[object], _Connection] = {}


def _connection(request: web.Request) -> _Connection | None:
    transport = request.transport
    if transport is None:
        return None
    conn = _connections.get(weakref.ref(transport))  # a ref compares and hashes as its transport
    if conn is None:
        sock = transport.get_extra_info("socket")
        unix = sock is not None and getattr(sock, "family", None) == socket.AF_UNIX
        conn = _connections[weakref.ref(transport, _forget)] = _Connection(sock if unix else None)
    return conn


def _forget(ref: weakref.ref[object]) -> None:
    _connections.pop(ref, None)


@functools.cache
def _proc_available() -> bool:
    """/proc is there for the daemon's whole life or not at all: looked at once, not at every answer."""
    return agentshell.proc_available()


def peer_pid(request: web.Request) -> int | None:
    """The caller's pid from the kernel (SO_PEERCRED) on the unix socket; None on TCP, whatever it claims.

    A header naming a pid (X-Mcpx-Pid) is never believed: anyone can write any number there.
    """
    return _pid_of(_connection(request))


def _pid_of(conn: _Connection | None) -> int | None:
    if conn is None or conn.sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    if not conn.pid_read:
        try:
            creds = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            return None  # not remembered: asked again
        pid, _uid, _gid = struct.unpack("3i", creds)
        conn.pid, conn.pid_read = pid or None, True  # 0: a peer in another pid namespace
    return conn.pid


def _lineage_of(conn: _Connection | None, pid: int) -> agentshell.Marked | None:
    if conn is not None and conn.judged:
        return conn.marked
    marked = agentshell.marked_lineage(pid)  # ProcessUnseen is not remembered: it is asked again
    if conn is not None:
        conn.marked, conn.judged = marked, True
    return marked


def is_unix(request: web.Request) -> bool:
    conn = _connection(request)
    return conn is not None and conn.sock is not None


def refuse_agent_as_person(request: web.Request, by: str) -> None:
    """403 for a person's answer sent from an agent's shell or anything it started (docs/choices.md).

    Only the unix socket knows its peer; on TCP the bearer token is all there is. Reading /proc is a
    few small reads of kernel memory, done inline.
    """
    if Answerer.kind_of(by) != "person":
        return
    conn = _connection(request)  # looked up once for the three questions below
    if conn is None or conn.sock is None or not _proc_available():
        return
    pid = _pid_of(conn)
    try:
        if pid is None:
            raise agentshell.ProcessUnseen("the kernel named no process")
        marked = _lineage_of(conn, pid)
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
    if value in CLAIMABLE:
        return value
    head, colon, name = value.partition(":")
    if head == "script" and colon:  # a script names itself (mcpx.Client): any name of the right form
        try:
            return str(Answerer.script(name))
        except ValueError as exc:
            raise RouteError(400, "bad_answerer", f"{ANSWERER_HEADER} {value!r}: {exc}") from None
    raise RouteError(400, "bad_answerer",
                     f"{ANSWERER_HEADER} {value!r} is not one of {', '.join(CLAIMABLE)} or script:<name> "
                     "(policy, expiry and upstream answers are mcpx's own)")
