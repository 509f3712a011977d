"""The tests' fork server: what a kind of process imports, imported once; a process started per connection by a fork.

Nearly all of a stdio peer's start is the SDK's import (~1.5-2 s of CPU: mcp_types builds its pydantic models for
three protocol versions), and most of a daemon's is mcpx's own (aiohttp, the pydantic models): the suite starts
each some 300 times. This process pays the import once per test worker and kind (tests/forks.py starts it):

- peers: tests/peers/fork_client.py is the command a daemon runs instead of `python PEER.py`: it connects here,
  hands over its argv, environment, cwd and its stdin/stdout/stderr (SCM_RIGHTS), and this process forks a child
  that takes those descriptors and runs the peer's script as __main__ (runpy), the real SDK server it always was;
- daemons: tests/forks.py's ForkedProcess asks for `python -m mcpx daemon …` with the daemon's environment, cwd and
  descriptors, and is handed the child's pid and a pidfd of it: the test holds the real daemon, not a stand-in;
- cli: `fork_client.py SOCKET -m mcpx ARGS…` (tests/harness.py's mcpx_command) is the command a test runs instead of
  `python -m mcpx ARGS…`: the stand-in hands over as a peer's does, and `mcpx ARGS…` runs in the child.

A fork keeps what the interpreter and the imports read of the environment as this process had it, and its
/proc/PID/environ is ours as we started. So a `fit` request (a module's: the daemons', the CLI's) is forked only if
its environment has the same values as ours for what that concerns (`unfit`): the variables read as the interpreter
starts (PYTHON*, the locale's, TZ, OpenSSL's paths), those the imports read (recorded as they ran), and those read
from /proc by whoever judges the process (an agent's marks, mcpx/system/agentshell.py), and only if the client
descends from our parent (the test worker) with no agent's mark on the way (`unfit_lineage`: the child's parent is
us, and a reader of its lineage would not see what is between); otherwise the client is told why, and runs it
directly itself.

One thread, no event loop before a fork (forking a threaded process is unsafe; checked at start), and the imports'
objects frozen out of the cycle collector's sight (gc.freeze: a collection in a child does not touch, and so copy,
the pages they sit on). Per child:
  client -> here: 8-byte length + the three descriptors, then the request, a dict as a Python literal (repr; read
                  with ast.literal_eval: a stand-in need not import json): argv, env, cwd; a `module` to run as
                  `python -m` does instead of the script argv[0]; `name`: the child's process name; `session`: a
                  session of its own, or `group`: a process group of its own (a stand-in's child: a signal to the
                  stand-in's group reaches it once, forwarded, not twice); `pidfd`: send the child's pid and a
                  pidfd; `fit`: fork it only if it fits (above). Afterwards one byte per signal the client received
                  (a stand-in forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2);
  here -> client: for a `pidfd` or `fit` request, the child's 4-byte pid as soon as it is forked (with a pidfd of it
                  if asked), or, a `fit` request refused, a pid of 0 and why, then the connection is closed; the
                  child's 4-byte wait status once it is gone, then the connection is closed.
The client's connection closing (the client killed: the daemon SIGKILLs a server's process group; a test worker
gone) SIGKILLs the child, so no child outlives whoever started it. Our stdin closing (the test worker gone) ends
this process and every child; a child is also SIGKILLed by the kernel if this process dies (PR_SET_PDEATHSIG).

Run: `python fork_server.py SOCKET KIND` (tests/forks.py does): it binds SOCKET.tmp and renames it to SOCKET once
the imports are done, so a client that finds SOCKET finds a ready server.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import ctypes
import gc
import importlib
import importlib.util
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
    # `mcpx COMMAND`: the entry point and every command's module (COMMANDS below), then what the commands import as
    # they run (a question's form and its rendering, policy, the config's checks, the hosts' installers and hook);
    # not the TUI's textual (`mcpx tui` runs on a terminal, never forked) nor the daemon's modules
    "cli": ("mcpx.cli.main", "pydantic", "aiohttp", "mcpx.broker.policy", "mcpx.broker.schema", "mcpx.cli.render",
            "mcpx.presentation.dialogs", "mcpx.presentation.rendering", "mcpx.services.check",
            "mcpx.cli.hosts.claude_hook", "mcpx.cli.hosts.claude_install", "mcpx.cli.hosts.codex_install",
            "mcpx.cli.hosts.gemini_install", "mcpx.cli.hosts.opencode_install", "mcpx.cli.hosts.doctor_hosts"),
}
# a kind's module whose COMMANDS table names more modules to import: mcpx's commands, one module each
COMMANDS = {"cli": "mcpx.cli.main"}
# what a fork keeps as this process had it, read below Python: as the interpreter starts (its PYTHON* variables,
# the locale, which also sets the std streams' encoding), the time zone (the time module's, at its import) and
# OpenSSL's default paths (aiohttp makes its SSL contexts at import)
STARTUP_PREFIXES = ("PYTHON", "LC_")
STARTUP = ("LANG", "LANGUAGE", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR", "OPENSSL_CONF")
BELOW = "read below Python: the interpreter's start, the locale, the time zone, OpenSSL's paths"
# reads at import that keep nothing of what they read: sysconfig's `_HAS_USER_BASE` is true whatever HOME is
# (expanduser("~/.local") is a path either way)
KEEP_NOTHING = {("sysconfig", "HOME")}
# a module that names the variables read from /proc/PID/environ (the environment a process started with, which a
# fork's is not) by whoever judges a process: an agent's marks, which the daemon looks for in a client's lineage
MARKS = ("mcpx.system.agentshell", "MARKS")
HEADER = struct.Struct("!Q")
STATUS = struct.Struct("!i")
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15


# what a `fit` request's environment must hold as ours does: each variable, and why (set by preload)
SAME: dict[str, str] = {}
# each variable the imports read, and the modules that read it (preload, through _Reading)
READS: dict[str, set[str]] = {}
# an agent's marks (MARKS), looked for in a process's lineage as well: a fork's is this server's, not its client's
MARKED: list[str] = []
_SKIPPED = frozenset({"os", "posixpath", "genericpath", "collections.abc", __name__})


class _Reading(os._Environ):
    """os.environ as the imports see it: each variable they read is noted with the module that read it."""

    def _note(self, key: object) -> None:
        frame = sys._getframe(2)
        while frame is not None and frame.f_globals.get("__name__") in _SKIPPED:
            frame = frame.f_back
        reader = frame.f_globals.get("__name__", "?") if frame is not None else "?"
        READS.setdefault(str(key), set()).add(str(reader))

    def __getitem__(self, key: str) -> str:  # get() and os.getenv() come here too
        self._note(key)
        return str(super().__getitem__(key))

    def __contains__(self, key: object) -> bool:
        self._note(key)
        return bool(super().__contains__(key))

    def __iter__(self) -> Any:
        self._note("*")  # a copy of the whole environment
        return super().__iter__()


def imported(kind: str) -> None:
    """Import what `kind` imports (a package that is not installed here is left out)."""
    for name in PRELOAD[kind]:
        top = name.partition(".")[0]
        if importlib.util.find_spec(top) is not None:
            importlib.import_module(name)
    if kind in COMMANDS:
        for name, _ in getattr(sys.modules[COMMANDS[kind]], "COMMANDS", ()):
            importlib.import_module(name)


def note_same(reads: dict[str, set[str]]) -> None:
    """SAME: what a fork keeps of the environment as ours (see STARTUP, KEEP_NOTHING, MARKS)."""
    for name, readers in sorted(reads.items()):
        if any((reader, name) not in KEEP_NOTHING for reader in readers):
            SAME[name] = f"read at import by {', '.join(sorted(readers))}"
    for name in STARTUP:
        SAME.setdefault(name, BELOW)
    if (module := sys.modules.get(MARKS[0])) is not None:
        for name in getattr(module, MARKS[1]):
            SAME.setdefault(name, "an agent's mark, read from /proc/PID/environ")
            MARKED.append(name)


def unfit(env: dict[str, str]) -> str | None:
    """Why a child with `env` would not be what a direct start is (see SAME), or None."""
    startup = {name for name in (*env, *os.environ) if name.startswith(STARTUP_PREFIXES)}
    if "*" in SAME:  # an import copied the whole environment: any variable may be kept
        startup |= {*env, *os.environ}
    for name in sorted(startup | set(SAME) - {"*"}):
        if env.get(name) != os.environ.get(name):
            why = SAME.get(name, SAME.get("*", BELOW))
            return f"{name} is not the fork server's ({why})"
    return None


def unfit_lineage(client: int) -> str | None:
    """Why a child of ours would not have the lineage a direct start by `client` has, or None. A child's parent is
    this server, ours the test worker: where the client descends from the worker with no agent's mark on the way
    (MARKED, in the environment each process started with), a reader of the child's lineage sees what it would
    see of a direct start's, but for this server, unmarked."""
    worker, current = os.getppid(), client
    for _ in range(128):
        if current == worker:
            return None
        try:
            with open(f"/proc/{current}/environ", "rb") as f:
                started = dict(item.partition(b"=")[::2] for item in f.read().split(b"\0") if item)
            with open(f"/proc/{current}/stat", "rb") as f:
                parent = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if marked := [name for name in MARKED if started.get(name.encode())]:
            return f"its lineage carries an agent's mark ({marked[0]} in pid {current}'s environment)"
        current = parent
    return f"it does not descend from the fork server's parent (pid {worker})"


