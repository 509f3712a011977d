"""This test worker's fork servers (tests/peers/fork_server.py), one per kind: the stdio peers' (the mcp SDK imported),
the daemons' (mcpx's daemon imported) and the CLI's (mcpx's commands imported). Each is started on first use and
stopped at the session's end (tests/conftest.py) or, at the latest, when this process is gone (it reads our pipe to
EOF).

A peer started through its server costs a fork instead of the SDK's import, a daemon or a CLI command one instead of
mcpx's (docs/choices.md, "The tests' stdio peers are forked …", "The tests' daemons are forked too" and "The tests'
CLI commands are forked too" say why and when a test keeps the direct command). A peer is started by its stand-in
(peers/fork_client.py, the command its daemon is given), and so is a CLI command (`module_command`: the command a
test runs). A daemon is the harness's to hold (tests/harness.py's Daemon): `ForkServer.fork` asks for it here and
hands back a ForkedProcess, the real daemon, held by its pid and a pidfd, whose exit status the server sends once
it has reaped it. A module's process (a daemon, a command) is forked only if its environment fits the server's; if
not (`Unfit`), it is started directly.

The standard library's alone: tests/harness.py imports it, and a benchmark or a runner uses the harness as it is."""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

PEERS = Path(__file__).resolve().parent / "peers"
SERVER = PEERS / "fork_server.py"
CLIENT = PEERS / "fork_client.py"
KINDS = ("peers", "daemons", "cli")
LABELS = {"peers": "peers' fork server", "daemons": "daemons' fork server", "cli": "CLI's fork server"}
# fork_server.py's framing: a request's length (its three descriptors ride with it), a pid (0: not forked, and why)
# or a wait status
HEADER = struct.Struct("!Q")
STATUS = struct.Struct("!i")
READY_WITHIN = 120.0  # a fork server's own start (its imports) on a loaded machine, as fork_client.py allows it


class ForkServer:
    def __init__(self, kind: str, env: Mapping[str, str] | None = None) -> None:
        assert kind in KINDS, kind
        self.kind = kind
        self.label = LABELS[kind]
        # a short path of our own: a unix socket's path has ~107 bytes
        self.dir = Path(tempfile.mkdtemp(prefix=f"mcpx-{kind}-"))
        self.socket = self.dir / "fork.sock"
        self.log = open(f"{self.socket}.log", "wb")  # noqa: SIM115 - closed in stop
        # stdin is our pipe: its end (this process gone, or stop) ends the server and its children
        self.proc = subprocess.Popen([sys.executable, str(SERVER), str(self.socket), kind], stdin=subprocess.PIPE,
                                     stdout=self.log, stderr=self.log, cwd=PEERS,
                                     env=dict(env) if env is not None else None)
        Path(f"{self.socket}.pid").write_text(str(self.proc.pid))

    def command(self, script: Path, args: tuple[str, ...]) -> tuple[str, list[str]]:
        """The stand-in's command for a peer (`python -S -E fork_client.py SOCKET PEER.py ARGS…`)."""
        return sys.executable, ["-S", "-E", str(CLIENT), str(self.socket), str(script), *args]

    def module_command(self, module: str, args: Sequence[str]) -> list[str]:
        """The stand-in's command for `python -m MODULE ARGS…` (`python -S -E fork_client.py SOCKET -m MODULE
        ARGS…`): the module forked from this server, or, its environment not fitting the server's, run directly by
        the stand-in itself (exec)."""
        return [sys.executable, "-S", "-E", str(CLIENT), str(self.socket), "-m", module, *args]

    def fork(self, module: str, argv: Sequence[str], env: Mapping[str, str], cwd: Path, stdio: Sequence[int],
             name: str) -> ForkedProcess:
        """`python -m MODULE ARGV…` as a fork of this server, with `env`, `cwd` and the descriptors `stdio` as its
        stdin, stdout and stderr, named `name` (ps -o comm, process accounting). In the server's process group, as
        a child started directly would be in ours. `Unfit` if `env` does not fit the server's (the process must be
        started directly); a server that is not running is an error at once."""
        conn = self._connect()
        try:
            request = repr({"module": module, "argv": list(argv), "env": dict(env), "cwd": str(cwd), "name": name,
                            "session": False, "pidfd": True, "fit": True}).encode()
            socket.send_fds(conn, [HEADER.pack(len(request))], list(stdio))
            conn.sendall(request)
            conn.settimeout(READY_WITHIN)  # it forks as it reads the request: a moment, on a loaded machine more
            data, fds, _, _ = socket.recv_fds(conn, STATUS.size, 1)
            if len(data) == STATUS.size and not fds and STATUS.unpack(data) == (0,):
                raise Unfit(_rest(conn).decode(errors="replace"))
            conn.settimeout(None)
        except BaseException:
            conn.close()
            raise
        if len(data) != STATUS.size or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            conn.close()
            raise RuntimeError(f"the {self.label} did not fork `{module} {' '.join(argv)}`{self._tail()}")
        (pid,) = STATUS.unpack(data)
        return ForkedProcess(conn, pid, fds[0], [sys.executable, "-m", module, *argv])

    def _connect(self) -> socket.socket:
        """Connected to the server, once its imports are done; a RuntimeError at once if it is not running."""
        deadline = time.monotonic() + READY_WITHIN
        while True:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(str(self.socket))
                return conn
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                conn.close()
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the {self.label} is not running (it exited "
                                       f"{self.proc.returncode}; {exc.strerror}){self._tail()}") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the {self.label} was not ready within {READY_WITHIN:.0f} s"
                                       f"{self._tail()}") from None
                time.sleep(0.05)  # its socket appears once its imports are done: nothing tells us sooner

    def _tail(self) -> str:
        with contextlib.suppress(OSError):
            if log := Path(f"{self.socket}.log").read_bytes()[-2000:].decode(errors="replace"):
                return f"; its log ends:\n{log}"
        return ""

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Unfit(Exception):
    """The fork server will not fork this process: its environment differs from the server's in what a fork keeps
    as the server had it (the message says which variable, and why)."""


