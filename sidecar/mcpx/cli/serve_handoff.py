"""`mcpx serve`'s end of the hand-off (mcpx/shared/handoff.py): its stdin and stdout go to the daemon, and it waits.

While the daemon serves the host, serve only listens on the hand-off connection. When that
closes without `ended` the daemon went away: serve answers the requests it was told were still
waiting with an error saying to send them again, starts (or waits for) a daemon, and hands the
same stdin and stdout over again with the client's handshake, so the host never sees the gap.
"""

from __future__ import annotations

import os
import select
import socket
import stat
import sys
import time

from mcpx.daemon.launch import LaunchError, ensure_daemon
from mcpx.mcp import jsonrpc
from mcpx.shared.errors import McpxError
from mcpx.shared.handoff import MAX_WORD, HandoffError, HandoffMessage, Hello, send_hello
from mcpx.shared.hostenv import Host, host_of
from mcpx.system.paths import StatePaths

STDIN, STDOUT = 0, 1
RETRY_S = 0.2  # between attempts to reach a daemon again
RETRY_FOR = 20.0  # s: how long a daemon that answers but takes no hand-off is waited for, before the pump takes over
GONE = ("the mcpx daemon went away during this request (restarting?); mcpx serve has handed the connection to the "
        "next one — send it again")


class HandoffRefused(McpxError):
    """The daemon will not serve this client at all (an unknown --server): said on stderr, serve exits 2."""


def possible() -> bool:
    """Can stdin and stdout be handed over? Pipes and sockets can (what hosts give); a terminal or a file is left
    to the pump, which reads them itself."""
    if not hasattr(socket, "send_fds"):
        return False
    try:
        return all(stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) for mode in (os.fstat(fd).st_mode
                                                                             for fd in (STDIN, STDOUT)))
    except OSError:
        return False


def hello_from_environment(server: str | None) -> Hello:
    """What serve says of itself: the same as the websocket's headers (serve_pump.Bridge._headers)."""
    host = host_of(os.environ)
    return Hello(server=server, cwd=os.getcwd(), tool_prefix=os.environ.get("MCPX_TOOL_PREFIX", ""),
                 own_tools_only=os.environ.get("MCPX_SERVE_TOOLS") == "mcpx", session=serve_session(host),
                 unattended=host is not None and host.unattended)


def serve_session(host: Host | None) -> str | None:
    """MCPX_SESSION_ID, else the session of the host that started serve (Claude Code's): the daemon's fallback
    otherwise."""
    return os.environ.get("MCPX_SESSION_ID") or (host.session if host is not None else None)


class Handoff:
    def __init__(self, paths: StatePaths, hello: Hello) -> None:
        self.paths = paths
        self.hello = hello  # kept up to date with the client's handshake, for the next daemon
        self.waiting: set[jsonrpc.Id] = set()
        self.accepted = False  # a daemon took the descriptors at least once

    def run(self) -> int | None:
        """The exit status once the client's input ended; None when no daemon takes the hand-off (the websocket pump
        carries on then, with the handshake in self.hello). Refused for a client no daemon will serve."""
        unreachable_since: float | None = None
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(self.paths.handoff))
            except OSError:
                sock.close()
                if not self.accepted:
                    return None  # a daemon older than the hand-off (or one between stopping and starting)
                unreachable_since = unreachable_since or time.monotonic()
                if time.monotonic() - unreachable_since > RETRY_FOR:
                    return None
                time.sleep(RETRY_S)
                self._await_daemon()
                continue
            unreachable_since = None
            with sock:
                try:
                    send_hello(sock, self.hello, [STDIN, STDOUT])
                    ended = self._listen(sock)
                except OSError:
                    ended = None  # the daemon died as we handed over: as if it had just after
                except HandoffError as exc:  # a daemon we do not understand: closing lets it let go of the client
                    print(f"mcpx serve: {exc}; pumping instead", file=sys.stderr)
                    self.accepted = False
                    ended = None
            if ended is not None:
                return ended
            self._answer_waiting()
            if not self.accepted:
                return None
            self._await_daemon()

    def _listen(self, sock: socket.socket) -> int | None:
        """The daemon's words until it says `ended` (its status) or goes away (None)."""
        with sock.makefile("rb") as words:
            while line := words.readline(MAX_WORD):
                if not line.endswith(b"\n"):
                    raise HandoffError(f"the daemon said a word longer than {MAX_WORD} bytes")
                word = HandoffMessage.parse(line)
                if word.refused is not None:
                    if not word.fallback:
                        raise HandoffRefused(word.refused)
                    print(f"mcpx serve: the daemon took no hand-off ({word.refused}); pumping instead",
                          file=sys.stderr)
                    self.accepted = False  # as if it had not
                    return None
                if word.accepted:
                    self.accepted = True
                    self.hello.unread = ""  # the daemon took it
                if word.initialize is not None:
                    self.hello.initialize = word.initialize
                if word.initialized:
                    self.hello.initialized = True
                self.waiting.update(word.waiting)
                self.waiting.difference_update(word.answered)
                if word.unread:
                    self.hello.unread = word.unread
                if word.ended is not None:
                    return word.ended
        return None

    def _answer_waiting(self) -> None:
        for rid in sorted(self.waiting, key=str):
            _write_all(STDOUT, jsonrpc.encode(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, GONE)))
        self.waiting.clear()

    def _await_daemon(self) -> None:
        try:
            ensure_daemon(self.paths)
        except LaunchError as err:
            print(f"mcpx serve: the daemon is gone and could not be started again: {err}", file=sys.stderr)
            if _input_closed():
                raise SystemExit(0) from None  # nothing more will come to serve, and nobody to serve it
            time.sleep(2)


def _write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd`, which a daemon left non-blocking."""
    while data:
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:
            select.select([], [fd], [], 5.0)


def _input_closed() -> bool:
    """Has the host closed our stdin, with nothing left in it?"""
    poller = select.poll()
    poller.register(STDIN, select.POLLIN)
    events = dict(poller.poll(0)).get(STDIN, 0)
    return bool(events & select.POLLHUP) and not events & select.POLLIN