def preload(kind: str) -> None:
    """Import what `kind` imports, on this one thread, and freeze what that made: a child's collections skip it."""
    before = set(os.listdir("/proc/self/fd"))
    handlers = {sig: signal.getsignal(sig) for sig in signal.valid_signals()}
    gc.disable()  # the imports make objects that live as long as we do, and almost no garbage
    os.environ.__class__ = _Reading
    try:
        imported(kind)
    finally:
        os.environ.__class__ = os._Environ
    note_same(READS)
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
    request = ast.literal_eval(data.decode())
    if not isinstance(request, dict):
        raise ValueError(f"a bad request: {type(request).__name__}, not a dict")
    return request, fds


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
        libc.prctl(_PR_SET_NAME, name_of(request).encode()[:15])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        if request.get("session", True):
            os.setsid()  # a session of its own, as the daemon gives the client: a signal to ours does not reach it
        elif request.get("group"):
            os.setpgid(0, 0)
        os.chdir(request["cwd"])
        # before anything of the child reads it: what the imports read of it was read here, from our own (a `fit`
        # request's holds the same values for what they kept: unfit)
        os.environ.clear()
        os.environ.update(request["env"])
        try:
            if module := request.get("module"):
                sys.argv = [module, *request["argv"]]  # run_module puts the module's file first, as `-m` does
                sys.orig_argv = [sys.executable, "-m", module, *request["argv"]]
                sys.path[0] = os.getcwd()  # as `python -m` sets it
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                script = request["argv"][0]
                sys.argv = list(request["argv"])
                sys.orig_argv = [sys.executable, *request["argv"]]
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