def _rest(conn: socket.socket) -> bytes:
    """What the server sends until it closes the connection."""
    data = b""
    while chunk := conn.recv(4096):
        data += chunk
    return data


class ForkedProcess:
    """A process a fork server forked for this one, with Popen's ways (pid, poll, wait, send_signal, terminate,
    kill, returncode) on the real process. It is the server's child, not ours: it is signalled through a pidfd (a
    pid the kernel has given to another process since is never signalled), and its exit status is the one the
    server sends once it has reaped it. Closing our end of the connection (this process gone) SIGKILLs it."""

    stdin = stdout = stderr = None  # its descriptors were handed over: none of them is a pipe of ours

    def __init__(self, conn: socket.socket, pid: int, pidfd: int, args: list[str]) -> None:
        self.conn = conn
        self.pid = pid
        self.pidfd = pidfd
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self.conn], [], [], 0)[0]:
            self._ended()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self.conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._ended()
        assert self.returncode is not None
        return self.returncode

    def _ended(self) -> None:
        """Its status has come (or the server went away): read it, as Popen's returncode (-N: signal N)."""
        try:
            data = self.conn.recv(STATUS.size, socket.MSG_WAITALL)
        finally:
            self.conn.close()
            os.close(self.pidfd)
        if len(data) != STATUS.size:
            self.returncode = -signal.SIGKILL  # it died with the server (PR_SET_PDEATHSIG): never left unreaped
            raise RuntimeError(f"the fork server of process {self.pid} ({' '.join(self.args)}) went away before it "
                               "ended")
        self.returncode = os.waitstatus_to_exitcode(STATUS.unpack(data)[0])

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it has ended; its status is on its way
                signal.pidfd_send_signal(self.pidfd, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_servers: dict[str, ForkServer] = {}
_owner: int | None = None
_starting = threading.Lock()  # a test's threads may start the first daemon at once: one server each kind all the same


def fork_server(kind: str = "peers", env: Mapping[str, str] | None = None) -> ForkServer:
    """This process's fork server of `kind`, started now (with `env`, else ours) if it is not yet (a fork of this
    process starts its own)."""
    global _owner
    with _starting:
        if _owner != os.getpid():
            _servers.clear()  # a parent's: not ours to use or stop
            _owner = os.getpid()
            atexit.register(stop_fork_servers)  # a run that never reaches the session's end (--collect-only, say)
        if kind not in _servers:
            _servers[kind] = ForkServer(kind, env)
        return _servers[kind]


def stop_fork_servers() -> None:
    if _owner == os.getpid():
        while _servers:
            _servers.popitem()[1].stop()
