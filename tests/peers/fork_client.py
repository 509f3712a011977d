"""The stand-in for a forked process: `python -S -E fork_client.py SOCKET PEER.py ARGS…`, the command a daemon runs
for a forked test peer, or `python -S -E fork_client.py SOCKET -m MODULE ARGS…`, which a test runs for `python -m
MODULE ARGS…` (tests/harness.py's mcpx_command: `mcpx …` forked from the CLI's fork server).

It imports nothing it need not (run with -S -E: no site, no PYTHON* variables; its environment is handed on as it
came; `_socket` and `_signal`, not `socket` and `signal`, which import enum, nor json: its request is a Python
literal, which the server reads with ast.literal_eval): it starts in the interpreter's own ~15 ms of CPU.
It hands its argv, environment, cwd, stdin, stdout and stderr to tests/peers/fork_server.py, which forks the process
with them, then stands in for it: the signals it is sent (to it or to its process group) go on to the process, and
it exits as the process did (its code, or the signal that ended it). A peer has a session of its own; a module a
process group of its own (a session if the stand-in leads one), so a signal to the stand-in's group reaches it once,
forwarded. A module is forked only if its environment fits the server's (fork_server.py's `unfit`: the locale, PYTHON*
variables, what the server's imports read): otherwise the stand-in becomes `python -m MODULE ARGS…` itself (exec),
the direct run, same pid. A fork server that is absent, dead or gone mid-run is said on stderr and exit 70 at once,
never a wait without end.
"""

import os
import struct
import sys
import time
from _signal import SIG_DFL, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2
from _signal import signal as handle
from _socket import AF_UNIX, SCM_RIGHTS, SOCK_STREAM, SOL_SOCKET, socket

HEADER = struct.Struct("!Q")
STATUS = struct.Struct("!i")
FORWARDED = (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2)
READY_WITHIN = 120.0  # the fork server's own start (its imports) on a loaded machine; it is started before any daemon


def fail(path: str, why: str) -> None:
    log = ""
    try:
        with open(path + ".log", "rb") as f:
            log = f.read()[-2000:].decode(errors="replace")
    except OSError:
        pass
    sys.stderr.write(f"fork_client: the fork server at {path} {why}" + (f"; its log ends:\n{log}" if log else "")
                     + "\n")
    sys.stderr.flush()
    os._exit(70)


def server_alive(path: str) -> bool:
    """Its process is there and not a zombie (one that died unreaped still answers kill 0)."""
    try:
        with open(path + ".pid") as f:
            pid = int(f.read())
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, ValueError, IndexError):
        return False


def connect(path: str) -> socket:
    deadline = time.monotonic() + READY_WITHIN
    while True:
        sock = socket(AF_UNIX, SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            if not server_alive(path):
                fail(path, f"is not running ({exc.strerror})")
            if time.monotonic() > deadline:
                fail(path, f"was not ready within {READY_WITHIN:.0f} s")
            time.sleep(0.05)


def receive(sock: socket, size: int, path: str, what: str) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            fail(path, f"went away before {what}")
        data += chunk
    return data


def main() -> None:
    path, *argv = sys.argv[1:]
    # signals are taken from the start, and sent on once there is a process to send them to
    pending: list[int] = []
    sock: socket | None = None

    def forward(sig: int, _frame: object) -> None:
        if sock is None:
            pending.append(sig)
            return
        try:  # noqa: SIM105 - contextlib is an import this process need not pay
            sock.send(bytes([sig]))
        except OSError:
            pass

    for sig in FORWARDED:
        handle(sig, forward)
    module = argv[1] if argv[:1] == ["-m"] and len(argv) > 1 else None
    request: dict[str, object] = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
    if module is not None:
        leader = os.getsid(0) == os.getpid()
        request.update(module=module, argv=argv[2:], fit=True, session=leader, group=not leader)
    conn = connect(path)
    data = repr(request).encode()
    conn.sendmsg([HEADER.pack(len(data))], [(SOL_SOCKET, SCM_RIGHTS, struct.pack("3i", 0, 1, 2))])
    conn.sendall(data)
    if module is not None:
        (pid,) = STATUS.unpack(receive(conn, STATUS.size, path, "it forked"))
        if pid == 0:  # not forked (its environment does not fit the server's): run it directly, as this process
            conn.close()
            for sig in FORWARDED:
                handle(sig, SIG_DFL)
            if pending:  # what a direct run would have had, as it started
                os.kill(os.getpid(), pending[0])
            os.execv(sys.executable, [sys.executable, "-m", module, *argv[2:]])
    # the process holds them now; ours would keep a reader from seeing its stdout end
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    sock = conn
    for sig in pending:
        forward(sig, None)
    (wait_status,) = STATUS.unpack(receive(conn, STATUS.size, path, "the process ended"))
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        handle(sig, SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(wait_status) if os.WIFEXITED(wait_status) else 1)


if __name__ == "__main__":
    main()