def name_of(request: dict[str, Any]) -> str:
    """The child's process name: the one asked for, else tools/suite_cpu.py's for what it runs (`mx-COMMAND` for
    `python -m mcpx COMMAND …`, `m-MODULE` for another module), else its script's file name."""
    if request.get("name"):
        return str(request["name"])
    if module := request.get("module"):
        if module == "mcpx":
            return "mx-" + next((word for word in request["argv"] if not word.startswith("-")), "help")
        return "m-" + str(module).rsplit(".", 1)[-1]
    return os.path.basename(request["argv"][0])


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
    if request.get("fit") and (why := unfit(request["env"]) or unfit_lineage(client_pid(conn))) is not None:
        # not ours to fork faithfully: the client runs it directly itself
        print(f"fork_server: not forked, {name_of(request)}: {why}", file=sys.stderr)
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            conn.sendall(STATUS.pack(0) + why.encode())
        conn.close()
        return None
    flush()  # nothing of ours left in the std streams' buffers, which the child writes its own output through
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
    # the client is gone already: its connection's end, seen next, ends the child
    if request.get("pidfd"):  # the client holds the child itself: its pid, and a pidfd no reused pid can fool
        with contextlib.suppress(OSError):
            socket.send_fds(conn, [STATUS.pack(pid)], [peer.pidfd])
    elif request.get("fit"):  # forked, not refused
        with contextlib.suppress(OSError):
            conn.sendall(STATUS.pack(pid))
    conn.setblocking(False)
    selector.register(conn, selectors.EVENT_READ, ("client", peer))
    selector.register(peer.pidfd, selectors.EVENT_READ, ("child", peer))
    return peer


def client_pid(conn: socket.socket) -> int:
    """The pid of the process at the other end (SO_PEERCRED)."""
    pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return int(pid)


def signal_child(peer: Peer, sig: int) -> None:
    with contextlib.suppress(OSError, ValueError):  # it already ended (its status is on its way)
        signal.pidfd_send_signal(peer.pidfd, sig)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "peers")
