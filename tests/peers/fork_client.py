"""The command a daemon runs for a forked test peer: `python -S -E fork_client.py SOCKET PEER.py ARGS…`.

It imports nothing heavy (run with -S -E: no site, no PYTHON* variables; its environment is handed on as it came).
It hands its argv, environment, cwd, stdin, stdout and stderr to tests/peers/fork_server.py, which forks the peer
with them, then stands in for the peer: the signals a daemon sends it (to its process group) go on to the peer, and
it exits as the peer did (its code, or the signal that ended it). A fork server that is absent, dead or gone
mid-run is said on stderr and exit 70 at once, never a wait without end.
"""

import contextlib
import json
import os
import signal
import socket
import struct
import sys
import time

HEADER = struct.Struct("!Q")
STATUS = struct.Struct("!i")
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
READY_WITHIN = 120.0  # the fork server's own start (its imports) on a loaded machine; it is started before any daemon


def fail(path: str, why: str) -> None:
    log = ""
    try:
        with open(path + ".log", "rb") as f:
            log = f.read()[-2000:].decode(errors="replace")
    except OSError:
        pass
    sys.stderr.write(f"fork_client: the test peers' fork server at {path} {why}"
                     + (f"; its log ends:\n{log}" if log else "") + "\n")
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


def connect(path: str) -> socket.socket:
    deadline = time.monotonic() + READY_WITHIN
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
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


def main() -> None:
    path, *argv = sys.argv[1:]
    sock = connect(path)
    request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    socket.send_fds(sock, [HEADER.pack(len(request))], [0, 1, 2])
    sock.sendall(request)
    # the peer holds them now; ours would keep a reader from seeing the peer's stdout end
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)

    def forward(sig: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            sock.send(bytes([sig]))

    for sig in FORWARDED:
        signal.signal(sig, forward)
    status = b""
    while len(status) < STATUS.size:
        chunk = sock.recv(STATUS.size - len(status))
        if not chunk:
            fail(path, "went away before the peer ended")
        status += chunk
    (wait_status,) = STATUS.unpack(status)
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(wait_status) if os.WIFEXITED(wait_status) else 1)


if __name__ == "__main__":
    main()
