"""The tests' fork server: what a kind of process imports, imported once; a process started per connection by a fork.

Nearly all of a stdio peer's start is the SDK's import (~1.5-2 s of CPU: mcp_types builds its pydantic models for
three protocol versions), and most of a daemon's is mcpx's own (aiohttp, the pydantic models): the suite starts
each some 300 times. This process pays the import once per test worker and kind (tests/forks.py starts it):

- peers: tests/peers/fork_client.py is the command a daemon runs instead of `python PEER.py`: it connects here,
  hands over its argv, environment, cwd and its stdin/stdout/stderr (SCM_RIGHTS), and this process forks a child
  that takes those descriptors and runs the peer's script as __main__ (runpy), the real SDK server it always was;
- daemons: tests/forks.py's ForkedProcess asks for `python -m mcpx daemon …` with the daemon's environment, cwd and
  descriptors, and is handed the child's pid and a pidfd of it: the test holds the real daemon, not a stand-in.

One thread, no event loop before a fork (forking a threaded process is unsafe; checked at start), and the imports'
objects frozen out of the cycle collector's sight (gc.freeze: a collection in a child does not touch, and so copy,
the pages they sit on). Per child:
  client -> here: 8-byte length + the three descriptors, then the JSON request (argv, env, cwd; a `module` to run
                  as `python -m` does instead of the script argv[0]; `name`: the child's process name; `session`:
                  a session of its own; `pidfd`: send the child's pid and a pidfd); afterwards one byte per signal
                  the client received (a stand-in forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2);
  here -> client: if asked, the child's 4-byte pid with a pidfd of it, as soon as it is forked; the child's 4-byte
                  wait status once it is gone, then the connection is closed.
The client's connection closing (the client killed: the daemon SIGKILLs a server's process group; a test worker
gone) SIGKILLs the child, so no child outlives whoever started it. Our stdin closing (the test worker gone) ends
this process and every child; a child is also SIGKILLed by the kernel if this process dies (PR_SET_PDEATHSIG).

Run: `python fork_server.py SOCKET KIND` (tests/forks.py does): it binds SOCKET.tmp and renames it to SOCKET once
the imports are done, so a client that finds SOCKET finds a ready server.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib
import importlib.util
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import threading
import traceback
from typing import Any

# what each kind imports that costs; a package that is not installed here is left out (the child that needs it fails
# its own import, as it would started directly). Kept apart: a peer never holds mcpx's modules, nor a daemon the SDK's.
PRELOAD = {
    # the peers in this directory
    "peers": ("anyio", "pydantic", "mcp_types", "mcp.server.mcpserver", "mcp.server.mcpserver.resolve",
              "mcp.server.stdio", "mcp.server.runner", "mcp.server.elicitation", "mcp.server.request_state",
              "fastmcp", "fastmcp.server.auth", "fastmcp.server.auth.providers.jwt", "fastmcp.server.dependencies",
              "fastmcp.utilities.tasks", "fastmcp_tasks"),
    # `mcpx daemon`: its command, then what it imports to serve (cli/daemon_cmd.py's own order), the config's
    # watcher, PostgreSQL's store; what only a passkey, a login or an openapi entry needs stays where it is used
    "daemons": ("mcpx.cli.main", "mcpx.cli.daemon_cmd", "mcpx.daemon.launch", "uvloop", "mcpx.daemon.server",
                "mcpx.daemon.app", "watchfiles", "anyio", "encodings.idna", "mcpx.broker.postgres"),
}
HEADER = struct.Struct("!Q")
STATUS = struct.Struct("!i")
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15


def preload(kind: str) -> None:
    """Import what `kind` imports, on this one thread, and freeze what that made: a child's collections skip it."""
    before = set(os.listdir("/proc/self/fd"))
    handlers = {sig: signal.getsignal(sig) for sig in signal.valid_signals()}
    gc.disable()  # the imports make objects that live as long as we do, and almost no garbage
    for name in PRELOAD[kind]:
        top = name.partition(".")[0]
        if importlib.util.find_spec(top) is not None:
            importlib.import_module(name)
    if threading.active_count() != 1:
        raise SystemExit(f"fork_server: an import started a thread ({threading.enumerate()}); forking is unsafe")
    # what a child must make for itself: its event loop (uvloop's, the SDK's anyio's), its logging
    if (events := sys.modules.get("asyncio.events")) is not None and events._event_loop_policy is not None:
        raise SystemExit("fork_server: an import set an event loop policy; a loop made before a fork is shared")
    if (logging := sys.modules.get("logging")) is not None and logging.getLogger().handlers:
        raise SystemExit("fork_server: an import set up logging; each child sets up its own")
    if changed := [sig for sig, handler in handlers.items() if signal.getsignal(sig) != handler]:
        raise SystemExit(f"fork_server: an import set the handlers of {changed}; a child would start with them")
    after = set(os.listdir("/proc/self/fd"))  # each listing holds one of its own, open as it is read
    if len(after) > len(before):  # a descriptor an import keeps would be every child's
        raise SystemExit(f"fork_server: an import left descriptors open ({sorted(after - before)}); every child "
                         "would share them")
    gc.freeze()
    gc.enable()  # as a fresh interpreter has it: a daemon turns it off itself as it starts


class Peer:
    """One client's connection and the child it started."""

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self.conn = conn
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.hung_up = False  # the client's end closed: its connection is out of the selector


def receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The client's request and its three descriptors (blocking, bounded: a client sends them at once)."""
    conn.settimeout(30)
    head, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
    if len(head) != HEADER.size or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise OSError(f"a bad request: {len(head)} header bytes, {len(fds)} descriptors")
    (size,) = HEADER.unpack(head)
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise OSError("the client went away mid-request")
        data += chunk
    conn.settimeout(None)
    return json.loads(data), fds


def run_child(request: dict[str, Any], fds: list[int], parent: int) -> None:
    """In the forked child: become the process the client would have started, and never return."""
    code = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the server died before the signal was set
            os._exit(1)
        # its name (ps -o comm, top, process accounting) is its script's, or the one asked for; its command line
        # stays this server's
        name = request.get("name") or os.path.basename(request["argv"][0])
        libc.prctl(_PR_SET_NAME, name.encode()[:15])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        if request.get("session", True):
            os.setsid()  # a session of its own, as the daemon gives the client: a signal to ours does not reach it
        os.chdir(request["cwd"])
        # before anything of the child reads it: what the imports read of it was read here, from our own
        os.environ.clear()
        os.environ.update(request["env"])
        try:
            if module := request.get("module"):
                sys.argv = [module, *request["argv"]]  # run_module puts the module's file first, as `-m` does
                sys.path[0] = os.getcwd()  # as `python -m` sets it
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                script = request["argv"][0]
                sys.argv = list(request["argv"])
                sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python script` sets it
                runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exit_code(exc.code)
        except KeyboardInterrupt:
            flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:
            traceback.print_exc()
            code = 1
        # what the interpreter does as it exits, in its order: wait for the threads that are not daemons (a
        # daemon's store thread, asyncio's executor), then the atexit functions (logging's flush among them)
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    finally:
        flush()
        os._exit(code)


def exit_code(code: object) -> int:
    """What the interpreter makes of SystemExit's code."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def serve(path: str, kind: str) -> None:
    preload(kind)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    temporary = path + ".tmp"
    listener.bind(temporary)
    listener.listen(64)
    os.rename(temporary, path)  # ready: a client that finds the path finds the imports done
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("accept", None))
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, ("parent", None))
    # each event names its peer, not a descriptor: one select() may report a connection this loop then closes, and
    # its number may be a new connection's by the time the stale event is looked at
    live: set[Peer] = set()  # started, and not yet reaped
    me = os.getpid()
    try:
        while True:
            for key, _ in selector.select():
                role, peer = key.data
                if role == "parent":
                    if not os.read(sys.stdin.fileno(), 4096):
                        return  # the test worker is gone or done: the finally ends every child
                elif role == "accept":
                    started = start_peer(listener, selector, live, me)
                    if started is not None:
                        live.add(started)
                elif role == "client" and peer in live and not peer.hung_up:
                    try:
                        said = peer.conn.recv(64)
                    except BlockingIOError:
                        continue
                    except OSError:
                        said = b""
                    if not said:  # the client is gone: so is its peer
                        peer.hung_up = True
                        selector.unregister(peer.conn)
                        signal_child(peer, signal.SIGKILL)
                    for sig in said:
                        signal_child(peer, sig)
                elif role == "child" and peer in live:
                    live.discard(peer)
                    selector.unregister(peer.pidfd)
                    _, status = os.waitpid(peer.pid, 0)
                    os.close(peer.pidfd)
                    if not peer.hung_up:
                        with contextlib.suppress(OSError):
                            peer.conn.setblocking(True)
                            peer.conn.sendall(STATUS.pack(status))
                        selector.unregister(peer.conn)
                    peer.conn.close()
    finally:
        for peer in live:
            signal_child(peer, signal.SIGKILL)
        for peer in live:
            os.waitpid(peer.pid, 0)
        with contextlib.suppress(OSError):
            os.unlink(path)


def start_peer(listener: socket.socket, selector: selectors.BaseSelector, live: set[Peer], me: int) -> Peer | None:
    """Accept a client, take its request and fork its peer; None if the request was bad (said on our stderr)."""
    conn, _ = listener.accept()
    try:
        request, fds = receive(conn)
    except (OSError, ValueError) as exc:
        print(f"fork_server: {exc}", file=sys.stderr)
        conn.close()
        return None
    pid = os.fork()
    if pid == 0:  # the child: nothing of the server's may stay open in it (a client would never see its end)
        listener.close()
        selector.close()
        for other in live:
            other.conn.close()
            os.close(other.pidfd)
        conn.close()
        run_child(request, fds, me)
    for fd in fds:
        os.close(fd)
    peer = Peer(conn, pid)
    if request.get("pidfd"):  # the client holds the child itself: its pid, and a pidfd no reused pid can fool
        with contextlib.suppress(OSError):  # the client is gone already: its connection's end, seen next, ends it
            socket.send_fds(conn, [STATUS.pack(pid)], [peer.pidfd])
    conn.setblocking(False)
    selector.register(conn, selectors.EVENT_READ, ("client", peer))
    selector.register(peer.pidfd, selectors.EVENT_READ, ("child", peer))
    return peer


def signal_child(peer: Peer, sig: int) -> None:
    with contextlib.suppress(OSError, ValueError):  # it already ended (its status is on its way)
        signal.pidfd_send_signal(peer.pidfd, sig)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "peers")
