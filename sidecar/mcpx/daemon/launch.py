"""Starting a daemon in the background, detached (for `mcpx serve`, `mcpx daemon start` and `restart`), and
stopping one (`mcpx daemon stop`).

A daemon started in the background must outlive whatever started it. A new session is not enough: opencode,
when `opencode run` ends or `opencode serve` disposes an instance, walks its MCP server's descendants
(`pgrep -P`, recursively) and sends each SIGTERM, and the daemon `mcpx serve` started was one of them. So the
daemon detaches fully, the classic way (`detach`, run by `mcpx daemon --detach` before anything else): it
forks, the child starts a session of its own and forks again, and the grandchild — the daemon — is left with
no parent but init (or the nearest subreaper), no terminal, stdin on /dev/null, stdout and stderr in
daemon.out. The launcher learns its pid, and waits until it serves.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from mcpx.daemon.origin import ORIGIN_ENV, for_launch
from mcpx.shared.errors import McpxError
from mcpx.system import processes
from mcpx.system.agentshell import unmarked
from mcpx.system.paths import StatePaths
from mcpx.system.sockets import socket_alive


class LaunchError(McpxError):
    pass


def out_file(paths: StatePaths) -> Path:
    """daemon.out: what a background daemon prints (its start-up errors above all); its log is daemon.log."""
    return paths.root / "daemon.out"


def detach(paths: StatePaths) -> None:
    """Become a daemon nobody is the parent of. Returns in the daemon only; the calling process prints the
    daemon's pid on stdout and exits 0 (1 if the daemon could not be made).

    Called before any thread or event loop exists (a fork copies only the calling thread)."""
    paths.ensure()
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    first = os.fork()
    if first > 0:  # the launcher's child: say the daemon's pid, and go
        os.close(write_end)
        with os.fdopen(read_end, "rb") as r:
            pid = r.readline().strip()  # empty if the daemon died before saying it
        os.waitpid(first, 0)
        os.write(1, pid + b"\n")
        os._exit(0 if pid else 1)
    os.close(read_end)
    os.setsid()  # no controlling terminal, and no process group of the launcher's
    if os.fork() > 0:
        os._exit(0)  # the daemon is orphaned, and adopted by init: it is no longer the launcher's descendant
    # not a session leader: it can never acquire a terminal
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(out_file(paths), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(write_end, f"{os.getpid()}\n".encode())
    os.close(write_end)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)


def start_detached(paths: StatePaths, by: Literal["serve", "command"], what: str, args: Sequence[str] = (),
                   timeout: float = 15.0) -> int:
    """Start a detached daemon (`mcpx daemon --detach ARGS`), told it was started by `what`; its pid."""
    paths.ensure()
    # the daemon is nobody's agent: a server's child that runs `mcpx elicit answer` descends from it, and would be
    # refused as an agent's if the daemon carried the marks of the shell that started it (/proc shows what it was
    # started with, so they are dropped here, not later)
    env = {**unmarked(os.environ), ORIGIN_ENV: for_launch(by, what)}
    with open(out_file(paths), "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mcpx", "daemon", "--detach", *args], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=out)
    try:
        said, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise LaunchError(f"starting the daemon took longer than {timeout:.0f}s: {tail(paths)}") from None
    pid = said.strip()
    if proc.returncode != 0 or not pid.isdigit():
        raise LaunchError(f"the daemon could not be started (exit {proc.returncode}): {tail(paths)}")
    return int(pid)


def wait_serving(paths: StatePaths, pid: int, timeout: float = 15.0) -> bool:
    """Wait until a daemon serves on the socket: True if it is `pid`, False if another one does (it started
    first, and `pid` gave way to it). LaunchError if `pid` ends first or nothing serves in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if socket_alive(paths.socket, timeout=0.2) and running_pid(paths) == pid:
            return True  # daemon.json is written once the socket listens: a stale one names an older pid
        if not processes.alive(pid):
            if socket_alive(paths.socket, timeout=0.2):
                return False
            raise LaunchError(f"the daemon (pid {pid}) exited while starting: {tail(paths)}")
        time.sleep(0.02)
    raise LaunchError(f"the daemon (pid {pid}) did not open {paths.socket} within {timeout:.0f}s: {tail(paths)}")


def ensure_daemon(paths: StatePaths, timeout: float = 15.0, what: str = "mcpx serve") -> bool:
    """Start a detached daemon unless one answers already. True when this call started it."""
    if socket_alive(paths.socket):
        return False
    pid = start_detached(paths, "serve", what, timeout=timeout)
    return wait_serving(paths, pid, timeout)


def running_pid(paths: StatePaths) -> int | None:
    """The pid daemon.json names (the daemon writes it once it serves), if it names one."""
    try:
        return int(json.loads(paths.daemon_json.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def tail(paths: StatePaths, lines: int = 8) -> str:
    try:
        text = out_file(paths).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no output)"
    return " | ".join(text[-lines:]) or "(no output)"


def stop(pid: int, timeout: float) -> float:
    """SIGTERM a daemon and wait until it has drained and exited: the seconds it took. LaunchError when it is
    still there after `timeout` (or may not be signalled)."""
    started = time.monotonic()
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return 0.0
    except PermissionError:
        raise LaunchError(f"pid {pid} is another user's process; it is not this state directory's daemon") from None
    deadline = started + timeout
    while processes.alive(pid):
        if time.monotonic() > deadline:
            raise LaunchError(f"the daemon (pid {pid}) did not stop within {timeout:.0f}s (it may be stuck; its "
                              f"log says why). To end it at once: kill -9 {pid}")
        time.sleep(0.02)
    return time.monotonic() - started
